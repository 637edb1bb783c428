"""`cosine whatif` at the asked budget or throughput, exactly: re-solved from the cached tables.

A saved frontier answers only at its bands; between two bands the best cluster changes with every
node the budget buys (solver.bottleneck: any node count). So a what-if re-solves what `cosine solve
--budget B` solves for B: the spec and the solve's settings come from the run directory
(solution.json, checked by solver.rundir.load_run), the design tables from the table cache
(solver.table_cache; rebuilt when it lacks them) and the exact re-evaluations from theirs. The
answer at B depends on the bands at or below B only (each band is solved alone; the robust rule's
envelope and the monotone repair look at cheaper bands), so B is solved, and the bands of the grid
`solve --budget B` uses below it too when the robust rule's envelope could matter
(:func:`_envelope_idle`) or the method is the MIP (whose answers, to its gap, start from the
cheaper band's); the answer is that solve's, configuration, bill, exact throughput and certificate alike
(tests/test_certified_answers.py). ``--throughput Y`` is the cheapest configuration
whose band-model throughput reaches Y (solver.bottleneck.cheapest_reaching), as `cosine solve`'s
cheapest configuration meeting the need.

Tables and run directories read in a process are kept for the next what-if of the same run
(:data:`_TABLES`, :data:`_RUNS`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from cost_models.pricing.catalog import Catalog, load_catalog
from cost_models.robust import is_robust
from solver.backends import get_backend
from solver.frontier import DEFAULT_BANDS, Frontier, Point, band_grid
from solver.replicas import PlanTables, cheapest_of_plans, plan_tables, solve_plans
from solver.rundir import FRONTIER, LOG, SOLUTION, RunDir, load_run
from solver.table_cache import TableCache
from specs.errors import BudgetTooLow, InputError
from specs.io import to_json
from specs.schema import Spec, parse_providers_flag, validate
from specs.vocab import BackendName, Method, Provider

#: Every replication plan's tables already read by this process, per (spec, price set, providers).
_TABLES: dict[tuple[str, str, tuple[str, ...]], list[PlanTables]] = {}
#: Run directories already read and checked by this process, per path and their files' stamps.
_RUNS: dict[tuple[str, tuple[tuple[int, int], ...]], RunDir] = {}


def _load(run_dir: Path) -> RunDir:
    """:func:`solver.rundir.load_run`, once per run directory and version of its files (mtime and
    size of solution.json, frontier.parquet and the solver log)."""
    try:
        stamp = tuple((st.st_mtime_ns, st.st_size) for st in ((run_dir / n).stat() for n in (SOLUTION, FRONTIER, LOG)))
    except OSError:
        return load_run(run_dir)  # it names what is missing
    key = (str(run_dir.resolve()), stamp)
    if key not in _RUNS:
        _RUNS[key] = load_run(run_dir)
    return _RUNS[key]


def _setting(run: RunDir, providers: tuple[str, ...] | None) -> tuple[Spec, Catalog, tuple[str, ...], list[PlanTables]]:
    sol = run.solution
    try:
        spec = validate(sol.spec_raw)
    except InputError as exc:
        raise InputError(f"{run.path}: spec_raw: {exc}") from None
    saved = tuple(str(p) for p in (sol.frontier_check.providers if sol.frontier_check else spec.providers))
    provs = saved if providers is None else providers
    bad = [p for p in provs if p not in saved]
    if bad:
        raise InputError(f"--providers: {', '.join(bad)} not solved in {run.path} ({', '.join(saved)})")
    catalog = load_catalog(sol.pricing)
    key = (to_json(sol.spec_raw, indent=None), str(sol.pricing), provs)
    if key not in _TABLES:
        _TABLES[key] = plan_tables(spec, catalog, provs, cache=TableCache())
    return spec, catalog, provs, _TABLES[key]


def point_dict(pt: Point) -> dict[str, Any]:
    """A re-solved point as the JSON answer shows it (solver.whatif.row_dict's keys, plus its
    certificate's grid gap)."""
    r = pt.result
    x = pt.throughput if pt.chosen else None
    return {
        "band": pt.band,
        "budget": pt.budget,
        "provider": pt.provider,
        "status": str(pt.status),
        "monthly_cost": pt.cost if pt.chosen else None,
        "throughput_ops": x,
        "latency_s": 1.0 / x if x else None,
        "class": pt.dominant_class(),
        "gap": None if r is None or not math.isfinite(r.gap) else r.gap,
        "approx_error": pt.approx_error if math.isfinite(pt.approx_error) else None,
        "grid_gap": pt.grid_gap if math.isfinite(pt.grid_gap) else None,
        "repaired": pt.repaired,
        "polished": pt.polished,
        "replication": pt.plan.label if pt.plan is not None else None,
        "configuration": pt.configuration(),
    }


def resolve_budget(run_dir: Path, budget: float, providers: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The answer of `cosine solve --budget BUDGET` (with the run's settings), and each provider's."""
    run = _load(run_dir)
    sol = run.solution
    spec, catalog, provs, runs = _setting(run, providers)
    bands = sol.search.band_count if sol.search and sol.search.band_count else DEFAULT_BANDS
    lo, hi = spec.budget_range
    if budget > hi:
        hi = budget + 500_000.0  # as solve_frontier widens it
    grid = band_grid(lo, hi, bands, budget)
    grid = grid[grid <= budget]
    method = Method(sol.certificate.method)
    backend = get_backend(BackendName(sol.certificate.backend) if method != Method.EXHAUSTIVE else BackendName.HIGHS)
    if grid.size == 0:  # below the spec's budget range: `cosine solve` has no band there either
        low = cheapest_of_plans(catalog, runs, backend)
        raise BudgetTooLow(budget, low.cost if low else None, "below the spec's budget range")
    cache = TableCache()  # its directory holds the re-evaluation caches too
    solve = tuple(p for p in provs if any(p in r.tables.contexts for r in runs))

    def frontier(budgets: np.ndarray) -> Frontier:
        pf = solve_plans(spec, catalog, runs, backend, cache=cache, method=method, budgets=budgets)
        pf.save()
        return pf.merged

    # B alone first where it is likely to be the grid's answer: not with the MIP (its answers, to
    # its gap, start from the cheaper band's), nor with robustness and several providers (the
    # headline floor, the fastest provider's, leaves the others' rows short of their nominal ones)
    alone = method != Method.MIP and (not is_robust(spec) or len(solve) == 1)
    fr = frontier(np.asarray(grid[-1:] if alone else grid))
    if len(fr.budgets) < grid.size and not _envelope_idle(fr):
        fr = frontier(np.asarray(grid))
    answer = fr.best[-1]
    if answer.chosen is None:
        low = cheapest_of_plans(catalog, runs, backend)
        raise BudgetTooLow(budget, low.cost if low else None)
    return {
        "query": {"budget": budget, "throughput": None},
        "answer": point_dict(answer) | {"band": int(grid.size - 1)},
        "per_provider": {p: _summary(pts[-1]) for p, pts in sorted(fr.points.items())},
        "solved": f"re-solved at ${budget:,.2f} from the cached tables"
        + (
            f" (with the {len(fr.budgets) - 1} bands below it, as `cosine solve --budget` solves them)"
            if len(fr.budgets) > 1
            else ""
        ),
    }


def _envelope_idle(fr: Frontier) -> bool:
    """Whether B's answers alone are what the bands below it would give (with an exact method).

    The bands below B reach B's answers through the robust rule's envelope only (the monotone
    repair never acts on exact answers: a band's feasible set holds every cheaper band's): a
    cheaper band's robust answer is carried when its band-model throughput is higher than B's. It
    is no higher than the nominal optimum there, which is no higher than the nominal one at B; so a
    provider whose robust answers at B (its own floor's and the headline floor's) are as fast as
    its nominal one is never carried past. The check reads the answers before solver.grid's
    polishing: a polished answer makes it fail. Without robustness there is no envelope."""
    if not fr.robust:
        return True
    for p, nominal in fr.nominal.items():
        rows = (nominal[-1], fr.points[p][-1], fr.headline[p][-1])
        if any(pt.polished for pt in rows):
            return False
        nom = rows[0].chosen.throughput_kops if rows[0].chosen else 0.0
        for pt in rows[1:]:
            mine = pt.chosen.throughput_kops if pt.chosen else 0.0
            if mine < nom * (1 - 1e-9):
                return False
    return True


def resolve_throughput(run_dir: Path, throughput: float, providers: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The cheapest configuration whose expected throughput reaches ``throughput`` ops/s."""
    run = _load(run_dir)
    _, catalog, provs, runs = _setting(run, providers)
    backend = get_backend(BackendName.HIGHS)
    per: dict[str, Any] = {}
    best: Point | None = None
    for p in provs:
        pt = cheapest_of_plans(catalog, runs, backend, min_throughput=throughput, providers=(p,))
        if pt is not None and pt.chosen is not None:
            per[p] = _summary(pt)
            if best is None or pt.cost < best.cost:
                best = pt
    if best is None:
        return {
            "query": {"budget": None, "throughput": throughput},
            "answer": None,
            "note": f"no configuration of the search space reaches {throughput:,.0f} ops/s",
        }
    return {
        "query": {"budget": None, "throughput": throughput},
        "answer": point_dict(best),
        "per_provider": dict(sorted(per.items())),
        "solved": "the cheapest cluster whose band-model throughput reaches it, from the cached tables",
    }


def _summary(pt: Point) -> dict[str, Any]:
    return {
        "throughput_ops": pt.throughput if pt.chosen else None,
        "monthly_cost": pt.cost if pt.chosen else None,
        "status": str(pt.status),
        "rule": pt.rule,
    }


def parse_providers(text: str | None) -> tuple[str, ...] | None:
    """``--providers aws,gcp`` of `cosine whatif` (checked against the run's by :func:`_setting`)."""
    return None if text is None else parse_providers_flag(text, tuple(Provider), "the providers")
