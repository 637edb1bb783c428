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

from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np

from cost_models.design import DesignBatch, model_constants
from cost_models.distributions import Marginal
from cost_models.kernels import numba_kernels
from cost_models.symbolic import compiled
from cost_models.windows import ExactWindow
from specs.limits import MAX_LEVELS  # T=2 over 1e15 keys and a one-entry buffer is 50 levels
from specs.vocab import Compaction, DesignClass, RunStrategy

#: How each class's merges move data and which run a partial merge starts from (render.config
#: writes them into engine.toml's ``algorithms``; docs/model.md, "Partial compaction"). A B-tree
#: moves one file at a time, as a B-tree splits pages; LSMs and hybrids move whole levels. The
#: model must know the policy before memory is split (the merge terms are shared across memory
#: sizes), and an LSM and a hybrid differ only in memory (Algorithm 3: cold levels or not), so
#: both move whole levels: a hybrid's tiered cold levels merged file by file would rewrite the
#: target once per run. The hash log's "partial" picks the segment its garbage collection reads.
CLASS_COMPACTION: dict[DesignClass, tuple[Compaction, RunStrategy]] = {
    DesignClass.LSM: (Compaction.FULL, RunStrategy.FIRST),
    DesignClass.BTREE: (Compaction.PARTIAL, RunStrategy.FIRST),
    DesignClass.HYBRID: (Compaction.FULL, RunStrategy.FULLEST),
    DesignClass.LSH: (Compaction.PARTIAL, RunStrategy.FIRST),
}


def partial_merges(batch: DesignBatch) -> np.ndarray:
    """(n,) the design's merges move one file at a time: its class's CLASS_COMPACTION, decided
    before memory is split (B-tree: no filters and not a hash log; hash logs have no merges)."""
    partial = {c: CLASS_COMPACTION[c][0] == Compaction.PARTIAL for c in (DesignClass.BTREE, DesignClass.LSM)}
    btree = ~(batch.bloom_bits > 0)  # with filters: an LSM or a hybrid, which merge alike
    return ~batch.lsh & np.where(btree, partial[DesignClass.BTREE], partial[DesignClass.LSM])


def runs_taken(strategy: RunStrategy, max_runs: np.ndarray, iota: float) -> np.ndarray:
    """Runs of a level one partial merge takes a file's key range from: the picked run and the
    older ones (their overlapping files come along). ``first`` picks the oldest: one run.
    ``fullest`` picks the run with the most entries: under inserts the full runs tie and the
    oldest wins; under overwrites their sizes differ by what merges into them dropped, so it is
    any of the K, with (K + 1) / 2 runs on average. ``last_full`` (the newest full run; not
    checked against the simulator): all K but a newest that is not yet full, K - 1/2."""
    k = np.maximum(max_runs, 1.0)
    if strategy == RunStrategy.FULLEST:
        return 1.0 + (1.0 - iota) * (k - 1.0) / 2.0
    if strategy == RunStrategy.LAST_FULL:
        return np.maximum(k - 0.5, 1.0)
    return np.ones_like(k)


def partial_levels(compaction: Compaction, full_levels: int, levels: int) -> np.ndarray:
    """(levels,) an engine's merges out of disk level i move one file at a time (cosine-config
    ``merge_policy``: ``hybrid`` is full from levels 1..=``full_levels``, partial below)."""
    i = np.arange(1, levels + 1)
    if compaction == Compaction.HYBRID:
        return i > full_levels
    return np.full(levels, compaction == Compaction.PARTIAL)


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
    mem_range: np.ndarray  # range filters of the hot levels (cost_models.range_filter)
    mem_cache: np.ndarray
    feasible: np.ndarray
    cls: np.ndarray  # class code (paper Algorithm 3)
    lsh: np.ndarray
    space_entries: np.ndarray  # physical entries stored on average (space amplification x N)
    disk_entries: np.ndarray  # the most entries stored at once: what a volume is sized for
    buffered: np.ndarray  # expected entries in the buffer
    max_runs: np.ndarray  # (n, Lm) runs a level may hold
    range_bits: np.ndarray  # (n,) range-filter bits per key of the hot levels
    partial: np.ndarray  # (n, Lm) merges out of the level move one file at a time (partial compaction)
    file_entries: np.ndarray  # (n,) entries per file (the unit partial compaction moves)
    run_strategy: RunStrategy  # which run a partial merge starts from
    overwritten: bool  # shaped by overwrites (level_shape): a tiered last level's newest run holds every key
    holds_all: np.ndarray  # (n, Lm) a level above the last that holds every key for good (keeps_every_key)
    #: an engine's configured bits per height (every row), or None: allocated by the model
    range_per_height: tuple[float, ...] | None = None

    @property
    def size(self) -> int:
        return int(self.L.size)

    def take(self, rows: np.ndarray) -> Layout:
        """The designs ``rows``: every per-design array (first axis the designs) taken, the rest kept."""
        n = self.size
        out = {
            f.name: v[rows] if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == n else v
            for f in fields(self)
            for v in (getattr(self, f.name),)
        }
        return Layout(**out)

    def class_name(self, i: int) -> str:
        return DesignClass.of_code(int(self.cls[i]))


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


def _monkey_rates(
    fpr: np.ndarray,
    batch: DesignBatch,
    bits_avg: np.ndarray,
    hot_count: np.ndarray,
    sized: np.ndarray,
    runs: np.ndarray,
    hot: np.ndarray,
    budget_bits: np.ndarray,
    monkey: MonkeyMemo | None,
) -> None:
    """The Monkey designs' per-level FPRs put into ``fpr`` (:func:`split_memory`: the filter budget
    spread over the hot levels, :func:`_monkey_fpr`, through ``monkey`` when the caller has one)."""
    need = np.flatnonzero(batch.monkey & (bits_avg > 0))
    if need.size:
        if monkey is None:
            fpr[need] = _monkey_fpr(sized[need], runs[need], hot[need], budget_bits[need])
        else:
            fpr[need] = monkey(need, hot_count, sized, runs, hot, budget_bits)


def filter_bytes(keys: Any, bits_per_key: Any) -> Any:
    """Bytes a filter of ``bits_per_key`` bits for each of ``keys`` keys holds (a level's Bloom
    filters and its range filters alike). The one copy: numpy arrays here, one element each in
    cost_models.kernels_numba (compiled from this function)."""
    return keys * bits_per_key / 8.0


class MonkeyMemo:
    """:func:`_monkey_fpr` of the rows of one batch of designs over several memory sizes, each
    memory size's batch a leading part of it (rows by position). A row's rates depend on the
    memory only through its count of hot levels (they fix its hot levels and its filter budget:
    :func:`split_memory`), and :func:`_monkey_fpr` solves each row on its own, so a row is
    solved again only when its count changed."""

    def __init__(self, rows: int, levels: int) -> None:
        self.hot_count = np.full(rows, np.nan)  # the count each row was last solved at
        self.fpr = np.ones((rows, levels))

    def __call__(
        self,
        need: np.ndarray,
        hot_count: np.ndarray,
        sized: np.ndarray,
        runs: np.ndarray,
        hot: np.ndarray,
        budget_bits: np.ndarray,
    ) -> np.ndarray:
        """``_monkey_fpr(sized[need], runs[need], hot[need], budget_bits[need])``."""
        todo = need[~(self.hot_count[need] == hot_count[need])]
        if todo.size:
            self.fpr[todo] = _monkey_fpr(sized[todo], runs[todo], hot[todo], budget_bits[todo])
            self.hot_count[todo] = hot_count[todo]
        return self.fpr[need]


@dataclass
class Shape:
    """The memory-independent part of a layout: levels, capacities, runs."""

    n_keys: float
    entry_bytes: int
    key_bytes: int
    E_B: np.ndarray
    B: np.ndarray
    L: np.ndarray
    lvl: np.ndarray
    exists: np.ndarray
    last: np.ndarray
    cap: np.ndarray
    occ: np.ndarray
    sized: np.ndarray  # entries a level's filters and fences are sized for
    fence: np.ndarray  # fence-pointer bytes per level
    runs: np.ndarray
    per_run: np.ndarray
    leveled: np.ndarray
    space: np.ndarray
    disk: np.ndarray  # the most entries the volume holds at once (levels full, a merge's output)
    buffered: np.ndarray  # expected entries in the buffer
    max_runs: np.ndarray  # runs a level may hold (K, or Z at the last level)
    partial: np.ndarray  # merges out of the level move one file at a time
    file_entries: np.ndarray  # (n,) entries per file
    run_strategy: RunStrategy
    overwritten: bool  # shaped by overwrites (level_shape): a tiered last level's newest run holds every key
    holds_all: np.ndarray  # (n, Lm) a level above the last that holds every key for good (keeps_every_key)

    def take(self, rows: np.ndarray | slice) -> Shape:
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, v in kw.items():
            if isinstance(v, np.ndarray):
                kw[name] = v[rows]
        return Shape(**kw)


class PutStream(Protocol):
    """A workload's puts on a node, as its runs fill (cost_models.windows: ``ExactWindow``,
    ``WindowTable``): the puts that bring a count of distinct keys, and the distinct keys a count of
    puts brings."""

    def __call__(self, distinct: np.ndarray) -> np.ndarray: ...

    def distinct(self, puts: np.ndarray) -> np.ndarray: ...


def flush_window(e_b: np.ndarray, win: PutStream) -> tuple[np.ndarray, np.ndarray]:
    """(Q_0, the entries a flush moves) of buffers of ``e_b`` entries under the puts ``win``: the
    engine freezes a buffer at E_B distinct keys, or at ``buffer_put_limit`` x E_B puts (overwrites
    included) if it is not full by then (engine-template append_group; model_constants.yaml). Such
    a flush moves the distinct keys of its puts: a buffer that holds every key of a workload
    without inserts (W(E_B) infinite) flushes them all every limit's puts, instead of never."""
    e_b = np.asarray(e_b, dtype=float)
    full = win(e_b)
    limit = np.floor(model_constants()["buffer_put_limit"] * e_b)
    capped = full > limit
    q0 = np.where(capped, limit, full)
    # (the distinct keys of the capped flushes only: an uncapped W may be infinite)
    return q0, np.where(capped, np.minimum(win.distinct(np.where(capped, q0, 0.0)), e_b), e_b)


def uniform_puts(n_keys: float) -> PutStream:
    """Updates drawn uniformly from ``n_keys`` keys (cosine-sim's ``--updates``)."""
    return ExactWindow(Marginal(np.ones(1), np.ones(1)), n_keys, 0.0)


@dataclass(frozen=True)
class RunFill:
    """What one run of a level takes as it fills (:func:`run_fill`)."""

    batches: np.ndarray  # the incoming batches it takes, at least one
    entries: np.ndarray  # the entries it then holds


def run_fill(
    cap: np.ndarray,
    runs: np.ndarray,
    incoming: np.ndarray,
    puts: PutStream | None = None,
    window: np.ndarray | None = None,
) -> RunFill:
    """The batches of ``incoming`` entries one run of a level of capacity ``cap`` in ``runs`` runs
    takes, and the entries it then holds: the engine merges a batch into the newest run while the
    run's entries and the batch fit the run's share of the level, else starts a new run
    (cosine-compaction ``place``).

    Batches of new keys add up: the run takes the whole batches that fit its share. Under overwrites
    (``puts``, the workload's stream, and ``window``, the puts one batch spans: a flush, or a level
    above merged whole) a batch shadows the keys of the run it overwrites, so after m batches the run
    holds ``distinct(m window)`` and takes another while that and ``incoming`` fit the share: while
    ``m window <= puts(share - incoming)`` (endless where the share holds every key besides).
    cosine-sim, T 20, K 9, Z 9 holding 1,280 keys under uniform overwrites: a level-1 run of two
    256-entry flushes holds ~460 keys, not 512, so level 1 keeps its nine runs and every key (counted
    whole: 1,024 of room, a level deeper; the ranking's YCSB A "pick T x2", docs/journal/s31-s42.md §38)."""
    share = np.ceil(cap / runs)
    whole = np.maximum(1.0, np.floor(share / np.maximum(incoming, 1.0)))
    if puts is None or window is None:
        return RunFill(whole, incoming * whole)
    windowed = np.isfinite(window) & (window > 0)
    span = np.where(windowed, window, 1.0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        more = np.where(share - incoming >= 1.0, np.floor(puts(np.maximum(share - incoming, 1.0)) / span), 0.0)
        m = np.where(windowed, 1.0 + more, whole)
        held = puts.distinct(m * span)
    # a batch larger than the run's share is a run by itself
    return RunFill(m, np.where(windowed, np.minimum(held, np.maximum(share, incoming)), incoming * m))


def last_level_room(
    cap: np.ndarray,
    buffer_entries: np.ndarray,
    hot_runs: np.ndarray,
    cold_runs: np.ndarray,
    files: np.ndarray,
    partial: np.ndarray,
    n_keys: float,
    puts: PutStream | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(room, batch, run), each (n, Lm): the distinct keys each level can hold as the last level of
    a tree of ``n_keys`` keys loaded and then overwritten, the entries one merge brings into it, and
    the entries one of its Z runs holds as it fills (:func:`run_fill`).

    A last level of Z > 1 runs (tiered) takes incoming data into its newest run once it holds Z
    runs (docs/engine-contract.md), and that run replaces only its own older versions: the Z - 1
    older runs keep theirs, so under overwrites the level ends up holding every key in its newest
    run plus its older runs, and is pushed down once that passes its capacity. A run holds as
    many incoming batches as fit its share of the level (at least one): a flush into level 1, a
    file from a level above that drains file by file, else the whole level above (K runs of
    batches). So the level holds ``cap - (older runs)`` distinct keys; a leveled last level (Z =
    1) holds ``cap``.

    The older runs are of two kinds. The load's inserts fill ``min(Z - 1, N / run)`` of them with
    whole batches of new keys; the overwrites then fill the rest with batches that shadow each
    other's keys (``puts``, the workload's stream: a flush spans the puts that bring a buffer of
    distinct keys, a level above merged whole its K runs' batches' puts, and a run holds the
    distinct keys of its batches' puts; a file of a level drained file by file is a key range, not
    a span of puts, and adds up whole). Checked against the engine's strategy (``cosine-sim``,
    tests/test_last_level.py: T 4-20, K and Z 1-9, 0.1-1.0 of a level's capacity, uniform and
    zipfian overwrites). Counted whole, the overwrites' runs put T 20, K 9, Z 9 at 0.25 of level 1
    a level too deep (1,024 keys of room for 1,280: the ranking's YCSB A "pick T x2", docs/journal/s31-s42.md
    §38); counted as the overwrites' alone, T 4, Z 2 at 0.6 of level 1 a level too shallow (its one
    older run is the load's 512 entries, not ~405 distinct ones)."""

    def fill(puts: PutStream | None) -> tuple[np.ndarray, np.ndarray]:
        """(batch, run), each (n, Lm): the entries one merge brings into each level, and one of its
        Z runs holds (:func:`run_fill`), with every batch new keys (``puts`` None) or the stream's."""
        batch = np.zeros_like(cap)
        run = np.zeros_like(cap)
        incoming = np.asarray(buffer_entries, dtype=float)
        window = None if puts is None else puts(incoming)
        for i in range(cap.shape[1]):
            c = cap[:, i]
            batch[:, i] = incoming
            run[:, i] = run_fill(c, cold_runs, incoming, puts, window).entries
            # what this level passes to the next when it is above the last: a file, or its K runs
            # merged whole; under overwrites the distinct keys of their batches' puts
            batches = hot_runs * run_fill(c, hot_runs, incoming, puts, window).batches
            whole = np.minimum(c, batches * incoming)
            if puts is not None and window is not None:
                with np.errstate(invalid="ignore", over="ignore"):
                    span = batches * window
                    whole = np.where(np.isfinite(window), np.minimum(c, puts.distinct(span)), whole)
                window = np.where(partial[:, i], np.nan, span)
            incoming = np.where(partial[:, i], np.minimum(files, c), whole)
        return batch, run

    batch_w, run_w = fill(None)
    batch, run = (batch_w, run_w) if puts is None else fill(puts)
    older = np.maximum(cold_runs - 1, 0.0)[:, None]
    loaded = np.minimum(older, np.floor(n_keys / np.maximum(run_w, 1.0)))
    held = loaded * run_w + (older - loaded) * run
    room = np.where(cold_runs[:, None] > 1, np.maximum(cap - held, 0.0), cap)
    return room, batch, run


def keeps_every_key(cap: np.ndarray, hot_runs: np.ndarray, batch: np.ndarray, n_keys: float) -> np.ndarray:
    """(n, Lm) A level above the last whose newest run could take every key and the next batch
    besides (``cap / K - batch >= N``): it never merges down (a merge down waits for a batch that
    would pass its run's capacity), so once the tree has deepened under it it holds every key, and
    the level below keeps the copy the tree deepened with (cosine-sim: T 10, K 1, Z 4 at 0.6 and
    0.9 of level 1's capacity: level 1 and level 2 both hold every key)."""
    return cap / np.maximum(hot_runs, 1.0)[:, None] - batch >= n_keys


def drained_fill(
    cap: np.ndarray, buffer_entries: np.ndarray, files: np.ndarray, partial: np.ndarray, max_runs: np.ndarray
) -> np.ndarray:
    """(n, Lm) Mean entries of a level above the last that drains file by file (partial
    compaction; 0 elsewhere): leveled as below, tiered with K - 1 runs full and the newest half.

    Such a level is never emptied: when incoming data would pass its capacity one file moves
    down, so it holds between ``cap - incoming - file`` and ``cap`` entries, ``cap - (incoming +
    file) / 2`` on average (io_model.merge_terms prices the merges into it from the same
    range) — not the half of a level a full merge empties (``level_fill``). Incoming is a flush
    (``buffer_entries``) into level 1, below it a file (at most the level above) when the level
    above drains file by file and the level above's fill when it merges whole; the file is at
    most the level. The engine's simulator (``cosine-sim``) of the Fig. 4B B-tree (level 1
    of 104,000 entries, 65,536-entry files, 3,250-entry flushes) averages 77,700 entries in its
    level 1 over 60 phases of 0.2-1.4 M overwrites; this gives 69,600, ``level_fill`` 52,000
    (docs/journal/s22-s30.md §29; tests/test_partial_compaction.py). Low where a file is half the level or
    more: the file the engine moves is then often the run's shorter remainder."""
    n, lm = cap.shape
    above = np.concatenate([np.zeros((n, 1)), cap[:, :-1]], axis=1)
    above_partial = np.concatenate([np.zeros((n, 1), dtype=bool), partial[:, :-1]], axis=1)
    from_above = np.where(above_partial, np.minimum(files[:, None], above), model_constants()["level_fill"] * above)
    incoming = np.where(np.arange(lm)[None, :] == 0, buffer_entries[:, None], from_above)
    file = np.minimum(files[:, None], cap)
    leveled = np.maximum(cap - (incoming + file) / 2, 0.0)
    # a tiered level drains its picked run a file at a time and fills its newest: K - 1 runs
    # full, the newest half on average (cosine-sim: every run present, 77-90 % of capacity)
    tiered = cap * (1.0 - 1.0 / (2.0 * np.maximum(max_runs, 1.0)))
    return np.where(partial, np.where(max_runs <= 1, leveled, tiered), 0.0)


def level_shape(
    batch: DesignBatch,
    n_keys: float,
    key_bytes: int,
    value_bytes: int,
    levels: int | None = None,
    observed: tuple[float, list[tuple[float, float]]] | None = None,
    partial: np.ndarray | None = None,
    file_entries: float | None = None,
    run_strategy: RunStrategy | None = None,
    *,
    overwrites: bool,
    puts: PutStream | None = None,
) -> Shape:
    """Levels, capacities, occupancy and runs of every design (no memory split).

    ``levels`` pads the level axis to a given width (so batches derived apart
    line up); by default it is the deepest design's level count. ``observed``
    (one design only) replaces the expected occupancy — a buffer half full,
    upper levels half full (the report's weight 1/2) — with a known state:
    (entries in the buffer, [(entries, runs) per disk level]). ``partial`` (levels) and
    ``file_entries`` and ``run_strategy`` give an engine's own compaction instead of its class's
    (CLASS_COMPACTION; a partial design is a B-tree). ``overwrites``: the workload overwrites keys
    (updates, read-modify-writes), so a tiered last level holds fewer distinct keys than its
    capacity (:func:`last_level_room`) and the tree is deeper; ``puts``: their stream on the node
    (:class:`PutStream`, whose batches shadow each other's keys in a run; None: uniform updates,
    :func:`uniform_puts`).
    """
    k = model_constants()
    fill = k["level_fill"]
    fence_bytes = k["fence_pointer_bytes_per_block"] + key_bytes
    n = batch.size
    E = key_bytes + value_bytes
    N = max(1.0, float(n_keys))
    E_B = np.maximum(1.0, np.floor(batch.buffer_bytes / E))
    B = np.maximum(1.0, np.floor(batch.block_bytes / E))
    T = np.where(batch.lsh, 2.0, batch.T)

    # Levels: capacity E_B T^i; L is the first level that holds N by itself. The engine moves data
    # down a whole run at a time, so the last level receives everything above it and the tree
    # deepens when that passes its capacity (docs/engine-contract.md); under overwrites it holds
    # nearly every key. (The textbook count, the first level whose *cumulative* capacity holds N,
    # is up to a level short: 1/(T-1) of the last level's capacity, 100% at T = 2.)
    # Under overwrites a tiered last level holds fewer keys than its capacity (last_level_room):
    # the tree may need one level more than its capacities say.
    need = np.log(np.maximum(N / E_B, 1.0)) / np.log(T)
    lm_cap = int(min(MAX_LEVELS, max(1, np.ceil(np.nanmax(need)) + 1)))
    if levels is not None:
        lm_cap = max(lm_cap, int(levels))
    lm = min(MAX_LEVELS, lm_cap + int(overwrites))  # room for the level overwrites may add
    i = np.arange(1, lm + 1, dtype=float)[None, :]
    with np.errstate(over="ignore"):
        cap = E_B[:, None] * T[:, None] ** i
    if partial is None:
        part = np.broadcast_to(partial_merges(batch)[:, None], (n, lm))
    else:
        given = np.asarray(partial, dtype=bool)
        part = np.broadcast_to(np.pad(given[:lm], (0, max(0, lm - given.size)), mode="edge")[None, :], (n, lm))
    files = np.full(n, float(k["file_entries"] if file_entries is None else file_entries))
    stream = (puts if puts is not None else uniform_puts(N)) if overwrites else None
    room, into, zrun = last_level_room(cap, E_B, batch.K, batch.Z, files, part, N, stream)
    if not overwrites:
        room = cap
    holds = room >= N * (1 - 1e-12)
    L = np.where(holds.any(axis=1), 1 + np.argmax(holds, axis=1), lm).astype(float)
    L = np.where(batch.lsh, 1.0, L)
    if lm > lm_cap and not (L > lm_cap).any():  # no design needed the extra level: the usual width
        lm = lm_cap
        i, cap, part, into, zrun = i[:, :lm], cap[:, :lm], part[:, :lm], into[:, :lm], zrun[:, :lm]
    lvl = np.broadcast_to(i, (n, lm))
    exists = lvl <= L[:, None]
    last = lvl == L[:, None]
    cap = np.where(exists, cap, 0.0)
    cap = np.where(batch.lsh[:, None] & last, N, cap)

    max_runs = np.where(last, batch.Z[:, None], batch.K[:, None])
    max_runs = np.where(batch.lsh[:, None], 1.0, max_runs)
    part = part & exists & ~batch.lsh[:, None]
    upper = np.where(exists & ~last, np.maximum(fill * cap, drained_fill(cap, E_B, files, part, max_runs)), 0.0)
    last_occ = np.maximum(N - upper.sum(axis=1), 1.0)
    # under overwrites a level above the last may hold every key for good; the last then holds
    # the copy the tree deepened with (read by no lookup: every key is found above it)
    holds_all = overwrites & exists & ~last & ~batch.lsh[:, None] & keeps_every_key(cap, batch.K, into, N)
    if overwrites:
        # a level above the last that merges down cycles from empty to at most every key: on
        # average it holds at most level_fill of the keys, however large its capacity
        upper = np.minimum(upper, fill * N)
    upper = np.where(holds_all, N, upper)
    last_occ = np.where(holds_all.any(axis=1), N, last_occ)
    occ = np.where(last, last_occ[:, None], upper)
    buffered = fill * E_B
    if observed is not None:
        buffered = np.array([float(observed[0])])
        ent = np.zeros(lm)
        obs_runs = np.zeros(lm)
        for j, (e, r) in enumerate(observed[1][:lm]):
            ent[j], obs_runs[j] = float(e), float(r)
        depth = int(np.max(np.flatnonzero(ent > 0))) + 1 if (ent > 0).any() else 1
        L = np.array([float(depth)])
        exists = lvl <= L[:, None]
        last = lvl == L[:, None]
        occ = np.where(exists, np.maximum(ent, 0.0)[None, :], 0.0)
        holds_all = holds_all & exists & ~last

    # Filters and fences are sized for a full level (the last level for the
    # keys it can hold, at most N).
    sized = np.where(last, np.minimum(cap, N), cap)
    fence = np.where(exists, sized / B[:, None] * fence_bytes, 0.0)

    # Runs per level follow the level's position (K above the last level, Z at
    # the last), not whether its fences fit in memory: the engine compacts by
    # position, and it keeps the run structure independent of memory, which
    # lets the search share it across VM sizes (docs/model.md).
    leveled = max_runs <= 1
    runs = np.where(leveled, 1.0, np.maximum(1.0, fill * max_runs))
    runs = np.where(part & ~last, max_runs, runs)  # drained a file at a time: every run present
    # a tiered last level holds the batches it has received, not half its Z runs: a run takes
    # whole batches while they fit its share of the level (run_fill), so the level's keys are
    # in occ / that many runs (at least one, at most Z; fractional: the expected count, as the
    # level's occupancy is the expected one). The ranking's YCSB D "pick T /2" (T 16,
    # Z 15) holds 60,000-85,000 keys in its last level, one batch of level 1's 80,000: one run in
    # the engine, 7.5 in the model (0.77 blocks per operation predicted, 0.40 measured;
    # docs/journal/s31-s42.md §37)
    batches = occ / np.maximum(zrun, 1.0)
    runs = np.where(last & ~leveled, np.clip(batches, 1.0, max_runs), runs)
    # a tiered last level under overwrites holds all its Z runs, the newest with every key
    # (last_level_room): a lookup that reaches it finds its key in the first run it reads
    newest_all = overwrites & last & ~leveled & (observed is None)
    runs = np.where(newest_all, max_runs, runs)
    if observed is not None:
        # an observed level that holds nothing has no run to probe (a level the tree deepened past
        # on its way down, or not yet reached)
        runs = np.where(obs_runs[None, :] > 0, obs_runs[None, :], np.where(ent[None, :] > 0, runs, 0.0))
    runs = np.where(exists, runs, 0.0)
    per_run = np.where(exists, np.maximum(occ / np.maximum(runs, 1e-9), 1.0), 0.0)
    per_run = np.where(newest_all, N, per_run)

    g = k["lsh_gc_dead_fraction"]
    lsh_space = N * (1 + 1 / (1 - g)) / 2  # the log oscillates between N and N/(1-g)
    space = np.where(batch.lsh, lsh_space, occ.sum(axis=1))
    # The most entries the volume holds at once, what it is sized for (docs/model.md, "Storage"):
    # every level above the last full (a level fills before it merges down), the last level, and
    # the largest merge's output, written beside its inputs before they are deleted. A full merge
    # into a level rewrites it (leveled) or writes a run of what the level above held (tiered); a
    # merge that moves one file at a time writes that file and the T files it overlaps; the first
    # level receives the buffer's flushes. A hash log peaks at N / (1 - g) entries and copies a
    # segment (a buffer) when it collects one.
    full_above = np.where(exists & ~last, np.minimum(cap, N), 0.0).sum(axis=1)
    received = np.concatenate([E_B[:, None], cap[:, :-1]], axis=1)
    part_into = np.concatenate([np.zeros((n, 1), dtype=bool), part[:, :-1]], axis=1)
    merge_out = np.where(leveled, np.minimum(cap, N), np.minimum(received, N))
    merge_out = np.where(part_into, np.minimum(files[:, None] * (T[:, None] + 1.0), N), merge_out)
    scratch = np.where(exists, merge_out, 0.0).max(axis=1)
    last_held = np.where(last, occ, 0.0).sum(axis=1)
    # and the write-ahead log: the active buffer's puts and those of the frozen buffers waiting for
    # the worker (frozen_buffers, engine MAX_IMMUTABLE), each at most its flush window: E_B records
    # of new keys, at most buffer_put_limit x E_B under overwrites (flush_window). Before the limit a
    # buffer that held every key never flushed and its log grew without bound (stop 63).
    flush_puts = E_B if stream is None else flush_window(E_B, stream)[0]
    wal = (1.0 + k["frozen_buffers"]) * flush_puts
    disk = np.where(batch.lsh, N / (1 - g) + np.minimum(E_B, N), full_above + last_held + scratch) + wal
    return Shape(
        N,
        E,
        key_bytes,
        E_B,
        B,
        L,
        np.array(lvl),
        exists,
        last,
        cap,
        occ,
        sized,
        fence,
        runs,
        per_run,
        leveled,
        space,
        disk,
        np.broadcast_to(np.asarray(buffered, dtype=float), (n,)).copy(),
        np.where(exists, max_runs, 0.0),
        part,
        files,
        CLASS_COMPACTION[DesignClass.BTREE][1] if run_strategy is None else run_strategy,
        overwrites,
        holds_all,
    )


def derive(
    batch: DesignBatch,
    n_keys: float,
    key_bytes: int,
    value_bytes: int,
    memory_bytes: float | np.ndarray,
    levels: int | None = None,
    *,
    overwrites: bool,
    puts: PutStream | None = None,
) -> Layout:
    """Derive the layout of every design in ``batch`` on a node (``overwrites`` and ``puts`` as in
    :func:`level_shape`)."""
    return split_memory(
        level_shape(batch, n_keys, key_bytes, value_bytes, levels, overwrites=overwrites, puts=puts),
        batch,
        memory_bytes,
    )


def split_memory(
    sh: Shape,
    batch: DesignBatch,
    memory_bytes: float | np.ndarray,
    *,
    hot_levels: np.ndarray | None = None,
    bits_per_level: np.ndarray | None = None,
    cache_bytes: np.ndarray | None = None,
    monkey: MonkeyMemo | None = None,
) -> Layout:
    """Hot/cold levels, per-level filters and the block cache for a memory size
    (paper Algorithm 2 line 22: the smallest Y whose hot levels fit).

    A rendered engine fixes these instead of deriving them: ``hot_levels``,
    ``bits_per_level`` (designs x levels) and ``cache_bytes`` override the
    derivation (used to model an engine.toml exactly). ``monkey``: the Monkey rates of
    ``batch``'s rows solved at other memory sizes (a :class:`MonkeyMemo` of a batch ``batch``
    leads).
    """
    c = compiled()
    k = model_constants()
    N = sh.n_keys
    exists, sized, runs = sh.exists, sh.sized, sh.runs
    bits_avg = np.where(batch.lsh, 0.0, batch.bloom_bits)
    range_bits = np.where(batch.lsh, 0.0, batch.range_bits)
    template_index = sh.key_bytes + k["hash_index_overhead_bytes"]
    per_key = np.where(np.isnan(batch.hash_index_bytes), template_index, batch.hash_index_bytes)
    kern = numba_kernels()
    derived = hot_levels is None and bits_per_level is None and cache_bytes is None
    if kern is not None and derived and np.ndim(memory_bytes) == 0:
        # the fused kernels (cost_models.kernels_numba): this function's arithmetic, row by row
        n, lm = exists.shape
        f64 = np.ascontiguousarray
        hot_count, budget_bits = np.empty(n), np.empty(n)
        hot, fpr = np.empty((n, lm), dtype=bool), np.empty((n, lm))
        ex, sz = f64(exists, dtype=bool), f64(sized, dtype=float)
        fence, rbits = f64(sh.fence, dtype=float), f64(range_bits, dtype=float)
        buffer = f64(batch.buffer_bytes, dtype=float)
        kern.split_levels(
            hot_count,
            hot,
            fpr,
            budget_bits,
            ex,
            sz,
            fence,
            f64(sh.lvl, dtype=float),
            f64(sh.L, dtype=float),
            f64(bits_avg, dtype=float),
            rbits,
            buffer,
            f64(batch.all_hot, dtype=bool),
            float(memory_bytes),
        )
        _monkey_rates(fpr, batch, bits_avg, hot_count, sized, runs, hot, budget_bits, monkey)
        bits = np.empty((n, lm))
        mem = np.empty((n, 5))
        kern.split_use(
            bits,
            mem,
            fpr,
            hot,
            f64(batch.lsh, dtype=bool),
            sz,
            fence,
            rbits,
            buffer,
            float(memory_bytes),
            float(N),
            f64(per_key, dtype=float),
        )
        mem_filter, mem_fence, mem_range, mem_cache = mem[:, 0], mem[:, 1], mem[:, 2], mem[:, 3]
        feasible = mem[:, 4] > 0
        Y = np.where(batch.lsh, 0.0, sh.L - hot_count)
    else:
        if hot_levels is None:
            # a hot level holds its fences, Bloom filters and range filters in memory
            per_level_filter = np.where(exists, filter_bytes(sized, bits_avg[:, None]), 0.0)
            per_level_filter = per_level_filter + np.where(exists, filter_bytes(sized, range_bits[:, None]), 0.0)
            cum_mem = np.cumsum(sh.fence + per_level_filter, axis=1)
            spare = memory_bytes - batch.buffer_bytes
            hot_count = np.sum((cum_mem <= spare[:, None]) & exists, axis=1).astype(float)
            hot_count = np.where(batch.all_hot, sh.L, hot_count)
        else:
            hot_count = np.minimum(np.asarray(hot_levels, dtype=float), sh.L)
        Y = np.where(batch.lsh, 0.0, sh.L - hot_count)
        hot = exists & (sh.lvl <= hot_count[:, None])

        if bits_per_level is None:
            # Filters: the same total memory either spread Monkey-style or uniformly.
            hot_cap = np.where(hot, sized, 0.0)
            budget_bits = bits_avg * hot_cap.sum(axis=1)
            fpr = np.where(hot & (bits_avg[:, None] > 0), c["bloom_fpr"](bits_avg)[:, None], 1.0)
            _monkey_rates(fpr, batch, bits_avg, hot_count, sized, runs, hot, budget_bits, monkey)
        else:
            b = np.asarray(bits_per_level, dtype=float)
            fpr = np.where(b > 0, c["bloom_fpr"](b), 1.0)
        fpr = np.where(hot, fpr, 1.0)
        fpr = np.where(batch.lsh[:, None], 0.0, fpr)  # the hash index is exact
        bits = np.where(hot & (fpr < 1.0), c["bloom_bits"](np.maximum(fpr, 1e-300)), 0.0)
        bits = np.where(batch.lsh[:, None], 0.0, bits)

        mem_filter = np.where(hot, filter_bytes(sized, bits), 0.0).sum(axis=1)
        mem_fence = np.where(hot, sh.fence, 0.0).sum(axis=1)
        mem_fence = np.where(batch.lsh, N * per_key, mem_fence)
        mem_range = np.where(hot, filter_bytes(sized, range_bits[:, None]), 0.0).sum(axis=1)
        used = batch.buffer_bytes + mem_filter + mem_fence + mem_range
        mem_cache = np.maximum(0.0, memory_bytes - used) if cache_bytes is None else np.asarray(cache_bytes, float)
        feasible = used <= memory_bytes * (1 + 1e-9)

    # Paper Algorithm 3: filters -> LSM (no cold levels) or hybrid; else LSH if
    # flat, else B-tree.
    has_filter = bits_avg > 0
    cls = np.where(
        batch.lsh,
        DesignClass.LSH.code,
        np.where(has_filter, np.where(Y > 0, DesignClass.HYBRID.code, DesignClass.LSM.code), DesignClass.BTREE.code),
    )
    E_B, B, L, cap, occ, per_run, leveled, space = sh.E_B, sh.B, sh.L, sh.cap, sh.occ, sh.per_run, sh.leveled, sh.space
    E, key_bytes = sh.entry_bytes, sh.key_bytes
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
        mem_range=mem_range,
        mem_cache=mem_cache,
        feasible=feasible,
        cls=cls,
        lsh=batch.lsh.copy(),
        space_entries=space,
        disk_entries=sh.disk,
        buffered=sh.buffered,
        max_runs=sh.max_runs,
        range_bits=range_bits,
        partial=sh.partial,
        file_entries=sh.file_entries,
        run_strategy=sh.run_strategy,
        overwritten=sh.overwritten,
        holds_all=sh.holds_all,
    )


def index_fanout(block_bytes: float | np.ndarray, key_bytes: float) -> np.ndarray:
    """Data blocks one on-disk index block points at (cosine-config ``index_fanout``): a block's
    worth of fence pointers (the key + ``model_constants: fence_entry_overhead_bytes`` each), at least 2."""
    fence = key_bytes + model_constants()["fence_entry_overhead_bytes"]
    return np.maximum(2.0, np.floor(np.asarray(block_bytes, dtype=float) / fence))
