"""What an rmw's client CPU is made of, against the CPU table's terms (docs/journal/s31-s42.md §33.6).

    .venv/bin/python -u -m bench.rmw_cost [--repeats 2] [--samples calibration.parquet]

1. Cached rmw runs of every class preset at the calibration's sizes, at the calibration's memtable
   (a cached write run's) and at 1/8 of it (the small-memtable runs the blind writes have): each
   run's CPU with its searches' growth (measure.calibrate.fit.lookup_cpu) taken out and the walk its
   buffered reads skipped added back (buffered_walk, the table's get and buffered get). If the
   table's memtable slopes and buffer credit hold for an rmw, the two memtables differ by the
   model's m(E) difference and the walking rmw (less m(E)) is the same at both buffer shares.
2. ``--samples``: a calibration's loaded single-thread runs (get, rmw, update, YCSB A and F), each
   measured client CPU against the model's (cached CPU, memtable descents, blocks x block-read
   CPU) with the table that calibration fits: the residual per operation and per block.

Prints; not a test.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from cost_models.cpu import read_block_seconds
from cost_models.phi import load_phi
from measure.calibrate.fit import buffered_walk, cached_cpu, fit, lookup_cpu, memtable_cpu
from measure.calibrate.plan import BUFFER_GET, CACHED, CLASS_DESIGNS, DEFAULT_PLAN, LOADED, LOADED_SCAN, SMALL_MEMTABLE
from measure.calibrate.samples import Sample, load_samples, measure
from measure.calibrate.table import table_terms
from measure.grid import mix_spec
from specs.errors import InputError
from specs.vocab import DesignClass, Operation

US = 1e6


def memtables(repeats: int) -> None:
    """Part 1: cached rmws at two memtables, against the table's memtable and buffer terms."""
    spec = mix_spec({Operation.RMW: 1.0}, scan=LOADED_SCAN, name=str(Operation.RMW))
    runs = [
        (kind, cls, str(Operation.RMW), spec, n, 1, 1.0)
        for _ in range(repeats)
        for n in DEFAULT_PLAN.sizes
        for cls in CLASS_DESIGNS
        for kind in (CACHED, SMALL_MEMTABLE)
    ]
    samples = measure(DEFAULT_PLAN, None, runs)
    table = load_phi()
    mem, lookup = table_terms(table)
    walks: dict[tuple[str, str], float] = {}
    for cls, entry in table["classes"].items():
        walks[(cls, Operation.GET)] = float(entry["cpu_seconds"][Operation.GET])
        walks[(cls, BUFFER_GET)] = float(entry["buffer_get_seconds"])
    by: dict[tuple[str, int, str], list[Sample]] = {}
    for s in samples:
        by.setdefault((s.cls, s.records, s.kind), []).append(s)
    print("cached rmw, 1 thread (us per operation; medians of the repeats)")
    print(f"{'class':<7} {'keys':>8} {'memtable':>9} {'buffered':>9} {'CPU':>7} {'m(E)':>6} {'walking rmw':>12}")
    for (cls, n, _kind), ss in sorted(by.items()):
        s = ss[0]
        cpu = statistics.median(x.fg_cpu for x in ss)
        walking = cpu - lookup_cpu(s, lookup) + s.get_buffered * buffered_walk(walks, lookup, s) - memtable_cpu(s, mem)
        print(
            f"{cls:<7} {n:>8,} {s.memtable_entries:>9,.0f} {s.get_buffered:>9.3f} {cpu * US:>7.3f} "
            f"{memtable_cpu(s, mem) * US:>6.3f} {walking * US:>12.3f}"
        )


def residuals(path: Path, samples: list[Sample]) -> None:
    """Part 2: a calibration's loaded runs (``samples``, read from ``path``) against the model it fits."""
    res = fit(samples)
    cpu, rng, mem, lookup = res["cpu"], res["range"], res["memtable"], res["lookup"]
    ops = {"get", "rmw", "update", "ycsb_a", "ycsb_f"}
    print(f"\nloaded runs of {path}, 1 thread (us per operation)")
    head = f"{'class':<7} {'keys':>8} {'workload':<8} {'blocks':>7} {'buffered':>9}"
    print(f"{head} {'CPU':>7} {'model':>7} {'residual':>9}")
    for s in sorted(samples, key=lambda x: (x.workload, x.cls, x.records)):
        if s.kind != LOADED or s.threads != 1 or s.workload not in ops:
            continue
        t_read = float(read_block_seconds(load_phi(), s.block_bytes, np.array([DesignClass(s.cls).code]), s.records)[0])
        model = cached_cpu(cpu, rng, lookup, s) + memtable_cpu(s, mem) + s.fg_blocks * t_read
        print(
            f"{s.cls:<7} {s.records:>8,} {s.workload:<8} {s.fg_blocks:>7.3f} {s.get_buffered:>9.3f} "
            f"{s.fg_cpu * US:>7.3f} {model * US:>7.3f} {(s.fg_cpu - model) * US:>+9.3f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="runs per point of part 1 [2]")
    ap.add_argument("--samples", type=Path, help="a calibration.parquet for part 2")
    a = ap.parse_args()
    if a.repeats < 1:
        ap.exit(2, f"{ap.prog}: --repeats must be at least 1\n")
    samples = None
    if a.samples is not None:
        try:  # checked before the runs: a bad file stops nothing half done
            samples = load_samples(a.samples)
        except InputError as e:
            ap.exit(2, f"{ap.prog}: --samples {e}\n")
    memtables(a.repeats)
    if samples is not None:
        residuals(a.samples, samples)


if __name__ == "__main__":
    main()
