"""The knapsack's items (solver.bottleneck.ColumnTable.items: the staircase per VM type) and which
columns enter them level by level (solver.bottleneck.entering), against their definitions, and the
compiled pass against the reference."""

from __future__ import annotations

import numpy as np
import pytest

from solver import knapsack
from solver.bottleneck import ColumnTable, entering
from solver.knapsack import staircase_by_group, staircase_of_sorted


def _table(rng: np.random.Generator, n: int) -> ColumnTable:
    cost = rng.choice([9.0, 10.0, 12.0, 15.0, 20.0, 30.0], n) * rng.choice([1.0, 1.0, 1.0 + 1e-7], n)
    share = rng.choice([1.0, 2.0, 3.0, 5.0, 8.0], n)
    x = rng.choice([1.0, 2.0, 3.0, 4.0], n)
    tab = ColumnTable("aws", [], None, 50, cost, x, x, share, 0.0)  # type: ignore[arg-type]
    tab.group = rng.integers(0, 4, n).astype(np.int64)
    return tab


@pytest.mark.parametrize("path", ["reference", "compiled"])
def test_items_are_the_staircase_of_each_vm_type(path: str) -> None:
    """The vectorized staircase (one pass, a running minimum per type on the costs' ranks) and the
    compiled one equal the staircase of each type's columns alone, united."""
    if path == "compiled":
        knapsack.load()
    rng = np.random.default_rng(55)
    with knapsack.reference() if path == "reference" else _nothing():
        _check_items(rng)


def _check_items(rng: np.random.Generator) -> None:
    for _ in range(3000):
        tab = _table(rng, int(rng.integers(1, 40)))
        cols = np.flatnonzero(rng.random(tab.share.size) < 0.7)
        order = cols[np.lexsort((cols, tab.cost[cols], tab.share[cols]))]
        g = tab.group[order]
        parts = [staircase_of_sorted(tab.share, tab.cost, order[g == label]) for label in np.unique(g)]
        want = np.sort(np.concatenate(parts)) if parts else order[:0]
        assert np.array_equal(tab.items(cols), want)
        assert np.array_equal(staircase_by_group(tab.share, tab.cost, order, tab.group), want)


@pytest.mark.parametrize("path", ["reference", "compiled"])
def test_a_level_none_of_whose_columns_enters_keeps_the_items_above(path: str) -> None:
    """entering's promise: where no column of a level enters, the items of the columns at or above
    it are those of the columns above it, but for equal columns (the same VM type, shard size and
    cost: the staircase keeps the first) — the search skips that level."""
    if path == "compiled":
        knapsack.load()
        assert knapsack.numba_search() is not None
    rng = np.random.default_rng(56)
    with knapsack.reference() if path == "reference" else _nothing():
        for _ in range(400):
            tab = _table(rng, int(rng.integers(1, 40)))
            usable = rng.random(tab.share.size) < 0.8
            enters = entering(tab, tab.x, usable)
            assert not enters[~usable].any()
            for level in np.unique(tab.x[usable]):
                at = usable & (tab.x == level)
                if not enters[at].any():
                    above = np.flatnonzero(usable & (tab.x > level))
                    here = tab.items(np.flatnonzero(usable & (tab.x >= level)))
                    assert _kinds(tab, here) == _kinds(tab, tab.items(above))


def test_the_compiled_pass_equals_the_reference() -> None:
    knapsack.load()
    rng = np.random.default_rng(57)
    for _ in range(400):
        tab = _table(rng, int(rng.integers(1, 60)))
        usable = rng.random(tab.share.size) < 0.8
        fast = entering(tab, tab.x, usable)
        tab._cache.clear()
        with knapsack.reference():
            assert np.array_equal(entering(tab, tab.x, usable), fast)


def _kinds(tab: ColumnTable, items: np.ndarray) -> list[tuple[int, float, float]]:
    return sorted((int(tab.group[i]), float(tab.share[i]), float(tab.cost[i])) for i in items)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
