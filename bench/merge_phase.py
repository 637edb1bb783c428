"""What a short run measures depends on where in its merge cycle it starts (docs/journal/s22-s30.md §22.6).

    flock -x /work/wt/measure.lock .venv/bin/python -m bench.merge_phase [--workload ycsb_a]
        [--designs "cosine pick,pick T /2"] [--warmups 0,30000,210000,600000] [--iops 3000] [--ops 5000]

One run per (design of the ranking's set, warm-up length) on an emulated volume: the measured
throughput and blocks per operation beside the model's cycle average and its prediction given the
state the run started in. Prints figures; not a test.
"""

from __future__ import annotations

import argparse

from bench.credibility import volume
from cost_models import cpu_count
from cost_models.engine_model import engine_throughput
from measure.cycle import steady_warmup
from measure.engine import run_merges, run_scratch, workload_json
from measure.grid import KEY, VALUE, shipped_spec
from measure.ranking import MEMORY_SHARE, blocks_per_op, design_sets
from render.config import device_section, to_toml

RECORDS = 50_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="ycsb_a")
    ap.add_argument("--designs", default="cosine pick,pick T /2", help="names in the ranking's design set")
    ap.add_argument("--warmups", default="0,30000,210000,600000", help="warm-up operations, comma-separated")
    ap.add_argument("--iops", type=float, default=3000.0)
    ap.add_argument("--ops", type=int, default=5000)
    a = ap.parse_args()
    dev = volume(a.iops)
    th = cpu_count()
    sets = design_sets(RECORDS, MEMORY_SHARE * RECORDS * (KEY + VALUE), th, dev)
    if a.workload not in sets:
        ap.error(f"--workload: {a.workload!r} is not one of {', '.join(sets)}")
    spec = shipped_spec(a.workload)
    names = [n.strip() for n in a.designs.split(",")]
    unknown = [n for n in names if n not in sets[a.workload]]
    if unknown:
        ap.error(f"--designs: {', '.join(unknown)} not in {', '.join(sets[a.workload])}")
    try:
        warmups = [int(w) for w in a.warmups.split(",")]
    except ValueError:
        ap.error(f"--warmups: {a.warmups!r} is not a comma-separated list of integers")
    if any(w < 0 for w in warmups) or a.ops < 1 or not a.iops > 0:
        ap.error("--warmups must be >= 0, --ops >= 1 and --iops > 0")
    print(
        "| design | warm-up ops | its steady warm-up | measured ops/s | blocks/op "
        "| model ops/s | model blocks/op "
        "| given the start state ops/s | blocks/op |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        secs = sets[a.workload][name]
        secs = {**secs, "algorithms": {**secs["algorithms"], "threads": th}, "device": device_section(dev)}
        for warm in warmups:
            wl = workload_json(spec, RECORDS, a.ops, th)
            steady = steady_warmup(secs, wl)
            aligned = f"{steady['warmup_operations']:,}" + (" + aligned" if steady["warmup_phase_aligned"] else "")
            wl["warmup_operations"] = warm
            rep = run_scratch(to_toml(secs), wl, "merge-phase")
            x, b = engine_throughput(secs, wl, th, dev)
            xs, bs = engine_throughput(
                secs, wl, th, dev, rep["load"]["shape"], rep.get("stats"), merges=run_merges(rep)
            )
            print(
                f"| {name} | {warm:,} | {aligned} | "
                f"{rep['run']['throughput_ops']:,.0f} | {blocks_per_op(rep):.3f} | {x:,.0f} | {b:.3f} | "
                f"{xs:,.0f} | {bs:.3f} |"
            )


if __name__ == "__main__":
    main()
