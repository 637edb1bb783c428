"""Range filters (Rosetta, Luo et al., SIGMOD 2020) for empty range queries.

The engine's filter (engine-template cosine-filter ``range``) keeps one Bloom
filter per dyadic height h of the key space (the key's first 8 bytes as an
integer): height h holds every distinct prefix ``key >> h``, with ``b_h`` bits
per prefix. A range is cut into its maximal dyadic intervals; an interval of
height h is ruled out when the height-h filter rejects its prefix, otherwise
("doubting") both halves are asked one height down, to height 0.

False-positive rate (docs/model.md, "Range filters"): an empty interval of
height h passes with probability

    P(0) = f_0,    P(h) = f_h (1 - (1 - P(h - 1))^2)        (``doubt_fpr``)

where f_h = exp(-b_h ln^2 2) is a Bloom filter's rate at b_h bits per key
(``bloom_fpr``; 1 without a filter), the answers of distinct prefixes being
independent. The range passes when any of its intervals does:
1 - prod_i (1 - P(h_i)). The intervals depend on where the range starts; the
model averages over every alignment of a uniformly placed start (the bench's
empty ranges start uniformly in the key space), which is exact for the
decomposition. Heights above the filter's top split into 2^(h - top) top
intervals, as the engine does.

Memory: a height holds about one prefix per key while the keys are sparse in
the key space (N << 2^(64 - h)), so a filter of ``sum_h b_h`` bits per key costs
that many bits per key in memory (the engine keeps it with a hot level's
fence pointers). :func:`allocate` spreads a bits-per-key budget over heights to
minimize the FPR for the workload's range width (Rosetta's memory allocation
problem, solved numerically here).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from cost_models.symbolic import compiled

#: Most heights a filter may have (engine cosine-filter ``MAX_HEIGHTS``).
MAX_HEIGHTS = 64
#: Most top-height intervals a query expands to before the engine answers "may
#: intersect" without probing (engine cosine-filter ``MAX_TOP_INTERVALS``).
MAX_TOP_INTERVALS = 64
#: Range-filter bits per key the design search offers (issue 17: {0, 8, 16, 22}); 22 bits
#: give a width-64 range an FPR near 1% (``fpr(allocate(22, 64), 64)``).
BITS_LADDER = (0.0, 8.0, 16.0, 22.0)
#: Allocation granularity (bits per prefix are rounded to this for engine.toml).
BITS_STEP = 0.01


def heights_for(width: int) -> int:
    """Heights a filter for ranges of ``width`` key values keeps: 0..floor(log2 width)
    (the tallest dyadic interval a range of that width can contain)."""
    return max(1, int(math.floor(math.log2(max(1, width)))) + 1)


@lru_cache(maxsize=64)
def decompositions(width: int, top: int) -> np.ndarray:
    """(alignments, top + 1) counts of the intervals of each height probed for a range of
    ``width`` values starting at every offset modulo 2^(floor(log2 width) + 1); a row of
    -1 marks a start whose expansion exceeds :data:`MAX_TOP_INTERVALS` (always positive)."""
    period = 1 << (int(math.floor(math.log2(max(1, width)))) + 1)
    out = np.zeros((period, top + 1), dtype=float)
    for x0 in range(period):
        x, end = period + x0, period + x0 + width  # shifted so no start is 0
        parts = 0
        while x < end:
            h = (x & -x).bit_length() - 1
            while x + (1 << h) > end:
                h -= 1
            if h > top:
                n = 1 << (h - top)
                parts += n
                out[x0, top] += n
            else:
                parts += 1
                out[x0, h] += 1
            x += 1 << h
        if parts > MAX_TOP_INTERVALS:
            out[x0, :] = -1.0
    return out


def interval_fpr(bits_per_height: np.ndarray) -> np.ndarray:
    """P(h) for h = 0..top: an empty dyadic interval of height h passes doubting."""
    c = compiled()
    b = np.asarray(bits_per_height, dtype=float)
    f = np.where(b > 0, c["bloom_fpr"](np.maximum(b, 0.0)), 1.0)
    p = np.empty_like(f)
    for h in range(f.size):
        p[h] = f[0] if h == 0 else c["doubt_fpr"](f[h], p[h - 1])
    return p


def fpr(bits_per_height: list[float] | np.ndarray, width: int) -> float:
    """Expected probability that an empty range of ``width`` key values is reported
    non-empty by a filter with ``bits_per_height`` (1.0 without a filter)."""
    b = np.asarray(bits_per_height, dtype=float)
    if b.size == 0 or not (b > 0).any():
        return 1.0
    counts = decompositions(int(width), b.size - 1)
    p = interval_fpr(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_miss = np.log1p(-np.minimum(p, 1.0))
        terms = np.where(counts > 0, counts * log_miss[None, :], 0.0).sum(axis=1)
    per_start = np.where(counts[:, 0] < 0, 1.0, -np.expm1(terms))
    return float(np.clip(per_start.mean(), 0.0, 1.0))


@lru_cache(maxsize=256)
def allocate(bits_per_key: float, width: int) -> tuple[float, ...]:
    """Bits per prefix at each height (sum = ``bits_per_key``) minimizing :func:`fpr`
    for ranges of ``width`` values; () for no filter."""
    if bits_per_key <= 0:
        return ()
    hs = heights_for(width)
    if hs == 1:
        return (round(bits_per_key, 2),)

    def objective(x: np.ndarray) -> float:
        return math.log(max(fpr(x, width), 1e-300))

    # Pattern search on the simplex: move `step` bits between two heights while that
    # lowers the FPR, halving the step down to BITS_STEP (the rate is smooth in the bits).
    x = np.full(hs, bits_per_key / hs)
    best, step = objective(x), bits_per_key / hs
    while step >= BITS_STEP:
        moved = False
        for i in range(hs):
            for j in range(hs):
                if i == j or x[i] < step:
                    continue
                y = x.copy()
                y[i] -= step
                y[j] += step
                v = objective(y)
                if v < best - 1e-12:
                    x, best, moved = y, v, True
        if not moved:
            step /= 2
    x = np.maximum(np.round(x / BITS_STEP) * BITS_STEP, 0.0)
    x[0] += bits_per_key - float(x.sum())  # rounding left over goes to height 0
    return tuple(round(float(v), 4) for v in x)


def design_fpr(bits_per_key: float, width: int) -> float:
    """FPR of the optimally allocated filter of ``bits_per_key`` for ranges of ``width``."""
    return fpr(list(allocate(float(bits_per_key), int(width))), int(width))


def layout_fpr(range_bits: np.ndarray, width: int, per_height: tuple[float, ...] | None = None) -> np.ndarray:
    """Range-filter FPR of every design for empty ranges of ``width``: the engine's configured
    bits per height when given, else the optimal allocation of each design's bits per key."""
    if per_height is not None:
        return np.full(np.shape(range_bits), fpr(list(per_height), width))
    b = np.asarray(range_bits, dtype=float)
    out = np.ones(b.shape)
    for v in np.unique(b[b > 0]):
        out[b == v] = design_fpr(float(v), width)
    return out
