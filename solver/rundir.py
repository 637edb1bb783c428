"""The run directory `cosine solve` writes, and the sweep file: the contract
other commands (audit, whatif, render, plot) and other tools read.

``RUN_DIR/``
  ``solution.json``     the answer at the spec's budget: one :class:`Solution` (``version`` =
                        :data:`SOLUTION_VERSION`; its JSON Schema is docs/solution.schema.json)
  ``frontier.parquet``  one :class:`FrontierRow` per band x provider
  ``baselines.parquet`` one :class:`BaselineRow` per preset x band x provider
  ``solver.log.jsonl``  one :class:`LogRecord` per band x provider
  ``solver/``           each band's raw solver log

Every file carries a format version (solution.json and every log record a
``version`` field, the parquet files their row type and version in the schema
metadata, :mod:`specs.io`). solution.json and the log records are dataclasses written and read
only through :mod:`specs.io` (``write_record``, ``from_record``). Every reader validates what it reads (version,
schema, the range of every number, names against the vocabulary and the
catalog) and :func:`load_run` cross-checks the files against each other, so a
file edited by hand or copied from another solve is refused with one
:class:`~specs.errors.InputError` naming it, before anything uses it. solution.json is sealed:
its ``sha256`` is the SHA-256 of the rest's canonical JSON (solver.sealed_json.payload_digest),
checked on every read (:func:`read_solution`), so no value in it (the spec it answers, a VM count,
a design's knob) can be changed unnoticed, whether it is read in its run directory or alone (a
render workspace's copy, `cosine render FILE`); the frontier is sealed by its rows' hash.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from cost_models.design import DESIGN_KNOBS, DesignEntry
from cost_models.envelope import EnvelopeCheck, NodeEnvelope
from solver.sealed_json import check_digest, payload_digest
from specs.errors import InputError
from specs.io import (
    clean,
    finite,
    from_record,
    kept_objects,
    loads_json,
    omit_none,
    read_json,
    read_rows,
    require,
    to_json,
    to_record,
    write_rows,
    write_text,
)
from specs.limits import MAX_CLUSTER_SIZE, MAX_REPLICATION_FACTOR
from specs.vocab import (
    DESIGN_CLASSES,
    PRESETS,
    PROVIDERS,
    BackendName,
    BindingResource,
    Consistency,
    DesignClass,
    Method,
    Objective,
    Operation,
    PriceSet,
    Provider,
    SlaFeature,
    SolverStatus,
)

if TYPE_CHECKING:
    from solver.frontier import Frontier, Point

#: solution.json's format version (bumped when a field changes meaning).
SOLUTION_VERSION = 3  # 2: the bill's lines, replication; 3: sealed (``sha256``)
#: solver.log.jsonl's format version (every record carries it).
LOG_VERSION = 1
SOLUTION = "solution.json"
FRONTIER = "frontier.parquet"
BASELINES = "baselines.parquet"
LOG = "solver.log.jsonl"
LOG_DIR = "solver"


def _class_column() -> Any:
    return field(metadata={"column": "class"})


@dataclass
class PointColumns:
    """What a frontier point looks like in a table (shared by the run's frontier and a sweep)."""

    budget: float
    provider: str
    status: str
    monthly_cost: float | None
    throughput_ops: float | None
    latency_s: float | None
    design_class: str = _class_column()
    gap: float | None = None
    approx_error: float | None = None
    configuration: str = ""
    perturbed_ops: float | None = None  # the perturbed workload's throughput (robust solves)
    nodes: int | None = None
    #: (the most any count of the answer's own nodes reaches within the budget - its throughput) /
    #: its throughput (solver.grid)
    grid_gap: float | None = None
    replicas: int | None = None  # the replication factor: copies of every entry (cost_models.replication)
    zones: int | None = None  # the zones the copies sit in

    @classmethod
    def of(cls, pt: Point) -> dict[str, Any]:
        """The shared columns of one point, as keyword arguments."""
        r = pt.result
        x = pt.throughput if pt.chosen else None
        return {
            "budget": pt.budget,
            "provider": pt.provider,
            "status": str(pt.status),
            "monthly_cost": pt.cost if pt.chosen else None,
            "throughput_ops": x,
            "latency_s": 1.0 / x if x else None,
            "design_class": pt.dominant_class(),
            "gap": None if r is None or not math.isfinite(r.gap) else r.gap,
            "approx_error": pt.approx_error if math.isfinite(pt.approx_error) else None,
            "configuration": to_json(pt.configuration(), indent=None),
            "perturbed_ops": pt.perturbed if pt.chosen else None,
            "nodes": pt.nodes if pt.chosen else None,
            "grid_gap": pt.grid_gap if pt.chosen and math.isfinite(pt.grid_gap) else None,
            "replicas": pt.plan.rf if pt.chosen and pt.plan else None,
            "zones": pt.plan.zones if pt.chosen and pt.plan else None,
        }

    def configuration_dict(self) -> dict[str, Any]:
        return json.loads(self.configuration) if self.configuration else {}

    def check(self) -> None:
        """Values a solve writes (read_rows calls this on every row)."""
        require(finite(self.budget) and self.budget > 0, f"budget {self.budget} is not a positive number")
        require(self.provider in PROVIDERS, f"unknown provider {self.provider!r}")
        require(self.status in SOLVER_STATUSES, f"unknown status {self.status!r}")
        for name in ("monthly_cost", "throughput_ops", "latency_s", "gap", "approx_error", "grid_gap"):
            v = getattr(self, name)
            require(finite(v, nullable=True), f"{name} {v} is not a finite non-negative number")
        found = self.monthly_cost is not None
        require(found == (self.throughput_ops is not None), "monthly_cost and throughput_ops must both be set or empty")
        require(not found or SolverStatus(self.status).has_solution, f"a configuration with status {self.status}")
        if self.configuration:
            try:
                conf = json.loads(self.configuration)
            except json.JSONDecodeError:
                raise ValueError("configuration is not JSON") from None
            require(isinstance(conf, dict), "configuration is not a JSON object")


@dataclass
class FrontierRow(PointColumns):
    """One band of one provider in frontier.parquet."""

    band: int = 0
    repaired: bool = False  # took an earlier band's configuration to keep the frontier monotone
    # With robustness, the same band solved without it (the nominal frontier) and
    # the best perturbed throughput at the band (the robust rule's reference).
    nominal_throughput_ops: float | None = None
    nominal_monthly_cost: float | None = None
    nominal_class: str | None = None
    nominal_perturbed_ops: float | None = None
    best_perturbed_ops: float | None = None
    perturbed_floor_ops: float | None = None
    polished: bool = False  # solver.grid moved the answer to a faster count of its own nodes
    rule: str | None = None  # status excluded: the spec's rule that no configuration meets

    def check(self) -> None:
        super().check()
        require(self.band >= 0, f"band {self.band} is negative")


@dataclass
class SweepRow(PointColumns):
    """One (spec, budget, provider) of a sweep file."""

    spec: str = ""
    spec_path: str = ""
    backend: str = ""


@dataclass
class BaselineRow:
    """A preset's best homogeneous cluster at one band (baselines.parquet)."""

    preset: str
    band: int
    budget: float
    provider: str
    monthly_cost: float
    throughput_ops: float
    vm: str
    count: int
    design_class: str = _class_column()
    replication: str = ""  # the plan's label (RF and zones)

    def check(self) -> None:
        require(self.preset in PRESETS, f"unknown preset {self.preset!r}")
        require(self.band >= 0, f"band {self.band} is negative")
        require(finite(self.budget) and self.budget > 0, f"budget {self.budget} is not a positive number")
        require(self.provider in PROVIDERS, f"unknown provider {self.provider!r}")
        for name in ("monthly_cost", "throughput_ops"):
            require(finite(getattr(self, name)), f"{name} {getattr(self, name)} is not a finite non-negative number")
        require(self.count >= 1, f"count {self.count} is not positive")
        require(self.design_class in DESIGN_CLASSES, f"unknown design class {self.design_class!r}")


#: Back ends a certificate may name (the MIP back ends, or enumeration).
CERTIFIERS = (*tuple(BackendName), Method.EXHAUSTIVE)
SOLVER_STATUSES = tuple(SolverStatus)


def _certifier(backend: str) -> None:
    require(backend in CERTIFIERS, f"backend {backend!r} is not a cosine back end")


# ----------------------------------------------------------------------------- solver.log.jsonl


@dataclass
class Companion:
    """A robust band's two companion solves (the nominal one and the best perturbed one)."""

    status: SolverStatus
    mip_gap: float | None
    approx_error: float | None
    throughput_exact_ops: float | None
    perturbed_exact_ops: float | None


@dataclass
class LogRecord:
    """One band x provider of solver.log.jsonl: how its MIP ended and what it certifies."""

    band: int
    provider: Provider
    budget: float
    status: SolverStatus
    objective_kind: Objective
    objective: float | None
    best_bound: float | None
    mip_gap: float | None
    nodes: int | None  # branch-and-bound nodes
    wall_s: float | None
    approx_error: float | None
    throughput_mip_ops: float | None
    throughput_exact_ops: float | None
    perturbed_mip_ops: float | None
    perturbed_exact_ops: float | None
    perturbed_floor_ops: float | None
    monthly_cost: float | None
    repaired: bool
    backend: str
    method: Method
    scaling_error: float | None
    solver_log: str | None
    version: int = 0  # set by write_run (:data:`LOG_VERSION`)
    companions: dict[Objective, Companion] | None = field(default=None, metadata=omit_none())
    envelope_inside: bool | None = None
    envelope: list[NodeEnvelope] | None = None
    grid_gap: float | None = None  # solver.grid: (the best count of the answer's nodes - it) / it
    grid_bound_ops: float | None = None  # that best count's throughput (ops/s)
    polished: bool = False  # the answer is a faster count of the band model's answer's nodes
    rule: str | None = None  # status excluded: the spec's rule that no configuration meets

    def check(self) -> None:
        require(self.version == LOG_VERSION, f"solver log version {self.version}, this cosine reads {LOG_VERSION}")
        _certifier(self.backend)
        require(self.band >= 0, f"band {self.band} is negative")
        require(finite(self.budget) and self.budget > 0, f"budget {self.budget} is not a positive number")
        for name in ("mip_gap", "approx_error", "monthly_cost", "grid_gap", "grid_bound_ops"):
            v = getattr(self, name)
            require(finite(v, nullable=True), f"{name} {v} is not a finite non-negative number")


# ----------------------------------------------------------------------------- solution.json


@dataclass
class VmCount:
    """How many VMs of one type a configuration buys."""

    type: str
    count: int

    def check(self) -> None:
        require(1 <= self.count <= MAX_CLUSTER_SIZE, f"count {self.count} outside 1..{MAX_CLUSTER_SIZE:,}")


@dataclass
class NodeStorage:
    """The volume each VM of one type gets (a catalog storage product, or its instance store)."""

    vm_type: str
    product: str
    disks: int
    gib: float
    iops: float
    mibps: float | None  # None: no throughput limit in the catalog
    effective_iops: float  # what the node drives at its block size (the VM's limits applied)
    usd_month: float
    label: str

    def check(self) -> None:
        for name in ("gib", "iops", "effective_iops", "usd_month"):
            require(finite(getattr(self, name)), f"{name} {getattr(self, name)} is not a finite non-negative number")
        require(self.disks >= 0, f"disks {self.disks} is negative")


@dataclass(kw_only=True)
class NodeDesign(DesignEntry):
    """One entry of solution.json's ``designs``: the design one VM type runs, on how many VMs, and
    what each such node does under the model."""

    vm_type: str
    count: int
    node_throughput_ops: float
    node_perturbed_ops: float  # = node_throughput_ops without robustness
    device_bound: bool  # the node runs at its volume's IOPS
    #: the served node (issue 48; node_throughput_ops is its throughput served over RESP): the engine's
    #: throughput in process (no server, no network), the bytes on the wire per operation (in + out,
    #: with the scans' fan-out), the VM's network bound (None: no figure in the catalog) and whether
    #: the node runs at it, the p50 / p99 request latency at ``utilization`` of the node's capacity
    #: (cost_models.latency: M/M/c), in operations of the cluster over its shards
    engine_throughput_ops: float | None = None
    wire_bytes_per_op: float | None = None
    network_ops: float | None = None
    network_bound: bool = False
    #: the spec's network duty cycle when the node needs more than its VM's baseline (burst
    #: credits under that duty cycle: performance.network_duty_cycle < 1); None within the baseline
    burst_duty_cycle: float | None = None
    utilization: float | None = None
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None

    def check(self) -> None:
        super().check()
        require(1 <= self.count <= MAX_CLUSTER_SIZE, f"count {self.count} outside 1..{MAX_CLUSTER_SIZE:,}")
        require(finite(self.node_throughput_ops), f"node_throughput_ops {self.node_throughput_ops} is not a number")


@dataclass
class NodeGroup:
    """One VM type's nodes of a cluster: the design they run and their volume (a re-evaluated
    configuration's ``per_node``; solution.json lists the two apart, ``designs`` and ``storage``)."""

    design: NodeDesign
    storage: NodeStorage

    def identity(self) -> dict[str, Any]:
        """What identifies the group (not what it achieves on a workload): the VM type and count,
        the design's knobs (:data:`cost_models.design.DESIGN_KNOBS`) and the volume."""
        d = to_record(self.design)
        return {
            "vm_type": self.design.vm_type,
            "count": self.design.count,
            **{k: d[k] for k in DESIGN_KNOBS},
            "storage": to_record(self.storage),
        }


@dataclass
class Bill:
    """The monthly bill (solution.json ``monthly_cost``), USD, line by line (cost_models.bill): the
    lines add up to ``total``."""

    compute: float  # one copy's share of the VMs
    storage: float  # one copy's share of the volumes (their backup apart)
    replicas: float  # the other copies' share of the VMs and volumes
    transfer: float  # cross-zone transfer (replication, and clients in other zones)
    backup: float  # snapshots of block volumes, object storage for an instance store
    sla: float  # the SLA bundle's fees
    support: float  # percent-of-spend support plans
    total: float

    LINES: ClassVar[tuple[str, ...]] = ("compute", "storage", "replicas", "transfer", "backup", "sla", "support")

    def check(self) -> None:
        for name in (*self.LINES, "total"):
            require(finite(getattr(self, name)), f"{name} {getattr(self, name)} is not a finite non-negative number")
        lines = sum(getattr(self, name) for name in self.LINES)
        near = abs(lines - self.total) <= 1e-6 * max(self.total, 1.0)
        require(near, f"the lines add up to {lines}, not {self.total}")


@dataclass
class Replication:
    """How the configuration keeps its data (solution.json ``replication``; cost_models.replication):
    ``factor`` copies of every entry on as many nodes in ``zones`` zones, reads asking
    ``read_replicas`` of them; the nodes serve ``amplification`` node operations per operation of
    the workload; the volumes hold ``data_gib`` (one copy) at the end of ``horizon_days``."""

    factor: int
    zones: int
    consistency: Consistency
    read_replicas: int
    amplification: float
    clients_across_zones: bool
    cross_zone_gib_month: float
    horizon_days: float
    data_gib: float
    label: str

    def check(self) -> None:
        require(1 <= self.factor <= MAX_REPLICATION_FACTOR, f"factor {self.factor} outside 1..{MAX_REPLICATION_FACTOR}")
        require(1 <= self.zones <= self.factor, f"zones {self.zones} outside 1..factor ({self.factor})")
        require(1 <= self.read_replicas <= self.factor, f"read_replicas {self.read_replicas} outside 1..factor")
        for name in ("amplification", "cross_zone_gib_month", "horizon_days", "data_gib"):
            require(finite(getattr(self, name)), f"{name} {getattr(self, name)} is not a finite non-negative number")


@dataclass
class Prediction:
    """What the model predicts the configuration does (solution.json ``predicted``)."""

    latency_s: float | None  # Eq. 3: 1 / throughput (not a request's latency: latency_p50_s, latency_p99_s)
    throughput_ops: float
    perturbed_throughput_ops: float | None  # robust solves
    io_per_op: dict[Operation, float]
    monthly_capacity_ops: float
    operations_per_month: float | None
    #: a request's predicted latency (the worst node's), served over RESP (cost_models.latency)
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None

    def check(self) -> None:
        require(finite(self.throughput_ops), f"throughput_ops {self.throughput_ops} is not a finite number")


@dataclass
class Certificate:
    """How the configuration was proven: the MIP's status and gap, and the exact re-evaluation's
    approximation error; on the answer, the calibrated envelope's check."""

    mip_gap: float | None
    approx_error: float | None
    backend: str  # a MIP back end (BackendName) or enumeration
    method: Method
    status: SolverStatus
    objective: float | None
    best_bound: float | None
    nodes: int | None
    wall_s: float | None
    scaling_error: float | None
    envelope: EnvelopeCheck | None = field(default=None, metadata=omit_none())
    #: (the most any count of the answer's own nodes reaches within the budget, exactly - the
    #: answer's throughput) / the answer's throughput (solver.grid); with mip_gap and approx_error
    #: the three say how far the answer is from the best of the question asked
    grid_gap: float | None = None
    grid_bound_ops: float | None = None  # that most, ops/s
    polished: bool = False  # the answer is a faster count of the band model's answer's nodes

    def check(self) -> None:
        _certifier(self.backend)
        for name in ("mip_gap", "approx_error", "grid_gap", "grid_bound_ops"):
            v = getattr(self, name)
            require(finite(v, nullable=True), f"{name} {v} is not a finite non-negative number")


@dataclass
class Configuration:
    """A priced, predicted and certified configuration: what to buy and run (the parts of a
    :class:`Solution` a tool needs to render, deploy or bill it)."""

    version: int
    spec: str
    spec_source: str | None
    spec_raw: dict[str, Any]
    budget: float
    provider: Provider
    pricing: PriceSet
    vms: list[VmCount]
    storage: list[NodeStorage]
    slas: list[SlaFeature]
    designs: list[NodeDesign]
    monthly_cost: Bill
    replication: Replication
    predicted: Prediction
    certificate: Certificate

    def check(self) -> None:
        require(
            self.version == SOLUTION_VERSION,
            f"solution.json version {self.version}, this cosine reads {SOLUTION_VERSION}",
        )
        require(finite(self.budget) and self.budget > 0, f"budget {self.budget} is not a positive number")
        require(bool(self.designs), "designs must be a non-empty list")
        types = [d.vm_type for d in self.designs]
        require(len(set(types)) == len(types), "a VM type has two designs")
        stray = sorted({s.vm_type for s in self.storage} - set(types))
        require(not stray, f"storage vm_type {stray[0]!r} is not the vm_type of any design" if stray else "")
        bought = {v.type: v.count for v in self.vms}
        require(
            len(bought) == len(self.vms) and bought == {d.vm_type: d.count for d in self.designs},
            "vms and designs list different VM types or counts",
        )

    @property
    def nodes(self) -> int:
        """VMs of every type."""
        return sum(d.count for d in self.designs)

    def storage_of(self, vm_type: str) -> NodeStorage | None:
        """The volume of the VMs of ``vm_type`` (None: none recorded)."""
        return next((s for s in self.storage if s.vm_type == vm_type), None)


@dataclass
class TargetMiss:
    """The best configuration within the budget, when it misses the spec's throughput target."""

    throughput_ops: float
    monthly_cost: float


@dataclass
class Target:
    """The spec's throughput target (performance.min_throughput) and its latency bounds
    (performance.max_latency_s on the p99, max_latency_p50_s on the p50: constraints on every node's
    predicted request latency, not a throughput floor)."""

    min_throughput: float | None
    met: bool
    max_latency_s: float | None = field(default=None, metadata=omit_none())
    max_latency_p50_s: float | None = field(default=None, metadata=omit_none())
    fastest_within_budget: TargetMiss | None = field(default=None, metadata=omit_none())
    #: the cheapest configuration that meets the target (None: it is met, or nothing meets it)
    cheapest_meeting_target: Configuration | None = field(default=None, metadata=omit_none())


@dataclass
class Need:
    """The rate the spec asks for: ``performance.min_throughput`` and ``operations_per_month`` as its
    average rate times ``performance.peak_factor``, the larger of those the spec states."""

    throughput_ops: float
    min_throughput_ops: float | None
    operations_per_month: float | None
    average_ops: float | None  # operations_per_month over the month's seconds
    peak_factor: float
    peak_factor_source: str  # "spec" or "default"
    rule: str  # in words, which of them sets it


@dataclass
class NeedAnswer:
    """The cheapest configuration that meets the spec's :class:`Need` (the second answer of a solve)."""

    need: Need
    #: None: no configuration of the search space reaches it (``note`` says so)
    configuration: Configuration | None = field(default=None, metadata=omit_none())
    note: str | None = None


@dataclass
class NeighbourUp:
    """The next frontier point above the answer: what more money buys."""

    extra_usd: float
    gain: float
    monthly_cost: float
    throughput_ops: float
    provider: Provider


@dataclass
class NeighbourDown:
    """The best frontier point below the answer's cost: what less money costs."""

    saved_usd: float
    loss: float
    monthly_cost: float
    throughput_ops: float
    provider: Provider


@dataclass
class Neighbours:
    up: NeighbourUp | None = field(default=None, metadata=omit_none())
    down: NeighbourDown | None = field(default=None, metadata=omit_none())


@dataclass
class FrontierCheck:
    """The frontier the answer was picked from."""

    monotone: bool
    repaired_bands: int
    robust_carried: int
    bands: int
    providers: list[Provider]


@dataclass
class Binding:
    """What stops the answer from being faster, in words, and the facts it rests on."""

    resource: BindingResource
    detail: str
    budget_used: float
    nodes: int
    cluster_cap: int
    device_bound_nodes: int
    capacity_per_month: float
    operations_per_month: float | None
    unspent_usd: float | None = None  # the budget less the answer's bill
    next_node_usd: float | None = None  # what one more node of the answer's cheapest group adds to the bill


@dataclass
class ProviderAtBudget:
    """A provider's own answer at the budget (its own robust floor), and whether the headline's rule
    (across providers) excludes it."""

    throughput_ops: float
    monthly_cost: float | None
    excluded_by: str | None = None


@dataclass
class Choice:
    """A configuration of the robustness report, measured on both workloads."""

    provider: Provider | None
    vms: list[VmCount]
    classes: list[DesignClass]
    monthly_cost: float | None
    expected_ops: float
    perturbed_ops: float


@dataclass
class ScanLength:
    entries: float
    source: str  # "spec" or "default"
    note: str | None


@dataclass
class Robustness:
    """The robust rule at the budget's band (robust solves only)."""

    met_floor_ops: float | None
    chosen_at_budget: float | None
    rule: str
    noise: float
    kl_radius: float | None
    tolerance: float
    perturbed_mix: dict[Operation, float]
    added_operations: dict[Operation, float]
    scan_length: ScanLength
    robust_choice: Choice
    nominal_choice: Choice
    best_perturbed_choice: Choice
    cost_of_robustness: float | None
    gain_under_perturbation: float | None
    robust_carried_bands: int


@dataclass
class Search:
    """The search space the answer was found in, and how long each stage took."""

    max_cluster: int
    max_cluster_source: str
    contexts: dict[Provider, int]
    designs_per_vm: dict[str, int]
    timings_s: dict[str, float]
    band_count: int | None = None  # --bands: the geometric grid `cosine whatif` re-solves on (solver.resolve)


@dataclass
class Solution(Configuration):
    """solution.json: the answer at the spec's budget, with what explains it."""

    target: Target | None = None
    cheapest_possible_usd: float | None = None
    neighbours: Neighbours | None = None
    optional_slas_usd: dict[SlaFeature, float | None] | None = None
    frontier_check: FrontierCheck | None = None
    binding: Binding | None = None
    providers_at_budget: dict[Provider, ProviderAtBudget] | None = None
    robustness: Robustness | None = field(default=None, metadata=omit_none())
    objective: str | None = None
    search: Search | None = None
    #: the cheapest configuration meeting the spec's need (None: the spec states none)
    cheapest_meeting_need: NeedAnswer | None = field(default=None, metadata=omit_none())
    #: the SHA-256 of the rest of the document (:func:`sealed`), written by :func:`write_solution`
    sha256: str | None = field(default=None, metadata=omit_none())


# ----------------------------------------------------------------------------- the run directory


@dataclass
class RunDir:
    """A run directory as read back."""

    path: Path
    solution: Solution
    log: list[LogRecord]
    frontier: list[FrontierRow]
    baselines: list[BaselineRow] = dataclasses.field(default_factory=list)


def write_run(run_dir: Path, fr: Frontier, solution: Solution, mix: dict[str, float]) -> None:
    """Write solution.json, frontier.parquet, baselines.parquet and solver.log.jsonl (each record
    with the envelope check of its band's configuration on ``mix``)."""
    # the writer's only use of the CPU model: the readers (`cosine whatif`, `audit`) do not pay its import
    from cost_models.envelope import check_nodes

    run_dir.mkdir(parents=True, exist_ok=True)
    write_solution(run_dir / SOLUTION, solution)
    rows, recs = [], []
    for p, pts in fr.points.items():
        for pt in pts:
            extra: dict[str, Any] = {}
            tag = f"_{pt.objective}" if fr.robust else ""
            log = f"{LOG_DIR}/band{pt.band:02d}_{p}{tag}.log"
            rec = pt.log_record(fr.backend, fr.method, log if (run_dir / log).exists() else None)
            if fr.robust:
                nom, per = fr.nominal[p][pt.band], fr.perturbed[p][pt.band]
                extra = {
                    "nominal_throughput_ops": nom.throughput if nom.chosen else None,
                    "nominal_monthly_cost": nom.cost if nom.chosen else None,
                    "nominal_class": nom.dominant_class() or None,
                    "nominal_perturbed_ops": nom.perturbed if nom.chosen else None,
                    "best_perturbed_ops": per.perturbed if per.chosen else None,
                    "perturbed_floor_ops": pt.floor_ops,
                }
                rec.companions = {}
                for q in (nom, per):
                    c = q.log_record(fr.backend, fr.method, None)
                    rec.companions[q.objective] = Companion(
                        c.status, c.mip_gap, c.approx_error, c.throughput_exact_ops, c.perturbed_exact_ops
                    )
            env = check_nodes([g.design for g in pt.exact.per_node], mix) if pt.chosen and pt.exact else None
            rec.envelope_inside = None if env is None else env.inside
            rec.envelope = None if env is None else env.nodes
            rec.version = LOG_VERSION
            rows.append(
                FrontierRow(
                    **PointColumns.of(pt),
                    band=pt.band,
                    repaired=pt.repaired,
                    polished=pt.polished,
                    rule=pt.rule,
                    **extra,
                )
            )
            recs.append(rec)
    write_rows(run_dir / FRONTIER, rows, FrontierRow, sealed=True)
    write_rows(run_dir / BASELINES, [r for rs in fr.baselines.values() for r in rs], BaselineRow)
    write_text(run_dir / LOG, "".join(to_json(to_record(rec), indent=None) + "\n" for rec in recs))


def sealed(doc: dict[str, Any]) -> dict[str, Any]:
    """A solution.json document with its ``sha256``: the SHA-256 of the rest's canonical JSON."""
    payload = {k: v for k, v in doc.items() if k != "sha256"}
    return {**payload, "sha256": payload_digest(payload)}


def write_solution(path: Path, solution: Solution) -> Path:
    """Write solution.json, sealed (:func:`sealed`), atomically; ``solution`` keeps its seal (what
    `cosine solve --json` prints is the file)."""
    doc = sealed(clean(to_record(dataclasses.replace(solution, sha256=None))))  # as the file holds it
    solution.sha256 = doc["sha256"]
    return write_text(path, to_json(doc) + "\n")


def read_solution(path: Path) -> Solution:
    """A solution.json, checked: its seal (no value changed since :func:`write_solution` wrote it),
    its version, its spec, every field's type and range, and its VM types against the catalog of
    its price set."""
    from cost_models.pricing.catalog import load_catalog
    from specs.schema import validate

    what = "a cosine solution.json"
    raw = read_json(path, what)
    if isinstance(raw, dict) and raw.get("version") != SOLUTION_VERSION and "sha256" not in raw:
        got = raw.get("version")
        raise InputError(f"{path}: solution.json version {got!r}, this cosine reads {SOLUTION_VERSION} (solve again)")
    try:
        sol = from_record(Solution, raw, "")
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    # after the fields' own checks (a value out of range is named), before the checks across them
    check_digest(path, raw, what)
    try:
        spec = validate(sol.spec_raw)
    except InputError as exc:
        raise InputError(f"{path}: spec_raw: {exc}") from None
    if sol.spec != spec.name:
        raise InputError(f"{path}: spec {sol.spec!r} but spec_raw is {spec.name!r}")
    if sol.provider not in spec.providers:
        raise InputError(f"{path}: provider {sol.provider!r} is not one of the spec's ({', '.join(spec.providers)})")
    vm_names = {v.name for v in load_catalog(sol.pricing).vms.get(sol.provider, [])}
    for i, d in enumerate(sol.designs):
        if d.vm_type not in vm_names:
            raise InputError(
                f"{path}: designs[{i}].vm_type: {d.vm_type!r} is not a VM of the solution's provider and price set"
            )
    return sol


def read_log(path: Path) -> list[LogRecord]:
    """solver.log.jsonl: one :class:`LogRecord` per band x provider, each checked."""
    if not path.is_file():
        raise InputError(f"{path}: no such file (the solver log)")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (the solver log is corrupt)") from None
    recs = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = loads_json(line)
        except ValueError:  # JSONDecodeError, nesting too deep, an integer past int()'s limit
            raise InputError(f"{path}:{i}: not a JSON record (the file is corrupt)") from None
        try:
            recs.append(from_record(LogRecord, rec, ""))
        except InputError as exc:
            raise InputError(f"{path}:{i}: {exc}") from None
    if not recs:
        raise InputError(f"{path}: the solver log is empty")
    return recs


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def cross_check(run_dir: Path, sol: Solution, log: list[LogRecord], rows: list[FrontierRow]) -> None:
    """The files of one solve agree: every frontier row has its log record (same status, budget,
    cost, gap and error), and solution.json's configuration is one of the frontier's points."""
    by_key: dict[tuple[int, str], LogRecord] = {(r.band, str(r.provider)): r for r in log}
    if len(by_key) != len(log):
        raise InputError(f"{run_dir}/{LOG}: a band is logged twice")
    keys = {(r.band, r.provider) for r in rows}
    if len(keys) != len(rows) or keys != set(by_key):
        raise InputError(f"{run_dir}: {FRONTIER} and {LOG} list different bands (the files come from different solves)")
    for r in rows:
        rec = by_key[(r.band, r.provider)]
        pairs = (
            ("status", r.status == rec.status),
            ("budget", _same(r.budget, rec.budget)),
            ("monthly_cost", _same(r.monthly_cost, rec.monthly_cost)),
            ("gap", _same(r.gap, rec.mip_gap)),
            ("approx_error", _same(r.approx_error, rec.approx_error)),
            ("grid_gap", _same(r.grid_gap, rec.grid_gap)),
        )
        bad = [name for name, ok in pairs if not ok]
        if bad:
            raise InputError(
                f"{run_dir}: {FRONTIER} and {LOG} disagree at band {r.band} ({r.provider}) on {', '.join(bad)} "
                "(a file was edited or comes from another solve)"
            )
    backends = {rec.backend for rec in log}
    if backends != {sol.certificate.backend}:
        raise InputError(
            f"{run_dir}: {SOLUTION} was certified by {sol.certificate.backend}, {LOG} by {', '.join(backends)}"
        )
    total, x = sol.monthly_cost.total, sol.predicted.throughput_ops
    match = [
        r
        for r in rows
        if r.provider == sol.provider
        and r.monthly_cost is not None
        and math.isclose(r.monthly_cost, total, rel_tol=1e-6, abs_tol=0.01)
        and r.throughput_ops is not None
        and math.isclose(r.throughput_ops, x, rel_tol=1e-6)
    ]
    if not match:
        raise InputError(
            f"{run_dir}: {SOLUTION}'s configuration ({sol.provider}, ${total:,.2f}/month, {x:,.0f} ops/s) "
            f"is not a point of {FRONTIER} (a file was edited or comes from another solve)"
        )


def load_run(run_dir: Path, *, baselines: bool = False) -> RunDir:
    """Read, validate and cross-check a run directory written by `cosine solve`."""
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a run directory (run `cosine solve` first)")
    missing = [n for n in (SOLUTION, FRONTIER, LOG) if not (run_dir / n).is_file()]
    if missing:
        raise InputError(f"{run_dir}: missing {', '.join(missing)} (run `cosine solve` first)")
    with kept_objects():
        sol = read_solution(run_dir / SOLUTION)
        log = read_log(run_dir / LOG)
        rows = read_rows(run_dir / FRONTIER, FrontierRow, "frontier.parquet", sealed=True)
    cross_check(run_dir, sol, log, rows)
    base = read_rows(run_dir / BASELINES, BaselineRow, "baselines.parquet") if baselines else []
    budgets = {r.band: r.budget for r in rows}
    for b in base:
        if b.band not in budgets or not _same(b.budget, budgets[b.band]):
            raise InputError(f"{run_dir}/{BASELINES}: band {b.band} is not a band of {FRONTIER}")
    return RunDir(run_dir, sol, log, rows, base)
