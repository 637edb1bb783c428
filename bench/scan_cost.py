"""Client CPU of a range scan against its length, measured beside the model (docs/journal/s17-s21.md §19.4).

    flock /work/wt/measure.lock .venv/bin/python -u -m bench.scan_cost [--ops 20000]
        [--design "cosine pick"] [--design rocksdb] [--scan 10 --scan 50 ...]

The designs are the ranking's for YCSB E (measure.ranking: the presets, Cosine's pick for this
machine and its neighbours) at 50,000 records, given a block cache that holds the whole data, so
no scan reads a block from the device: what remains is CPU (seeks, the memtables' merge, the runs'
iterators, copies). Each (design, scan length) is one single-thread run of pure scans. Printed:
client CPU per scan (cosine-bench's thread CPU time), the model's seconds per scan (1 / its
throughput), and the slope between consecutive lengths (CPU per scanned entry). Not a test.
"""

from __future__ import annotations

import argparse
import copy
import os

from cost_models.cpu import LOCAL_DEVICE
from cost_models.engine_model import engine_throughput
from measure.engine import TEMPLATE, build, run_scratch, workload_json
from measure.grid import KEY, MEMORY_SHARE, VALUE, shipped_spec
from measure.ranking import design_sets
from render.config import to_toml

RECORDS = 50_000
#: A block cache that holds all of RECORDS (bytes): scans read no block from the device.
WHOLE_DATA_CACHE = 20_000_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=20_000, help="scans per run [20000]")
    ap.add_argument("--design", action="append", help="ranking design names [cosine pick, rocksdb, wiredtiger]")
    ap.add_argument("--scan", type=int, action="append", help="scan lengths [10, 50, 200, 1000]")
    a = ap.parse_args()
    scans = a.scan or [10, 50, 200, 1000]
    if a.ops < 1 or any(not 1 <= n <= RECORDS for n in scans):
        ap.exit(2, f"{ap.prog}: --ops must be at least 1 and every --scan in 1..{RECORDS:,}\n")
    sets = design_sets(RECORDS, MEMORY_SHARE * RECORDS * (KEY + VALUE), 1, LOCAL_DEVICE)["ycsb_e"]
    names = a.design or ["cosine pick", "rocksdb", "wiredtiger"]
    unknown = [n for n in names if n not in sets]
    if unknown:
        ap.exit(2, f"{ap.prog}: --design {unknown[0]!r}: not one of {', '.join(sets)}\n")
    build(TEMPLATE)
    load = os.getloadavg()[0]
    print(f"{RECORDS:,} records, {a.ops:,} scans per run, 1 thread, cache {WHOLE_DATA_CACHE:,} B; load {load:.2f}")
    print("| design | scan length | client CPU us/scan | model us/scan | CPU per entry (slope) us | blocks read/scan |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        prev: tuple[int, float] | None = None
        for scan in scans:
            secs = copy.deepcopy(sets[name])
            secs["algorithms"]["threads"] = 1
            secs["layout"]["block_cache_bytes"] = WHOLE_DATA_CACHE
            wl = workload_json(shipped_spec("ycsb_e"), RECORDS, a.ops, 1)
            wl["mix"], wl["scan_length"] = {"range": 1.0}, scan
            rep = run_scratch(to_toml(secs), wl, "scan-cost")
            x, _ = engine_throughput(secs, wl, 1, LOCAL_DEVICE, rep["load"]["shape"], rep.get("stats"))
            cpu = rep["cpu"]["foreground_seconds"] / rep["operations"] * 1e6
            slope = "" if prev is None else f"{(cpu - prev[1]) / (scan - prev[0]):.3f}"
            per = rep["per_op"]["range"]
            print(
                f"| {name} | {scan} | {cpu:.2f} | {1e6 / x:.2f} | {slope} | {per['blocks_read'] / per['count']:.2f} |",
                flush=True,
            )
            prev = (scan, cpu)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
