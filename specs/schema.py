"""The workload spec: YAML in, a validated, typed :class:`Spec` out.

Every problem is reported as a :class:`SpecError` naming the field (dotted path)
and what is wrong, in one line. The loader refuses YAML alias bombs, duplicate
keys and files larger than :data:`MAX_SPEC_BYTES` before building any object.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from specs.errors import InputError
from specs.limits import (
    MAX_BLOCK_BYTES,
    MAX_CLUSTER_SIZE,
    MAX_ENTRIES,
    MAX_OPERATIONS_PER_MONTH,
    MAX_REPLICATION_FACTOR,
    MAX_SIZE_RATIO,
    MAX_THROUGHPUT_OPS,
    MAX_TRACE_SECONDS,
    MIN_BLOCK_BYTES,
    MIN_SIZE_RATIO,
)
from specs.vocab import (
    COST_MODELS,
    DEFAULT_PRICE_SET,
    DESIGN_CLASSES,
    OPERATIONS,
    PRICE_SETS,
    PROVIDERS,
    SLA_FEATURES,
    Consistency,
    CostModel,
    DistributionKind,
    Provider,
    SlaFeature,
)

#: The folder of the shipped specs (``specs/NAME.yaml``).
SPEC_DIR = Path(__file__).resolve().parent
#: The shipped specs the frontier studies solve (bench.frontier_findings, bench.sweep); the
#: celebrity spec is issue 17's worst-case example and has its own study (bench.celebrity).
STUDY_SPECS = (
    "ycsb_a",
    "ycsb_b",
    "ycsb_c",
    "ycsb_d",
    "ycsb_e",
    "ycsb_f",
    "mixed_25",
    "write_heavy",
    "range_heavy",
    "empty_range_heavy",
    "robust_5050",
)

#: Largest spec file accepted; real specs are a few hundred bytes.
MAX_SPEC_BYTES = 1 << 20
#: YAML aliases allowed per file (anchors are handy for sharing a distribution;
#: a "billion laughs" file needs many more).
MAX_ALIASES = 50
#: Key bytes: the engine's limit (cosine-config: layout.key_bytes in 1..=4096).
MAX_KEY_BYTES = 4096
#: Smallest design.memory_step: buffer rungs 1 + 10 x 0.01 = 1.1 apart (the paper's default
#: 0.1 doubles the buffer per rung); finer steps multiply the search (solver.space bounds the
#: whole grid) without changing a buffer by more than the model can tell apart.
MIN_MEMORY_STEP = 0.01
#: Most block sizes design.block_bytes may list: each multiplies the design grid.
MAX_BLOCK_SIZES = 8
#: Largest monthly budget (USD) a spec or a flag may name: a billion dollars a month.
MAX_BUDGET_USD = 1e9
#: Entries per range scan when the spec gives neither ``scan_length`` nor
#: ``range_selectivity``: YCSB's only scanning core workload (E) draws lengths
#: uniformly from 1..100, mean 50.5 (shared/reference/ycsb_workloads.csv).
#: Robustness noise adds range scans to mixes that have none; they get this
#: length, and `cosine solve` says so.
DEFAULT_SCAN_LENGTH = 50.5
#: Days of inserts the answer provisions storage (and designs) for when the spec names no
#: ``workload.growth_horizon_days``: a quarter, a common capacity-planning review period.
DEFAULT_GROWTH_HORIZON_DAYS = 90.0
#: ``robustness.tolerance`` when the spec sets noise or a KL radius but no
#: tolerance: the robust choice keeps within 10% of the best perturbed-workload
#: throughput at its budget (docs/solver.md).
DEFAULT_ROBUST_TOLERANCE = 0.1
#: ``performance.peak_factor`` when the spec sets none: the rate ``operations_per_month`` must be
#: served at is twice its monthly average (issue 47: "a peak factor the spec can set (default 2,
#: stated)"; a stated default, not a measured one: a workload with a known diurnal peak sets its own).
DEFAULT_PEAK_FACTOR = 2.0
#: The largest ``performance.peak_factor``: a peak 100x the monthly average is a burst, not a rate.
MAX_PEAK_FACTOR = 100.0
#: Key values an empty range spans when the spec names none: the engine driver's
#: default (cosine-bench ``DEFAULT_EMPTY_RANGE_WIDTH``), a short range of the paper's Fig. 5H.
DEFAULT_EMPTY_RANGE_WIDTH = 64
#: Widest empty range: the range filter's heights stop at 2^63 (cosine-filter ``MAX_HEIGHTS``);
#: 2^20 key values keeps the model's exact average over range alignments cheap.
MAX_EMPTY_RANGE_WIDTH = 1 << 20
#: Smallest ``stddev`` of a ``normal`` distribution. The model bins it in stddev/2-wide slices of
#: the key space [0, 1] around the mean (cost_models.distributions.marginal); near 1 doubles are
#: 2^-53 (1.1e-16) apart, so at 1e-12 a bin edge is exact to 2e-4 of the bin, while narrower bins
#: round into one another (np.unique merges them) and the distribution silently turns into another.
MIN_NORMAL_STDDEV = 1e-12
#: Deepest client pipeline a spec may name (cosine-server runs at most 1,024 requests as one batch:
#: ServerConfig.max_batch).
MAX_PIPELINE = 1024

#: Each distribution kind's parameters and their defaults (None: required).
DISTRIBUTION_KINDS: dict[DistributionKind, dict[str, float | None]] = {
    DistributionKind.UNIFORM: {},
    DistributionKind.ZIPFIAN: {"theta": 0.99},
    DistributionKind.SKEW: {"hot_fraction": None, "hot_probability": None},
    DistributionKind.NORMAL: {"mean": 0.5, "stddev": None},
    DistributionKind.LATEST: {"theta": 0.99},
}


class SpecError(InputError):
    """A spec problem: ``field`` is the dotted path, ``problem`` the one-line reason,
    ``source`` the spec file (when the spec came from one)."""

    def __init__(self, field: str, problem: str, source: str = "") -> None:
        self.field = field
        self.problem = problem
        self.source = source
        msg = f"{field}: {problem}" if field else problem
        super().__init__(f"{source}: {msg}" if source else msg)


@dataclass(frozen=True)
class Distribution:
    """A key distribution as the user wrote it (mapped to partitions in cost_models)."""

    kind: DistributionKind = DistributionKind.UNIFORM
    theta: float = 0.99
    hot_fraction: float = 0.0
    hot_probability: float = 0.0
    mean: float = 0.5
    stddev: float = 0.1

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind}
        for k in DISTRIBUTION_KINDS[self.kind]:
            d[k] = getattr(self, k)
        return d


@dataclass(frozen=True)
class Workload:
    """What the key-value store must serve."""

    entries: int
    key_bytes: int
    value_bytes: int
    operations: dict[str, float]
    scan_length: float
    get_distribution: Distribution
    put_distribution: Distribution
    operations_per_month: float | None
    scan_length_given: bool = True  # False: DEFAULT_SCAN_LENGTH (the spec names no range length)
    #: compressed / raw bytes of the values (1.0: incompressible); the measured codec
    #: factors (cost_models.compression) are read at this compressibility
    compressibility: float = 1.0
    #: key values (of the key's first 8 bytes) an empty range spans
    empty_range_width: int = DEFAULT_EMPTY_RANGE_WIDTH
    #: days of inserts the answer provisions for: storage, and the design, hold the data at the end
    #: of this horizon (:data:`DEFAULT_GROWTH_HORIZON_DAYS`)
    growth_horizon_days: float = 90.0
    #: days an inserted entry is kept (None: for good): inserts then grow the data by at most this
    retention_days: float | None = None

    @property
    def entry_bytes(self) -> int:
        return self.key_bytes + self.value_bytes

    @property
    def range_selectivity(self) -> float:
        return self.scan_length / self.entries

    @property
    def data_bytes(self) -> float:
        return float(self.entries) * self.entry_bytes


@dataclass(frozen=True)
class DesignSpace:
    """Constraints on the engine designs the search may consider."""

    classes: tuple[str, ...] = DESIGN_CLASSES
    size_ratio: tuple[int, int] = (2, 64)
    max_runs: int = 64
    block_bytes: tuple[int, ...] = (4096, 32768)
    memory_step: float = 0.1
    max_cluster_size: int | None = None  # None: derived from the data and the budget (solver.space.cluster_cap)
    memory_headroom: float = 0.0


@dataclass(frozen=True)
class Replication:
    """How the data is replicated (spec ``replication``): the replication factors the solver may
    choose from, how many replicas a read asks, and whether clients run in every zone."""

    factors: tuple[int, ...] = (1, 2, 3)
    consistency: Consistency = Consistency.ONE
    #: clients run in every zone of the replicas (their requests cross zones in proportion), or in
    #: one zone with the leaders (default)
    clients_across_zones: bool = False


@dataclass(frozen=True)
class ReplicaPlan:
    """One replication choice: RF copies of each entry in ``zones`` zones, reads asking one replica
    or a majority (cost_models.replication)."""

    rf: int
    zones: int
    consistency: Consistency = Consistency.ONE

    @property
    def read_replicas(self) -> int:
        """q: replicas a read asks (one, or a majority of RF)."""
        return 1 if self.consistency == Consistency.ONE else self.rf // 2 + 1

    @property
    def label(self) -> str:
        return f"RF {self.rf} in {self.zones} zone{'s' if self.zones > 1 else ''}"


@dataclass(frozen=True)
class NodeView:
    """What turns a spec into the spec its nodes serve (cost_models.replication.node_spec): the plan,
    the node operations per operation of the workload (A), the entries the data holds at the end
    of the growth horizon (one copy) and the workload's own mix (which robustness perturbs before
    the plan maps it to node operations)."""

    plan: ReplicaPlan
    amplification: float
    logical_entries: float
    logical_operations: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    """A validated Cosine spec."""

    name: str
    workload: Workload
    budget_usd: float
    budget_range: tuple[float, float]
    min_throughput: float | None
    max_latency_s: float | None
    providers: tuple[str, ...]
    slas: tuple[str, ...]
    design: DesignSpace
    noise: float
    kl_radius: float | None
    pricing: str
    cost_model: CostModel = CostModel.DISTRIBUTION_AWARE
    tolerance: float = DEFAULT_ROBUST_TOLERANCE  # robustness.tolerance (delta of the robust rule)
    replication: Replication = field(default_factory=Replication)
    #: set on the spec a node serves (its workload: every copy, node operations): cluster throughputs
    #: are the node view's over ``node_view.amplification``; None: the spec as written
    node_view: NodeView | None = None
    #: the served node (issue 48): the clients' pipeline depth (requests a client sends before it
    #: reads their replies), the p50 latency bound (max_latency_s bounds the p99), and the share of
    #: the time a node runs at its peak (< 1: burst network credits may carry it; 1: the baseline)
    pipeline: int = 1
    max_latency_p50_s: float | None = None
    network_duty_cycle: float = 1.0
    #: performance.peak_factor: the peak rate over the monthly average that operations_per_month
    #: must be served at (solver.solve's cheapest configuration meeting the need)
    peak_factor: float = DEFAULT_PEAK_FACTOR
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


# ----------------------------------------------------------------------------- YAML loading


class _GuardedLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases and refuses duplicate mapping keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise SpecError("", f"more than {MAX_ALIASES} YAML aliases (alias bomb?)")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                dup = key in seen
            except TypeError:
                raise SpecError("", f"line {key_node.start_mark.line + 1}: unhashable key") from None
            if dup:
                raise SpecError("", f"line {key_node.start_mark.line + 1}: duplicate key {key!r}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node, deep=False):  # type: ignore[no-untyped-def]
        """A scalar YAML parses but Python cannot build (an integer of more than 4,300 digits, the
        date 2023-02-30) is a one-line error naming its line, not a ValueError from int() or date()."""
        try:
            return super().construct_object(node, deep=deep)
        except InputError:
            raise
        except (ValueError, OverflowError) as exc:
            problem = str(exc).split(":")[0] if "integer string conversion" in str(exc) else str(exc)
            raise SpecError("", f"not valid YAML: line {node.start_mark.line + 1}: {problem}") from None


def _load_yaml_text(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_GuardedLoader)  # noqa: S506 - guarded SafeLoader
    except SpecError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError("", f"not valid YAML: {where}{problem}") from None
    except RecursionError:
        raise SpecError("", "YAML nesting too deep") from None


def load_spec(path: str | Path) -> Spec:
    """Read, parse and validate a spec file."""
    p = Path(path)
    if not p.exists():
        raise SpecError("", "no such file", str(p))
    if not p.is_file():
        raise SpecError("", "not a file", str(p))
    try:
        size = p.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError("", f"{size} bytes is too large for a spec (max {MAX_SPEC_BYTES})", str(p))
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecError("", "not UTF-8 text", str(p)) from None
    except OSError as exc:
        raise SpecError("", f"cannot read ({exc.strerror})", str(p)) from None
    try:
        spec = parse_spec(text)
    except SpecError as exc:
        raise SpecError(exc.field, exc.problem, str(p)) from None
    return spec if spec.source else _with_source(spec, str(p))


def _with_source(spec: Spec, source: str) -> Spec:
    from dataclasses import replace

    return replace(spec, source=source)


def parse_spec(text: str) -> Spec:
    """Parse and validate spec YAML text."""
    if not text.strip():
        raise SpecError("", "the spec is empty")
    data = _load_yaml_text(text)
    if data is None:
        raise SpecError("", "the spec is empty")
    if not isinstance(data, dict):
        raise SpecError("", f"the spec must be a YAML mapping, got {_type_name(data)}")
    return validate(data)


# ----------------------------------------------------------------------------- validation helpers


def _type_name(v: Any) -> str:
    if v is None:
        return "nothing (null)"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"the number {v!r}"
    if isinstance(v, str):
        return f"the string {v!r}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "a mapping"
    return type(v).__name__


def _check_keys(where: str, data: dict[str, Any], allowed: list[str], required: list[str]) -> None:
    for k in data:
        if not isinstance(k, str):
            raise SpecError(where or "spec", f"keys must be strings, got {_type_name(k)}")
        if k not in allowed:
            near = difflib.get_close_matches(k, allowed, n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else f" (valid: {', '.join(allowed)})"
            raise SpecError(_join(where, k), f"unknown field{hint}")
    for k in required:
        if k not in data:
            raise SpecError(_join(where, k), "required field is missing")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _mapping(where: str, v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise SpecError(where, f"must be a mapping, got {_type_name(v)}")
    return v


def _number(
    where: str,
    v: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    integer: bool = False,
) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        if isinstance(v, str):
            try:
                v = float(v)  # YAML 1.1 reads "1e8" (no dot) as a string
            except ValueError:
                raise SpecError(where, f"must be a number, got {_type_name(v)}") from None
        else:
            raise SpecError(where, f"must be a number, got {_type_name(v)}")
    try:
        x = float(v)
    except OverflowError:  # an integer of more than 308 digits
        raise SpecError(where, f"must be finite, got an integer of {len(str(v))} digits") from None
    if math.isnan(x):
        raise SpecError(where, "must be a number, got NaN")
    if math.isinf(x):
        raise SpecError(where, "must be finite, got infinity")
    if integer and x != math.floor(x):
        raise SpecError(where, f"must be a whole number, got {v!r}")
    if lo is not None and (x < lo or (lo_open and x == lo)):
        rel = "greater than" if lo_open else "at least"
        raise SpecError(where, f"must be {rel} {lo:g}, got {v!r}")
    if hi is not None and x > hi:
        raise SpecError(where, f"must be at most {hi:g}, got {v!r}")
    return x


def _choice_list(where: str, v: Any, valid: tuple[str, ...], what: str) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list):
        raise SpecError(where, f"must be a list of {what}s, got {_type_name(v)}")
    out: list[str] = []
    for i, item in enumerate(v):
        if not isinstance(item, str):
            raise SpecError(f"{where}[{i}]", f"must be a {what} name, got {_type_name(item)}")
        name = item.strip().lower()
        if name not in valid:
            near = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise SpecError(f"{where}[{i}]", f"unknown {what} {item!r} (valid: {', '.join(valid)}){hint}")
        if name in out:
            raise SpecError(f"{where}[{i}]", f"{what} {item!r} is listed twice")
        out.append(name)
    if not out:
        raise SpecError(where, f"must list at least one {what}")
    return tuple(out)


def parse_providers_flag(text: str, allowed: Sequence[str], of: str, flag: str = "--providers") -> tuple[Provider, ...]:
    """A ``--providers aws,gcp`` flag: a comma-separated list of ``allowed`` providers (``of`` names
    that set in the message), each named once, case-insensitive as a spec's ``providers`` is."""
    names = [p.strip().lower() for p in text.split(",")]
    if not all(names):
        raise InputError(f"{flag} {text!r}: expected a comma-separated list such as aws,gcp")
    bad = [p for p in names if p not in allowed]
    if bad:
        raise InputError(f"{flag}: {', '.join(bad)} not in {of} ({', '.join(allowed)})")
    if len(set(names)) != len(names):
        raise InputError(f"{flag} {text!r}: a provider is named twice")
    return tuple(Provider(p) for p in names)


def _pair(where: str, v: Any, *, integer: bool, lo: float, hi: float, lo_open: bool = False) -> tuple[float, float]:
    if not isinstance(v, list) or len(v) != 2:
        raise SpecError(where, f"must be a [low, high] pair, got {_type_name(v)}")
    a = _number(f"{where}[0]", v[0], lo=lo, hi=hi, lo_open=lo_open, integer=integer)
    b = _number(f"{where}[1]", v[1], lo=lo, hi=hi, lo_open=lo_open, integer=integer)
    if a > b:
        raise SpecError(where, f"empty range: low {v[0]!r} is above high {v[1]!r}")
    return a, b


# ----------------------------------------------------------------------------- sections


def _distribution(where: str, v: Any) -> Distribution:
    if isinstance(v, str):
        v = {"kind": v}
    d = _mapping(where, v)
    if "kind" not in d:
        raise SpecError(_join(where, "kind"), "required field is missing")
    kind = d["kind"]
    if not isinstance(kind, str) or kind not in DISTRIBUTION_KINDS:
        near = difflib.get_close_matches(str(kind), list(DISTRIBUTION_KINDS), n=1, cutoff=0.5)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise SpecError(
            _join(where, "kind"),
            f"unknown distribution {kind!r} (valid: {', '.join(DISTRIBUTION_KINDS)}){hint}",
        )
    params = DISTRIBUTION_KINDS[DistributionKind(kind)]
    required = [k for k, default in params.items() if default is None]
    _check_keys(where, d, ["kind", *params], required)
    vals: dict[str, float] = {}
    for k, default in params.items():
        raw = d.get(k, default)
        w = _join(where, k)
        if k == "theta":
            vals[k] = _number(w, raw, lo=0.0, lo_open=True, hi=10.0)
        elif k == "hot_fraction":
            vals[k] = _number(w, raw, lo=0.0, lo_open=True, hi=1.0)
            if vals[k] >= 1.0:
                raise SpecError(w, "must be below 1 (a hot set of every key is uniform)")
        elif k == "hot_probability":
            vals[k] = _number(w, raw, lo=0.0, hi=1.0)
        elif k == "mean":
            vals[k] = _number(w, raw, lo=0.0, hi=1.0)
        elif k == "stddev":
            vals[k] = _number(w, raw, lo=MIN_NORMAL_STDDEV, hi=1.0)
    return Distribution(kind=DistributionKind(kind), **vals)


def _workload(v: Any) -> Workload:
    w = _mapping("workload", v)
    allowed = [
        "entries",
        "key_bytes",
        "value_bytes",
        "operations",
        "range_selectivity",
        "scan_length",
        "distribution",
        "operations_per_month",
        "compressibility",
        "empty_range_width",
        "growth_horizon_days",
        "retention_days",
    ]
    _check_keys("workload", w, allowed, ["entries", "key_bytes", "value_bytes", "operations"])
    entries = _number("workload.entries", w["entries"], lo=1, integer=True)
    if entries > MAX_ENTRIES:
        raise SpecError("workload.entries", f"{entries:.3g} entries is absurd (max {MAX_ENTRIES:.0e})")
    key_bytes = _number("workload.key_bytes", w["key_bytes"], lo=1, hi=MAX_KEY_BYTES, integer=True)
    value_bytes = _number("workload.value_bytes", w["value_bytes"], lo=1, hi=1 << 30, integer=True)

    ops_raw = _mapping("workload.operations", w["operations"])
    _check_keys("workload.operations", ops_raw, list(OPERATIONS), [])
    ops: dict[str, float] = {
        op: _number(f"workload.operations.{op}", ops_raw.get(op, 0.0), lo=0.0, hi=1.0) for op in OPERATIONS
    }
    total = sum(ops.values())
    if abs(total - 1.0) > 1e-6:
        raise SpecError("workload.operations", f"fractions sum to {total:.6g}, must sum to 1 (±1e-6)")
    ops = {k: x / total for k, x in ops.items()}

    if "range_selectivity" in w and "scan_length" in w:
        raise SpecError("workload.scan_length", "give range_selectivity or scan_length, not both")
    if "range_selectivity" in w:
        s = _number("workload.range_selectivity", w["range_selectivity"], lo=0.0, lo_open=True, hi=1.0)
        scan_length = max(1.0, s * entries)
    elif "scan_length" in w:
        scan_length = _number("workload.scan_length", w["scan_length"], lo=1, integer=False)
        if scan_length > entries:
            raise SpecError("workload.scan_length", f"{scan_length:g} exceeds the {entries:.0f} entries")
    else:
        scan_length = min(DEFAULT_SCAN_LENGTH, entries)

    dist = w.get("distribution", {})
    dist = _mapping("workload.distribution", dist)
    _check_keys("workload.distribution", dist, ["get", "put"], [])
    get_d = _distribution("workload.distribution.get", dist.get("get", {"kind": DistributionKind.UNIFORM}))
    put_d = _distribution("workload.distribution.put", dist.get("put", {"kind": DistributionKind.UNIFORM}))

    compressibility = _number("workload.compressibility", w.get("compressibility", 1.0), lo=0.0, lo_open=True, hi=1.0)
    width = int(
        _number(
            "workload.empty_range_width",
            w.get("empty_range_width", DEFAULT_EMPTY_RANGE_WIDTH),
            lo=1,
            hi=MAX_EMPTY_RANGE_WIDTH,
            integer=True,
        )
    )
    if ops["empty_range"] > 0 and key_bytes < 8:
        raise SpecError("workload.key_bytes", f"empty ranges span values of a key's first 8 bytes; got {key_bytes:g}")
    opm = None
    if "operations_per_month" in w:
        opm = _number(
            "workload.operations_per_month",
            w["operations_per_month"],
            lo=0.0,
            lo_open=True,
            hi=MAX_OPERATIONS_PER_MONTH,
        )
    horizon = _number(
        "workload.growth_horizon_days",
        w.get("growth_horizon_days", DEFAULT_GROWTH_HORIZON_DAYS),
        lo=0.0,
        hi=MAX_TRACE_SECONDS / 86400,
    )
    retention = None
    if "retention_days" in w:
        retention = _number(
            "workload.retention_days", w["retention_days"], lo=0.0, lo_open=True, hi=MAX_TRACE_SECONDS / 86400
        )
    return Workload(
        entries=int(entries),
        key_bytes=int(key_bytes),
        value_bytes=int(value_bytes),
        operations=ops,
        scan_length=scan_length,
        get_distribution=get_d,
        put_distribution=put_d,
        operations_per_month=opm,
        scan_length_given="range_selectivity" in w or "scan_length" in w,
        compressibility=compressibility,
        empty_range_width=width,
        growth_horizon_days=horizon,
        retention_days=retention,
    )


def _design(v: Any) -> DesignSpace:
    d = _mapping("design", v)
    allowed = [
        "classes",
        "size_ratio",
        "max_runs",
        "block_bytes",
        "memory_step",
        "max_cluster_size",
        "memory_headroom",
    ]
    _check_keys("design", d, allowed, [])
    base = DesignSpace()
    classes = (
        _choice_list("design.classes", d["classes"], DESIGN_CLASSES, "design class") if "classes" in d else base.classes
    )
    tr = base.size_ratio
    if "size_ratio" in d:
        a, b = _pair("design.size_ratio", d["size_ratio"], integer=True, lo=MIN_SIZE_RATIO, hi=MAX_SIZE_RATIO)
        tr = (int(a), int(b))
    max_runs = int(_number("design.max_runs", d.get("max_runs", base.max_runs), lo=1, hi=4096, integer=True))
    bb = d.get("block_bytes", list(base.block_bytes))
    if not isinstance(bb, list):
        bb = [bb]
    if not bb:
        raise SpecError("design.block_bytes", "must list at least one block size")
    if len(bb) > MAX_BLOCK_SIZES:
        raise SpecError("design.block_bytes", f"lists {len(bb)} block sizes, at most {MAX_BLOCK_SIZES}")
    blocks = tuple(
        int(_number(f"design.block_bytes[{i}]", x, lo=MIN_BLOCK_BYTES, hi=MAX_BLOCK_BYTES, integer=True))
        for i, x in enumerate(bb)
    )
    if len(set(blocks)) != len(blocks):
        raise SpecError("design.block_bytes", "lists a block size twice")
    step = _number("design.memory_step", d.get("memory_step", base.memory_step), lo=MIN_MEMORY_STEP, hi=0.5)
    mcs = None
    if d.get("max_cluster_size") is not None:
        mcs = int(_number("design.max_cluster_size", d["max_cluster_size"], lo=1, hi=MAX_CLUSTER_SIZE, integer=True))
    headroom = _number("design.memory_headroom", d.get("memory_headroom", 0.0), lo=0.0, hi=0.9)
    return DesignSpace(
        classes=classes,
        size_ratio=tr,
        max_runs=max_runs,
        block_bytes=blocks,
        memory_step=step,
        max_cluster_size=mcs,
        memory_headroom=headroom,
    )


def validate(data: dict[str, Any]) -> Spec:
    """Validate a parsed YAML mapping into a :class:`Spec`."""
    allowed = [
        "name",
        "workload",
        "budget",
        "performance",
        "providers",
        "slas",
        "design",
        "robustness",
        "pricing",
        "cost_model",
        "replication",
    ]
    _check_keys("", data, allowed, ["name", "workload", "budget"])
    name = data["name"]
    if not isinstance(name, str) or not name.strip():
        raise SpecError("name", f"must be a non-empty string, got {_type_name(name)}")
    if any(c in name for c in "/\\\0") or name.startswith("."):
        raise SpecError("name", f"{name!r} cannot contain '/' or '\\' or start with '.' (it names a run directory)")
    workload = _workload(data["workload"])

    b = _mapping("budget", data["budget"])
    _check_keys("budget", b, ["monthly_usd", "range"], ["monthly_usd"])
    budget = _number("budget.monthly_usd", b["monthly_usd"], lo=0.0, lo_open=True, hi=MAX_BUDGET_USD)
    if "range" in b:
        lo, hi = _pair("budget.range", b["range"], integer=False, lo=0.0, hi=MAX_BUDGET_USD, lo_open=True)
        if lo == hi:
            raise SpecError("budget.range", "low and high are equal; give a range")
    else:
        lo, hi = 1.0, 500_000.0
    if not lo <= budget <= hi:
        # The paper: a budget outside the range widens it to 1..(b + 500,000).
        lo, hi = min(lo, 1.0), max(hi, budget + 500_000.0)

    min_tp = max_lat = max_p50 = None
    pipeline, duty = 1, 1.0
    peak = DEFAULT_PEAK_FACTOR
    if "performance" in data and data["performance"] is not None:
        perf = _mapping("performance", data["performance"])
        _check_keys(
            "performance",
            perf,
            ["min_throughput", "max_latency_s", "max_latency_p50_s", "pipeline", "network_duty_cycle", "peak_factor"],
            [],
        )
        if "max_latency_p50_s" in perf:
            max_p50 = _number("performance.max_latency_p50_s", perf["max_latency_p50_s"], lo=0.0, lo_open=True)
        if "pipeline" in perf:
            pipeline = int(_number("performance.pipeline", perf["pipeline"], lo=1, hi=MAX_PIPELINE, integer=True))
        if "network_duty_cycle" in perf:
            duty = _number("performance.network_duty_cycle", perf["network_duty_cycle"], lo=0.0, lo_open=True, hi=1.0)
        if "peak_factor" in perf:
            peak = _number("performance.peak_factor", perf["peak_factor"], lo=1.0, hi=MAX_PEAK_FACTOR)
        if "min_throughput" in perf:
            min_tp = _number(
                "performance.min_throughput", perf["min_throughput"], lo=0.0, lo_open=True, hi=MAX_THROUGHPUT_OPS
            )
        if "max_latency_s" in perf:
            max_lat = _number("performance.max_latency_s", perf["max_latency_s"], lo=0.0, lo_open=True)

    providers = (
        _choice_list("providers", data["providers"], PROVIDERS, "provider") if "providers" in data else PROVIDERS
    )
    slas: tuple[str, ...] = ()
    if "slas" in data and data["slas"] not in (None, []):
        slas = _choice_list("slas", data["slas"], SLA_FEATURES, "SLA")
    design = _design(data["design"]) if data.get("design") is not None else DesignSpace()

    noise, kl, tol = 0.0, None, DEFAULT_ROBUST_TOLERANCE
    if data.get("robustness") is not None:
        r = _mapping("robustness", data["robustness"])
        _check_keys("robustness", r, ["noise", "kl_radius", "tolerance"], [])
        if "noise" in r:
            noise = _number("robustness.noise", r["noise"], lo=0.0, hi=0.9)
        if "kl_radius" in r:
            kl = _number("robustness.kl_radius", r["kl_radius"], lo=0.0, hi=20.0)
        if "tolerance" in r:
            tol = _number("robustness.tolerance", r["tolerance"], lo=0.0, hi=1.0)

    pricing = data.get("pricing", str(DEFAULT_PRICE_SET))
    if not isinstance(pricing, str) or pricing not in PRICE_SETS:
        near = difflib.get_close_matches(str(pricing), PRICE_SETS, n=1, cutoff=0.5)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise SpecError("pricing", f"unknown price set {pricing!r} (valid: {', '.join(PRICE_SETS)}){hint}")

    cost_model = _cost_model(data.get("cost_model", CostModel.DISTRIBUTION_AWARE))
    replication = _replication(data["replication"]) if data.get("replication") is not None else Replication()
    if SlaFeature.AVAILABILITY in slas and max(replication.factors) < 2:
        raise SpecError(
            "replication.factors",
            "the availability SLA needs replicas in two or more zones: allow a replication factor of 2 or 3",
        )

    return Spec(
        name=name.strip(),
        workload=workload,
        budget_usd=budget,
        budget_range=(lo, hi),
        min_throughput=min_tp,
        max_latency_s=max_lat,
        providers=providers,
        slas=slas,
        design=design,
        noise=noise,
        kl_radius=kl,
        pricing=pricing,
        cost_model=cost_model,
        tolerance=tol,
        replication=replication,
        pipeline=pipeline,
        max_latency_p50_s=max_p50,
        network_duty_cycle=duty,
        peak_factor=peak,
        raw=data,
    )


def _replication(v: Any) -> Replication:
    r = _mapping("replication", v)
    _check_keys("replication", r, ["factors", "consistency", "clients_across_zones"], [])
    factors = Replication().factors
    if "factors" in r:
        raw = r["factors"]
        if not isinstance(raw, list) or not raw:
            raise SpecError("replication.factors", "must be a non-empty list such as [1, 2, 3]")
        vals = [
            int(_number(f"replication.factors[{i}]", x, lo=1, hi=MAX_REPLICATION_FACTOR, integer=True))
            for i, x in enumerate(raw)
        ]
        if len(set(vals)) != len(vals):
            raise SpecError("replication.factors", "a factor is listed twice")
        factors = tuple(sorted(vals))
    consistency = Consistency.ONE
    if "consistency" in r:
        c = r["consistency"]
        if not isinstance(c, str) or c not in set(Consistency):
            got = repr(c) if isinstance(c, str) else _type_name(c)
            raise SpecError("replication.consistency", f"{got} is not one of {', '.join(Consistency)}")
        consistency = Consistency(c)
    spread = r.get("clients_across_zones", False)
    if not isinstance(spread, bool):
        raise SpecError("replication.clients_across_zones", f"must be true or false, got {_type_name(spread)}")
    return Replication(factors, consistency, spread)


def _cost_model(v: Any) -> CostModel:
    """``cost_model``: a :class:`CostModel`, written with a hyphen or an underscore."""
    name = v.strip().lower().replace("_", "-") if isinstance(v, str) else v
    if name not in COST_MODELS:
        valid = ", ".join(m.replace("-", "_") for m in COST_MODELS)
        raise SpecError("cost_model", f"unknown cost model {v!r} (valid: {valid})")
    return CostModel(name)
