"""Building the tables: one job per shard size (:func:`shard_job`: Cosine's columns and every
preset's), run in a process pool, read from and added to the table cache (solver.table_cache)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from cost_models import compression, cpu_count, kernels
from cost_models.cloud import GIB, StorageChoice, usable_bytes
from cost_models.distributions import Partitions
from cost_models.evaluate import spec_partitions
from cost_models.io_model import window_tables
from cost_models.phi import PhiTable, shipped_or
from cost_models.pricing.catalog import Catalog, VmType
from cost_models.replication import amplification
from cost_models.robust import perturbed_amplification
from cost_models.windows import WindowTable
from solver.space import Grid, cluster_cap, grid_for, node_counts
from solver.tables.columns import Column, columns_for_vm, prune_columns
from solver.tables.context import COSINE, Context, Tables
from solver.tables.grid_eval import (
    Evaluated,
    GridEval,
    Splits,
    buffer_fits,
    evaluate_splits,
    for_mix,
    grid_splits,
    same_evaluation,
    saturated_split,
    shard_prep,
    shares_io,
    with_codecs,
    workloads,
)
from solver.tables.presets import preset_columns
from solver.tables.scoring import (
    CpuScores,
    ScoreDemands,
    candidates,
    cpu_scores,
    design_demands_reusing,
    take_demands,
    take_scores,
    usable_of_ok,
)
from solver.tables.volumes import shard_volumes, volume_thresholds
from specs.errors import check_range
from specs.io import kept_objects
from specs.schema import Spec
from specs.vocab import CostModel

if TYPE_CHECKING:
    from solver.table_cache import TableCache

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


#: One shard job's input (:func:`shard_job`): the specs whose columns it builds, of one
#: evaluation (:func:`plan_groups`), then the catalog, grid, shard size, VM types, key
#: partitions, presets and the CPU model's table they share.
ShardArgs = tuple[tuple[Spec, ...], Catalog, Grid, float, list[VmType], Partitions, tuple[str, ...], PhiTable]


@dataclass
class _Walk:
    """One spec's way up the memory sizes in :func:`shard_job`: the last split and evaluation it
    used, and the candidates found on that evaluation."""

    last: Splits | None = None
    last_fits: np.ndarray | None = None
    saturated: bool = False
    ge: GridEval | None = None
    raw: GridEval | None = None  # the evaluation ``ge`` was made of (before its mix and codecs)
    ok_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dem_ok: ScoreDemands | None = None
    cands: dict[tuple[bytes, bytes, int], tuple[np.ndarray, np.ndarray, ScoreDemands, CpuScores]] = field(
        default_factory=dict
    )
    # the CPU scores of the evaluation's feasible designs (``ok_rows``) per vCPU count
    cpu_ok: dict[int, CpuScores] = field(default_factory=dict)


def shard_job(args: ShardArgs) -> list[dict[str, list[Context]]]:
    """Every column of ``vms`` at shard size ``s``, per spec: Cosine's (:data:`COSINE`) and each
    preset's. The window tables, the designs' splits and their evaluations are the specs' one
    (they :func:`~solver.tables.grid_eval.shares_io`: only the totals of each spec's mix,
    :func:`~solver.tables.grid_eval.for_mix`, are its own); volumes, scores and columns are each
    spec's. VM types of one memory size share one evaluation of the designs."""
    specs, catalog, grid, s, vms, parts, presets, phi = args
    first = specs[0]
    wins: list[tuple[WindowTable, WindowTable]] = []
    for w in workloads(first):  # the workloads share the gets' table (it does not depend on the mix)
        wins.append(window_tables(parts, w.operations, s, wins[0][1] if wins else None))
    by_mem: dict[float, list[VmType]] = {}
    for vm in vms:
        by_mem.setdefault(vm.memory_gib, []).append(vm)
    max_mem = usable_bytes(max(vm.memory_gib for vm in vms), first.design.memory_headroom)
    prep = shard_prep(first, grid, s, parts, wins, max_mem)
    lays = prep.lays
    outs: list[dict[str, list[Context]]] = []
    vols_of = []
    cols_of: list[list[Column]] = [[] for _ in specs]
    walks = [_Walk() for _ in specs]
    for spec in specs:
        volumes_of: dict[tuple[int, ...], dict[str, list[StorageChoice]]] = {}
        backed: dict[StorageChoice, StorageChoice] = {}  # volumes priced with their backup, shared by the block sets

        def volumes(
            blocks: tuple[int, ...],
            spec: Spec = spec,
            volumes_of: dict[tuple[int, ...], dict[str, list[StorageChoice]]] = volumes_of,
            backed: dict[StorageChoice, StorageChoice] = backed,
        ) -> dict[str, list[StorageChoice]]:
            if blocks not in volumes_of:
                volumes_of[blocks] = shard_volumes(spec, catalog, grid, vms, s, blocks, backed)
            return volumes_of[blocks]

        vols_of.append(volumes)
    # the last memory size's splits and evaluation: the next one evaluates only the designs that
    # evaluate differently on it (grid_eval.evaluate_splits)
    evaluated: Evaluated | None = None
    if lays.size:
        for mem_gib, group in sorted(by_mem.items()):  # ascending memory
            # the specs' one split and evaluation of this memory size (made when a spec first asks)
            split_of: dict[float, Splits] = {}
            eval_of: dict[float, GridEval | None] = {}
            by_vcpu: dict[int, list[VmType]] = {}
            for vm in group:
                by_vcpu.setdefault(vm.vcpu, []).append(vm)
            for spec, volumes, walk, cols in zip(specs, vols_of, walks, cols_of, strict=True):
                vols = volumes(grid.blocks)
                thr = volume_thresholds([vols[vm.key] for vm in group])
                if thr.size == 0:
                    continue
                # the worst-case model reads the split itself
                reuse = REUSE_EQUAL_SPLITS and spec.cost_model != CostModel.WORST_CASE
                fits = buffer_fits(spec, grid, s, mem_gib, lays)
                # a memory size whose splits evaluate every design as the last one did reuses its
                # evaluation, demands and candidates (same_evaluation); past a saturated split
                # (:func:`saturated_split`) with the same designs a larger memory changes nothing
                if not (
                    reuse and walk.saturated and walk.last_fits is not None and np.array_equal(fits, walk.last_fits)
                ):
                    if mem_gib not in split_of:
                        split_of[mem_gib] = grid_splits(spec, grid, s, mem_gib, prep, fits)
                    splits = split_of[mem_gib]
                    if walk.last is None or not reuse or not same_evaluation(walk.last, splits, s):
                        if mem_gib not in eval_of:
                            ev = evaluate_splits(spec, s, parts, splits, prep, phi, evaluated if reuse else None)
                            eval_of[mem_gib] = ev
                            if ev is not None:
                                evaluated = (splits, ev)
                        ev = eval_of[mem_gib]
                        ge = None if ev is None else with_codecs(spec, grid, for_mix(spec, ev))
                        # the demands of the rows this evaluation took from the walk's last one are that one's
                        was = (
                            (walk.ok_rows, walk.dem_ok)
                            if ev is not None and walk.dem_ok is not None and ev.reused_of is walk.raw
                            else None
                        )
                        walk.ge, walk.raw = ge, ev
                        walk.ok_rows = np.zeros(0, dtype=np.int64) if ge is None else np.flatnonzero(ge.ok)
                        walk.dem_ok = None if ge is None else design_demands_reusing(spec, ge, walk.ok_rows, was)
                        walk.cands, walk.cpu_ok = {}, {}
                    walk.last, walk.last_fits, walk.saturated = splits, fits, saturated_split(splits, s)
                ge, dem_ok, cands = walk.ge, walk.dem_ok, walk.cands
                if ge is None or dem_ok is None:
                    continue
                at_ok, bucket_rows = usable_of_ok(ge, thr, walk.ok_rows)
                rows = walk.ok_rows[at_ok]
                dem_all = take_demands(dem_ok, at_ok)
                for vcpu, same in sorted(by_vcpu.items()):
                    # the candidates see the thresholds only through the usable designs' size buckets
                    key = (rows.tobytes(), bucket_rows.tobytes(), vcpu)
                    if key not in cands:
                        # each feasible design's CPU score once per evaluation and core count
                        if vcpu not in walk.cpu_ok:
                            walk.cpu_ok[vcpu] = cpu_scores(dem_ok, vcpu)
                        cpu_all = take_scores(walk.cpu_ok[vcpu], at_ok)
                        cand, bucket = candidates(spec, ge, thr, vcpu, dem_all, cpu_all, (rows, bucket_rows))
                        at = np.searchsorted(rows, cand)
                        cands[key] = (cand, bucket, take_demands(dem_all, at), take_scores(cpu_all, at))
                    cand, bucket, dem, cpu = cands[key]
                    for vm in same:
                        cols += columns_for_vm(spec, vm, s, vols[vm.key], ge, cand, bucket, thr, dem=dem, cpu=cpu)
    for spec, volumes, cols in zip(specs, vols_of, cols_of, strict=True):
        out = {COSINE: [c.context() for c in prune_columns(cols)]}
        out.update(preset_columns(spec, presets, s, by_mem, volumes, parts, wins, phi))
        outs.append(out)
    return outs


def same_partitions(a: Partitions, b: Partitions) -> bool:
    """Whether two key partitionings are equal, array by array."""
    return (
        all(
            np.array_equal(x, y, equal_nan=True)
            for x, y in (
                (a.frac, b.frac),
                (a.p_get, b.p_get),
                (a.p_put, b.p_put),
                (a.recency, b.recency),
                (a.put.frac, b.put.frac),
                (a.put.prob, b.put.prob),
            )
        )
        and a.put.recency == b.put.recency
    )


def in_workload_operations(spec: Spec) -> Callable[[Context], Context]:
    """A column as the MIP reads it: its throughputs in operations of the workload, a replicated
    node's node operations per second over A (cost_models.replication; the perturbed workload's
    own A). The cache keeps the node's own figures."""
    a, a_p = amplification(spec), perturbed_amplification(spec)
    if a == 1.0 and a_p == 1.0:
        return lambda c: c

    def per_op(c: Context) -> Context:
        # a copy of the fields, the two throughputs replaced: 3.6x copy.copy's speed (0.44 against
        # 1.57 us a column; ~50,000 columns a solve), ~10x dataclasses.replace's
        out = object.__new__(Context)
        fields = out.__dict__
        fields.update(c.__dict__)
        fields["throughput"], fields["perturbed"] = c.throughput / a, c.perturbed / a_p
        return out

    return per_op


def _prime(catalog: Catalog, vms: list[VmType]) -> None:
    """Load before the pool forks what each worker's first shard job would load for itself: numba and
    the compiled kernels (cost_models.kernels) and the codec table (cost_models.compression), which
    the exact re-evaluation later needs in this process too, and the catalog's storage limit of
    every (VM type, product) (each job gets a copy of the catalog, with the limits found). The phi
    table is loaded by the caller."""
    compression.table()
    kernels.load()  # numba and the compiled evaluator's code, once for every worker
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
    phi: PhiTable | None = None,
) -> Tables:
    """Best designs per context for every provider (and the presets' own tables).

    With robustness (spec.noise, spec.kl_radius) every column carries the
    perturbed-workload throughput too. ``max_cluster`` defaults to
    :func:`solver.space.cluster_cap`. With a ``cache`` (solver.table_cache) the
    shard sizes it holds for a provider are read back and only the others are
    computed (then added to it). ``phi``: the CPU model's table (None: the shipped one, which
    the cache's code version covers; another table is never cached, nor read from the cache).
    """
    return build_many(
        [(spec, providers)],
        catalog,
        workers=workers,
        presets=presets,
        max_cluster=max_cluster,
        cache=cache,
        phi=phi,
    )[0]


@dataclass
class _Plan:
    """One spec of :func:`build_many`: its shard counts, what the cache holds and what is to compute."""

    spec: Spec
    provs: list[str]
    vms: list[VmType]
    grid: Grid
    mc: int
    counts: list[int]
    found: dict[str, dict[tuple[str, int], list[Context]]]
    todo: dict[int, list[str]]
    parts: Partitions | None


def _plan(
    spec: Spec,
    catalog: Catalog,
    providers: tuple[str, ...],
    kinds: tuple[str, ...],
    max_cluster: int | None,
    cache: TableCache | None,
) -> _Plan:
    mc = cluster_cap(spec, catalog, providers) if max_cluster is None else max_cluster
    grid = grid_for(spec)
    vms = [vm for p in providers for vm in catalog.vms.get(p, [])]
    if vms:
        grid.check_size(max(vm.memory_gib for vm in vms) * GIB)
    # a replicated cluster is replica groups of RF nodes (a node holds one copy of a key at most):
    # its shard counts are the ladder's group counts, up to the most groups the cap holds
    counts = node_counts(spec, mc)
    provs = sorted(set(providers))
    found = {p: cache.load(spec, catalog, p, kinds) if cache is not None else {} for p in provs}
    # a shard size is computed (every kind) for the providers the cache lacks any kind of
    todo = {
        k: [p for p in provs if catalog.vms.get(p) and any((kind, k) not in found[p] for kind in kinds)] for k in counts
    }
    todo = {k: ps for k, ps in todo.items() if ps}
    parts = spec_partitions(spec) if todo else None
    return _Plan(spec, provs, vms, grid, mc, counts, found, todo, parts)


def plan_groups(plans: list[_Plan], catalog: Catalog) -> list[tuple[float, list[VmType], list[tuple[int, int]]]]:
    """The shard jobs of ``plans``: (shard size, VM types, the (plan, shard count) pairs it builds).
    Pairs share a job only where their evaluation is provably one: the same shard size, VM
    types, grid and key partitions, and specs that :func:`~solver.tables.grid_eval.shares_io`;
    a plan's shard counts are in separate jobs."""
    groups: list[tuple[float, list[VmType], list[tuple[int, int]]]] = []
    for i, pl in enumerate(plans):
        for k, ps in pl.todo.items():
            s = pl.spec.workload.entries / k
            vms = [vm for p in ps for vm in catalog.vms.get(p, [])]
            for gs, gvms, members in groups:
                j, _ = members[0]
                other = plans[j]
                if (
                    gs == s
                    and all(m != i for m, _ in members)
                    and [vm.key for vm in gvms] == [vm.key for vm in vms]
                    and other.grid == pl.grid
                    and other.parts is not None
                    and pl.parts is not None
                    and same_partitions(other.parts, pl.parts)
                    and shares_io(other.spec, pl.spec)
                ):
                    members.append((i, k))
                    break
            else:
                groups.append((s, vms, [(i, k)]))
    return groups


def build_many(
    items: list[tuple[Spec, tuple[str, ...]]],
    catalog: Catalog,
    *,
    workers: int | None = None,
    presets: tuple[str, ...] = (),
    max_cluster: int | None = None,
    cache: TableCache | None = None,
    phi: PhiTable | None = None,
) -> list[Tables]:
    """:func:`build_tables` of each (spec, providers) of ``items`` (the replication plans' node
    views, solver.replicas), in one pool: a shard size the specs evaluate alike is one job
    (:func:`plan_groups`, :func:`shard_job`). Each spec's tables, and its part of the cache, are
    those :func:`build_tables` gives it alone."""
    table = shipped_or(phi)
    if phi is not None:
        cache = None
    t0 = time.perf_counter()
    kinds = (COSINE, *presets)
    plans = [_plan(spec, catalog, providers, kinds, max_cluster, cache) for spec, providers in items]
    groups = plan_groups(plans, catalog)
    jobs: list[ShardArgs] = []
    for s, vms, members in groups:
        pl = plans[members[0][0]]
        assert pl.parts is not None  # a plan with shard sizes to compute has its partitions
        jobs.append((tuple(plans[i].spec for i, _ in members), catalog, pl.grid, s, vms, pl.parts, presets, table))
    workers = workers if workers is not None else min(len(jobs), cpu_count())
    if jobs:
        _prime(catalog, [vm for job in jobs for vm in job[4]])
    if workers > 1 and len(jobs) > 1:
        # the dearest jobs first (a job's time grows with its shard size and its specs), so that
        # no worker is left with a large one while the others have finished
        order = sorted(range(len(jobs)), key=lambda j: (len(jobs[j][0]), jobs[j][3]), reverse=True)
        with ProcessPoolExecutor(max_workers=workers) as ex:
            done = list(ex.map(shard_job, [jobs[j] for j in order]))
        results = [r for _, r in sorted(zip(order, done, strict=True), key=lambda t: t[0])]
    else:
        results = [shard_job(j) for j in jobs]
    computed: list[dict[str, dict[tuple[str, int], list[Context]]]] = [{p: {} for p in pl.provs} for pl in plans]
    for (_, _, members), per_spec in zip(groups, results, strict=True):
        for (i, k), by_kind in zip(members, per_spec, strict=True):
            # every kind of the size is computed for these providers, with columns or none (the
            # cache keeps a size without any: no VM type holds it, and it is the dearest to compute)
            for p in plans[i].todo[k]:
                for kind in kinds:
                    computed[i][p].setdefault((kind, k), [])
            for kind, ctxs in by_kind.items():
                for c in ctxs:
                    computed[i][c.provider].setdefault((kind, k), []).append(c)
    out = []
    for pl, comp in zip(plans, computed, strict=True):
        spec = pl.spec
        shards = {p: {**pl.found[p], **comp[p]} for p in pl.provs}
        if cache is not None:
            cache.hits += sum(len(f) for f in pl.found.values())
            cache.misses += sum(len(ps) for ps in pl.todo.values())
            for p in pl.provs:
                if comp[p]:
                    cache.save(spec, catalog, p, shards[p])
        tables = Tables(
            spec_name=spec.name,
            entries=spec.workload.entries,
            grid_size={f"{vm.memory_gib:g} GiB": pl.grid.size(vm.memory_gib * GIB) for vm in pl.vms},
            max_cluster=pl.mc,
        )
        per_op = in_workload_operations(spec)
        with kept_objects():
            for k in pl.counts:
                for p in pl.provs:
                    for c in shards[p].get((COSINE, k), []):
                        tables.contexts.setdefault(p, []).append(per_op(c))
            for name in presets:
                for k in pl.counts:
                    for p in pl.provs:
                        for c in shards[p].get((name, k), []):
                            tables.presets.setdefault(name, {}).setdefault(p, []).append(per_op(c))
        out.append(tables)
    # the plans' build is one (shared jobs, one pool): each plan's share of its time
    share = (time.perf_counter() - t0) / max(len(out), 1)
    for tables in out:
        tables.seconds = share
    return out
