"""`cosine audit`: check a run directory's certificates (never a re-solve); `cosine whatif` is
solver.whatif."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cost_models.envelope import describe_outside
from solver.rundir import LogRecord, load_run
from specs.errors import check_range
from specs.vocab import SolverStatus

#: Largest --max-gap and --max-approx-error: a relative gap or error above 100% accepts any
#: certificate (a check that can never fail).
MAX_THRESHOLD = 1.0


@dataclass
class AuditRow:
    """One band's log record and what is wrong with its certificate (empty: nothing)."""

    record: LogRecord
    flags: list[str]


#: Default --max-grid-gap: the most any other count of the answer's nodes may beat it by (solver.grid).
DEFAULT_MAX_GRID_GAP = 0.01


def audit(
    run_dir: Path, max_gap: float, max_approx_error: float, max_grid_gap: float = DEFAULT_MAX_GRID_GAP
) -> list[AuditRow]:
    """Flag bands whose certificate is missing or over the thresholds (MIP gap, approximation
    error, grid gap), or whose prediction lies outside the calibrated envelope (cost_models.envelope);
    a band a rule excludes is not flagged (its record names the rule)."""
    check_range("--max-gap", max_gap, 0.0, MAX_THRESHOLD)
    check_range("--max-approx-error", max_approx_error, 0.0, MAX_THRESHOLD)
    check_range("--max-grid-gap", max_grid_gap, 0.0, MAX_THRESHOLD)
    run = load_run(run_dir)
    rows = []
    for r in run.log:
        flags = []
        status = r.status
        if status.has_solution:
            checks = (
                ("gap", r.mip_gap, max_gap),
                ("approx error", r.approx_error, max_approx_error),
                ("grid gap", r.grid_gap, max_grid_gap),
            )
            for label, v, limit in checks:
                if v is None or v > limit:
                    flags.append(f"{label} {v if v is None else f'{v:.2e}'} > {limit:g}")
            if status == SolverStatus.FEASIBLE:
                flags.append("not proven optimal")
            if r.envelope_inside is False:
                flags += [f"outside the calibrated envelope: {d}" for d in describe_outside(r.envelope or [])]
        elif status not in (SolverStatus.INFEASIBLE, SolverStatus.EXCLUDED):
            flags.append(f"status {status}")
        rows.append(AuditRow(r, flags))
    return rows
