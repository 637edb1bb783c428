"""The run directory `cosine solve` writes, and the sweep file: the contract
other commands (audit, whatif, render, plot) and other tools read.

``RUN_DIR/``
  ``solution.json``     the answer at the spec's budget (``version`` = :data:`SOLUTION_VERSION`)
  ``frontier.parquet``  one :class:`FrontierRow` per band x provider
  ``baselines.parquet`` one :class:`BaselineRow` per preset x band x provider
  ``solver.log.jsonl``  one :class:`LogRecord` per band x provider
  ``solver/``           each band's raw solver log

Every reader validates what it reads (schema, version, required keys) and
raises an :class:`~specs.errors.InputError` naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solver.frontier import Frontier, Point
from specs.errors import InputError
from specs.io import read_json, read_rows, to_json, write_json, write_rows, write_text

#: solution.json's format version (bumped when a field changes meaning).
SOLUTION_VERSION = 1
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
            "approx_error": None if math.isnan(pt.approx_error) else pt.approx_error,
            "configuration": to_json(pt.configuration(), indent=None),
        }

    def configuration_dict(self) -> dict[str, Any]:
        return json.loads(self.configuration) if self.configuration else {}


@dataclass
class FrontierRow(PointColumns):
    """One band of one provider in frontier.parquet."""

    band: int = 0
    repaired: bool = False  # took an earlier band's configuration to keep the frontier monotone


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


#: Keys every solver.log.jsonl record carries.
LOG_KEYS = ("band", "provider", "budget", "status", "mip_gap", "approx_error", "backend", "method")


@dataclass
class RunDir:
    """A run directory as read back."""

    path: Path
    solution: dict[str, Any]
    log: list[dict[str, Any]]
    frontier: list[FrontierRow]
    baselines: list[BaselineRow] = dataclasses.field(default_factory=list)


def write_run(run_dir: Path, fr: Frontier, solution: dict[str, Any]) -> None:
    """Write solution.json, frontier.parquet, baselines.parquet and solver.log.jsonl."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / SOLUTION, solution)
    rows, recs = [], []
    for p, pts in fr.points.items():
        for pt in pts:
            rows.append(FrontierRow(**PointColumns.of(pt), band=pt.band, repaired=pt.repaired))
            log = f"{LOG_DIR}/band{pt.band:02d}_{p}.log"
            recs.append(pt.log_record(fr.backend, fr.method, log if (run_dir / log).exists() else None))
    write_rows(run_dir / FRONTIER, rows, FrontierRow)
    write_rows(run_dir / BASELINES, [r for rs in fr.baselines.values() for r in rs], BaselineRow)
    write_text(run_dir / LOG, "".join(to_json(rec, indent=None) + "\n" for rec in recs))


def read_solution(path: Path) -> dict[str, Any]:
    """A solution.json, checked for its version and the fields every reader needs."""
    sol = read_json(path, "a cosine solution.json")
    if not isinstance(sol, dict):
        raise InputError(f"{path}: not a cosine solution.json (not a JSON object)")
    if sol.get("version") != SOLUTION_VERSION:
        raise InputError(
            f"{path}: solution.json version {sol.get('version')!r}, this cosine reads version {SOLUTION_VERSION}"
        )
    for k in ("spec", "budget", "provider", "vms", "designs", "monthly_cost", "predicted", "certificate"):
        if k not in sol:
            raise InputError(f"{path}: not a cosine solution.json (no {k!r})")
    return sol


def read_log(path: Path) -> list[dict[str, Any]]:
    """solver.log.jsonl: one record per band x provider, each with :data:`LOG_KEYS`."""
    if not path.is_file():
        raise InputError(f"{path}: no such file (the solver log)")
    recs = []
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise InputError(f"{path}:{i}: not a JSON record (the file is corrupt)") from None
        missing = [k for k in LOG_KEYS if not isinstance(rec, dict) or k not in rec]
        if missing:
            raise InputError(f"{path}:{i}: not a solver log record (no {', '.join(missing)})")
        recs.append(rec)
    if not recs:
        raise InputError(f"{path}: the solver log is empty")
    return recs


def load_run(run_dir: Path, *, baselines: bool = False) -> RunDir:
    """Read and validate a run directory written by `cosine solve`."""
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a run directory (run `cosine solve` first)")
    missing = [n for n in (SOLUTION, FRONTIER, LOG) if not (run_dir / n).is_file()]
    if missing:
        raise InputError(f"{run_dir}: missing {', '.join(missing)} (run `cosine solve` first)")
    sol = read_solution(run_dir / SOLUTION)
    log = read_log(run_dir / LOG)
    rows = read_rows(run_dir / FRONTIER, FrontierRow, "frontier.parquet")
    if len(rows) != len(log):
        raise InputError(
            f"{run_dir}: frontier.parquet has {len(rows)} rows but solver.log.jsonl {len(log)} records "
            "(the files come from different solves)"
        )
    base = read_rows(run_dir / BASELINES, BaselineRow, "baselines.parquet") if baselines else []
    return RunDir(run_dir, sol, log, rows, base)
