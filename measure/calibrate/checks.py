"""The model against the calibration's own runs: the prediction for a run given its blocks."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cost_models.cpu import (
    NodeShape,
    node_throughput,
    usable_cores,
)
from cost_models.io_model import IOCost, wal_pages
from cost_models.phi import PhiTable, shipped_or
from measure.calibrate.plan import LOADED
from measure.calibrate.samples import Sample
from measure.grid import KEY, VALUE
from specs.vocab import OPERATIONS, WRITE_OPERATIONS, DesignClass, Operation, WalSync


def predicted(s: Sample, cores: int, phi: PhiTable | None = None) -> float:
    """The model's throughput for a calibration run, given the blocks the run read and merged (under
    the CPU model's table ``phi``; None: the shipped one)."""
    per: dict[str, np.ndarray] = {str(op): np.array([0.0]) for op in OPERATIONS}
    mix = s.ops_mix
    # measured blocks, spread over the operations that cause them
    reads = [op for op in mix if op not in (Operation.INSERT, Operation.UPDATE)]
    writes = [op for op in mix if op in WRITE_OPERATIONS]
    rshare = sum(mix[o] for o in reads)
    wshare = sum(mix[o] for o in writes)
    for op in reads:
        per[op] = per[op] + (s.fg_blocks / rshare if rshare else 0.0)
    # the engine counts flush and merge blocks; the model's put also carries its WAL pages (which
    # demands() takes back off as the writer's own): without them a put's merges would vanish
    for op in writes:
        per[op] = per[op] + (s.bg_blocks / wshare if wshare else 0.0) + wal_pages(KEY + VALUE)
    if Operation.RMW in mix:
        per[Operation.GET] = np.array([s.fg_blocks / rshare if rshare else 0.0])
    io = IOCost.of(per, get_buffered=np.array([s.get_buffered]))
    shape = NodeShape(
        np.array([DesignClass(s.cls).code]),
        np.array([s.block_bytes]),
        float(s.records),
        KEY + VALUE,
        np.array([s.memtable_entries]),
        wal_sync=WalSync.NONE,  # the calibration's presets' (measure.grid)
    )
    return float(
        node_throughput(
            shipped_or(phi), io, math.inf, shape, mix, s.threads, s.scan_length, cores=usable_cores(s.threads, cores)
        )[0]
    )


def accuracy(pred: float, meas: float) -> float:
    """1 - |predicted - measured| / measured, at least 0 (the paper's accuracy)."""
    return max(0.0, 1.0 - abs(pred - meas) / meas) if meas > 0 else 0.0


def checks(samples: list[Sample], cores: int, phi: PhiTable | None = None) -> list[dict[str, Any]]:
    """Model vs measured throughput of every loaded run (single operations: the check; mixes: the fit's)."""
    rows = []
    for s in samples:
        if s.kind != LOADED:
            continue
        p = predicted(s, cores, phi)
        rows.append(
            {
                "class": s.cls,
                "workload": s.workload,
                "records": s.records,
                "threads": s.threads,
                "group": "mixed" if s.workload.startswith("ycsb") else "single operation",
                "predicted_ops": p,
                "measured_ops": s.throughput,
                "runqueue_share": s.runqueue_share,
                "accuracy": accuracy(p, s.throughput),
                # over the time the driver threads had a CPU (= measured on a quiet machine)
                "measured_free_ops": s.free_throughput,
                "accuracy_free": accuracy(p, s.free_throughput),
            }
        )
    return rows
