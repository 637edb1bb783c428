"""Synthetic workload traces for ``cosine plan``, modelled on SOPHIA's three cases.

    .venv/bin/python specs/traces/generate.py --seed 7 [--out specs/traces] [--peak-ops 2e7]

Writes ``mgrast.csv``, ``bus.csv`` and ``hpc.csv`` with the columns
``time_s, get, empty_get, range, insert, update, rmw, load_ops`` (one row per
step; ``time_s`` is the step's start, fractions sum to 1, ``load_ops`` is the
offered load in ops/s). Every figure below cites SOPHIA (Mahgoub et al., USENIX
ATC 2019, seeds/004) or is labelled as this generator's choice. SOPHIA runs
the servers saturated ("multiple concurrent clients to saturate the database
servers", Sec. 6); ``--peak-ops`` is the offered load of those clients, set
well above the clusters' capacity so that, as in SOPHIA, capacity binds.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np

from specs.vocab import PAPER_OPERATIONS

COLUMNS = ("time_s", *PAPER_OPERATIONS, "load_ops")
#: Decimals written per fraction; the largest fraction absorbs the rounding so
#: each row sums to exactly 1.
DECIMALS = 4
#: Default offered load of the saturating clients, ops/s (generator choice).
PEAK_OPS = 2e7


def mix(**fr: float) -> np.ndarray:
    """An operation mix as a vector over :data:`PAPER_OPERATIONS` (normalized)."""
    v = np.array([fr.get(op, 0.0) for op in PAPER_OPERATIONS], dtype=float)
    return v / v.sum()


def _round_row(v: np.ndarray) -> list[float]:
    r = np.round(v / v.sum(), DECIMALS)
    r[int(np.argmax(r))] += round(1.0 - float(r.sum()), DECIMALS)
    return [round(float(x), DECIMALS) for x in r]


def write_trace(path: Path, step_s: float, mixes: np.ndarray, load: np.ndarray) -> None:
    """Write one trace CSV (``mixes``: steps x 6, ``load``: ops/s per step)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for t, (m, x) in enumerate(zip(mixes, load, strict=True)):
            w.writerow([f"{t * step_s:g}", *_round_row(m), f"{x:.1f}"])


# ----------------------------------------------------------------------------- MG-RAST


#: MG-RAST's prediction step (SOPHIA Sec. 6, Exp. 1: T_d = 5 min).
MGRAST_STEP_S = 300.0
#: Four 6-hour segments, one per switching regime of SOPHIA's Table 1 ("Slow",
#: "Medium", "Fast", "Write"; average read ratios 70%, 50%, 45%, 35%). Mean
#: dwell in the read and the write state, in steps (generator choice, set so the
#: stationary read ratio r / (r + w) matches the table).
MGRAST_REGIMES = (("slow", 14.0, 6.0), ("medium", 5.0, 5.0), ("fast", 1.8, 2.2), ("write", 3.5, 6.5))
MGRAST_SEGMENT_STEPS = 72
#: Sec. 5: "more than 80% of the switches are abrupt, from RR=0 to RR=1 or vice
#: versa". A transitional step (intermediate RR) makes two non-abrupt changes, so
#: it is inserted after 10% of the switches: 0.9 / (0.9 + 2 * 0.1) = 82% abrupt.
MGRAST_TRANSITIONAL = 0.1
#: Sec. 5: correlation -0.72 between read ratio and load (writes are batched).
#: Load = peak * (1 - MGRAST_READ_DIP * RR) * noise (generator choice giving about that).
MGRAST_READ_DIP = 0.6
MGRAST_LOAD_NOISE = 0.45


def mgrast(rng: np.random.Generator, peak: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Abrupt read/write switches, load anti-correlated with the read ratio."""
    rr: list[float] = []
    state = 1
    for _, read_dwell, write_dwell in MGRAST_REGIMES:
        left = MGRAST_SEGMENT_STEPS
        while left > 0:
            dwell = read_dwell if state else write_dwell
            n = min(left, max(1, int(rng.geometric(1.0 / dwell))))
            rr += [float(state)] * n
            left -= n
            state = 1 - state
            if left > 0 and rng.random() < MGRAST_TRANSITIONAL:
                rr.append(float(rng.uniform(0.2, 0.8)))  # a transitional step between the two states
                left -= 1
    r = np.array(rr)
    read, write = mix(get=1.0), mix(insert=0.8, update=0.2)  # writes are uploads: new data, some updates
    mixes = r[:, None] * read + (1 - r[:, None]) * write
    load = peak * (1 - MGRAST_READ_DIP * r) * rng.lognormal(0.0, MGRAST_LOAD_NOISE, r.size)
    return MGRAST_STEP_S, mixes, load


# ----------------------------------------------------------------------------- bus tracking


#: Bus tracking's aggregation interval (SOPHIA Sec. 6, Exp. 2: 15 minutes).
BUS_STEP_S = 900.0
BUS_DAYS = 3
#: Daily regimes (Sec. 5: scan-heavy at night, update-heavy in the early
#: morning). Hours and mixes are generator choices whose 24-hour average is
#: Sec. 5's overall ratio: update 42.2%, scan 54.8%, insert 2.82%, read 0.18%.
BUS_REGIMES = (
    (0, 5, mix(range=0.800, update=0.168, insert=0.030, get=0.002)),  # night: scans
    (5, 9, mix(update=0.800, range=0.148, insert=0.050, get=0.002)),  # early morning: updates
    (9, 24, mix(update=0.402, range=0.572, insert=0.024, get=0.002)),  # day: the average mix
)
#: Relative offered load by hour (generator choice: commute peaks at 8h and
#: 17h, quiet nights); the clients still saturate the servers at every hour.
BUS_LOAD = (
    *(0.3, 0.25, 0.25, 0.25, 0.3, 0.5, 0.7, 0.9, 1.0, 0.85, 0.75, 0.75),
    *(0.8, 0.75, 0.75, 0.8, 0.9, 1.0, 0.9, 0.75, 0.6, 0.5, 0.4, 0.35),
)
BUS_MIX_NOISE = 0.15  # log-normal jitter of each operation's share per step
BUS_SHIFT_STEPS = 2  # a regime's start moves by up to +-2 steps from day to day


def bus(rng: np.random.Generator, peak: float) -> tuple[float, np.ndarray, np.ndarray]:
    """A daily pattern: scans at night, updates in the early morning."""
    per_hour = round(3600 / BUS_STEP_S)
    rows, load = [], []
    for _ in range(BUS_DAYS):
        shift = [int(rng.integers(-BUS_SHIFT_STEPS, BUS_SHIFT_STEPS + 1)) for _ in BUS_REGIMES]
        for k in range(24 * per_hour):
            regime = BUS_REGIMES[-1][2]
            for (h0, h1, m), s in zip(BUS_REGIMES, shift, strict=True):
                if h0 * per_hour + s <= k < h1 * per_hour + s:
                    regime = m
                    break
            m = regime * rng.lognormal(0.0, BUS_MIX_NOISE, regime.size)
            rows.append(m / m.sum())
            load.append(peak * BUS_LOAD[k // per_hour] * rng.lognormal(0.0, 0.1))
    return BUS_STEP_S, np.array(rows), np.array(load)


# ----------------------------------------------------------------------------- HPC analytics


#: SOPHIA's forecasting step (Sec. 4.1: T_d = 30 s).
HPC_STEP_S = 30.0
HPC_STEPS = 360
#: Concurrent jobs (Sec. 6, Exp. 3 runs 1, 5 and 10; 5 is the middle level).
HPC_JOBS = 5
#: Phase size ~ U(200, 100K) operations (Sec. 5); a job is timed as if it
#: issued HPC_JOB_RATE ops/s (generator choice: phases last seconds to ~17 min).
HPC_PHASE_OPS = (200, 100_000)
HPC_JOB_RATE = 100.0
#: Sec. 5: "an equal mix of the two types of jobs" (with and without the upload phase).
HPC_RECURRING = 0.5
HPC_PHASES = {
    "upload": mix(insert=1.0),  # write-heavy upload of new data
    "analysis": mix(get=0.95, range=0.05),  # read-heavy analytical queries
    "commit": mix(insert=0.5, update=0.5),  # write-heavy commit of the results
}


def hpc(rng: np.random.Generator, peak: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Concurrent jobs in phases upload -> analysis -> commit (recurring jobs skip the upload)."""
    horizon = HPC_STEPS * HPC_STEP_S
    acc = np.zeros((HPC_STEPS, len(PAPER_OPERATIONS)))
    for _ in range(HPC_JOBS):
        t = 0.0  # each slot runs jobs back to back: a finished job is replaced from the queue
        while t < horizon:
            names = ["analysis", "commit"] if rng.random() < HPC_RECURRING else ["upload", "analysis", "commit"]
            for name in names:
                dur = rng.uniform(*HPC_PHASE_OPS) / HPC_JOB_RATE
                _spread(acc, t, t + dur, HPC_PHASES[name])
                t += dur
    weight = acc.sum(axis=1)
    mixes = acc / weight[:, None]
    load = np.full(HPC_STEPS, peak) * rng.lognormal(0.0, 0.05, HPC_STEPS)
    return HPC_STEP_S, mixes, load


def _spread(acc: np.ndarray, t0: float, t1: float, m: np.ndarray) -> None:
    """Add mix ``m`` weighted by its time overlap with each step."""
    for k in range(int(t0 // HPC_STEP_S), min(acc.shape[0], int(np.ceil(t1 / HPC_STEP_S)))):
        lo, hi = max(t0, k * HPC_STEP_S), min(t1, (k + 1) * HPC_STEP_S)
        if hi > lo:
            acc[k] += m * (hi - lo)


TRACES: dict[str, Callable[[np.random.Generator, float], tuple[float, np.ndarray, np.ndarray]]] = {
    "mgrast": mgrast,
    "bus": bus,
    "hpc": hpc,
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--peak-ops", type=float, default=PEAK_OPS, help="offered load of the saturating clients, ops/s")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for i, (name, fn) in enumerate(TRACES.items()):
        # one independent stream per trace, so that changing one generator leaves the others as they were
        rng = np.random.default_rng([args.seed, i])
        step, mixes, load = fn(rng, args.peak_ops)
        write_trace(args.out / f"{name}.csv", step, mixes, load)
        print(f"{args.out / f'{name}.csv'}: {len(load)} steps of {step:g} s")


if __name__ == "__main__":
    main()
