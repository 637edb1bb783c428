"""Of equally fast clusters the cheapest (solver.bottleneck._cheapest_as_fast): its compiled walk over
a branch's suffixes by floor throughput (solver.knapsack_numba.floor_suffix) and the thresholds it
leaves out before the walk (solver.bottleneck.SKIP_CLOSED_THRESHOLDS) give the reference's
cluster, on random tables with and without a floor and with support plans (a percent of the spend)
in the bill."""

from __future__ import annotations

import numpy as np
import pytest

from solver import bottleneck, knapsack
from solver.bottleneck import ColumnTable, Floor, _cheapest_as_fast, cluster_value
from tests.random_tables import random_table

#: Random instances compared.
CASES = 600


def _case(rng: np.random.Generator) -> tuple[ColumnTable, Floor | None, list[tuple[int, int]], list[float], float]:
    tab = random_table(rng, int(rng.integers(2, 50)))
    # a start: one column alone at the nodes that hold the data; as fast as itself
    i = int(rng.integers(tab.share.size))
    nodes = [(i, int(np.ceil(tab.share[i])) + int(rng.integers(0, 3)))]
    floor = Floor(tab.p, rng.uniform(0.3, 1.0) * cluster_value(tab, tab.p, nodes)) if rng.random() < 0.7 else None
    thresholds = sorted({float(v) for v in rng.choice(tab.x, size=min(6, tab.x.size), replace=False)})
    return tab, floor, nodes, thresholds, float(rng.choice([200.0, 500.0, 2000.0]))


@pytest.mark.parametrize("seed", [5101, 5102, 5103])
def test_the_compiled_walk_finds_the_reference_cluster(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled walk, thresholds left out, against the reference walking every threshold."""
    knapsack.load()
    assert knapsack.numba_search() is not None
    rng = np.random.default_rng(seed)
    floors = found_cheaper = 0
    for _ in range(CASES // 3):
        tab, floor, nodes, thresholds, budget = _case(rng)
        x_star = cluster_value(tab, tab.x, nodes)
        cand = np.ones(tab.share.size, dtype=bool)
        fast = _cheapest_as_fast(tab, tab.x, floor, nodes, x_star, thresholds, budget, cand)
        tab._cache.clear()
        with knapsack.reference(), monkeypatch.context() as m:
            m.setattr(bottleneck, "SKIP_CLOSED_THRESHOLDS", False)
            want = _cheapest_as_fast(tab, tab.x, floor, nodes, x_star, thresholds, budget, cand)
        assert fast == want
        floors += floor is not None
        found_cheaper += fast != nodes
    assert floors > CASES // 10 and found_cheaper > CASES // 30, "the cases do not exercise the walk"
