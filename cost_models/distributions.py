"""Map the spec's key distributions onto the model's uniform partitions.

The paper's model (Sec. 3, "Skewed Distribution", "Other Distributions") splits
the key space into partitions that are each accessed uniformly: a partition j
holds a fraction ``frac_j`` of the keys and receives a fraction ``p_j`` of the
gets (or puts). docs/distributions.md derives the mapping used here:

* uniform  -> one partition.
* skew{h, p} -> the paper's special/regular keys: (h, p) and (1-h, 1-p).
* zipfian{theta} -> rank buckets growing by a factor 4 (ranks 1, 2-4, 5-16, ...);
  bucket mass = (H(hi) - H(lo-1)) / H(N) with H the generalized harmonic number.
  Within a bucket the first and last key differ by at most 4^theta in
  probability. YCSB scrambles ranks over the key space, so the buckets are key
  *sets*, not ranges.
* latest{theta} -> the same zipfian buckets over *recency* ranks (rank 1 is the
  newest put); the model places a recency bucket in the levels by position.
* normal{mean, stddev} -> bins of stddev/2 over mean +- 4 stddev, clipped to the
  key space [0, 1], plus the rest of the key space; mass from the normal CDF,
  renormalized to the key space (a truncated normal).

Gets and puts share the partitioning when they have the same distribution (the
same hot keys, as YCSB's single key chooser); if one is uniform the other's
partitions are used; otherwise the two are independent and the partitions are
their product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specs.schema import Distribution
from specs.vocab import DistributionKind

#: Ratio between consecutive zipfian rank-bucket boundaries.
ZIPF_BUCKET_GROWTH = 4
#: Number of leading ranks whose harmonic sum is computed exactly.
_EXACT_HARMONIC = 10_000


def harmonic(n: float, theta: float) -> float:
    """Generalized harmonic number H(n, theta) = sum_{i=1}^{n} i^-theta.

    Exact up to 10^4 terms, Euler-Maclaurin beyond (error below 1e-9 relative).
    """
    if n <= 0:
        return 0.0
    m = min(int(n), _EXACT_HARMONIC)
    exact = float(np.sum(np.arange(1, m + 1, dtype=float) ** -theta))
    if n <= _EXACT_HARMONIC:
        return exact
    a, b = float(m), float(n)
    if abs(theta - 1.0) < 1e-12:
        integral = math.log(b / a)
    else:
        integral = (b ** (1 - theta) - a ** (1 - theta)) / (1 - theta)
    correction = 0.5 * (b**-theta - a**-theta) + theta / 12 * (a ** (-theta - 1) - b ** (-theta - 1))
    return exact + integral + correction


@dataclass(frozen=True)
class Marginal:
    """One distribution's partitions: key fraction and access probability each."""

    frac: np.ndarray
    prob: np.ndarray
    recency: bool = False  # partitions are recency-rank intervals, newest first


def marginal(d: Distribution, n_keys: float) -> Marginal:
    """Partitions of one distribution over ``n_keys`` keys."""
    if d.kind == DistributionKind.UNIFORM:
        return Marginal(np.array([1.0]), np.array([1.0]))
    if d.kind == DistributionKind.SKEW:
        h, p = d.hot_fraction, d.hot_probability
        return Marginal(np.array([h, 1 - h]), np.array([p, 1 - p]))
    if d.kind in (DistributionKind.ZIPFIAN, DistributionKind.LATEST):
        n = max(1.0, float(n_keys))
        total = harmonic(n, d.theta)
        bounds = [1.0]
        while bounds[-1] < n:
            bounds.append(min(n, max(bounds[-1] + 1, bounds[-1] * ZIPF_BUCKET_GROWTH)))
        frac, prob = [], []
        prev_h = 0.0
        for lo, hi in zip([0.0, *bounds[:-1]], bounds, strict=True):
            h_hi = harmonic(hi, d.theta)
            frac.append((hi - lo) / n)
            prob.append((h_hi - prev_h) / total)
            prev_h = h_hi
        fa, pa = np.array(frac), np.array(prob)
        return Marginal(fa / fa.sum(), pa / pa.sum(), recency=d.kind == DistributionKind.LATEST)
    if d.kind == DistributionKind.NORMAL:
        mu, sd = d.mean, d.stddev
        # 17 edges: the stop's margin is relative (a quarter bin), as an absolute one outgrows a
        # small stddev and multiplies the edges (1e-12 over bins of 5e-301: 2e288 of them)
        edges = np.arange(mu - 4 * sd, mu + 4.25 * sd, sd / 2)
        edges = np.unique(np.clip(edges, 0.0, 1.0))
        cdf = np.array([0.5 * (1 + math.erf((x - mu) / (sd * math.sqrt(2)))) for x in edges])
        frac = list(np.diff(edges))
        prob = list(np.diff(cdf))
        rest_frac = 1.0 - (edges[-1] - edges[0])
        if rest_frac > 1e-12:
            c0 = 0.5 * (1 + math.erf((0.0 - mu) / (sd * math.sqrt(2))))
            c1 = 0.5 * (1 + math.erf((1.0 - mu) / (sd * math.sqrt(2))))
            frac.append(rest_frac)
            prob.append((c1 - c0) - (cdf[-1] - cdf[0]))
        fa, pa = np.array(frac), np.maximum(np.array(prob), 0.0)
        keep = fa > 0
        fa, pa = fa[keep], pa[keep]
        if pa.sum() <= 0:
            pa = fa.copy()
        return Marginal(fa / fa.sum(), pa / pa.sum())
    raise ValueError(f"unknown distribution kind {d.kind!r}")


@dataclass(frozen=True)
class Partitions:
    """Joint partitions for a node: what the lookup model iterates over.

    ``frac`` (keys), ``p_get`` and ``p_put`` sum to 1 each. ``recency[j]`` is
    the interval of recency ranks (fractions of the keys, newest = 0) of a
    partition drawn by a ``latest`` get distribution, or NaN. ``put`` is the
    put distribution's own partitioning, used for the write windows.
    """

    frac: np.ndarray
    p_get: np.ndarray
    p_put: np.ndarray
    recency: np.ndarray
    put: Marginal

    @property
    def count(self) -> int:
        return int(self.frac.size)


#: Kinds whose partitions run from the hottest keys to the coldest: two of them
#: describe the *same* hot keys (the paper's one set U_1 of special keys, or
#: YCSB's one key chooser), so they are aligned rather than independent.
_POPULARITY_ORDERED = (DistributionKind.SKEW, DistributionKind.ZIPFIAN)


def _aligned(a: Marginal, b: Marginal) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Common refinement of two hottest-first partitionings of the same keys."""
    ca = np.concatenate([[0.0], np.cumsum(a.frac)])
    cb = np.concatenate([[0.0], np.cumsum(b.frac)])
    ca[-1] = cb[-1] = 1.0
    edges = np.unique(np.concatenate([ca, cb]))
    lo, hi = edges[:-1], edges[1:]
    keep = hi - lo > 0
    lo, hi = lo[keep], hi[keep]
    mid = (lo + hi) / 2
    ia = np.clip(np.searchsorted(ca, mid, side="right") - 1, 0, a.frac.size - 1)
    ib = np.clip(np.searchsorted(cb, mid, side="right") - 1, 0, b.frac.size - 1)
    width = hi - lo
    pa = a.prob[ia] * width / a.frac[ia]
    pb = b.prob[ib] * width / b.frac[ib]
    return width, pa / pa.sum(), pb / pb.sum()


def partitions(get: Distribution, put: Distribution, n_keys: float) -> Partitions:
    """Joint get/put partitions (see the module docstring)."""
    g = marginal(get, n_keys)
    p = marginal(put, n_keys)
    if put.kind == DistributionKind.LATEST:
        # Updates to recent keys: as zipfian over recency for the windows; for
        # placement we treat it like zipfian (documented approximation).
        p = Marginal(p.frac, p.prob, recency=False)
    nan2 = np.full((0, 2), np.nan)
    if g.recency:
        starts = np.concatenate([[0.0], np.cumsum(g.frac)[:-1]])
        rec = np.stack([starts, starts + g.frac], axis=1)
        return Partitions(g.frac, g.prob, g.frac.copy(), rec, p)
    if get == put or (get.kind == put.kind and get.kind == DistributionKind.LATEST):
        frac, pg, pp = g.frac, g.prob, p.prob
    elif get.kind == DistributionKind.UNIFORM:
        frac, pg, pp = p.frac, p.frac.copy(), p.prob
    elif put.kind == DistributionKind.UNIFORM:
        frac, pg, pp = g.frac, g.prob, g.frac.copy()
    elif get.kind in _POPULARITY_ORDERED and put.kind in _POPULARITY_ORDERED:
        frac, pg, pp = _aligned(g, p)
    else:
        frac = np.outer(g.frac, p.frac).ravel()
        pg = np.outer(g.prob, p.frac).ravel()
        pp = np.outer(g.frac, p.prob).ravel()
    rec = np.full((frac.size, 2), np.nan) if frac.size else nan2
    return Partitions(frac, pg, pp, rec, p)
