"""Distribution-aware I/O per operation (paper Table 2, technical report Sec. 1-2).

For every design of a :class:`~cost_models.layout.Layout` this returns the
expected blocks read/written per operation type: single-result lookup (sigma_l),
no-result lookup (sigma_n), range (sigma_s), put (sigma_p, amortized merges),
blind update (sigma_u) and read-modify-write (sigma_w). Only compiled sympy
expressions (``cost_models.symbolic``) are evaluated; this module composes
them over levels (products, prefix/suffix) and partitions (weighted sums).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from cost_models.design import model_constants
from cost_models.distributions import Marginal, Partitions
from cost_models.kernels import numba_kernels
from cost_models.layout import Layout, PutStream, flush_window, index_fanout, runs_taken
from cost_models.range_filter import layout_fpr
from cost_models.symbolic import compiled
from cost_models.windows import ExactWindow, WindowTable
from specs.schema import DEFAULT_EMPTY_RANGE_WIDTH
from specs.vocab import OPERATIONS


@dataclass
class Cascades:
    """The merge cascades the background worker runs before a flush (docs/model.md, "Write stalls").

    A flush that level 1 cannot take waits for level 1 to merge into level 2, which may
    wait for level 2 to merge into level 3, and so on; the cascade that ends at level i
    runs the merges into levels 1..i back to back. Columns are disk levels (the last axis).
    """

    rate: np.ndarray  # (..., L): cascades ending at level i, per put
    blocks: np.ndarray  # (..., L): blocks such a cascade reads and writes (its merges into levels 1..i)
    slack_puts: np.ndarray  # (...,): puts the frozen buffers and the active one absorb before writers stall

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> Cascades:
        """``fn`` applied over the leading (design) axes, level by level."""

        def per_level(v: np.ndarray) -> np.ndarray:
            return np.stack([fn(v[..., j]) for j in range(v.shape[-1])], axis=-1)

        return Cascades(per_level(self.rate), per_level(self.blocks), fn(self.slack_puts))

    def take(self, rows: np.ndarray) -> Cascades:
        """The designs ``rows`` (of cascades with one design axis): ``map(lambda v: v[rows])``
        without a copy per level."""
        return Cascades(self.rate[rows], self.blocks[rows], self.slack_puts[rows])

    def flat(self) -> Cascades:
        """The design axes made one (``map(np.ravel)``, as one reshape)."""
        lm = self.rate.shape[-1]
        return Cascades(self.rate.reshape(-1, lm), self.blocks.reshape(-1, lm), self.slack_puts.reshape(-1))

    @staticmethod
    def concat(parts: list[Cascades]) -> Cascades:
        """Rows of several designs' cascades, padded to the deepest tree."""
        lm = max(c.rate.shape[-1] for c in parts)

        def pad(v: np.ndarray) -> np.ndarray:
            return np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, lm - v.shape[-1])])

        return Cascades(
            np.concatenate([pad(c.rate) for c in parts]),
            np.concatenate([pad(c.blocks) for c in parts]),
            np.concatenate([c.slack_puts for c in parts]),
        )


@dataclass
class IOCost:
    """Expected block I/Os per operation for each design (arrays of shape (n,))."""

    get: np.ndarray
    empty_get: np.ndarray
    range: np.ndarray
    insert: np.ndarray
    update: np.ndarray
    rmw: np.ndarray
    empty_range: np.ndarray
    #: share of the lookups (gets, an rmw's read) the buffer answers: they walk no level (the CPU
    #: model charges them less); None where unknown (then every lookup walks the levels)
    get_buffered: np.ndarray | None = None
    #: the on-disk index blocks among each operation's reads (cold levels' fence pointers), as
    #: an IOCost of its own; None where not split out (then every block counts as a data block)
    index: IOCost | None = None
    #: the puts' merge cascades, for the write stalls of the CPU model; None where not modelled
    cascades: Cascades | None = None

    @classmethod
    def of(cls, per: Mapping[str, np.ndarray], get_buffered: np.ndarray | None = None) -> IOCost:
        """Costs from a mapping operation -> blocks (every operation of OPERATIONS; the index reads
        not split out)."""
        return cls(
            get=per["get"],
            empty_get=per["empty_get"],
            range=per["range"],
            insert=per["insert"],
            update=per["update"],
            rmw=per["rmw"],
            empty_range=per["empty_range"],
            get_buffered=get_buffered,
        )

    def per_op(self) -> dict[str, np.ndarray]:
        return {op: getattr(self, op) for op in OPERATIONS}

    def buffered_share(self) -> np.ndarray:
        """:attr:`get_buffered`, zeros where unknown."""
        return np.zeros_like(self.get, dtype=float) if self.get_buffered is None else self.get_buffered

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> IOCost:
        """The same costs with ``fn`` applied to every array (selecting or reshaping designs)."""
        return self._with(fn, lambda c: c.map(fn))

    def take(self, rows: np.ndarray) -> IOCost:
        """The designs ``rows`` (of costs with one design axis): ``map(lambda v: v[rows])``, the
        cascades taken whole instead of level by level."""
        return self._with(lambda v: v[rows], lambda c: c.take(rows))

    def flat(self) -> IOCost:
        """The design axes made one: ``map(np.ravel)``, the cascades reshaped whole."""
        return self._with(np.ravel, Cascades.flat)

    def _with(self, fn: Callable[[np.ndarray], np.ndarray], casc: Callable[[Cascades], Cascades]) -> IOCost:
        """``fn`` applied to every array but the cascades', which ``casc`` maps whole."""
        buffered = None if self.get_buffered is None else fn(self.get_buffered)
        index = None if self.index is None else self.index._with(fn, casc)
        cascades = None if self.cascades is None else casc(self.cascades)
        return IOCost(
            **{op: fn(v) for op, v in self.per_op().items()}, get_buffered=buffered, index=index, cascades=cascades
        )

    def total(self, mix: dict[str, float]) -> np.ndarray:
        """Paper Eq. 1 per operation: sum_op theta_op sigma_op."""
        return sum(mix.get(op, 0.0) * getattr(self, op) for op in OPERATIONS)  # type: ignore[return-value]


def insert_fraction(mix: dict[str, float]) -> float:
    """Share of puts that insert new keys (iota); 1 when there are no puts."""
    puts = mix.get("insert", 0.0) + mix.get("update", 0.0) + mix.get("rmw", 0.0)
    return 1.0 if puts <= 0 else mix.get("insert", 0.0) / puts


def overwrites_keys(mix: Mapping[str, float]) -> bool:
    """The mix overwrites keys (updates or read-modify-writes): a tiered last level then holds
    old versions besides every key (layout.last_level_room)."""
    return insert_fraction(dict(mix)) < 1.0


def exact_windows(
    parts: Partitions, mix: dict[str, float], n_keys: float, gets: ExactWindow | None = None
) -> tuple[ExactWindow, ExactWindow]:
    """The exact windows for puts and gets (block cache) of ``mix`` on a node of ``n_keys``. The
    gets' window does not depend on the mix: ``gets``, another mix's, is used when given."""
    return (
        ExactWindow(parts.put, n_keys, insert_fraction(mix)),
        ExactWindow(Marginal(parts.frac, parts.p_get), n_keys, 0.0) if gets is None else gets,
    )


def _clipped_run_sum(A: np.ndarray, B: np.ndarray, alpha: np.ndarray, n: np.ndarray) -> np.ndarray:
    """sum_{r=1}^{n} clip(A - B r, 0, 1) (1-alpha)^r, via the compiled run_sum.

    The linear factor is a probability: it is 1 while A - B r >= 1 (the runs
    before a recency partition starts) and 0 once A - B r <= 0 (every key of
    the partition found); the closed form applies between those run counts.
    """
    c = compiled()
    n = np.broadcast_to(n, A.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r_one = np.where(B > 0, np.clip((A - 1.0) / B, 0.0, n), np.where(A >= 1.0, n, 0.0))
        r_zero = np.where(B > 0, np.clip(A / B, 0.0, n), np.where(A > 0, n, 0.0))
    r_zero = np.maximum(r_zero, r_one)
    ones = c["run_sum"](1.0, 0.0, alpha, r_one)
    # an infinite B (a window beyond every key) makes the linear segment empty
    b_lin = np.where(np.isfinite(B), B, 0.0)
    lin = c["run_sum"](A, b_lin, alpha, r_zero) - c["run_sum"](A, b_lin, alpha, r_one)
    return ones + lin


def gc_victim_dead(lay: Layout, parts: Partitions, iota: float, q0: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """Dead share of the segment a hash log garbage-collects.

    The engine collects the oldest segment whenever more than g of the log is
    dead, so the log holds about N/(1-g) entries and the victim was appended
    that many flushed entries (``log_puts`` puts ago: ``moved`` entries a flush of ``q0`` puts). An entry of partition j
    is dead if its key was updated since: alpha_window over the updates of that
    span. Entries are weighted by how many of a flush come from each partition.
    The collected share is at least g (GC starts there).
    """
    c = compiled()
    g = model_constants()["lsh_gc_dead_fraction"]
    N = lay.n_keys
    U = parts.frac * N
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        log_puts = np.where(np.isfinite(q0), q0 * N / (1.0 - g) / np.maximum(moved, 1.0), np.inf)
        dead = c["alpha_window"](log_puts[:, None] * (1.0 - iota), U[None, :], parts.p_put[None, :], 0.0, N)
        share = c["distinct_part"](q0[:, None], U[None, :], parts.p_put[None, :], iota)
        d = (np.nan_to_num(share) * np.nan_to_num(dead, nan=1.0)).sum(axis=1) / np.maximum(
            np.nan_to_num(share).sum(axis=1), 1e-300
        )
    return np.clip(np.where(np.isfinite(q0), d, g), g, 1.0)


#: The (puts, gets) windows an evaluation uses: :func:`window_tables` or :func:`exact_windows`.
Windows = tuple[PutStream, Callable[[np.ndarray], np.ndarray]]


def window_tables(
    parts: Partitions, mix: dict[str, float], n_keys: float, gets: WindowTable | None = None
) -> tuple[WindowTable, WindowTable]:
    """Interpolated windows for puts (runs, buffer, merges) and gets (block cache). The gets'
    table does not depend on the mix: ``gets``, another mix's, is used when given."""
    return (
        WindowTable(parts.put, n_keys, insert_fraction(mix)),
        WindowTable(Marginal(parts.frac, parts.p_get), n_keys, 0.0) if gets is None else gets,
    )


@dataclass
class Structure:
    """The memory-independent part of the I/O of each design (rows = designs).

    Everything here depends on the run structure (T, K, Z, buffer, block, keys
    on the node) and the workload, not on how the rest of memory is split
    between filters, fences and the block cache; :func:`combine` adds that.
    ``base`` (the key's own block), ``fp`` (runs passed with the key still
    ahead) and ``reach`` (runs reached) are per key partition and without the
    block-cache factor (1 - alpha_BC), which multiplies them all.
    """

    base: np.ndarray  # (n, P): the key's own block
    fp: np.ndarray  # (n, L, P): false-positive exposure per level
    reach: np.ndarray  # (n, L, P): runs reached (on-disk index reads at cold levels)
    runs: np.ndarray  # (n, L)
    exists: np.ndarray  # (n, L)
    range_blocks: np.ndarray  # (n, L): blocks a range reads per level, seeks included
    empty_seek: np.ndarray  # (n, L): blocks an empty range's seeks read per level when no filter rules it out
    put: np.ndarray  # (n,): sigma_p
    lsh: np.ndarray  # (n,)
    lsh_scan: np.ndarray  # (n,): blocks a range reads in the hash log
    cascades: Cascades  # (n, L): the puts' merge cascades
    level_blocks: np.ndarray | None = None  # (n, L): data blocks per level ('latest' gets only)
    found: np.ndarray | None = None  # (n, L, P): share of a partition's keys per level ('latest' gets only)


@dataclass
class MergeTerms:
    """Per-level write terms of every design (rows = designs, columns = disk levels)."""

    per_put: np.ndarray  # (n, L): merge blocks into level i, amortized per put
    per_merge: np.ndarray  # (n, L): blocks one merge into level i reads and writes
    incoming: np.ndarray  # (n, L): entries one merge moves into level i
    puts_per_flush: np.ndarray  # (n,): Q_0
    puts_per_merge: np.ndarray  # (n, L): puts between two merges into level i (Q_0 for level 1)
    lsh_put: np.ndarray  # (n,): hash-log appends and GC per put
    wal: np.ndarray  # (n,): WAL pages per put


def wal_pages(entry_bytes: float) -> float:
    """WAL pages one put appends (group commit packs entries into pages; symbolic ``wal_append``)."""
    return float(compiled()["wal_append"](entry_bytes, model_constants()["wal_page_bytes"]))


def merge_terms(lay: Layout, parts: Partitions, iota: float, win: PutStream) -> MergeTerms:
    """Merge I/O per level: per event, per put, and what each event moves."""
    c = compiled()
    n, lm = lay.cap.shape
    q0, flush_moves = flush_window(lay.E_B, win)  # puts per flush, entries per flush
    src_full = np.concatenate([flush_moves[:, None], lay.cap[:, :-1]], axis=1)  # entries level i-1 moves per fill
    # Puts to fill level i-1 before it merges down: its runs are deduplicated
    # only within themselves, so K runs of cap/K distinct entries each — the
    # report's Q_i = K f(U, R^i). A leveled level merges down once the next batch
    # into it (a flush, or the level above) would pass its capacity. Batches of new keys
    # fill it in whole steps to exactly its capacity (a multiple of the batch); overwrites
    # make the steps smaller, so it merges down holding between cap - batch and cap
    # distinct entries, cap - batch/2 on average: cap - (1 - iota) batch / 2 (cosine-sim,
    # overwritten leveled trees of T 4-10 at 0.3-1.0 of level 2: merge blocks 0.87-0.975
    # of the simulated priced at cap, 0.97-1.06 so; and a level that could hold every
    # key, cap >= N, still merges down). Tiered levels keep the report's (0.96-0.99), but
    # for a run that could hold every key: it closes too once the next batch would pass it.
    maxr_src = np.concatenate([np.ones((n, 1)), np.maximum(lay.max_runs[:, :-1], 1.0)], axis=1)
    into_src = src_full[:, :-1]
    run_src_cap = lay.cap[:, :-1] / maxr_src[:, 1:]
    batch_trigger = run_src_cap - (1.0 - iota) * into_src / 2
    leveled_src = maxr_src[:, 1:] <= 1
    fill_to = np.where(leveled_src | (run_src_cap >= lay.n_keys), batch_trigger, run_src_cap)
    q_fill = np.concatenate([q0[:, None], maxr_src[:, 1:] * win(np.maximum(fill_to, 1.0))], axis=1)
    reads_src = np.concatenate([np.zeros((n, 1)), np.ones((n, lm - 1))], axis=1)
    # Partial compaction (docs/model.md, "Partial compaction"): a level that merges file by
    # file moves one file of one run at a time (a run smaller than a file is one file), so a
    # level's fill leaves in src_full / moved merges. The file's key range is its share of the
    # run's; a leveled level that receives data while it drains holds key ranges filled since
    # their last move, 0 to twice the mean density: the densest of its F files (dense_fp, the
    # picking Cosine renders) spans (F + 1) / 2F of a mean file's range (the mean maximum of F
    # uniform densities), half of it when the run has many files.
    files = lay.file_entries[:, None]
    from_partial = np.concatenate([np.zeros((n, 1), dtype=bool), lay.partial[:, :-1]], axis=1)
    # A tiered level's merge takes that key range from runs_taken of its runs.
    run_src = np.maximum(src_full / maxr_src, 1.0)
    one_file = np.minimum(files, run_src)
    per_run = np.maximum(run_src / np.maximum(one_file, 1.0), 1.0)
    densest = np.where(maxr_src <= 1, (per_run + 1) / (2 * per_run), 1.0)
    share = np.where(from_partial, densest * one_file / run_src, 1.0)
    taken = runs_taken(lay.run_strategy, maxr_src, iota)
    moved = np.where(from_partial, np.minimum(taken * one_file, src_full), src_full)
    with np.errstate(divide="ignore", invalid="ignore"):
        q_src = np.where(src_full > 0, q_fill * moved / np.maximum(src_full, 1e-300), q_fill)
    # Incoming data merges into the level's newest run while that run has room
    # (engine contract). A run takes m = run capacity / incoming batches; the
    # merges into it find 0, 1, .., m-1 batches there, (run capacity - incoming)/2
    # entries on average. The last level's single run holds its whole content. A
    # leveled level that itself drains file by file is emptied only a file at a time:
    # before each merge into it, it holds between run capacity - incoming - a file and
    # run capacity - incoming. A tiered last level under overwrites holds its Z runs and
    # merges everything into its newest, which holds every key the level's keys were
    # overwritten into (layout.last_level_room): each merge rewrites the level's keys, as a
    # leveled last level's does (cosine-sim: 0.46-0.81 of the simulated merge blocks priced
    # as half a run, 0.84-0.99 so; tests/test_last_level.py).
    maxr = np.maximum(lay.max_runs, 1.0)
    run_cap = lay.cap / maxr
    last = lay.L[:, None] == np.arange(1, lm + 1)[None, :]
    whole_last = last & ((maxr <= 1) | lay.overwritten)
    # a level above the last that holds every key for good (layout.keeps_every_key) takes every
    # merge into the run that holds them
    whole_last |= lay.holds_all
    rewrites = whole_last | (maxr <= 1) | (run_cap > moved * (1 + 1e-9))
    room = np.maximum(run_cap - moved, 0.0)
    drained = np.where(lay.partial & (maxr <= 1) & ~last, np.maximum(room - files, 0.0), 0.0)
    existing = np.where(
        whole_last,
        lay.occ,
        np.where(lay.partial & (maxr <= 1) & ~last, (room + drained) / 2, np.minimum(lay.occ, room / 2)),
    )
    # a partial merge rewrites the target's files its key range overlaps: that share of the
    # run, plus the file its edge cuts (the whole run when the run is one file)
    rewritten = np.where(from_partial, np.minimum(existing, share * existing + np.minimum(files, existing)), existing)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        per_put = c["merge_cost"](reads_src, moved, rewrites.astype(float), rewritten, lay.B[:, None], q_src)
        per_merge = c["merge_cost"](reads_src, moved, rewrites.astype(float), rewritten, lay.B[:, None], 1.0)
    per_put = np.where(lay.exists & np.isfinite(per_put), per_put, 0.0)
    per_merge = np.where(lay.exists & np.isfinite(per_merge), per_merge, 0.0)
    flushed = np.where(np.isfinite(q0), flush_moves / q0, 0.0)
    lsh_put = flushed * c["log_append"](1.0 - iota, gc_victim_dead(lay, parts, iota, q0, flush_moves), lay.B)
    wal = np.broadcast_to(wal_pages(lay.entry_bytes), (n,)).astype(float)
    return MergeTerms(per_put, per_merge, np.where(lay.exists, moved, 0.0), q0, q_src, lsh_put, wal)


def cascades(lay: Layout, mt: MergeTerms) -> Cascades:
    """The merge cascades of every design (docs/model.md, "Write stalls").

    Merges into level i happen every ``puts_per_merge`` puts, and each brings along one
    merge into every level above it, so cascades ending exactly at level i happen at the
    difference of the two levels' rates, and run the merges into levels 1..i. The writers
    stall once ``frozen_buffers`` frozen buffers wait and the active one is full: a cascade
    starts when a buffer freezes, so the clients go on for that many buffers' puts. A hash
    log flushes and collects garbage a batch at a time and has no cascades.
    """
    live = lay.exists & (mt.per_merge > 0) & np.isfinite(mt.puts_per_merge) & (mt.puts_per_merge > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        into = np.where(live, 1.0 / np.where(live, mt.puts_per_merge, 1.0), 0.0)
    deeper = np.concatenate([into[:, 1:], np.zeros((into.shape[0], 1))], axis=1)
    rate = np.where(lay.lsh[:, None], 0.0, np.maximum(into - deeper, 0.0))
    blocks = np.cumsum(np.where(live, mt.per_merge, 0.0), axis=1)
    slack = model_constants()["frozen_buffers"] * np.where(np.isfinite(mt.puts_per_flush), mt.puts_per_flush, 0.0)
    return Cascades(rate, blocks, slack)


def structure(lay: Layout, parts: Partitions, mix: dict[str, float], scan_length: float, win: PutStream) -> Structure:
    """Memory-independent I/O terms of every design of ``lay``."""
    c = compiled()
    N = lay.n_keys
    iota = insert_fraction(mix)
    n, lm = lay.cap.shape
    P = parts.count
    recency = ~np.isnan(parts.recency[:, 0])

    # --- single-result lookups in "first hit" form (symbolic.py: survival, run_sum)
    U = parts.frac * N
    rate = (1.0 - iota) * parts.p_put / U  # update hits per put, per key of the partition
    runs = np.where(lay.exists, lay.runs, 0.0)
    w_buf = np.where(lay.buffered > 0, win(np.maximum(lay.buffered, 1.0)), 0.0)  # puts the buffer spans
    w_run = np.where(lay.exists, win(np.maximum(lay.per_run, 1.0)), 0.0)  # puts one run spans
    with np.errstate(invalid="ignore", over="ignore"):
        t_start = w_buf[:, None] + np.concatenate([np.zeros((n, 1)), np.cumsum(runs * w_run, axis=1)[:, :-1]], axis=1)
        g_buf = c["survival"](w_buf[:, None], U, parts.p_put, iota, N)
    g_buf = np.where(lay.buffered[:, None] > 0, np.nan_to_num(g_buf, nan=0.0), 1.0)
    # The per-partition terms (rows = the levels that exist, a column per partition): a level
    # that does not exist has none (fp and reach are 0 there), and every term is elementwise.
    di, li = np.nonzero(lay.exists)
    m = di.size
    t_at, w_at = t_start[di, li], w_run[di, li]
    fp = np.zeros((n, lm, P))
    reach = np.zeros((n, lm, P))
    kern = numba_kernels()
    if kern is not None:  # the fused kernel: fp and reach in one pass (cost_models.kernels_numba)
        if recency.any():
            a_r, b_r = parts.recency[:, 0], parts.recency[:, 1]
            width = np.maximum(b_r - a_r, 1e-300)
            pos = lay.buffered[:, None] + np.concatenate([np.zeros((n, 1)), np.cumsum(lay.occ, axis=1)[:, :-1]], axis=1)
            pos_at, per_run_at = pos[di, li], lay.per_run[di, li]
            g_rec = np.clip((b_r[None, :] - lay.buffered[:, None] / N) / width, 0.0, 1.0)
            g_buf = np.where(recency[None, :], g_rec, g_buf)
        else:
            b_r = width = np.zeros(P)
            pos_at = per_run_at = np.zeros(m)
        f64 = np.ascontiguousarray
        kern.lookup_terms(
            fp,
            reach,
            di,
            li,
            f64(t_at, dtype=float),
            f64(w_at, dtype=float),
            f64(runs[di, li], dtype=float),
            f64(lay.L[di] == li + 1),
            f64(rate, dtype=float),
            float(iota),
            float(N),
            f64(recency),
            f64(b_r, dtype=float),
            f64(width, dtype=float),
            f64(pos_at, dtype=float),
            f64(per_run_at, dtype=float),
        )
    else:
        _lookup_terms_numpy(lay, parts, fp, reach, di, li, t_at, w_at, runs, rate, iota, N, recency)
        if recency.any():
            a_r, b_r = parts.recency[:, 0], parts.recency[:, 1]
            width = np.maximum(b_r - a_r, 1e-300)
            g_rec = np.clip((b_r[None, :] - lay.buffered[:, None] / N) / width, 0.0, 1.0)
            g_buf = np.where(recency[None, :], g_rec, g_buf)
    base = g_buf  # the key's own block is read from disk unless it is in the buffer

    # --- ranges: each run's share of the range plus its seek
    sel = scan_length / N
    range_blocks = np.where(lay.exists, lay.runs * c["range_run"](sel, lay.per_run, lay.B[:, None]), 0.0)
    # --- empty ranges: per run, the block holding the range's start (and the next one when
    # the start is past that block's last key); a range filter or a cold index multiplies it
    empty_seek = np.where(lay.exists, lay.runs * c["empty_range_run"](1.0, 0.0, lay.B[:, None]), 0.0)

    # --- where a 'latest' get's key lies: the share of each partition's keys in each level (those
    # still ahead at the level's start less those still ahead at its end; none past the last),
    # for the block cache's per-level view (level_cache_alpha)
    found = level_blocks = None
    if recency.all() and P > 0:
        a_r, b_r = parts.recency[:, 0], parts.recency[:, 1]
        width = np.maximum(b_r - a_r, 1e-300)
        starts = lay.buffered[:, None] + np.concatenate([np.zeros((n, 1)), np.cumsum(lay.occ, axis=1)], axis=1)
        ahead = np.clip((b_r[None, None, :] - starts[:, :, None] / N) / width[None, None, :], 0.0, 1.0)
        last_level = lay.exists & (np.arange(1, lm + 1)[None, :] == lay.L[:, None])
        after = np.where((lay.exists & ~last_level)[:, :, None], ahead[:, 1:], 0.0)
        found = np.where(lay.exists[:, :, None], ahead[:, :-1] - after, 0.0)
        level_blocks = np.where(lay.exists, lay.occ / np.maximum(lay.B, 1.0)[:, None], 0.0)

    put, casc = put_terms(lay, parts, mix, win)
    return Structure(
        base=base,
        fp=fp,
        reach=reach,
        runs=lay.runs,
        exists=lay.exists,
        range_blocks=range_blocks,
        empty_seek=empty_seek,
        put=put,
        lsh=lay.lsh.copy(),
        lsh_scan=hash_log_scan(lay, sel),
        cascades=casc,
        level_blocks=level_blocks,
        found=found,
    )


def _lookup_terms_numpy(
    lay: Layout,
    parts: Partitions,
    fp: np.ndarray,
    reach: np.ndarray,
    di: np.ndarray,
    li: np.ndarray,
    t_at: np.ndarray,
    w_at: np.ndarray,
    runs: np.ndarray,
    rate: np.ndarray,
    iota: float,
    N: float,
    recency: np.ndarray,
) -> None:
    """:func:`structure`'s lookup terms ``fp`` and ``reach`` (n, L, P), written in place: the numpy
    reference of the fused kernel cost_models.kernels_numba.lookup_terms."""
    n = lay.cap.shape[0]
    m, P = di.size, rate.size
    with np.errstate(invalid="ignore", over="ignore"):
        decay = rate[None, :] * w_at[:, None]  # per run, (m, P)
        alpha_run = np.where(np.isfinite(decay), -np.expm1(-decay), 1.0)
        E = np.exp(-np.nan_to_num(rate[None, :] * t_at[:, None], nan=np.inf))
        A = np.broadcast_to((1.0 - iota * t_at / N)[:, None], (m, P)).copy()
        Bl = np.broadcast_to((iota * w_at / N)[:, None], (m, P)).copy()
    if recency.any():
        # 'latest' gets: a partition is an interval [a, b) of recency ranks; its
        # keys are still ahead at position t (entries from the newest) with
        # probability clip((b - t/N) / (b - a), 0, 1), linear in the runs.
        a_r, b_r = parts.recency[:, 0], parts.recency[:, 1]
        width = np.maximum(b_r - a_r, 1e-300)
        pos = lay.buffered[:, None] + np.concatenate([np.zeros((n, 1)), np.cumsum(lay.occ, axis=1)[:, :-1]], axis=1)
        A_rec = (b_r[None, :] - pos[di, li][:, None] / N) / width
        B_rec = (lay.per_run[di, li][:, None] / N) / width
        sel = recency[None, :]
        A = np.where(sel, A_rec, A)
        Bl = np.where(sel, B_rec, Bl)
        E = np.where(sel, 1.0, E)
        alpha_run = np.where(sel, 0.0, alpha_run)
    A = np.nan_to_num(A, nan=-1.0, neginf=-1.0)
    Bl = np.nan_to_num(Bl, nan=np.inf)
    r = runs[di, li][:, None]
    passed = E * _clipped_run_sum(A, Bl, alpha_run, r)  # runs passed with the key still ahead
    at_start = np.clip(A, 0.0, 1.0)
    reached = E * (at_start + _clipped_run_sum(A, Bl, alpha_run, np.maximum(r - 1.0, 0.0)))
    reached = np.where(r > 0, reached, 0.0)
    # The key's oldest version is in the last level: its last run never misses.
    last = (lay.L[di] == li + 1)[:, None]
    with np.errstate(over="ignore"):  # a run of (near) infinite width (Bl) leaves nothing past it: clipped to 0
        final = E * np.clip(A - Bl * r, 0.0, 1.0) * np.exp(r * np.log1p(-np.minimum(alpha_run, 1.0 - 1e-16)))
    passed = np.where(last, np.maximum(passed - final, 0.0), passed)
    fp[di, li] = np.nan_to_num(passed)
    reach[di, li] = np.nan_to_num(reached)


def put_terms(lay: Layout, parts: Partitions, mix: dict[str, float], win: PutStream) -> tuple[np.ndarray, Cascades]:
    """The puts' part of :func:`structure`: sigma_p (amortized merges, hash-log appends and the
    WAL per put) and the merge cascades. The only part that depends on the merge policy
    (``lay.partial``), so a structure is moved to another policy by replacing these alone."""
    mt = merge_terms(lay, parts, insert_fraction(mix), win)
    put = np.where(lay.lsh, mt.lsh_put, mt.per_put.sum(axis=1)) + mt.wal
    return put, cascades(lay, mt)


def hash_log_scan(lay: Layout, sel: float) -> np.ndarray:
    """Blocks a range of selectivity ``sel`` reads in a hash log: its keys sit in
    random sorted flush chunks of the log (``distinct_blocks``)."""
    chunks = np.maximum(lay.space_entries / np.maximum(lay.E_B, lay.B), 1.0)
    return compiled()["distinct_blocks"](chunks, sel * lay.n_keys)


def block_charge(block_entries: np.ndarray | float, entry_bytes: np.ndarray | float) -> np.ndarray:
    """Bytes of the block cache one data block of ``block_entries`` entries takes: the engine charges
    a decoded block, each entry with its kind, value length and offset, and the block itself
    (model_constants ``cache_entry_overhead_bytes``, ``cache_block_overhead_bytes``). At the
    256-byte floor a block of two 116-byte entries takes 314 bytes, 1.35x its entries."""
    k = model_constants()
    entry = np.asarray(entry_bytes, dtype=float) + k["cache_entry_overhead_bytes"]
    return np.asarray(np.asarray(block_entries, dtype=float) * entry + k["cache_block_overhead_bytes"])


def cache_alpha(
    cache_bytes: np.ndarray,
    block_entries: np.ndarray,
    entry_bytes: int,
    parts: Partitions,
    n_keys: float,
    cache_win: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """Probability a lookup's block is in the LRU block cache, per partition.

    Che's approximation at block granularity: a cache of C blocks has a
    characteristic time t with sum_j U_j (1 - exp(-t p_j / U_j)) = C (the same
    distinct-count expression as the windows); a key of partition j hits with
    1 - exp(-t p_j / U_j). Keys sharing a cached block also hit, so the hit
    rate is at least the cached share of the data, C B / N.

    Elementwise over the rows (designs), so solved once per distinct (cache, block entries)
    pair: the design tables' rows repeat them (every T, K and Z of one buffer, filter budget
    and block size leaves the same cache).
    """
    cb, be = np.broadcast_arrays(np.asarray(cache_bytes), np.asarray(block_entries))
    if cb.ndim != 1 or cb.size < 2:
        return _cache_alpha_rows(cb, be, entry_bytes, parts, n_keys, cache_win)
    order = np.lexsort((be, cb))
    cs, bs = cb[order], be[order]
    first = np.concatenate([[True], (cs[1:] != cs[:-1]) | (bs[1:] != bs[:-1])])
    inverse = np.empty(cb.size, dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return _cache_alpha_rows(cs[first], bs[first], entry_bytes, parts, n_keys, cache_win)[inverse]


def _cache_alpha_rows(
    cache_bytes: np.ndarray,
    block_entries: np.ndarray,
    entry_bytes: int,
    parts: Partitions,
    n_keys: float,
    cache_win: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """:func:`cache_alpha` of every row of its arguments."""
    blocks = cache_bytes / block_charge(block_entries, entry_bytes)
    U = parts.frac * n_keys
    t = cache_win(np.maximum(blocks, 1.0))
    with np.errstate(over="ignore", invalid="ignore"):
        a_hot = 1.0 - np.exp(-np.minimum(t, 1e300)[:, None] * parts.p_get / U)
    a_hot = np.where(np.isinf(t)[:, None], 1.0, a_hot)
    a_cov = np.minimum(1.0, blocks * block_entries / n_keys)[:, None]
    return np.clip(np.where(blocks[:, None] >= 1.0, np.maximum(a_hot, a_cov), 0.0), 0.0, 1.0)


def index_cache_alpha(lay: Layout) -> np.ndarray:
    """(n,) Probability a cold run's on-disk index block is in the LRU block cache.

    The engine's cache is charged in bytes. Each probe of a cold run reads one index block of
    its file (a file of ``file_entries`` entries has ceil(its data blocks / ``index_fanout``)
    of them, together key + ``fence_entry_overhead_bytes`` per data block) and one data block
    (``block`` bytes). Che's approximation with both kinds in one LRU of C bytes, the probes
    spread evenly over the cold data (the spread that leaves the index blocks the least room):
    the characteristic time x, in probes, solves
    I_bytes (1 - e^(-x/I)) + D block (1 - e^(-x/D)) = C for I index blocks and D data blocks,
    and an index block hits with 1 - e^(-x/I). Small index blocks stay cached while the data
    blocks that churn the cache between two reads of one of them do not fill it: on the
    celebrity example's 106 KB blocks and 3 GB cache, 114 k files' index blocks hit 22 % of the
    time although all of them together are 254 MB.
    """
    k = model_constants()
    block_bytes = lay.B * lay.entry_bytes
    cold = np.where(lay.exists & ~lay.hot, lay.occ, 0.0).sum(axis=1)
    data = cold / lay.B
    per_file = np.minimum(k["file_entries"], np.maximum(cold, 1.0))
    files = np.ceil(cold / per_file)
    index = files * np.ceil(np.ceil(per_file / lay.B) / index_fanout(block_bytes, lay.key_bytes))
    index_bytes = data * (lay.key_bytes + k["fence_entry_overhead_bytes"])
    cache = np.asarray(lay.mem_cache, dtype=float)
    charge = block_charge(lay.B, lay.entry_bytes)  # a data block's share of the cache
    fits = cache >= index_bytes + data * charge
    out = np.where((index <= 0) | fits, 1.0, 0.0)
    # only the rows with index blocks that do not all fit a cache need Che's time (few: most
    # designs hold no cold level or cache it all); elementwise, so solved on those rows alone
    rows = np.flatnonzero(~((index <= 0) | fits) & (cache > 0))
    if rows.size == 0:
        return out
    index, data, cache, index_bytes, charge = (
        np.broadcast_to(v, out.shape)[rows] for v in (index, data, cache, index_bytes, charge)
    )
    safe_index, safe_data = np.maximum(index, 1.0), np.maximum(data, 1.0)

    def used(x: np.ndarray) -> np.ndarray:  # bytes cached after x probes (grows with x)
        return index_bytes * -np.expm1(-x / safe_index) + data * charge * -np.expm1(-x / safe_data)

    lo, hi = np.zeros_like(cache), np.full_like(cache, 1.0)
    for _ in range(60):  # bracket the x at which the occupancy reaches the cache
        hi = np.where(used(hi) < cache, hi * 4, hi)
    for _ in range(60):  # then bisect
        x = (lo + hi) / 2
        below = used(x) < cache
        lo, hi = np.where(below, x, lo), np.where(below, hi, x)
    out[rows] = -np.expm1(-(lo + hi) / 2 / safe_index)
    return out


def range_cache_alpha(
    cache_bytes: np.ndarray,
    block_entries: np.ndarray,
    entry_bytes: int,
    parts: Partitions,
    n_keys: float,
    cache_win: Callable[[np.ndarray], np.ndarray],
    scan_length: float,
) -> np.ndarray:
    """Probability a range's block is in the LRU block cache, per partition of its start key.

    A range reads f = 1 + scan length / B consecutive blocks from its start key's block and a
    later range from the same start key reads the same ones, so the cache of C blocks holds the
    footprints of C / f start keys: Che's approximation (:func:`cache_alpha`) over the start
    keys with a cache of C / f blocks — at least the cached share of the data, C B / N, which
    reaches 1 when the cache holds the shard.
    """
    per_block = np.maximum(np.asarray(block_entries, dtype=float), 1.0)
    footprint = 1.0 + scan_length / per_block
    a = cache_alpha(cache_bytes / footprint, block_entries, entry_bytes, parts, n_keys, cache_win)
    blocks = cache_bytes / block_charge(block_entries, entry_bytes)
    covered = np.where(blocks >= 1.0, np.minimum(1.0, blocks * block_entries / n_keys), 0.0)
    return np.maximum(a, covered[:, None])


#: Newton steps of :func:`level_cache_alpha`'s characteristic time (from below, monotone).
CHE_NEWTON_STEPS = 40


def level_cache_alpha(
    found: np.ndarray,
    level_blocks: np.ndarray,
    fp: np.ndarray,
    probe: np.ndarray,
    p_get: np.ndarray,
    cache_blocks: np.ndarray,
) -> np.ndarray:
    """(n, m, P) Probability a 'latest' get's block read hits the LRU block cache, with the cache
    seen per level: Che's approximation over blocks, not keys.

    Keys are hashed over the key space, so a level's keys are spread evenly over its blocks and
    every block of a level is read at the level's rate: the gets whose key lies there
    (``Structure.found``) and the false-positive probes that reach it (``probe`` x ``fp``), over
    its blocks. Under YCSB D's gets of the latest inserts the newest levels are small and read
    at a high rate per block, so the cache holds them although no single key in them is hot
    (:func:`cache_alpha`, per key, gives them only the cached share of the data): at 3,000 IOPS
    the ranking's "buffer /4" (a 31-block cache, a 35-block first level holding the ~10,000
    latest keys) read 0.22 blocks per operation where the per-key cache gave 0.33 (docs/journal/s22-s30.md
    §28). The characteristic time t solves sum_l blocks_l (1 - e^(-rate_l t)) = C (Newton from
    below); a level's blocks hit with 1 - e^(-rate_l t), and a partition's own block (the key's)
    with the mean over the levels holding its keys. The probes of runs without the key (no
    filter, or a false positive) fill the cache but keep the per-key rate (:func:`combine`):
    credited with their level's rate, the filterless "btree" variant of YCSB D's pick at 3,000
    IOPS was predicted 0.21 blocks per operation and measured 0.65 — its first level cycles
    from empty to 9 runs (40 blocks, the whole cache) where the model's mean is 4.5, and the
    engine's cache is CLOCK in shards (docs/journal/s22-s30.md §28)."""
    kern = numba_kernels()
    if kern is not None:  # the compiled kernel: a (design, split) at a time (cost_models.kernels_numba)
        n, m, _ = probe.shape
        out = np.empty((n, m, found.shape[2]))
        f64 = np.ascontiguousarray
        blocks = f64(np.broadcast_to(np.asarray(cache_blocks, dtype=float), (n, m)))
        kern.level_cache_alpha(
            out,
            f64(found, dtype=float),
            f64(fp, dtype=float),
            f64(probe, dtype=float),
            f64(level_blocks, dtype=float),
            blocks,
            f64(p_get, dtype=float),
            CHE_NEWTON_STEPS,
        )
        return out
    found = found[:, None]  # (n, 1, L, P), like fp (n, L, P): the rows' Structure terms
    reads = found + probe[..., None] * fp[:, None]  # (n, m, L, P)
    traffic = reads @ p_get  # (n, m, L): block reads per get (the probes' too: they fill the cache)
    nb = level_blocks[:, None, :]
    rate = np.where(nb > 0, traffic / np.maximum(nb, 1e-300), 0.0)
    C = np.broadcast_to(np.asarray(cache_blocks, dtype=float), traffic.shape[:2])
    used = np.where(rate > 0, nb, 0.0).sum(axis=2)  # blocks ever read
    t = np.zeros(C.shape)
    live = (C >= 1.0) & (C < used)
    for _ in range(CHE_NEWTON_STEPS):
        e = np.exp(-rate * t[..., None])
        f = (nb * (1.0 - e)).sum(axis=2) - C
        df = (nb * rate * e).sum(axis=2)
        # (levels read almost never: a step past the float range leaves t infinite, every
        # level read at all then held — their share of the gets is as small)
        with np.errstate(over="ignore"):
            step = np.where(live & (df > 0), -f / np.maximum(df, 1e-300), 0.0)
        t = t + np.maximum(step, 0.0)
    hit = np.where(live[..., None], -np.expm1(-rate * t[..., None]), 0.0)
    hit = np.where(((C >= used) & (C >= 1.0))[..., None], 1.0, hit)
    total = found.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = (found * hit[..., None]).sum(axis=2) / total
    return np.where(total > 0, alpha, 0.0)


@dataclass
class SplitTerms:
    """What :func:`combine` computes of a memory split and the run shape alone: everything but
    the workload's terms of the structure (``base``, ``fp``, ``reach``, ``put``, ``cascades``).
    The structures of two workloads of equal scan length have the same run shape, so their
    combines on one split share these (solver.tables.grid_eval.evaluate_splits)."""

    exists: np.ndarray  # (n, 1, L)
    cold: np.ndarray  # (n, m, L): cold levels that exist
    probe: np.ndarray  # (n, m, L): a level's probe rate (its filter's when hot)
    covered: np.ndarray  # (n, m): the block cache's coverage
    idx_miss: np.ndarray  # (n, m): a cold run's index block missing the cache
    cold_runs: np.ndarray  # (n, m)
    sigma_n: np.ndarray  # (n, m): empty gets
    idx_range: np.ndarray  # (n, m): a range's index blocks
    sigma_s: np.ndarray  # (n, m): ranges
    sigma_er: np.ndarray  # (n, m): empty ranges
    lsh: np.ndarray  # (n, 1): hash logs


def split_terms(
    st: Structure,
    rows: np.ndarray,
    fpr: np.ndarray,
    hot: np.ndarray,
    alpha_bc: np.ndarray,
    p_get: np.ndarray,
    range_fpr: np.ndarray | None = None,
    alpha_range: np.ndarray | None = None,
    alpha_index: np.ndarray | None = None,
) -> SplitTerms:
    """The :class:`SplitTerms` of :func:`combine`'s arguments."""
    exists = st.exists[rows][:, None, :]
    cold = (~hot & exists).astype(float)
    probe = np.where(hot, fpr, 1.0)  # hot: filter rate (1 without a filter); cold: the data block
    # An absent key's blocks are anywhere in the key space: the block cache holds them with the
    # probability it holds any block, its coverage (the least hit rate of the partitions: the
    # coverage term C B / N of cache_alpha wherever a partition is not hot).
    covered = alpha_bc.min(axis=2) if alpha_bc.shape[2] else np.zeros(alpha_bc.shape[:2])
    # the index blocks (a cold run's fences): at least as often cached as any block
    idx_miss = 1.0 - (covered if alpha_index is None else np.maximum(alpha_index, covered))
    runs = st.runs[rows][:, None, :]
    cold_runs = np.where(exists, runs * cold, 0.0).sum(axis=2)
    sigma_n = np.where(exists, runs * probe, 0.0).sum(axis=2) * (1.0 - covered) + cold_runs * idx_miss
    # a range's blocks are read unless the block cache holds them
    # (a probability: the partitions' weights sum to 1 only up to rounding, so clip at 0)
    range_miss = 1.0 if alpha_range is None else np.clip(1.0 - alpha_range @ p_get, 0.0, 1.0)
    idx_range = cold_runs * (range_miss if alpha_index is None else idx_miss)
    sorted_scan = st.range_blocks[rows].sum(axis=1)[:, None] * range_miss + idx_range
    lsh = st.lsh[rows][:, None]
    sigma_s = np.where(lsh, st.lsh_scan[rows][:, None], sorted_scan)
    # empty ranges (symbolic.empty_range_run): hot runs pass their range filter with rate
    # range_fpr (1 without one), cold runs read an index block first; the hash log answers
    # from its in-memory index
    rf = np.ones(covered.shape) if range_fpr is None else np.asarray(range_fpr, dtype=float)
    er_rate = np.where(hot, rf[..., None], 1.0)
    # (and, as an empty get's, its blocks are anywhere: cached with the cache's coverage)
    sigma_er = (er_rate * st.empty_seek[rows][:, None, :]).sum(axis=2) * (1.0 - covered) + cold_runs * idx_miss
    sigma_er = np.where(lsh, 0.0, sigma_er)
    return SplitTerms(exists, cold, probe, covered, idx_miss, cold_runs, sigma_n, idx_range, sigma_s, sigma_er, lsh)


def combine(
    st: Structure,
    rows: np.ndarray,
    fpr: np.ndarray,
    hot: np.ndarray,
    alpha_bc: np.ndarray,
    p_get: np.ndarray,
    range_fpr: np.ndarray | None = None,
    alpha_range: np.ndarray | None = None,
    alpha_index: np.ndarray | None = None,
    cache_blocks: np.ndarray | None = None,
    terms: SplitTerms | None = None,
) -> IOCost:
    """Per-operation I/O of designs = structure rows + a memory split.

    ``rows`` (n,) picks a structure row; each row carries m memory splits:
    ``fpr`` and ``hot`` (n, m, L) are the per-level filter rates and hot flags,
    ``alpha_bc`` (n, m, P) the block-cache hit probabilities, ``range_fpr`` (n, m)
    the hot levels' range-filter rate for an empty range (None: no range filter),
    ``alpha_range`` (n, m, P) a range's block-cache hit probability per partition of its start
    key (:func:`range_cache_alpha`; None: ranges read every block), ``alpha_index`` (n, m) a cold
    run's index block's (:func:`index_cache_alpha`; None: the data blocks' rate), ``cache_blocks``
    (n, m) the block cache in data blocks: with 'latest' gets (``st.found``) the key's own block
    hits at least as often as the per-level view gives (:func:`level_cache_alpha`; None: per key
    only). ``terms``: their :func:`split_terms`, when another structure of the same run shape shares them.
    Returns arrays of shape (n, m). (The exact path is m = 1.)
    """
    t = terms
    if t is None:
        t = split_terms(st, rows, fpr, hot, alpha_bc, p_get, range_fpr, alpha_range, alpha_index)
    # sum over levels as a batched matrix product: (n, m, L) @ (n, L, P) -> (n, m, P)
    index_level = np.matmul(t.cold, st.reach[rows])  # a cold run reached reads its index block
    data_level = np.matmul(t.probe, st.fp[rows])
    # 'latest' gets: the key's own block at least at its level's rate (level_cache_alpha)
    alpha_own = alpha_bc
    if st.found is not None and st.level_blocks is not None and cache_blocks is not None:
        lv = level_cache_alpha(st.found[rows], st.level_blocks[rows], st.fp[rows], t.probe, p_get, cache_blocks)
        alpha_own = np.maximum(alpha_bc, lv)
    idx_l_p = (1 - alpha_bc) * index_level if alpha_index is None else t.idx_miss[..., None] * index_level
    cost = (1 - alpha_own) * st.base[rows][:, None, :] + (1 - alpha_bc) * data_level + idx_l_p
    sigma_l = cost @ p_get
    sigma_p = np.broadcast_to(st.put[rows][:, None], sigma_l.shape).copy()
    # Our template writes every update out of place through the buffer, so a
    # blind update costs a put and a rmw costs a lookup plus a put (paper: "for
    # LSMs, the cost of an rmw is the summation of a lookup and an insert").
    buffered = np.broadcast_to(((1.0 - st.base[rows]) @ p_get)[:, None], sigma_l.shape).copy()
    # the index blocks among those reads: the cold runs' terms above
    idx_l = idx_l_p @ p_get
    idx_s = np.where(t.lsh, 0.0, t.idx_range)
    zero = np.zeros(sigma_l.shape)
    index = IOCost(
        get=idx_l,
        empty_get=t.cold_runs * t.idx_miss,
        range=idx_s,
        insert=zero,
        update=zero.copy(),
        rmw=idx_l.copy(),
        empty_range=np.where(t.lsh, 0.0, t.cold_runs * t.idx_miss),
    )
    return IOCost(
        get=sigma_l,
        empty_get=t.sigma_n,
        range=t.sigma_s,
        insert=sigma_p,
        update=sigma_p.copy(),
        rmw=sigma_l + sigma_p,
        empty_range=t.sigma_er,
        get_buffered=buffered,
        index=index,
        cascades=Cascades(
            np.broadcast_to(st.cascades.rate[rows][:, None, :], (*sigma_l.shape, st.cascades.rate.shape[1])),
            np.broadcast_to(st.cascades.blocks[rows][:, None, :], (*sigma_l.shape, st.cascades.blocks.shape[1])),
            np.broadcast_to(st.cascades.slack_puts[rows][:, None], sigma_l.shape),
        ),
    )


def io_costs(
    lay: Layout,
    parts: Partitions,
    mix: dict[str, float],
    scan_length: float,
    windows: Windows | None = None,
    empty_range_width: int = DEFAULT_EMPTY_RANGE_WIDTH,
    st: Structure | None = None,
) -> IOCost:
    """Per-operation block I/O for every design of ``lay``.

    ``windows``: interpolated W(R) tables (puts, and gets for the block cache)
    for batch evaluation, or :func:`exact_windows` shared with other evaluations; exact
    bisection when None. ``empty_range_width``: key
    values an empty range spans (its range-filter FPR). ``st``: the designs'
    :func:`structure` when the caller has it (it does not depend on memory, so
    one serves every memory size).
    """
    N = lay.n_keys
    win, cache_win = windows if windows is not None else exact_windows(parts, mix, N)

    if st is None:
        st = structure(lay, parts, mix, scan_length, win)
    abc = cache_alpha(lay.mem_cache, lay.B, lay.entry_bytes, parts, N, cache_win)
    arc = range_cache_alpha(lay.mem_cache, lay.B, lay.entry_bytes, parts, N, cache_win, scan_length)
    rf = layout_fpr(lay.range_bits, empty_range_width, lay.range_per_height)[:, None]
    io = combine(
        st,
        np.arange(lay.size),
        lay.fpr[:, None, :],
        lay.hot[:, None, :],
        abc[:, None, :],
        parts.p_get,
        rf,
        arc[:, None, :],
        index_cache_alpha(lay)[:, None],
        cache_blocks(lay)[:, None],
    )
    return io.map(lambda v: v[:, 0])


def cache_blocks(lay: Layout) -> np.ndarray:
    """(n,) The block cache of each design, in data blocks."""
    return np.asarray(lay.mem_cache / block_charge(lay.B, lay.entry_bytes), dtype=float)
