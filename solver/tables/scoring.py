"""A node's throughput from a :class:`~solver.tables.grid_eval.GridEval`: the designs' CPU demands
(shared by every VM type and volume), their CPU scores (shared by VM types of one vCPU count), and
the exact pruning to the designs worth scoring per volume (:func:`candidates`)."""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from cost_models.cpu import (
    Demands,
    cpu_throughput,
    device_capped,
    shape_terms,
    throughput,
)
from cost_models.pareto import pareto_mask_grouped
from cost_models.pricing.catalog import VmType
from cost_models.robust import is_robust, per_op_costs, perturbed_demands, perturbed_throughput, perturbed_workload
from cost_models.serving import node_caps, served_demands, spec_served
from solver.space import fanout_nodes
from solver.tables.grid_eval import GridEval, scatter_rows
from specs.schema import Spec
from specs.vocab import OPERATIONS

#: Demands (cost_models.cpu.Demands) of some designs under the expected workload and, with
#: robustness, the perturbed one (None: no robustness, or a KL radius, priced per volume).
ScoreDemands = tuple[Demands, Demands | None]


def design_demands(spec: Spec, ge: GridEval, idx: np.ndarray) -> ScoreDemands:
    """The demands of the designs ``idx`` of ``ge``, served (cost_models.serving.served_demands: the
    server's CPU per request, the scans' fan-out to the cluster's shards, at the most nodes the
    column is credited for: solver.space.fanout_nodes): they do not depend on
    the VM type or the volume, so every (VM type, volume) of one evaluation shares them
    (:func:`node_scores`)."""
    wl = spec.workload
    shape = ge.shape.take(idx)
    extra = 0.0 if ge.codec_cpu is None else ge.codec_cpu[idx]
    terms = shape_terms(ge.phi, shape, wl.scan_length)
    k = fanout_nodes(spec, ge.shape.n_keys)
    sm = spec_served(spec, wl, k)
    de = served_demands(ge.phi, ge.io.take(idx), shape, sm, wl.scan_length, extra_cpu=extra, terms=terms)
    if not is_robust(spec):
        return de, None
    io_p = ge.io_p if ge.io_p is not None else ge.io
    extra_p = 0.0 if ge.codec_cpu_p is None else ge.codec_cpu_p[idx]
    # the noisy mix's demands share the designs' terms when it scans as far
    pw = perturbed_workload(spec)
    same = pw.scan_length == wl.scan_length
    if spec.kl_radius:
        # the KL bound prices the operations one by one on the engine (not served: docs/model.md)
        return de, perturbed_demands(ge.phi, io_p.take(idx), shape, spec, extra_p, terms if same else None)
    smp = spec_served(spec, pw, k)
    dp = served_demands(
        ge.phi, io_p.take(idx), shape, smp, pw.scan_length, extra_cpu=extra_p, terms=terms if same else None
    )
    return de, dp


def design_demands_reusing(
    spec: Spec, ge: GridEval, idx: np.ndarray, prev: tuple[np.ndarray, ScoreDemands] | None
) -> ScoreDemands:
    """:func:`design_demands` of the designs ``idx`` of ``ge``, those ``ge`` took from a smaller memory
    size's evaluation (``ge.reused_from``) taken from ``prev``: that evaluation's designs and their
    demands (a design's demands are a function of its row: its I/O, shape and codec CPU)."""
    if prev is None or ge.reused_from is None or prev[0].size == 0:
        return design_demands(spec, ge, idx)
    prev_idx, prev_dem = prev
    src = ge.reused_from[idx]
    pos = np.minimum(np.searchsorted(prev_idx, src), prev_idx.size - 1)
    hit = (src >= 0) & (prev_idx[pos] == src)
    if not hit.any():
        return design_demands(spec, ge, idx)
    fresh = np.flatnonzero(~hit)
    new = design_demands(spec, ge, idx[fresh]) if fresh.size else None
    old = np.flatnonzero(hit)
    merged = [
        _scatter_demands(idx.size, fresh, None if new is None else new[j], old, prev_dem[j], pos[hit]) for j in (0, 1)
    ]
    de = merged[0]
    if de is None or (merged[1] is None) != (prev_dem[1] is None):
        return design_demands(spec, ge, idx)  # (fields present on one side only: not one computation)
    return de, merged[1]


def _scatter_demands(
    n: int, fresh_at: np.ndarray, fresh: Demands | None, old_at: np.ndarray, old: Demands | None, old_rows: np.ndarray
) -> Demands | None:
    """The demands of ``n`` designs: positions ``fresh_at`` from ``fresh``, ``old_at`` from ``old``'s
    rows ``old_rows`` (per-level arrays padded to the deeper tree, as the I/O's cascades are); None
    when ``old`` is None or a field is present on one side only."""
    if old is None:
        return None
    out: dict[str, np.ndarray | None] = {}
    for f in fields(Demands):
        o = getattr(old, f.name)
        fv = None if fresh is None else getattr(fresh, f.name)
        if o is None or (fresh is not None and fv is None):
            if o is None and fv is None:
                out[f.name] = None
                continue
            return None
        out[f.name] = scatter_rows(n, fresh_at, None if fv is None else np.asarray(fv), old_at, np.asarray(o), old_rows)
    return Demands(**out)  # type: ignore[arg-type]


def vm_caps(spec: Spec, vm: VmType, entries: float, xe: np.ndarray, xp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Node throughputs ``xe`` (expected) and ``xp`` (perturbed) of nodes holding ``entries`` keys on
    ``vm``, capped by its network and the spec's latency bounds (cost_models.serving.node_caps)."""
    k = fanout_nodes(spec, entries)

    def cap(x: np.ndarray, wl: object) -> np.ndarray:
        sm = spec_served(spec, wl, k)
        return node_caps(
            x, sm, vm.vcpu, spec.pipeline, vm, spec.max_latency_s, spec.max_latency_p50_s, spec.network_duty_cycle
        ).apply(x)

    ce = cap(xe, spec.workload)
    if not is_robust(spec):
        return ce, ce
    return ce, cap(xp, perturbed_workload(spec))


#: The :func:`cost_models.cpu.cpu_throughput` of some designs' :data:`ScoreDemands` on a VM's
#: cores (expected, and perturbed when its demands are known): what their throughput is on any
#: volume before the volume's caps.
CpuScores = tuple[np.ndarray, np.ndarray | None]


def cpu_scores(dem: ScoreDemands, vcpu: int) -> CpuScores:
    """The :data:`CpuScores` of designs of demands ``dem`` on ``vcpu`` cores: every VM type of
    that many cores shares them, whatever its volumes (cost_models.cpu.cpu_throughput is
    elementwise over the designs, so positions of them may be taken: :func:`take_scores`)."""
    de, dp = dem
    return cpu_throughput(de, vcpu), None if dp is None else cpu_throughput(dp, vcpu)


def take_scores(cpu: CpuScores, pos: np.ndarray) -> CpuScores:
    """The :func:`cpu_scores` of the designs at positions ``pos`` of ``cpu``'s."""
    xe, xp = cpu
    return xe[pos], None if xp is None else xp[pos]


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
    xp = perturbed_throughput(ge.phi, io_p.take(rep), ge.shape.take(rep), flat, vcpu, spec, extra_p)
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
    their size bucket (the smallest such size); :func:`usable_of_ok` when the caller has the
    feasible rows."""
    bucket = np.searchsorted(thresholds * (1 + 1e-9), ge.need_gib, side="left")
    idx = np.flatnonzero(ge.ok & (bucket < thresholds.size))
    return idx, bucket[idx]


def usable_of_ok(ge: GridEval, thresholds: np.ndarray, ok_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`usable`'s designs as positions in ``ok_rows`` (``np.flatnonzero(ge.ok)``), and their
    size bucket."""
    bucket = np.searchsorted(thresholds * (1 + 1e-9), ge.need_gib[ok_rows], side="left")
    at = np.flatnonzero(bucket < thresholds.size)
    return at, bucket[at]


def candidates(
    spec: Spec,
    ge: GridEval,
    thresholds: np.ndarray,
    vcpu: int,
    dem: ScoreDemands | None = None,
    cpu: CpuScores | None = None,
    rows: tuple[np.ndarray, np.ndarray] | None = None,
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
    ``dem``: the :func:`design_demands` of the :func:`usable` designs, when the caller shares them,
    and ``cpu`` their :func:`cpu_scores` on ``vcpu`` cores (then ``dem`` too): on a volume without
    limits a design's throughput is its CPU score (cost_models.cpu.device_capped caps nothing).
    ``rows``: the :func:`usable` designs and their buckets, when the caller has them."""
    idx, bucket_idx = usable(ge, thresholds) if rows is None else rows
    if idx.size == 0:
        return idx, bucket_idx
    if cpu is not None and dem is not None and (not is_robust(spec) or (dem[1] is not None and cpu[1] is not None)):
        xe = cpu[0][None, :]
        xp = xe if cpu[1] is None else cpu[1][None, :]
    else:
        unlimited = np.full((1, idx.size), np.inf)
        xe, xp = node_scores(spec, ge, idx, unlimited, vcpu, dem)
    cols = [bucket_idx.astype(float), -xe[0], ge.total[idx]]
    if is_robust(spec):
        base = ge.io_p if ge.io_p is not None else ge.io
        if spec.kl_radius:
            pw = perturbed_workload(spec)
            sub = base.take(idx)
            cols += list(per_op_costs(ge.phi, sub, ge.shape.take(idx), np.inf, vcpu, pw.scan_length).T)
            cols += [getattr(sub, op) for op in OPERATIONS]
        else:
            cols += [-xp[0], (ge.total_p if ge.total_p is not None else ge.total)[idx]]
    table = np.stack(cols, axis=1)
    moved = ge.block if ge.disk_block is None else ge.disk_block
    # one front per (block size, bytes an I/O moves)
    bs, ms = ge.block[idx], moved[idx]
    ub, um = np.unique(bs), np.unique(ms)
    groups = np.searchsorted(ub, bs) * um.size + np.searchsorted(um, ms)
    pos = np.flatnonzero(pareto_mask_grouped(table, groups))
    return idx[pos], bucket_idx[pos]
