"""The two small integer programs a band's threshold problem reduces to, solved exactly.

A cluster's capacity is Q = sum_c n_c / k_c: copies of the data its nodes could hold (a node of
column c is tabled holding N / k_c entries). solver.bottleneck values a cluster of columns at or
above a threshold t at t * Q, so per threshold it needs the largest Q the budget buys
(:func:`max_capacity`), and for the cheapest of equally fast clusters, or the cheapest reaching a
throughput, the least bill of a given Q (:func:`min_bill`).

Both are unbounded knapsacks over *items* with a cardinality row (the cluster cap) and the SLA's node
minimum. Of columns of one shard size (one k) only the cheapest can be needed (same Q per node,
and every row of the bill grows with a node's cost), and of two shard sizes the larger shard is
worth a node only if it is cheaper: :func:`staircase` keeps those. Both are solved by depth-first
branch and bound over the items (at most one per shard size, a few dozen), counts largest first,
pruned by the LP bound of each row alone (exact: a bound is never below what the branch holds), up
to :data:`NODE_LIMIT` nodes; a search stopped there says so (``proven`` False) and reports its bound.
tests/test_knapsack.py checks both against enumeration.

The bill (:class:`BillModel`) is linear in the nodes but for the percent-of-spend support plans
(``max(minimum, percent * spend)``): bill <= budget holds exactly when one linear row per subset
of those terms does (:meth:`BillModel.rows`).

A cluster runs at most one column per VM type (solution.json lists one design per VM type): both
searches take a group label per item and put nodes in at most one item of each group.

Plain numpy: `cosine whatif` may use it without the cost model. The searches below are the
reference; once :func:`load` ran (solver.frontier does, before a frontier's bands) each is run by
its copy compiled with numba (solver.knapsack_numba), equal to it node for node: the same
``Packing``, its bound and nodes visited included (tests/test_knapsack.py compares them).
``COSINE_KERNELS=numpy`` (or numba missing) keeps the reference, as for the design tables'
kernels (cost_models.kernels).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from cost_models.compiled import Compiled

#: Most branch-and-bound nodes one search visits before it stops unproven (a few ms each 1,000).
NODE_LIMIT = 200_000
#: Relative tolerance of comparisons of capacities and bills (as the oracle's).
REL_TOL = 1e-12
#: Below this many counts of an item a branch's bounds are computed one by one (numpy's overhead
#: per call is larger than the loop's).
SCALAR_COUNTS = 16


def _c(a: Any, dtype: Any = float) -> np.ndarray:
    """``a`` as the compiled searches take it: C-contiguous and writable (a read-only array, such as
    a broadcast view, would be another signature for numba to compile, at the first call)."""
    return np.require(a, dtype=dtype, requirements=["C", "W"])


def _first_calls(k: ModuleType) -> None:
    """Run both searches once on a tiny instance (numba loads or compiles their code on a first call)."""
    q, cost = np.array([1.0, 0.5]), np.array([10.0, 4.0])
    bill = BillModel(1.0, 0.5, ((0.03, 2.0),))
    coefs, rhs = bill.rows(cost, 40.0)
    for g in (None, np.array([0, 0])):
        max_capacity(q, coefs, rhs, 3, 1, 0.5, groups=g)
        min_bill(q, cost, bill, 3, 1, 1.0, groups=g)
    ints = np.zeros(1, dtype=np.int64)
    k.entering_sorted(ints, ints, ints, np.ones(1), ints, 1, 1, 1)
    k.staircase_members(ints, np.ones(1, dtype=bool), np.ones(1), ints, np.ones(1))
    ones = np.ones(1)
    k.floor_suffix(ints, ones, ones, 0, ones, ones, ones, ints, ints, ones, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0)
    k.floor_level_bounds(ints, ints, ones, ones, ones, ones, 1.0)


#: The compiled searches (cost_models.compiled): a cold frontier loads them before its band
#: searches fork (solver.frontier._prefetch); any other process once it has run
#: :data:`COMPILE_AFTER_SEARCHES` searches on the reference (:func:`_searched`).
COMPILED = Compiled("solver.knapsack_numba", _first_calls)
#: The compiled searches' module once :func:`load` loaded it, or None where the reference is to run.
numba_search = COMPILED.module
#: Within it, the reference searches run (what the compiled ones are checked against).
reference = COMPILED.reference
#: Load the compiled searches now: numba and their machine code. Returns the seconds it took (0
#: where the reference runs).
load = COMPILED.load

#: Searches a process runs on the reference before it loads the compiled ones. Loading (numba's
#: import and the searches' cached code) took 0.41 s in a `cosine whatif` (stop 63, cProfile); a
#: search takes ~2 ms on the reference and ~0.13 ms compiled (ycsb_a's 8,000: ~17 s against ~1 s,
#: solver.frontier), so the load pays for itself after ~200: a what-if or a warm solve that
#: searches a few bands (ycsb_a at half its budget: 50) never pays it.
COMPILE_AFTER_SEARCHES = 128
_SEARCHES = [0]


def _searched() -> ModuleType | None:
    """Count one search of this process, loading the compiled searches at the
    :data:`COMPILE_AFTER_SEARCHES`-th; the compiled module, or None where the reference is to run
    (the answer is the same either way: tests/test_knapsack.py)."""
    _SEARCHES[0] += 1
    if _SEARCHES[0] >= COMPILE_AFTER_SEARCHES and not COMPILED.loaded and COMPILED.forced is not False:
        load()  # (not within reference(): it would import numba for nothing)
    return numba_search()


@dataclass(frozen=True)
class BillModel:
    """A provider's monthly bill of a cluster: ``fixed`` (flat SLA terms and those per GB of
    data) + each node's ``cost`` (compute and storage) + ``per_node`` SLA terms + for each
    ``(percent, minimum)`` of ``percent_terms`` the larger of the minimum and the percent of the
    spend (compute and storage) and the ``transfer`` (a support plan is a percent of the
    provider's whole bill; cost_models.cloud.SlaTerms.support). ``fixed`` includes the transfer."""

    fixed: float
    per_node: float
    percent_terms: tuple[tuple[float, float], ...]
    transfer: float = 0.0

    def support(self, spend: Any) -> Any:
        """The percent-of-spend terms on the nodes' ``spend`` (a float or an array) and the transfer."""
        return sum((np.maximum(mn, pc * (spend + self.transfer)) for pc, mn in self.percent_terms), 0.0)

    def bill(self, cost: np.ndarray, counts: np.ndarray) -> float:
        """The bill of ``counts`` nodes of items costing ``cost`` each."""
        n = np.asarray(counts, dtype=float)
        spend = float(np.asarray(cost, dtype=float) @ n)
        return self.fixed + spend + self.per_node * float(n.sum()) + float(self.support(spend))

    def rows(self, cost: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray]:
        """(coefficients R x items, right-hand sides R): bill <= ``budget`` exactly when every row
        holds (one row per subset J of the percent terms: the terms in J at their percent, the
        others at their minimum)."""
        cost = np.asarray(cost, dtype=float)
        coefs, rhs = [], []
        terms = self.percent_terms
        for mask in itertools.product((False, True), repeat=len(terms)):
            pct = sum(pc for (pc, _), on in zip(terms, mask, strict=True) if on)
            mins = sum(mn for (_, mn), on in zip(terms, mask, strict=True) if not on)
            coefs.append(cost * (1.0 + pct) + self.per_node)
            rhs.append(budget - self.fixed - mins - pct * self.transfer)
        return np.array(coefs).reshape(len(coefs), cost.size), np.array(rhs, dtype=float)

    def most_nodes(self, cost: np.ndarray, budget: float) -> np.ndarray:
        """Per item, the most nodes of it alone whose bill fits ``budget`` (-1: not even none)."""
        coefs, rhs = self.rows(cost, budget)
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.floor(rhs[:, None] * (1 + REL_TOL) / coefs)
        per = np.where(rhs[:, None] < 0, -1.0, per)
        return per.min(axis=0) if per.size else np.zeros(0)


def staircase(share: np.ndarray, cost: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Of the columns ``idx`` (``share`` = k: nodes per copy of the data; ``cost`` per node), the
    ones a capacity knapsack can need: per shard size the cheapest (the first of equal ones), then
    only shard sizes cheaper than every larger shard. Returned largest shard (least k) first."""
    if idx.size == 0:
        return idx
    order = idx[np.lexsort((idx, cost[idx], share[idx]))]  # k ascending, then cost, then position
    return staircase_of_sorted(share, cost, order)


def staircase_of_sorted(share: np.ndarray, cost: np.ndarray, order: np.ndarray) -> np.ndarray:
    """:func:`staircase` of columns already in its order (shard size, then cost, then position): a
    subset of a sorted list keeps the order, so a caller sorts once."""
    if order.size == 0:
        return order
    k = share[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = k[1:] != k[:-1]
    cand = order[first]  # the cheapest of each shard size
    c = cost[cand]
    before = np.concatenate([[math.inf], np.minimum.accumulate(c)[:-1]])
    return np.asarray(cand[c < before * (1 - REL_TOL)], dtype=np.int64)


def staircase_by_group(share: np.ndarray, cost: np.ndarray, order: np.ndarray, group: np.ndarray) -> np.ndarray:
    """:func:`staircase_of_sorted` within each of ``group`` (a label per column), the union: when a
    packing may use one item of a group (one column per VM type), a column is dominated only by one
    of its own group (replacing it by one of another group could put two of that group in)."""
    if order.size == 0:
        return order
    o = order[np.argsort(group[order], kind="stable")]  # by group, each in the order given
    levels, rank = np.unique(cost, return_inverse=True)
    return staircase_of_grouped(share, group, o, levels, rank)


def staircase_of_grouped(
    share: np.ndarray, group: np.ndarray, order: np.ndarray, levels: np.ndarray, rank: np.ndarray
) -> np.ndarray:
    """:func:`staircase_by_group` of columns already sorted by group, then as :func:`staircase`
    (a subset of a sorted list keeps the order: a caller sorts once), the costs given as their
    distinct ``levels`` ascending and each column's ``rank`` in them: sorted column indices."""
    if order.size == 0:
        return order
    g, k = group[order], share[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = (g[1:] != g[:-1]) | (k[1:] != k[:-1])
    cand, gc = order[first], g[first]  # per group, the cheapest of each shard size
    r = rank[cand]
    start = np.ones(cand.size, dtype=bool)
    start[1:] = gc[1:] != gc[:-1]
    # the least cost of the larger shards of its group before each candidate: a running minimum
    # restarting at each group, exact on the costs' ranks (a group's offset exceeds every rank)
    m = levels.size
    seg = np.cumsum(start) - 1
    least = m - (np.maximum.accumulate(seg * (m + 1) + (m - r)) - seg * (m + 1))
    before = np.full(cand.size, math.inf)
    before[1:] = levels[least[:-1]]
    before[start] = math.inf
    return np.sort(cand[levels[r] < before * (1 - REL_TOL)]).astype(np.int64, copy=False)


@dataclass
class Packing:
    """A search's answer: counts per item (None: nothing feasible), its value, whether the search
    finished (else ``bound`` is the most any unexplored branch could hold) and nodes visited."""

    counts: np.ndarray | None
    value: float
    proven: bool
    bound: float
    nodes: int


def max_capacity(
    q: np.ndarray,
    coefs: np.ndarray,
    rhs: np.ndarray,
    cap: int,
    min_nodes: int,
    q_min: float,
    floor_value: float = -math.inf,
    node_limit: int = NODE_LIMIT,
    groups: np.ndarray | None = None,
) -> Packing:
    """max sum q_i n_i  s.t.  coefs n <= rhs (every row), sum n <= cap, sum n >= min_nodes,
    sum q n >= q_min, n integer >= 0, and at most one item of each of ``groups`` (a label per
    item; None: no such rule). ``floor_value``: only packings worth more are of interest (a known
    incumbent): the search prunes at it and returns None when none beats it."""
    q = np.asarray(q, dtype=float)
    n_items = q.size
    group_of = (np.zeros(n_items, dtype=np.int64) - np.arange(1, n_items + 1)) if groups is None else groups
    if n_items == 0 or (rhs < -1e-9 * np.maximum(np.abs(rhs), 1.0)).any() or cap < max(min_nodes, 1):
        return Packing(None, -math.inf, True, -math.inf, 0)
    with np.errstate(divide="ignore"):
        ratio = np.where(coefs > 0, q[None, :] / coefs, np.inf)
    order = np.lexsort((-q, -ratio[0]))  # best value per dollar of the first row, then per node
    q, coefs, ratio = q[order], coefs[:, order], ratio[:, order]
    grp = np.asarray(group_of)[order].tolist()
    taken: set[Any] = set()  # the groups of the items with nodes on the current branch
    # suffix maxima: the best any item from i on gives per dollar of each row, and per node
    suf_ratio = np.maximum.accumulate(ratio[:, ::-1], axis=1)[:, ::-1]
    suf_q = np.maximum.accumulate(q[::-1])[::-1]
    # whether the bound of what follows an item falls as fewer of it are taken (every row's and the
    # cardinality's: then the counts below one the bound prunes are pruned too)
    nxt_ratio = np.concatenate([suf_ratio[:, 1:], np.zeros((suf_ratio.shape[0], 1))], axis=1)
    nxt_q = np.append(suf_q[1:], 0.0)
    monotone = (q[None, :] >= coefs * nxt_ratio * (1 - 1e-12)).all(axis=0) & (q >= nxt_q)
    lam, mu = _budget_duals(q, coefs, suf_ratio, cap, rhs)
    k = _searched()
    # an infinite input the reference takes to its end (raising on some: an int of -inf) is left to it
    if k is not None and np.isfinite(q).all() and np.isfinite(coefs).all() and np.isfinite(rhs).all():
        shape = (coefs.shape[0], n_items + 1, lam.shape[2])
        labels, grp_of = np.unique(np.asarray(group_of)[order], return_inverse=True)
        got = k.max_capacity(
            _c(q),
            _c(coefs),
            _c(rhs),
            _c(suf_ratio),
            _c(suf_q),
            _c(monotone, bool),
            _c(np.broadcast_to(lam, shape)),
            _c(np.broadcast_to(mu, shape)),
            _c(grp_of.reshape(-1), np.int64),
            labels.size,
            int(cap),
            int(min_nodes),
            float(q_min),
            float(floor_value),
            int(node_limit),
            REL_TOL,
            SCALAR_COUNTS,
        )
        return _compiled_packing(got, order, node_limit, -math.inf, max)
    best = [floor_value]
    best_counts: list[np.ndarray | None] = [None]
    counts = np.zeros(n_items, dtype=np.int64)
    visited = [0]
    open_bound = [-math.inf]
    tol = REL_TOL

    suf_ratio_rows = [row.tolist() for row in suf_ratio.T]  # per item, each row's ratio (scalars)
    suf_q_list = suf_q.tolist()

    def bound_at(i: int, left: np.ndarray, slots: int, value: float) -> float:
        per_row = min(
            (max(lr, 0.0) * rt for lr, rt in zip(left.tolist(), suf_ratio_rows[i], strict=True)), default=math.inf
        )
        dual = float((lam[:, i, :] * np.maximum(left, 0.0)[:, None] + slots * mu[:, i, :]).min())
        return value + min(per_row, slots * suf_q_list[i], dual)

    def rec(i: int, left: np.ndarray, slots: int, value: float, used: int) -> None:
        visited[0] += 1
        if i == n_items:
            if value >= q_min * (1 - tol) and used >= min_nodes and value > best[0] * (1 + tol):
                best[0] = value
                best_counts[0] = counts.copy()
            return
        if visited[0] > node_limit:
            open_bound[0] = max(open_bound[0], bound_at(i, left, slots, value))
            return
        bound = bound_at(i, left, slots, value)
        if bound <= best[0] * (1 + tol) or bound < q_min * (1 - tol):
            return
        a = coefs[:, i]
        with np.errstate(divide="ignore", invalid="ignore"):
            fit = np.where(a > 0, np.floor(left * (1 + tol) / a), np.inf)
        hi = int(min(slots, float(fit.min()) if fit.size else slots))
        if hi < 0:
            return
        if grp[i] in taken:
            hi = 0  # another item of its group has nodes
        nxt = i + 1
        if nxt >= n_items:
            # the last item: the most of it that fits is best (every count only adds value and nodes)
            counts[i] = hi
            rec(nxt, left - hi * a, slots - hi, value + hi * q[i], used + hi)
            counts[i] = 0
            return
        if hi < SCALAR_COUNTS:
            rows_left, rates, qi = left.tolist(), suf_ratio[:, nxt].tolist(), float(q[i])
            ai, sq = a.tolist(), float(suf_q[nxt])
            bounds = [
                value
                + n * qi
                + min(
                    min(max(lr - ar * n, 0.0) * rt for lr, ar, rt in zip(rows_left, ai, rates, strict=True)),
                    (slots - n) * sq,
                )
                for n in range(hi, -1, -1)
            ]
        else:
            # every count's bound at once (the counts the bound prunes are skipped)
            ns = np.arange(hi, -1, -1)
            lefts = np.maximum(left[:, None] - a[:, None] * ns[None, :], 0.0)
            per_row = (lefts * suf_ratio[:, nxt][:, None]).min(axis=0)
            bounds = (value + ns * q[i] + np.minimum(per_row, (slots - ns) * suf_q[nxt])).tolist()
        # the duals' bound (each row and the cap together), count by count
        ns_arr = np.arange(hi, -1, -1)
        lefts = np.maximum(left[:, None] - a[:, None] * ns_arr[None, :], 0.0)  # rows x counts
        dual = (lam[:, nxt, :, None] * lefts[:, None, :] + mu[:, nxt, :, None] * (slots - ns_arr)).min(axis=(0, 1))
        duals = (value + ns_arr * q[i] + dual).tolist()
        for n, nb, db in zip(range(hi, -1, -1), bounds, duals, strict=True):
            if nb <= best[0] * (1 + tol) or nb < q_min * (1 - tol):
                if monotone[i]:  # so is every smaller count's (of this bound, not the duals')
                    break
                continue
            if db <= best[0] * (1 + tol) or db < q_min * (1 - tol):
                continue
            counts[i] = n
            fresh = n > 0 and grp[i] not in taken
            if fresh:
                taken.add(grp[i])
            rec(nxt, left - n * a, slots - n, value + n * q[i], used + n)
            if fresh:
                taken.discard(grp[i])
        counts[i] = 0

    rec(0, np.asarray(rhs, dtype=float).copy(), int(cap), 0.0, 0)
    proven = visited[0] <= node_limit
    out = best_counts[0]
    if out is not None:
        undo = np.empty_like(out)
        undo[order] = out
        out = undo
    value = best[0] if out is not None else -math.inf
    bound = value if proven else max(value, open_bound[0])
    return Packing(out, value, proven, bound, visited[0])


#: Fractions of an item suffix's best copies per dollar at which :func:`_budget_duals` prices the budget.
BUDGET_DUALS = tuple(float(f) for f in np.geomspace(0.02, 0.98, 10))


def _suffix_max(v: np.ndarray) -> np.ndarray:
    """Along the last axis, the maximum of each element and those after it."""
    return np.maximum.accumulate(v[..., ::-1], axis=-1)[..., ::-1]


def _budget_duals(
    q: np.ndarray, coefs: np.ndarray, suf_ratio: np.ndarray, cap: int, rhs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Upper bounds on the copies ``S`` more nodes of the items from i on hold within ``L`` more of a
    budget row r (``q`` per node, ``coefs`` rows x items): for every lambda >= 0, sum q n <= lambda L
    + S max(0, max_j (q_j - lambda a_rj)) (weak duality of the LP of the row and the cap). Per row,
    at lambda = its best q/a over all items times each of :data:`BUDGET_DUALS` (lambda = 0 and a
    suffix's best are the slots' and the row's own bounds, kept apart): (lambda, the slot price of
    each suffix), each rows x (items + 1) x fractions, the last suffix empty. Only the slots' own
    bound (lambda 0) when the cap cannot bind: the most nodes of the cheapest item a row buys is
    within it."""
    n = q.size
    if cap * float(coefs.min(axis=1).min()) >= float(rhs.max()) * (1 + REL_TOL):
        return np.zeros((1, n + 1, 1)), np.full((1, n + 1, 1), float(q.max()))  # the slots' own bound
    best = suf_ratio[:, 0]
    best = np.where(np.isfinite(best), best, 0.0)
    lam = best[:, None] * np.asarray(BUDGET_DUALS)[None, :]  # rows x fraction
    val = q[None, None, :] - lam[:, :, None] * coefs[:, None, :]  # rows x fraction x j
    mu = np.maximum(np.concatenate([_suffix_max(val), np.zeros(lam.shape + (1,))], axis=2), 0.0)
    return np.broadcast_to(lam[:, None, :], (lam.shape[0], n + 1, lam.shape[1])), mu.transpose(0, 2, 1)


#: Multiples of the items' least bill per copy at which :func:`_slot_duals` prices a node slot.
SLOT_DUALS = tuple(float(f) for f in np.geomspace(1.05, 64.0, 12))


def _slot_duals(q: np.ndarray, w: np.ndarray, cap: int, q_min: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower bounds on the least bill of ``S`` more nodes of the items from i on holding ``D`` more
    copies (``q`` per node, bill ``w``), with the cap: for every lambda >= 0, sum w n >= lambda D - S
    max(0, max_j (lambda q_j - w_j)) (weak duality of the LP with the cardinality row). At lambda
    = the items' least w/q times each of :data:`SLOT_DUALS` (that least itself, the bound without
    the cap, is kept apart): (lambda, the slot price of each suffix), each items x multiples. None
    bound (zero-size arrays) when the cap cannot bind: every item alone holds ``q_min`` within it."""
    n = q.size
    if cap * float(q.min()) >= q_min * (1 + REL_TOL):
        return np.zeros((n, 0)), np.zeros((n, 0))
    lam = float((w / q).min()) * np.asarray(SLOT_DUALS)  # multiples
    gap = np.maximum(_suffix_max(lam[:, None] * q[None, :] - w[None, :]), 0.0)  # multiple x i
    return np.broadcast_to(lam[None, :], (n, lam.size)), gap.T


def min_bill(
    q: np.ndarray,
    cost: np.ndarray,
    bill: BillModel,
    cap: int,
    min_nodes: int,
    q_min: float,
    ceiling: float = math.inf,
    node_limit: int = NODE_LIMIT,
    groups: np.ndarray | None = None,
) -> Packing:
    """The least bill of a cluster with sum q n >= ``q_min``, sum n in [min_nodes, cap], n integer
    >= 0, at most one item of each of ``groups`` (``Packing.value``: that bill). ``ceiling``: only
    bills below it are of interest."""
    q = np.asarray(q, dtype=float)
    cost = np.asarray(cost, dtype=float)
    n_items = q.size
    group_of = (np.zeros(n_items, dtype=np.int64) - np.arange(1, n_items + 1)) if groups is None else groups
    if n_items == 0 or cap < max(min_nodes, 1):
        return Packing(None, math.inf, True, math.inf, 0)
    w = cost + bill.per_node
    per_q = w / q  # bill per copy of the data, the percent terms left out (they only add)
    order = np.lexsort((-q, per_q))
    q, cost, w, per_q = q[order], cost[order], w[order], per_q[order]
    grp = np.asarray(group_of)[order].tolist()
    taken: set[Any] = set()
    suf_per_q = np.minimum.accumulate(per_q[::-1])[::-1]
    suf_w = np.minimum.accumulate(w[::-1])[::-1]
    suf_q = np.maximum.accumulate(q[::-1])[::-1]  # the most copies a node of an item from i on holds
    lam, gap = _slot_duals(q, w, cap, q_min)
    k = _searched()
    # (the reference raises on a copies per node of 0 or an infinite need: a ceil of inf)
    if k is not None and np.isfinite(q).all() and (q > 0).all() and math.isfinite(q_min):
        labels, grp_of = np.unique(np.asarray(group_of)[order], return_inverse=True)
        got = k.min_bill(
            _c(q),
            _c(cost),
            _c(w),
            _c(suf_per_q),
            _c(suf_w),
            _c(suf_q),
            _c(lam),
            _c(gap),
            _c(grp_of.reshape(-1), np.int64),
            labels.size,
            np.array([pc for pc, _ in bill.percent_terms], dtype=float),
            np.array([mn for _, mn in bill.percent_terms], dtype=float),
            float(bill.transfer),
            float(bill.fixed),
            int(cap),
            int(min_nodes),
            float(q_min),
            float(ceiling),
            int(node_limit),
            REL_TOL,
        )
        return _compiled_packing(got, order, node_limit, math.inf, min)
    best = [ceiling]
    best_counts: list[np.ndarray | None] = [None]
    counts = np.zeros(n_items, dtype=np.int64)
    visited = [0]
    open_bound = [math.inf]
    tol = REL_TOL

    def lower(i: int, value: float, used: int, wsum: float, spend: float) -> float:
        pct = float(bill.support(spend))
        short = max(0.0, q_min - value)
        rest = short * float(suf_per_q[i]) if i < n_items else (0.0 if value >= q_min else math.inf)
        extra_nodes = max(0, min_nodes - used)
        if i < n_items:
            slots = cap - used
            rest = max(rest, extra_nodes * float(suf_w[i]), float((lam[i] * short - slots * gap[i]).max(initial=0.0)))
            if short > slots * float(suf_q[i]) * (1 + tol):
                rest = math.inf  # the nodes the cap leaves cannot hold the data
        elif extra_nodes:
            rest = math.inf
        return bill.fixed + wsum + pct + rest

    def rec(i: int, value: float, used: int, wsum: float, spend: float) -> None:
        visited[0] += 1
        if i == n_items:
            if value >= q_min * (1 - tol) and used >= min_nodes:
                b = bill.fixed + wsum + float(bill.support(spend))
                if b < best[0] * (1 - tol):
                    best[0] = b
                    best_counts[0] = counts.copy()
            return
        lb = lower(i, value, used, wsum, spend)
        if visited[0] > node_limit:
            open_bound[0] = min(open_bound[0], lb)
            return
        if lb >= best[0] * (1 - tol):
            return
        need = max(0.0, q_min - value)
        hi = max(math.ceil(need / q[i] * (1 - tol)) if need > 0 else 0, min_nodes - used)
        hi = min(hi, cap - used)
        if hi < 0:
            return
        if grp[i] in taken:
            hi = 0
        ns = np.arange(hi, -1, -1)
        nxt = i + 1
        # every count's lower bound at once (lower(), vectorized); the ones it prunes are skipped
        sp = spend + ns * cost[i]
        pct = np.zeros(ns.size) + bill.support(sp)
        short = np.maximum(0.0, q_min - (value + ns * q[i]))
        extra = np.maximum(0, min_nodes - (used + ns))
        if nxt < n_items:
            rest = np.maximum(short * float(suf_per_q[nxt]), extra * float(suf_w[nxt]))
            slots = cap - used - ns
            dual = (lam[nxt][:, None] * short[None, :] - slots[None, :] * gap[nxt][:, None]).max(axis=0, initial=0.0)
            rest = np.maximum(rest, dual)
            # the nodes the cap leaves cannot reach the need
            rest = np.where(short > slots * float(suf_q[nxt]) * (1 + tol), math.inf, rest)
        else:
            rest = np.where((short > q_min * tol) | (extra > 0), math.inf, 0.0)
        lbs = bill.fixed + wsum + ns * w[i] + pct + rest
        for n, lb_n in zip(ns.tolist(), lbs.tolist(), strict=True):
            if lb_n >= best[0] * (1 - tol):
                continue
            counts[i] = n
            fresh = n > 0 and grp[i] not in taken
            if fresh:
                taken.add(grp[i])
            rec(nxt, value + n * q[i], used + n, wsum + n * w[i], spend + n * cost[i])
            if fresh:
                taken.discard(grp[i])
        counts[i] = 0

    rec(0, 0.0, 0, 0.0, 0.0)
    proven = visited[0] <= node_limit
    out = best_counts[0]
    if out is not None:
        undo = np.empty_like(out)
        undo[order] = out
        out = undo
    value = best[0] if out is not None else math.inf
    bound = value if proven else min(value, open_bound[0])
    return Packing(out, value, proven, bound, visited[0])


def _compiled_packing(
    got: tuple[np.ndarray, bool, float, int, float], order: np.ndarray, node_limit: int, none: float, worse: Any
) -> Packing:
    """A compiled search's answer (solver.knapsack_numba) as the reference words it: the counts in
    the items' own order, ``none`` the value of no packing, and unproven, the ``worse`` (max for a
    capacity, min for a bill) of the value and the node limit's open bound."""
    counts, found, best, visited, open_bound = got
    out = None
    if found:
        out = np.empty_like(counts)
        out[order] = counts
    value = float(best) if found else none
    proven = visited <= node_limit
    bound = value if proven else worse(value, float(open_bound))
    return Packing(out, value, proven, bound, int(visited))
