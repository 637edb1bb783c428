"""Sweep throughput (issue 15 section 2): solves per second of a 1,000-solve sweep on the
embedded local Dask cluster against the serial loop, in one session. Prints figures; not a test.

    .venv/bin/python -m bench.sweep [--budgets 100:500000:50] [--workers N] [--cluster-only]
    .venv/bin/python -m bench.sweep --malloc-trim

``--malloc-trim``: the CPU time of one task (ycsb_b, 5 budgets x 2 providers) in a fresh
process with Dask's default worker setting MALLOC_TRIM_THRESHOLD_=65536 and without it
(why the local cluster's workers go without it, solver/dask_cluster.py).

The sweep: the 10 shipped specs below x 50 budgets x 2 providers (aws, gcp) = 1,000
(spec, budget, provider) solves, one task per spec (its design tables built once, shared
by its 50 budgets). Serial = ``workers=1``: the same tasks one after another in this
process, no Dask, no cache. Cluster = the default ``cosine sweep``: a LocalCluster of one
worker process per core, timed from its start to its shutdown, first cold (an empty cache
directory, which it fills) and then warm (the same sweep again, its tables and exact
re-evaluations read from that cache). Each writes a fresh sweep file; their rows must be
identical. A separate start + stop of an idle cluster gives the fixed cost.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from solver import dask_cluster
from solver.rundir import SweepRow
from solver.sweep import parse_budgets, sweep
from specs.io import read_rows
from specs.schema import SPEC_DIR, STUDY_SPECS

#: Every shipped spec but robust_5050 (a sweep ignores its robustness radius, so it would repeat ycsb-like work).
SPECS = tuple(s for s in STUDY_SPECS if s != "robust_5050")
PROVIDERS = ["aws", "gcp"]


def _cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return platform.processor() or platform.machine()


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished (reaped) children: the cluster's workers count once closed."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of fn()."""
    w0, c0 = time.perf_counter(), _cpu_seconds()
    fn()
    return time.perf_counter() - w0, _cpu_seconds() - c0


#: One task in a fresh process; prints its CPU seconds.
ONE_TASK = """
import time, numpy as np
from solver.sweep import SpecTask, solve_spec
from specs.schema import load_spec
t = time.process_time()
solve_spec(SpecTask(load_spec("specs/ycsb_b.yaml"), "", tuple(np.geomspace(100, 500000, 5)), ("aws", "gcp")), "highs")
print(time.process_time() - t)
"""


def malloc_trim() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_TRIM_THRESHOLD_"}
    for label, extra in (("glibc default", {}), ("MALLOC_TRIM_THRESHOLD_=65536", {"MALLOC_TRIM_THRESHOLD_": "65536"})):
        out = subprocess.run([sys.executable, "-c", ONE_TASK], env={**env, **extra}, capture_output=True, text=True)
        print(f"one ycsb_b task (tables + 5 budgets x 2 providers), {label}: CPU {float(out.stdout):.1f} s")


def _vs(serial: float, wall: float) -> str:
    """How many times the serial loop's rate a pass's is (nothing without a serial loop)."""
    return "" if math.isnan(serial) else f"  = {serial / wall:.2f}x the serial loop's rate"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budgets", default="100:500000:50", help="LO:HI:N per spec")
    ap.add_argument("--workers", type=int, default=None, help="local cluster size [default: one per core]")
    ap.add_argument("--malloc-trim", action="store_true", help="only the MALLOC_TRIM_THRESHOLD_ comparison")
    ap.add_argument(
        "--cluster-only", action="store_true", help="no serial loop (~17 min at stop 62): the cluster cold, then warm"
    )
    a = ap.parse_args()
    if a.malloc_trim:
        malloc_trim()
        return
    specs = [SPEC_DIR / f"{name}.yaml" for name in SPECS]
    grid = parse_budgets(a.budgets)
    n = len(specs) * len(grid) * len(PROVIDERS)
    workers = a.workers if a.workers is not None else dask_cluster.machine_workers()
    print(f"machine: {_cpu()}, {dask_cluster.machine_workers()} cores usable; commit {_commit()}")
    print(
        f"sweep: {len(specs)} specs x {len(grid)} budgets ({a.budgets}) x {len(PROVIDERS)} providers = {n:,} solves, "
        f"{len(specs)} tasks"
    )
    load0 = os.getloadavg()[0]

    def idle_cluster() -> None:
        with dask_cluster.connect(workers=workers):
            pass

    with tempfile.TemporaryDirectory() as d:
        files = {k: Path(d) / f"{k}.parquet" for k in ("serial", "cluster", "warm")}
        # Both cold: the serial loop without caches, the cluster with an empty cache directory
        # (it fills it as it goes); then the cluster again, warm, reading what the first pass cached.
        if a.cluster_only:
            serial, serial_cpu = float("nan"), float("nan")
        else:
            serial, serial_cpu = _timed(
                lambda: sweep(specs, grid, files["serial"], workers=1, providers=PROVIDERS, cache=False)
            )
        os.environ["COSINE_CACHE_DIR"] = str(Path(d) / "cache")
        cluster, cluster_cpu = _timed(
            lambda: sweep(specs, grid, files["cluster"], workers=workers, providers=PROVIDERS)
        )
        warm, warm_cpu = _timed(lambda: sweep(specs, grid, files["warm"], workers=workers, providers=PROVIDERS))
        fixed, fixed_cpu = _timed(idle_cluster)
        passes = ("cluster", "warm") if a.cluster_only else ("serial", "cluster", "warm")
        rows = [read_rows(files[k], SweepRow, "sweep") for k in passes]
        same = all(r == rows[0] for r in rows)
    if not a.cluster_only:
        print(
            f"serial loop (workers=1, no Dask, no cache): {serial:7.1f} s  {n / serial:6.2f} solves/s  "
            f"CPU {serial_cpu:6.1f} s"
        )
    print(
        f"local cluster ({workers} worker processes), cold: {cluster:7.1f} s  {n / cluster:6.2f} solves/s  "
        f"CPU {cluster_cpu:6.1f} s (client, scheduler and workers){_vs(serial, cluster)}"
    )
    print(
        f"local cluster, warm (the tables and re-evaluations cached by the cold pass): {warm:7.1f} s  "
        f"{n / warm:6.2f} solves/s  CPU {warm_cpu:6.1f} s{_vs(serial, warm)}"
    )
    print(f"an idle local cluster's start + stop: {fixed:.1f} s, CPU {fixed_cpu:.1f} s (included above)")
    load1 = os.getloadavg()[0]
    print(
        f"rows identical ({', '.join(passes)}): {same}; 1-minute load average {load0:.1f} at the start, "
        f"{load1:.1f} at the end"
    )


if __name__ == "__main__":  # the local cluster spawns processes that import this module again
    main()
