"""Precomputed tables: the best engine designs for every (VM type, shard size, volume).

The layout knobs of one node enter no other term of the MIP: a node's design
changes only its own throughput. So the MIP does not need a binary per design:
for every *context* c = (VM type, entries per node, storage volume) we take the
best designs over the whole discretized design grid (exactly, by enumeration)
and give the MIP one integer column per (context, design). Without robustness
that is the one design of highest node throughput; with robustness it is every
design on the Pareto front of (expected-workload throughput, perturbed-workload
throughput), since the robust rule may want any of them (solver.model).

The run structure (windows, presence probabilities, merge costs) does not
depend on memory, so it is computed once per shard size (and workload) and
combined with each VM's memory split (cost_models.io_model.combine).

Storage enters a node's throughput only through the I/Os per second it
sustains at the design's block size (``StorageChoice.effective_iops``), its
MiB/s and the room it has: X = min(X_cpu, IOPS(b)/io, MiB/s/(io b)), with X_cpu
(the CPU bounds, write stalls and background thread on the VM's cores) the
same on every volume. So among designs of one block size, one that needs no
more room, no more I/O per operation and has an X_cpu at least as high
(expected and perturbed) is never worse on any volume: only the designs no
other one dominates so are scored per volume (:func:`candidates`, per vCPU
count). Volumes and columns are pruned the same way (cost_models.pareto), so
every pruning step is exact (tests/test_tables_pruning.py: the columns equal
those of scoring every design).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from cost_models import compression, cpu_count
from cost_models.cloud import GIB, StorageChoice, effective_iops, storage_choices, usable_bytes, volume_table
from cost_models.cpu import (
    Demands,
    NodeShape,
    cpu_throughput,
    device_capped,
    node_demands,
    phi_table,
    shape_terms,
    throughput,
)
from cost_models.design import Design, DesignBatch, allowed_classes, preset
from cost_models.distributions import Partitions
from cost_models.evaluate import node_io, shape_overwrites, tree_puts, workload_partitions
from cost_models.io_model import (
    Cascades,
    IOCost,
    SplitTerms,
    Structure,
    cache_alpha,
    cache_blocks,
    combine,
    index_cache_alpha,
    range_cache_alpha,
    split_terms,
    structure,
    window_tables,
)
from cost_models.layout import Layout, MonkeyMemo, Shape, level_shape, split_memory
from cost_models.pareto import pareto_mask
from cost_models.pricing import Catalog, VmType
from cost_models.range_filter import layout_fpr
from cost_models.robust import is_robust, per_op_costs, perturbed_demands, perturbed_throughput, perturbed_workload
from cost_models.windows import WindowTable
from solver.space import Grid, cluster_cap, grid_for, shard_counts
from specs.errors import check_range
from specs.schema import Spec, Workload
from specs.vocab import OPERATIONS, CostModel, DesignClass

if TYPE_CHECKING:
    from solver.table_cache import TableCache

#: The design name (and table-cache row kind) of Cosine's own columns; a preset's carry its name.
COSINE = "cosine"
#: Most worker processes for the design tables (and a sweep's specs): each holds a copy of the
#: tables it builds, so more than a machine's cores only adds memory.
MAX_WORKERS = 256


def check_workers(workers: int | None) -> None:
    """``--workers``: None (one per CPU) or 1..:data:`MAX_WORKERS`."""
    if workers is not None:
        check_range("--workers", workers, 1, MAX_WORKERS, integer=True)


#: Whether a memory size reuses the previous one's evaluation when their splits evaluate every
#: design the same (:func:`same_evaluation`); off only to check that it changes no column.
REUSE_EQUAL_SPLITS = True

#: Volume sizes offered per node, as multiples of the shard's logical data
#: (space amplification of LSM levels and of the hash log's garbage).
VOLUME_HEADROOM = (1.0, 1.15, 1.35, 1.6, 2.0, 2.6)


@dataclass
class Context:
    """One MIP column: a node of ``vm`` holding ``entries`` on ``storage`` running ``design``."""

    provider: str
    vm: VmType
    entries: float
    storage: StorageChoice
    cost_month: float
    throughput: float  # node ops/s of the design, expected workload
    io_total: float
    design: Design
    design_class: str
    levels: int
    cold_levels: int
    perturbed: float = 0.0  # node ops/s under the perturbed workload (= throughput without robustness)


@dataclass
class Tables:
    """All contexts of a spec, per provider, for Cosine and for the presets."""

    spec_name: str
    entries: int
    grid_size: dict[str, int]
    max_cluster: int = 1
    contexts: dict[str, list[Context]] = field(default_factory=dict)  # provider -> columns
    presets: dict[str, dict[str, list[Context]]] = field(default_factory=dict)  # preset -> provider -> columns
    seconds: float = 0.0


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
    hot_share: np.ndarray | None = None  # share of the data in hot levels (codec pairs)
    disk_block: np.ndarray | None = None  # bytes one block I/O moves (None: the block size)
    codec_cpu: np.ndarray | None = None  # codec CPU seconds per operation, expected mix
    codec_cpu_p: np.ndarray | None = None  # and perturbed mix
    codec_pair: np.ndarray | None = None  # index of the row's (hot, cold) pair in Grid.codecs

    @property
    def cls(self) -> np.ndarray:
        return self.shape.cls

    def design(self, i: int, threads: int, name: str = COSINE) -> Design:
        k = int(np.searchsorted(self.offsets, i, side="right") - 1)
        return self.batches[k].design(i - int(self.offsets[k]), threads=threads, name=name)


#: Demands (cost_models.cpu.Demands) of some designs under the expected workload and, with
#: robustness, the perturbed one (None: no robustness, or a KL radius, priced per volume).
ScoreDemands = tuple[Demands, Demands | None]


def design_demands(spec: Spec, ge: GridEval, idx: np.ndarray) -> ScoreDemands:
    """The demands of the designs ``idx`` of ``ge``: they do not depend on the VM type or the
    volume, so every (VM type, volume) of one evaluation shares them (:func:`node_scores`)."""
    wl = spec.workload
    shape = ge.shape.take(idx)
    extra = 0.0 if ge.codec_cpu is None else ge.codec_cpu[idx]
    terms = shape_terms(shape, wl.scan_length)
    de = node_demands(ge.io.take(idx), shape, wl.operations, wl.scan_length, extra_cpu=extra, terms=terms)
    if not is_robust(spec):
        return de, None
    io_p = ge.io_p if ge.io_p is not None else ge.io
    extra_p = 0.0 if ge.codec_cpu_p is None else ge.codec_cpu_p[idx]
    # the noisy mix's demands share the designs' terms when it scans as far
    same = perturbed_workload(spec).scan_length == wl.scan_length
    return de, perturbed_demands(io_p.take(idx), shape, spec, extra_p, terms if same else None)


#: The :func:`cost_models.cpu.cpu_throughput` of some designs' :data:`ScoreDemands` on a VM's
#: cores (expected, and perturbed when its demands are known): what their throughput is on any
#: volume before the volume's caps.
CpuScores = tuple[np.ndarray, np.ndarray | None]


def cpu_scores(dem: ScoreDemands, vcpu: int) -> CpuScores:
    """The :data:`CpuScores` of designs of demands ``dem`` on ``vcpu`` cores: every VM type of
    that many cores shares them, whatever its volumes (cost_models.cpu.cpu_throughput is
    elementwise over the designs, so positions of them may be taken)."""
    de, dp = dem
    return cpu_throughput(de, vcpu), None if dp is None else cpu_throughput(dp, vcpu)


def node_scores(
    spec: Spec,
    ge: GridEval,
    idx: np.ndarray,
    iops: np.ndarray,
    vcpu: int,
    dem: ScoreDemands | None = None,
    cpu: CpuScores | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(expected, perturbed) node throughput of the designs ``idx`` of ``ge`` at
    the I/Os per second ``iops`` (one row per volume, a column per design);
    ``dem``: their :func:`design_demands`, when the caller shares them, and ``cpu`` their
    :func:`cpu_scores` on ``vcpu`` cores (then ``dem`` too)."""
    de, dp = design_demands(spec, ge, idx) if dem is None else dem
    x = throughput(de, iops, vcpu) if cpu is None else device_capped(cpu[0], de, iops)
    if not is_robust(spec):
        return x, x
    if dp is not None:
        return x, throughput(dp, iops, vcpu) if cpu is None or cpu[1] is None else device_capped(cpu[1], dp, iops)
    m = iops.shape[0]
    rep = np.tile(idx, m)
    io_p = ge.io_p if ge.io_p is not None else ge.io
    extra_p = 0.0 if ge.codec_cpu_p is None else ge.codec_cpu_p[rep]
    flat = iops.reshape(-1)
    xp = perturbed_throughput(io_p.take(rep), ge.shape.take(rep), flat, vcpu, spec, extra_p)
    return x, xp.reshape(iops.shape)


def take_demands(dem: ScoreDemands, pos: np.ndarray) -> ScoreDemands:
    """The :func:`design_demands` of the designs at positions ``pos`` of ``dem``'s (``dem`` itself
    when ``pos`` is every position in order)."""
    de, dp = dem
    if pos.size == de.serial.size and np.array_equal(pos, np.arange(pos.size)):
        return dem
    return de.take(pos), None if dp is None else dp.take(pos)


def usable(ge: GridEval, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The feasible designs of ``ge`` some offered volume size (``thresholds``) holds, and
    their size bucket (the smallest such size)."""
    bucket = np.searchsorted(thresholds * (1 + 1e-9), ge.need_gib, side="left")
    idx = np.flatnonzero(ge.ok & (bucket < thresholds.size))
    return idx, bucket[idx]


def candidates(
    spec: Spec, ge: GridEval, thresholds: np.ndarray, vcpu: int, dem: ScoreDemands | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The designs worth scoring per volume on a VM of ``vcpu`` cores: those no other design
    beats on every volume. Returns (design indices, their size bucket).

    A volume enters a node's throughput only through its caps (cost_models.cpu.throughput):
    X = min(X_cpu, IOPS(b) / io, MiB/s / (io b)), where X_cpu — the CPU bounds, the write
    stalls, the background thread — does not depend on the volume, and IOPS(b) only on the
    block size b a block I/O moves. So among designs of one block size (and bytes moved per
    I/O), one that needs no larger volume, has no more I/O per operation and an X_cpu at least
    as high is at least as fast on every volume: only the designs no other one dominates so are
    scored. With robustness the same holds for the perturbed workload's pair; with a KL radius
    per operation (the KL bound is monotone in each operation's seconds, max(1/X_cpu, io/IOPS)).
    ``tests/test_tables_pruning.py`` checks the pruning against scoring every design.
    ``dem``: the :func:`design_demands` of the :func:`usable` designs, when the caller shares them."""
    idx, bucket_idx = usable(ge, thresholds)
    if idx.size == 0:
        return idx, bucket_idx
    unlimited = np.full((1, idx.size), np.inf)
    xe, xp = node_scores(spec, ge, idx, unlimited, vcpu, dem)
    cols = [bucket_idx.astype(float), -xe[0], ge.total[idx]]
    if is_robust(spec):
        base = ge.io_p if ge.io_p is not None else ge.io
        if spec.kl_radius:
            pw = perturbed_workload(spec)
            sub = base.take(idx)
            cols += list(per_op_costs(sub, ge.shape.take(idx), np.inf, vcpu, pw.scan_length).T)
            cols += [getattr(sub, op) for op in OPERATIONS]
        else:
            cols += [-xp[0], (ge.total_p if ge.total_p is not None else ge.total)[idx]]
    table = np.stack(cols, axis=1)
    moved = ge.block if ge.disk_block is None else ge.disk_block
    keep: list[np.ndarray] = []
    for b in np.unique(ge.block[idx]):
        for m in np.unique(moved[idx]):
            rows = np.flatnonzero((ge.block[idx] == b) & (moved[idx] == m))
            if rows.size:
                keep.append(rows[pareto_mask(table[rows])])
    pos = np.sort(np.concatenate(keep))
    return idx[pos], bucket_idx[pos]


@dataclass(frozen=True)
class _Column:
    """A column before its :class:`Context` is made: what :func:`prune_columns` compares, and
    the row of ``ge`` whose Design the Context carries (made only for the columns kept)."""

    vm: VmType
    entries: float
    storage: StorageChoice
    throughput: float
    perturbed: float
    ge: GridEval
    row: int
    name: str

    @property
    def provider(self) -> str:
        return self.vm.provider

    @property
    def cost_month(self) -> float:
        return self.vm.usd_per_month + self.storage.usd_month

    def context(self) -> Context:
        ge, i, vm = self.ge, self.row, self.vm
        return Context(
            provider=vm.provider,
            vm=vm,
            entries=self.entries,
            storage=self.storage,
            cost_month=self.cost_month,
            throughput=self.throughput,
            io_total=float(ge.total[i]),
            design=ge.design(i, vm.vcpu, self.name),
            design_class=DesignClass.of_code(int(ge.cls[i])),
            levels=int(ge.L[i]),
            cold_levels=int(ge.Y[i]),
            perturbed=self.perturbed,
        )


def columns_for_vm(
    spec: Spec,
    vm: VmType,
    entries: float,
    choices: list[StorageChoice],
    ge: GridEval,
    cand: np.ndarray,
    bucket: np.ndarray,
    thresholds: np.ndarray,
    name: str = COSINE,
    dem: ScoreDemands | None = None,
    cpu: CpuScores | None = None,
) -> list[_Column]:
    """The columns of one VM type at one shard size: for each volume, the best fitting design
    (or, with robustness, the Pareto front of designs in the two throughputs); :func:`prune_columns`
    then drops the dominated ones. ``dem``: the :func:`design_demands` of ``cand``, shared by the
    VM types of ``ge``, and ``cpu`` their :func:`cpu_scores` (shared by those of its cores). A
    column's Design and Context are made later (``_Column.context``), for the columns the pruning
    keeps."""
    if not choices or cand.size == 0:
        return []
    iops, fits = _fitting(ge, cand, bucket, thresholds, choices)
    dem = design_demands(spec, ge, cand) if dem is None else dem
    cpu = cpu_scores(dem, vm.vcpu) if cpu is None else cpu
    xe, xp = node_scores(spec, ge, cand, iops, vm.vcpu, dem, cpu)
    return _picked(spec, vm, entries, choices, ge, cand, fits, xe, xp, name, headroom=cpu[0])


def _fitting(
    ge: GridEval, cand: np.ndarray, bucket: np.ndarray, thresholds: np.ndarray, choices: list[StorageChoice]
) -> tuple[np.ndarray, np.ndarray]:
    """(volumes, designs): the I/Os per second each of ``choices`` sustains for the designs
    ``cand`` of ``ge`` (size bucket ``bucket``), and whether it holds the design."""
    blocks = (ge.block if ge.disk_block is None else ge.disk_block)[cand]
    _, gib, vol_iops, vol_mibps = _table(choices)
    iops = effective_iops(vol_iops[:, None], vol_mibps[:, None], blocks[None, :])
    cbucket = np.searchsorted(thresholds, np.minimum(gib, thresholds[-1]) * (1 + 1e-12), side="right") - 1
    return iops, bucket[None, :] <= cbucket[:, None]


def _picked(
    spec: Spec,
    vm: VmType,
    entries: float,
    choices: list[StorageChoice],
    ge: GridEval,
    cand: np.ndarray,
    fits: np.ndarray,
    xe: np.ndarray,
    xp: np.ndarray,
    name: str,
    headroom: np.ndarray | None = None,
) -> list[_Column]:
    """The columns of one VM type from its (volumes, designs) scores ``xe``, ``xp`` (:func:`node_scores`)
    and :func:`_fitting`'s ``fits``: per volume the best design, or with robustness the front.

    Of designs equally fast on a volume (a device-bound node: every design that moves the same
    blocks per operation runs at the volume's pace) the one with the most ``headroom`` is taken:
    the highest throughput its CPU allows (:func:`cpu_scores`), the one furthest from becoming
    CPU-bound if the model's CPU costs are off. Without ``headroom``, the first."""
    xe = np.where(fits, xe, 0.0)
    xp = np.where(fits, xp, 0.0)
    raw: list[tuple[int, int]] = []
    if is_robust(spec):
        raw = _robust_front(vm, choices, xe, xp, headroom)
    else:
        spare = np.zeros(xe.shape[1]) if headroom is None else -np.nan_to_num(headroom, nan=-np.inf)
        for r in range(len(choices)):
            j = int(np.lexsort((spare, -xe[r]))[0])
            if xe[r, j] > 0:
                raw.append((r, j))
    return [_Column(vm, entries, choices[r], float(xe[r, j]), float(xp[r, j]), ge, int(cand[j]), name) for r, j in raw]


def _robust_front(
    vm: VmType, choices: list[StorageChoice], xe: np.ndarray, xp: np.ndarray, headroom: np.ndarray | None = None
) -> list[tuple[int, int]]:
    """The (volume, design) pairs of one VM type worth a column with robustness: on each
    volume the Pareto front of the designs in (expected, perturbed) throughput (all
    volumes at once: per row, fastest first, a design is kept when its perturbed
    throughput beats every faster one's; of designs equal in both, the one with the most
    ``headroom``, :func:`_picked`), then only the pairs no other pair of this VM
    beats on (cost, expected, perturbed) -- the ones :func:`prune_columns` would drop
    anyway (it drops a column any other one weakly dominates; of identical ones it keeps
    the first, and the pairs keep their order)."""
    live = xe > 0
    e = np.where(live, -xe, np.inf)
    q = np.where(live, -xp, np.inf)
    spare = np.zeros(xe.shape) if headroom is None else np.broadcast_to(-np.nan_to_num(headroom, nan=-np.inf), xe.shape)
    order = np.lexsort((spare, q, e), axis=-1)
    qs = np.take_along_axis(q, order, axis=1)
    best = np.minimum.accumulate(qs, axis=1)
    prev = np.concatenate([np.full((q.shape[0], 1), np.inf), best[:, :-1]], axis=1)
    front = np.zeros_like(live)
    np.put_along_axis(front, order, (qs < prev) & np.take_along_axis(live, order, axis=1), axis=1)
    rs, js = np.nonzero(front)
    cost = vm.usd_per_month + _table(choices)[0]
    keep = pareto_mask(np.stack([cost[rs], -xe[rs, js], -xp[rs, js]], axis=1))
    return list(zip(rs[keep].tolist(), js[keep].tolist(), strict=True))


class _Priced(Protocol):
    """What :func:`prune_columns` compares of a column."""

    @property
    def provider(self) -> str: ...
    @property
    def cost_month(self) -> float: ...
    @property
    def throughput(self) -> float: ...
    @property
    def perturbed(self) -> float: ...


_C = TypeVar("_C", bound=_Priced)


def prune_columns(ctxs: list[_C]) -> list[_C]:
    """Columns of one provider and shard size that no other one beats: as cheap
    or cheaper and at least as fast on both workloads (whatever its VM type: the
    MIP sees a column only through its cost, shard and throughputs)."""
    if not ctxs:
        return []
    table = np.array([(c.cost_month, -c.throughput, -c.perturbed) for c in ctxs])
    return [ctxs[i] for i in _unbeaten([c.provider for c in ctxs], table)]


def _unbeaten(providers: list[str], table: np.ndarray) -> list[int]:
    """:func:`prune_columns` on rows (cost, -throughput, -perturbed) of columns of ``providers``:
    the positions it keeps, provider by provider (sorted), each in order."""
    prov = np.array(providers)
    out: list[int] = []
    for p in sorted(set(providers)):
        mine = np.flatnonzero(prov == p)
        out += mine[pareto_mask(table[mine])].tolist()
    return out


def _workloads(spec: Spec) -> list[Workload]:
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
    wls = _workloads(spec)
    lays = grid.layouts(max_mem, s * wl.entry_bytes)  # every layout without filters
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


#: The splits of one memory size, per family and merge policy (B-tree, LSM-like, hash log).
Splits = list[Split]


def _fits(spec: Spec, grid: Grid, s: float, mem_gib: float, lays: DesignBatch) -> np.ndarray:
    """The layouts whose buffer fits a node of ``mem_gib`` holding ``s`` entries."""
    mem = usable_bytes(mem_gib, spec.design.memory_headroom)
    # A buffer past twice the shard's data buys nothing more: it already holds it all.
    return np.asarray(
        (lays.buffer_bytes <= (1 - grid.epsilon) * mem) & (lays.buffer_bytes <= 2 * s * spec.workload.entry_bytes)
    )


def _grid_splits(
    spec: Spec, grid: Grid, s: float, mem_gib: float, prep: ShardPrep, fits: np.ndarray | None = None
) -> Splits:
    """The memory split of every design of the grid whose buffer fits a node of ``mem_gib``
    holding ``s`` entries (``fits``: :func:`_fits`, when the caller has it)."""
    lays = prep.lays
    mem = usable_bytes(mem_gib, spec.design.memory_headroom)
    fits = _fits(spec, grid, s, mem_gib, lays) if fits is None else fits
    out: Splits = []
    for g in _split_groups(grid, prep):
        sel = np.flatnonzero(fits & (lays.lsh == g.is_lsh))
        if sel.size == 0:
            continue
        # the layouts come buffer by buffer, smallest first, so those whose buffer fits are
        # the first of the family's (then its batch and shape are views of the family's)
        n = sel.size * g.m
        rows: slice | np.ndarray = slice(0, n) if np.array_equal(sel, g.sel[: sel.size]) else _repeat_pos(g, sel)
        batch = g.batch.take(rows)
        memo = g.monkey if isinstance(rows, slice) else None  # (its rows are the family's first)
        out.append(Split(sel, g.m, batch, split_memory(g.shape.take(rows), batch, mem, monkey=memo), g.sts))
    return out


@dataclass
class _SplitGroup:
    """A family and merge policy of :func:`_grid_splits` on every layout of a shard: its
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


def _grid_eval(spec: Spec, grid: Grid, s: float, parts: Partitions, mem_gib: float, prep: ShardPrep) -> GridEval | None:
    """Every design of the grid whose buffer fits a node of ``mem_gib`` holding ``s`` entries."""
    return _evaluate(spec, s, parts, _grid_splits(spec, grid, s, mem_gib, prep), prep)


def _evaluate(spec: Spec, s: float, parts: Partitions, splits: Splits, prep: ShardPrep) -> GridEval | None:
    """Every design of ``splits`` (:func:`_grid_splits`) evaluated: I/O per operation and layout facts."""
    wins = prep.wins
    ios: list[list[IOCost]] = [[] for _ in wins]
    facts: list[tuple[np.ndarray, ...]] = []
    batches: list[DesignBatch] = []
    for sel, m, batch, lay, sts in ((sp.sel, sp.m, sp.batch, sp.lay, sp.sts) for sp in splits):
        # the block-cache terms see a workload only through the gets' window table (shared by
        # the workloads, :func:`_shard_job`), its scan length and empty-range width: computed
        # once per distinct triple
        cached: dict[tuple[int, float, int], tuple[tuple[Any, ...], SplitTerms]] = {}
        icache: np.ndarray | None = None
        cblocks: np.ndarray | None = None
        for k, (st, win, w) in enumerate(zip(sts, wins, _workloads(spec), strict=True)):
            if spec.cost_model == CostModel.WORST_CASE:  # the paper's worst-case model (no windows)
                ios[k].append(node_io(spec.cost_model, lay, parts, w))
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
            io = combine(st, *args, cblocks, terms=terms)
            ios[k].append(io.flat())
        occ = np.maximum(lay.occ.sum(axis=1), 1e-300)
        facts.append(
            (
                lay.cls,
                lay.feasible & allowed_classes(lay.cls, spec.design.classes),
                lay.space_entries * lay.entry_bytes / GIB,
                batch.block_bytes.astype(float),
                lay.L,
                lay.Y,
                np.where(lay.hot, lay.occ, 0.0).sum(axis=1) / occ,
                np.asarray(lay.B * lay.entry_bytes, dtype=float),
                np.asarray(lay.buffered, dtype=float),
            )
        )
        batches.append(batch)
    if not facts:
        return None
    cls, ok, need, block, L, Y, hot_share, block_data, buffered = (np.concatenate(x) for x in zip(*facts, strict=True))
    joined = [
        replace(
            IOCost.of(
                {op: np.concatenate([getattr(c, op) for c in parts_k]) for op in OPERATIONS},
                get_buffered=np.concatenate([c.buffered_share() for c in parts_k]),
            ),
            cascades=Cascades.concat([c.cascades for c in parts_k if c.cascades is not None])
            if all(c.cascades is not None for c in parts_k)
            else None,
        )
        for parts_k in ios
    ]
    wls = _workloads(spec)
    io_p = joined[1] if len(joined) > 1 else None
    return GridEval(
        io=joined[0],
        total=joined[0].total(wls[0].operations),
        io_p=io_p,
        total_p=None if io_p is None else io_p.total(wls[1].operations),
        shape=NodeShape(cls, block_data, float(s), float(spec.workload.entry_bytes), buffered),
        ok=ok,
        need_gib=need,
        block=block,
        L=L,
        Y=Y,
        batches=batches,
        offsets=np.cumsum([0] + [b.size for b in batches]),
        hot_share=hot_share,
    )


def with_codecs(spec: Spec, grid: Grid, ge: GridEval) -> GridEval:
    """Every row of ``ge`` once per codec pair of the grid (cost_models.compression).

    A codec changes no I/O count: only the bytes stored (``need_gib``), the bytes
    each I/O moves (``disk_block``) and the CPU per operation, so the pairs rescore
    the evaluated designs instead of re-running the I/O model. With the single
    pair (none, none) — incompressible data — ``ge`` is returned unchanged."""
    if grid.codecs == (("none", "none"),) or ge.hot_share is None:
        return ge
    wls = _workloads(spec)
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
        hot_share=ge.hot_share[rep],
        disk_block=np.concatenate(disk),
        codec_cpu=np.concatenate(cpu[0]),
        codec_cpu_p=np.concatenate(cpu[1]) if len(cpu) > 1 else None,
        codec_pair=np.repeat(np.arange(k), n),
    )


class Menu(list[StorageChoice]):
    """A VM type's volumes for one shard (:func:`_volumes`), their :func:`volume_table` and
    :func:`_thresholds` made once: every memory size, design and preset of the shard reads them."""

    def __init__(self, choices: list[StorageChoice]) -> None:
        super().__init__(choices)
        self.table = volume_table(self)
        self.thresholds = _thresholds([self])


def _table(choices: list[StorageChoice]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`volume_table` of ``choices`` (a :class:`Menu`'s own)."""
    return choices.table if isinstance(choices, Menu) else volume_table(choices)


def _volumes(
    spec: Spec, catalog: Catalog, vms: list[VmType], s: float, blocks: tuple[int, ...]
) -> dict[str, list[StorageChoice]]:
    """Each VM type's volumes for a shard of ``s`` entries. A VM type enters
    cost_models.cloud.storage_choices only through its provider and the limits
    the catalog sets it on each product, so VM types that share them share one list."""
    base = s * spec.workload.entry_bytes / GIB
    # compressed data needs smaller volumes: the headroom ladder again at each cold codec's factor
    shrink = {compression.codec_factors(c, spec.workload.compressibility)[0] for _, c in grid_for(spec).codecs}
    needs = sorted({base * h * f for h in VOLUME_HEADROOM for f in shrink | {1.0}})
    out: dict[str, list[StorageChoice]] = {}
    shared: dict[tuple[Any, ...], list[StorageChoice]] = {}
    for vm in vms:
        limits = (vm.provider, *(catalog.storage_limit(vm, o.name) for o in catalog.storage.get(vm.provider, [])))
        if limits not in shared:
            shared[limits] = Menu(storage_choices(catalog, vm, needs, blocks))
        out[vm.key] = shared[limits]
    return out


def _thresholds(choices: list[list[StorageChoice]]) -> np.ndarray:
    g = sorted({c.gib for cs in choices for c in cs})
    return np.array(g) if g else np.zeros(0)


def _menu_thresholds(choices: list[StorageChoice]) -> np.ndarray:
    """``_thresholds([choices])`` (a :class:`Menu`'s own)."""
    return choices.thresholds if isinstance(choices, Menu) else _thresholds([choices])


def _shard_job(
    args: tuple[Spec, Catalog, Grid, float, list[VmType], Partitions, tuple[str, ...]],
) -> dict[str, list[Context]]:
    """Every column of ``vms`` at shard size ``s``: Cosine's (:data:`COSINE`) and each preset's.
    The window tables and volumes are shared between them; VM types of one memory size share
    one evaluation of the designs."""
    spec, catalog, grid, s, vms, parts, presets = args
    wls = _workloads(spec)
    wins: list[tuple[WindowTable, WindowTable]] = []
    for w in wls:  # the workloads share the gets' table (it does not depend on the mix)
        wins.append(window_tables(parts, w.operations, s, wins[0][1] if wins else None))
    by_mem: dict[float, list[VmType]] = {}
    for vm in vms:
        by_mem.setdefault(vm.memory_gib, []).append(vm)
    volumes_of: dict[tuple[int, ...], dict[str, list[StorageChoice]]] = {}

    def volumes(blocks: tuple[int, ...]) -> dict[str, list[StorageChoice]]:
        if blocks not in volumes_of:
            volumes_of[blocks] = _volumes(spec, catalog, vms, s, blocks)
        return volumes_of[blocks]

    out: dict[str, list[Context]] = {}
    cols: list[_Column] = []
    max_mem = usable_bytes(max(vm.memory_gib for vm in vms), spec.design.memory_headroom)
    prep = shard_prep(spec, grid, s, parts, wins, max_mem)
    lays = prep.lays
    if lays.size:
        vols = volumes(grid.blocks)
        # the worst-case model reads the split itself
        reuse = REUSE_EQUAL_SPLITS and spec.cost_model != CostModel.WORST_CASE
        last: Splits | None = None
        last_fits: np.ndarray | None = None
        saturated = False
        ge: GridEval | None = None
        ok_rows = np.zeros(0, dtype=np.int64)
        dem_ok: ScoreDemands | None = None
        cands: dict[tuple[bytes, bytes, int], tuple[np.ndarray, np.ndarray, ScoreDemands, CpuScores]] = {}
        for mem_gib, group in sorted(by_mem.items()):  # ascending memory
            thr = _thresholds([vols[vm.key] for vm in group])
            if thr.size == 0:
                continue
            fits = _fits(spec, grid, s, mem_gib, lays)
            # a memory size whose splits evaluate every design as the last one did reuses its
            # evaluation, demands and candidates (same_evaluation); past a saturated split
            # (:func:`saturated_split`) with the same designs a larger memory changes nothing
            if not (reuse and saturated and last_fits is not None and np.array_equal(fits, last_fits)):
                splits = _grid_splits(spec, grid, s, mem_gib, prep, fits)
                if last is None or not reuse or not same_evaluation(last, splits, s):
                    ev = _evaluate(spec, s, parts, splits, prep)
                    ge = None if ev is None else with_codecs(spec, grid, ev)
                    ok_rows = np.zeros(0, dtype=np.int64) if ge is None else np.flatnonzero(ge.ok)
                    dem_ok = None if ge is None else design_demands(spec, ge, ok_rows)
                    cands = {}
                last, last_fits, saturated = splits, fits, saturated_split(splits, s)
            if ge is None or dem_ok is None:
                continue
            by_vcpu: dict[int, list[VmType]] = {}
            for vm in group:
                by_vcpu.setdefault(vm.vcpu, []).append(vm)
            rows, bucket_rows = usable(ge, thr)
            dem_all = take_demands(dem_ok, np.searchsorted(ok_rows, rows))
            for vcpu, same in sorted(by_vcpu.items()):
                # the candidates see the thresholds only through the usable designs' size buckets
                key = (rows.tobytes(), bucket_rows.tobytes(), vcpu)
                if key not in cands:
                    cand, bucket = candidates(spec, ge, thr, vcpu, dem_all)
                    dem = take_demands(dem_all, np.searchsorted(rows, cand))
                    cands[key] = (cand, bucket, dem, cpu_scores(dem, vcpu))
                cand, bucket, dem, cpu = cands[key]
                for vm in same:
                    cols += columns_for_vm(spec, vm, s, vols[vm.key], ge, cand, bucket, thr, dem=dem, cpu=cpu)
    out[COSINE] = [c.context() for c in prune_columns(cols)]
    out.update(_preset_columns(spec, presets, s, by_mem, volumes, parts, wins))
    return out


def _preset_columns(
    spec: Spec,
    names: tuple[str, ...],
    s: float,
    by_mem: dict[float, list[VmType]],
    volumes: Callable[[tuple[int, ...]], dict[str, list[StorageChoice]]],
    parts: Partitions,
    wins: list[tuple[WindowTable, WindowTable]],
) -> dict[str, list[Context]]:
    """The columns of each preset of ``names`` at shard size ``s`` (its one design on every VM
    type). The presets' designs are evaluated on every memory size at once (one row per preset
    and memory size: the evaluation is elementwise over the rows), and every (VM type, volume)
    pair of one vCPU count, of every preset, is scored at once."""
    if not names:
        return {}
    wl = spec.workload
    ds = [preset(name) for name in names]
    wls = _workloads(spec)
    mems = sorted(by_mem)
    m = len(mems)
    batch = DesignBatch.of([d for d in ds for _ in mems])
    puts = tree_puts(spec.cost_model, parts, wl, s, wins[0])
    shape = level_shape(batch, s, wl.key_bytes, wl.value_bytes, overwrites=shape_overwrites(spec), puts=puts)
    sts = [
        structure(split_memory(shape, batch, np.inf), parts, w.operations, w.scan_length, win[0])
        for w, win in zip(wls, wins, strict=True)
    ]
    lay = split_memory(shape, batch, np.tile(usable_bytes(np.array(mems), spec.design.memory_headroom), len(ds)))
    ios = [node_io(spec.cost_model, lay, parts, w, win, st) for w, win, st in zip(wls, wins, sts, strict=True)]
    io_p = ios[1] if len(ios) > 1 else None
    ge = GridEval(
        io=ios[0],
        total=ios[0].total(wls[0].operations),
        io_p=io_p,
        total_p=None if io_p is None else io_p.total(wls[1].operations),
        shape=NodeShape.of(lay),
        ok=lay.feasible,
        need_gib=lay.space_entries * lay.entry_bytes / GIB,
        block=np.repeat([float(d.block_bytes) for d in ds], m),
        L=lay.L,
        Y=lay.Y,
        batches=[batch],
        offsets=np.array([0]),
    )
    rows = np.flatnonzero(lay.feasible)
    dem_all = design_demands(spec, ge, rows)
    # (preset, VM type, its row's position in ``rows``, its volumes' I/Os per second and fit)
    segs: list[tuple[int, VmType, int, np.ndarray, np.ndarray]] = []
    for pos, i in enumerate(rows):
        one = np.array([i])
        vols = volumes((ds[i // m].block_bytes,))
        for vm in by_mem[mems[i % m]]:
            thr = _menu_thresholds(vols[vm.key])
            if thr.size == 0:
                continue
            bucket = np.searchsorted(thr * (1 + 1e-9), ge.need_gib[one], side="left")
            if bucket[0] >= thr.size:
                continue
            segs.append((int(i // m), vm, pos, *_fitting(ge, one, bucket, thr, vols[vm.key])))
    # every (VM type, volume) pair of one vCPU count scored at once, one design per pair (a
    # row of I/Os per second, a column per pair: node_scores is elementwise over them)
    scores: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for vcpu in sorted({seg[1].vcpu for seg in segs}):
        mine = [k for k, seg in enumerate(segs) if seg[1].vcpu == vcpu]
        pos_of = np.concatenate([np.full(segs[k][3].shape[0], segs[k][2]) for k in mine])
        iops = np.concatenate([segs[k][3][:, 0] for k in mine])[None, :]
        cpu_rows = cpu_scores(dem_all, vcpu)  # each row once, then each (VM type, volume) pair's
        cpu = (cpu_rows[0][pos_of], None if cpu_rows[1] is None else cpu_rows[1][pos_of])
        xe, xp = node_scores(spec, ge, rows[pos_of], iops, vcpu, take_demands(dem_all, pos_of), cpu)
        ends = np.cumsum([segs[k][3].shape[0] for k in mine])
        for k, a, b in zip(mine, np.concatenate([[0], ends[:-1]]), ends, strict=True):
            scores[k] = (xe[0, a:b][:, None], xp[0, a:b][:, None])
    out: dict[str, list[Context]] = {}
    for j, name in enumerate(names):
        vols = volumes((ds[j].block_bytes,))
        per_vm = [
            (vm, vols[vm.key], int(rows[pos]), fits, *scores[k])
            for k, (p, vm, pos, _, fits) in enumerate(segs)
            if p == j
        ]
        out[name] = [c.context() for c in one_design_columns(s, ge, name, per_vm)]
    return out


#: One VM type running one design: (VM type, its volumes, the design's row of the GridEval,
#: and per volume (a column of one row each) whether it holds the design, and the design's
#: expected and perturbed throughput on it).
OneDesign = tuple[VmType, list[StorageChoice], int, np.ndarray, np.ndarray, np.ndarray]


def one_design_columns(entries: float, ge: GridEval, name: str, per_vm: list[OneDesign]) -> list[_Column]:
    """:func:`prune_columns` of the columns :func:`_picked` gives VM types that each run one
    design (a preset), computed as arrays: of one design a volume's score is a column when it is
    live (what _picked keeps of it, with robustness too: the front of one design), and all of
    them are pruned at once (the per-VM front _picked takes with robustness drops only columns
    prune_columns drops anyway). tests/test_tables_pruning.py checks it against _picked."""
    cols: list[tuple[VmType, StorageChoice, float, float, int]] = []
    for vm, choices, row, fits, xe_v, xp_v in per_vm:
        xe, xp = np.where(fits, xe_v, 0.0)[:, 0], np.where(fits, xp_v, 0.0)[:, 0]
        live = (xe > 0) & (np.where(xe > 0, -xp, np.inf) < np.inf)  # _robust_front's front of one design
        cols += [(vm, choices[r], float(xe[r]), float(xp[r]), row) for r in np.flatnonzero(live)]
    if not cols:
        return []
    table = np.array([(vm.usd_per_month + st.usd_month, -x, -p) for vm, st, x, p, _ in cols])
    keep = _unbeaten([c[0].provider for c in cols], table)
    return [_Column(vm, entries, st, x, p, ge, i, name) for vm, st, x, p, i in (cols[j] for j in keep)]


def _prime(catalog: Catalog, vms: list[VmType]) -> None:
    """Load before the pool forks what each worker's first shard job would load for itself: the
    phi table (cost_models.cpu) and the codec table (cost_models.compression), which the
    exact re-evaluation later needs in this process too, and the catalog's storage limit of
    every (VM type, product) (each job gets a copy of the catalog, with the limits found)."""
    phi_table()
    compression.table()
    for vm in vms:
        for opt in catalog.storage.get(vm.provider, []):
            catalog.storage_limit(vm, opt.name)


def build_tables(
    spec: Spec,
    catalog: Catalog,
    providers: tuple[str, ...],
    *,
    workers: int | None = None,
    presets: tuple[str, ...] = (),
    max_cluster: int | None = None,
    cache: TableCache | None = None,
) -> Tables:
    """Best designs per context for every provider (and the presets' own tables).

    With robustness (spec.noise, spec.kl_radius) every column carries the
    perturbed-workload throughput too. ``max_cluster`` defaults to
    :func:`solver.space.cluster_cap`. With a ``cache`` (solver.table_cache) the
    shard sizes it holds for a provider are read back and only the others are
    computed (then added to it).
    """
    t0 = time.perf_counter()
    mc = cluster_cap(spec, catalog, providers) if max_cluster is None else max_cluster
    grid = grid_for(spec)
    vms = [vm for p in providers for vm in catalog.vms.get(p, [])]
    if vms:
        grid.check_size(max(vm.memory_gib for vm in vms) * GIB)
    N = spec.workload.entries
    counts = shard_counts(min(mc, N))
    provs = sorted(set(providers))
    found = {p: cache.load(spec, catalog, p) if cache is not None else {} for p in provs}
    kinds = (COSINE, *presets)
    # a shard size is computed (every kind) for the providers the cache lacks any kind of
    todo = {
        k: [p for p in provs if catalog.vms.get(p) and any((kind, k) not in found[p] for kind in kinds)] for k in counts
    }
    todo = {k: ps for k, ps in todo.items() if ps}
    parts = workload_partitions(spec.workload) if todo else None
    jobs = [
        (spec, catalog, grid, N / k, [vm for p in ps for vm in catalog.vms.get(p, [])], parts, presets)
        for k, ps in todo.items()
    ]
    workers = workers if workers is not None else min(len(jobs), cpu_count())
    if jobs:
        _prime(catalog, [vm for job in jobs for vm in job[4]])
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            results = list(ex.map(_shard_job, jobs))
    else:
        results = [_shard_job(j) for j in jobs]  # type: ignore[arg-type]
    computed: dict[str, dict[tuple[str, int], list[Context]]] = {p: {} for p in provs}
    for k, by_kind in zip(todo, results, strict=True):
        for kind, ctxs in by_kind.items():
            for c in ctxs:
                computed[c.provider].setdefault((kind, k), []).append(c)
    shards = {p: {**found[p], **computed[p]} for p in provs}
    if cache is not None:
        cache.hits += sum(len(f) for f in found.values())
        cache.misses += sum(len(ps) for ps in todo.values())
        for p in provs:
            if computed[p]:
                cache.save(spec, catalog, p, shards[p])
    tables = Tables(
        spec_name=spec.name,
        entries=N,
        grid_size={f"{vm.memory_gib:g} GiB": grid.size(vm.memory_gib * GIB) for vm in vms},
        max_cluster=mc,
    )
    for k in counts:
        for p in provs:
            for c in shards[p].get((COSINE, k), []):
                tables.contexts.setdefault(p, []).append(c)
    for name in presets:
        for k in counts:
            for p in provs:
                for c in shards[p].get((name, k), []):
                    tables.presets.setdefault(name, {}).setdefault(p, []).append(c)
    tables.seconds = time.perf_counter() - t0
    return tables
