"""Every other node count of the answer's own nodes, exactly: the certificate's grid_gap.

The band model (solver.bottleneck) values a node of column c at its tabled rate x_c whatever the
keys it holds below its shard s_c: a lower bound when a node holding fewer keys is no slower. The
exact model says when it is not. For one design on one VM and volume, the node's throughput rises
as its keys fall *within a layout* (the levels L and cold levels Y of the tree: tests/test_grid.py
checks it on every shipped spec), and drops where a level goes (a tiered tree of one level merges
more per update than one of two). So over a range of keys the most a node reaches is at the
smallest keys of each layout's stretch.

:func:`check_counts` takes an answer (column groups with their counts) and the budget, and finds
the most any count vector of the same columns reaches within the budget and the cluster cap,
exactly:

* per group, the keys its nodes can hold run from its shard s_c down to s_c / Q_hi, Q_hi the
  largest capacity (copies of the data) a count vector of these columns affords
  (solver.knapsack.max_capacity); the layout at both ends is compared (the table's at s_c, the
  exact model's at the other), and where it differs the changes are found by bisection (over node
  counts for one group, whose keys are N / n: exactly; over keys to :data:`KEYS_TOL` for several);
  the node's rate is taken at the smallest keys of each stretch;
* the bound, per subset S of the groups, is min over S of k_g x_g (a copy of the data's worth at
  those rates) times the largest capacity a count vector of S buys (keys are spread in proportion
  to capacity: a node of g in a cluster of capacity Q holds s_g / Q keys and limits the cluster to
  k_g x_g Q), the most over the subsets;
* for one group, the stretches' ends are themselves clusters: the best of them, evaluated
  exactly, is the bound, and when it beats the answer it *is* the answer (``better``).

``gap`` = (bound - the answer's exact throughput) / the answer's exact throughput.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solver.bottleneck import ColumnTable, Nodes
from solver.exact import NodeRate
from solver.knapsack import max_capacity
from solver.tables.context import Context

#: Keys between two layouts are told apart to this relative precision (several groups).
KEYS_TOL = 1e-9


@dataclass
class GridCheck:
    """What :func:`check_counts` found."""

    bound: float  # ops/s: no count vector of the answer's columns within the budget is faster
    gap: float  # (bound - exact) / exact
    better: Nodes | None  # a count of the answer's own column that is faster than the answer
    evaluations: int


#: The exact rate of a node of a column at a key count (solver.exact.Reevaluations.node_rate).
Rate = Callable[[Context, float], NodeRate]


def _value(r: NodeRate, perturbed: bool) -> float:
    return r.xp if perturbed else r.x


def _stretch_ends(
    rate: Rate, c: Context, lo: int, hi: int, at_hi: NodeRate, layout_lo: tuple[int, int], N: float
) -> list[int]:
    """Counts n in [lo, hi] (keys N / n) that end a stretch of one layout (the largest count of
    each), ``hi`` included: bisection over counts between ends whose layouts differ."""
    ends = [hi]
    stack = [(lo, layout_lo, hi, at_hi.layout)]
    while stack:
        a, la, b, lb = stack.pop()
        if la == lb or b - a <= 1:
            if la != lb:
                ends.append(a)  # a is the last count of its layout
            continue
        m = (a + b) // 2
        lm = rate(c, N / m).layout
        stack += [(a, la, m, lm), (m, lm, b, lb)]
    return sorted(set(ends))


def _sup_keys(rate: Rate, c: Context, s_lo: float, s_hi: float, layout_hi: tuple[int, int], perturbed: bool) -> float:
    """The most a node of ``c`` reaches holding keys in [s_lo, s_hi] (the layout at ``s_hi`` given):
    the rate at the smallest keys of each layout's stretch, found by bisection over keys."""
    r_lo = rate(c, s_lo)
    best = _value(r_lo, perturbed)
    stack = [(s_lo, r_lo.layout, s_hi, layout_hi)]
    while stack:
        a, la, b, lb = stack.pop()
        if la == lb:
            continue
        if b <= a * (1 + KEYS_TOL):
            best = max(best, _value(rate(c, b), perturbed))  # the smallest keys of b's stretch
            continue
        m = math.sqrt(a * b)
        lm = rate(c, m).layout
        stack += [(a, la, m, lm), (m, lm, b, lb)]
    return best


def check_counts(
    tab: ColumnTable,
    nodes: Nodes,
    budget: float,
    exact_ops: float,
    rate: Rate,
    *,
    perturbed: bool = False,
    answer_rate: NodeRate | None = None,
) -> GridCheck:
    """The count check of an answer ``nodes`` (columns of ``tab`` and counts) at ``budget``, on the
    expected throughput (``perturbed``: the perturbed one); ``exact_ops`` is the answer's exact
    throughput, and ``answer_rate`` its node's exact figures when it is one group (saves their
    evaluation)."""
    calls = [0]

    def counted(c: Context, keys: float) -> NodeRate:
        calls[0] += 1
        return rate(c, keys)

    N = float(tab.share[nodes[0][0]] * tab.contexts[nodes[0][0]].entries)
    cols = np.array([i for i, _ in nodes], dtype=np.int64)
    coefs, rhs = tab.bill_model.rows(tab.cost[cols], budget)
    m = tab.terms.min_nodes
    if len(nodes) == 1:
        i, n_ans = nodes[0]
        c = tab.contexts[i]
        k_c = int(math.ceil(tab.share[i] * (1 - 1e-9)))
        most = int(min(tab.bill_model.most_nodes(tab.cost[[i]], budget)[0], tab.max_cluster))
        hi = max(most, n_ans)
        lo = max(k_c, m)
        at_hi = answer_rate if answer_rate is not None and hi == n_ans else counted(c, N / hi)
        # the table's layout is the node's at its own shard (k_c nodes)
        layout_lo = (c.levels, c.cold_levels) if lo == k_c else counted(c, N / lo).layout
        ends = _stretch_ends(counted, c, lo, hi, at_hi, layout_lo, N)
        # n units of tab.unit nodes each (N / n keys per node: N is the data over the unit)
        worth = {n: n * tab.unit * _value(at_hi if n == hi else counted(c, N / n), perturbed) for n in ends}
        n_best = max(worth, key=lambda n: (worth[n], -n))
        bound = max(worth[n_best], exact_ops)
        better = [(i, n_best)] if n_best != n_ans and worth[n_best] > exact_ops * (1 + 1e-9) else None
        return GridCheck(bound, bound / exact_ops - 1 if exact_ops > 0 else 0.0, better, calls[0])
    # several groups: a node of group g in a cluster of capacity Q holds s_g / Q keys and limits X
    # to k_g x_g Q; its rate over every capacity the budget buys is at most its best over the keys
    # down to s_g / Q_hi, and a cluster of a subset S of the groups has Q at most Q_hi(S)
    q = 1.0 / tab.share[cols]
    q_hi = _most_capacity(q, coefs, rhs, tab.max_cluster, m, np.ones(len(nodes), dtype=bool))
    per_copy: list[float] = []
    for (i, _), g_q in zip(nodes, q, strict=True):
        c = tab.contexts[i]
        s_hi = float(c.entries)
        best = _sup_keys(counted, c, s_hi / max(q_hi, 1.0), s_hi, (c.levels, c.cold_levels), perturbed)
        per_copy.append(best * tab.unit / g_q)  # k_g x_g: ops/s per copy of the data
    bound = exact_ops
    for size in range(1, len(nodes) + 1):
        for subset in itertools.combinations(range(len(nodes)), size):
            use = np.zeros(len(nodes), dtype=bool)
            use[list(subset)] = True
            q_s = _most_capacity(q, coefs, rhs, tab.max_cluster, m, use)
            if q_s > 0:
                bound = max(bound, min(per_copy[j] for j in subset) * q_s)
    return GridCheck(bound, bound / exact_ops - 1 if exact_ops > 0 else 0.0, None, calls[0])


def _most_capacity(
    q: np.ndarray, coefs: np.ndarray, rhs: np.ndarray, cap: int, min_nodes: int, use: np.ndarray
) -> float:
    """The largest capacity a count vector of the groups in ``use`` (each at least one node) buys:
    solver.knapsack.max_capacity after one node of each (0 when that does not fit)."""
    base = coefs[:, use].sum(axis=1)
    left = rhs - base
    slots = cap - int(use.sum())
    if (left < 0).any() or slots < 0:
        return 0.0
    got = max_capacity(q[use], coefs[:, use], left, slots, max(0, min_nodes - int(use.sum())), 0.0)
    extra = got.bound if not got.proven else got.value
    return float(q[use].sum() + max(extra, 0.0))
