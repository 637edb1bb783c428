"""Workload traces for the planner: a step function of operation mixes and offered load.

A trace is CSV or parquet with ``time_s``, the six operation fractions and
``load_ops``; :func:`load_trace` validates every row, :func:`quantize` rounds
each step's mix to multiples of a quantum (largest remainder, so rows still
sum to 1) to give a few distinct workloads.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specs.errors import InputError
from specs.limits import MAX_THROUGHPUT_OPS, MAX_TRACE_SECONDS
from specs.vocab import PAPER_OPERATIONS

TRACE_COLUMNS = ("time_s", *PAPER_OPERATIONS, "load_ops")
#: Tolerance on a row's fractions summing to 1 (the spec loader's).
SUM_TOL = 1e-6
#: Default mix quantum: SOPHIA quantizes workload states at 10% (Sec. 6, Exp. 1 and 2).
QUANTUM = 0.1
#: Largest trace file read (a step is a line of about 60 bytes: 16 MiB is ~250,000 steps).
MAX_TRACE_BYTES = 16 * 2**20
#: Most steps of a trace (SOPHIA's traces have hundreds; the plan's DP is steps x configurations^2).
MAX_TRACE_STEPS = 100_000


@dataclass
class Trace:
    """A predicted workload: per step, its start, duration, operation mix and offered load."""

    name: str
    edges: np.ndarray  # (T + 1,) step boundaries, s
    mixes: np.ndarray  # (T, 6) fractions over PAPER_OPERATIONS
    load: np.ndarray  # (T,) ops/s
    source: str = ""

    @property
    def steps(self) -> int:
        return int(self.load.size)


def _read_rows(path: Path) -> tuple[list[str], list[list[Any]]]:
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.ParquetFile(path).read()
        except Exception as exc:  # pyarrow raises several types for a corrupt file
            raise InputError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
        cols = list(table.column_names)
        data = table.to_pydict()
        return cols, [list(r) for r in zip(*(data[c] for c in cols), strict=True)]
    if path.suffix.lower() != ".csv":
        raise InputError(f"{path}: a trace must be .csv or .parquet")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    if not rows:
        raise InputError(f"{path}: empty trace")
    return [c.strip() for c in rows[0]], rows[1:]


def load_trace(path: str | Path) -> Trace:
    """Read and validate a trace file.

    Parameters
    ----------
    path : str or Path
        CSV (header row) or parquet with the columns of :data:`TRACE_COLUMNS`.
        ``time_s`` is each step's start; the last step lasts as long as the one
        before it.

    Returns
    -------
    Trace

    Raises
    ------
    InputError
        One line naming the file and the problem: missing file, wrong columns,
        a non-number, times not increasing, fractions outside [0, 1] or not
        summing to 1, a negative load.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if not p.is_file():
        raise InputError(f"{p}: not a file")
    size = p.stat().st_size
    if size > MAX_TRACE_BYTES:
        raise InputError(f"{p}: {size:,} bytes is too large for a trace (at most {MAX_TRACE_BYTES:,})")
    cols, rows = _read_rows(p)
    twice = sorted({c for c in cols if cols.count(c) > 1})
    if twice:
        raise InputError(f"{p}: column {twice[0]!r} appears {cols.count(twice[0])} times; give each column once")
    missing = [c for c in TRACE_COLUMNS if c not in cols]
    extra = [c for c in cols if c not in TRACE_COLUMNS]
    if missing or extra:
        what = "; ".join(
            x
            for x in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(extra)}" if extra else "",
            )
            if x
        )
        raise InputError(f"{p}: wrong columns ({what}); need {', '.join(TRACE_COLUMNS)}")
    if len(rows) < 2:
        raise InputError(f"{p}: need at least 2 rows (the step length is the time between rows), got {len(rows)}")
    if len(rows) > MAX_TRACE_STEPS:
        raise InputError(f"{p}: {len(rows):,} steps, at most {MAX_TRACE_STEPS:,}")
    idx = [cols.index(c) for c in TRACE_COLUMNS]
    arr = np.empty((len(rows), len(TRACE_COLUMNS)))
    for i, r in enumerate(rows):
        if len(r) != len(cols):
            raise InputError(f"{p}: row {i + 1} has {len(r)} fields, the header {len(cols)}")
        for j, k in enumerate(idx):
            try:
                arr[i, j] = float(r[k])
            except (TypeError, ValueError):
                raise InputError(f"{p}: row {i + 1}, {TRACE_COLUMNS[j]}: {r[k]!r} is not a number") from None
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = map(int, np.argwhere(bad)[0])
        raise InputError(f"{p}: row {i + 1}, {TRACE_COLUMNS[j]}: must be finite, got {arr[i, j]}")
    t, mixes, load = arr[:, 0], arr[:, 1:7], arr[:, 7]
    if np.any(np.diff(t) <= 0):
        i = int(np.flatnonzero(np.diff(t) <= 0)[0]) + 1
        raise InputError(f"{p}: row {i + 1}: time_s must increase, {t[i]:g} follows {t[i - 1]:g}")
    if np.any((mixes < 0) | (mixes > 1)):
        i, j = map(int, np.argwhere((mixes < 0) | (mixes > 1))[0])
        raise InputError(f"{p}: row {i + 1}, {PAPER_OPERATIONS[j]}: fraction {mixes[i, j]:g} is outside [0, 1]")
    sums = mixes.sum(axis=1)
    if np.any(np.abs(sums - 1) > SUM_TOL):
        i = int(np.flatnonzero(np.abs(sums - 1) > SUM_TOL)[0])
        raise InputError(f"{p}: row {i + 1}: operation fractions sum to {sums[i]:.6g}, must sum to 1 (±{SUM_TOL:g})")
    if np.any(load < 0):
        i = int(np.flatnonzero(load < 0)[0])
        raise InputError(f"{p}: row {i + 1}: negative load_ops {load[i]:g}")
    if np.any(load > MAX_THROUGHPUT_OPS):
        i = int(np.flatnonzero(load > MAX_THROUGHPUT_OPS)[0])
        raise InputError(
            f"{p}: row {i + 1}: load_ops {load[i]:g} is above {MAX_THROUGHPUT_OPS:g} operations per second"
        )
    if np.any(np.abs(t) > MAX_TRACE_SECONDS):
        i = int(np.flatnonzero(np.abs(t) > MAX_TRACE_SECONDS)[0])
        raise InputError(f"{p}: row {i + 1}: time_s {t[i]:g} is beyond {MAX_TRACE_SECONDS:g} s (ten years)")
    edges = np.append(t, t[-1] + (t[-1] - t[-2]))
    return Trace(p.stem, edges, mixes / sums[:, None], load, str(p))


def quantize(mixes: np.ndarray, quantum: float = QUANTUM) -> np.ndarray:
    """Round each mix to multiples of ``quantum`` keeping the sum at 1 (largest remainders)."""
    units = round(1.0 / quantum) if quantum > 0 else 0
    if not 0 < quantum <= 1 or abs(units * quantum - 1) > 1e-9:
        raise InputError(f"--quantum must divide 1 (e.g. 0.05, 0.1, 0.25), got {quantum}")
    x = mixes * units
    q = np.floor(x + 1e-9)
    short = (units - q.sum(axis=1)).astype(int)
    order = np.argsort(-(x - q), axis=1, kind="stable")
    for i in np.flatnonzero(short > 0):
        q[i, order[i, : short[i]]] += 1
    return q / units
