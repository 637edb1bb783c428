"""A band's search under a floor (solver.bottleneck._best_in_class): its compiled floor round per
level (solver.knapsack_numba.floor_level_bounds, loops instead of the levels x columns masks)
gives the reference's answer, bound and search, on random tables with floors of every height."""

from __future__ import annotations

import numpy as np
import pytest

from solver import knapsack
from solver.bottleneck import Floor, _best_in_class
from specs.vocab import Objective
from tests.random_tables import random_table

#: Random instances compared per seed.
CASES = 150


@pytest.mark.parametrize("seed", [5201, 5202])
def test_the_compiled_floor_round_searches_as_the_reference(seed: int) -> None:
    knapsack.load()
    assert knapsack.numba_search() is not None
    rng = np.random.default_rng(seed)
    answered = 0
    for _ in range(CASES):
        tab = random_table(rng, int(rng.integers(2, 60)))
        budget = float(rng.choice([100.0, 300.0, 1000.0]))
        floor = Floor(tab.p, float(rng.uniform(0.5, 40.0)))
        mask = rng.random(tab.share.size) < 0.9
        spec = None  # only read to price the answer's bill (chosen_of): not reached with finish=False
        fast = _best_in_class(spec, tab, Objective.EXPECTED, mask, budget, floor=floor, finish=False)  # type: ignore[arg-type]
        tab._cache.clear()
        with knapsack.reference():
            want = _best_in_class(spec, tab, Objective.EXPECTED, mask, budget, floor=floor, finish=False)  # type: ignore[arg-type]
        assert (fast.nodes, fast.ties, fast.open_bound, fast.result.nodes) == (
            want.nodes,
            want.ties,
            want.open_bound,
            want.result.nodes,
        )
        assert np.array_equal(fast.cand, want.cand)
        answered += fast.nodes is not None
    assert answered > CASES // 4, "the floors leave too few answers to compare"
