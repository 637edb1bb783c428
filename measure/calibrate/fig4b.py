"""Paper Fig. 4B: the class presets on mixed workloads, predicted against measured."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

from cost_models.cpu import (
    LOCAL_DEVICE,
    DeviceModel,
)
from cost_models.engine_model import (
    engine_throughput,
)
from cost_models.phi import PhiTable
from measure.calibrate.checks import accuracy
from measure.calibrate.plan import CLASS_DESIGNS, Plan, thread_counts
from measure.calibrate.samples import free_throughput
from measure.cores import on_two_cores
from measure.cycle import covering_ops, steady_warmup
from measure.engine import (
    DEVICE_IO_KINDS,
    as_ran,
    config_text,
    device_ios,
    run_merges,
    run_scratch,
    runqueue_share,
    workload_json,
)
from measure.grid import designs, shipped_spec
from render.config import device_section
from specs.schema import Spec

#: Mixed workloads of Fig. 4B: the paper's 25% mix and three YCSB mixes.
FIG4B_WORKLOADS = ("mixed_25", "ycsb_a", "ycsb_b", "ycsb_f")


def fig4b_ops(
    plan: Plan,
    secs: dict[str, Any],
    spec: Spec,
    threads: int,
    cores: int,
    cpu_scale: float = 1.0,
    phi: PhiTable | None = None,
) -> int:
    """Operations of one Fig. 4B run on the local device (:func:`covering_ops` of the plan's)."""
    wl = workload_json(spec, plan.fig4b_records, plan.fig4b_ops, threads)
    x, _ = engine_throughput(secs, wl, cores, cpu_scale=cpu_scale, phi=phi)
    return covering_ops(plan.fig4b_ops, secs, wl, None, x)


def fig4b(
    plan: Plan,
    cores: int,
    progress: Callable[[int, int, str], None] | None = None,
    device: DeviceModel | None = None,
    warmup: bool = False,
    cpu_scale: float = 1.0,
    phi: PhiTable | None = None,
) -> list[dict[str, Any]]:
    """Paper Fig. 4B on the grid's class presets (the paper's ~1% buffer, not the calibration's),
    at a size the calibration did not use: predicted vs measured throughput, median of
    ``plan.repeats`` runs, per (class, mixed workload, threads). ``warmup``: run
    :func:`steady_warmup` operations unmeasured (and unthrottled) first. ``cpu_scale``: the
    model's CPU seconds scaled to this host (:func:`host_speed`); each row also holds the
    table's own prediction (``predicted_table_ops``). ``phi``: the CPU model's table (None: the
    shipped one)."""
    grid = designs(plan.fig4b_records, quick=True, optima=False)
    n = plan.fig4b_records
    rows = []
    total = len(CLASS_DESIGNS) * len(FIG4B_WORKLOADS) * len(thread_counts())
    for cls, dname in CLASS_DESIGNS.items():
        secs = grid[dname]
        if device is not None:
            secs = {**secs, "device": device_section(device)}
        for w in FIG4B_WORKLOADS:
            spec = shipped_spec(w)
            for th in thread_counts():
                text = config_text(secs, th)
                ops = plan.fig4b_ops if device is not None else fig4b_ops(plan, secs, spec, th, cores, cpu_scale, phi)
                wl = workload_json(spec, n, ops, th)
                if warmup:
                    wl.update(steady_warmup(secs, wl))
                meas, preds, tabled, rq, free, blocks, ios, warm = [], [], [], [], [], [], [], []
                dropped, shared = 0, 0
                for r in range(plan.repeats):
                    one = partial(run_scratch, text, {**wl, "seed": 42 + r}, f"fig4b-{cls}-{w}-{th}-{r}")
                    # a run the host gave one core for its threads is run again (measure.cores)
                    rep, lost, on_one = on_two_cores(one, th)
                    dropped, shared = dropped + lost, shared + int(on_one)
                    ran = as_ran(wl, rep)
                    warm.append(rep.get("warmup") or {})
                    meas.append(float(rep["run"]["throughput_ops"]))
                    free.append(free_throughput(rep))
                    rq.append(runqueue_share(rep, th))
                    dev = device or LOCAL_DEVICE
                    state = (rep["load"]["shape"], rep.get("stats"))
                    deep = run_merges(rep)
                    x, b = engine_throughput(secs, ran, cores, dev, *state, cpu_scale=cpu_scale, merges=deep, phi=phi)
                    preds.append(x)
                    tabled.append(
                        x
                        if cpu_scale == 1.0
                        else engine_throughput(secs, ran, cores, dev, *state, merges=deep, phi=phi)[0]
                    )
                    blocks.append(b)
                    ios.append(device_ios(rep))
                m, p = statistics.median(meas), statistics.median(preds)
                rows.append(
                    {
                        "class": cls,
                        "design": dname,
                        "workload": w,
                        "threads": th,
                        "records": n,
                        "predicted_ops": p,
                        "predicted_table_ops": statistics.median(tabled),
                        "accuracy_table": accuracy(statistics.median(tabled), m),
                        "cpu_scale": cpu_scale,
                        "measured_ops": m,
                        "measured_runs": meas,
                        "accuracy": accuracy(p, m),
                        "runqueue_share": statistics.median(rq),
                        # over the time the driver threads had a CPU (= measured on a quiet machine)
                        "measured_free_ops": statistics.median(free),
                        "accuracy_free": accuracy(p, statistics.median(free)),
                        # the model's blocks per operation, and the volume's I/Os per operation
                        # (median of the runs; 0 on the local device)
                        "predicted_blocks": statistics.median(blocks),
                        **{k: statistics.median(r[k] for r in ios) for k in DEVICE_IO_KINDS},
                        # the warm-up the runs did, and how many saw a merge into the last level
                        "warmup_operations": statistics.median(int(x.get("operations", 0)) for x in warm),
                        "warmup_aligned_runs": sum(x.get("phase") is not None for x in warm),
                        # runs run again because the host gave the threads one core, and kept so
                        "runs_dropped_shared_core": dropped,
                        "runs_on_shared_core": shared,
                    }
                )
                if progress:
                    progress(len(rows), total, f"Fig. 4B {cls} {w} {th} threads")
    return rows
