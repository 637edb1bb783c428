"""What a ranking design's throughput is made of, model beside engine (docs/journal/s31-s42.md §33.1).

    .venv/bin/python -u -m bench.design_split --workload ycsb_f [--design "cosine pick" ...]
        [--mix "rmw=1"] [--threads N] [--iops N] [--records 50000] [--ops 50000] [--no-engine]

The designs are the ranking's (measure.ranking.design_sets: the presets, Cosine's pick for this
machine and its neighbours, the hybrids) for ``--workload``, run as the ranking runs them
(RunPlan: its warm-up, on tmpfs or at ``--iops`` with a 250 us read latency). ``--mix``
replaces the workload's operation mix (its key distributions kept), e.g. ``rmw=1`` or
``get=0.5;rmw=0.5``: one operation of a design at a time. Printed per design, engine then model
(measure.validate.model_prediction): throughput, the client threads' CPU per operation, the
background thread's, blocks read per operation, and the share of lookups (gets, rmw reads) the
buffer answered; and for the engine the share of the run each client thread was on a CPU and the
share it waited for one another program held, and the writers' stalls behind the background
worker (what is left it waited on the engine otherwise: locks, write groups). ``--no-engine``:
the model's columns only, in seconds (a model change seen on the ranking's designs without
running them). Not a test.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from cost_models import cpu_count
from cost_models.cpu import LOCAL_DEVICE, DeviceModel
from cost_models.engine_model import engine_throughput
from measure.engine import TEMPLATE, as_ran, build, run_scratch, runqueue_share
from measure.grid import KEY, MEMORY_SHARE, VALUE, shipped_spec
from measure.ranking import WORKLOADS, RunPlan, design_sets
from measure.validate import model_prediction
from render.config import to_toml
from specs.limits import MAX_THREADS
from specs.vocab import OPERATIONS

#: The read latency of the ranking's device mode (docs/journal/s22-s30.md §26: a sub-millisecond volume).
READ_LATENCY_S = 250e-6


def parse_mix(text: str) -> dict[str, float]:
    """``op=weight;op=weight`` -> a mix of known operations; ValueError names what is wrong."""
    mix: dict[str, float] = {}
    for part in text.split(";"):
        op, _, w = part.partition("=")
        try:
            weight = float(w)
        except ValueError:
            weight = math.nan
        if op.strip() not in OPERATIONS or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"{part!r} is not op=weight (operations: {', '.join(OPERATIONS)}; weights >= 0)")
        mix[op.strip()] = weight
    if sum(mix.values()) <= 0:
        raise ValueError(f"{text!r}: the weights are all zero")
    return mix


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=WORKLOADS, default="ycsb_f")
    ap.add_argument("--design", action="append", help="a design of the ranking's set (default: every one)")
    ap.add_argument("--mix", help="another operation mix, e.g. 'rmw=1' or 'get=0.5;rmw=0.5'")
    ap.add_argument("--threads", type=int, default=None, help="client threads (default: the CPUs)")
    ap.add_argument("--iops", type=float, default=0.0, help="the device mode's IOPS (default: tmpfs)")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--ops", type=int, default=50_000)
    ap.add_argument("--no-engine", action="store_true", help="the model's columns only")
    a = ap.parse_args()
    cores = cpu_count()
    threads = a.threads if a.threads is not None else cores
    if not (1 <= threads <= MAX_THREADS and a.records >= 1000 and a.ops >= 1):
        ap.exit(2, f"{ap.prog}: --threads must be in 1..{MAX_THREADS}, --records at least 1,000, --ops at least 1\n")
    if not (math.isfinite(a.iops) and a.iops >= 0):
        ap.exit(2, f"{ap.prog}: --iops {a.iops}: a finite number >= 0 (0: tmpfs)\n")
    try:
        mix = parse_mix(a.mix) if a.mix else None
    except ValueError as e:
        ap.exit(2, f"{ap.prog}: --mix {e}\n")
    dev = LOCAL_DEVICE if a.iops <= 0 else DeviceModel(iops=a.iops, read_latency_s=READ_LATENCY_S)
    plan = RunPlan(a.records, a.ops, threads, cores, dev, True, 1.0)
    sets = design_sets(a.records, MEMORY_SHARE * a.records * (KEY + VALUE), cores, dev, plan)[a.workload]
    names = a.design or list(sets)
    unknown = [n for n in names if n not in sets]
    if unknown:
        ap.exit(2, f"{ap.prog}: --design {', '.join(unknown)}: not in the ranking's set ({', '.join(sets)})\n")
    spec = shipped_spec(a.workload)
    if mix is not None:
        spec = replace(spec, workload=replace(spec.workload, operations=mix))
    if not a.no_engine:
        build(TEMPLATE)
    where = "tmpfs" if a.iops <= 0 else f"{a.iops:g} IOPS"
    mix_name = a.mix or "the workload's"
    print(f"{a.workload}, mix {mix_name}, {threads} threads, {where}")
    head = f"{'design':<18} {'class':<7} {'':<6} {'ops/s':>11} {'client us':>10} {'bg us':>7} {'blocks':>7}"
    print(f"{head} {'buffer':>7}")
    for name in names:
        secs, wl = plan.workload(spec, sets[name])
        cls = secs["design"]["class"]
        if a.no_engine:
            x, blocks = engine_throughput(secs, wl, cores, dev)
            print(f"{name:<18} {cls:<7} {'model':<6} {x:>11,.0f} {'':>10} {'':>7} {blocks:>7.3f}")
            continue
        text = to_toml(secs)
        rep = run_scratch(text, wl, "split")
        p = model_prediction(text, as_ran(wl, rep), rep)
        meas_buf = p["measured_buffered_share"]
        x = float(rep["run"]["throughput_ops"])
        # each client thread's share of the run on a CPU, and waiting for one another program held
        busy = x * p["measured_fg_cpu_us"] / 1e6 / threads
        queued = runqueue_share(rep, threads)
        stalled = (
            float(rep.get("background", {}).get("stall_micros", 0)) / 1e6 / (float(rep["run"]["seconds"]) * threads)
        )
        print(
            f"{name:<18} {cls:<7} {'engine':<6} {x:>11,.0f} "
            f"{p['measured_fg_cpu_us']:>10.3f} {p['measured_bg_cpu_us']:>7.3f} {p['measured_blocks_per_op']:>7.3f} "
            + (f"{meas_buf:>7.1%}" if meas_buf is not None else f"{'':>7}")
            + f"   clients on a CPU {busy:.0%}, waiting for one {queued:.0%}, stalled {stalled:.0%}"
        )
        model_buf = p["buffered_share"]
        print(
            f"{'':<18} {'':<7} {'model':<6} {p['throughput_ops']:>11,.0f} {p['fg_cpu_us']:>10.3f} "
            f"{p['bg_cpu_us']:>7.3f} {p['blocks_per_op']:>7.3f} "
            + (f"{model_buf:>7.1%}" if model_buf is not None and meas_buf is not None else ""),
            flush=True,
        )


if __name__ == "__main__":
    main()
