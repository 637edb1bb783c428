"""Write throughput at 1 and 2 threads, before and after write groups (issue 12 section 2).

    .venv/bin/python -m bench.write_scaling --before PATH/cosine-bench [--records 200000] [--ops 200000] [--repeats 3]
        [--wal-sync every_write ...]    (COSINE_VALIDATE_DIR=/path puts the data on a disk instead of tmpfs)

For the template's RocksDB preset (engine-template/presets/rocksdb.toml) under
every ``wal_sync`` policy, runs an insert-only and an update-only workload
(uniform keys) at 1 and 2 driver threads with two binaries, interleaved in one
session on tmpfs: ``--before`` (cosine-bench built from an earlier commit) and
the current template's. Prints the median run-phase throughput of
``--repeats`` runs and the 2-thread / 1-thread ratio of each.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tomllib
from pathlib import Path

from measure.engine import TEMPLATE, build, run, scratch_root
from render.config import to_toml
from specs.vocab import WalSync

PRESET = TEMPLATE / "presets" / "rocksdb.toml"
WORKLOADS = ("insert", "update")
THREADS = (1, 2)


def workload(kind: str, records: int, ops: int, threads: int) -> dict:
    mix = {op: 0.0 for op in ("get", "empty_get", "range", "insert", "update", "rmw")}
    mix[kind] = 1.0
    return {
        "records": records,
        "operations": ops,
        "key_bytes": 16,
        "value_bytes": 100,
        "mix": mix,
        "scan_length": 1,
        "distribution": {"get": {"kind": "uniform"}, "put": {"kind": "uniform"}},
        "threads": threads,
        "seed": 42,
    }


def config(wal_sync: WalSync) -> str:
    secs = tomllib.loads(PRESET.read_text())
    secs["durability"]["wal_sync"] = str(wal_sync)
    return to_toml(secs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="cosine-bench binary of the reference commit")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--ops", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--wal-sync", type=WalSync, action="append", help="only these policies (default: all)")
    a = ap.parse_args()
    modes: list[WalSync] = a.wal_sync or list(WalSync)
    if not a.before.is_file():
        raise SystemExit(f"--before {a.before}: no such binary")
    if a.records < 1 or a.ops < 1 or a.repeats < 1:
        raise SystemExit("--records, --ops and --repeats must be positive")
    after = build(TEMPLATE)
    binaries = {"before": a.before, "after": after}
    print(f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; data on {scratch_root()}")
    print(f"# {a.records:,} records loaded, {a.ops:,} operations, median of {a.repeats}; ops/s of the run phase")
    results: dict[tuple[str, str, str, int], list[float]] = {}
    for kind in WORKLOADS:
        for mode in modes:
            text = config(mode)
            for _ in range(a.repeats):
                for threads in THREADS:
                    wl = workload(kind, a.records, a.ops, threads)
                    for tag, exe in binaries.items():
                        db = scratch_root() / f"cosine-ws-{os.getpid()}-{tag}"
                        try:
                            res = run(TEMPLATE, text, wl, data_dir=db, exe=exe)
                        finally:
                            shutil.rmtree(db, ignore_errors=True)
                        results.setdefault((kind, str(mode), tag, threads), []).append(res["run"]["throughput_ops"])
    head = f"{'workload':<8} {'wal_sync':<13}"
    for tag in binaries:
        head += f" {tag + ' 1t':>11} {tag + ' 2t':>11} {'2t/1t':>6}"
    print(head + f" {'after/before 2t':>16}")
    for kind in WORKLOADS:
        for mode in modes:
            line = f"{kind:<8} {str(mode):<13}"
            med = {}
            for tag in binaries:
                one, two = (statistics.median(results[(kind, str(mode), tag, t)]) for t in THREADS)
                med[tag] = two
                line += f" {one:>11,.0f} {two:>11,.0f} {two / one:>6.2f}"
            print(line + f" {med['after'] / med['before']:>16.2f}")


if __name__ == "__main__":
    main()
