"""A band's search under a floor (solver.bottleneck._best_in_class): its compiled floor round per
level (solver.knapsack_numba.floor_level_bounds, loops instead of the levels x columns masks)
gives the reference's answer, bound and search, on random tables with floors of every height."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.cloud import SlaTerms
from solver import knapsack
from solver.bottleneck import ColumnTable, Floor, _best_in_class
from specs.vocab import Objective

#: Random instances compared per seed.
CASES = 150


def _table(rng: np.random.Generator, n: int) -> ColumnTable:
    cost = rng.choice([9.0, 10.0, 12.0, 15.0, 20.0, 30.0], n) * rng.choice([1.0, 1.0, 1.0 + 1e-7], n)
    share = rng.choice([1.0, 2.0, 3.0, 5.0, 8.0], n)
    x = rng.choice([1.0, 2.0, 3.0, 4.0, 6.0], n) * share
    p = x * rng.uniform(0.3, 1.0, n)
    support = ((0.1, 5.0),) if rng.random() < 0.3 else ()
    terms = SlaTerms(float(rng.choice([0.0, 3.0])), float(rng.choice([0.0, 1.0])), 0.0, support, 1, ())
    tab = ColumnTable("aws", [], terms, int(rng.integers(4, 30)), cost, x, p, share, terms.fixed)
    tab.group = rng.integers(0, 4, n).astype(np.int64)
    return tab


@pytest.mark.parametrize("seed", [5201, 5202])
def test_the_compiled_floor_round_searches_as_the_reference(seed: int) -> None:
    knapsack.load()
    assert knapsack.numba_search() is not None
    rng = np.random.default_rng(seed)
    answered = 0
    for _ in range(CASES):
        tab = _table(rng, int(rng.integers(2, 60)))
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
