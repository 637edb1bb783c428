"""Where a node's time goes, measured beside the model: client CPU, write stalls, background CPU.

    flock /work/wt/measure.lock .venv/bin/python -u -m bench.write_stalls [--ops 500000] [--threads 1]
        [--case hybrid:mixed_25 ...]

Each case is Fig. 4B's (the class preset with the ~1% buffer, 250,000 records, after the
steady-state warm-up, measure.calibrate), run once for ``--ops`` operations: long enough to
hold several merges into the last level. Printed per case, in microseconds per operation:
the client threads' CPU (measured: cosine-bench's thread CPU time; model: S + P), the time
writers stalled waiting for the background worker (measured: stall_micros; model: 1/X - 1/X_0
of cost_models.cpu.stalled), and the background worker's CPU (model: G); then the throughput
the model predicts without and with the stall term and what the engine ran (wall clock, and
"free": over the time the client threads held a CPU). Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from cost_models import cpu_count
from cost_models.cpu import LOCAL_DEVICE, throughput, usable_cores
from cost_models.engine_model import engine_demands
from measure.calibrate.checks import accuracy
from measure.calibrate.plan import CLASS_DESIGNS, QUICK_PLAN
from measure.calibrate.samples import free_throughput
from measure.cycle import steady_warmup
from measure.engine import TEMPLATE, as_ran, build, config_text, run_merges, run_scratch, workload_json
from measure.grid import designs, shipped_spec
from specs.limits import MAX_THREADS
from specs.schema import SPEC_DIR

CASES = ("hybrid:mixed_25", "lsm:mixed_25", "hybrid:ycsb_a", "lsm:ycsb_a", "btree:ycsb_a", "lsh:ycsb_a")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=500_000, help="measured operations per run [500000]")
    ap.add_argument("--threads", type=int, default=1, help="client threads [1]")
    ap.add_argument("--case", action="append", help="class:workload (repeatable) [the six of CASES]")
    a = ap.parse_args()
    cases = [tuple(c.split(":", 1)) for c in a.case or CASES]
    bad = [
        ":".join(c)
        for c in cases
        if len(c) != 2 or c[0] not in CLASS_DESIGNS or not (SPEC_DIR / f"{c[1]}.yaml").is_file()
    ]
    if bad:
        ap.exit(
            2,
            f"{ap.prog}: --case {bad[0]}: expected CLASS:WORKLOAD, CLASS one of {', '.join(CLASS_DESIGNS)}, "
            f"WORKLOAD a spec in specs/\n",
        )
    if a.ops < 1 or not 1 <= a.threads <= MAX_THREADS:
        ap.exit(2, f"{ap.prog}: --ops must be at least 1 and --threads in 1..{MAX_THREADS}\n")
    build(TEMPLATE)
    n = QUICK_PLAN.fig4b_records
    grid = designs(n, quick=True, optima=False)
    cores = cpu_count()
    print(f"{n:,} records, {a.ops:,} operations, {a.threads} thread(s), {cores} cores; load {os.getloadavg()[0]:.2f}")
    print(
        "| class | workload | client CPU meas / model | stall meas / model | background meas / model "
        "| predicted without stalls | predicted | measured | measured free | accuracy (free) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for cls, w in cases:
        secs = grid[CLASS_DESIGNS[cls]]
        wl = workload_json(shipped_spec(w), n, a.ops, a.threads)
        wl.update(steady_warmup(secs, wl))
        text = config_text(secs, a.threads)
        rep = run_scratch(text, {**wl, "seed": 42}, f"stalls-{cls}-{w}")
        wl = as_ran(wl, rep)
        shape, end = rep["load"]["shape"], rep.get("stats")
        d, _ = engine_demands(secs, wl, LOCAL_DEVICE, shape, end, merges=run_merges(rep))
        eta = usable_cores(a.threads, cores)
        dev = (LOCAL_DEVICE.iops, a.threads, eta, LOCAL_DEVICE.bytes_per_s)
        x = float(throughput(d, *dev)[0])  # what engine_throughput predicts for the run
        x0 = float(throughput(dataclasses.replace(d, stall_rate=None), *dev)[0])
        ops = float(rep["operations"])
        us = 1e6 / ops
        meas, free = float(rep["run"]["throughput_ops"]), free_throughput(rep)
        print(
            f"| {cls} | {w} | {rep['cpu']['foreground_seconds'] * us:.2f} / {(d.serial[0] + d.parallel[0]) * 1e6:.2f} "
            f"| {rep['background']['stall_micros'] / ops:.2f} / {max(0.0, 1 / x - 1 / x0) * 1e6:.2f} "
            f"| {rep['cpu']['background_seconds'] * us:.2f} / {d.background[0] * 1e6:.2f} "
            f"| {x0:,.0f} | {x:,.0f} | {meas:,.0f} | {free:,.0f} | {accuracy(x, free):.1%} |",
            flush=True,
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
