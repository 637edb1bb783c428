"""`cosine whatif`: the best configuration within a budget, or the cheapest reaching a throughput.

By default the asked value is re-solved from the cached tables (solver.resolve: the answer `cosine
solve --budget` gives). With ``saved`` the answer is read from the run directory's frontier, never
a re-solve: the best saved band within the budget (what the report page's slider shows); that path
imports only the run directory's reader, so an answer takes the process start, not the cost
model's import."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from solver.rundir import FrontierRow, load_run
from specs.errors import BudgetTooLow, InputError, check_range
from specs.limits import MAX_THROUGHPUT_OPS
from specs.schema import MAX_BUDGET_USD


def _best(rows: list[FrontierRow], by_budget: bool) -> FrontierRow:
    """Within a budget: the fastest, then the cheapest; for a throughput: the cheapest, then the fastest."""
    key: Callable[[FrontierRow], tuple[float, float]] = (
        (lambda r: (_speed(r), -_cost(r))) if by_budget else (lambda r: (-_cost(r), _speed(r)))
    )
    return max(rows, key=key)


def _cost(r: FrontierRow) -> float:
    """A feasible row's monthly cost (whatif only looks at rows that have one)."""
    assert r.monthly_cost is not None
    return r.monthly_cost


def _speed(r: FrontierRow) -> float:
    assert r.throughput_ops is not None
    return r.throughput_ops


def _summary(r: FrontierRow) -> dict[str, Any]:
    return {"throughput_ops": r.throughput_ops, "monthly_cost": r.monthly_cost}


def whatif(
    run_dir: Path,
    budget: float | None,
    throughput: float | None,
    *,
    saved: bool = False,
    providers: str | None = None,
) -> dict[str, Any]:
    """The best configuration within a budget, or the cheapest reaching a throughput (across the
    providers, or those of ``providers``): re-solved (solver.resolve), or with ``saved`` from the
    saved frontier's bands."""
    if (budget is None) == (throughput is None):
        raise InputError("give exactly one of --budget or --throughput")
    if budget is not None:
        check_range("--budget", budget, 0.0, MAX_BUDGET_USD, lo_open=True)
    if throughput is not None:
        check_range("--throughput", throughput, 0.0, MAX_THROUGHPUT_OPS, lo_open=True)
    if not saved:
        from solver.resolve import parse_providers, resolve_budget, resolve_throughput

        provs = parse_providers(providers)
        if budget is not None:
            return resolve_budget(run_dir, budget, provs)
        assert throughput is not None
        return resolve_throughput(run_dir, throughput, provs)
    rows = feasible_rows(load_run(run_dir).frontier)
    if providers is not None:
        keep = {p.strip() for p in providers.split(",")}
        rows = [r for r in rows if r.provider in keep]
    query = budget if budget is not None else 0.0
    if not rows:
        raise BudgetTooLow(query, None, f"{run_dir}: the saved frontier has no feasible point")
    by_budget = budget is not None
    if budget is not None:
        ok = [r for r in rows if _cost(r) <= budget * (1 + 1e-9)]
        if not ok:  # nothing saved fits: exit 3, as `cosine solve` does below the cheapest configuration
            cheapest = _cost(min(rows, key=_cost))
            raise BudgetTooLow(budget, cheapest, f"the cheapest point of the frontier saved in {run_dir}")
    else:
        assert throughput is not None
        ok = [r for r in rows if _speed(r) >= throughput * (1 - 1e-9)]
        if not ok:
            return _too_fast(rows, throughput)
    return {"query": {"budget": budget, "throughput": throughput}, **_answer(ok, by_budget)}


def feasible_rows(rows: list[FrontierRow]) -> list[FrontierRow]:
    """The frontier rows that hold a configuration (what whatif chooses from)."""
    return [r for r in rows if r.throughput_ops and r.monthly_cost is not None]


def _answer(ok: list[FrontierRow], by_budget: bool) -> dict[str, Any]:
    """The best of ``ok`` and each provider's best."""
    per_provider = {p: _summary(_best([r for r in ok if r.provider == p], by_budget)) for p in {r.provider for r in ok}}
    return {"answer": row_dict(_best(ok, by_budget)), "per_provider": dict(sorted(per_provider.items()))}


def budget_steps(rows: list[FrontierRow]) -> list[tuple[float, dict[str, Any]]]:
    """whatif --budget as a step function: (cost, answer) for each distinct
    monthly cost c of the feasible rows, the answer holding for budgets from c
    up to the next cost (what the what-if page's slider shows)."""
    feas = feasible_rows(rows)
    out = []
    for c in sorted({_cost(r) for r in feas}):
        out.append((c, _answer([r for r in feas if _cost(r) <= c * (1 + 1e-9)], True)))
    return out


def _too_fast(rows: list[FrontierRow], throughput: float) -> dict[str, Any]:
    """No saved configuration reaches the throughput: say so, and show the fastest."""
    near = max(rows, key=_speed)
    note = (
        f"no saved configuration reaches {throughput:,.0f} ops/s; the fastest gives "
        f"{_speed(near):,.0f} ops/s for ${_cost(near):,.2f}"
    )
    return {"query": {"throughput": throughput}, "answer": None, "note": note, "fastest": row_dict(near)}


def row_dict(r: FrontierRow) -> dict[str, Any]:
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
        "grid_gap": r.grid_gap,
        "repaired": r.repaired,
        "polished": r.polished,
        "configuration": r.configuration_dict(),
    }
