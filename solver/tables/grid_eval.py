"""The design grid evaluated at one shard size and memory size (:class:`GridEval`).

The run structure (windows, presence probabilities, merge costs) does not depend on memory, so it
is computed once per shard size (and workload, :class:`ShardPrep`) and combined with each memory
size's split (cost_models.io_model.combine); memory sizes whose splits evaluate every design alike
share one evaluation (:func:`same_evaluation`, :func:`saturated_split`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cost_models import compression
from cost_models.cloud import GIB, usable_bytes
from cost_models.cpu import NodeShape
from cost_models.design import Design, DesignBatch, allowed_classes
from cost_models.distributions import Partitions
from cost_models.evaluate import node_io, shape_overwrites, tree_puts
from cost_models.io_model import (
    Cascades,
    IOCost,
    SplitTerms,
    Structure,
    cache_alpha,
    cache_blocks,
    combine,
    index_cache_alpha,
    insert_fraction,
    overwrites_keys,
    range_cache_alpha,
    split_terms,
    structure,
)
from cost_models.kernels import numba_kernels
from cost_models.layout import Layout, MonkeyMemo, Shape, level_shape, split_memory
from cost_models.phi import PhiTable
from cost_models.range_filter import layout_fpr
from cost_models.robust import perturbed_workload
from cost_models.windows import WindowTable
from solver.space import Grid
from solver.tables.context import COSINE
from specs.schema import Spec, Workload
from specs.vocab import OPERATIONS, CostModel


@dataclass
class GridEval:
    """Designs evaluated on one memory size and shard: layout facts, and I/O per
    operation under the expected workload and (with robustness) the perturbed one."""

    io: IOCost
    total: np.ndarray
    io_p: IOCost | None
    total_p: np.ndarray | None
    shape: NodeShape  # what the CPU model needs besides the I/O (class, block bytes, memtable entries)
    ok: np.ndarray  # feasible and of an allowed class
    need_gib: np.ndarray
    block: np.ndarray
    L: np.ndarray
    Y: np.ndarray
    batches: list[DesignBatch]
    offsets: np.ndarray
    phi: PhiTable  # the CPU model's table the designs are scored with
    hot_share: np.ndarray | None = None  # share of the data in hot levels (codec pairs)
    disk_block: np.ndarray | None = None  # bytes one block I/O moves (None: the block size)
    codec_cpu: np.ndarray | None = None  # codec CPU seconds per operation, expected mix
    codec_cpu_p: np.ndarray | None = None  # and perturbed mix
    codec_pair: np.ndarray | None = None  # index of the row's (hot, cold) pair in Grid.codecs
    #: the smaller memory size's evaluation some rows were taken from (:func:`evaluate_splits` ``prev``),
    #: and per row its row there (-1: evaluated here); :func:`with_codecs` keeps both, per codec pair
    reused_of: GridEval | None = None
    reused_from: np.ndarray | None = None
    # :meth:`design`'s objects so far (not an init field: dataclasses.replace starts a new one)
    _designs: dict[tuple[int, int, str], Design] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def cls(self) -> np.ndarray:
        return self.shape.cls

    def design(self, i: int, threads: int, name: str = COSINE) -> Design:
        """Row ``i``'s design with ``threads`` threads: one (frozen) object per row, threads and name,
        shared by the columns of every VM type of as many vCPUs (and pickled once with them)."""
        key = (i, threads, name)
        hit = self._designs.get(key)
        if hit is None:
            k = int(np.searchsorted(self.offsets, i, side="right") - 1)
            hit = self._designs[key] = self.batches[k].design(i - int(self.offsets[k]), threads=threads, name=name)
        return hit


def workloads(spec: Spec) -> list[Workload]:
    """The expected workload, and the perturbed one when its I/O differs (noise)."""
    return [spec.workload, perturbed_workload(spec)] if spec.noise > 0 else [spec.workload]


@dataclass
class ShardPrep:
    """What every memory size of one shard shares: the grid's layouts (buffer, block, T, K, Z;
    no filters), their level shapes and run structures (one per workload), and the window tables.

    A layout's merges depend on its class, which before memory is split only its filters tell
    (cost_models.layout.partial_merges): without filters a B-tree's partial merges, with them an
    LSM's or a hybrid's whole-level merges. So a layout has a shape and structures per policy:
    ``filterless`` and ``filtered``; they differ only in the puts' terms (io_model.put_terms).
    """

    lays: DesignBatch
    wins: list[tuple[WindowTable, WindowTable]]
    filterless: tuple[Shape, list[Structure]]
    filtered: tuple[Shape, list[Structure]]
    groups: list[_SplitGroup] | None = None  # made by _split_groups on first use


def shard_prep(
    spec: Spec, grid: Grid, s: float, parts: Partitions, wins: list[tuple[WindowTable, WindowTable]], max_mem: float
) -> ShardPrep:
    """:class:`ShardPrep` of ``grid`` at shard size ``s`` for nodes of at most ``max_mem`` bytes."""
    wl = spec.workload
    wls = workloads(spec)
    lays = grid.layouts(max_mem, s * wl.entry_bytes, overwrites(spec))  # every layout without filters
    # the expected workload's puts shape every workload's tree (its runs' batches: layout.run_fill)
    puts = tree_puts(spec.cost_model, parts, wl, s, wins[0])
    shape = level_shape(lays, s, wl.key_bytes, wl.value_bytes, overwrites=shape_overwrites(spec), puts=puts)
    unsplit = split_memory(shape, lays, np.inf)  # the structure does not depend on memory
    sts = [structure(unsplit, parts, w.operations, w.scan_length, win[0]) for w, win in zip(wls, wins, strict=True)]
    with_filters = lays.take(np.arange(lays.size))
    with_filters.bloom_bits = np.where(lays.lsh, 0.0, 1.0)  # any positive budget: the policy only
    # the merge policy sets the levels' occupancy and runs too (layout.drained_fill), so the
    # filtered designs' structure is their own, lookups and merges
    shape_f = level_shape(
        with_filters,
        s,
        wl.key_bytes,
        wl.value_bytes,
        levels=shape.cap.shape[1],
        overwrites=shape_overwrites(spec),
        puts=puts,
    )
    unsplit_f = split_memory(shape_f, with_filters, np.inf)
    sts_f = [structure(unsplit_f, parts, w.operations, w.scan_length, win[0]) for w, win in zip(wls, wins, strict=True)]
    return ShardPrep(lays, wins, (shape, sts), (shape_f, sts_f))


@dataclass
class Split:
    """The memory split of some of the grid's designs on one memory size: the layouts ``sel``
    whose buffer fits, each with ``m`` filter settings (``batch``, layout-major), their split
    ``lay``, and the run structures of their merge policy (:class:`ShardPrep`)."""

    sel: np.ndarray
    m: int
    batch: DesignBatch
    lay: Layout
    sts: list[Structure]
    group: int  # its family and merge policy: the index of its :class:`_SplitGroup`


#: The splits of one memory size, per family and merge policy (B-tree, LSM-like, hash log).
Splits = list[Split]


def overwrites(spec: Spec) -> bool:
    """Whether a workload of the spec (the expected one, or the perturbed one) overwrites keys: the
    buffer ladder then has no top at twice the data (solver.space.Grid.buffers)."""
    return any(overwrites_keys(w.operations) for w in workloads(spec))


def buffer_fits(spec: Spec, grid: Grid, s: float, mem_gib: float, lays: DesignBatch) -> np.ndarray:
    """The layouts whose buffer fits a node of ``mem_gib`` holding ``s`` entries (Grid.buffers)."""
    mem = usable_bytes(mem_gib, spec.design.memory_headroom)
    return np.asarray(lays.buffer_bytes <= grid.buffer_top(mem, s * spec.workload.entry_bytes, overwrites(spec)))


def grid_splits(
    spec: Spec, grid: Grid, s: float, mem_gib: float, prep: ShardPrep, fits: np.ndarray | None = None
) -> Splits:
    """The memory split of every design of the grid whose buffer fits a node of ``mem_gib``
    holding ``s`` entries (``fits``: :func:`buffer_fits`, when the caller has it)."""
    lays = prep.lays
    mem = usable_bytes(mem_gib, spec.design.memory_headroom)
    fits = buffer_fits(spec, grid, s, mem_gib, lays) if fits is None else fits
    out: Splits = []
    for gi, g in enumerate(_split_groups(grid, prep)):
        sel = np.flatnonzero(fits & (lays.lsh == g.is_lsh))
        if sel.size == 0:
            continue
        # the layouts come buffer by buffer, smallest first, so those whose buffer fits are
        # the first of the family's (then its batch and shape are views of the family's)
        n = sel.size * g.m
        rows: slice | np.ndarray = slice(0, n) if np.array_equal(sel, g.sel[: sel.size]) else _repeat_pos(g, sel)
        batch = g.batch.take(rows)
        memo = g.monkey if isinstance(rows, slice) else None  # (its rows are the family's first)
        out.append(Split(sel, g.m, batch, split_memory(g.shape.take(rows), batch, mem, monkey=memo), g.sts, gi))
    return out


@dataclass
class _SplitGroup:
    """A family and merge policy of :func:`grid_splits` on every layout of a shard: its
    layouts ``sel``, each with its ``m`` filter settings (``batch``, layout-major), their level
    shapes and the run structures of the policy (:class:`ShardPrep`)."""

    is_lsh: bool
    sel: np.ndarray
    m: int
    batch: DesignBatch
    shape: Shape
    sts: list[Structure]
    monkey: MonkeyMemo  # the Monkey rates of ``batch``'s rows, over the shard's memory sizes


def _split_groups(grid: Grid, prep: ShardPrep) -> list[_SplitGroup]:
    """The :class:`_SplitGroup` of ``prep`` (made once per shard, kept on it): Bloom bits x
    range-filter bits per layout (the hash log: neither); without Bloom bits a B-tree, with
    them an LSM or a hybrid (their merge policies differ: :class:`ShardPrep`)."""
    if prep.groups is None:
        lays = prep.lays
        pairs = np.array([(b, r) for b in grid.bits for r in grid.range_bits], dtype=float).reshape(-1, 2)
        families = (
            (False, pairs[pairs[:, 0] <= 0], prep.filterless),
            (False, pairs[pairs[:, 0] > 0], prep.filtered),
            (True, np.zeros((1, 2)), prep.filterless),
        )
        prep.groups = []
        for is_lsh, m_bits, (shape, sts) in families:
            sel = np.flatnonzero(lays.lsh == is_lsh)
            m = m_bits.shape[0]
            if sel.size == 0 or m == 0:
                continue
            batch = lays.take(np.repeat(sel, m))
            batch.bloom_bits = np.tile(m_bits[:, 0], sel.size)
            batch.range_bits = np.tile(m_bits[:, 1], sel.size)
            rep = shape.take(np.repeat(sel, m))
            prep.groups.append(_SplitGroup(is_lsh, sel, m, batch, rep, sts, MonkeyMemo(*rep.sized.shape)))
    return prep.groups


def _repeat_pos(g: _SplitGroup, sel: np.ndarray) -> np.ndarray:
    """The rows of ``g``'s batch of the layouts ``sel`` (each with its ``m`` filter settings)."""
    pos = np.searchsorted(g.sel, sel)
    return (pos[:, None] * g.m + np.arange(g.m)[None, :]).ravel()


def _whole_shard_cached(lay: Layout, s: float) -> np.ndarray:
    """Designs whose block cache holds all ``s`` entries of the shard: every lookup's block hits
    it (cost_models.io_model.cache_alpha: the coverage term C B / N reaches 1)."""
    blocks = cache_blocks(lay)
    return np.asarray((blocks >= 1.0) & (np.minimum(1.0, blocks * lay.B / s) >= 1.0))


def _same_rows(a: Layout, ra: np.ndarray, b: Layout, rb: np.ndarray, s: float) -> np.ndarray:
    """Whether row ``ra[i]`` of ``a`` and row ``rb[i]`` of ``b`` (the same design on two memory
    sizes) evaluate alike: :func:`same_evaluation`'s test, design by design."""
    same = np.ones(ra.size, dtype=bool)
    for f in ("hot", "feasible", "Y", "cls", "fpr"):
        x, y = getattr(a, f)[ra], getattr(b, f)[rb]
        same &= (x == y).reshape(ra.size, -1).all(axis=1)
    cached = _whole_shard_cached(a, s)[ra] & _whole_shard_cached(b, s)[rb]
    return same & ((a.mem_cache[ra] == b.mem_cache[rb]) | cached)


def same_evaluation(a: Splits, b: Splits, s: float) -> bool:
    """Whether two memory sizes' splits give every design the same evaluation: the same designs,
    hot levels (so filters, classes, cold levels), feasibility, and a block cache of the same size
    or holding the whole shard on both. The I/O model sees a memory size only through these
    (cost_models.io_model.combine, cache_alpha): a small shard on any larger node is one case."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        sa, la, sb, lb = x.sel, x.lay, y.sel, y.lay
        if x.sts is not y.sts or not np.array_equal(sa, sb):
            return False
        for f in ("hot", "feasible", "Y", "cls", "fpr"):
            if not np.array_equal(getattr(la, f), getattr(lb, f)):
                return False
        same_cache = (la.mem_cache == lb.mem_cache) | (_whole_shard_cached(la, s) & _whole_shard_cached(lb, s))
        if not same_cache.all():
            return False
    return True


def saturated_split(splits: Splits, s: float) -> bool:
    """Whether more memory cannot change this split's evaluation: every design is feasible,
    holds every level hot (no cold level) and caches the whole shard. More memory only adds
    spare room (:func:`cost_models.layout.split_memory`: the hot levels grow with it and are all
    hot already, the memory used stays, the cache grows past the shard), so with the same
    designs a larger node's split gives the same evaluation (:func:`same_evaluation`)."""
    return all(
        bool(lay.feasible.all() and (lay.hot == lay.exists).all() and (lay.Y == 0).all())
        and bool(_whole_shard_cached(lay, s).all())
        for lay in (sp.lay for sp in splits)
    )


def _split_facts(spec: Spec, sp: Split) -> tuple[np.ndarray, ...]:
    """The facts :func:`evaluate_splits` keeps of each design of a split: class, feasible and
    allowed, GiB on disk, block bytes, L, Y, hot share, a data block's bytes, buffered entries."""
    lay = sp.lay
    occ = np.maximum(lay.occ.sum(axis=1), 1e-300)
    return (
        lay.cls,
        lay.feasible & allowed_classes(lay.cls, spec.design.classes),
        lay.disk_entries * lay.entry_bytes / GIB,
        sp.batch.block_bytes.astype(float),
        lay.L,
        lay.Y,
        np.where(lay.hot, lay.occ, 0.0).sum(axis=1) / occ,
        np.asarray(lay.B * lay.entry_bytes, dtype=float),
        np.asarray(lay.buffered, dtype=float),
    )


def _evaluate_split(
    spec: Spec, s: float, parts: Partitions, sp: Split, wins: list[tuple[WindowTable, WindowTable]]
) -> list[IOCost]:
    """The I/O per operation of one split's designs, per workload (flat: one design axis)."""
    sel, m, lay, sts = sp.sel, sp.m, sp.lay, sp.sts
    out: list[IOCost] = []
    # the block-cache terms see a workload only through the gets' window table (shared by
    # the workloads, :func:`shard_job`), its scan length and empty-range width: computed
    # once per distinct triple
    cached: dict[tuple[int, float, int], tuple[tuple[Any, ...], SplitTerms]] = {}
    icache: np.ndarray | None = None
    cblocks: np.ndarray | None = None
    for st, win, w in zip(sts, wins, workloads(spec), strict=True):
        if spec.cost_model == CostModel.WORST_CASE:  # the paper's worst-case model (no windows)
            out.append(node_io(spec.cost_model, lay, parts, w))
            continue
        key = (id(win[1]), w.scan_length, w.empty_range_width)
        if icache is None:
            icache = index_cache_alpha(lay).reshape(sel.size, m)
            cblocks = cache_blocks(lay).reshape(sel.size, m)
        if key not in cached:
            abc = cache_alpha(lay.mem_cache, lay.B, lay.entry_bytes, parts, s, win[1])
            arc = range_cache_alpha(lay.mem_cache, lay.B, lay.entry_bytes, parts, s, win[1], w.scan_length)
            P = abc.shape[1]
            args = (
                sel,
                lay.fpr.reshape(sel.size, m, -1),
                lay.hot.reshape(sel.size, m, -1),
                abc.reshape(sel.size, m, P),
                parts.p_get,
                layout_fpr(lay.range_bits, w.empty_range_width).reshape(sel.size, m),
                arc.reshape(sel.size, m, P),
                icache,
            )
            # and so are combine's terms of the split and the run shape (a workload's
            # structure differs from another's only in its own terms; the scan length,
            # which the ranges' terms see, is in the key)
            cached[key] = (args, split_terms(st, *args))
        args, terms = cached[key]
        out.append(combine(st, *args, cblocks, terms=terms).flat())
    return out


def _joined(parts_k: list[IOCost]) -> IOCost:
    """Several groups of designs' costs as one (their rows in order; index reads not split out)."""
    return replace(
        IOCost.of(
            {op: np.concatenate([getattr(c, op) for c in parts_k]) for op in OPERATIONS},
            get_buffered=np.concatenate([c.buffered_share() for c in parts_k]),
        ),
        cascades=Cascades.concat([c.cascades for c in parts_k if c.cascades is not None])
        if all(c.cascades is not None for c in parts_k)
        else None,
    )


def scatter_rows(
    n: int, fresh_at: np.ndarray, fresh: np.ndarray | None, old_at: np.ndarray, old: np.ndarray, old_rows: np.ndarray
) -> np.ndarray:
    """An array of ``n`` designs: positions ``fresh_at`` from ``fresh``, ``old_at`` from ``old``'s rows
    ``old_rows``; per-level arrays (designs, levels) padded with zeros to the deeper tree, as
    :meth:`Cascades.concat` pads them. Floats go through the compiled copy when it is loaded
    (cost_models.kernels_numba.scatter_rows_1d / _2d: the same values, without the temporaries)."""
    kern = numba_kernels()
    floats = old.dtype == np.float64 and (fresh is None or fresh.dtype == np.float64)
    if kern is not None and floats and old.ndim <= 2 and (fresh is None or fresh.ndim == old.ndim):
        width = old.shape[1:] if fresh is None else (max(old.shape[1], fresh.shape[1]),) if old.ndim == 2 else ()
        out = np.empty((n, *width))
        src = np.empty((0, *old.shape[1:])) if fresh is None else np.ascontiguousarray(fresh)
        at = np.zeros(0, dtype=np.int64) if fresh is None else np.asarray(fresh_at, dtype=np.int64)
        scatter = kern.scatter_rows_2d if old.ndim == 2 else kern.scatter_rows_1d
        scatter(
            out,
            at,
            src,
            np.asarray(old_at, dtype=np.int64),
            np.ascontiguousarray(old),
            np.asarray(old_rows, dtype=np.int64),
        )
        return out
    if fresh is not None and old.ndim > 1 and fresh.shape[1] != old.shape[1]:
        lm = max(fresh.shape[1], old.shape[1])
        fresh, old = (np.pad(v, [(0, 0), (0, lm - v.shape[1])]) for v in (fresh, old))
    out = np.empty((n, *old.shape[1:]), dtype=old.dtype if fresh is None else np.result_type(fresh, old))
    out[old_at] = old[old_rows]
    if fresh is not None:
        out[fresh_at] = fresh
    return out


def _scatter(
    n: int, keep: np.ndarray, fresh: IOCost | None, reused: np.ndarray, old: IOCost, prows: np.ndarray
) -> IOCost:
    """The costs of ``n`` designs: rows ``keep`` from ``fresh``, rows ``reused`` from ``old``'s rows
    ``prows`` (as :func:`_joined` of the two, put back in order; the cascades padded to the deeper)."""

    def put(f: np.ndarray | None, o: np.ndarray) -> np.ndarray:
        return scatter_rows(n, keep, f, reused, o, prows)

    buffered = put(None if fresh is None else fresh.buffered_share(), old.buffered_share())
    cascades = None
    fc = None if fresh is None else fresh.cascades
    if old.cascades is not None and (fresh is None or fc is not None):
        oc = old.cascades
        cascades = Cascades(
            put(None if fc is None else fc.rate, oc.rate),
            put(None if fc is None else fc.blocks, oc.blocks),
            put(None if fc is None else fc.slack_puts, oc.slack_puts),
        )
    return replace(
        IOCost.of(
            {op: put(None if fresh is None else getattr(fresh, op), getattr(old, op)) for op in OPERATIONS},
            get_buffered=buffered,
        ),
        cascades=cascades,
    )


#: A memory size's splits and their evaluation (:func:`evaluate_splits`), for the next size's to reuse.
Evaluated = tuple[Splits, GridEval]


def _reusable(sp: Split, prev: Evaluated | None, s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The rows of ``sp`` that ``prev`` (a smaller memory size's evaluation of this shard) already
    evaluated alike (:func:`_same_rows`: a design that is feasible, holds every level hot and caches
    the whole shard keeps its evaluation as the memory grows), layout by layout (all its filter
    settings, or none): (rows to evaluate, rows reused, their rows in ``prev``'s evaluation); None
    when no row is reused."""
    if prev is None:
        return None
    psplits, pge = prev
    k = next((i for i, p in enumerate(psplits) if p.group == sp.group), None)
    if k is None:
        return None
    psp = psplits[k]
    if psp.sts is not sp.sts or psp.m != sp.m:
        return None
    common = np.intersect1d(sp.sel, psp.sel, assume_unique=True)
    if common.size == 0:
        return None
    m = sp.m
    per = np.arange(m)[None, :]
    rows = (np.searchsorted(sp.sel, common)[:, None] * m + per).ravel()
    prows = (np.searchsorted(psp.sel, common)[:, None] * m + per).ravel()
    same = _same_rows(sp.lay, rows, psp.lay, prows, s).reshape(common.size, m).all(axis=1)
    if not same.any():
        return None
    reused = np.repeat(same, m)
    keep = np.ones(sp.sel.size * m, dtype=bool)
    keep[rows[reused]] = False
    return np.flatnonzero(keep), rows[reused], int(pge.offsets[k]) + prows[reused]


def evaluate_splits(
    spec: Spec,
    s: float,
    parts: Partitions,
    splits: Splits,
    prep: ShardPrep,
    phi: PhiTable,
    prev: Evaluated | None = None,
) -> GridEval | None:
    """Every design of ``splits`` (:func:`grid_splits`) evaluated: I/O per operation and layout facts
    (scored later with the CPU model's table ``phi``). ``prev``: a smaller memory size's splits and
    evaluation of the same shard, whose designs that evaluate alike here (:func:`_reusable`) are
    taken from it instead of evaluated again: under overwrites the buffer ladder grows with the
    memory (solver.space.Grid.buffer_top), so no two memory sizes have the same designs and
    :func:`same_evaluation` never holds; design by design most do (77 % of ycsb_a's rows)."""
    wins = prep.wins
    ios: list[list[IOCost]] = [[] for _ in wins]
    facts: list[tuple[np.ndarray, ...]] = []
    batches: list[DesignBatch] = []
    origin: list[np.ndarray] = []  # per split, each row's row in prev's evaluation (-1: evaluated)
    for sp in splits:
        got = None if spec.cost_model == CostModel.WORST_CASE else _reusable(sp, prev, s)
        origin.append(np.full(sp.sel.size * sp.m, -1, dtype=np.int64))
        if got is not None:
            origin[-1][got[1]] = got[2]
        if got is None:
            for k, io in enumerate(_evaluate_split(spec, s, parts, sp, wins)):
                ios[k].append(io)
            facts.append(_split_facts(spec, sp))
            batches.append(sp.batch)
            continue
        keep, reused, prows = got
        assert prev is not None
        pge = prev[1]
        fresh: list[IOCost | None] = [None] * len(wins)
        if keep.size:
            sub_sel = sp.sel[keep[:: sp.m] // sp.m]
            sub = Split(sub_sel, sp.m, sp.batch.take(keep), sp.lay.take(keep), sp.sts, sp.group)
            fresh = list(_evaluate_split(spec, s, parts, sub, wins))
        old_io = [pge.io] + ([pge.io_p] if pge.io_p is not None else [])
        for k in range(len(wins)):
            ios[k].append(_scatter(sp.sel.size * sp.m, keep, fresh[k], reused, old_io[k], prows))
        facts.append(_split_facts(spec, sp))  # (the split's own: cheap, and exact)
        batches.append(sp.batch)
    if not facts:
        return None
    cls, ok, need, block, L, Y, hot_share, block_data, buffered = (np.concatenate(x) for x in zip(*facts, strict=True))
    joined = [_joined(parts_k) for parts_k in ios]
    io_p = joined[1] if len(joined) > 1 else None
    total, total_p = mix_totals(spec, joined[0], io_p)
    return GridEval(
        io=joined[0],
        total=total,
        io_p=io_p,
        total_p=total_p,
        shape=NodeShape(cls, block_data, float(s), float(spec.workload.entry_bytes), buffered),
        ok=ok,
        need_gib=need,
        block=block,
        L=L,
        Y=Y,
        batches=batches,
        offsets=np.cumsum([0] + [b.size for b in batches]),
        phi=phi,
        hot_share=hot_share,
        reused_of=None if prev is None else prev[1],
        reused_from=None if prev is None else np.concatenate(origin),
    )


def mix_totals(spec: Spec, io: IOCost, io_p: IOCost | None) -> tuple[np.ndarray, np.ndarray | None]:
    """I/O per operation of the workload's mix (and of the perturbed mix, with ``io_p``)."""
    wls = workloads(spec)
    return io.total(wls[0].operations), None if io_p is None else io_p.total(wls[1].operations)


def for_mix(spec: Spec, ge: GridEval) -> GridEval:
    """``ge`` (:func:`evaluate_splits` of a spec that :func:`shares_io` with ``spec``) with
    ``spec``'s own totals: as :func:`evaluate_splits` of ``spec`` gives it."""
    total, total_p = mix_totals(spec, ge.io, ge.io_p)
    return replace(ge, total=total, total_p=total_p)


def _io_view(spec: Spec) -> Spec:
    """``spec`` without what the shard's evaluation does not read: its mix (read through
    :func:`shares_io`'s insert fractions and :func:`mix_totals`), its entries (read as the shard
    size and the key partitions, which the caller compares) and its node view."""
    return replace(spec, workload=replace(spec.workload, operations={}, entries=1), node_view=None)


def shares_io(a: Spec, b: Spec) -> bool:
    """Whether the designs of ``a`` and ``b`` evaluate alike (:func:`shard_prep`,
    :func:`grid_splits`, :func:`evaluate_splits` up to :func:`mix_totals`) at one shard size,
    grid and key partitions: their workloads' mixes enter the I/O per operation only through
    their insert fractions (cost_models.io_model.insert_fraction: the windows, the run structure,
    whether the puts overwrite), and everything else of the specs is equal. The replication
    plans' node views (cost_models.replication.node_spec) of a mix without inserts are such specs.
    The worst-case model reads the whole workload (cost_models.evaluate.node_io): never shared."""
    if CostModel.WORST_CASE in (a.cost_model, b.cost_model):
        return a == b
    wa, wb = workloads(a), workloads(b)
    return (
        len(wa) == len(wb)
        and all(insert_fraction(x.operations) == insert_fraction(y.operations) for x, y in zip(wa, wb, strict=True))
        and _io_view(a) == _io_view(b)
    )


def with_codecs(spec: Spec, grid: Grid, ge: GridEval) -> GridEval:
    """Every row of ``ge`` once per codec pair of the grid (cost_models.compression).

    A codec changes no I/O count: only the bytes stored (``need_gib``), the bytes
    each I/O moves (``disk_block``) and the CPU per operation, so the pairs rescore
    the evaluated designs instead of re-running the I/O model. With the single
    pair (none, none) — incompressible data — ``ge`` is returned unchanged."""
    if grid.codecs == (("none", "none"),) or ge.hot_share is None:
        return ge
    wls = workloads(spec)
    n, k = ge.cls.size, len(grid.codecs)
    rep = np.tile(np.arange(n), k)
    ios = [ge.io] + ([ge.io_p] if ge.io_p is not None else [])
    blocks = [compression.op_blocks(io.per_op(), w.operations) for io, w in zip(ios, wls, strict=False)]
    factor: list[np.ndarray] = []
    disk: list[np.ndarray] = []
    cpu: list[list[np.ndarray]] = [[] for _ in ios]
    for h, c in grid.codecs:  # one pair at a time: the factors are looked up once per pair
        for j, (reads, merges) in enumerate(blocks):
            eff = compression.effect(h, c, ge.hot_share, ge.block, reads, merges, spec.workload.compressibility)
            cpu[j].append(eff.cpu_seconds)
        factor.append(eff.size_factor)
        disk.append(eff.disk_block_bytes)
    batches: list[DesignBatch] = []
    for h, c in grid.codecs:
        for b in ge.batches:
            bb = b.take(np.arange(b.size))
            bb.codec_hot = np.full(b.size, h, dtype=object)
            bb.codec_cold = np.full(b.size, c, dtype=object)
            batches.append(bb)
    return GridEval(
        io=ge.io.take(rep),
        total=ge.total[rep],
        io_p=None if ge.io_p is None else ge.io_p.take(rep),
        total_p=None if ge.total_p is None else ge.total_p[rep],
        shape=ge.shape.take(rep),
        ok=ge.ok[rep],
        need_gib=ge.need_gib[rep] * np.concatenate(factor),
        block=ge.block[rep],
        L=ge.L[rep],
        Y=ge.Y[rep],
        batches=batches,
        offsets=np.cumsum([0] + [b.size for b in batches]),
        phi=ge.phi,
        hot_share=ge.hot_share[rep],
        disk_block=np.concatenate(disk),
        codec_cpu=np.concatenate(cpu[0]),
        codec_cpu_p=np.concatenate(cpu[1]) if len(cpu) > 1 else None,
        codec_pair=np.repeat(np.arange(k), n),
        reused_of=ge.reused_of,
        # row r of pair c is row c n + r, and so in the evaluation it was taken from
        reused_from=None
        if ge.reused_from is None or ge.reused_of is None
        else np.concatenate(
            [np.where(ge.reused_from >= 0, c * ge.reused_of.cls.size + ge.reused_from, -1) for c in range(k)]
        ),
    )
