"""`cosine validate`: the cost model against the engine's measured block I/O.

The paper's protocol (Sec. 7.1): run the baselines, the optimum for each YCSB
workload and 30+ hybrid designs made by varying one primitive at a time over
many workloads, and compare the model's I/O per operation with the engine's
counters. The model is handed the engine's configuration exactly
(``cost_models.engine_model``) and the state the engine was in when the
measured phase began (buffer and level occupancy after loading), so what is
compared is the model's I/O formulas, not its guess of a fill level.

accuracy = 1 - |predicted - measured| / max(measured, FLOOR), clipped at 0;
conservative = predicted >= measured.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cost_models import cpu_count
from cost_models.cpu import LOCAL_DEVICE, DeviceModel
from cost_models.engine_model import frozen_buffers, predict
from measure.engine import TEMPLATE, buffered_share, build, run_scratch, workload_json
from measure.grid import designs, workloads
from render.config import to_toml
from specs.errors import InputError
from specs.io import write_records
from specs.vocab import OPERATIONS, WRITE_OPERATIONS, Operation

#: Measured costs below this (blocks per operation) are compared on an absolute
#: scale: a 0.002 vs 0.001 blocks/op disagreement is not a 50% error.
FLOOR = 0.01
#: Workloads with writes run this many times longer (see validate()).
WRITE_RUN_FACTOR = 3
#: Operations of a scan-heavy run.
RANGE_RUN_OPS = 5000
#: A write row is only compared when its run flushed the buffer at least this
#: often: merges are amortized over fill cycles, and a run of a few flushes
#: measures one transient (a level that happens to be full after loading pays
#: a whole-level merge no average predicts).
MIN_FLUSHES = 10


def measured(report: dict[str, Any]) -> dict[str, float]:
    """Blocks per operation from a cosine-bench report (background I/O charged to the writes)."""
    per = report["per_op"]
    bg = report.get("background", {})
    puts = sum(per.get(op, {}).get("count", 0) for op in WRITE_OPERATIONS)
    merge = (
        bg.get("flush_blocks_written", 0)
        + bg.get("flush_blocks_read", 0)
        + bg.get("compaction_blocks_read", 0)
        + bg.get("compaction_blocks_written", 0)
    )
    wal_pages = bg.get("wal_bytes", 0) / 4096.0
    write_share = (merge + wal_pages) / puts if puts else 0.0
    out: dict[str, float] = {}
    for op in OPERATIONS:
        v = per.get(op)
        if not v or not v.get("count"):
            continue
        reads = v["blocks_read"] / v["count"]
        out[op] = reads + (write_share if op in WRITE_OPERATIONS else 0.0)
    return out


def blocks_per_op(report: dict[str, Any]) -> float:
    """All blocks of a run per operation (reads of each, and the writes' share of the background)."""
    per = measured(report)
    counts = {op: v["count"] for op, v in report["per_op"].items()}
    return sum(per[op] * counts[op] for op in per) / max(sum(counts.values()), 1)


def accuracy(pred: float, meas: float) -> float:
    return max(0.0, 1.0 - abs(pred - meas) / max(meas, FLOOR))


#: Share of cases `--conservative` makes the model over-estimate (the paper's model is an upper bound).
CONSERVATIVE_SHARE = 0.9


def conservative_margin(rows: list[dict[str, Any]], share: float = CONSERVATIVE_SHARE) -> float:
    """The smallest factor m such that m x predicted >= measured in ``share`` of the cases.

    Cases the model predicts no I/O for and the engine measures some cannot be
    covered by a factor; they count against the share.
    """
    import numpy as np

    ratios = []
    for r in rows:
        p, m = r["predicted_io"], r["measured_io"]
        if m <= 0:
            ratios.append(0.0)
        elif p > 0:
            ratios.append(m / p)
        else:
            ratios.append(np.inf)
    if not ratios:
        return 1.0
    q = float(np.quantile(np.array(ratios), share, method="higher"))
    return q if np.isfinite(q) else float("inf")


@dataclass
class Validation:
    rows: list[dict[str, Any]]
    #: write rows not compared: their run had fewer than MIN_FLUSHES flushes
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def with_margin(self, margin: float) -> Validation:
        """The same cases with every prediction multiplied by ``margin``."""
        rows = []
        for r in self.rows:
            p = r["predicted_io"] * margin
            rows.append(
                {
                    **r,
                    "predicted_io": p,
                    "accuracy": accuracy(p, r["measured_io"]),
                    "conservative": bool(p >= r["measured_io"] * (1 - 1e-9)),
                }
            )
        return Validation(rows, self.skipped)

    def conservative_summary(self, share: float = CONSERVATIVE_SHARE) -> dict[str, Any]:
        """The margin that makes ``share`` of the cases over-estimate, and what it costs in accuracy."""
        m = conservative_margin(self.rows, share)
        after = self.with_margin(m).summary()
        before = self.summary()
        return {
            "margin": m,
            "target_share": share,
            "conservative_share": after["conservative_share"],
            "mean_accuracy": after["mean_accuracy"],
            "accuracy_cost": (before["mean_accuracy"] or 0.0) - (after["mean_accuracy"] or 0.0),
            "by_class": after["by_class"],
        }

    def below(self, min_accuracy: float) -> bool:
        """Whether the mean accuracy is below ``min_accuracy`` (`cosine validate io --min-accuracy`)."""
        return bool(self.summary()["mean_accuracy"] < min_accuracy)

    def summary(self) -> dict[str, Any]:
        import numpy as np

        acc = np.array([r["accuracy"] for r in self.rows])
        cons = np.array([r["conservative"] for r in self.rows])
        by_class: dict[str, list[float]] = {}
        for r in self.rows:
            by_class.setdefault(r["class"], []).append(r["accuracy"])
        by_op: dict[str, list[float]] = {}
        for r in self.rows:
            by_op.setdefault(r["op"], []).append(r["accuracy"])
        return {
            "cases": len(self.rows),
            "skipped_short_write_runs": len(self.skipped),
            "mean_accuracy": float(acc.mean()) if acc.size else None,
            "conservative_share": float(cons.mean()) if cons.size else None,
            "by_class": {k: float(np.mean(v)) for k, v in sorted(by_class.items())},
            "by_op": {k: float(np.mean(v)) for k, v in sorted(by_op.items())},
        }


def validate(
    records: int,
    operations: int,
    quick: bool,
    progress: Callable[[int, int, str], None] | None = None,
    only_designs: tuple[str, ...] = (),
    only_workloads: tuple[str, ...] = (),
) -> Validation:
    build(TEMPLATE)
    ds = designs(records, quick)
    ws = workloads(quick)
    if only_designs:
        ds = {k: v for k, v in ds.items() if k in only_designs}
    if only_workloads:
        ws = {k: v for k, v in ws.items() if k in only_workloads}
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    total = len(ds) * len(ws)
    done = 0
    for dname, secs in ds.items():
        text = to_toml(secs)
        cfg = copy.deepcopy(secs)
        for wname, spec in ws.items():
            # Merges are amortized over a level's fill cycle: workloads that write
            # run long enough to go through cycles rather than one transient.
            writes = sum(spec.workload.operations.get(o, 0.0) for o in WRITE_OPERATIONS)
            ops = operations * (WRITE_RUN_FACTOR if writes > 0 else 1)
            if spec.workload.operations.get(Operation.RANGE, 0.0) > 0.5:
                # a scan-heavy run needs far fewer operations for stable averages, and a
                # hash log scans its whole index per range (by design: it has no order)
                ops = min(ops, RANGE_RUN_OPS)
            wl = workload_json(spec, records, ops, 1)
            rep = run_scratch(text, wl, f"validate-{done}")
            start, end = rep["load"]["shape"], rep.get("stats")
            frozen = frozen_buffers(cfg, wl, cpu_count(), LOCAL_DEVICE, start, end)
            pred = predict(cfg, wl, shape=start, end_shape=end, frozen=frozen)
            meas = measured(rep)
            flushes = int(rep.get("background", {}).get("flushes", 0))
            for op, m in meas.items():
                p = float(getattr(pred, op)[0])
                (skipped if op in WRITE_OPERATIONS and flushes < MIN_FLUSHES else rows).append(
                    {
                        "design": dname,
                        "class": rep["class"],
                        "workload": wname,
                        "op": op,
                        "predicted_io": p,
                        "measured_io": m,
                        "accuracy": accuracy(p, m),
                        "conservative": bool(p >= m * (1 - 1e-9)),
                        "records": records,
                        "operations": ops,
                        "flushes": flushes,
                    }
                )
            done += 1
            if progress:
                progress(done, total, f"{dname} x {wname}")
    return Validation(rows, skipped)


#: (records, operations) per run: the full grid, and --quick.
DEFAULT_SIZE = (1_000_000, 200_000)
QUICK_SIZE = (50_000, 50_000)
#: Smallest runs that still measure something (a few blocks and merges).
MIN_RECORDS, MIN_OPS = 1000, 100
#: Largest runs (the data lives on tmpfs: 1e8 records of 116 B is 11.6 GB).
MAX_RECORDS, MAX_OPS = 100_000_000, 1_000_000_000


def run_size(quick: bool, records: int | None, ops: int | None) -> tuple[int, int]:
    """Records and operations per run: the flags, or the defaults of the grid."""
    n, m = QUICK_SIZE if quick else DEFAULT_SIZE
    n = n if records is None else records
    m = m if ops is None else ops
    if not MIN_RECORDS <= n <= MAX_RECORDS:
        raise InputError(f"--records must be between {MIN_RECORDS:,} and {MAX_RECORDS:,}, got {n:,}")
    if not MIN_OPS <= m <= MAX_OPS:
        raise InputError(f"--ops must be between {MIN_OPS:,} and {MAX_OPS:,}, got {m:,}")
    return n, m


def check_device(iops: float | None, read_latency_us: float) -> DeviceModel:
    """``--iops`` / ``--read-latency-us`` as the emulated volume (no --iops: this machine's device)."""
    import math

    from cost_models.cpu import LOCAL_DEVICE, DeviceModel

    if not math.isfinite(read_latency_us) or not 0.0 <= read_latency_us <= 1e6:
        raise InputError(f"--read-latency-us must be between 0 and 1,000,000, got {read_latency_us}")
    if iops is None:
        if read_latency_us:
            raise InputError("--read-latency-us needs --iops (a volume)")
        return LOCAL_DEVICE
    if not math.isfinite(iops) or not 1.0 <= iops <= 1e8:
        raise InputError(f"--iops must be between 1 and 100,000,000, got {iops}")
    return DeviceModel(iops=iops, read_latency_s=read_latency_us * 1e-6)


def check_min_accuracy(value: float | None) -> None:
    """``--min-accuracy`` is a share: a number from 0 to 1 (NaN would make a check that can never fail)."""
    if value is not None and not 0.0 <= value <= 1.0:
        raise InputError(f"--min-accuracy must be a number from 0 to 1, got {value}")


def write(v: Validation, out: Path) -> Path:
    """validation.parquet: one row per (design, workload, operation)."""
    out.mkdir(parents=True, exist_ok=True)
    return write_records(out / "validation.parquet", v.rows)


def model_prediction(config_text: str, wl: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """The model's throughput and blocks per operation for a run of ``config_text`` on ``wl``
    (from the state the run started in, on the config's device), and its accuracy; beside them
    what the throughput is made of, model and engine: the client threads' CPU per operation (its
    serial and parallel seconds at the run's threads), the background thread's, and the share of
    lookups (gets, rmw reads) the buffer answered — where a throughput miss comes from."""
    import tomllib

    from cost_models.engine_model import engine_breakdown
    from render.config import config_device

    cfg = tomllib.loads(config_text)
    model = engine_breakdown(cfg, wl, cpu_count(), config_device(cfg), report["load"]["shape"], report.get("stats"))
    x, io, d = model.throughput, model.blocks, model.demands
    serial, parallel = d.at_threads(int(wl["threads"]))
    buffered = model.io.get_buffered
    meas = float(report["run"]["throughput_ops"])
    blocks = blocks_per_op(report)
    ops = int(wl["operations"])
    cpu = report.get("cpu") or {}
    return {
        "throughput_ops": x,
        "blocks_per_op": io,
        "measured_blocks_per_op": blocks,
        "throughput_accuracy": max(0.0, 1 - abs(x - meas) / meas) if meas > 0 else 0.0,
        "blocks_accuracy": accuracy(io, blocks),
        "fg_cpu_us": float(serial[0] + parallel[0]) * 1e6,
        "measured_fg_cpu_us": float(cpu["foreground_seconds"]) / ops * 1e6 if cpu else None,
        "bg_cpu_us": float(d.background[0]) * 1e6,
        "measured_bg_cpu_us": (
            (float(cpu["background_seconds"]) + float(cpu.get("settle_background_seconds") or 0.0)) / ops * 1e6
            if cpu
            else None
        ),
        "buffered_share": None if buffered is None else float(buffered[0]),
        "measured_buffered_share": buffered_share(report),
    }
