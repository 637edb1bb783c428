"""Derived layout of a design on a node: levels, runs, hot/cold, filters, memory.

Given the knobs (T, K, Z, M_B, bits/key, block size) and the node (entries,
entry size, memory), this computes what the paper's search computes before
calling the I/O model (Algorithm 2 lines 20-22): the number of levels L, the
cold levels Y (the smallest Y whose hot levels' filters and fence pointers fit
in the memory left after the buffer), per-level Bloom bits (Monkey or
uniform), and what memory is left for the block cache. Arrays are
``(designs, levels)``; level index 0 is disk level 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cost_models.design import DesignBatch, model_constants
from cost_models.symbolic import compiled

CLASS_CODES = {"lsm": 0, "btree": 1, "lsh": 2, "hybrid": 3}
CLASS_NAMES = {v: k for k, v in CLASS_CODES.items()}
#: Deepest level count considered; T=2 over 1e15 keys and a one-entry buffer is 50.
MAX_LEVELS = 64


@dataclass
class Layout:
    """Derived per-level quantities for a batch of designs on one node."""

    n_keys: float
    entry_bytes: int
    key_bytes: int
    E_B: np.ndarray  # entries in the buffer
    B: np.ndarray  # entries per block
    L: np.ndarray  # disk levels
    Y: np.ndarray  # cold levels (the deepest Y)
    exists: np.ndarray  # (n, Lm) level i exists
    hot: np.ndarray  # (n, Lm) level keeps filters + fences in memory
    cap: np.ndarray  # (n, Lm) capacity in entries
    occ: np.ndarray  # (n, Lm) expected entries present
    runs: np.ndarray  # (n, Lm) expected runs present (fractional)
    per_run: np.ndarray  # (n, Lm) distinct entries per run
    leveled: np.ndarray  # (n, Lm) the level keeps one run (merges rewrite it)
    fpr: np.ndarray  # (n, Lm) probe probability of a run not holding the key
    bits: np.ndarray  # (n, Lm) Bloom bits per key
    mem_filter: np.ndarray
    mem_fence: np.ndarray
    mem_cache: np.ndarray
    feasible: np.ndarray
    cls: np.ndarray  # class code (paper Algorithm 3)
    lsh: np.ndarray
    space_entries: np.ndarray  # physical entries stored (space amplification x N)

    @property
    def size(self) -> int:
        return int(self.L.size)

    def class_name(self, i: int) -> str:
        return CLASS_NAMES[int(self.cls[i])]


def _monkey_fpr(cap: np.ndarray, runs: np.ndarray, hot: np.ndarray, budget_bits: np.ndarray) -> np.ndarray:
    """Per-level FPRs minimizing sum runs_i p_i with sum cap_i bits(p_i) = budget.

    p_i = min(1, mu cap_i / runs_i / ln^2 2) (symbolic.monkey_fpr). On the
    levels where p_i < 1 the budget fixes mu in closed form,
    ln mu = -(budget ln^2 2 + sum cap_i ln(cap_i / runs_i / ln^2 2)) / sum cap_i;
    levels whose p_i would reach 1 get no filter and the rest is re-solved, at
    most once per level.
    """
    c = compiled()
    ln2sq = np.log(2.0) ** 2
    runs_safe = np.maximum(runs, 1e-9)
    unit = np.where(hot, c["monkey_fpr"](1.0, np.maximum(cap, 1e-300), runs_safe), 1.0)  # p_i at mu = 1
    active = hot & (cap > 0)
    log_unit = np.log(np.where(active, unit, 1.0))
    log_mu = np.zeros(cap.shape[0])
    for _ in range(cap.shape[1] + 1):
        w = np.where(active, cap, 0.0)
        denom = w.sum(axis=1)
        num = budget_bits * ln2sq + (w * log_unit).sum(axis=1)
        log_mu = np.where(denom > 0, -num / np.maximum(denom, 1e-300), -np.inf)
        still = active & (log_mu[:, None] + log_unit < 0.0)
        if not (still != active).any():
            break
        active = still
    p = np.where(active, np.exp(np.minimum(log_mu[:, None] + log_unit, 0.0)), 1.0)
    return np.where(hot, p, 1.0)


def derive(
    batch: DesignBatch, n_keys: float, key_bytes: int, value_bytes: int, memory_bytes: float, levels: int | None = None
) -> Layout:
    """Derive the layout of every design in ``batch`` on a node.

    ``levels`` pads the level axis to a given width (so batches derived apart
    line up); by default it is the deepest design's level count.
    """
    c = compiled()
    k = model_constants()
    fill = k["level_fill"]
    fence_bytes = k["fence_pointer_bytes_per_block"] + key_bytes
    n = batch.size
    E = key_bytes + value_bytes
    N = max(1.0, float(n_keys))
    E_B = np.maximum(1.0, np.floor(batch.buffer_bytes / E))
    B = np.maximum(1.0, np.floor(batch.block_bytes / E))
    T = np.where(batch.lsh, 2.0, batch.T)

    # Levels: capacity E_B T^i; L is the first level whose cumulative capacity holds N.
    need = np.log(np.maximum(N / E_B * (T - 1) / T + 1, 1.0)) / np.log(T)
    lm = int(min(MAX_LEVELS, max(1, np.ceil(np.nanmax(need)) + 1)))
    if levels is not None:
        lm = max(lm, int(levels))
    i = np.arange(1, lm + 1, dtype=float)[None, :]
    with np.errstate(over="ignore"):
        cap = E_B[:, None] * T[:, None] ** i
    cum = np.cumsum(cap, axis=1)
    L = np.minimum(lm, 1 + np.argmax(cum >= N, axis=1)).astype(float)
    L = np.where(batch.lsh, 1.0, L)
    lvl = np.broadcast_to(i, (n, lm))
    exists = lvl <= L[:, None]
    last = lvl == L[:, None]
    cap = np.where(exists, cap, 0.0)
    cap = np.where(batch.lsh[:, None] & last, N, cap)

    upper = np.where(exists & ~last, fill * cap, 0.0)
    last_occ = np.maximum(N - upper.sum(axis=1), 1.0)
    occ = np.where(last, last_occ[:, None], upper)

    # Hot levels: memory for filters and fences, shallowest first, sized for a
    # full level (the last level for the keys it can hold, at most N).
    sized = np.where(last, np.minimum(cap, N), cap)
    per_level_fence = np.where(exists, sized / B[:, None] * fence_bytes, 0.0)
    bits_avg = np.where(batch.lsh, 0.0, batch.bloom_bits)
    per_level_filter = np.where(exists, sized * bits_avg[:, None] / 8.0, 0.0)
    cum_mem = np.cumsum(per_level_fence + per_level_filter, axis=1)
    spare = memory_bytes - batch.buffer_bytes
    hot_count = np.sum((cum_mem <= spare[:, None]) & exists, axis=1).astype(float)
    hot_count = np.where(batch.all_hot, L, hot_count)
    Y = np.where(batch.lsh, 0.0, L - hot_count)
    hot = exists & (lvl <= hot_count[:, None])

    # Runs per level follow the level's position (K above the last level, Z at
    # the last), not whether its fences fit in memory: the engine compacts by
    # position, and it keeps the run structure independent of memory, which
    # lets the search share it across VM sizes (docs/model.md).
    max_runs = np.where(last, batch.Z[:, None], batch.K[:, None])
    max_runs = np.where(batch.lsh[:, None], 1.0, max_runs)
    leveled = max_runs <= 1
    runs = np.where(leveled, 1.0, np.maximum(1.0, fill * max_runs))
    runs = np.where(exists, runs, 0.0)
    per_run = np.where(exists, np.maximum(occ / np.maximum(runs, 1e-9), 1.0), 0.0)

    # Filters: the same total memory either spread Monkey-style or uniformly.
    hot_cap = np.where(hot, sized, 0.0)
    budget_bits = bits_avg * hot_cap.sum(axis=1)
    uniform_fpr = np.where(hot & (bits_avg[:, None] > 0), c["bloom_fpr"](bits_avg)[:, None], 1.0)
    fpr = uniform_fpr
    need = np.flatnonzero(batch.monkey & (bits_avg > 0))
    if need.size:
        fpr = fpr.copy()
        fpr[need] = _monkey_fpr(sized[need], runs[need], hot[need], budget_bits[need])
    fpr = np.where(hot, fpr, 1.0)
    fpr = np.where(batch.lsh[:, None], 0.0, fpr)  # the hash index is exact
    bits = np.where(hot & (fpr < 1.0), c["bloom_bits"](np.maximum(fpr, 1e-300)), 0.0)
    bits = np.where(batch.lsh[:, None], 0.0, bits)

    mem_filter = np.where(hot, sized * bits / 8.0, 0.0).sum(axis=1)
    mem_fence = np.where(hot, per_level_fence, 0.0).sum(axis=1)
    lsh_index = N * k["hash_index_bytes_per_key"]
    mem_fence = np.where(batch.lsh, lsh_index, mem_fence)
    used = batch.buffer_bytes + mem_filter + mem_fence
    mem_cache = np.maximum(0.0, memory_bytes - used)
    feasible = used <= memory_bytes * (1 + 1e-9)

    # Paper Algorithm 3: filters -> LSM (no cold levels) or hybrid; else LSH if
    # flat, else B-tree.
    has_filter = bits_avg > 0
    cls = np.where(
        batch.lsh,
        CLASS_CODES["lsh"],
        np.where(has_filter, np.where(Y > 0, CLASS_CODES["hybrid"], CLASS_CODES["lsm"]), CLASS_CODES["btree"]),
    )

    g = k["lsh_gc_dead_fraction"]
    lsh_space = N * (1 + 1 / (1 - g)) / 2  # the log oscillates between N and N/(1-g)
    space = np.where(batch.lsh, lsh_space, occ.sum(axis=1))

    return Layout(
        n_keys=N,
        entry_bytes=E,
        key_bytes=key_bytes,
        E_B=E_B,
        B=B,
        L=L,
        Y=Y,
        exists=exists,
        hot=hot,
        cap=cap,
        occ=occ,
        runs=runs,
        per_run=per_run,
        leveled=leveled,
        fpr=fpr,
        bits=bits,
        mem_filter=mem_filter,
        mem_fence=mem_fence,
        mem_cache=mem_cache,
        feasible=feasible,
        cls=cls,
        lsh=batch.lsh.copy(),
        space_entries=space,
    )
