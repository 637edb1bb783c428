"""Distribution-aware I/O per operation (paper Table 2, technical report Sec. 1-2).

For every design of a :class:`~cost_models.layout.Layout` this returns the
expected blocks read/written per operation type: single-result lookup (sigma_l),
no-result lookup (sigma_n), range (sigma_s), put (sigma_p, amortized merges),
blind update (sigma_u) and read-modify-write (sigma_w). Only compiled sympy
expressions (``cost_models.symbolic``) are evaluated; this module composes
them over levels (products, prefix/suffix) and partitions (weighted sums).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cost_models.design import model_constants
from cost_models.distributions import Marginal, Partitions
from cost_models.layout import Layout
from cost_models.symbolic import compiled

OPS = ("get", "empty_get", "range", "insert", "update", "rmw")


@dataclass
class IOCost:
    """Expected block I/Os per operation for each design (arrays of shape (n,))."""

    get: np.ndarray
    empty_get: np.ndarray
    range: np.ndarray
    insert: np.ndarray
    update: np.ndarray
    rmw: np.ndarray

    def per_op(self) -> dict[str, np.ndarray]:
        return {op: getattr(self, op) for op in OPS}

    def total(self, mix: dict[str, float]) -> np.ndarray:
        """Paper Eq. 1 per operation: sum_op theta_op sigma_op."""
        return sum(mix.get(op, 0.0) * getattr(self, op) for op in OPS)  # type: ignore[return-value]


def insert_fraction(mix: dict[str, float]) -> float:
    """Share of puts that insert new keys (iota); 1 when there are no puts."""
    puts = mix.get("insert", 0.0) + mix.get("update", 0.0) + mix.get("rmw", 0.0)
    return 1.0 if puts <= 0 else mix.get("insert", 0.0) / puts


def window(distinct: np.ndarray, put: Marginal, n_keys: float, iota: float) -> np.ndarray:
    """Puts W after which the put stream has produced ``distinct`` distinct keys.

    Solves distinct_new(W) + sum_j distinct_part(W, U_j, p_j) = R by bisection on
    log W (the left side is increasing in W and never exceeds W). Returns inf
    where R cannot be reached (every key already distinct).
    """
    c = compiled()
    R = np.maximum(np.asarray(distinct, dtype=float), 1.0)
    U = put.frac * n_keys
    p = put.prob
    shape = R.shape

    def count(w: np.ndarray) -> np.ndarray:
        wx = w[..., None]
        parts = c["distinct_part"](wx, U, p, iota).sum(axis=-1)
        return c["distinct_new"](w, iota) + parts

    lo = np.log(R)
    hi = lo + 70.0
    reachable = count(np.exp(hi)) >= R * (1 - 1e-12)
    for _ in range(64):
        mid = (lo + hi) / 2
        low = count(np.exp(mid)) < R
        lo = np.where(low, mid, lo)
        hi = np.where(low, hi, mid)
    out = np.exp(hi)
    return np.where(reachable, out, np.inf).reshape(shape)


def _alpha(w: np.ndarray, parts: Partitions, n_keys: float, iota: float) -> np.ndarray:
    """Presence probability per partition for windows ``w`` (shape (..., P))."""
    c = compiled()
    U = parts.frac * n_keys
    wx = np.asarray(w, dtype=float)[..., None]
    with np.errstate(over="ignore", invalid="ignore"):
        a = c["alpha_window"](np.minimum(wx, 1e300), U, parts.p_put, iota, n_keys)
    a = np.where(np.isinf(wx), 1.0, a)
    return np.clip(np.nan_to_num(a, nan=1.0), 0.0, 1.0)


def _recency_alpha(lo: np.ndarray, hi: np.ndarray, parts: Partitions, runs: np.ndarray | float) -> np.ndarray:
    """Per-run presence for recency partitions: overlap of the partition's recency
    interval with [lo, hi) (fractions of the keys), spread over the runs."""
    a = parts.recency[:, 0]
    b = parts.recency[:, 1]
    ov = np.maximum(0.0, np.minimum(hi[..., None], b) - np.maximum(lo[..., None], a))
    frac = ov / np.maximum(b - a, 1e-300)
    r = np.asarray(runs, dtype=float)
    if r.ndim:
        r = r[..., None]
    per_run = 1.0 - (1.0 - np.clip(frac, 0.0, 1.0)) ** (1.0 / np.maximum(r, 1.0))
    return per_run


def io_costs(lay: Layout, parts: Partitions, mix: dict[str, float], scan_length: float) -> IOCost:
    """Per-operation block I/O for every design of ``lay``."""
    c = compiled()
    k = model_constants()
    fill = k["level_fill"]
    N = lay.n_keys
    iota = insert_fraction(mix)
    n, lm = lay.cap.shape
    P = parts.count
    recency = ~np.isnan(parts.recency[:, 0])

    # --- presence probabilities alpha (designs, levels, partitions)
    w_run = window(lay.per_run, parts.put, N, iota)  # (n, lm)
    alpha = _alpha(w_run, parts, N, iota)
    w_buf = window(fill * lay.E_B, parts.put, N, iota)
    alpha0 = _alpha(w_buf, parts, N, iota)  # (n, P)
    if recency.any():
        # Recency ranks: the buffer holds the newest fill*E_B keys, then each
        # level holds the next occupancy's worth.
        bounds = np.concatenate([fill * lay.E_B[:, None], fill * lay.E_B[:, None] + np.cumsum(lay.occ, axis=1)], axis=1) / N
        lo = np.concatenate([np.zeros((n, 1)), bounds[:, :-1]], axis=1)
        ra0 = _recency_alpha(np.zeros(n), bounds[:, 0], parts, 1.0)
        ra = _recency_alpha(lo[:, 1:], bounds[:, 1:], parts, lay.runs)
        alpha0 = np.where(recency[None, :], ra0, alpha0)
        alpha = np.where(recency[None, None, :], ra, alpha)
    alpha = np.where(lay.exists[..., None], alpha, 0.0)
    # The last level holds a version of every key (the data set's base copy).
    # It is the remainder of the load (occupancy), so alpha there follows too.

    # --- block cache (Che's approximation at block granularity)
    cache_blocks = lay.mem_cache / (lay.B * lay.entry_bytes)
    U = parts.frac * N
    t = window(np.maximum(cache_blocks, 1.0), Marginal(parts.frac, parts.p_get), N, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        a_hot = 1.0 - np.exp(-np.minimum(t, 1e300)[:, None] * parts.p_get / U)
    a_hot = np.where(np.isinf(t)[:, None], 1.0, a_hot)
    a_cov = np.minimum(1.0, cache_blocks * lay.B / N)[:, None]
    alpha_bc = np.where(cache_blocks[:, None] >= 1.0, np.maximum(a_hot, a_cov), 0.0)
    alpha_bc = np.clip(alpha_bc, 0.0, 1.0)

    # --- single-result lookups (sigma_l)
    runs = lay.runs[..., None]
    miss = np.where(lay.exists[..., None], c["level_miss"](alpha, runs), 1.0)  # (n, lm, P)
    before = np.cumprod(np.concatenate([np.ones((n, 1, P)), miss[:, :-1, :]], axis=1), axis=1)
    after_incl = np.cumprod(miss[:, ::-1, :], axis=1)[:, ::-1, :]
    after = np.concatenate([after_incl[:, 1:, :], np.ones((n, 1, P))], axis=1)
    gate = ((1 - alpha0) * (1 - alpha_bc))[:, None, :]
    prefix = gate * before
    all_miss = after_incl[:, 0, :]
    q = np.maximum(1 - (1 - alpha0) * all_miss, 1e-12)
    on_disk = (1 - alpha_bc) * (1 - alpha0) * (1 - all_miss)
    fp = c["fp_exposure"](prefix, alpha, runs, after)
    reach = c["reach_exposure"](prefix, alpha, runs, after)
    probe = lay.fpr[..., None]  # hot: filter FPR (1 without a filter); cold: 1
    index = (~lay.hot & lay.exists)[..., None].astype(float)
    per_level = np.where(lay.exists[..., None], probe * fp + index * reach, 0.0)
    cost = (on_disk + per_level.sum(axis=1)) / q  # (n, P)
    sigma_l = (cost * parts.p_get).sum(axis=1)

    # --- no-result lookups (sigma_n): every run's filter, every cold run's index + block
    sigma_n = np.where(lay.exists, lay.runs * (lay.fpr + (~lay.hot).astype(float)), 0.0).sum(axis=1)

    # --- ranges (sigma_s): each run's share of the range plus its seek;
    # the hash log is unsorted, so a range reads the whole log.
    sel = scan_length / N
    per_run_blocks = c["range_run"](sel, lay.per_run, lay.B[:, None])
    sorted_cost = np.where(lay.exists, lay.runs * (per_run_blocks + (~lay.hot).astype(float)), 0.0).sum(axis=1)
    sigma_s = np.where(lay.lsh, lay.space_entries / lay.B, sorted_cost)

    # --- puts (sigma_p), amortized merges per put
    q0 = window(lay.E_B, parts.put, N, iota)  # puts per flush
    src_full = np.concatenate([lay.E_B[:, None], lay.cap[:, :-1]], axis=1)  # entries moved into level i
    q_src = np.concatenate([q0[:, None], window(np.maximum(lay.cap[:, :-1], 1.0), parts.put, N, iota)], axis=1)
    reads_src = np.concatenate([np.zeros((n, 1)), np.ones((n, lm - 1))], axis=1)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        merges = c["merge_cost"](reads_src, src_full, lay.leveled.astype(float), lay.occ, lay.B[:, None], q_src)
    merges = np.where(lay.exists & np.isfinite(merges), merges, 0.0)
    sigma_p_lsm = merges.sum(axis=1)
    g = k["lsh_gc_dead_fraction"]
    flushed = np.where(np.isfinite(q0), lay.E_B / q0, 0.0)
    sigma_p_lsh = flushed * c["log_append"](1.0 - iota, g, lay.B)
    sigma_p = np.where(lay.lsh, sigma_p_lsh, sigma_p_lsm)

    # Our template writes every update out of place through the buffer, so a
    # blind update costs a put and a rmw costs a lookup plus a put (paper: "for
    # LSMs, the cost of an rmw is the summation of a lookup and an insert").
    return IOCost(get=sigma_l, empty_get=sigma_n, range=sigma_s, insert=sigma_p,
                  update=sigma_p.copy(), rmw=sigma_l + sigma_p)
