"""solver.knapsack's two searches against enumeration of every count vector, on random small
instances with and without percent-of-spend terms, node minimums and cluster caps; each test on
both paths, the reference and the searches compiled by numba (solver.knapsack_numba), and the two
compared field by field on random instances, unproven searches included."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest

from solver import knapsack
from solver.knapsack import NODE_LIMIT, BillModel, Packing, max_capacity, min_bill, staircase


@pytest.fixture(params=["reference", "compiled"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The searches' path for the test: the reference, or the compiled copies (numba is a
    dependency: they must load, a test does not skip)."""
    if request.param == "reference":
        with knapsack.reference():
            yield "reference"
        return
    monkeypatch.setattr(knapsack.COMPILED, "loaded", knapsack.COMPILED.loaded)  # as it was, after the test
    knapsack.load()
    assert knapsack.numba_search() is not None, "the compiled searches did not load (COSINE_KERNELS=numpy?)"
    yield "compiled"


def _instances(seed: int, n: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        items = int(rng.integers(1, 5))
        k = rng.choice([1, 2, 3, 4, 5, 6, 8], size=items, replace=False).astype(float)
        cost = np.round(rng.uniform(5, 60, size=items), 2)
        terms = [(), ((0.03, 29.0),), ((0.1, 5.0), (0.02, 40.0))][int(rng.integers(0, 3))]
        bill = BillModel(float(rng.choice([0.0, 12.5])), float(rng.choice([0.0, 3.0])), terms)
        cap = int(rng.integers(1, 7))
        min_nodes = int(rng.integers(1, 3))
        budget = float(rng.uniform(10, 300))
        yield k, cost, bill, cap, min_nodes, budget


def _vectors(items: int, cap: int):
    for v in itertools.product(range(cap + 1), repeat=items):
        if sum(v) <= cap:
            yield np.array(v)


def test_max_capacity_is_the_enumerated_optimum(path: str):
    seen = 0
    for k, cost, bill, cap, m, budget in _instances(1, 300):
        q = 1.0 / k
        coefs, rhs = bill.rows(cost, budget)
        got = max_capacity(q, coefs, rhs, cap, m, 1.0 - 1e-9)
        best = -math.inf
        for v in _vectors(k.size, cap):
            if v.sum() >= m and q @ v >= 1 - 1e-9 and bill.bill(cost, v) <= budget * (1 + 1e-12):
                best = max(best, float(q @ v))
        assert got.proven
        if best == -math.inf:
            assert got.counts is None
            continue
        seen += 1
        assert got.counts is not None and got.value == pytest.approx(best, rel=1e-12)
        assert bill.bill(cost, got.counts) <= budget * (1 + 1e-9) and got.counts.sum() <= cap
    assert seen > 100, "enough instances had a feasible cluster"


def test_min_bill_is_the_enumerated_optimum(path: str):
    seen = 0
    for k, cost, bill, cap, m, _ in _instances(2, 300):
        q = 1.0 / k
        q_min = float(np.random.default_rng(int(cost[0] * 100)).uniform(0.5, 2.0))
        got = min_bill(q, cost, bill, cap, m, q_min)
        best = math.inf
        for v in _vectors(k.size, cap):
            if v.sum() >= m and q @ v >= q_min * (1 - 1e-12):
                best = min(best, bill.bill(cost, v))
        assert got.proven
        if best == math.inf:
            assert got.counts is None
            continue
        seen += 1
        assert got.counts is not None and got.value == pytest.approx(best, rel=1e-12)
    assert seen > 100


def test_one_item_per_group_is_the_enumerated_optimum(path: str):
    """With group labels (one column per VM type) both searches equal enumeration of the count
    vectors that put nodes in at most one item of each group."""
    rng = np.random.default_rng(5)
    seen = 0
    for k, cost, bill, cap, m, budget in _instances(6, 300):
        groups = rng.integers(0, 2, size=k.size)
        q = 1.0 / k
        coefs, rhs = bill.rows(cost, budget)
        q_min = float(rng.uniform(0.5, 1.5))
        got = max_capacity(q, coefs, rhs, cap, m, 1.0 - 1e-9, groups=groups)
        cheap = min_bill(q, cost, bill, cap, m, q_min, groups=groups)
        best, least = -math.inf, math.inf
        for v in _vectors(k.size, cap):
            used = groups[v > 0]
            if len(set(used.tolist())) != used.size or v.sum() < m:
                continue
            if q @ v >= 1 - 1e-9 and bill.bill(cost, v) <= budget * (1 + 1e-12):
                best = max(best, float(q @ v))
            if q @ v >= q_min * (1 - 1e-12):
                least = min(least, bill.bill(cost, v))
        assert (got.counts is None) == (best == -math.inf)
        if got.counts is not None:
            seen += 1
            assert got.value == pytest.approx(best, rel=1e-12)
            picked = groups[got.counts > 0]
            assert len(set(picked.tolist())) == picked.size
        assert (cheap.counts is None) == (least == math.inf)
        if cheap.counts is not None:
            assert cheap.value == pytest.approx(least, rel=1e-12)
    assert seen > 100


def test_rows_are_the_bill():
    """bill <= budget exactly when every row of BillModel.rows holds."""
    rng = np.random.default_rng(3)
    bill = BillModel(7.0, 2.0, ((0.03, 29.0), (0.1, 5.0)))
    cost = np.array([10.0, 33.0, 71.0])
    for _ in range(500):
        v = rng.integers(0, 6, size=3)
        budget = float(rng.uniform(0, 600))
        coefs, rhs = bill.rows(cost, budget)
        assert (bill.bill(cost, v) <= budget) == bool((coefs @ v <= rhs + 1e-9).all())


def test_staircase_keeps_what_a_capacity_knapsack_needs():
    share = np.array([1.0, 1.0, 2.0, 2.0, 4.0, 3.0])
    cost = np.array([50.0, 40.0, 45.0, 20.0, 30.0, 25.0])
    # k=1: 40 (index 1); k=2: 20 (index 3); k=3 (25) and k=4 (30) cost more than k=2: dropped
    assert staircase(share, cost, np.arange(6)).tolist() == [1, 3]


def _same(a: Packing, b: Packing) -> bool:
    """Two searches' answers equal field by field (a nan bound equal to a nan)."""

    def eq(x: float, y: float) -> bool:
        return x == y or (x != x and y != y)

    if (a.counts is None) != (b.counts is None):
        return False
    if a.counts is not None and b.counts is not None and not np.array_equal(a.counts, b.counts):
        return False
    return eq(a.value, b.value) and a.proven == b.proven and eq(a.bound, b.bound) and a.nodes == b.nodes


def _random_instance(rng: np.random.Generator):
    """Up to 8 items (shares 1/k or any), costs with some 0 (a row coefficient 0: an infinite
    ratio, the reference's 0 * inf), bills with up to two percent terms and a transfer, caps to 60
    (counts above the reference's SCALAR_COUNTS), node minimums, groups (None, or labels from -3)
    and node limits from 0 (unproven searches)."""
    items = int(rng.integers(1, 9))
    q = 1.0 / rng.choice([1, 2, 3, 4, 5, 6, 8, 12, 16], size=items).astype(float)
    if rng.random() < 0.3:
        q = np.round(rng.uniform(0.05, 2.0, size=items), 3)
    cost = np.round(rng.uniform(0, 60, size=items), 2)
    if rng.random() < 0.2:
        cost[rng.integers(0, items)] = 0.0
    terms = [(), ((0.03, 29.0),), ((0.1, 5.0), (0.02, 40.0))][int(rng.integers(0, 3))]
    per_node = float(rng.choice([0.0, 0.0, 3.0]))
    bill = BillModel(float(rng.choice([0.0, 12.5])), per_node, terms, float(rng.choice([0.0, 7.0])))
    groups = None if rng.random() < 0.4 else rng.integers(-3, 3, size=items)
    node_limit = int(rng.choice([0, 1, 3, 10, 50, 1000, NODE_LIMIT]))
    return q, cost, bill, int(rng.integers(0, 60)), int(rng.integers(0, 4)), groups, node_limit


def test_the_compiled_searches_equal_the_reference(monkeypatch: pytest.MonkeyPatch):
    """On random instances the compiled searches' Packing equals the reference's: counts, value,
    whether proven, bound and nodes visited (the same exploration, node for node)."""
    monkeypatch.setattr(knapsack.COMPILED, "loaded", knapsack.COMPILED.loaded)
    knapsack.load()
    assert knapsack.numba_search() is not None, "the compiled searches did not load (COSINE_KERNELS=numpy?)"
    rng = np.random.default_rng(11)
    unproven = found = 0
    for _ in range(400):
        q, cost, bill, cap, m, groups, limit = _random_instance(rng)
        coefs, rhs = bill.rows(cost, float(rng.uniform(0, 2000)))
        q_min = float(rng.choice([0.0, rng.uniform(0, 3)]))
        beat = float(rng.choice([-math.inf, rng.uniform(0, 3)]))
        args = (q, coefs, rhs, cap, m, q_min)
        got = max_capacity(*args, floor_value=beat, node_limit=limit, groups=groups)
        with knapsack.reference():
            ref = max_capacity(*args, floor_value=beat, node_limit=limit, groups=groups)
        assert _same(got, ref), (args, beat, limit, groups, got, ref)
        need = float(rng.uniform(0, 5))
        ceiling = float(rng.choice([math.inf, rng.uniform(0, 2000)]))
        args2 = (q, cost, bill, cap, m, need)
        got2 = min_bill(*args2, ceiling=ceiling, node_limit=limit, groups=groups)
        with knapsack.reference():
            ref2 = min_bill(*args2, ceiling=ceiling, node_limit=limit, groups=groups)
        assert _same(got2, ref2), (args2, ceiling, limit, groups, got2, ref2)
        unproven += (not ref.proven) + (not ref2.proven)
        found += (ref.counts is not None) + (ref2.counts is not None)
    print(f"{unproven} unproven, {found} found of 800")
    assert unproven > 100 and found > 100, "both unproven searches and packings found were compared"
    # one signature each (the one load compiles or reads from numba's cache): no compilation mid-solve
    k = knapsack.numba_search()
    assert k is not None
    assert len(k.max_capacity.signatures) == 1 and len(k.min_bill.signatures) == 1


def test_numba_is_imported_only_by_load():
    """A process that never calls load (``cosine whatif``) runs the reference without importing
    numba; under COSINE_KERNELS=numpy load keeps the reference."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, numpy as np\n"
        "from solver import knapsack as k\n"
        "bill = k.BillModel(1.0, 0.5, ())\n"
        "coefs, rhs = bill.rows(np.array([10.0, 4.0]), 40.0)\n"
        "assert k.max_capacity(np.array([1.0, 0.5]), coefs, rhs, 3, 1, 0.5).counts is not None\n"
        "assert 'numba' not in sys.modules, 'numba was imported'\n"
        "assert k.load() == 0.0 and k.numba_search() is None\n"
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "COSINE_KERNELS": "numpy"}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, env=env)


def test_compiled_searches_load_after_enough_searches():
    """A process loads the compiled searches at its COMPILE_AFTER_SEARCHES-th search, not before
    (a what-if searching a few bands never imports numba), and the answers do not change there."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, numpy as np\n"
        "from solver import knapsack as k\n"
        "bill = k.BillModel(1.0, 0.5, ((0.03, 2.0),))\n"
        "rng = np.random.default_rng(7)\n"
        "q, cost = rng.uniform(0.2, 2.0, 6), rng.uniform(3.0, 30.0, 6)\n"
        "coefs, rhs = bill.rows(cost, 90.0)\n"
        "def one():\n"
        "    p = k.max_capacity(q, coefs, rhs, 12, 1, 0.5)\n"
        "    m = k.min_bill(q, cost, bill, 12, 1, 3.0)\n"
        "    return (p.counts.tolist(), p.value, p.bound, p.nodes, m.counts.tolist(), m.value, m.nodes)\n"
        "first = one()\n"
        "assert 'numba' not in sys.modules, 'numba was imported by a first search'\n"
        "while k._SEARCHES[0] < k.COMPILE_AFTER_SEARCHES - 2:\n"
        "    assert one() == first and k.numba_search() is None\n"
        "assert one() == first\n"
        "assert k.numba_search() is not None, 'not loaded at the threshold'\n"
        "assert one() == first, 'the compiled searches answer otherwise'\n"
    )
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
