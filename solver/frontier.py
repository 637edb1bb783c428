"""Budget bands -> a certified cost/throughput Pareto frontier.

Per provider the band MIP (solver.model) is solved for a geometric grid of
budgets (plus the spec's budget), in increasing order, each band keeping only
the columns that can beat the previous band's answer. ``Method.THRESHOLD`` (the
default) solves each band by its bottleneck (solver.bottleneck: exact, the back
end solving only the covering subproblems the closed form does not cover);
``Method.MIP`` hands the whole band MIP to the back end (HiGHS, CP-SAT or a
Pyomo solver); ``Method.EXHAUSTIVE`` enumerates (small instances). Every chosen
configuration is re-evaluated with the exact model (solver.exact: exact window bisection
instead of the tables' interpolation, the real shard sizes instead of the
breakpoints) and the relative difference is recorded as the approximation error
next to the band's gap.

Without robustness each band maximizes the expected workload's throughput.
With robustness (``robustness:`` in the spec) each band is solved three ways:
the expected throughput alone (the *nominal* frontier), the perturbed
throughput alone (its best value P*(b) across providers), and the *robust*
rule: the best expected throughput among configurations whose perturbed
throughput is at least (1 - tolerance) P*(b). The robust points are the
headline frontier; the nominal ones are kept beside them (docs/solver.md).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cost_models.bill import bill_terms
from cost_models.cloud import sla_cost
from cost_models.pricing.catalog import Catalog
from cost_models.robust import is_robust
from solver.backends import Backend, Result
from solver.backends.base import rel_gap
from solver.bottleneck import ColumnTable, best_within, cheapest_cluster, column_table
from solver.exact import Exact, Reevaluations, approx_error_of, reevaluate
from solver.exhaustive import exhaustive
from solver.model import (
    X_SCALE,
    Chosen,
    LinearModel,
    MipMeta,
    Objective,
    build_mip,
    latency_target_kops,
    read_solution,
    set_budget,
)
from solver.rundir import LogRecord, NeighbourDown, Neighbours, NeighbourUp
from solver.tables.context import Context, Tables
from specs.io import to_record
from specs.schema import Spec
from specs.vocab import Method, Provider, SolverStatus

if TYPE_CHECKING:
    from solver.reeval_cache import ReevalCache

DEFAULT_BANDS = 40


def band_grid(lo: float, hi: float, bands: int, include: float | None = None) -> np.ndarray:
    """Geometric budgets from lo to hi, always including ``include``."""
    g = np.geomspace(max(lo, 1e-6), hi, max(2, bands))
    if include is not None and lo <= include <= hi:
        g = np.unique(np.concatenate([g, [include]]))
    return g


@dataclass
class Point:
    """One band's answer for one provider (or across providers)."""

    band: int
    budget: float
    provider: str
    status: SolverStatus
    result: Result | None
    chosen: Chosen | None
    exact: Exact | None
    approx_error: float = math.nan
    repaired: bool = False  # took an earlier band's configuration to keep the frontier monotone
    objective: Objective = Objective.EXPECTED
    carried: bool = False  # no configuration beats a cheaper band's: its answer, carried forward
    chosen_band: int | None = None  # for a carried point, the band whose solve chose it
    floor_ops: float | None = None  # the robust rule's floor on the perturbed throughput (ops/s, MIP values)

    @property
    def throughput(self) -> float:
        return self.exact.throughput if self.exact else 0.0

    @property
    def perturbed(self) -> float:
        return self.exact.perturbed if self.exact else 0.0

    @property
    def cost(self) -> float:
        return self.chosen.monthly_cost if self.chosen else math.nan

    @property
    def nodes(self) -> int:
        return sum(k for _, k in self.chosen.nodes) if self.chosen else 0

    def dominant_class(self) -> str:
        if not self.exact or not self.exact.per_node:
            return ""
        shares: dict[str, float] = {}
        for g in self.exact.per_node:
            d = g.design
            shares[d.design_class] = shares.get(d.design_class, 0.0) + d.entries_per_node * d.count
        return str(max(shares, key=lambda k: shares[k]))

    def configuration(self) -> dict[str, Any]:
        if not self.chosen or not self.exact:
            return {}
        return {
            "provider": self.chosen.provider,
            "vms": [{"type": g.design.vm_type, "count": g.design.count} for g in self.exact.per_node],
            "designs": [{**to_record(g.design), "storage": to_record(g.storage)} for g in self.exact.per_node],
            "monthly_cost": {
                "compute": self.chosen.compute,
                "storage": self.chosen.storage,
                "sla": self.chosen.sla,
                "total": self.chosen.monthly_cost,
            },
        }

    def log_record(self, backend: str, method: Method, log_file: str | None) -> LogRecord:
        r = self.result
        return LogRecord(
            band=self.band,
            provider=Provider(self.provider),
            budget=self.budget,
            status=self.status,
            objective_kind=self.objective,
            objective=None if r is None or not math.isfinite(r.objective) else r.objective,
            best_bound=None if r is None or not math.isfinite(r.bound) else r.bound,
            mip_gap=None if r is None or not math.isfinite(r.gap) else r.gap,
            nodes=None if r is None else r.nodes,
            wall_s=None if r is None else r.seconds,
            approx_error=self.approx_error if math.isfinite(self.approx_error) else None,
            throughput_mip_ops=self.chosen.throughput_kops / X_SCALE if self.chosen else None,
            throughput_exact_ops=self.throughput if self.exact else None,
            perturbed_mip_ops=self.chosen.perturbed_kops / X_SCALE if self.chosen else None,
            perturbed_exact_ops=self.perturbed if self.exact else None,
            perturbed_floor_ops=self.floor_ops,
            monthly_cost=None if not self.chosen else self.chosen.monthly_cost,
            repaired=self.repaired,
            backend=backend,
            method=method,
            scaling_error=None if r is None else r.scaling_error,
            solver_log=log_file,
        )


def _certify(
    spec: Spec,
    chosen: Chosen,
    res: Result,
    band: int,
    budget: float,
    provider: str,
    objective: Objective,
    exact: Reevaluations | None = None,
    defer: bool = False,
) -> Point:
    """Re-evaluate a chosen cluster exactly; the approximation error is the worse of the
    expected and (with robustness) the perturbed throughput's (:func:`approx_error_of`). With
    ``defer`` (and ``exact``) the re-evaluation is only asked for: the point is completed by
    ``exact.certify`` after ``exact.resolve()``."""
    if defer and exact is not None:
        exact.defer(chosen.nodes)
        return Point(band, budget, provider, res.status, res, chosen, None, math.nan, objective=objective)
    ex = reevaluate(spec, chosen.nodes) if exact is None else exact(chosen.nodes)
    err = approx_error_of(spec, chosen, ex)
    return Point(band, budget, provider, res.status, res, chosen, ex, err, objective=objective)


def _exhaustive_point(
    spec: Spec,
    catalog: Catalog,
    contexts: list[Context],
    budget: float,
    band: int,
    provider: str,
    max_cluster: int,
    objective: Objective = Objective.EXPECTED,
    floor_kops: float = 0.0,
) -> Point:
    t0 = time.perf_counter()
    b = exhaustive(spec, catalog, contexts, budget, max_cluster, objective=objective, floor_kops=floor_kops)
    secs = time.perf_counter() - t0
    if not b.nodes:
        res = Result.infeasible(Method.EXHAUSTIVE, b.visited, secs)
        return Point(band, budget, provider, SolverStatus.INFEASIBLE, res, None, None, objective=objective)
    nodes = [(contexts[i], k) for i, k in b.nodes]
    compute = sum(c.vm.usd_per_month * k for c, k in nodes)
    storage = sum(c.storage.usd_month * k for c, k in nodes)
    terms = bill_terms(spec, catalog, b.provider)
    sla = sla_cost(terms, sum(k for _, k in nodes), compute + storage)
    chosen = Chosen(
        b.provider, nodes, b.throughput_kops, compute + storage + sla, compute, storage, sla, b.perturbed_kops
    )
    value = b.perturbed_kops if objective == Objective.PERTURBED else b.throughput_kops
    obj = -value  # enumeration proves optimality: bound = objective
    res = Result(SolverStatus.OPTIMAL, obj, obj, 0.0, b.visited, secs, None, Method.EXHAUSTIVE)
    return _certify(spec, chosen, res, band, budget, provider, objective)


@dataclass
class Frontier:
    """All bands for all providers, plus what the spec's own budget got.

    ``points`` is the headline frontier (the robust rule's answers when the spec
    asks for robustness, else the nominal ones); ``nominal`` and ``perturbed``
    hold the two single-objective frontiers a robust solve also computes.
    """

    spec: Spec
    budgets: np.ndarray
    points: dict[str, list[Point]] = field(default_factory=dict)  # provider -> per band
    best: list[Point] = field(default_factory=list)  # across providers, per band
    nominal: dict[str, list[Point]] = field(default_factory=dict)
    perturbed: dict[str, list[Point]] = field(default_factory=dict)
    baselines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    monotone: bool = True
    repaired: int = 0
    robust_carried: int = 0  # robust bands answered by a cheaper band's configuration (the rule's envelope)
    backend: str = "highs"
    method: Method = Method.THRESHOLD
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    tables_seconds: float = 0.0
    n_solves: int = 0
    max_cluster: int = 0
    exact: Reevaluations | None = None  # the solve's exact re-evaluations, each cluster once

    @property
    def robust(self) -> bool:
        return bool(self.perturbed)

    def best_of(self, points: dict[str, list[Point]]) -> list[Point]:
        """Per band, the fastest point (expected workload, then cheapest) across providers."""
        out = []
        for i in range(len(self.budgets)):
            cands = [points[p][i] for p in points if points[p][i].chosen]
            out.append(
                max(cands, key=lambda q: (q.throughput, -q.cost))
                if cands
                else Point(i, float(self.budgets[i]), "", SolverStatus.INFEASIBLE, None, None, None)
            )
        return out

    def best_perturbed(self) -> list[Point]:
        """Per band, the point of highest perturbed throughput across providers."""
        out = []
        for i in range(len(self.budgets)):
            cands = [self.perturbed[p][i] for p in self.perturbed if self.perturbed[p][i].chosen]
            out.append(
                max(cands, key=lambda q: (q.perturbed, -q.cost))
                if cands
                else Point(i, float(self.budgets[i]), "", SolverStatus.INFEASIBLE, None, None, None)
            )
        return out


@dataclass
class _Bands:
    """One provider's bands: its columns as arrays (solver.bottleneck) and the
    bill of its cheapest cluster."""

    provider: str
    contexts: list[Context]
    table: ColumnTable | None = None
    floor: float = -math.inf
    models: dict[tuple[Any, ...], tuple[LinearModel, MipMeta]] = field(default_factory=dict)

    def mask(
        self, spec: Spec, objective: Objective, floor_kops: float, incumbent_kops: float, budget: float
    ) -> np.ndarray:
        """The columns one band can use. Lower bounds on X and P are column filters
        (each is a minimum over the used columns): the latency target, the robust
        rule's floor on P, and the previous band's value (a cheaper band already
        reached it, so this band's optimum is at least it); and a column one node of
        which costs more than the budget cannot be bought."""
        tab = self.table
        assert tab is not None
        target = latency_target_kops(spec)
        if objective != Objective.PERTURBED:
            target = max(target, incumbent_kops * (1 - 1e-9))
        mask = (tab.x >= target * (1 - 1e-12)) & (tab.cost <= budget)
        if objective == Objective.ROBUST:
            mask &= tab.p >= floor_kops
        elif objective == Objective.PERTURBED and incumbent_kops > 0:
            mask &= tab.p >= incumbent_kops * (1 - 1e-9)
        return mask

    def model(
        self,
        spec: Spec,
        catalog: Catalog,
        fr: Frontier,
        objective: Objective,
        mask: np.ndarray,
    ) -> tuple[LinearModel, MipMeta] | None:
        """The band's whole MIP (``Method.MIP``) over the columns in ``mask``
        (:meth:`mask`: the same exact column filters the threshold algorithm uses);
        one model per objective and column set, re-solved at each band's budget."""
        tab = self.table
        assert tab is not None
        cols = [tab.contexts[i] for i in np.flatnonzero(mask)]
        if not cols:
            return None
        kind = Objective.PERTURBED if objective == Objective.PERTURBED else Objective.EXPECTED
        key = (kind, *map(id, cols))
        if key not in self.models:
            t0 = time.perf_counter()
            self.models[key] = build_mip(
                spec, catalog, cols, float(fr.budgets[0]), fr.max_cluster, providers=[self.provider], objective=kind
            )
            fr.build_seconds += time.perf_counter() - t0
        m, meta = self.models[key]
        meta.objective = objective
        return m, meta


def _carry(prev: Point, i: int, b: float) -> Point:
    return Point(
        i,
        b,
        prev.provider,
        prev.status,
        prev.result,
        prev.chosen,
        prev.exact,
        prev.approx_error,
        objective=prev.objective,
        carried=True,
        floor_ops=prev.floor_ops,
        chosen_band=prev.chosen_band if prev.carried else prev.band,
    )


def _solve_band_mip(
    spec: Spec,
    catalog: Catalog,
    fr: Frontier,
    pb: _Bands,
    backend: Backend,
    objective: Objective,
    mask: np.ndarray,
    budget: float,
    gap: float,
    time_limit: float,
    log: Path | None,
) -> tuple[Chosen | None, Result]:
    """One band solved as one MIP by the back end (``Method.MIP``)."""
    mm = pb.model(spec, catalog, fr, objective, mask)
    if mm is None:
        return None, Result.infeasible(backend.name)
    m, meta = mm
    set_budget(m, meta, budget)
    res = backend.solve(m, gap=gap, time_limit=time_limit, log_path=log)
    fr.solve_seconds += res.seconds
    fr.n_solves += 1
    if res.x is None:
        return None, res
    return read_solution(m, meta, res.x, spec, catalog), res


def _solve_objective(
    spec: Spec,
    catalog: Catalog,
    fr: Frontier,
    pb: _Bands,
    backend: Backend,
    objective: Objective,
    floors_kops: np.ndarray | None,
    *,
    method: Method,
    logdir: Path | None,
    gap: float,
    time_limit: float,
    progress: Callable[[str], None] | None,
) -> list[Point]:
    """Every band of one provider for one objective (``floors_kops``: the robust
    rule's floor per band), in increasing budget. A band's model keeps only the
    columns that can beat the previous band's answer (``_Bands.model``); when
    none can, that answer is carried forward (``carried``): for the expected and
    perturbed objectives this proves it optimal here, for the robust rule it is
    the rule's envelope (a configuration that was within the tolerance at its
    own price stays available at higher budgets; docs/solver.md)."""
    p, budgets = pb.provider, fr.budgets
    tag = f"_{objective}" if fr.robust or objective != Objective.EXPECTED else ""
    pts: list[Point] = []
    prev: Point | None = None
    for i, b in enumerate(budgets):
        log = logdir / f"band{i:02d}_{p}{tag}.log" if logdir else None
        floor_k = float(floors_kops[i]) if floors_kops is not None else 0.0
        note = ""
        if method == Method.EXHAUSTIVE:
            pt = _exhaustive_point(
                spec, catalog, pb.contexts, float(b), i, p, fr.max_cluster, objective=objective, floor_kops=floor_k
            )
            fr.solve_seconds += pt.result.seconds if pt.result else 0.0
            note = f"exhaustive enumeration: {pt.result.nodes if pt.result else 0} clusters"
        elif not pb.contexts or b < pb.floor * (1 - 1e-9):
            pt = Point(i, float(b), p, SolverStatus.INFEASIBLE, Result.infeasible(backend.name), None, None)
            pt.objective = objective
            note = (
                f"infeasible: below the cheapest configuration (${pb.floor:,.2f}/month, a min-cost MIP)"
                if math.isfinite(pb.floor)
                else "infeasible: no configuration at any budget"
            )
        else:
            inc = 0.0
            if prev is not None and prev.chosen is not None:
                inc = prev.chosen.value(objective)
            assert pb.table is not None
            mask = pb.mask(spec, objective, floor_k, inc, float(b))
            if method == Method.MIP:
                chosen, result = _solve_band_mip(
                    spec, catalog, fr, pb, backend, objective, mask, float(b), gap, time_limit, log
                )
            else:
                ans = best_within(spec, catalog, pb.table, objective, mask, float(b), backend, log)
                fr.solve_seconds += ans.result.seconds
                fr.n_solves += ans.mip_solves
                chosen, result, note = ans.chosen, ans.result, ans.note
            if chosen is not None:
                pt = _certify(spec, chosen, result, i, float(b), p, objective, fr.exact, defer=True)
            elif prev is not None:
                pt = _carry(prev, i, float(b))
                note = f"no cluster within this budget beats band {prev.band}'s answer: carried forward"
            else:
                pt = Point(i, float(b), p, SolverStatus.INFEASIBLE, result, None, None)
                pt.objective = objective
                note = "infeasible: no configuration meets the robust rule's floor within this budget"
        if log is not None and note:
            log.write_text(note + "\n")
        if objective == Objective.ROBUST and not pt.carried:
            pt.floor_ops = floor_k / X_SCALE
        fr.robust_carried += int(pt.carried and objective == Objective.ROBUST)
        pts.append(pt)
        if pt.chosen is not None:
            prev = pt
        if progress:
            progress(p)
    return pts


def solve_frontier(
    spec: Spec,
    catalog: Catalog,
    tables: Tables,
    backend: Backend,
    *,
    method: Method = Method.THRESHOLD,
    bands: int = DEFAULT_BANDS,
    budget: float | None = None,
    providers: tuple[str, ...] = (),
    out_dir: Path | None = None,
    gap: float = 1e-4,
    time_limit: float = 30.0,
    progress: Callable[[str], None] | None = None,
    budgets: np.ndarray | None = None,
    reevals: ReevalCache | None = None,
    workers: int = 1,
) -> Frontier:
    """Solve every band for every provider and certify each answer (with
    robustness: the nominal, perturbed and robust objectives, see the module doc).
    ``reevals``: the persistent cache of exact re-evaluations (read, then added to);
    ``workers``: most processes re-evaluating the chosen clusters (after every band is solved:
    :class:`Reevaluations`)."""
    if budgets is None:
        lo, hi = spec.budget_range
        b0 = budget if budget is not None else spec.budget_usd
        if b0 > hi:
            hi = b0 + 500_000.0  # paper Sec. 5: widen the range to 1..(b + 500,000)
        budgets = band_grid(lo, hi, bands, b0)
    budgets = np.sort(np.asarray(budgets, dtype=float))
    provs = providers or tuple(p for p in spec.providers if p in tables.contexts)
    exact = Reevaluations(spec, store=reevals, workers=workers)
    fr = Frontier(
        spec,
        budgets,
        backend=Method.EXHAUSTIVE if method == Method.EXHAUSTIVE else backend.name,
        method=method,
        tables_seconds=tables.seconds,
        max_cluster=tables.max_cluster,
        exact=exact,
    )
    if reevals is not None:
        reevals.load(spec)
    logdir = None
    if out_dir is not None:
        logdir = out_dir / "solver"
        logdir.mkdir(parents=True, exist_ok=True)
    per: list[_Bands] = []
    for p in provs:
        pb = _Bands(p, tables.contexts.get(p, []))
        if method != Method.EXHAUSTIVE and pb.contexts:
            pb.table = column_table(spec, catalog, pb.contexts, p, tables.max_cluster)
            low = cheapest(spec, catalog, tables, backend, providers=(p,), table=pb.table, exact=fr.exact, defer=True)
            pb.floor = low.cost if low else math.inf
        per.append(pb)
    kw: dict[str, Any] = {
        "method": method,
        "logdir": logdir,
        "gap": gap,
        "time_limit": time_limit,
        "progress": progress,
    }
    robust = is_robust(spec)
    for pb in per:
        fr.nominal[pb.provider] = _solve_objective(spec, catalog, fr, pb, backend, Objective.EXPECTED, None, **kw)
    _make_monotone(fr, fr.nominal)
    if robust:
        for pb in per:
            fr.perturbed[pb.provider] = _solve_objective(
                spec, catalog, fr, pb, backend, Objective.PERTURBED, None, **kw
            )
        _make_monotone(fr, fr.perturbed, key=lambda q: q.chosen.perturbed_kops if q.chosen else 0.0)
        # P*(b): the best perturbed throughput any provider reaches at each budget (MIP values)
        pstar = np.array(
            [
                max((pt.chosen.perturbed_kops for pt in col if pt.chosen), default=0.0)
                for col in zip(*fr.perturbed.values(), strict=True)
            ]
        )
        floors = (1.0 - spec.tolerance) * pstar * (1 - 1e-9)
        for pb in per:
            fr.points[pb.provider] = _solve_objective(spec, catalog, fr, pb, backend, Objective.ROBUST, floors, **kw)
    else:
        fr.points = fr.nominal
    exact.resolve()
    for pts_of in (fr.nominal, fr.perturbed, fr.points):
        for pts in pts_of.values():
            for pt in pts:
                exact.certify(pt)
    fr.best = fr.best_of(fr.points)
    if reevals is not None:
        reevals.save(spec)
    return fr


def _make_monotone(fr: Frontier, points: dict[str, list[Point]], key: Callable[[Point], float] | None = None) -> None:
    """Paper Sec. 5 step 2: a higher budget never maps to lower throughput.

    With optimal solves this already holds (the feasible set only grows); a
    band solved to a looser gap may dip, and then keeps the previous band's
    configuration. Counted and reported. ``key``: the value that must not dip
    (the MIP's objective; default the expected throughput).
    """
    value = key or (lambda q: q.chosen.throughput_kops if q.chosen else 0.0)
    for pts in points.values():
        best: Point | None = None
        for i, pt in enumerate(pts):
            if best is not None and (pt.chosen is None or value(pt) < value(best) * (1 - 1e-9)):
                if pt.chosen is not None or best.chosen is not None:
                    fr.repaired += 1
                    fr.monotone = False
                    pts[i] = Point(
                        pt.band,
                        pt.budget,
                        pt.provider,
                        best.status,
                        best.result,
                        best.chosen,
                        best.exact,
                        best.approx_error,
                        repaired=True,
                        objective=pt.objective,
                        floor_ops=pt.floor_ops,
                    )
                    continue
            if pt.chosen is not None:
                best = pts[i]


def cheapest(
    spec: Spec,
    catalog: Catalog,
    tables: Tables,
    backend: Backend,
    *,
    min_throughput: float | None = None,
    providers: tuple[str, ...] = (),
    table: ColumnTable | None = None,
    exact: Reevaluations | None = None,
    defer: bool = False,
) -> Point | None:
    """The cheapest configuration overall (or meeting ``min_throughput``): the
    covering problem over every column fast enough (solver.bottleneck);
    ``exact``: the solve's re-evaluations, when the caller has them (each provider's
    cluster is asked for first and all are re-evaluated at once; with ``defer`` only asked for:
    the point returned is then completed by ``exact.certify`` after ``exact.resolve()``)."""
    provs = providers or tuple(tables.contexts)
    best: Point | None = None
    target = max(latency_target_kops(spec), (0.0 if min_throughput is None else min_throughput) * X_SCALE)
    for p in provs:
        ctx = tables.contexts.get(p, [])
        if not ctx:
            continue
        tab = table if table is not None and table.provider == p else None
        tab = tab or column_table(spec, catalog, ctx, p, tables.max_cluster)
        cov = cheapest_cluster(spec, catalog, tab, tab.x >= target * (1 - 1e-12), backend)
        if cov.chosen is None:
            continue
        res = Result(
            cov.status, cov.bill, cov.bound, rel_gap(cov.bill, cov.bound), cov.nodes, cov.seconds, None, backend.name
        )
        pt = _certify(spec, cov.chosen, res, -1, math.inf, p, Objective.EXPECTED, exact, defer=exact is not None)
        if best is None or pt.cost < best.cost:
            best = pt
    if exact is not None and best is not None and not defer:
        exact.resolve()
        exact.certify(best)
    return best


def baselines(spec: Spec, catalog: Catalog, tables: Tables, budgets: np.ndarray) -> dict[str, list[dict[str, Any]]]:
    """Each preset on homogeneous clusters of one VM type (how fixed engines are
    deployed; the paper's baselines): best throughput per band, per provider."""
    N = spec.workload.entries
    out: dict[str, list[dict[str, Any]]] = {}
    for name, per_p in tables.presets.items():
        rows = []
        for p, ctxs in per_p.items():
            terms = bill_terms(spec, catalog, p)
            if terms.unavailable:
                continue
            cands = []
            for c in ctxs:
                k = round(N / c.entries)
                if k < terms.min_nodes or k > tables.max_cluster:
                    continue
                comp = c.cost_month * k
                cost = comp + sla_cost(terms, k, comp)
                cands.append((cost, c.throughput * k, c, k))
            # the best within a budget, for every budget: the candidates by cost, and the best of
            # each prefix (max by (throughput, -cost); of equal ones the first in ``cands``)
            by_cost = sorted(range(len(cands)), key=lambda j: cands[j][0])
            costs = [cands[j][0] for j in by_cost]
            best: list[int] = []
            for j in by_cost:
                if not best:
                    best.append(j)
                    continue
                q = best[-1]
                kj, kq = (cands[j][1], -cands[j][0]), (cands[q][1], -cands[q][0])
                best.append(j if kj > kq or (kj == kq and j < q) else q)
            for i, b in enumerate(budgets):
                m = bisect.bisect_right(costs, b)
                if m == 0:
                    continue
                cost, x, c, k = cands[best[m - 1]]
                rows.append(
                    {
                        "preset": name,
                        "band": i,
                        "budget": float(b),
                        "provider": p,
                        "monthly_cost": cost,
                        "throughput_ops": x,
                        "vm": c.vm.name,
                        "count": k,
                        "class": c.design_class,
                    }
                )
        out[name] = rows
    return out


def neighbours(points: list[Point], budget: float) -> Neighbours:
    """The frontier points just below and above ``budget`` (what-if suggestions)."""
    feas = [p for p in points if p.chosen]
    at = [p for p in feas if p.budget <= budget * (1 + 1e-9)]
    cur = max(at, key=lambda p: p.throughput) if at else None
    out = Neighbours()
    if cur is None:
        return out
    up = [p for p in feas if p.throughput > cur.throughput * 1.0001 and p.cost > cur.cost]
    if up:
        nxt = min(up, key=lambda p: p.cost)
        out.up = NeighbourUp(
            extra_usd=nxt.cost - cur.cost,
            gain=nxt.throughput / cur.throughput - 1,
            monthly_cost=nxt.cost,
            throughput_ops=nxt.throughput,
            provider=Provider(nxt.provider),
        )
    down = [p for p in feas if p.cost < cur.cost * 0.9999]
    if down:
        prv = max(down, key=lambda p: (p.throughput, -p.cost))
        out.down = NeighbourDown(
            saved_usd=cur.cost - prv.cost,
            loss=1 - prv.throughput / cur.throughput,
            monthly_cost=prv.cost,
            throughput_ops=prv.throughput,
            provider=Provider(prv.provider),
        )
    return out
