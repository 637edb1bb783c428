"""A Monte-Carlo LSM simulator written independently of the cost model.

It keeps real key sets: a buffer of E_B keys, levels of runs with capacity
E_B * T^i, runs of at most cap_i / K entries (Dostoevsky-style: an incoming run
merges into the level's active run while it fits, else starts a new run), a
level that reaches its capacity merged into one run and pushed to the next
level, the deepest level never pushed. Lookups walk buffer -> levels -> runs
newest first and count block accesses: the key's own block, a false positive
at a hot run (charged at the configured filter rate, in expectation), and an
index block + a data block at a cold run. It uses none of cost_models.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class SimDesign:
    T: int
    K: int
    Z: int
    E_B: int
    L: int  # levels (the deepest never merges down)
    hot_levels: int  # levels 1..hot_levels have filters + in-memory fences
    fpr: float  # filter false-positive rate at hot levels (1.0 = no filter)


@dataclass
class Level:
    runs: list[set[int]] = field(default_factory=list)  # newest last

    def size(self) -> int:
        return sum(len(r) for r in self.runs)


class LSMSim:
    """Key sets only; values do not matter for I/O counting."""

    def __init__(self, d: SimDesign) -> None:
        self.d = d
        self.buffer: set[int] = set()
        self.levels = [Level() for _ in range(d.L)]

    def cap(self, i: int) -> int:  # i is 0-based disk level
        return self.d.E_B * self.d.T ** (i + 1)

    def max_runs(self, i: int) -> int:
        return self.d.Z if i == self.d.L - 1 else self.d.K

    def put(self, key: int) -> None:
        self.buffer.add(key)
        if len(self.buffer) >= self.d.E_B:
            run, self.buffer = self.buffer, set()
            self._add_run(0, run)

    def _add_run(self, i: int, run: set[int]) -> None:
        lvl = self.levels[i]
        run_cap = self.cap(i) / self.max_runs(i)
        if lvl.runs and len(lvl.runs[-1]) + len(run) <= run_cap * 1.0001:
            lvl.runs[-1] = lvl.runs[-1] | run
        else:
            lvl.runs.append(set(run))
        if i < self.d.L - 1 and lvl.size() >= self.cap(i):
            merged: set[int] = set()
            for r in lvl.runs:
                merged |= r
            lvl.runs = []
            self._add_run(i + 1, merged)

    def lookup_cost(self, key: int) -> float:
        if key in self.buffer:
            return 0.0
        cost = 0.0
        for i, lvl in enumerate(self.levels):
            cold = i >= self.d.hot_levels
            for run in reversed(lvl.runs):
                if key in run:
                    return cost + (2.0 if cold else 1.0)
                cost += 2.0 if cold else self.d.fpr
        return cost

    def empty_lookup_cost(self) -> float:
        cost = 0.0
        for i, lvl in enumerate(self.levels):
            cold = i >= self.d.hot_levels
            cost += len(lvl.runs) * (2.0 if cold else self.d.fpr)
        return cost


def skew_draw(rng: random.Random, n: int, hot_fraction: float, hot_probability: float) -> int:
    """The paper's special/regular keys: the first hot_fraction of keys with
    probability hot_probability, uniformly within each part."""
    hot = max(1, int(n * hot_fraction))
    if rng.random() < hot_probability:
        return rng.randrange(hot)
    return hot + rng.randrange(n - hot)


def simulate(
    d: SimDesign,
    n_keys: int,
    updates: int,
    snapshots: int,
    lookups: int,
    *,
    put_skew: tuple[float, float] | None = None,
    get_skew: tuple[float, float] | None = None,
    seed: int = 7,
) -> tuple[float, float]:
    """Load n_keys (random order), apply ``updates`` puts, and average the cost of
    ``lookups`` single-result lookups and the no-result cost over ``snapshots``
    evenly spaced moments of the update phase. Returns (sigma_l, sigma_n)."""
    rng = random.Random(seed)
    sim = LSMSim(d)
    keys = list(range(n_keys))
    rng.shuffle(keys)
    for k in keys:
        sim.put(k)
    total_l = total_n = 0.0
    count = 0
    step = max(1, updates // max(1, snapshots))
    done = 0
    for _ in range(max(1, snapshots)):
        for _ in range(step if updates else 0):
            k = skew_draw(rng, n_keys, *put_skew) if put_skew else rng.randrange(n_keys)
            sim.put(k)
            done += 1
        for _ in range(lookups):
            k = skew_draw(rng, n_keys, *get_skew) if get_skew else rng.randrange(n_keys)
            total_l += sim.lookup_cost(k)
        total_n += sim.empty_lookup_cost() * lookups
        count += lookups
    return total_l / count, total_n / count
