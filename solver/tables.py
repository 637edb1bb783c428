"""Precomputed tables: the best engine design for every (VM type, shard size, volume).

The layout knobs of one node enter no other term of the MIP: a node's design
changes only its own throughput. So the MIP does not need a binary per design:
for every *context* c = (VM type, entries per node, storage volume) we take the
maximum of the model's node throughput over the whole discretized design grid
(exactly, by enumeration) and give the MIP one integer column per context. The
run structure (windows, presence probabilities, merge costs) does not depend on
memory, so it is computed once per shard size and combined with each VM's
memory split (filters, fences, cache) cheaply (cost_models.io_model.combine).
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_models import cpu_count
from cost_models.cloud import GIB, StorageChoice, storage_choices
from cost_models.cpu import node_throughput
from cost_models.design import Design, DesignBatch, preset
from cost_models.distributions import Partitions
from cost_models.evaluate import node_io, workload_partitions
from cost_models.io_model import IOCost, cache_alpha, combine, structure, window_tables
from cost_models.layout import derive, level_shape, split_memory
from cost_models.pricing import Catalog, VmType
from cost_models.robust import kl_worst_case, mix_vector, per_op_costs
from solver.space import Grid, grid_for, shard_sizes
from specs.errors import check_range
from specs.schema import Spec
from specs.vocab import CostModel, DesignClass

#: Most worker processes for the design tables (and a sweep's specs): each holds a copy of the
#: tables it builds, so more than a machine's cores only adds memory.
MAX_WORKERS = 256


def check_workers(workers: int | None) -> None:
    """``--workers``: None (one per CPU) or 1..:data:`MAX_WORKERS`."""
    if workers is not None:
        check_range("--workers", workers, 1, MAX_WORKERS, integer=True)


#: Volume sizes offered per node, as multiples of the shard's logical data
#: (space amplification of LSM levels and of the hash log's garbage).
VOLUME_HEADROOM = (1.0, 1.15, 1.35, 1.6, 2.0, 2.6)


@dataclass
class Context:
    """One MIP column: a node of ``vm`` holding ``entries`` on ``storage``."""

    provider: str
    vm: VmType
    entries: float
    storage: StorageChoice
    cost_month: float
    throughput: float  # node ops/s with the best design
    io_total: float
    design: Design
    design_class: str
    levels: int
    cold_levels: int

    @property
    def key(self) -> str:
        return f"{self.vm.key}|{self.entries:.6g}|{self.storage.label}"


@dataclass
class Tables:
    """All contexts of a spec, per provider, for Cosine and for the presets."""

    spec_name: str
    entries: int
    grid_size: dict[str, int]
    contexts: dict[str, list[Context]] = field(default_factory=dict)  # provider -> columns
    presets: dict[str, dict[str, list[Context]]] = field(default_factory=dict)  # preset -> provider -> columns
    seconds: float = 0.0


@dataclass
class Scorer:
    """Node throughput of many designs: nominal (the mix) or robust (ENDURE's
    worst case over a KL ball of radius ``rho`` around the mix)."""

    spec: Spec
    io: IOCost  # per-operation I/O of each design
    total: np.ndarray
    cls: np.ndarray
    rho: float = 0.0

    def __call__(self, iops: float, vcpu: int, fits: np.ndarray) -> np.ndarray:
        wl = self.spec.workload
        x = np.where(fits, node_throughput(self.total, iops, self.cls, wl.operations, vcpu, wl.scan_length), 0.0)
        if self.rho <= 0:
            return x
        # Robust throughput lies in [1 / max_i c_i, 1 / (w . c)]: only designs whose
        # upper bound reaches the best lower bound can win; the dual runs on those.
        w = mix_vector(wl.operations)
        idx = np.flatnonzero(fits)
        sub = IOCost(**{op: v[idx] for op, v in self.io.per_op().items()})
        c = per_op_costs(sub, self.cls[idx], iops, vcpu, wl.scan_length)
        upper = 1.0 / np.maximum(c @ w, 1e-300)
        lower = 1.0 / np.maximum(np.max(np.where(w > 0, c, 0.0), axis=1), 1e-300)
        keep = upper >= lower.max() * (1 - 1e-12)
        out = np.zeros_like(x)
        worst = kl_worst_case(c[keep], w, self.rho)
        out[idx[keep]] = 1.0 / np.maximum(worst, 1e-300)
        return out


def _allowed(cls: np.ndarray, spec: Spec) -> np.ndarray:
    codes = [DesignClass(c).code for c in spec.design.classes]
    return np.isin(cls, codes)


def _best_per_vm(
    spec: Spec,
    catalog: Catalog,
    vms: list[VmType],
    s: float,
    score: Scorer,
    ok: np.ndarray,
    need_gib: np.ndarray,
    make_design: Any,
    layout_info: tuple[np.ndarray, np.ndarray],
) -> list[Context]:
    """Best design per (VM, volume) for one shard size, Pareto-pruned per VM."""
    out: list[Context] = []
    base_gib = s * spec.workload.entry_bytes / GIB
    L, Y = layout_info
    for vm in vms:
        seen: dict[tuple[str, int, float], StorageChoice] = {}
        for h in VOLUME_HEADROOM:
            for st in storage_choices(catalog, vm.provider, base_gib * h):
                seen.setdefault((st.product, st.disks, round(st.gib, 6)), st)
        cands: list[Context] = []
        for st in seen.values():
            fits = ok & (need_gib <= st.gib * (1 + 1e-9))
            if not fits.any():
                continue
            x = score(st.iops, vm.vcpu, fits)
            i = int(np.argmax(x))
            if x[i] <= 0:
                continue
            cands.append(
                Context(
                    provider=vm.provider,
                    vm=vm,
                    entries=s,
                    storage=st,
                    cost_month=vm.usd_per_month + st.usd_month,
                    throughput=float(x[i]),
                    io_total=float(score.total[i]),
                    design=make_design(i, vm.vcpu),
                    design_class=DesignClass.of_code(int(score.cls[i])),
                    levels=int(L[i]),
                    cold_levels=int(Y[i]),
                )
            )
        cands.sort(key=lambda c: (c.cost_month, -c.throughput))
        best = -1.0
        for c in cands:  # a dearer volume must buy more throughput
            if c.throughput > best * (1 + 1e-12):
                out.append(c)
                best = c.throughput
    return out


def _shard_job(args: tuple[Spec, Catalog, Grid, float, list[VmType], Partitions, float]) -> tuple[list[Context], dict]:
    spec, catalog, grid, s, vms, parts, rho = args
    wl = spec.workload
    wins = window_tables(parts, wl.operations, s)
    max_mem = max(vm.memory_gib for vm in vms) * GIB * (1 - spec.design.memory_headroom)
    lays = grid.layouts(max_mem, s * wl.entry_bytes)
    if lays.size == 0:
        return [], {"presets": {}}
    shape = level_shape(lays, s, wl.key_bytes, wl.value_bytes)
    st = structure(split_memory(shape, lays, np.inf), parts, wl.operations, wl.scan_length, wins[0])
    out: list[Context] = []
    by_mem: dict[float, list[VmType]] = {}
    for vm in vms:
        by_mem.setdefault(vm.memory_gib, []).append(vm)
    bits = np.array(grid.bits)
    data_bytes = s * wl.entry_bytes
    for mem_gib, group in sorted(by_mem.items()):
        mem = mem_gib * GIB * (1 - spec.design.memory_headroom)
        # A buffer past twice the shard's data buys nothing more: it already holds it all.
        fits = (lays.buffer_bytes <= (1 - grid.epsilon) * mem) & (lays.buffer_bytes <= 2 * data_bytes)
        parts_out: list[tuple[np.ndarray, ...]] = []
        batches: list[DesignBatch] = []
        for is_lsh, m_bits in ((False, bits), (True, np.zeros(1))):
            sel = np.flatnonzero(fits & (lays.lsh == is_lsh))
            if sel.size == 0:
                continue
            m = m_bits.size
            batch = lays.take(np.repeat(sel, m))
            batch.bloom_bits = np.tile(m_bits, sel.size)
            lay = split_memory(shape.take(np.repeat(sel, m)), batch, mem)
            io: IOCost
            if spec.cost_model == CostModel.WORST_CASE:
                io = node_io(spec.cost_model, lay, parts, wl)
            else:
                abc = cache_alpha(lay.mem_cache, lay.B, lay.entry_bytes, parts, s, wins[1])
                P = abc.shape[1]
                io = combine(
                    st,
                    sel,
                    lay.fpr.reshape(sel.size, m, -1),
                    lay.hot.reshape(sel.size, m, -1),
                    abc.reshape(sel.size, m, P),
                    parts.p_get,
                )
            parts_out.append(
                (
                    io.total(wl.operations).ravel(),
                    *[v.ravel() for v in io.per_op().values()],
                    lay.cls,
                    lay.feasible & _allowed(lay.cls, spec),
                    lay.space_entries * lay.entry_bytes / GIB,
                    lay.L,
                    lay.Y,
                )
            )
            batches.append(batch)
        if not parts_out:
            continue
        total, *per_op, cls, ok, need, L, Y = (np.concatenate(x) for x in zip(*parts_out, strict=True))
        score = Scorer(spec, IOCost(*per_op), total, cls, rho)
        offsets = np.cumsum([0] + [b.size for b in batches])

        def make(i: int, vcpu: int, batches: list[DesignBatch] = batches, offsets: np.ndarray = offsets) -> Design:
            k = int(np.searchsorted(offsets, i, side="right") - 1)
            return batches[k].design(i - int(offsets[k]), threads=vcpu, name="cosine")

        out += _best_per_vm(spec, catalog, group, s, score, ok, need, make, (L, Y))
    return out, {}


def _preset_job(args: tuple[Spec, Catalog, str, float, list[VmType], Partitions, float]) -> list[Context]:
    spec, catalog, name, s, vms, parts, rho = args
    wl = spec.workload
    d = preset(name)
    wins = window_tables(parts, wl.operations, s)
    out: list[Context] = []
    for vm in vms:
        mem = vm.memory_gib * GIB * (1 - spec.design.memory_headroom)
        lay = derive(DesignBatch.of([d]), s, wl.key_bytes, wl.value_bytes, mem)
        io = node_io(spec.cost_model, lay, parts, wl, wins)
        score = Scorer(spec, io, io.total(wl.operations), lay.cls, rho)
        need = lay.space_entries * lay.entry_bytes / GIB

        def make(i: int, vcpu: int) -> Design:
            return Design(**{**d.as_dict(), "threads": vcpu})

        out += _best_per_vm(spec, catalog, [vm], s, score, lay.feasible, need, make, (lay.L, lay.Y))
    return out


def build_tables(
    spec: Spec,
    catalog: Catalog,
    providers: tuple[str, ...],
    *,
    workers: int | None = None,
    presets: tuple[str, ...] = (),
    max_cluster: int | None = None,
    rho: float = 0.0,
) -> Tables:
    """Best design per context for every provider (and the presets' own tables).

    ``rho`` > 0 scores designs by their robust (KL worst-case) throughput.
    """
    import time

    t0 = time.perf_counter()
    mc = spec.design.max_cluster_size if max_cluster is None else max_cluster
    grid = grid_for(spec)
    parts = workload_partitions(spec.workload)
    vms = [vm for p in providers for vm in catalog.vms.get(p, [])]
    if vms:
        grid.check_size(max(vm.memory_gib for vm in vms) * GIB)
    sizes = shard_sizes(spec.workload.entries, mc)
    jobs = [(spec, catalog, grid, float(s), vms, parts, rho) for s in sizes]
    workers = workers if workers is not None else min(len(jobs), cpu_count())
    results: list[list[Context]] = []
    pjobs = [(spec, catalog, name, float(s), vms, parts, rho) for name in presets for s in sizes]
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            results = [r for r, _ in ex.map(_shard_job, jobs)]
            pres = list(ex.map(_preset_job, pjobs)) if pjobs else []
    else:
        results = [_shard_job(j)[0] for j in jobs]
        pres = [_preset_job(j) for j in pjobs]
    tables = Tables(
        spec_name=spec.name,
        entries=spec.workload.entries,
        grid_size={f"{vm.memory_gib:g} GiB": grid.size(vm.memory_gib * GIB) for vm in vms},
    )
    for ctxs in results:
        for c in ctxs:
            tables.contexts.setdefault(c.provider, []).append(c)
    for (name, *_), ctxs in zip([(p[2],) for p in pjobs], pres, strict=True):
        for c in ctxs:
            tables.presets.setdefault(name, {}).setdefault(c.provider, []).append(c)
    tables.seconds = time.perf_counter() - t0
    return tables
