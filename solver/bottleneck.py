"""The band MIP solved by branching on its bottleneck (the threshold algorithm).

The MIP of :mod:`solver.model` maximizes X, the minimum over the used columns of
v_c = N x_c / s_c: a *bottleneck* objective. Branching on X at a threshold t
leaves, in the branch X >= t, only the columns with v_c >= t, and the question
whether they hold the data within the budget: a covering problem (the least
bill subject to the same data, node-count and SLA rows). That is the threshold
algorithm for bottleneck problems (Edmonds and Fulkerson, "Bottleneck extrema",
1970): the optimum is the highest threshold whose covering problem fits the
budget, and the tie-break (the cheapest of equally fast clusters) is that
covering problem's optimum at it.

The covering problem is solved in closed form when the bill is linear in the
nodes (SLA terms flat, per node and per GB; a percent-of-spend term only without
a per-node one, the bill then growing with the spend alone) and the SLA asks for
at most two nodes. Shard sizes are N/k with k an integer, so the LP over the
data row alone is attained by a homogeneous cluster: k_c nodes of the column of
least k_c w_c (w_c: a node's bill). A cluster that meets a two-node minimum either
has no node of a one-node shard (then a homogeneous cluster of k_c >= 2 nodes is
optimal, by the same LP) or has one, holding all the data, and one more node:
the cheapest node of any column. So the least bill of every threshold is known
exactly (:func:`threshold_bills`), the band's answer is read off, and the
certificate is exact: the next threshold's least bill exceeds the budget.

Otherwise (three or more nodes, or a percent-of-spend term beside a per-node
one) the same function gives the covering LP's bound, branches whose bound
exceeds the budget are pruned, and the rest are decided by bisection, each
covering problem (a MIP of at most one column per shard size) solved by the back
end, whose gap then enters the certificate. tests/test_threshold.py checks
both paths against enumeration (solver.exhaustive).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cost_models.bill import bill_terms
from cost_models.cloud import SlaTerms, sla_cost
from cost_models.pricing.catalog import Catalog
from solver.backends import Backend, Result
from solver.model import DATA_SLACK, X_SCALE, Chosen, LinearModel, build_mip, read_solution
from solver.tables.context import Context
from specs.schema import Spec
from specs.vocab import Objective, SolverStatus

#: Relative slack of a budget comparison (a bill this close above the budget fits), as the
#: exhaustive oracle's.
BUDGET_TOL = 1e-12
#: Relative MIP gap asked of a covering problem (at most one column per shard size).
SUBPROBLEM_GAP = 1e-9
#: The largest SLA node minimum the closed form covers (availability asks for two).
CLOSED_FORM_MIN_NODES = 2


@dataclass
class ColumnTable:
    """One provider's columns as arrays: what the covering problems need."""

    provider: str
    contexts: list[Context]
    terms: SlaTerms
    max_cluster: int
    cost: np.ndarray  # monthly compute + storage of one node
    x: np.ndarray  # N x_c / s_c, kops (expected workload)
    p: np.ndarray  # N p_c / s_c, kops (perturbed workload)
    share: np.ndarray  # N / s_c: nodes of this column per copy of the data (fractional)
    fixed: float  # SLA terms that do not depend on the cluster (flat, per GB of data)

    @property
    def k(self) -> np.ndarray:
        """Nodes of each column that hold the data alone (the MIP's data row, its slack included)."""
        return np.ceil(self.share * (1 - DATA_SLACK))

    @property
    def w(self) -> np.ndarray:
        """A node's bill: compute, storage and the SLA's per-node terms."""
        return self.cost + self.terms.per_node

    @property
    def exact(self) -> bool:
        """Whether :func:`threshold_bills` is the covering problem's optimum (else its LP bound)."""
        t = self.terms
        return t.min_nodes <= CLOSED_FORM_MIN_NODES and not (t.percent_terms and t.per_node > 0)

    def value(self, objective: Objective) -> np.ndarray:
        """The objective's throughput per column: perturbed for PERTURBED, else expected."""
        return self.p if objective == Objective.PERTURBED else self.x

    def bill(self, nodes_bill: np.ndarray, spend: np.ndarray) -> np.ndarray:
        """The whole bill of clusters whose nodes cost ``nodes_bill`` (compute, storage,
        SLA per node), of which ``spend`` is compute and storage."""
        return np.asarray(self.fixed + nodes_bill + self.terms.support(spend), dtype=float)


def column_table(spec: Spec, catalog: Catalog, contexts: list[Context], provider: str, max_cluster: int) -> ColumnTable:
    """The columns of ``provider`` (none when it cannot price the spec's SLAs)."""
    N = spec.workload.entries
    terms = bill_terms(spec, catalog, provider)
    ctx = [] if terms.unavailable else [c for c in contexts if c.provider == provider]
    return ColumnTable(
        provider=provider,
        contexts=ctx,
        terms=terms,
        max_cluster=max_cluster,
        cost=np.array([c.cost_month for c in ctx], dtype=float),
        x=np.array([N * c.throughput / c.entries * X_SCALE for c in ctx], dtype=float),
        p=np.array([N * c.perturbed / c.entries * X_SCALE for c in ctx], dtype=float),
        share=np.array([N / c.entries for c in ctx], dtype=float),
        fixed=terms.fixed,
    )


def threshold_bills(tab: ColumnTable, value: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every threshold of ``value`` among the columns in ``mask`` (descending) and
    the least bill of a cluster of the columns at or above it: exact when
    ``tab.exact``, else the covering LP's bound. Non-decreasing in the threshold."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return np.zeros(0), np.zeros(0)
    order = idx[np.argsort(-value[idx], kind="stable")]  # fastest first
    v, k, w = value[order], tab.k[order], tab.w[order]
    last = np.flatnonzero(np.append(v[1:] != v[:-1], True))  # a threshold's branch: every column up to its last
    if tab.exact:
        m, cap = tab.terms.min_nodes, tab.max_cluster
        nodes = np.minimum.accumulate(np.where((k >= m) & (k <= cap), k * w, np.inf))
        if m == CLOSED_FORM_MIN_NODES and cap >= m:  # one node holds the data, one more meets the minimum
            lone = np.minimum.accumulate(np.where(k == 1, w, np.inf))
            nodes = np.minimum(nodes, lone + np.minimum.accumulate(w))
        # a percent-of-spend term comes without a per-node one here: the nodes' bill is the spend
        return v[last], tab.bill(nodes[last], nodes[last])
    share = tab.share[order] * (1 - DATA_SLACK)
    lp = np.minimum.accumulate(share * w)
    spend = np.minimum.accumulate(share * tab.cost[order])
    return v[last], tab.bill(lp[last], spend[last])


def cluster_at(spec: Spec, tab: ColumnTable, value: np.ndarray, mask: np.ndarray) -> Chosen:
    """The cheapest cluster of the columns in ``mask`` when ``tab.exact`` (of
    equal bills, the one whose slowest column is fastest in ``value``)."""
    idx = np.flatnonzero(mask)
    order = idx[np.argsort(-value[idx], kind="stable")]
    k, w = tab.k[order], tab.w[order]
    m = tab.terms.min_nodes
    homog = np.where((k >= m) & (k <= tab.max_cluster), k * w, np.inf)
    j = int(np.argmin(homog))
    nodes = [(int(order[j]), int(k[j]))]
    if m == CLOSED_FORM_MIN_NODES and tab.max_cluster >= m and (k == 1).any():
        a = int(np.argmin(np.where(k == 1, w, np.inf)))
        d = int(np.argmin(w))
        if w[a] + w[d] < homog[j]:
            nodes = [(int(order[a]), 2)] if a == d else [(int(order[a]), 1), (int(order[d]), 1)]
    return chosen_of(spec, tab, nodes)


def chosen_of(spec: Spec, tab: ColumnTable, nodes: list[tuple[int, int]]) -> Chosen:
    """A cluster of (column, count), billed as solver.model.read_solution bills it."""
    used = [(tab.contexts[i], k) for i, k in nodes]
    compute = sum(c.vm.usd_per_month * k for c, k in used)
    storage = sum(c.storage.usd_month * k for c, k in used)
    sla = sla_cost(tab.terms, sum(k for _, k in used), compute + storage)
    return Chosen(
        tab.provider,
        used,
        min(float(tab.x[i]) for i, _ in nodes),
        compute + storage + sla,
        compute,
        storage,
        sla,
        min(float(tab.p[i]) for i, _ in nodes),
    )


@dataclass
class Covering:
    """The cheapest cluster of a set of columns, with a proven lower bound on its bill."""

    chosen: Chosen | None
    bound: float  # no cluster of these columns costs less
    nodes: int = 0  # branch-and-bound nodes (1 when the closed form decides it)
    seconds: float = 0.0
    scaling_error: float = 0.0
    status: SolverStatus = SolverStatus.OPTIMAL
    mip: bool = False  # solved by the back end

    @property
    def bill(self) -> float:
        return self.chosen.monthly_cost if self.chosen else math.inf


def cheapest_cluster(
    spec: Spec,
    catalog: Catalog,
    tab: ColumnTable,
    mask: np.ndarray,
    backend: Backend,
    objective: Objective = Objective.EXPECTED,
    log_path: Path | None = None,
) -> Covering:
    """The covering problem over the columns in ``mask``: the cheapest cluster (of
    equal bills, the fastest in the objective's throughput), in closed form when
    ``tab.exact``, else by the MIP over the cheapest column of each shard size
    (columns of one shard size add the same data and nodes: the least bill wins)."""
    t0 = time.perf_counter()
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return Covering(None, math.inf, 0, 0.0, status=SolverStatus.INFEASIBLE)
    value = tab.value(objective)
    _, bills = threshold_bills(tab, value, mask)
    lb = float(bills[-1])
    if tab.exact:
        if not math.isfinite(lb):
            return Covering(None, math.inf, 1, time.perf_counter() - t0, status=SolverStatus.INFEASIBLE)
        ch = cluster_at(spec, tab, value, mask)
        return Covering(ch, min(lb, ch.monthly_cost), 1, time.perf_counter() - t0)
    keep: dict[float, int] = {}
    for i in idx[np.lexsort((-value[idx], tab.cost[idx]))]:
        keep.setdefault(float(tab.share[i]), int(i))
    cols = [tab.contexts[i] for i in sorted(keep.values())]
    kind = Objective.PERTURBED if objective == Objective.PERTURBED else Objective.EXPECTED
    m, meta = build_mip(spec, catalog, cols, 1e12, tab.max_cluster, providers=[tab.provider], objective=kind)
    minimize_bill(m)
    res = backend.solve(m, gap=SUBPROBLEM_GAP, log_path=log_path)
    secs = time.perf_counter() - t0
    if res.x is None:
        proven = res.status == SolverStatus.INFEASIBLE
        return Covering(None, math.inf if proven else lb, res.nodes, secs, res.scaling_error, res.status, True)
    ch = read_solution(m, meta, res.x, spec, catalog)
    # the MIP's objective is the bill less 1e-9 X: its bound plus that term's largest value bounds the bill
    bound = max(lb, res.bound + 1e-9 * meta.big_m) if math.isfinite(res.bound) else lb
    return Covering(ch, min(bound, ch.monthly_cost), max(res.nodes, 1), secs, res.scaling_error, res.status, True)


def minimize_bill(m: LinearModel) -> None:
    """Turn a declared band MIP into its covering problem: minimize the budget
    row (the bill); of equal bills prefer the larger X (a 1e-9 weight)."""
    row = m.cons["budget"]
    cost = np.zeros(m.n_vars)
    cost[row.indices] = row.data
    cost[m.vars["X"].start] = -1e-9
    m.cost = cost


def fits(bill: float, budget: float) -> bool:
    """Whether a bill fits a budget (relative slack :data:`BUDGET_TOL`)."""
    return bill <= budget * (1 + BUDGET_TOL)


@dataclass
class BandAnswer:
    """One band's optimum (None: no cluster of the columns fits) with its certificate."""

    chosen: Chosen | None
    result: Result
    note: str = ""
    mip_solves: int = 0  # covering problems the back end solved


def best_within(
    spec: Spec,
    catalog: Catalog,
    tab: ColumnTable,
    objective: Objective,
    mask: np.ndarray,
    budget: float,
    backend: Backend,
    log_path: Path | None = None,
) -> BandAnswer:
    """The band's optimum over the columns in ``mask``: the highest threshold of
    the objective's throughput whose covering problem fits ``budget``, then the
    cheapest cluster at it. The certificate's objective is -X* and its bound
    -(the highest threshold not proven out of the budget): the gap is 0 once the
    branch just above X* is pruned."""
    t0 = time.perf_counter()
    value = tab.value(objective)
    levels, bills = threshold_bills(tab, value, mask)  # descending thresholds, non-increasing bills
    # ascending thresholds, non-decreasing bills: the branches that fit are a prefix
    asc_levels, asc_bills = levels[::-1], bills[::-1]
    n_fit = int(np.searchsorted(asc_bills, budget * (1 + BUDGET_TOL), side="right"))
    nodes, scaling, probes, mips = 1, 0.0, 0, 0
    unproven = False

    def cover(t: float) -> Covering:
        nonlocal nodes, scaling, probes, mips
        probes += 1
        path = None if log_path is None else log_path.with_name(f"{log_path.stem}_t{probes}{log_path.suffix}")
        cov = cheapest_cluster(spec, catalog, tab, mask & (value >= t), backend, objective, path)
        nodes += cov.nodes
        mips += int(cov.mip)
        scaling = max(scaling, cov.scaling_error)
        return cov

    if tab.exact:
        x_star = float(asc_levels[n_fit - 1]) if n_fit else -math.inf
        hi = n_fit
        best = cover(x_star) if n_fit else None
    else:
        # thresholds whose LP bound fits are open; bisection decides them (feasibility falls as t rises)
        best = None
        x_star = -math.inf
        lo, hi = -1, n_fit
        while hi - lo > 1:
            mid = (lo + hi) // 2
            cov = cover(float(asc_levels[mid]))
            if cov.chosen is not None and fits(cov.bill, budget):
                reached = cov.chosen.value(objective)
                lo = max(mid, int(np.searchsorted(asc_levels, reached, side="right")) - 1)
                best, x_star = cov, max(x_star, reached)
            else:
                proven = cov.status in (SolverStatus.OPTIMAL, SolverStatus.INFEASIBLE) and not fits(cov.bound, budget)
                unproven |= not proven
                hi = mid
    if best is None or best.chosen is None:
        res = Result.infeasible(backend.name, nodes, time.perf_counter() - t0)
        res.scaling_error = scaling
        return BandAnswer(None, res, "no cluster of these columns fits the budget", mips)
    upper = float(asc_levels[n_fit - 1]) if unproven else x_star
    pruned = (
        f"the next threshold {float(asc_levels[hi]):,.6g} kops needs ${float(asc_bills[hi]):,.2f}"
        if hi < asc_levels.size
        else "no column is faster"
    )
    note = (
        f"X* = {x_star:,.6g} kops; the cheapest cluster at it ${best.bill:,.2f}/month (bound ${best.bound:,.2f}); "
        f"{pruned}; {probes} covering problems, {mips} by the back end"
    )
    res = Result(
        SolverStatus.FEASIBLE if unproven else SolverStatus.OPTIMAL,
        -x_star,
        -upper,
        (upper - x_star) / max(x_star, 1e-9),
        nodes,
        time.perf_counter() - t0,
        None,
        backend.name,
        scaling,
    )
    return BandAnswer(best.chosen, res, note, mips)
