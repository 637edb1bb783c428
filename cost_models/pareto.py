"""Pareto filtering: which rows of a table no other row dominates.

Used wherever a choice is kept only if nothing cheaper is at least as good in
every respect: storage volumes (dollars, size, IOPS, MiB/s), candidate engine
designs (disk space, I/O per operation), and MIP columns (dollars, expected
and perturbed throughput). Dropping a dominated row never changes an optimum
that is monotone in every column, which is what makes the pruning exact.
"""

from __future__ import annotations

import numpy as np

from cost_models.kernels import numba_kernels

#: Rows checked against the current front at once (the rest of a chunk is then
#: scanned one by one); bounds the temporary (chunk x front x columns) array.
CHUNK = 256
#: Most distinct values of the first column for which three columns are filtered group by
#: group (:func:`_dominated_3`); beyond it, chunk by chunk.
STAIRCASE_GROUPS = 64
#: Fewest rows for that staircase: below it the chunks are faster (a few whole-array
#: comparisons against a staircase's sort per group).
STAIRCASE_ROWS_MIN = 1024
#: With more columns than three and more rows than PIVOT_ROWS_MIN, the rows PIVOTS strong rows
#: strictly dominate are dropped first (:func:`_strictly_dominated`): the design tables' fronts
#: keep ~1 % of ~10,000 rows, and this drops most of the rest at a few comparisons each.
#: (Which rows are pivots changes only the speed: any row a row strictly dominates is dominated.)
PIVOTS = 8
PIVOT_ROWS_MIN = 4 * CHUNK
#: Before the pivots, on such tables the first PEELS rows of the front (in lexicographic
#: order) are found one at a time, each dropping every other row it weakly dominates
#: (:func:`_peel`): a design table's ~17 front rows of ~6,000 cost a pass over the rows left each
#: (the first drops ~90 % of them).
PEELS = 32
#: :func:`_peel` copies out the rows left once they are at most this share of its table: after a
#: peel that drops most rows the next ones scan fewer, and one that drops few costs no copy.
PEEL_SHRINK = 0.5
#: [i, j]: row j comes before row i within a chunk.
_BEFORE = np.tri(CHUNK, k=-1, dtype=bool)


def pareto_mask(cost: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``cost`` (n x d, smaller is better in every
    column) that no other row weakly dominates; of identical rows the first is
    kept. Rows with a NaN are dropped."""
    c = np.asarray(cost, dtype=float)
    if c.ndim == 1:
        c = c[:, None]
    n, d = c.shape
    k = numba_kernels()
    if k is not None and d >= 3:  # compiled: order and scan (cost_models.kernels_numba.pareto_rows)
        return np.asarray(k.pareto_rows(np.ascontiguousarray(c)), dtype=bool)
    keep = np.zeros(n, dtype=bool)
    valid = ~np.isnan(c).any(axis=1)
    idx = np.flatnonzero(valid)
    if idx.size == 0:
        return keep
    if d > 3 and idx.size > PIVOT_ROWS_MIN:
        kept, idx = _peel(c, idx, PEELS)
        keep[kept] = True
        if idx.size == 0:
            return keep
    # Lexicographic order: a later row can weakly dominate an earlier one only
    # if the two are identical, so each row is checked against the kept ones.
    order = idx[np.lexsort(c[idx].T[::-1])]
    if d == 1:
        keep[order[0]] = True
        return keep
    if d == 2:
        col = c[order, 1]
        best = np.minimum.accumulate(col)
        prev = np.concatenate([[np.inf], best[:-1]])
        keep[order[col < prev]] = True
        return keep
    if d > 3 and idx.size > PIVOT_ROWS_MIN:
        # Rows a few strong rows strictly dominate are dropped first, all at once: each such row
        # is dominated, and its pivot stays (no pivot strictly dominates another of the front
        # it is on, and an identical row is not dropped here), so every row it would dominate
        # still meets a dominating row below. Which rows are pivots only changes the speed.
        sub = idx[~_strictly_dominated(c[idx], PIVOTS)]
        if sub.size < idx.size:
            keep[sub[pareto_mask(c[sub])]] = True
            return keep
    # A row is dropped iff an earlier row (in that order) weakly dominates it: an earlier
    # row that is itself dropped is dominated by a kept one, which then dominates this row
    # too (weak dominance is transitive). So each chunk is checked against the kept rows
    # before it and, all pairs at once, against its own earlier rows.
    if d == 3 and idx.size >= STAIRCASE_ROWS_MIN:
        groups = np.flatnonzero(np.diff(c[order, 0])) + 1
        if groups.size < STAIRCASE_GROUPS:
            keep[order[~_dominated_3(c[order], np.concatenate([[0], groups, [order.size]]))]] = True
            return keep
    ct = np.ascontiguousarray(c.T)
    front = np.empty((d, 0))
    for start in range(0, order.size, CHUNK):
        block = order[start : start + CHUNK]
        rows = ct[:, block]
        if front.shape[1]:
            dom = _weakly_below(front, rows).any(axis=1)
            block, rows = block[~dom], rows[:, ~dom]
        m = block.size
        alive = ~(_weakly_below(rows, rows) & _BEFORE[:m, :m]).any(axis=1)
        keep[block[alive]] = True
        front = np.hstack([front, rows[:, alive]])
    return keep


def pareto_mask_grouped(cost: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """:func:`pareto_mask` of each group of rows on its own (``groups``: an integer label per row;
    rows of different labels never dominate each other): the mask over all rows. Compiled, one
    call for every group (cost_models.kernels_numba.pareto_rows_grouped: a few pivots per group,
    then one sort of the rows left by (label, columns) and one scan)."""
    c = np.asarray(cost, dtype=float)
    if c.ndim == 1:
        c = c[:, None]
    labels = np.asarray(groups, dtype=np.int64).reshape(-1)
    if labels.size and (labels.min() < 0 or labels.max() >= labels.size):
        labels = np.unique(labels, return_inverse=True)[1].reshape(-1)
    k = numba_kernels()
    if k is not None and c.shape[1] >= 3:
        return np.asarray(k.pareto_rows_grouped(np.ascontiguousarray(c), labels), dtype=bool)
    keep = np.zeros(c.shape[0], dtype=bool)
    for g in np.unique(labels):
        rows = np.flatnonzero(labels == g)
        keep[rows[pareto_mask(c[rows])]] = True
    return keep


def _peel(c: np.ndarray, idx: np.ndarray, peels: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``peels`` rows of the front of ``c[idx]`` (no NaN; ``idx`` sorted) in
    lexicographic order, and the rows none of them weakly dominates (sorted). The least row left
    in lexicographic order (:func:`_lex_least`; of identical rows the first) is on the front: a
    row weakly dominating it is no larger in lexicographic order, so it is left and identical (and
    later: this row is the one kept), or it was dropped by a kept row, which then dominates this
    row too and would have dropped it. A row left is dominated by no dropped or kept row, so the
    front of the rows left is the rest of the front. No sort: the table is cut down to the rows
    left whenever at most :data:`PEEL_SHRINK` of it is (the first peel drops ~90 % of a design
    table's rows; a KL radius's wide fronts, few a peel)."""
    left = idx
    ct = np.ascontiguousarray(c[idx].T)
    alive = np.ones(left.size, dtype=bool)
    kept: list[int] = []
    n = left.size
    while n and len(kept) < peels:
        p = _lex_least(ct, np.flatnonzero(alive))
        kept.append(int(left[p]))
        dom = ct[0] >= ct[0, p]
        for j in range(1, ct.shape[0]):
            dom &= ct[j] >= ct[j, p]
        alive &= ~dom  # (row p too: it weakly dominates itself)
        n = int(np.count_nonzero(alive))
        if n <= PEEL_SHRINK * left.size:
            left, ct, alive = left[alive], ct[:, alive], np.ones(n, dtype=bool)
    return np.array(kept, dtype=np.int64), left[alive]


def _lex_least(ct: np.ndarray, pos: np.ndarray) -> int:
    """Of the columns ``pos`` (not empty, ascending) of ``ct`` (d x n), the least in lexicographic
    order (by row 0, then row 1, ...); of identical columns the first."""
    for row in ct:
        v = row[pos]
        pos = pos[v == v.min()]
        if pos.size == 1:
            break
    return int(pos[0])


def _weakly_below(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[i, k]: column k of ``a`` (d x n) is no larger than column i of ``b`` (d x m) in every
    row; built row by row (a d-deep all() over a 3-D array is several times slower)."""
    out = a[0][None, :] <= b[0][:, None]
    for j in range(1, a.shape[0]):
        out &= a[j][None, :] <= b[j][:, None]
    return out


def _strictly_dominated(c: np.ndarray, pivots: int) -> np.ndarray:
    """Rows of ``c`` (no NaN) that one of ``pivots`` strong rows (the least sums of the columns
    scaled to [0, 1]; a column with an infinite value counts nothing) strictly dominates: no
    larger in any column, smaller in one. (Scaled sums, not ranks: no sort per column.)"""
    score = np.zeros(c.shape[0])
    for j in range(c.shape[1]):
        lo, hi = c[:, j].min(), c[:, j].max()
        if np.isfinite(lo) and np.isfinite(hi) and hi > lo:
            score += (c[:, j] - lo) / (hi - lo)
    piv = c[np.argsort(score, kind="stable")[:pivots]]
    le = np.ones((c.shape[0], piv.shape[0]), dtype=bool)
    lt = np.zeros_like(le)
    for j in range(c.shape[1]):
        le &= piv[None, :, j] <= c[:, None, j]
        lt |= piv[None, :, j] < c[:, None, j]
    return np.asarray((le & lt).any(axis=1))


def _dominated_3(s: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Which rows of ``s`` (n x 3, in lexicographic order; ``bounds``: where each run of
    equal first columns starts, and n) an earlier row weakly dominates. An earlier row's
    first column is never larger, so it dominates iff it is no larger in the other two:
    against the earlier runs, the least third column among the rows whose second is no
    larger (a staircase); within the run, the least third column so far (its rows are
    sorted by the second)."""
    out = np.zeros(s.shape[0], dtype=bool)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        run = s[a:b]
        prev = np.concatenate([[np.inf], np.minimum.accumulate(run[:-1, 2])])
        dom = prev <= run[:, 2]
        if a:
            by = np.argsort(s[:a, 1], kind="stable")
            x, low = s[:a, 1][by], np.minimum.accumulate(s[:a, 2][by])
            i = np.searchsorted(x, run[:, 1], side="right")
            dom |= (i > 0) & (low[np.maximum(i - 1, 0)] <= run[:, 2])
        out[a:b] = dom
    return out
