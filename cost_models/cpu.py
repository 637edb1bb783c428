"""Concurrency-aware CPU model (paper Sec. 4, Eq. 2-3) over a learned phi table.

phi (the parallel fraction) and the single-thread CPU time per operation are
per (design class, operation) and live in ``data/phi.yaml`` with how they were
obtained; ``cosine calibrate`` rewrites that file. A workload's phi is the
mix-weighted average (Algorithm 1, getPhiForWorkload).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models.symbolic import compiled
from specs.errors import InputError
from specs.vocab import DESIGN_CLASSES, OPERATIONS

PHI_TABLE = Path(__file__).resolve().parent / "data" / "phi.yaml"


class PhiTableError(InputError):
    """The phi table is missing a class/operation or holds an impossible value."""


@lru_cache(maxsize=4)
def phi_table(path: Path = PHI_TABLE) -> dict[str, Any]:
    """Load and check the phi table."""
    raw = yaml.safe_load(path.read_text())
    classes = raw.get("classes", {})
    for cls in DESIGN_CLASSES:
        if cls not in classes:
            raise PhiTableError(f"{path.name}: class {cls!r} missing")
        for key in ("phi", "cpu_seconds"):
            for op in OPERATIONS:
                v = classes[cls].get(key, {}).get(op)
                if v is None:
                    raise PhiTableError(f"{path.name}: {cls}.{key}.{op} missing")
                if key == "phi" and not 0.0 <= float(v) <= 1.0:
                    raise PhiTableError(f"{path.name}: {cls}.phi.{op}={v} outside [0, 1]")
                if key == "cpu_seconds" and not float(v) > 0.0:
                    raise PhiTableError(f"{path.name}: {cls}.cpu_seconds.{op} must be positive")
    return raw


def _by_class(key: str, cls: np.ndarray, mix: dict[str, float]) -> np.ndarray:
    table = phi_table()["classes"]
    per_class = np.array(
        [sum(mix.get(op, 0.0) * float(table[name][key][op]) for op in OPERATIONS) for name in DESIGN_CLASSES]
    )
    return per_class[np.asarray(cls, dtype=int)]


def workload_phi(cls: np.ndarray, mix: dict[str, float]) -> np.ndarray:
    """phi of the workload on each design's class (mix-weighted)."""
    return _by_class("phi", cls, mix)


def cpu_seconds(cls: np.ndarray, mix: dict[str, float], scan_length: float) -> np.ndarray:
    """Single-thread CPU seconds per operation of the mix, never zero."""
    per_entry = float(phi_table()["range_per_entry_seconds"])
    return _by_class("cpu_seconds", cls, mix) + mix.get("range", 0.0) * scan_length * per_entry


def block_time(block_bytes: float | np.ndarray, fixed: float, per_byte: float) -> np.ndarray:
    """Seconds to read one block: a fixed part plus a part per byte of the block."""
    return fixed + per_byte * np.asarray(block_bytes, dtype=float)


def local_block_seconds(block_bytes: float | np.ndarray) -> np.ndarray:
    """Time to read one block of ``block_bytes`` on the calibration machine's local device.

    ``cosine calibrate`` fits a fixed part per block and a part per byte (the
    engine copies, checksums and searches every byte of a block it reads; its
    designs range from 1 KiB to 32 KiB blocks), so a 32 KiB block costs what the
    fit says, not what a 4 KiB one does. Tables without the per-byte term (older
    calibrations) charge every block the same.
    """
    t = phi_table()
    return block_time(
        block_bytes, float(t.get("local_block_seconds", 1e-6)), float(t.get("local_block_seconds_per_byte", 0.0))
    )


def node_throughput(
    io_per_op: np.ndarray,
    iops: float | np.ndarray,
    cls: np.ndarray,
    mix: dict[str, float],
    threads: float | np.ndarray,
    scan_length: float,
    extra_cpu: float | np.ndarray = 0.0,
) -> np.ndarray:
    """Operations per second one node sustains (Eq. 2-3, capped by the device IOPS).

    ``extra_cpu``: single-thread seconds per operation a design adds to the class's
    learned CPU (block compression, cost_models.compression)."""
    c = compiled()
    phi = workload_phi(cls, mix)
    cpu = cpu_seconds(cls, mix, scan_length) + extra_cpu
    io = np.maximum(np.asarray(io_per_op, dtype=float), 0.0)
    x_cpu = c["throughput_cpu"](phi, threads, io, iops, cpu)
    with np.errstate(divide="ignore"):
        x_io = np.where(io > 0, c["throughput_io"](iops, np.where(io > 0, io, 1.0)), np.inf)
    return np.minimum(x_cpu, x_io)
