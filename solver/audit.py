"""`cosine audit` and `cosine whatif`: read a run directory, never re-solve."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.rundir import FrontierRow, load_run
from specs.errors import InputError
from specs.vocab import SolverStatus


@dataclass
class AuditRow:
    """One band's log record and what is wrong with its certificate (empty: nothing)."""

    record: dict[str, Any]
    flags: list[str]


def _check_threshold(name: str, value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{name} must be a finite non-negative number, got {value}")


def audit(run_dir: Path, max_gap: float, max_approx_error: float) -> list[AuditRow]:
    """Flag bands whose certificate is missing or over the thresholds."""
    _check_threshold("--max-gap", max_gap)
    _check_threshold("--max-approx-error", max_approx_error)
    run = load_run(run_dir)
    rows = []
    for r in run.log:
        flags = []
        status = r.get("status")
        if status in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            for label, key, limit in (("gap", "mip_gap", max_gap), ("approx error", "approx_error", max_approx_error)):
                v = r.get(key)
                if v is None or v > limit:
                    flags.append(f"{label} {v if v is None else f'{v:.2e}'} > {limit:g}")
            if status == SolverStatus.FEASIBLE:
                flags.append("not proven optimal")
        elif status != SolverStatus.INFEASIBLE:
            flags.append(f"status {status}")
        rows.append(AuditRow(r, flags))
    return rows


def _best(rows: list[FrontierRow], by_budget: bool) -> FrontierRow:
    """Within a budget: the fastest, then the cheapest; for a throughput: the cheapest, then the fastest."""
    key: Callable[[FrontierRow], tuple[float, float]] = (
        (lambda r: (r.throughput_ops or 0.0, -(r.monthly_cost or 0.0)))
        if by_budget
        else (lambda r: (-(r.monthly_cost or 0.0), r.throughput_ops or 0.0))
    )
    return max(rows, key=key)


def _summary(r: FrontierRow) -> dict[str, Any]:
    return {"throughput_ops": r.throughput_ops, "monthly_cost": r.monthly_cost}


def whatif(run_dir: Path, budget: float | None, throughput: float | None) -> dict[str, Any]:
    """Answer from the saved frontier: best point within a budget, or the
    cheapest point reaching a throughput (across providers)."""
    if (budget is None) == (throughput is None):
        raise InputError("give exactly one of --budget or --throughput")
    for name, v in (("--budget", budget), ("--throughput", throughput)):
        if v is not None and (not math.isfinite(v) or v <= 0):
            raise InputError(f"{name} must be a positive number, got {v}")
    rows = [r for r in load_run(run_dir).frontier if r.throughput_ops and r.monthly_cost is not None]
    if not rows:
        raise InputError(f"{run_dir}: the frontier has no feasible point")
    by_budget = budget is not None
    if by_budget:
        ok = [r for r in rows if (r.monthly_cost or 0.0) <= (budget or 0.0) * (1 + 1e-9)]
    else:
        ok = [r for r in rows if (r.throughput_ops or 0.0) >= (throughput or 0.0) * (1 - 1e-9)]
    if not ok:
        return _no_answer(rows, budget, throughput)
    best = _best(ok, by_budget)
    per_provider = {p: _summary(_best([r for r in ok if r.provider == p], by_budget)) for p in {r.provider for r in ok}}
    return {
        "query": {"budget": budget, "throughput": throughput},
        "answer": _row_dict(best),
        "per_provider": dict(sorted(per_provider.items())),
    }


def _no_answer(rows: list[FrontierRow], budget: float | None, throughput: float | None) -> dict[str, Any]:
    """Nothing saved meets the query: say so, and show the nearest point (the cheapest, or the fastest)."""
    if budget is not None:
        near = min(rows, key=lambda r: r.monthly_cost or 0.0)
        note = f"no saved configuration costs at most ${budget:,.2f}; the cheapest costs ${near.monthly_cost:,.2f}"
        return {"query": {"budget": budget}, "answer": None, "note": note, "cheapest": _row_dict(near)}
    near = max(rows, key=lambda r: r.throughput_ops or 0.0)
    note = (
        f"no saved configuration reaches {throughput:,.0f} ops/s; the fastest gives "
        f"{near.throughput_ops:,.0f} ops/s for ${near.monthly_cost:,.2f}"
    )
    return {"query": {"throughput": throughput}, "answer": None, "note": note, "fastest": _row_dict(near)}


def _row_dict(r: FrontierRow) -> dict[str, Any]:
    """A frontier row as the JSON answer shows it (``class`` spelled as in the file)."""
    return {
        "band": r.band,
        "budget": r.budget,
        "provider": r.provider,
        "status": r.status,
        "monthly_cost": r.monthly_cost,
        "throughput_ops": r.throughput_ops,
        "latency_s": r.latency_s,
        "class": r.design_class,
        "gap": r.gap,
        "approx_error": r.approx_error,
        "repaired": r.repaired,
        "configuration": r.configuration_dict(),
    }
