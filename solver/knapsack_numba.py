"""solver.knapsack's two branch-and-bound searches compiled by numba (imported by
solver.knapsack's :func:`~solver.knapsack.load` only).

Each is the reference search of solver.knapsack (the numpy path, which stays the reference) written
as a loop over an explicit stack: the same items in the same order, the same counts of each tried
largest first, the same bounds computed by the same floating-point operations in the same order,
the same pruning, tolerances and node limit, so that the answer, the bound and the nodes visited
are equal to the reference's, not only close (tests/test_knapsack.py compares them on random
instances, unproven searches included). The reference mixes Python's ``min``/``max`` (the first of
equals, a nan kept only when it comes first) and numpy's ``np.minimum``/``.min()`` (a nan wins):
each bound below uses the helper of the function the reference uses there, so that a 0 * inf (an
item whose row coefficient is 0) comes out as it does in the reference.

The inputs are the reference's after its common preparation (solver.knapsack): the items sorted,
the suffix bounds and the duals' prices, group labels renumbered 0..groups-1.
"""

from __future__ import annotations

from math import inf

import numpy as np
from numba import njit


@njit(cache=True)
def _py_min(a: float, b: float) -> float:  # pragma: no cover - compiled
    """Python's ``min(a, b)``: ``a`` unless ``b`` is less (a nan ``a`` is kept)."""
    return b if b < a else a


@njit(cache=True)
def _py_max(a: float, b: float) -> float:  # pragma: no cover - compiled
    """Python's ``max(a, b)``: ``a`` unless ``b`` is greater (a nan ``a`` is kept)."""
    return b if b > a else a


@njit(cache=True)
def _np_min(a: float, b: float) -> float:  # pragma: no cover - compiled
    """``np.minimum`` of two elements, and one step of ``.min()``: a nan wins."""
    if a != a or b != b:
        return a + b
    return a if a <= b else b


@njit(cache=True)
def _np_max(a: float, b: float) -> float:  # pragma: no cover - compiled
    """``np.maximum`` of two elements, and one step of ``.max()``: a nan wins."""
    if a != a or b != b:
        return a + b
    return a if a >= b else b


@njit(cache=True)
def _bound_at(
    left: np.ndarray,
    suf_ratio: np.ndarray,
    suf_q: np.ndarray,
    lam: np.ndarray,
    mu: np.ndarray,
    i: int,
    slots: int,
    value: float,
) -> float:  # pragma: no cover - compiled
    """The reference's ``bound_at``: the least of each row's LP bound (Python's min over the rows),
    the slots' and the budget duals' (numpy's min over rows and prices), above ``value``."""
    per_row = inf
    for r in range(left.size):
        x = _py_max(left[r], 0.0) * suf_ratio[r, i]
        per_row = x if r == 0 else _py_min(per_row, x)
    dual = inf
    for r in range(left.size):
        lr = _np_max(left[r], 0.0)
        for f in range(lam.shape[2]):
            dual = _np_min(dual, lam[r, i, f] * lr + slots * mu[r, i, f])
    return value + _py_min(_py_min(per_row, slots * suf_q[i]), dual)


@njit(cache=True)
def _count_bounds(
    left: np.ndarray,
    coefs: np.ndarray,
    q: np.ndarray,
    suf_ratio: np.ndarray,
    suf_q: np.ndarray,
    lam: np.ndarray,
    mu: np.ndarray,
    i: int,
    n: int,
    slots: int,
    value: float,
    scalar: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """The reference's two bounds of ``n`` nodes of item ``i`` (``bounds`` and ``duals``): the rows'
    and the slots' LP bounds of the items after it (in Python floats below SCALAR_COUNTS counts,
    else in numpy: the two treat a nan apart), and the budget duals'."""
    nxt = i + 1
    rest = (slots - n) * suf_q[nxt]
    per_row = inf
    for r in range(left.size):
        lr = left[r] - coefs[r, i] * n
        if scalar:
            x = _py_max(lr, 0.0) * suf_ratio[r, nxt]
            per_row = x if r == 0 else _py_min(per_row, x)
        else:
            per_row = _np_min(per_row, _np_max(lr, 0.0) * suf_ratio[r, nxt])
    base = value + n * q[i]
    nb = base + (_py_min(per_row, rest) if scalar else _np_min(per_row, rest))
    dual = inf
    for r in range(left.size):
        lr = _np_max(left[r] - coefs[r, i] * n, 0.0)
        for f in range(lam.shape[2]):
            dual = _np_min(dual, lam[r, nxt, f] * lr + mu[r, nxt, f] * (slots - n))
    return nb, base + dual


@njit(cache=True)
def max_capacity(
    q: np.ndarray,
    coefs: np.ndarray,
    rhs: np.ndarray,
    suf_ratio: np.ndarray,
    suf_q: np.ndarray,
    monotone: np.ndarray,
    lam: np.ndarray,
    mu: np.ndarray,
    grp: np.ndarray,
    n_groups: int,
    cap: int,
    min_nodes: int,
    q_min: float,
    floor_value: float,
    node_limit: int,
    tol: float,
    scalar_counts: int,
) -> tuple[np.ndarray, bool, float, int, float]:  # pragma: no cover - compiled
    """solver.knapsack.max_capacity's search over its sorted items (``coefs`` rows x items, ``lam``
    and ``mu`` rows x (items + 1) x prices, ``grp`` labels 0..n_groups-1): (the best counts, whether
    any beat ``floor_value``, its value, nodes visited, the bound of the branches the node limit
    left). The reference's recursion with a stack: per depth its branch's rows left, slots, value
    and nodes, and the next count to try."""
    n_items = q.size
    rows = rhs.size
    up = 1.0 + tol
    dn = 1.0 - tol
    left = np.empty((n_items + 1, rows))
    left[0, :] = rhs
    slots = np.zeros(n_items + 1, dtype=np.int64)
    value = np.zeros(n_items + 1)
    used = np.zeros(n_items + 1, dtype=np.int64)
    slots[0] = cap
    counts = np.zeros(n_items, dtype=np.int64)
    best_counts = np.zeros(n_items, dtype=np.int64)
    found = False
    best = floor_value
    taken = np.zeros(n_groups, dtype=np.bool_)  # the groups with nodes on the current branch
    fresh = np.zeros(n_items, dtype=np.bool_)  # whether the depth's count put its group in ``taken``
    next_n = np.zeros(n_items, dtype=np.int64)  # the next count to try at the depth
    scalar = np.zeros(n_items, dtype=np.bool_)  # whether the depth's counts are bounded in Python floats
    last = np.zeros(n_items, dtype=np.bool_)  # whether the depth is the last item (its most nodes only)
    visited = 0
    open_bound = -inf
    d = 0
    enter = True  # True: visit the node at depth d; False: try the next count at depth d
    while True:
        if enter:
            visited += 1
            if d == n_items:
                v = value[d]
                if v >= q_min * dn and used[d] >= min_nodes and v > best * up:
                    best = v
                    best_counts[:] = counts
                    found = True
                d -= 1
                enter = False
                continue
            if visited > node_limit:
                b = _bound_at(left[d], suf_ratio, suf_q, lam, mu, d, slots[d], value[d])
                open_bound = _py_max(open_bound, b)
                if d == 0:
                    break
                d -= 1
                enter = False
                continue
            b = _bound_at(left[d], suf_ratio, suf_q, lam, mu, d, slots[d], value[d])
            if b <= best * up or b < q_min * dn:
                if d == 0:
                    break
                d -= 1
                enter = False
                continue
            fit = inf  # numpy's min over the rows of the most nodes of the item each row buys
            for r in range(rows):
                a = coefs[r, d]
                fit = _np_min(fit, np.floor(left[d, r] * up / a) if a > 0 else inf)
            hi = int(fit) if fit < slots[d] else slots[d]
            if hi < 0:
                if d == 0:
                    break
                d -= 1
                enter = False
                continue
            if taken[grp[d]]:
                hi = 0  # another item of its group has nodes
            if d + 1 >= n_items:
                # the last item: the most of it that fits (every count only adds value and nodes)
                last[d] = True
                counts[d] = hi
                for r in range(rows):
                    left[d + 1, r] = left[d, r] - hi * coefs[r, d]
                slots[d + 1] = slots[d] - hi
                value[d + 1] = value[d] + hi * q[d]
                used[d + 1] = used[d] + hi
                d += 1
                continue
            last[d] = False
            fresh[d] = False
            next_n[d] = hi
            scalar[d] = hi < scalar_counts
            enter = False
        # the next count at depth d (after its previous count's branch, or the first)
        if last[d]:
            counts[d] = 0
            if d == 0:
                break
            d -= 1
            continue
        g = grp[d]
        if fresh[d]:
            taken[g] = False
            fresh[d] = False
        n = next_n[d]
        while n >= 0:
            nb, db = _count_bounds(left[d], coefs, q, suf_ratio, suf_q, lam, mu, d, n, slots[d], value[d], scalar[d])
            if nb <= best * up or nb < q_min * dn:
                if monotone[d]:  # so is every smaller count's (of this bound, not the duals')
                    n = -1
                    break
                n -= 1
                continue
            if db <= best * up or db < q_min * dn:
                n -= 1
                continue
            break
        if n < 0:
            counts[d] = 0
            if d == 0:
                break
            d -= 1
            continue
        next_n[d] = n - 1
        counts[d] = n
        if n > 0 and not taken[g]:
            taken[g] = True
            fresh[d] = True
        for r in range(rows):
            left[d + 1, r] = left[d, r] - n * coefs[r, d]
        slots[d + 1] = slots[d] - n
        value[d + 1] = value[d] + n * q[d]
        used[d + 1] = used[d] + n
        d += 1
        enter = True
    return best_counts, found, best, visited, open_bound


@njit(cache=True)
def _support(spend: float, pcs: np.ndarray, mins: np.ndarray, transfer: float) -> float:  # pragma: no cover
    """BillModel.support of one spend: Python's sum, from 0.0, of numpy's maximum per term."""
    s = 0.0
    for t in range(pcs.size):
        s = s + _np_max(mins[t], pcs[t] * (spend + transfer))
    return s


@njit(cache=True)
def _lower(
    suf_per_q: np.ndarray,
    suf_w: np.ndarray,
    suf_q: np.ndarray,
    lam: np.ndarray,
    gap: np.ndarray,
    pcs: np.ndarray,
    mins: np.ndarray,
    transfer: float,
    fixed: float,
    cap: int,
    min_nodes: int,
    q_min: float,
    tol: float,
    i: int,
    value: float,
    used: int,
    wsum: float,
    spend: float,
) -> float:  # pragma: no cover - compiled
    """The reference's ``lower`` at an item (not past the last): the branch's bill and the least
    the copies and nodes it lacks add."""
    pct = _support(spend, pcs, mins, transfer)
    short = _py_max(0.0, q_min - value)
    rest = short * suf_per_q[i]
    extra_nodes = max(0, min_nodes - used)
    slots = cap - used
    dual = 0.0  # numpy's max with initial=0.0
    for j in range(lam.shape[1]):
        dual = _np_max(dual, lam[i, j] * short - slots * gap[i, j])
    rest = _py_max(_py_max(rest, extra_nodes * suf_w[i]), dual)
    if short > slots * suf_q[i] * (1.0 + tol):
        rest = inf  # the nodes the cap leaves cannot hold the data
    return fixed + wsum + pct + rest


@njit(cache=True)
def _count_lower(
    q: np.ndarray,
    cost: np.ndarray,
    w: np.ndarray,
    suf_per_q: np.ndarray,
    suf_w: np.ndarray,
    suf_q: np.ndarray,
    lam: np.ndarray,
    gap: np.ndarray,
    pcs: np.ndarray,
    mins: np.ndarray,
    transfer: float,
    fixed: float,
    cap: int,
    min_nodes: int,
    q_min: float,
    tol: float,
    i: int,
    n: int,
    value: float,
    used: int,
    wsum: float,
    spend: float,
) -> float:  # pragma: no cover - compiled
    """The reference's lower bound of ``n`` nodes of item ``i`` (its ``lbs``, numpy's operations)."""
    n_items = q.size
    nxt = i + 1
    pct = 0.0 + _support(spend + n * cost[i], pcs, mins, transfer)
    short = _np_max(0.0, q_min - (value + n * q[i]))
    extra = max(0, min_nodes - (used + n))
    if nxt < n_items:
        rest = _np_max(short * suf_per_q[nxt], extra * suf_w[nxt])
        slots = cap - used - n
        dual = 0.0
        for j in range(lam.shape[1]):
            dual = _np_max(dual, lam[nxt, j] * short - slots * gap[nxt, j])
        rest = _np_max(rest, dual)
        if short > slots * suf_q[nxt] * (1.0 + tol):
            rest = inf  # the nodes the cap leaves cannot reach the need
    else:
        rest = inf if (short > q_min * tol) or (extra > 0) else 0.0
    return fixed + wsum + n * w[i] + pct + rest


@njit(cache=True)
def min_bill(
    q: np.ndarray,
    cost: np.ndarray,
    w: np.ndarray,
    suf_per_q: np.ndarray,
    suf_w: np.ndarray,
    suf_q: np.ndarray,
    lam: np.ndarray,
    gap: np.ndarray,
    grp: np.ndarray,
    n_groups: int,
    pcs: np.ndarray,
    mins: np.ndarray,
    transfer: float,
    fixed: float,
    cap: int,
    min_nodes: int,
    q_min: float,
    ceiling: float,
    node_limit: int,
    tol: float,
) -> tuple[np.ndarray, bool, float, int, float]:  # pragma: no cover - compiled
    """solver.knapsack.min_bill's search over its sorted items (``lam`` and ``gap`` items x
    multiples, ``pcs`` and ``mins`` the percent terms, ``grp`` labels 0..n_groups-1): (the best
    counts, whether any bill is below ``ceiling``, that bill, nodes visited, the bound of the
    branches the node limit left). The reference's recursion with a stack, as :func:`max_capacity`.
    ``q`` must be positive and finite and ``q_min`` finite (the reference raises otherwise)."""
    n_items = q.size
    dn = 1.0 - tol
    value = np.zeros(n_items + 1)
    used = np.zeros(n_items + 1, dtype=np.int64)
    wsum = np.zeros(n_items + 1)
    spend = np.zeros(n_items + 1)
    counts = np.zeros(n_items, dtype=np.int64)
    best_counts = np.zeros(n_items, dtype=np.int64)
    found = False
    best = ceiling
    taken = np.zeros(n_groups, dtype=np.bool_)
    fresh = np.zeros(n_items, dtype=np.bool_)
    next_n = np.zeros(n_items, dtype=np.int64)
    visited = 0
    open_bound = inf
    d = 0
    enter = True
    while True:
        if enter:
            visited += 1
            if d == n_items:
                if value[d] >= q_min * dn and used[d] >= min_nodes:
                    b = fixed + wsum[d] + _support(spend[d], pcs, mins, transfer)
                    if b < best * dn:
                        best = b
                        best_counts[:] = counts
                        found = True
                d -= 1
                enter = False
                continue
            lb = _lower(
                suf_per_q, suf_w, suf_q, lam, gap, pcs, mins, transfer, fixed, cap, min_nodes, q_min, tol, d,
                value[d], used[d], wsum[d], spend[d],
            )  # fmt: skip
            if visited > node_limit or lb >= best * dn:
                if visited > node_limit:
                    open_bound = _py_min(open_bound, lb)
                if d == 0:
                    break
                d -= 1
                enter = False
                continue
            need = _py_max(0.0, q_min - value[d])
            # max(ceil(need / q * (1 - tol)) or 0, min_nodes - used), in floats (ints compare alike)
            most = _py_max(np.ceil(need / q[d] * dn) if need > 0 else 0.0, float(min_nodes - used[d]))
            room = cap - used[d]
            hi = room if most >= room else int(most)
            if hi < 0:
                if d == 0:
                    break
                d -= 1
                enter = False
                continue
            if taken[grp[d]]:
                hi = 0
            fresh[d] = False
            next_n[d] = hi
            enter = False
        # the next count at depth d
        g = grp[d]
        if fresh[d]:
            taken[g] = False
            fresh[d] = False
        n = next_n[d]
        while n >= 0:
            lb_n = _count_lower(
                q, cost, w, suf_per_q, suf_w, suf_q, lam, gap, pcs, mins, transfer, fixed, cap, min_nodes, q_min,
                tol, d, n, value[d], used[d], wsum[d], spend[d],
            )  # fmt: skip
            if lb_n >= best * dn:
                n -= 1
                continue
            break
        if n < 0:
            counts[d] = 0
            if d == 0:
                break
            d -= 1
            continue
        next_n[d] = n - 1
        counts[d] = n
        if n > 0 and not taken[g]:
            taken[g] = True
            fresh[d] = True
        value[d + 1] = value[d] + n * q[d]
        used[d + 1] = used[d] + n
        wsum[d + 1] = wsum[d] + n * w[d]
        spend[d + 1] = spend[d] + n * cost[d]
        d += 1
        enter = True
    return best_counts, found, best, visited, open_bound


@njit(cache=True)
def entering_sorted(
    order: np.ndarray,
    levels_end: np.ndarray,
    ranks: np.ndarray,
    costs: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    n_ranks: int,
    n_out: int,
) -> np.ndarray:  # pragma: no cover - compiled
    """solver.bottleneck.entering's pass over the usable columns by decreasing value (``order``;
    ``levels_end``: each level's last position; per position its shard-size rank, cost and VM type
    0..n_groups-1): whether each column enters its level's items. The reference's per-type prefix
    minima (the least cost of any shard size up to each rank, absent = inf) as one array."""
    out = np.zeros(n_out, dtype=np.bool_)
    least = np.full((n_groups, n_ranks), inf)
    start = 0
    for end in levels_end:
        for j in range(start, end + 1):  # a level's columns are compared with the levels above
            if costs[j] < least[groups[j], ranks[j]] * (1 - 1e-12):
                out[order[j]] = True
        for j in range(start, end + 1):
            g, c = groups[j], costs[j]
            for rr in range(ranks[j], n_ranks):
                if c < least[g, rr]:
                    least[g, rr] = c
                else:
                    break
        start = end + 1
    return out


@njit(cache=True)
def staircase_members(
    by_gk: np.ndarray, member: np.ndarray, share: np.ndarray, group: np.ndarray, cost: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """solver.knapsack.staircase_of_grouped of the columns in ``member``, ``by_gk`` every column
    sorted by VM type, shard size, cost and position: per type, the first of each shard size when
    it is cheaper (relative 1e-12) than every larger shard's first before it. Sorted indices."""
    out = np.empty(by_gk.size, dtype=np.int64)
    m = 0
    prev_g = -1
    prev_k = 0.0
    least = inf
    started = False
    for i in by_gk:
        if not member[i]:
            continue
        g, k = group[i], share[i]
        if not started or g != prev_g:
            started, prev_g, least = True, g, inf
        elif k == prev_k:
            continue  # not the first of its shard size
        prev_k = k
        c = cost[i]
        if c < least * (1 - 1e-12):
            out[m] = i
            m += 1
        if c < least:
            least = c
    return np.sort(out[:m])


@njit(cache=True)
def _segment_stair(
    lo: int,
    hi: int,
    by_gk: np.ndarray,
    member: np.ndarray,
    share: np.ndarray,
    cost: np.ndarray,
    per_copy: np.ndarray,
    w: np.ndarray,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """:func:`staircase_members` over one VM type's run ``by_gk[lo:hi]`` of the ``member`` columns:
    the least floor throughput ``per_copy`` and the least cost of a copy (share x w) of its items
    (inf, inf when it has none)."""
    tau = inf
    copy = inf
    started = False
    prev_k = 0.0
    least = inf
    for p in range(lo, hi):
        i = by_gk[p]
        if not member[i]:
            continue
        k = share[i]
        if not started:
            started, least = True, inf
        elif k == prev_k:
            continue  # not the first of its shard size
        prev_k = k
        c = cost[i]
        if c < least * (1 - 1e-12):
            tau = _np_min(tau, per_copy[i])
            copy = _np_min(copy, share[i] * w[i])
        if c < least:
            least = c
    return tau, copy


@njit(cache=True)
def floor_suffix(
    ws: np.ndarray,
    w_of: np.ndarray,
    suffix_copy: np.ndarray,
    pos: int,
    per_copy: np.ndarray,
    share: np.ndarray,
    w: np.ndarray,
    by_gk: np.ndarray,
    group: np.ndarray,
    cost: np.ndarray,
    fixed: float,
    least_need: float,
    base: float,
    at_least: float,
    ceiling: float,
    keep: float,
) -> tuple[np.ndarray, float, int]:  # pragma: no cover - compiled
    """solver.bottleneck._cheapest_as_fast's walk over a branch's suffixes by floor throughput from
    ``pos``, as its reference (``item_sets`` and the test that follows it) walks them: the first
    suffix whose items' lower bill is below ``ceiling`` (the best bill so far times ``keep``, 1 -
    TIE_TOL), as (items, their need, the next suffix's position); no items and position -1 once a
    suffix's bound reaches the ceiling or none is left. ``ws`` the branch by floor throughput
    ``w_of``, ``suffix_copy`` each suffix's least cost of a copy. The same floating-point operations
    as the reference (a least of equal values and nans alike whatever the order). A suffix's items
    are :func:`staircase_members`', a staircase per VM type (``by_gk``'s runs of one ``group``): the
    walk keeps each type's least floor throughput and cost of a copy, and a step recomputes only the
    types whose columns it drops."""
    n = share.size
    member = np.zeros(n, dtype=np.bool_)
    for j in range(pos, ws.size):
        member[ws[j]] = True
    # by_gk's runs of one VM type
    seg_of = np.empty(n, dtype=np.int64)
    seg_lo = np.empty(by_gk.size + 1, dtype=np.int64)
    segs = 0
    for p in range(by_gk.size):
        if p == 0 or group[by_gk[p]] != group[by_gk[p - 1]]:
            seg_lo[segs] = p
            segs += 1
        seg_of[by_gk[p]] = segs - 1
    seg_lo[segs] = by_gk.size
    tau_s = np.empty(segs)
    copy_s = np.empty(segs)
    for g in range(segs):
        tau_s[g], copy_s[g] = _segment_stair(seg_lo[g], seg_lo[g + 1], by_gk, member, share, cost, per_copy, w)
    dirty = np.zeros(segs, dtype=np.bool_)
    while pos < ws.size:
        if fixed + least_need * suffix_copy[pos] >= ceiling:
            break  # fewer columns cost no less
        tau = inf
        copy = inf
        for g in range(segs):
            tau = _np_min(tau, tau_s[g])
            copy = _np_min(copy, copy_s[g])
        q_need = _py_max(base, at_least / tau * keep)
        nxt = int(np.searchsorted(w_of, tau, side="right"))
        if fixed + q_need * copy < ceiling:
            return staircase_members(by_gk, member, share, group, cost), q_need, nxt
        for j in range(pos, min(nxt, ws.size)):
            member[ws[j]] = False
            dirty[seg_of[ws[j]]] = True
        for g in range(segs):
            if dirty[g]:
                tau_s[g], copy_s[g] = _segment_stair(seg_lo[g], seg_lo[g + 1], by_gk, member, share, cost, per_copy, w)
                dirty[g] = False
        pos = nxt
    return np.zeros(0, dtype=np.int64), 0.0, -1


@njit(cache=True)
def floor_level_bounds(
    which: np.ndarray,
    last: np.ndarray,
    qub: np.ndarray,
    w_order: np.ndarray,
    copy_order: np.ndarray,
    k_order: np.ndarray,
    need: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """solver.bottleneck._best_in_class's floor round per level of ``which``: over the columns
    (by decreasing value) up to the level's ``last`` whose floor throughput ``w_order`` times the
    level's LP capacity ``qub`` reaches ``need``, the least cost of a copy, the least share
    (inf where none) and whether any does; the reference's levels x columns masks, as loops."""
    m = which.size
    least_copy = np.full(m, inf)
    least_share = np.full(m, inf)
    some = np.zeros(m, dtype=np.bool_)
    for a in range(m):
        li = which[a]
        q = qub[li]
        c = inf
        k = inf
        for j in range(last[li] + 1):
            if w_order[j] * q >= need:
                c = _np_min(c, copy_order[j])
                k = _np_min(k, k_order[j])
                some[a] = True
        least_copy[a] = c
        least_share[a] = k
    return least_copy, least_share, some
