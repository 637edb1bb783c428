"""The presets' columns: each preset's one design on every VM type and volume of a shard."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cost_models.cloud import GIB, StorageChoice, usable_bytes
from cost_models.cpu import NodeShape
from cost_models.design import DesignBatch, preset
from cost_models.distributions import Partitions
from cost_models.evaluate import node_io, shape_overwrites, tree_puts
from cost_models.io_model import structure
from cost_models.layout import level_shape, split_memory
from cost_models.phi import PhiTable
from cost_models.pricing.catalog import VmType
from cost_models.windows import WindowTable
from solver.tables.columns import fitting, one_design_columns
from solver.tables.context import Context
from solver.tables.grid_eval import GridEval, workloads
from solver.tables.scoring import cpu_scores, design_demands, node_scores, take_demands, take_scores, vm_caps
from solver.tables.volumes import menu_thresholds
from specs.schema import Spec


def preset_columns(
    spec: Spec,
    names: tuple[str, ...],
    s: float,
    by_mem: dict[float, list[VmType]],
    volumes: Callable[[tuple[int, ...]], dict[str, list[StorageChoice]]],
    parts: Partitions,
    wins: list[tuple[WindowTable, WindowTable]],
    phi: PhiTable,
) -> dict[str, list[Context]]:
    """The columns of each preset of ``names`` at shard size ``s`` (its one design on every VM
    type). The presets' designs are evaluated on every memory size at once (one row per preset
    and memory size: the evaluation is elementwise over the rows), and every (VM type, volume)
    pair of one vCPU count, of every preset, is scored at once."""
    if not names:
        return {}
    wl = spec.workload
    ds = [preset(name) for name in names]
    wls = workloads(spec)
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
        need_gib=lay.disk_entries * lay.entry_bytes / GIB,
        block=np.repeat([float(d.block_bytes) for d in ds], m),
        L=lay.L,
        Y=lay.Y,
        batches=[batch],
        offsets=np.array([0]),
        phi=phi,
    )
    rows = np.flatnonzero(lay.feasible)
    dem_all = design_demands(spec, ge, rows)
    # (preset, VM type, its row's position in ``rows``, its volumes' I/Os per second and fit)
    segs: list[tuple[int, VmType, int, np.ndarray, np.ndarray]] = []
    for pos, i in enumerate(rows):
        one = np.array([i])
        vols = volumes((ds[i // m].block_bytes,))
        for vm in by_mem[mems[i % m]]:
            thr = menu_thresholds(vols[vm.key])
            if thr.size == 0:
                continue
            bucket = np.searchsorted(thr * (1 + 1e-9), ge.need_gib[one], side="left")
            if bucket[0] >= thr.size:
                continue
            segs.append((int(i // m), vm, pos, *fitting(ge, one, bucket, thr, vols[vm.key])))
    # every (VM type, volume) pair of one vCPU count scored at once, one design per pair (a
    # row of I/Os per second, a column per pair: node_scores is elementwise over them)
    scores: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for vcpu in sorted({seg[1].vcpu for seg in segs}):
        mine = [k for k, seg in enumerate(segs) if seg[1].vcpu == vcpu]
        pos_of = np.concatenate([np.full(segs[k][3].shape[0], segs[k][2]) for k in mine])
        iops = np.concatenate([segs[k][3][:, 0] for k in mine])[None, :]
        cpu = take_scores(cpu_scores(dem_all, vcpu), pos_of)  # each row once, then each (VM type, volume) pair's
        xe, xp = node_scores(spec, ge, rows[pos_of], iops, vcpu, take_demands(dem_all, pos_of), cpu)
        ends = np.cumsum([segs[k][3].shape[0] for k in mine])
        for k, a, b in zip(mine, np.concatenate([[0], ends[:-1]]), ends, strict=True):
            scores[k] = (xe[0, a:b][:, None], xp[0, a:b][:, None])
    out: dict[str, list[Context]] = {}
    for j, name in enumerate(names):
        vols = volumes((ds[j].block_bytes,))
        per_vm = [
            (vm, vols[vm.key], int(rows[pos]), fits, *vm_caps(spec, vm, s, *scores[k]))
            for k, (p, vm, pos, _, fits) in enumerate(segs)
            if p == j
        ]
        out[name] = [c.context() for c in one_design_columns(s, ge, name, per_vm)]
    return out
