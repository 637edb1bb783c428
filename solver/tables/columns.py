"""From scores to columns: per VM type and volume the best design (with robustness the front),
then only the columns no other one of the provider and shard beats (:func:`prune_columns`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from cost_models.cloud import StorageChoice, effective_iops
from cost_models.pareto import pareto_mask
from cost_models.pricing.catalog import VmType
from cost_models.robust import is_robust
from solver.tables.context import COSINE, Context
from solver.tables.grid_eval import GridEval
from solver.tables.scoring import CpuScores, ScoreDemands, cpu_scores, design_demands, node_scores, vm_caps
from solver.tables.volumes import menu_table
from specs.schema import Spec
from specs.vocab import DesignClass


@dataclass(frozen=True)
class Column:
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
) -> list[Column]:
    """The columns of one VM type at one shard size: for each volume, the best fitting design
    (or, with robustness, the Pareto front of designs in the two throughputs); :func:`prune_columns`
    then drops the dominated ones. ``dem``: the :func:`design_demands` of ``cand``, shared by the
    VM types of ``ge``, and ``cpu`` their :func:`cpu_scores` (shared by those of its cores). A
    column's Design and Context are made later (``Column.context``), for the columns the pruning
    keeps."""
    if not choices or cand.size == 0:
        return []
    iops, fits = fitting(ge, cand, bucket, thresholds, choices)
    dem = design_demands(spec, ge, cand) if dem is None else dem
    cpu = cpu_scores(dem, vm.vcpu) if cpu is None else cpu
    xe, xp = node_scores(spec, ge, cand, iops, vm.vcpu, dem, cpu)
    xe, xp = vm_caps(spec, vm, entries, xe, xp)
    return picked(spec, vm, entries, choices, ge, cand, fits, xe, xp, name, headroom=cpu[0])


def fitting(
    ge: GridEval, cand: np.ndarray, bucket: np.ndarray, thresholds: np.ndarray, choices: list[StorageChoice]
) -> tuple[np.ndarray, np.ndarray]:
    """(volumes, designs): the I/Os per second each of ``choices`` sustains for the designs
    ``cand`` of ``ge`` (size bucket ``bucket``), and whether it holds the design."""
    blocks = (ge.block if ge.disk_block is None else ge.disk_block)[cand]
    _, gib, vol_iops, vol_mibps = menu_table(choices)
    iops = effective_iops(vol_iops[:, None], vol_mibps[:, None], blocks[None, :])
    cbucket = np.searchsorted(thresholds, np.minimum(gib, thresholds[-1]) * (1 + 1e-12), side="right") - 1
    return iops, bucket[None, :] <= cbucket[:, None]


def picked(
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
) -> list[Column]:
    """The columns of one VM type from its (volumes, designs) scores ``xe``, ``xp`` (:func:`node_scores`)
    and :func:`fitting`'s ``fits``: per volume the best design, or with robustness the front.

    Of designs equally fast on a volume (a device-bound node: every design that moves the same
    blocks per operation runs at the volume's pace) the one with the most ``headroom`` is taken:
    the highest throughput its CPU allows (:func:`cpu_scores`), the one furthest from becoming
    CPU-bound if the model's CPU costs are off. Without ``headroom``, the first."""
    xe = np.where(fits, xe, 0.0)
    xp = np.where(fits, xp, 0.0)
    raw: list[tuple[int, int]] = []
    if is_robust(spec):
        raw = robust_front(vm, choices, xe, xp, headroom)
    else:
        spare = np.zeros(xe.shape[1]) if headroom is None else -np.nan_to_num(headroom, nan=-np.inf)
        for r in range(len(choices)):
            j = int(np.lexsort((spare, -xe[r]))[0])
            if xe[r, j] > 0:
                raw.append((r, j))
    return [Column(vm, entries, choices[r], float(xe[r, j]), float(xp[r, j]), ge, int(cand[j]), name) for r, j in raw]


def robust_front(
    vm: VmType, choices: list[StorageChoice], xe: np.ndarray, xp: np.ndarray, headroom: np.ndarray | None = None
) -> list[tuple[int, int]]:
    """The (volume, design) pairs of one VM type worth a column with robustness: on each
    volume the Pareto front of the designs in (expected, perturbed) throughput (all
    volumes at once: per row, fastest first, a design is kept when its perturbed
    throughput beats every faster one's; of designs equal in both, the one with the most
    ``headroom``, :func:`picked`), then only the pairs no other pair of this VM
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
    cost = vm.usd_per_month + menu_table(choices)[0]
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


#: One VM type running one design: (VM type, its volumes, the design's row of the GridEval,
#: and per volume (a column of one row each) whether it holds the design, and the design's
#: expected and perturbed throughput on it).
OneDesign = tuple[VmType, list[StorageChoice], int, np.ndarray, np.ndarray, np.ndarray]


def one_design_columns(entries: float, ge: GridEval, name: str, per_vm: list[OneDesign]) -> list[Column]:
    """:func:`prune_columns` of the columns :func:`picked` gives VM types that each run one
    design (a preset), computed as arrays: of one design a volume's score is a column when it is
    live (what picked keeps of it, with robustness too: the front of one design), and all of
    them are pruned at once (the per-VM front picked takes with robustness drops only columns
    prune_columns drops anyway). tests/test_tables_pruning.py checks it against picked."""
    cols: list[tuple[VmType, StorageChoice, float, float, int]] = []
    for vm, choices, row, fits, xe_v, xp_v in per_vm:
        xe, xp = np.where(fits, xe_v, 0.0)[:, 0], np.where(fits, xp_v, 0.0)[:, 0]
        live = (xe > 0) & (np.where(xe > 0, -xp, np.inf) < np.inf)  # robust_front's front of one design
        cols += [(vm, choices[r], float(xe[r]), float(xp[r]), row) for r in np.flatnonzero(live)]
    if not cols:
        return []
    table = np.array([(vm.usd_per_month + st.usd_month, -x, -p) for vm, st, x, p, _ in cols])
    keep = _unbeaten([c[0].provider for c in cols], table)
    return [Column(vm, entries, st, x, p, ge, i, name) for vm, st, x, p, i in (cols[j] for j in keep)]
