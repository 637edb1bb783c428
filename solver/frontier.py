"""Budget bands -> a certified cost/throughput Pareto frontier.

Per provider the MIP is declared once and re-solved for a geometric grid of
budgets (plus the spec's budget), in increasing order, each band warm-started
from the previous band's solution (still feasible: the budget only grows).
Every chosen configuration is re-evaluated with the exact model (exact window
bisection instead of the tables' interpolation, the real shard sizes instead
of the breakpoints) and the relative difference is recorded as the
approximation error next to HiGHS's (or CP-SAT's) MIP gap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cost_models.cloud import GIB, sla_cost, sla_terms
from cost_models.design import DesignBatch
from cost_models.evaluate import design_entry, evaluate_designs, workload_partitions
from cost_models.pricing import Catalog
from cost_models.robust import kl_worst_case, mix_vector, per_op_costs
from solver.backends import Backend, Result
from solver.exhaustive import exhaustive
from solver.model import X_SCALE, Chosen, LinearModel, MipMeta, build_mip, read_solution, set_budget
from solver.tables import Context, Tables
from specs.schema import Spec
from specs.vocab import OPERATIONS, Method, SolverStatus

DEFAULT_BANDS = 40
PRESETS = ("rocksdb", "wiredtiger", "faster")


def band_grid(lo: float, hi: float, bands: int, include: float | None = None) -> np.ndarray:
    """Geometric budgets from lo to hi, always including ``include``."""
    g = np.geomspace(max(lo, 1e-6), hi, max(2, bands))
    if include is not None and lo <= include <= hi:
        g = np.unique(np.concatenate([g, [include]]))
    return g


@dataclass
class Exact:
    """A configuration re-evaluated with the exact model."""

    throughput: float
    per_node: list[dict[str, Any]]
    io_per_op: dict[str, float]


def reevaluate(spec: Spec, nodes: list[tuple[Context, int]], rho: float = 0.0) -> Exact:
    """Exact throughput of a cluster: real shard sizes, exact windows; robust
    (KL worst case of radius ``rho``) when rho > 0."""
    N = spec.workload.entries
    cap = sum(c.entries * k for c, k in nodes)
    held = sum(max(c.entries * N / cap, 1.0) * k for c, k in nodes)  # = N unless nodes outnumber keys
    parts = workload_partitions(spec.workload)
    xs, per_node = [], []
    io: dict[str, float] = dict.fromkeys(OPERATIONS, 0.0)
    for c, k in nodes:
        # keys actually on each node of this context; at least one (a key is not split: in a
        # cluster with more nodes than keys, the nodes that hold one serve its operations)
        s = max(c.entries * N / cap, 1.0)
        mem = c.vm.memory_gib * GIB * (1 - spec.design.memory_headroom)
        ne = evaluate_designs(DesignBatch.of([c.design]), spec.workload, s, mem, parts, model=spec.cost_model)
        threads = c.vm.vcpu if c.design.threads is None else c.design.threads
        x = float(ne.throughput(spec.workload, c.storage.iops, threads)[0])
        if rho > 0 and x > 0:
            cost = per_op_costs(ne.io, ne.layout.cls, c.storage.iops, threads, spec.workload.scan_length)
            x = float(1.0 / kl_worst_case(cost, mix_vector(spec.workload.operations), rho)[0])
        xs.append(N * x / s if x > 0 else 0.0)
        share = s * k / held  # the share of the operations this context's nodes serve
        for op, v in ne.io.per_op().items():
            io[op] += share * float(v[0])
        per_node.append(
            {
                "vm_type": c.vm.name,
                "count": k,
                **design_entry(c.design, ne.layout, 0),
                "threads": threads,
                "node_throughput_ops": x,
                "storage": {
                    "product": c.storage.product,
                    "disks": c.storage.disks,
                    "gib": c.storage.gib,
                    "iops": c.storage.iops,
                    "usd_month": c.storage.usd_month,
                    "label": c.storage.label,
                },
            }
        )
    return Exact(min(xs) if xs else 0.0, per_node, io)


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

    @property
    def throughput(self) -> float:
        return self.exact.throughput if self.exact else 0.0

    @property
    def cost(self) -> float:
        return self.chosen.monthly_cost if self.chosen else math.nan

    def dominant_class(self) -> str:
        if not self.exact or not self.exact.per_node:
            return ""
        shares: dict[str, float] = {}
        for n in self.exact.per_node:
            shares[n["class"]] = shares.get(n["class"], 0.0) + n["entries_per_node"] * n["count"]
        return max(shares, key=lambda k: shares[k])

    def configuration(self) -> dict[str, Any]:
        if not self.chosen or not self.exact:
            return {}
        return {
            "provider": self.chosen.provider,
            "vms": [{"type": n["vm_type"], "count": n["count"]} for n in self.exact.per_node],
            "designs": self.exact.per_node,
            "monthly_cost": {
                "compute": self.chosen.compute,
                "storage": self.chosen.storage,
                "sla": self.chosen.sla,
                "total": self.chosen.monthly_cost,
            },
        }

    def log_record(self, backend: str, method: str, log_file: str | None) -> dict[str, Any]:
        r = self.result
        return {
            "band": self.band,
            "provider": self.provider,
            "budget": self.budget,
            "status": self.status,
            "objective": None if r is None or not math.isfinite(r.objective) else r.objective,
            "best_bound": None if r is None or not math.isfinite(r.bound) else r.bound,
            "mip_gap": None if r is None or not math.isfinite(r.gap) else r.gap,
            "nodes": None if r is None else r.nodes,
            "wall_s": None if r is None else r.seconds,
            "approx_error": self.approx_error if math.isfinite(self.approx_error) else None,
            "throughput_mip_ops": self.chosen.throughput_kops / X_SCALE if self.chosen else None,
            "throughput_exact_ops": self.throughput if self.exact else None,
            "monthly_cost": None if not self.chosen else self.chosen.monthly_cost,
            "repaired": self.repaired,
            "backend": backend,
            "method": method,
            "scaling_error": None if r is None else r.scaling_error,
            "solver_log": log_file,
        }


def _point(
    spec: Spec,
    catalog: Catalog,
    m: LinearModel,
    meta: MipMeta,
    res: Result,
    band: int,
    budget: float,
    provider: str,
    rho: float = 0.0,
) -> Point:
    if res.x is None:
        return Point(band, budget, provider, res.status, res, None, None)
    chosen = read_solution(m, meta, res.x, spec, catalog)
    ex = reevaluate(spec, chosen.nodes, rho)
    mip_x = chosen.throughput_kops / X_SCALE
    err = abs(mip_x - ex.throughput) / ex.throughput if ex.throughput > 0 else math.inf
    return Point(band, budget, provider, res.status, res, chosen, ex, err)


def _exhaustive_point(
    spec: Spec,
    catalog: Catalog,
    contexts: list[Context],
    budget: float,
    band: int,
    provider: str,
    max_cluster: int,
    min_throughput: float | None = None,
    rho: float = 0.0,
) -> Point:
    import time

    t0 = time.perf_counter()
    b = exhaustive(spec, catalog, contexts, budget, max_cluster, min_throughput)
    secs = time.perf_counter() - t0
    if b.throughput_kops < 0:
        res = Result.infeasible(Method.EXHAUSTIVE, b.visited, secs)
        return Point(band, budget, provider, SolverStatus.INFEASIBLE, res, None, None)
    nodes = [(contexts[i], k) for i, k in b.nodes]
    compute = sum(c.vm.usd_per_month * k for c, k in nodes)
    storage = sum(c.storage.usd_month * k for c, k in nodes)
    terms = sla_terms(catalog, b.provider, spec.slas)
    sla = sla_cost(terms, sum(k for _, k in nodes), spec.workload.data_bytes / GIB, compute + storage)
    chosen = Chosen(b.provider, nodes, b.throughput_kops, compute + storage + sla, compute, storage, sla)
    ex = reevaluate(spec, nodes, rho)
    mip_x = b.throughput_kops / X_SCALE
    err = abs(mip_x - ex.throughput) / ex.throughput if ex.throughput > 0 else math.inf
    obj = -b.throughput_kops  # enumeration proves optimality: bound = objective
    res = Result(SolverStatus.OPTIMAL, obj, obj, 0.0, b.visited, secs, None, Method.EXHAUSTIVE)
    return Point(band, budget, provider, SolverStatus.OPTIMAL, res, chosen, ex, err)


@dataclass
class Frontier:
    """All bands for all providers, plus what the spec's own budget got."""

    spec: Spec
    budgets: np.ndarray
    points: dict[str, list[Point]] = field(default_factory=dict)  # provider -> per band
    best: list[Point] = field(default_factory=list)  # across providers, per band
    baselines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    monotone: bool = True
    repaired: int = 0
    backend: str = "highs"
    method: str = "mip"
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    tables_seconds: float = 0.0
    n_solves: int = 0


def solve_frontier(
    spec: Spec,
    catalog: Catalog,
    tables: Tables,
    backend: Backend,
    *,
    method: str = "mip",
    bands: int = DEFAULT_BANDS,
    budget: float | None = None,
    providers: tuple[str, ...] = (),
    out_dir: Path | None = None,
    gap: float = 1e-4,
    time_limit: float = 30.0,
    progress: Callable[[str], None] | None = None,
    budgets: np.ndarray | None = None,
    rho: float = 0.0,
) -> Frontier:
    """Solve every band for every provider and certify each answer.

    ``rho`` > 0: the tables hold robust throughputs, and so does the exact
    re-evaluation (a KL worst case of that radius).
    """
    import time

    if budgets is None:
        lo, hi = spec.budget_range
        b0 = budget if budget is not None else spec.budget_usd
        if b0 > hi:
            hi = b0 + 500_000.0  # paper Sec. 5: widen the range to 1..(b + 500,000)
        budgets = band_grid(lo, hi, bands, b0)
    budgets = np.sort(np.asarray(budgets, dtype=float))
    provs = providers or tuple(p for p in spec.providers if p in tables.contexts)
    fr = Frontier(
        spec,
        budgets,
        backend=backend.name if method == "mip" else "exhaustive",
        method=method,
        tables_seconds=tables.seconds,
    )
    logdir = None
    if out_dir is not None:
        logdir = out_dir / "solver"
        logdir.mkdir(parents=True, exist_ok=True)
    for p in provs:
        ctx = tables.contexts.get(p, [])
        pts: list[Point] = []
        if method == "mip":
            t0 = time.perf_counter()
            m, meta = build_mip(spec, catalog, ctx, float(budgets[0]), providers=[p])
            fr.build_seconds += time.perf_counter() - t0
        warm = None
        floor, top = -math.inf, None
        if method == "mip" and ctx:
            # Two solves bracket the frontier: the cheapest feasible cluster
            # (below its cost every band is infeasible) and the fastest at the
            # highest budget (at or above its cost every band has that same
            # optimum, because the feasible set only grows). Bands in between
            # are solved, warm-started.
            low = cheapest(spec, catalog, tables, backend, providers=(p,), rho=rho)
            floor = low.cost if low else math.inf
            if low is not None:
                set_budget(m, meta, float(budgets[-1]))
                log = logdir / f"band{len(budgets) - 1:02d}_{p}.log" if logdir else None
                res = backend.solve(m, gap=gap, time_limit=time_limit, log_path=log)
                fr.solve_seconds += res.seconds
                fr.n_solves += 2
                top = _point(spec, catalog, m, meta, res, len(budgets) - 1, float(budgets[-1]), p, rho)
                if top.chosen is None:
                    top = None
        for i, b in enumerate(budgets):
            log = logdir / f"band{i:02d}_{p}.log" if logdir else None
            if method == "mip" and b < floor * (1 - 1e-9):
                note = (
                    f"infeasible: below the cheapest configuration (${floor:,.2f}/month, a min-cost MIP)"
                    if math.isfinite(floor)
                    else "infeasible: no configuration at any budget"
                )
                pt = Point(i, float(b), p, SolverStatus.INFEASIBLE, Result.infeasible(backend.name), None, None)
                if log is not None:
                    log.write_text(note + "\n")
            elif method == "mip" and top is not None and b >= top.cost * (1 + 1e-9):
                pt = Point(i, float(b), p, top.status, top.result, top.chosen, top.exact, top.approx_error)
                if log is not None and i != len(budgets) - 1:
                    log.write_text(
                        f"same optimum as band {len(budgets) - 1}: its cost ${top.cost:,.2f} is within "
                        f"this band's budget and no budget buys more (see band{len(budgets) - 1:02d}_{p}.log)\n"
                    )
            elif method == "mip":
                t0 = time.perf_counter()
                set_budget(m, meta, float(b))
                fr.build_seconds += time.perf_counter() - t0
                res = backend.solve(m, gap=gap, time_limit=time_limit, warm_start=warm, log_path=log)
                fr.solve_seconds += res.seconds
                fr.n_solves += 1
                if res.x is not None:
                    warm = res.x
                pt = _point(spec, catalog, m, meta, res, i, float(b), p, rho)
            else:
                pt = _exhaustive_point(spec, catalog, ctx, float(b), i, p, spec.design.max_cluster_size, rho=rho)
                fr.solve_seconds += pt.result.seconds if pt.result else 0.0
                if log is not None:
                    log.write_text(f"exhaustive enumeration: {pt.result.nodes if pt.result else 0} clusters\n")
            pts.append(pt)
            if progress:
                progress(p)
        fr.points[p] = pts
    _make_monotone(fr)
    fr.best = []
    for i in range(len(budgets)):
        cands = [fr.points[p][i] for p in fr.points if fr.points[p][i].chosen]
        fr.best.append(
            max(cands, key=lambda q: (q.throughput, -q.cost))
            if cands
            else Point(i, float(budgets[i]), "", SolverStatus.INFEASIBLE, None, None, None)
        )
    return fr


def _make_monotone(fr: Frontier) -> None:
    """Paper Sec. 5 step 2: a higher budget never maps to lower throughput.

    With optimal solves this already holds (the feasible set only grows); a
    band solved to a looser gap may dip, and then keeps the previous band's
    configuration. Counted and reported.
    """
    for pts in fr.points.values():
        best: Point | None = None
        for i, pt in enumerate(pts):
            if best is not None and (pt.chosen is None or pt.throughput < best.throughput * (1 - 1e-9)):
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
    rho: float = 0.0,
) -> Point | None:
    """The cheapest configuration overall (or meeting ``min_throughput``)."""
    provs = providers or tuple(tables.contexts)
    best: Point | None = None
    for p in provs:
        ctx = tables.contexts.get(p, [])
        if not ctx:
            continue
        m, meta = build_mip(spec, catalog, ctx, 1e12, providers=[p], min_throughput=min_throughput)
        # minimize the bill instead of maximizing throughput
        budget_row = m.cons["budget"]
        cost = np.zeros(m.n_vars)
        cost[budget_row.indices] = budget_row.data
        cost[m.vars["X"].start] = -1e-9
        m.cost = cost
        res = backend.solve(m, gap=1e-6)
        if res.x is None:
            continue
        pt = _point(spec, catalog, m, meta, res, -1, math.inf, p, rho)
        if pt.chosen and (best is None or pt.cost < best.cost):
            best = pt
    return best


def baselines(spec: Spec, catalog: Catalog, tables: Tables, budgets: np.ndarray) -> dict[str, list[dict[str, Any]]]:
    """Each preset on homogeneous clusters of one VM type (how fixed engines are
    deployed; the paper's baselines): best throughput per band, per provider."""
    N = spec.workload.entries
    out: dict[str, list[dict[str, Any]]] = {}
    data_gib = spec.workload.data_bytes / GIB
    for name, per_p in tables.presets.items():
        rows = []
        for p, ctxs in per_p.items():
            terms = sla_terms(catalog, p, spec.slas)
            if terms.unavailable:
                continue
            cands = []
            for c in ctxs:
                k = round(N / c.entries)
                if k < terms.min_nodes or k > spec.design.max_cluster_size:
                    continue
                comp = c.cost_month * k
                cost = comp + sla_cost(terms, k, data_gib, comp)
                cands.append((cost, c.throughput * k, c, k))
            for i, b in enumerate(budgets):
                ok = [x for x in cands if x[0] <= b]
                if not ok:
                    continue
                cost, x, c, k = max(ok, key=lambda t: (t[1], -t[0]))
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


def neighbours(points: list[Point], budget: float) -> dict[str, Any]:
    """The frontier points just below and above ``budget`` (what-if suggestions)."""
    feas = [p for p in points if p.chosen]
    at = [p for p in feas if p.budget <= budget * (1 + 1e-9)]
    cur = max(at, key=lambda p: p.throughput) if at else None
    out: dict[str, Any] = {}
    if cur is None:
        return out
    up = [p for p in feas if p.throughput > cur.throughput * 1.0001 and p.cost > cur.cost]
    if up:
        nxt = min(up, key=lambda p: p.cost)
        out["up"] = {
            "extra_usd": nxt.cost - cur.cost,
            "gain": nxt.throughput / cur.throughput - 1,
            "monthly_cost": nxt.cost,
            "throughput_ops": nxt.throughput,
            "provider": nxt.provider,
        }
    down = [p for p in feas if p.cost < cur.cost * 0.9999]
    if down:
        prv = max(down, key=lambda p: (p.throughput, -p.cost))
        out["down"] = {
            "saved_usd": cur.cost - prv.cost,
            "loss": 1 - prv.throughput / cur.throughput,
            "monthly_cost": prv.cost,
            "throughput_ops": prv.throughput,
            "provider": prv.provider,
        }
    return out
