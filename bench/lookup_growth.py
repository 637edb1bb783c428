"""A cached get past the calibrated sizes: does the lookup's CPU grow with the keys as the model says?

    .venv/bin/python -m bench.lookup_growth [--records 2000000] [--ops 300000] [--repeats 3]

The calibration measures a cached get at 100k and 400k keys and extrapolates log2(keys) past
them (docs/model.md, CPU term (3)); this runs each class preset with a block cache holding all
the data (no block reads) at a larger size, 1 and 2 threads, and prints the model's throughput
beside the engine's (median of ``--repeats`` runs; "free": over the time the driver threads had a
CPU, i.e. without other programs' load; the driver threads' CPU per operation beside it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess

from cost_models import cpu_count
from cost_models.cpu import LOCAL_DEVICE
from cost_models.engine_model import engine_throughput
from measure.calibrate.plan import CACHED_CACHE_FACTOR, calibration_designs
from measure.calibrate.samples import free_throughput
from measure.engine import TEMPLATE, build, config_text, run_scratch, workload_json
from measure.grid import KEY, VALUE, mix_spec
from measure.validate import accuracy
from specs.vocab import Operation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--ops", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    build(TEMPLATE)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(
        f"machine: {platform.processor() or platform.machine()}, {cpu_count()} CPUs; commit {commit}; "
        f"load average at start {os.getloadavg()[0]:.1f}; {a.records:,} records, {a.ops:,} gets, "
        f"median of {a.repeats}\n"
    )
    print("| class | threads | predicted ops/s | measured ops/s | measured free ops/s | accuracy (free) | CPU us/get |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    spec = mix_spec({Operation.GET: 1.0}, name="get")
    for cls, secs in calibration_designs(a.records).items():
        for th in (1, 2):
            cache = int(CACHED_CACHE_FACTOR * a.records * (KEY + VALUE))
            text = config_text(secs, th, block_cache_bytes=cache)
            wl = {**workload_json(spec, a.records, a.ops, th), "warm_cache": True}
            meas, free, cpu, preds = [], [], [], []
            for r in range(a.repeats):
                rep = run_scratch(text, {**wl, "seed": 42 + r}, f"lookup-{cls}-{th}-{r}")
                meas.append(float(rep["run"]["throughput_ops"]))
                free.append(free_throughput(rep))
                cpu.append(sum(t["cpu_seconds"] for t in rep["cpu"]["threads"]) / a.ops)
                secs_run = {**secs, "layout": {**secs["layout"], "block_cache_bytes": cache}}
                start, end = rep["load"]["shape"], rep.get("stats")
                preds.append(engine_throughput(secs_run, wl, cpu_count(), LOCAL_DEVICE, start, end)[0])
            p, f = statistics.median(preds), statistics.median(free)
            print(
                f"| {cls} | {th} | {p:,.0f} | {statistics.median(meas):,.0f} | {f:,.0f} | {accuracy(p, f):.0%} | "
                f"{1e6 * statistics.median(cpu):.2f} |"
            )


if __name__ == "__main__":
    main()
