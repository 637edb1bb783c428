"""The run directory `cosine solve` writes, and the sweep file: the contract
other commands (audit, whatif, render, plot) and other tools read.

``RUN_DIR/``
  ``solution.json``     the answer at the spec's budget (``version`` = :data:`SOLUTION_VERSION`)
  ``frontier.parquet``  one :class:`FrontierRow` per band x provider
  ``baselines.parquet`` one :class:`BaselineRow` per preset x band x provider
  ``solver.log.jsonl``  one :class:`LogRecord` per band x provider
  ``solver/``           each band's raw solver log

Every file carries a format version (solution.json and every log record a
``version`` field, the parquet files their row type and version in the schema
metadata, :mod:`specs.io`). Every reader validates what it reads (version,
schema, the range of every number, names against the vocabulary and the
catalog) and :func:`load_run` cross-checks the files against each other, so a
file edited by hand or copied from another solve is refused with one
:class:`~specs.errors.InputError` naming it, before anything uses it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specs.errors import InputError, check_range
from specs.io import finite, read_json, read_rows, require, to_json, write_json, write_rows, write_text
from specs.limits import (
    MAX_BLOCK_BYTES,
    MAX_BLOOM_BITS,
    MAX_BUFFER_BYTES,
    MAX_CLUSTER_SIZE,
    MAX_ENTRIES,
    MAX_LEVELS,
    MAX_SIZE_RATIO,
    MAX_THREADS,
    MIN_BLOCK_BYTES,
)
from specs.vocab import (
    BLOOM_ALLOCATIONS,
    DESIGN_CLASSES,
    PRESETS,
    PRICE_SETS,
    PROVIDERS,
    BackendName,
    Method,
    SolverStatus,
)

if TYPE_CHECKING:
    from solver.frontier import Frontier, Point

#: solution.json's format version (bumped when a field changes meaning).
SOLUTION_VERSION = 1
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
        }

    def configuration_dict(self) -> dict[str, Any]:
        return json.loads(self.configuration) if self.configuration else {}

    def check(self) -> None:
        """Values a solve writes (read_rows calls this on every row)."""
        require(finite(self.budget) and self.budget > 0, f"budget {self.budget} is not a positive number")
        require(self.provider in PROVIDERS, f"unknown provider {self.provider!r}")
        require(self.status in SOLVER_STATUSES, f"unknown status {self.status!r}")
        for name in ("monthly_cost", "throughput_ops", "latency_s", "gap", "approx_error"):
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

    def check(self) -> None:
        require(self.preset in PRESETS, f"unknown preset {self.preset!r}")
        require(self.band >= 0, f"band {self.band} is negative")
        require(finite(self.budget) and self.budget > 0, f"budget {self.budget} is not a positive number")
        require(self.provider in PROVIDERS, f"unknown provider {self.provider!r}")
        for name in ("monthly_cost", "throughput_ops"):
            require(finite(getattr(self, name)), f"{name} {getattr(self, name)} is not a finite non-negative number")
        require(self.count >= 1, f"count {self.count} is not positive")
        require(self.design_class in DESIGN_CLASSES, f"unknown design class {self.design_class!r}")


#: Keys every solver.log.jsonl record carries.
LOG_KEYS = ("version", "band", "provider", "budget", "status", "mip_gap", "approx_error", "backend", "method")
SOLVER_STATUSES = tuple(SolverStatus)
#: Back ends a certificate may name (the MIP back ends, or enumeration).
CERTIFIERS = (*tuple(BackendName), Method.EXHAUSTIVE)


@dataclass
class RunDir:
    """A run directory as read back."""

    path: Path
    solution: dict[str, Any]
    log: list[dict[str, Any]]
    frontier: list[FrontierRow]
    baselines: list[BaselineRow] = dataclasses.field(default_factory=list)


def write_run(run_dir: Path, fr: Frontier, solution: dict[str, Any], mix: dict[str, float]) -> None:
    """Write solution.json, frontier.parquet, baselines.parquet and solver.log.jsonl (each record
    with the envelope check of its band's configuration on ``mix``)."""
    # the writer's only use of the CPU model: the readers (`cosine whatif`, `audit`) do not pay its import
    from cost_models.envelope import check_nodes

    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / SOLUTION, solution)
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
                rec["companions"] = {
                    str(q.objective): {
                        k: q.log_record(fr.backend, fr.method, None)[k]
                        for k in ("status", "mip_gap", "approx_error", "throughput_exact_ops", "perturbed_exact_ops")
                    }
                    for q in (nom, per)
                }
            env = check_nodes(pt.exact.per_node, mix) if pt.chosen and pt.exact else None
            rec["envelope_inside"] = None if env is None else env["inside"]
            rec["envelope"] = None if env is None else env["nodes"]
            rows.append(FrontierRow(**PointColumns.of(pt), band=pt.band, repaired=pt.repaired, **extra))
            recs.append({"version": LOG_VERSION, **rec})
    write_rows(run_dir / FRONTIER, rows, FrontierRow)
    write_rows(run_dir / BASELINES, [r for rs in fr.baselines.values() for r in rs], BaselineRow)
    write_text(run_dir / LOG, "".join(to_json(rec, indent=None) + "\n" for rec in recs))


def _check_design(where: str, d: Any, vm_names: set[str]) -> None:
    """One entry of solution.json's ``designs``: what `cosine render` turns into an engine.toml."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: not a JSON object")
    missing = [k for k in DESIGN_KEYS if k not in d]
    if missing:
        raise InputError(f"{where}: no {', '.join(missing)}")
    if d["vm_type"] not in vm_names:
        raise InputError(f"{where}.vm_type: {d['vm_type']!r} is not a VM of the solution's provider and price set")
    if d["class"] not in DESIGN_CLASSES:
        raise InputError(f"{where}.class: unknown design class {d['class']!r} (valid: {', '.join(DESIGN_CLASSES)})")
    if not isinstance(d["lsh"], bool):
        raise InputError(f"{where}.lsh: must be true or false, got {d['lsh']!r}")
    if d["bloom_allocation"] not in BLOOM_ALLOCATIONS:
        raise InputError(f"{where}.bloom_allocation: must be {' or '.join(BLOOM_ALLOCATIONS)}")
    check_range(f"{where}.count", d["count"], 1, MAX_CLUSTER_SIZE, integer=True)
    check_range(f"{where}.T", d["T"], 2, MAX_SIZE_RATIO, integer=True)
    check_range(f"{where}.K", d["K"], 1, max(1, d["T"] - 1), integer=True)
    check_range(f"{where}.Z", d["Z"], 1, max(1, d["T"] - 1), integer=True)
    check_range(f"{where}.L", d["L"], 0, MAX_LEVELS, integer=True)
    check_range(f"{where}.Y", d["Y"], 0, d["L"], integer=True)
    check_range(f"{where}.buffer_bytes", d["buffer_bytes"], 0, MAX_BUFFER_BYTES, lo_open=True)
    check_range(f"{where}.block_bytes", d["block_bytes"], MIN_BLOCK_BYTES, MAX_BLOCK_BYTES, integer=True)
    check_range(f"{where}.cache_bytes", d["cache_bytes"], 0, MAX_BUFFER_BYTES)
    check_range(f"{where}.entries_per_node", d["entries_per_node"], 0, MAX_ENTRIES, lo_open=True)
    check_range(f"{where}.threads", d["threads"], 1, MAX_THREADS, integer=True)
    check_range(f"{where}.bloom_bits_per_key", d["bloom_bits_per_key"], 0, MAX_BLOOM_BITS)
    bits = d["bloom_bits_per_level"]
    if not isinstance(bits, list) or len(bits) > MAX_LEVELS:
        raise InputError(f"{where}.bloom_bits_per_level: must be a list of at most {MAX_LEVELS} numbers")
    for j, b in enumerate(bits):
        check_range(f"{where}.bloom_bits_per_level[{j}]", b, 0, MAX_BLOOM_BITS)


#: Keys of each ``designs`` entry that readers use.
DESIGN_KEYS = (
    "vm_type",
    "count",
    "class",
    "T",
    "K",
    "Z",
    "L",
    "Y",
    "lsh",
    "buffer_bytes",
    "block_bytes",
    "cache_bytes",
    "entries_per_node",
    "threads",
    "bloom_bits_per_key",
    "bloom_bits_per_level",
    "bloom_allocation",
)


def read_solution(path: Path) -> dict[str, Any]:
    """A solution.json, checked for its version, its spec, and every field a reader uses."""
    from cost_models.pricing.catalog import load_catalog
    from specs.schema import validate

    sol = read_json(path, "a cosine solution.json")
    if not isinstance(sol, dict):
        raise InputError(f"{path}: not a cosine solution.json (not a JSON object)")
    if sol.get("version") != SOLUTION_VERSION:
        raise InputError(
            f"{path}: solution.json version {sol.get('version')!r}, this cosine reads version {SOLUTION_VERSION}"
        )
    for k in ("spec", "spec_raw", "budget", "provider", "pricing", "vms", "designs", "monthly_cost", "predicted"):
        if k not in sol:
            raise InputError(f"{path}: not a cosine solution.json (no {k!r})")
    if not isinstance(sol["spec_raw"], dict):
        raise InputError(f"{path}: spec_raw is not a spec")
    try:
        spec = validate(sol["spec_raw"])
    except InputError as exc:
        raise InputError(f"{path}: spec_raw: {exc}") from None
    if sol["spec"] != spec.name:
        raise InputError(f"{path}: spec {sol['spec']!r} but spec_raw is {spec.name!r}")
    if sol["provider"] not in spec.providers:
        raise InputError(f"{path}: provider {sol['provider']!r} is not one of the spec's ({', '.join(spec.providers)})")
    if sol["pricing"] not in PRICE_SETS:
        raise InputError(f"{path}: unknown price set {sol['pricing']!r}")
    check_range(f"{path}: budget", sol["budget"], 0, lo_open=True)
    mc, pred, cert = sol["monthly_cost"], sol["predicted"], sol.get("certificate")
    if not isinstance(mc, dict) or not isinstance(pred, dict) or not isinstance(cert, dict):
        raise InputError(f"{path}: monthly_cost, predicted and certificate must be JSON objects")
    for k in ("compute", "storage", "sla", "total"):
        check_range(f"{path}: monthly_cost.{k}", mc.get(k), 0)
    check_range(f"{path}: predicted.throughput_ops", pred.get("throughput_ops"), 0)
    for k in ("mip_gap", "approx_error"):
        if cert.get(k) is not None:
            check_range(f"{path}: certificate.{k}", cert[k], 0)
    if cert.get("backend") not in CERTIFIERS:
        raise InputError(f"{path}: certificate.backend {cert.get('backend')!r} is not a cosine back end")
    designs = sol["designs"]
    if not isinstance(designs, list) or not designs:
        raise InputError(f"{path}: designs must be a non-empty list")
    vm_names = {v.name for v in load_catalog(sol["pricing"]).vms.get(sol["provider"], [])}
    for i, d in enumerate(designs):
        _check_design(f"{path}: designs[{i}]", d, vm_names)
    return sol


def _check_log_record(where: str, rec: Any) -> dict[str, Any]:
    missing = [k for k in LOG_KEYS if not isinstance(rec, dict) or k not in rec]
    if missing:
        raise InputError(f"{where}: not a solver log record (no {', '.join(missing)})")
    if rec["version"] != LOG_VERSION:
        raise InputError(f"{where}: solver log version {rec['version']!r}, this cosine reads version {LOG_VERSION}")
    if rec["provider"] not in PROVIDERS:
        raise InputError(f"{where}: unknown provider {rec['provider']!r}")
    if rec["status"] not in SOLVER_STATUSES:
        raise InputError(f"{where}: unknown status {rec['status']!r}")
    if rec["backend"] not in CERTIFIERS:
        raise InputError(f"{where}: backend {rec['backend']!r} is not a cosine back end")
    check_range(f"{where}: band", rec["band"], 0, integer=True)
    check_range(f"{where}: budget", rec["budget"], 0, lo_open=True)
    for k in ("mip_gap", "approx_error", "monthly_cost"):
        if rec.get(k) is not None:
            check_range(f"{where}: {k}", rec[k], 0)
    return rec


def read_log(path: Path) -> list[dict[str, Any]]:
    """solver.log.jsonl: one record per band x provider, each with :data:`LOG_KEYS` in range."""
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
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise InputError(f"{path}:{i}: not a JSON record (the file is corrupt)") from None
        recs.append(_check_log_record(f"{path}:{i}", rec))
    if not recs:
        raise InputError(f"{path}: the solver log is empty")
    return recs


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def cross_check(run_dir: Path, sol: dict[str, Any], log: list[dict[str, Any]], rows: list[FrontierRow]) -> None:
    """The files of one solve agree: every frontier row has its log record (same status, budget,
    cost, gap and error), and solution.json's configuration is one of the frontier's points."""
    by_key = {(r["band"], r["provider"]): r for r in log}
    if len(by_key) != len(log):
        raise InputError(f"{run_dir}/{LOG}: a band is logged twice")
    keys = {(r.band, r.provider) for r in rows}
    if len(keys) != len(rows) or keys != set(by_key):
        raise InputError(f"{run_dir}: {FRONTIER} and {LOG} list different bands (the files come from different solves)")
    for r in rows:
        rec = by_key[(r.band, r.provider)]
        pairs = (
            ("status", r.status == rec["status"]),
            ("budget", _same(r.budget, rec["budget"])),
            ("monthly_cost", _same(r.monthly_cost, rec.get("monthly_cost"))),
            ("gap", _same(r.gap, rec["mip_gap"])),
            ("approx_error", _same(r.approx_error, rec["approx_error"])),
        )
        bad = [name for name, ok in pairs if not ok]
        if bad:
            raise InputError(
                f"{run_dir}: {FRONTIER} and {LOG} disagree at band {r.band} ({r.provider}) on {', '.join(bad)} "
                "(a file was edited or comes from another solve)"
            )
    backends = {rec["backend"] for rec in log}
    cert = sol.get("certificate", {})
    if backends != {cert.get("backend")}:
        raise InputError(
            f"{run_dir}: {SOLUTION} was certified by {cert.get('backend')}, {LOG} by {', '.join(backends)}"
        )
    total, x = sol["monthly_cost"]["total"], sol["predicted"]["throughput_ops"]
    match = [
        r
        for r in rows
        if r.provider == sol["provider"]
        and r.monthly_cost is not None
        and math.isclose(r.monthly_cost, total, rel_tol=1e-6, abs_tol=0.01)
        and r.throughput_ops is not None
        and math.isclose(r.throughput_ops, x, rel_tol=1e-6)
    ]
    if not match:
        raise InputError(
            f"{run_dir}: {SOLUTION}'s configuration ({sol['provider']}, ${total:,.2f}/month, {x:,.0f} ops/s) "
            f"is not a point of {FRONTIER} (a file was edited or comes from another solve)"
        )


def load_run(run_dir: Path, *, baselines: bool = False) -> RunDir:
    """Read, validate and cross-check a run directory written by `cosine solve`."""
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a run directory (run `cosine solve` first)")
    missing = [n for n in (SOLUTION, FRONTIER, LOG) if not (run_dir / n).is_file()]
    if missing:
        raise InputError(f"{run_dir}: missing {', '.join(missing)} (run `cosine solve` first)")
    sol = read_solution(run_dir / SOLUTION)
    log = read_log(run_dir / LOG)
    rows = read_rows(run_dir / FRONTIER, FrontierRow, "frontier.parquet")
    cross_check(run_dir, sol, log, rows)
    base = read_rows(run_dir / BASELINES, BaselineRow, "baselines.parquet") if baselines else []
    budgets = {r.band: r.budget for r in rows}
    for b in base:
        if b.band not in budgets or not _same(b.budget, budgets[b.band]):
            raise InputError(f"{run_dir}/{BASELINES}: band {b.band} is not a band of {FRONTIER}")
    return RunDir(run_dir, sol, log, rows, base)
