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
from cost_models.replication import amplification, replica_nodes
from cost_models.robust import is_robust, perturbed_amplification
from solver import band_cache, knapsack
from solver.backends import Backend, Result
from solver.bottleneck import ColumnTable, Floor, best_within, cheapest_reaching, chosen_of, column_table
from solver.exact import Exact, NodeRate, Reevaluations, approx_error_of, reevaluate
from solver.exhaustive import exhaustive
from solver.grid import GridCheck, check_counts
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
from specs.io import to_record, write_text_unless_same
from specs.schema import ReplicaPlan, Spec
from specs.vocab import Method, Provider, SolverStatus

if TYPE_CHECKING:
    from solver.band_cache import BandCache
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
    rule: str | None = None  # EXCLUDED: the spec's rule no configuration within the budget meets
    grid_gap: float = math.nan  # (the bound over node counts - the exact throughput) / the exact one
    grid_bound: float = math.nan  # that bound, ops/s (solver.grid)
    polished: bool = False  # solver.grid moved the answer to another count of its own nodes
    columns: list[tuple[int, int]] | None = None  # the answer as (column of its provider's table, count)
    plan: ReplicaPlan | None = None  # the replication plan whose frontier chose it (solver.replicas)

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
    def perturbed_kops_or_zero(self) -> float:
        """The band model's perturbed throughput (kops), 0 without a configuration."""
        return self.chosen.perturbed_kops if self.chosen else 0.0

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
            grid_gap=self.grid_gap if self.chosen and math.isfinite(self.grid_gap) else None,
            grid_bound_ops=self.grid_bound if self.chosen and math.isfinite(self.grid_bound) else None,
            polished=self.polished,
            rule=self.rule,
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
    exact: Reevaluations | None = None,
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
    pt = _certify(spec, chosen, res, band, budget, provider, objective, exact, defer=exact is not None)
    # the contexts are the provider's table's, in its order; counts in its units (replica groups)
    unit = replica_nodes(spec)
    pt.columns = [(i, k // unit) for i, k in b.nodes]
    return pt


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
    #: with robustness, per provider the robust rule under the best provider's floor (the
    #: headline picks from these); else ``points``
    headline: dict[str, list[Point]] = field(default_factory=dict)
    floors: dict[str, np.ndarray] = field(default_factory=dict)  # per provider, its own robust floor (kops)
    tables: dict[str, ColumnTable | None] = field(default_factory=dict)  # per provider, its columns
    #: the band cache the frontier's searches read back through (None: no cache), which
    #: :func:`cheapest` over its tables shares (solver.replicas.cheapest_of_plans)
    answers: BandCache | None = None

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

    def mask(self, budget: float) -> np.ndarray:
        """The columns one band can use: one node of which fits the budget. (Lower bounds on X
        and P are not column filters: a column below one reaches it with more nodes.)"""
        tab = self.table
        assert tab is not None
        return np.asarray(tab.w + tab.fixed <= budget * (1 + 1e-12))

    def model(
        self,
        spec: Spec,
        catalog: Catalog,
        fr: Frontier,
        objective: Objective,
        mask: np.ndarray,
        floor_kops: float,
        target_kops: float,
    ) -> tuple[LinearModel, MipMeta] | None:
        """The band's whole MIP (``Method.MIP``) over the columns in ``mask``; one model per
        objective, floor and column set, re-solved at each band's budget."""
        tab = self.table
        assert tab is not None
        cols = [tab.contexts[i] for i in np.flatnonzero(mask)]
        if not cols:
            return None
        key = (objective, floor_kops, target_kops, *map(id, cols))
        if key not in self.models:
            t0 = time.perf_counter()
            self.models[key] = build_mip(
                spec,
                catalog,
                cols,
                float(fr.budgets[0]),
                fr.max_cluster,
                providers=[self.provider],
                objective=objective,
                floor_kops=floor_kops,
                target_kops=target_kops,
            )
            fr.build_seconds += time.perf_counter() - t0
        return self.models[key]


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
        grid_gap=prev.grid_gap,
        grid_bound=prev.grid_bound,
        polished=prev.polished,
        columns=prev.columns,
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
    floor_kops: float,
    target_kops: float,
    gap: float,
    time_limit: float,
    log: Path | None,
) -> tuple[Chosen | None, Result]:
    """One band solved as one MIP by the back end (``Method.MIP``)."""
    mm = pb.model(spec, catalog, fr, objective, mask, floor_kops, target_kops)
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


def _columns_of(tab: ColumnTable, chosen: Chosen) -> list[tuple[int, int]]:
    """A chosen cluster as (column index of ``tab``, count of the table's units)."""
    where = tab.column_of()
    return [(where[id(c)], k // tab.unit) for c, k in chosen.nodes]


#: One chain of bands: a provider's, one objective, its floors per band (the robust rule's) and its
#: log tag.
_Chain = tuple[_Bands, Objective, np.ndarray | None, str | None]


def _prefetch(
    spec: Spec,
    catalog: Catalog,
    fr: Frontier,
    backend: Backend,
    chains: list[_Chain],
    kw: dict[str, Any],
    workers: int,
) -> None:
    """Search ``chains``' bands in ``workers`` processes before this process runs them in order
    (solver.band_cache.prefetch): the chains are independent, and each band's answer is read back
    from the cache. Only the threshold method's bands, and only into a cache that read no file (a
    warm solve searches a few bands, fewer than a process start costs); the largest tables first."""
    answers: BandCache | None = kw["answers"]
    if answers is None or kw["method"] != Method.THRESHOLD or answers.read_back or workers < 2:
        return
    quiet = {**kw, "logdir": None, "progress": None}

    def job(pb: _Bands, objective: Objective, floors: np.ndarray | None, tag: str | None) -> Callable[[], object]:
        return lambda: _solve_objective(spec, catalog, fr, pb, backend, objective, floors, **quiet, tag=tag)

    order = sorted(chains, key=lambda c: (-len(c[0].contexts), c[1] != Objective.ROBUST))
    jobs = [job(*c) for c in order if c[0].table is not None]
    if len(jobs) >= 2:
        # a cold frontier's thousands of knapsacks (solver.bottleneck) run compiled, loaded once
        # here so that the forked workers inherit it (~0.4 s; ycsb_a's 8,000 searches ~1 s, not
        # ~17 s); a warm one's few run on the reference until solver.knapsack.COMPILE_AFTER_SEARCHES
        knapsack.load()
    band_cache.prefetch(answers, jobs, workers)


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
    answers: BandCache | None = None,
    tag: str | None = None,
) -> list[Point]:
    """Every band of one provider for one objective (``floors_kops``: the robust rule's floor per
    band), in increasing budget. A cheaper band's answer is each band's first incumbent (it fits
    here too). With the robust rule, whose floor rises with the budget, a cheaper band's answer
    that is faster is carried forward (``carried``: the rule's envelope, a configuration that was
    within the tolerance at its own price stays available at higher budgets; docs/solver.md)."""
    p, budgets = pb.provider, fr.budgets
    if tag is None:
        tag = f"_{objective}" if fr.robust or objective != Objective.EXPECTED else ""
    target = latency_target_kops(spec)
    pts: list[Point] = []
    prev: Point | None = None
    for i, b in enumerate(budgets):
        log = logdir / f"band{i:02d}_{p}{tag}.log" if logdir else None
        floor_k = float(floors_kops[i]) if floors_kops is not None else 0.0
        note = ""
        rule: str | None = None
        pt: Point | None = None
        if method == Method.EXHAUSTIVE:
            pt = _exhaustive_point(
                spec,
                catalog,
                pb.contexts,
                float(b),
                i,
                p,
                fr.max_cluster,
                objective=objective,
                floor_kops=floor_k,
                exact=fr.exact,
            )
            fr.solve_seconds += pt.result.seconds if pt.result else 0.0
            note = f"exhaustive enumeration: {pt.result.nodes if pt.result else 0} clusters"
            if pt.chosen is None:
                pt = None
        elif not pb.contexts or b < pb.floor * (1 - 1e-9):
            pt = Point(i, float(b), p, SolverStatus.INFEASIBLE, Result.infeasible(backend.name), None, None)
            pt.objective = objective
            note = (
                f"infeasible: below the cheapest configuration (${pb.floor:,.2f}/month)"
                if math.isfinite(pb.floor)
                else "infeasible: no configuration at any budget"
            )
        else:
            tab = pb.table
            assert tab is not None
            mask = pb.mask(float(b))
            flo: Floor | None = None
            if objective == Objective.ROBUST and floor_k > 0:
                flo = Floor(tab.p, floor_k)
            elif objective == Objective.PERTURBED and target > 0:
                flo = Floor(tab.x, target)
            if method == Method.MIP:
                chosen, result = _solve_band_mip(
                    spec,
                    catalog,
                    fr,
                    pb,
                    backend,
                    objective,
                    mask,
                    float(b),
                    floor_k if objective == Objective.ROBUST else 0.0,
                    target,
                    gap,
                    time_limit,
                    log,
                )
                note = f"{backend.name}: {result.status}"
            else:
                start = prev.columns if prev is not None and prev.columns is not None and not prev.carried else None
                search = best_within if answers is None else answers.best_within
                ans = search(spec, tab, objective, mask, float(b), floor=flo, start=start, backend=backend.name)
                fr.solve_seconds += ans.result.seconds
                chosen, result, note = ans.chosen, ans.result, ans.note
            slow = chosen is not None and chosen.throughput_kops < target * (1 - 1e-12)
            if slow and objective != Objective.PERTURBED:
                chosen, rule = None, "performance.max_latency_s"
            if chosen is not None:
                pt = _certify(spec, chosen, result, i, float(b), p, objective, fr.exact, defer=True)
                pt.columns = _columns_of(tab, chosen)
            elif rule is None:
                rule = "the robust rule" if flo is not None and objective == Objective.ROBUST else None
        if (
            pt is not None
            and pt.chosen is not None
            and objective == Objective.ROBUST
            and prev is not None
            and prev.chosen is not None
            and prev.chosen.throughput_kops > pt.chosen.throughput_kops * (1 + 1e-9)
        ):
            pt = None  # the envelope: the cheaper band's answer is faster
        if pt is None:
            if prev is not None and objective == Objective.ROBUST:
                pt = _carry(prev, i, float(b))
                note = f"no cluster within this budget beats band {prev.band}'s answer under the rule: carried forward"
            else:
                status = SolverStatus.EXCLUDED if rule else SolverStatus.INFEASIBLE
                pt = Point(i, float(b), p, status, Result.infeasible(backend.name), None, None, rule=rule)
                pt.objective = objective
                note = f"excluded by {rule}" if rule else "infeasible: no configuration fits this budget"
        if log is not None and note:
            write_text_unless_same(log, note + "\n")
        if objective == Objective.ROBUST and not pt.carried:
            pt.floor_ops = floor_k / X_SCALE
        fr.robust_carried += int(pt.carried and objective == Objective.ROBUST)
        pts.append(pt)
        if pt.chosen is not None:
            prev = pt
        if progress:
            progress(p)
    return pts


def solve_frontier(spec: Spec, catalog: Catalog, tables: Tables, backend: Backend, **settings: Any) -> Frontier:
    """Solve every band for every provider and certify each answer (with robustness: the
    nominal, perturbed and robust objectives, see the module doc): :func:`start_frontier` with
    its ``settings`` (method, bands, budget, providers, out_dir, gap, time_limit, progress,
    budgets, reevals: the persistent cache of exact re-evaluations, workers: most processes
    re-evaluating the chosen clusters), then :func:`finish_frontier`."""
    return finish_frontier(start_frontier(spec, catalog, tables, backend, **settings))


@dataclass
class FrontierRun:
    """A frontier begun (:func:`start_frontier`: its nominal and perturbed objectives solved), to be
    finished by :func:`finish_frontier` (the robust rule, the exact re-evaluations)."""

    spec: Spec
    catalog: Catalog
    backend: Backend
    frontier: Frontier
    per: list[_Bands]
    kw: dict[str, Any]
    reevals: ReevalCache | None
    workers: int = 1  # processes that may search bands (_prefetch) and re-evaluate answers

    def pstar(self) -> dict[str, np.ndarray]:
        """P*_p(b): each provider's best perturbed throughput at each band (MIP values, kops); empty
        without robustness."""
        return {
            p: np.array([pt.chosen.perturbed_kops if pt.chosen else 0.0 for pt in pts])
            for p, pts in self.frontier.perturbed.items()
        }


def start_frontier(
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
    answers: BandCache | None = None,
    workers: int = 1,
    logdir: Path | None = None,
) -> FrontierRun:
    """:func:`solve_frontier` up to the robust rule: the bands' nominal answers and, with
    robustness, their perturbed ones. ``logdir``: where the bands' solver logs go (default
    ``out_dir``/solver). ``answers``: the persistent cache of band answers (solver.band_cache),
    read from before and added to."""
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
    if answers is not None:
        answers.load(spec)
    fr.answers = answers
    if logdir is None and out_dir is not None:
        logdir = out_dir / "solver"
    if logdir is not None:
        logdir.mkdir(parents=True, exist_ok=True)
    per: list[_Bands] = []
    for p in provs:
        pb = _Bands(p, tables.contexts.get(p, []))
        if pb.contexts:
            pb.table = column_table(spec, catalog, pb.contexts, p, tables.max_cluster)
        if method != Method.EXHAUSTIVE and pb.table is not None:
            low = cheapest(
                spec,
                catalog,
                tables,
                backend,
                providers=(p,),
                columns={p: pb.table},
                exact=fr.exact,
                defer=True,
                answers=answers,
            )
            pb.floor = low.cost if low else math.inf
        per.append(pb)
        fr.tables[p] = pb.table
    kw: dict[str, Any] = {
        "method": method,
        "logdir": logdir,
        "gap": gap,
        "time_limit": time_limit,
        "progress": progress,
        "answers": answers,
    }
    chains: list[_Chain] = [(pb, Objective.EXPECTED, None, None) for pb in per]
    if is_robust(spec):
        chains += [(pb, Objective.PERTURBED, None, None) for pb in per]
    _prefetch(spec, catalog, fr, backend, chains, kw, workers)
    for pb in per:
        fr.nominal[pb.provider] = _solve_objective(spec, catalog, fr, pb, backend, Objective.EXPECTED, None, **kw)
    _make_monotone(fr, fr.nominal)
    if is_robust(spec):
        for pb in per:
            fr.perturbed[pb.provider] = _solve_objective(
                spec, catalog, fr, pb, backend, Objective.PERTURBED, None, **kw
            )
        _make_monotone(fr, fr.perturbed, key=lambda q: q.chosen.perturbed_kops if q.chosen else 0.0)
    return FrontierRun(spec, catalog, backend, fr, per, kw, reevals, workers)


def finish_frontier(run: FrontierRun, pstar_elsewhere: dict[str, np.ndarray] | None = None) -> Frontier:
    """:func:`solve_frontier` from its :func:`start_frontier`: the robust rule's answers, each
    answer re-evaluated exactly. ``pstar_elsewhere``: per provider the best perturbed throughput
    configurations outside these tables reach at each band (MIP values, kops: another replication
    plan's, solver.replicas), which the robust rule's floors compare with too."""
    spec, catalog, backend, fr, per, kw = run.spec, run.catalog, run.backend, run.frontier, run.per, run.kw
    exact, reevals = fr.exact, run.reevals
    assert exact is not None
    budgets = fr.budgets
    if is_robust(spec):
        # P*_p(b): the best perturbed throughput each provider reaches at each budget (MIP values),
        # over every replication plan; each provider's rows meet its own floor, the headline the
        # best provider's
        pstar = run.pstar()
        for p, other in (pstar_elsewhere or {}).items():
            if p in pstar:
                pstar[p] = np.maximum(pstar[p], other)
        scale = (1.0 - spec.tolerance) * (1 - 1e-9)
        tops = [*pstar.values(), *(pstar_elsewhere or {}).values()]
        overall = np.max(np.stack(tops), axis=0) if tops else np.zeros(len(budgets))
        chains: list[_Chain] = []
        for pb in per:
            own = scale * pstar[pb.provider]
            chains.append((pb, Objective.ROBUST, own, None))
            if not np.array_equal(own, scale * overall):
                chains.append((pb, Objective.ROBUST, scale * overall, "_robust_headline"))
        _prefetch(spec, catalog, fr, backend, chains, kw, run.workers)
        for pb in per:
            own = scale * pstar[pb.provider]
            fr.points[pb.provider] = _solve_objective(spec, catalog, fr, pb, backend, Objective.ROBUST, own, **kw)
            fr.floors[pb.provider] = own
            if np.array_equal(own, scale * overall):
                fr.headline[pb.provider] = fr.points[pb.provider]
                if kw["progress"] is not None:  # the headline's bands, counted and not solved
                    for _ in budgets:
                        kw["progress"](pb.provider)
            else:
                fr.headline[pb.provider] = _solve_objective(
                    spec, catalog, fr, pb, backend, Objective.ROBUST, scale * overall, **kw, tag="_robust_headline"
                )
    else:
        fr.points = fr.nominal
        fr.headline = fr.nominal
    exact.resolve()
    for pts_of in (fr.nominal, fr.perturbed, fr.points, fr.headline):
        for pts in pts_of.values():
            for pt in pts:
                exact.certify(pt)
    _check_counts(spec, fr)
    fr.best = fr.best_of(fr.headline)
    if reevals is not None:
        reevals.save(spec)
    if kw["answers"] is not None:
        kw["answers"].save(spec)
    return fr


def _check_counts(spec: Spec, fr: Frontier) -> None:
    """Each answer against every other count of its own nodes within its band's budget
    (solver.grid): the certificate's grid gap, and a faster count of the same nodes replaces the
    answer (``polished``, re-evaluated). Carried and repaired points take their source's."""
    exact = fr.exact
    assert exact is not None
    done: dict[tuple[Any, ...], GridCheck] = {}
    polished: list[Point] = []
    lists = [pts for pts_of in (fr.nominal, fr.perturbed, fr.points, fr.headline) for pts in pts_of.values()]
    for pts in lists:
        for pt in pts:
            tab = fr.tables.get(pt.provider)
            if pt.chosen is None or pt.exact is None or pt.columns is None or tab is None:
                continue
            if pt.carried or pt.repaired:
                continue
            perturbed = pt.objective == Objective.PERTURBED
            key = (pt.provider, tuple(pt.columns), pt.budget, perturbed)
            if key not in done:
                value = pt.exact.perturbed if perturbed else pt.exact.throughput
                own = None
                if len(pt.columns) == 1:
                    d = pt.exact.per_node[0].design
                    # in operations of the workload, as node_rate's (a replicated node serves A node
                    # operations per operation: cost_models.replication)
                    a, a_p = amplification(spec), perturbed_amplification(spec)
                    own = NodeRate(d.node_throughput_ops / a, d.node_perturbed_ops / a_p, d.L, d.Y)
                done[key] = check_counts(
                    tab, pt.columns, pt.budget, value, exact.node_rate, perturbed=perturbed, answer_rate=own
                )
            chk = done[key]
            pt.grid_gap, pt.grid_bound = chk.gap, chk.bound
            if chk.better is not None:
                pt.chosen = chosen_of(spec, tab, chk.better)
                pt.columns = chk.better
                pt.exact, pt.polished = None, True
                exact.defer(pt.chosen.nodes)
                polished.append(pt)
    exact.resolve()
    for pt in polished:
        exact.certify(pt)
        pt.grid_gap = 0.0  # the best count of its nodes, exactly
    for pts in lists:
        for pt in pts:
            src = pt.chosen_band
            if (pt.carried or pt.repaired) and src is not None and pts[src].chosen is not None:
                s_pt = pts[src]
                pt.chosen, pt.exact, pt.approx_error = s_pt.chosen, s_pt.exact, s_pt.approx_error
                pt.grid_gap, pt.grid_bound, pt.polished, pt.columns = (
                    s_pt.grid_gap,
                    s_pt.grid_bound,
                    s_pt.polished,
                    s_pt.columns,
                )


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
                        columns=best.columns,
                        chosen_band=best.band,
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
    exact: Reevaluations | None = None,
    defer: bool = False,
    answers: BandCache | None = None,
    columns: dict[str, ColumnTable | None] | None = None,
) -> Point | None:
    """The cheapest configuration overall (or reaching ``min_throughput`` ops/s on the expected
    workload, and the latency target): solver.bottleneck.cheapest_reaching per provider;
    ``exact``: the solve's re-evaluations, when the caller has them (each provider's
    cluster is asked for first and all are re-evaluated at once; with ``defer`` only asked for:
    the point returned is then completed by ``exact.certify`` after ``exact.resolve()``);
    ``answers``: the band cache, through which each provider's search is read back when the same
    table asked for the same throughput before (BandCache.cheapest_reaching); ``columns``: the
    providers' column tables when the caller has them (a frontier's ``tables``, built from the same
    contexts), else each is built here."""
    provs = providers or tuple(tables.contexts)
    best: Point | None = None
    target = max(latency_target_kops(spec), (0.0 if min_throughput is None else min_throughput) * X_SCALE)
    for p in provs:
        ctx = tables.contexts.get(p, [])
        if not ctx:
            continue
        tab = (columns or {}).get(p) or column_table(spec, catalog, ctx, p, tables.max_cluster)
        t0 = time.perf_counter()
        if answers is None:
            nodes, bill, proven = cheapest_reaching(tab, np.ones(len(tab.contexts), dtype=bool), target)
        else:
            nodes, bill, proven = answers.cheapest_reaching(tab, target)
        if nodes is None:
            continue
        ch = chosen_of(spec, tab, nodes)
        status = SolverStatus.OPTIMAL if proven else SolverStatus.FEASIBLE
        res = Result(status, ch.monthly_cost, bill, 0.0, 1, time.perf_counter() - t0, None, backend.name)
        pt = _certify(spec, ch, res, -1, math.inf, p, Objective.EXPECTED, exact, defer=exact is not None)
        pt.columns = nodes
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
