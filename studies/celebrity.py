"""The technical report's Sec. 3 example ("celebrity tweets"), end to end.

The report (seeds/001, Sec. 3) runs its search once with the worst-case model
and once with the distribution-aware model on one 16 GB AWS VM for a skewed,
read-heavy workload (``specs/celebrity.yaml``), and states each design's I/O
under both models: 33e9 (distribution-aware) / 40e9 (worst case) for the
worst-case model's pick, 19e9 / 54e9 for the distribution-aware model's.

Here each model ranks the same designs (the search's design grid on that VM,
:meth:`solver.space.Grid.node_designs`) by I/O per operation (the report's
criterion) and picks its best; both picks — and the report's own two designs,
mapped onto this model's knobs — are evaluated under both models and run on
the Rust engine at a scaled size (records, buffer and block cache scaled
together, every ratio of the design kept), whose block counters say which
design really costs fewer I/Os.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cost_models import REPO_ROOT
from cost_models.cloud import usable_bytes
from cost_models.design import Design, DesignBatch, allowed_classes
from cost_models.engine_model import predict, workload_layout
from cost_models.evaluate import evaluate_designs, own_puts, workload_partitions
from cost_models.io_model import overwrites_keys
from cost_models.layout import level_shape
from cost_models.pricing.catalog import VmType, load_catalog
from cost_models.worst_case import io_costs as worst_case_io
from measure.engine import run_scratch, workload_json
from measure.validate import measured
from render.config import engine_sections, local_entry, to_toml
from solver.space import grid_for
from specs.io import to_record
from specs.schema import Spec, load_spec
from specs.vocab import COST_MODELS, OPERATIONS, CostModel, Provider, WalSync

SPEC = REPO_ROOT / "specs" / "celebrity.yaml"
#: The report's machine: "a single 16 GB VM ... using AWS" (r5d.large, 16 GiB; the spec's headroom leaves 16.0e9 B).
VM = (Provider.AWS, "r5d.large")


@dataclass(frozen=True)
class ReportDesign:
    """A design as the report states it (seeds/001 Sec. 3): knobs, memory, and its I/O under each model."""

    label: str
    T: int
    K: int
    Z: int
    buffer_bytes: float  # M_B
    index_bytes: float  # M_F = M_BF + M_FP: filters and fence pointers
    report_io: dict[CostModel, float]


#: The report's two designs and figures (seeds/001 Sec. 3).
REPORT_DESIGNS = (
    ReportDesign(
        "report's worst-case pick",
        8,
        7,
        1,
        3.2e9,
        12.8e9,
        {CostModel.DISTRIBUTION_AWARE: 33e9, CostModel.WORST_CASE: 40e9},
    ),
    ReportDesign(
        "report's distribution-aware pick",
        32,
        13,
        1,
        12.8e9,
        3.2e9,
        {CostModel.DISTRIBUTION_AWARE: 19e9, CostModel.WORST_CASE: 54e9},
    ),
)


def node_memory(spec: Spec, vm: VmType) -> float:
    """Bytes of the VM the design may use (the spec's headroom taken off)."""
    return float(usable_bytes(vm.memory_gib, spec.design.memory_headroom))


#: Share of the filter memory left unused so rounding never pushes a level out of memory.
_FIT_MARGIN = 1e-6


def report_design(spec: Spec, rd: ReportDesign, memory_bytes: float) -> Design:
    """The report's design in this model's knobs, its block size the spec's.

    The report splits the VM's memory into M_B and M_F = M_BF + M_FP; here the
    fence pointers are what the layout says they are (sized for full levels:
    0.34-0.38 GB instead of the report's 0.29), and the filters get the rest
    of M_F, spread over the entries the layout sizes filters for with Monkey's
    allocation (as the design continuum assumes)."""
    wl = spec.workload
    d = Design(T=rd.T, K=rd.K, Z=rd.Z, buffer_bytes=rd.buffer_bytes, block_bytes=spec.design.block_bytes[0])
    puts = own_puts(workload_partitions(wl), wl, wl.entries)
    sh = level_shape(
        DesignBatch.of([d]),
        wl.entries,
        wl.key_bytes,
        wl.value_bytes,
        overwrites=overwrites_keys(wl.operations),
        puts=puts,
    )
    sized = float(np.where(sh.exists, sh.sized, 0.0).sum())
    index = min(rd.index_bytes, memory_bytes - rd.buffer_bytes) * (1 - _FIT_MARGIN)
    filters = index - float(np.where(sh.exists, sh.fence, 0.0).sum())
    return replace(d, bloom_bits=filters * 8 / sized, name=rd.label).validate()


def pick(spec: Spec, vm: VmType, model: CostModel) -> Design:
    """The design of the grid with the fewest I/Os per operation under ``model`` on one ``vm``."""
    wl = spec.workload
    mem = node_memory(spec, vm)
    batch = grid_for(spec).node_designs(mem, wl.data_bytes)
    ne = evaluate_designs(batch, wl, wl.entries, mem, workload_partitions(wl), model=model)
    allowed = allowed_classes(ne.layout.cls, spec.design.classes)
    io = np.where(ne.layout.feasible & allowed, ne.io_total, np.inf)
    i = int(np.argmin(io))
    return batch.design(i, threads=1, name=f"{model} pick")


@dataclass
class Row:
    """One design: what each model predicts, and what the engine measures."""

    label: str
    design: dict[str, Any]
    model_io: dict[CostModel, float]  # I/Os per month (per op x the spec's operations per month)
    model_io_per_op: dict[CostModel, dict[str, float]]
    engine_io: float  # measured blocks per op x operations per month
    engine_io_per_op: dict[str, float]
    engine_model_io: dict[CostModel, float]  # each model handed the engine's configuration and state
    report_io: dict[CostModel, float] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)


def _mix_total(per_op: dict[str, float], mix: dict[str, float]) -> float:
    return sum(mix.get(op, 0.0) * per_op.get(op, 0.0) for op in OPERATIONS)


def evaluate(
    spec: Spec, vm: VmType, design: Design, records: int, operations: int, tag: str, report_io: dict | None = None
) -> Row:
    """``design`` under both models at the spec's size, and on the engine at ``records``."""
    wl = spec.workload
    mem = node_memory(spec, vm)
    opm = float(wl.operations_per_month or 0.0)
    parts = workload_partitions(wl)
    model_io, model_ops = {}, {}
    for m in COST_MODELS:
        ne = evaluate_designs(DesignBatch.of([design]), wl, wl.entries, mem, parts, model=m)
        model_ops[m] = {op: float(v[0]) for op, v in ne.io.per_op().items()}
        model_io[m] = float(ne.io_total[0]) * opm
    lay = ne.layout
    entry = local_entry(design, lay, 0, threads=1)
    scale = records / wl.entries
    secs = engine_sections(entry, wl.key_bytes, wl.value_bytes, wl.operations, tag, wal_sync=WalSync.NONE, scale=scale)
    wjson = workload_json(spec, records, operations, 1)
    rep = run_scratch(to_toml(secs), wjson, f"celebrity-{tag}")
    meas = measured(rep)
    da = predict(secs, wjson, shape=rep["load"]["shape"], end_shape=rep.get("stats"))
    small = workload_partitions(replace(wl, entries=records))
    wc = worst_case_io(workload_layout(secs, wjson, records), small, wl.operations, wl.scan_length)
    engine_model = {
        CostModel.DISTRIBUTION_AWARE: float(da.total(wl.operations)[0]) * opm,
        CostModel.WORST_CASE: float(wc.total(wl.operations)[0]) * opm,
    }
    return Row(
        label=design.name,
        design={
            **to_record(entry),
            "bloom_bits_per_key": design.bloom_bits,
            "bloom_allocation": design.bloom_allocation,
        },
        model_io=model_io,
        model_io_per_op=model_ops,
        engine_io=_mix_total(meas, wl.operations) * opm,
        engine_io_per_op=meas,
        engine_model_io=engine_model,
        report_io=report_io or {},
        engine={"records": records, "operations": operations, "scale": scale, "layout": secs["layout"]},
    )


#: Records and operations of the engine runs: 10^6 records keep the report's
#: hot set at one key (hot_fraction 1e-6) and its ratios to the buffer exact.
DEFAULT_RECORDS = 1_000_000
DEFAULT_OPERATIONS = 400_000


def run(
    records: int = DEFAULT_RECORDS,
    operations: int = DEFAULT_OPERATIONS,
    *,
    with_report_designs: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[Row]:
    """Each model's pick (and the report's designs), evaluated under both models and on the engine."""
    spec = load_spec(SPEC)
    vm = load_catalog(spec.pricing).vm(*VM)
    designs: list[tuple[Design, dict | None]] = [(pick(spec, vm, m), None) for m in COST_MODELS]
    if with_report_designs:
        designs += [(report_design(spec, rd, node_memory(spec, vm)), rd.report_io) for rd in REPORT_DESIGNS]
    rows = []
    for i, (d, rio) in enumerate(designs):
        if progress:
            progress(i, len(designs), d.name)
        rows.append(evaluate(spec, vm, d, records, operations, f"d{i}", rio))
    if progress:
        progress(len(designs), len(designs), "done")
    return rows
