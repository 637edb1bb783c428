"""The put stream seen by count: how many puts bring a number of distinct keys (the *window*), and
how many distinct keys a number of puts brings (technical report Sec. 2: a buffer, a run or a merge
cycle fills with distinct keys, not with puts).

``distinct_keys`` is the closed form (new keys from inserts plus, per key partition, the keys an
update stream touches); its inverse, ``window``, is solved by bisection. ``ExactWindow`` caches the
exact inverse per count; ``WindowTable`` interpolates it for the design tables. Both answer the
forward count exactly (``distinct``), which is all a run's size needs (cost_models.layout).
"""

from __future__ import annotations

import numpy as np

from cost_models.distributions import Marginal
from cost_models.kernels import numba_kernels
from cost_models.symbolic import compiled


def distinct_keys(puts: np.ndarray | float, put: Marginal, n_keys: float, iota: float) -> np.ndarray:
    """Distinct keys ``puts`` puts of the stream bring on a node of ``n_keys`` keys: the new keys
    of its inserts (share ``iota``) and, per key partition, the keys its updates touch. Increasing
    in ``puts``; at most ``n_keys`` without inserts (reached only in the limit)."""
    w = np.asarray(puts, dtype=float)
    k = numba_kernels()
    if k is not None:  # the fused kernel (cost_models.kernels_numba.distinct_keys)
        U = np.ascontiguousarray(put.frac * n_keys, dtype=float)
        prob = np.ascontiguousarray(put.prob, dtype=float)
        flat = np.ascontiguousarray(w.ravel())
        return np.asarray(k.distinct_keys(flat, U, prob, float(iota), float(n_keys)).reshape(w.shape))
    c = compiled()
    with np.errstate(over="ignore", invalid="ignore"):
        parts = c["distinct_part"](w[..., None], put.frac * n_keys, put.prob, iota).sum(axis=-1)
        out = c["distinct_new"](w, iota) + parts
    # an endless stream: every key, and every insert besides
    return np.asarray(np.where(np.isinf(w), np.where(iota > 0, np.inf, n_keys), out), dtype=float)


#: Relative distance to "every key distinct" below which a window counts as reachable
#: (the exact window and the interpolated table agree on it).
FULL_TOL = 1e-12


#: Bisection steps of :func:`window` before which its bounds cannot stand still: the bracket,
#: 70 wide in log W, is within a few ulps of log W (|log W| < 100 for any count below 1e43)
#: only after about 51 halvings (70 / 2^51 = 100 * 2^-52 * 0.7).
BISECTION_STILL_FROM = 48


def window(distinct: np.ndarray, put: Marginal, n_keys: float, iota: float) -> np.ndarray:
    """Puts W after which the put stream has produced ``distinct`` distinct keys.

    Solves distinct_new(W) + sum_j distinct_part(W, U_j, p_j) = R by bisection on
    log W (the left side is increasing in W and never exceeds W). Returns inf
    where R cannot be reached (every key already distinct).
    """
    k = numba_kernels()
    if k is not None:  # the fused kernel (cost_models.kernels_numba.window)
        d = np.asarray(distinct, dtype=float)
        U = np.ascontiguousarray(put.frac * n_keys, dtype=float)
        prob = np.ascontiguousarray(put.prob, dtype=float)
        flat = np.ascontiguousarray(d.ravel())
        return np.asarray(k.window(flat, U, prob, float(iota), float(n_keys), FULL_TOL).reshape(d.shape))
    R = np.maximum(np.asarray(distinct, dtype=float), 1.0)
    shape = R.shape

    def count(w: np.ndarray) -> np.ndarray:
        return distinct_keys(w, put, n_keys, iota)

    lo = np.log(R)
    hi = lo + 70.0
    reachable = count(np.exp(hi)) >= R * (1 - FULL_TOL)
    if iota <= 0:  # updates alone reach every key only in the limit: a buffer of all N keys never fills
        reachable &= R <= n_keys * (1 - FULL_TOL)
    for step in range(64):
        mid = (lo + hi) / 2
        low = count(np.exp(mid)) < R
        lo_next, hi_next = np.where(low, mid, lo), np.where(low, hi, mid)
        # A step that moves no bound moves none later either (each depends on the bounds alone),
        # so the bisection stops there. Looked for from BISECTION_STILL_FROM steps on only: the
        # check costs as much as a step's arithmetic, and skipping it only stops later.
        if step >= BISECTION_STILL_FROM and np.array_equal(lo_next, lo) and np.array_equal(hi_next, hi):
            break
        lo, hi = lo_next, hi_next
    out = np.exp(hi)
    return np.where(reachable, out, np.inf).reshape(shape)


class ExactWindow:
    """:func:`window` of one put stream, node size and insert share, each distinct count solved
    once: :func:`window` is elementwise (a count's answer does not depend on what it is solved
    with), and one evaluation asks for the same counts several times (the buffer, the runs and
    the merges of a level; the block cache for gets and ranges, for every workload of a mix)."""

    def __init__(self, put: Marginal, n_keys: float, iota: float) -> None:
        self.args = (put, n_keys, iota)
        self.solved: dict[float, float] = {}  # count -> W

    def distinct(self, puts: np.ndarray) -> np.ndarray:
        """:func:`distinct_keys` of ``puts`` puts of this stream."""
        return distinct_keys(puts, *self.args)

    def __call__(self, distinct: np.ndarray) -> np.ndarray:
        R = np.asarray(distinct, dtype=float)
        vals = R.ravel().tolist()
        new = sorted(set(vals).difference(self.solved))
        if new:
            self.solved.update(zip(new, window(np.array(new), *self.args).tolist(), strict=True))
        return np.array([self.solved[v] for v in vals], dtype=float).reshape(R.shape)


#: Points per decade of the interpolated window table (batch evaluation only).
WINDOW_TABLE_POINTS_PER_DECADE = 40


class WindowTable:
    """W(R) on a log grid, interpolated in log-log space.

    The exact ``window`` (a bisection per value) dominates batch evaluation; the
    solver's tables evaluate thousands of designs, so they interpolate this
    monotone, smooth function instead. The exact re-evaluation of a chosen
    design never uses it, so its error shows up in the certificate.
    """

    def __init__(self, put: Marginal, n_keys: float, iota: float) -> None:
        hi = max(2.0, n_keys * 1.0001)
        pts = int(np.ceil(np.log10(hi) * WINDOW_TABLE_POINTS_PER_DECADE)) + 2
        near_full = n_keys * (1.0 - np.logspace(-1, np.log10(FULL_TOL), 45))  # W grows fastest just below N
        self.r = np.unique(np.concatenate([np.logspace(0.0, np.log10(hi), pts), near_full[near_full > 1]]))
        self.w = window(self.r, put, n_keys, iota)
        finite = np.isfinite(self.w)
        self.r_max = self.r[finite].max() if finite.any() else 0.0
        self.logr = np.log(self.r[finite])
        self.logw = np.log(self.w[finite])
        #: the counts beyond the grid, solved exactly (the design tables ask for the same few
        #: counts again and again: merge_terms' levels)
        self.beyond = ExactWindow(put, n_keys, iota)

    def distinct(self, puts: np.ndarray) -> np.ndarray:
        """:func:`distinct_keys` of ``puts`` puts of this stream (exact: a closed form)."""
        return self.beyond.distinct(puts)

    def __call__(self, distinct: np.ndarray) -> np.ndarray:
        R = np.maximum(np.asarray(distinct, dtype=float), 1.0)
        if self.logr.size == 0:  # no count is reachable below "every key distinct" (a node of one key)
            out = np.full(R.shape, np.inf)
        else:
            out = np.exp(np.interp(np.log(R), self.logr, self.logw))
        beyond = R > self.r_max
        if beyond.any():
            iota = self.beyond.args[2]
            if iota > 0:  # more distinct entries than keys: only inserts get there, slowly; solve exactly
                out = np.array(out, dtype=float)
                out[beyond] = self.beyond(R[beyond])
            else:  # updates alone never produce more distinct keys than exist
                out = np.where(beyond, np.inf, out)
        return out
