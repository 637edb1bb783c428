"""The fused kernels, compiled by numba (imported by cost_models.kernels on first use only).

Each kernel is one loop over its rows that computes all of a row's outputs in registers, with no
temporary array per term. The model's formulas come only from the generated scalar module
(cost_models.symbolic_scalar, printed by sympy from cost_models.symbolic): a kernel composes them
exactly as the numpy path (cost_models.windows, cost_models.io_model) composes their numpy
versions, branch for branch, including numpy's treatment of nan and inf (``np.nan_to_num``,
``np.clip``, ``np.maximum`` propagate a nan; the helpers below do too). tests/test_kernels.py
checks every kernel, and the design tables built with them, against the numpy path.
"""

from __future__ import annotations

from math import exp, expm1, inf, isfinite, isinf, log, log1p

import numpy as np
from numba import njit

from cost_models.layout import filter_bytes as _filter_bytes_py
from cost_models.symbolic_scalar import (
    bloom_bits,
    bloom_fpr,
    distinct_new,
    distinct_part,
    run_sum,
    stall_seconds,
    throughput_shared_cores,
    throughput_stalled,
    throughput_threads,
)

_MAX = float(np.finfo(float).max)
#: A Newton step of level_cache_alpha's characteristic time this small relative to it ends the
#: iteration (the numpy path takes all its steps; the two agree to 1e-9: tests/test_kernels.py)
CHE_STEP_TOL = 1e-14


@njit(cache=True, error_model="numpy")
def _clip(x: float, lo: float, hi: float) -> float:  # pragma: no cover - compiled
    """np.clip of one element (a nan stays nan)."""
    if x != x:
        return x
    if x < lo:
        x = lo
    if x > hi:
        x = hi
    return x


@njit(cache=True, error_model="numpy")
def _maximum(a: float, b: float) -> float:  # pragma: no cover - compiled
    """np.maximum of two elements (a nan wins)."""
    if a != a or b != b:
        return a + b
    return a if a >= b else b


@njit(cache=True, error_model="numpy")
def _nan_to_num(x: float, nan: float, posinf: float, neginf: float) -> float:  # pragma: no cover - compiled
    if x != x:
        return nan
    if x == inf:
        return posinf
    if x == -inf:
        return neginf
    return x


@njit(cache=True, error_model="numpy")
def _count(w: float, U: np.ndarray, prob: np.ndarray, iota: float, n_keys: float) -> float:  # pragma: no cover
    """windows.distinct_keys of one count of puts."""
    if isinf(w):
        return inf if iota > 0 else n_keys
    s = 0.0
    for j in range(U.size):
        s += distinct_part(w, U[j], prob[j], iota)
    return distinct_new(w, iota) + s


@njit(cache=True, error_model="numpy")
def distinct_keys(puts: np.ndarray, U: np.ndarray, prob: np.ndarray, iota: float, n_keys: float) -> np.ndarray:
    """windows.distinct_keys of every element of ``puts`` (flat)."""  # pragma: no cover - compiled
    out = np.empty(puts.size)
    for i in range(puts.size):
        out[i] = _count(puts[i], U, prob, iota, n_keys)
    return out


@njit(cache=True, error_model="numpy")
def window(
    distinct: np.ndarray, U: np.ndarray, prob: np.ndarray, iota: float, n_keys: float, full_tol: float
) -> np.ndarray:  # pragma: no cover - compiled
    """windows.window of every element of ``distinct`` (flat): its bisection on log W, one element
    at a time, stopped where the element's bounds stand still (they would stay so: windows.window)."""
    out = np.empty(distinct.size)
    for i in range(distinct.size):
        d = distinct[i]
        R = d if (d >= 1.0 or d != d) else 1.0
        lo = log(R)
        hi = lo + 70.0
        reachable = _count(exp(hi), U, prob, iota, n_keys) >= R * (1 - full_tol)
        if iota <= 0:
            reachable = reachable and R <= n_keys * (1 - full_tol)
        for _ in range(64):
            mid = (lo + hi) / 2
            if _count(exp(mid), U, prob, iota, n_keys) < R:
                if mid == lo:
                    break
                lo = mid
            else:
                if mid == hi:
                    break
                hi = mid
        out[i] = exp(hi) if reachable else inf
    return out


@njit(cache=True, error_model="numpy")
def _clipped_run_sum(A: float, B: float, alpha: float, n: float) -> float:  # pragma: no cover - compiled
    """io_model._clipped_run_sum of one element."""
    if B > 0:
        r_one = _clip((A - 1.0) / B, 0.0, n)
        r_zero = _clip(A / B, 0.0, n)
    else:
        r_one = n if A >= 1.0 else 0.0
        r_zero = n if A > 0 else 0.0
    r_zero = _maximum(r_zero, r_one)
    ones = run_sum(1.0, 0.0, alpha, r_one)
    b_lin = B if isfinite(B) else 0.0
    return ones + (run_sum(A, b_lin, alpha, r_zero) - run_sum(A, b_lin, alpha, r_one))


@njit(cache=True, error_model="numpy")
def lookup_terms(
    fp: np.ndarray,
    reach: np.ndarray,
    di: np.ndarray,
    li: np.ndarray,
    t_at: np.ndarray,
    w_at: np.ndarray,
    runs_at: np.ndarray,
    last: np.ndarray,
    rate: np.ndarray,
    iota: float,
    N: float,
    recency: np.ndarray,
    b_r: np.ndarray,
    width: np.ndarray,
    pos_at: np.ndarray,
    per_run_at: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """io_model.structure's lookup terms: ``fp`` and ``reach`` (n, L, P) of every level that exists
    (``di``, ``li``) and partition, written in place (the rest stay 0). ``pos_at``, ``per_run_at``:
    the 'latest' partitions' position and run width at each level (read only where ``recency``)."""
    P = rate.size
    for k in range(di.size):
        d, lv = di[k], li[k]
        t, w, r = t_at[k], w_at[k], runs_at[k]
        for j in range(P):
            if recency[j]:
                A = (b_r[j] - pos_at[k] / N) / width[j]
                Bl = (per_run_at[k] / N) / width[j]
                E = 1.0
                alpha = 0.0
            else:
                decay = rate[j] * w
                alpha = -expm1(-decay) if isfinite(decay) else 1.0
                x = rate[j] * t
                E = exp(-(x if x == x else inf))
                A = 1.0 - iota * t / N
                Bl = iota * w / N
            A = _nan_to_num(A, -1.0, _MAX, -1.0)
            Bl = _nan_to_num(Bl, inf, _MAX, -_MAX)
            passed = E * _clipped_run_sum(A, Bl, alpha, r)
            reached = E * (_clip(A, 0.0, 1.0) + _clipped_run_sum(A, Bl, alpha, _maximum(r - 1.0, 0.0)))
            if not r > 0:
                reached = 0.0
            if last[k]:
                a1 = alpha if alpha <= 1.0 - 1e-16 else 1.0 - 1e-16
                final = E * _clip(A - Bl * r, 0.0, 1.0) * exp(r * log1p(-a1))
                passed = _maximum(passed - final, 0.0)
            fp[d, lv, j] = _nan_to_num(passed, 0.0, _MAX, -_MAX)
            reach[d, lv, j] = _nan_to_num(reached, 0.0, _MAX, -_MAX)


@njit(cache=True, error_model="numpy")
def _minimum(a: float, b: float) -> float:  # pragma: no cover - compiled
    """np.minimum of two elements (a nan wins)."""
    if a != a or b != b:
        return a + b
    return a if a <= b else b


@njit(cache=True, error_model="numpy")
def cpu_throughput(
    serial: np.ndarray,
    parallel: np.ndarray,
    wait: np.ndarray,
    background: np.ndarray,
    serial_conc: np.ndarray,
    parallel_conc: np.ndarray,
    stall_rate: np.ndarray,
    stall_seconds_: np.ndarray,
    stall_slack: np.ndarray,
    stalls: bool,
    n: float,
    eta: float,
    workers: float,
) -> np.ndarray:  # pragma: no cover - compiled
    """cost_models.cpu.cpu_throughput of every design (rows) on ``n`` client threads and ``eta``
    cores: the threads' and shared cores' bounds, the write stalls over the levels (columns of the
    stall arrays, read only when ``stalls``) and the background thread's cap, one design at a time.
    ``serial_conc``/``parallel_conc``: the concurrent seconds (zeros where there are none)."""
    out = np.empty(serial.size)
    many = n >= 2
    for i in range(serial.size):
        S = serial[i] + (serial_conc[i] if many else 0.0)
        P = parallel[i] + (parallel_conc[i] if many else 0.0)
        G = background[i]
        x = _minimum(throughput_threads(S, P, wait[i], n), throughput_shared_cores(S, P, G, eta))
        if stalls and isfinite(x):
            t = 0.0
            for lv in range(stall_rate.shape[1]):
                per = stall_seconds(x, stall_rate[i, lv], stall_seconds_[i, lv], stall_slack[i])
                t += _nan_to_num(per, 0.0, _MAX, -_MAX)
            x = throughput_stalled(x, t)
        cap = workers / G if G > 0 else inf
        out[i] = _minimum(x, cap)
    return out


@njit(cache=True, error_model="numpy")
def _row_before(c: np.ndarray, a: int, b: int) -> bool:  # pragma: no cover - compiled
    """Whether row ``a`` of ``c`` comes strictly before row ``b`` in lexicographic order."""
    for j in range(c.shape[1]):
        if c[a, j] < c[b, j]:
            return True
        if c[a, j] > c[b, j]:
            return False
    return False


@njit(cache=True, error_model="numpy")
def lex_order(c: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The rows of ``c`` (n x d) without a NaN, in lexicographic order of their columns, identical
    rows in their order: ``np.lexsort(c[idx].T[::-1])`` of them (a stable bottom-up merge sort,
    without numpy's d passes and copies: most of cost_models.pareto.pareto_mask's time on the
    design tables' ~2,000-row calls until stop 61)."""
    n, d = c.shape
    idx = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        ok = True
        for j in range(d):
            if c[i, j] != c[i, j]:
                ok = False
                break
        if ok:
            idx[m] = i
            m += 1
    a = idx[:m].copy()
    b = np.empty(m, dtype=np.int64)
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            x, y, k = lo, mid, lo
            while x < mid and y < hi:
                if _row_before(c, a[y], a[x]):  # the right one only when strictly before: stable
                    b[k] = a[y]
                    y += 1
                else:
                    b[k] = a[x]
                    x += 1
                k += 1
            while x < mid:
                b[k] = a[x]
                x += 1
                k += 1
            while y < hi:
                b[k] = a[y]
                y += 1
                k += 1
        a, b = b, a
        width *= 2
    return a


#: Rows of each group found on the front one at a time before the rest is sorted
#: (:func:`pareto_rows_grouped`), each dropping the rows it dominates: on the design tables'
#: ~21,000-row calls (5 columns) three leave 25-50 % of the rows to sort.
PEELS = 3


@njit(cache=True, error_model="numpy")
def pareto_rows(c: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """cost_models.pareto.pareto_mask of ``c`` (n x d): :func:`pareto_rows_grouped` of one group."""
    return pareto_rows_grouped(c, np.zeros(c.shape[0], dtype=np.int64))


@njit(cache=True, error_model="numpy")
def _weakly_below(c: np.ndarray, a: int, b: int) -> bool:  # pragma: no cover - compiled
    """Whether row ``a`` of ``c`` is no larger than row ``b`` in every column."""
    for j in range(c.shape[1]):
        if c[a, j] > c[b, j]:
            return False
    return True


@njit(cache=True, error_model="numpy")
def pareto_rows_grouped(c: np.ndarray, group: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """cost_models.pareto.pareto_mask_grouped of ``c`` (n x d) and its rows' labels ``group``
    (0..n-1). First :data:`PEELS` times per group: its row left of least scaled sum (ties: the first
    in lexicographic order; identical rows: the first) is kept — no row left or dropped weakly
    dominates it — and every row it weakly dominates is dropped. Then the rows left, in the
    lexicographic order of (label, columns) (:func:`lex_order` with the label as a first column),
    are scanned, the front emptied
    where the label changes: a row is kept iff no row kept before it in its group weakly dominates
    it (an earlier dropped row is dominated by a kept one, which then dominates this row too; a
    later row weakly dominates it only if identical, and the first of those is kept)."""
    n, d = c.shape
    alive = np.ones(n, dtype=np.bool_)
    for i in range(n):
        for j in range(d):
            if c[i, j] != c[i, j]:
                alive[i] = False
                break
    keep = np.zeros(n, dtype=np.bool_)
    k = 0
    for i in range(n):
        k = max(k, group[i] + 1)
    # each group's columns scaled to [0, 1] by their range (a column with an infinite value
    # weighs nothing): a row of least scaled sum, of those the first in lexicographic order, is
    # on its group's front (a row weakly dominating it has no larger sum: rounding is monotone)
    lo = np.full((k, d), np.inf)
    hi = np.full((k, d), -np.inf)
    for i in range(n):
        if alive[i]:
            g = group[i]
            for j in range(d):
                lo[g, j] = min(lo[g, j], c[i, j])
                hi[g, j] = max(hi[g, j], c[i, j])
    scale = np.zeros((k, d))
    for g in range(k):
        for j in range(d):
            if isfinite(lo[g, j]) and isfinite(hi[g, j]) and hi[g, j] > lo[g, j]:
                scale[g, j] = 1.0 / (hi[g, j] - lo[g, j])
    total = np.zeros(n)
    for i in range(n):
        if alive[i]:
            g = group[i]
            for j in range(d):
                if scale[g, j] > 0:
                    total[i] += (c[i, j] - lo[g, j]) * scale[g, j]
    best = np.empty(k, dtype=np.int64)
    for _ in range(PEELS):
        best[:] = -1
        for i in range(n):
            if alive[i]:
                g = group[i]
                b = best[g]
                if b < 0 or total[i] < total[b] or (total[i] == total[b] and _row_before(c, i, b)):
                    best[g] = i
        found = False
        for g in range(k):
            if best[g] >= 0:
                keep[best[g]] = True
                alive[best[g]] = False
                found = True
        if not found:
            break
        for i in range(n):
            if alive[i]:
                p = best[group[i]]
                if p >= 0 and _weakly_below(c, p, i):
                    alive[i] = False
    rest = np.flatnonzero(alive)
    lab = np.empty((rest.size, d + 1))
    for r in range(rest.size):
        i = rest[r]
        lab[r, 0] = group[i]
        for j in range(d):
            lab[r, j + 1] = c[i, j]
    order = lex_order(lab)
    front = np.empty((order.size, d))
    m = 0
    last = -1
    current = -1
    for r in order:
        i = rest[r]
        if group[i] != current:
            current = group[i]
            m = 0
            last = -1
        dominated = False
        if last >= 0:
            dominated = True
            for j in range(d):
                if front[last, j] > c[i, j]:
                    dominated = False
                    break
        if not dominated:
            for f in range(m - 1, -1, -1):  # the latest first: the nearest in this order
                below = True
                for j in range(d):
                    if front[f, j] > c[i, j]:
                        below = False
                        break
                if below:
                    dominated = True
                    last = f
                    break
        if not dominated:
            keep[i] = True
            for j in range(d):
                front[m, j] = c[i, j]
            m += 1
    return keep


@njit(cache=True, error_model="numpy")
def level_cache_alpha(
    out: np.ndarray,
    found: np.ndarray,
    fp: np.ndarray,
    probe: np.ndarray,
    level_blocks: np.ndarray,
    cache_blocks: np.ndarray,
    p_get: np.ndarray,
    steps: int,
) -> None:  # pragma: no cover - compiled
    """io_model.level_cache_alpha into ``out`` (n, m, P): ``found`` and ``fp`` (n, L, P), ``probe``
    (n, m, L), ``level_blocks`` (n, L), ``cache_blocks`` (n, m); Che's characteristic time by
    ``steps`` Newton steps, a (design, split) at a time, its levels' rates in registers."""
    n, m, lv = probe.shape
    parts = p_get.shape[0]
    rate = np.empty(lv)
    for i in range(n):
        for j in range(m):
            cap = cache_blocks[i, j]
            used = 0.0
            for k in range(lv):
                traffic = 0.0
                for p in range(parts):
                    traffic += (found[i, k, p] + probe[i, j, k] * fp[i, k, p]) * p_get[p]
                nb = level_blocks[i, k]
                rate[k] = traffic / _maximum(nb, 1e-300) if nb > 0 else 0.0
                if rate[k] > 0:
                    used += nb
            live = cap >= 1.0 and cap < used
            full = cap >= used and cap >= 1.0
            t = 0.0
            for _ in range(steps if live else 0):
                f = 0.0
                df = 0.0
                for k in range(lv):
                    nb = level_blocks[i, k]
                    e = exp(-rate[k] * t)
                    f += nb * (1.0 - e)
                    df += nb * rate[k] * e
                f -= cap
                step = -f / _maximum(df, 1e-300) if df > 0 else 0.0
                t = t + _maximum(step, 0.0)
                if not step > t * CHE_STEP_TOL:
                    break  # converged (Newton from below: the steps only shrink from here)
            for p in range(parts):
                total = 0.0
                acc = 0.0
                for k in range(lv):
                    fo = found[i, k, p]
                    total += fo
                    hit = 1.0 if full else (-expm1(-rate[k] * t) if live else 0.0)
                    acc += fo * hit
                out[i, j, p] = acc / total if total > 0 else 0.0


#: cost_models.layout.filter_bytes compiled: the one copy of a filter's bytes, one element at a time.
_filter_bytes = njit(cache=True, error_model="numpy")(_filter_bytes_py)


@njit(cache=True, error_model="numpy")
def split_levels(
    hot_count: np.ndarray,
    hot: np.ndarray,
    fpr: np.ndarray,
    budget_bits: np.ndarray,
    exists: np.ndarray,
    sized: np.ndarray,
    fence: np.ndarray,
    lvl: np.ndarray,
    L: np.ndarray,
    bits_avg: np.ndarray,
    range_bits: np.ndarray,
    buffer_bytes: np.ndarray,
    all_hot: np.ndarray,
    memory: float,
) -> None:  # pragma: no cover - compiled
    """cost_models.layout.split_memory's hot levels on ``memory`` bytes, row by row: the levels
    whose fences and filters fit beside the buffer (cumulatively, from the top), each row's count
    of them (``hot_count``; every level for an all-hot design), which levels are hot, their uniform
    Bloom FPR (1 where cold or filterless) and the filter budget in bits (``budget_bits``)."""
    n, lm = exists.shape
    for i in range(n):
        spare = memory - buffer_bytes[i]
        cum = 0.0
        count = 0.0
        for j in range(lm):
            bloom = _filter_bytes(sized[i, j], bits_avg[i]) if exists[i, j] else 0.0
            ranges = _filter_bytes(sized[i, j], range_bits[i]) if exists[i, j] else 0.0
            cum += fence[i, j] + (bloom + ranges)
            if cum <= spare and exists[i, j]:
                count += 1.0
        hc = L[i] if all_hot[i] else count
        hot_count[i] = hc
        uniform = bloom_fpr(bits_avg[i])
        cap = 0.0
        for j in range(lm):
            h = exists[i, j] and lvl[i, j] <= hc
            hot[i, j] = h
            cap += sized[i, j] if h else 0.0
            fpr[i, j] = uniform if (h and bits_avg[i] > 0) else 1.0
        budget_bits[i] = bits_avg[i] * cap


@njit(cache=True, error_model="numpy")
def split_use(
    bits: np.ndarray,
    mem: np.ndarray,
    fpr: np.ndarray,
    hot: np.ndarray,
    lsh: np.ndarray,
    sized: np.ndarray,
    fence: np.ndarray,
    range_bits: np.ndarray,
    buffer_bytes: np.ndarray,
    memory: float,
    n_keys: float,
    per_key: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The rest of cost_models.layout.split_memory, row by row, after :func:`split_levels` and the
    Monkey rates: ``fpr`` made final in place (1 on a cold level, 0 for the hash log), the Bloom
    bits per level, and per row into ``mem``: the filters', fences' and range filters' bytes, the
    block cache (what is left of ``memory``) and whether the design fits (1.0) or not (0.0)."""
    n, lm = hot.shape
    for i in range(n):
        m_filter = 0.0
        m_fence = 0.0
        m_range = 0.0
        for j in range(lm):
            f = fpr[i, j] if hot[i, j] else 1.0
            if lsh[i]:
                f = 0.0  # the hash index is exact
            fpr[i, j] = f
            b = bloom_bits(_maximum(f, 1e-300)) if (hot[i, j] and f < 1.0) else 0.0
            if lsh[i]:
                b = 0.0
            bits[i, j] = b
            if hot[i, j]:
                m_filter += _filter_bytes(sized[i, j], b)
                m_fence += fence[i, j]
                m_range += _filter_bytes(sized[i, j], range_bits[i])
        if lsh[i]:
            m_fence = n_keys * per_key[i]
        used = buffer_bytes[i] + m_filter + m_fence + m_range
        mem[i, 0] = m_filter
        mem[i, 1] = m_fence
        mem[i, 2] = m_range
        mem[i, 3] = _maximum(0.0, memory - used)
        mem[i, 4] = 1.0 if used <= memory * (1 + 1e-9) else 0.0


@njit(cache=True)
def scatter_rows_1d(
    out: np.ndarray, fresh_at: np.ndarray, fresh: np.ndarray, old_at: np.ndarray, old: np.ndarray, old_rows: np.ndarray
) -> None:  # pragma: no cover - compiled
    """solver.tables.grid_eval.scatter_rows of one value per design: ``out[old_at] = old[old_rows]``,
    then ``out[fresh_at] = fresh``, without numpy's temporary of the gathered rows."""
    for i in range(old_at.size):
        out[old_at[i]] = old[old_rows[i]]
    for i in range(fresh_at.size):
        out[fresh_at[i]] = fresh[i]


@njit(cache=True)
def scatter_rows_2d(
    out: np.ndarray, fresh_at: np.ndarray, fresh: np.ndarray, old_at: np.ndarray, old: np.ndarray, old_rows: np.ndarray
) -> None:  # pragma: no cover - compiled
    """:func:`scatter_rows_1d` of a value per design and level: each row copied, and padded with
    zeros to ``out``'s levels (as Cascades.concat pads the shallower tree)."""
    width = out.shape[1]
    for i in range(old_at.size):
        r, src = old_at[i], old_rows[i]
        for j in range(old.shape[1]):
            out[r, j] = old[src, j]
        for j in range(old.shape[1], width):
            out[r, j] = 0.0
    for i in range(fresh_at.size):
        r = fresh_at[i]
        for j in range(fresh.shape[1]):
            out[r, j] = fresh[i, j]
        for j in range(fresh.shape[1], width):
            out[r, j] = 0.0
