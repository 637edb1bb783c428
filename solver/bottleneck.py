"""The band problem solved by branching on its bottleneck (the threshold algorithm).

A cluster of columns c with n_c nodes holds Q = sum_c n_c / k_c copies of the data (a node of column
c is tabled holding N / k_c entries; keys are spread in proportion to that capacity, so each node
holds at most its column's share). A node then serves at least its column's tabled rate x_c, and
the cluster's throughput is valued at

    X = min over the used columns of T_c * Q,   T_c = k_c x_c  (kops: N x_c / s_c),

(solver.model's bottleneck rows, and solver.exhaustive's): a homogeneous cluster of n nodes of c is
n x_c, whatever n, so every node count from the column's k_c to the cluster cap is a cluster. The
same holds for the perturbed workload's P with T^p_c.

X is a bottleneck objective times a knapsack's value. Branching on a threshold t of T leaves the
columns at or above it and the question how many copies of the data the budget buys of them: the
largest Q is an integer knapsack (solver.knapsack.max_capacity), and X* = max_t t * Q*(t) (the
cluster of Q*(t) is worth at least t * Q*(t); the optimum's own threshold reaches it). Thresholds
are taken in decreasing order of their bound t * (the LP bound of Q*(t)), from an incumbent (the
best homogeneous cluster, in closed form); the search stops at the first bound below it. A floor
on the other throughput (the robust rule's P >= floor, or a latency target's X >= target under the
perturbed objective) is a second threshold tau: with the columns at or above both,
tau * Q >= floor; for each t the least tau whose Q*(t, tau) meets it is the best (Q* falls as tau
rises). Of equally fast clusters the cheapest is taken (solver.knapsack.min_bill at each threshold
that reaches X*). tests/test_threshold.py and tests/test_differential.py check it against
enumeration (solver.exhaustive) and the whole MIP (solver.model).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_models.bill import bill_terms
from cost_models.cloud import SlaTerms, sla_cost
from cost_models.pricing.catalog import Catalog
from cost_models.replication import replica_nodes
from solver.backends import Result
from solver.knapsack import BillModel, Packing, max_capacity, min_bill, numba_search, staircase_of_grouped
from solver.model import DATA_SLACK, X_SCALE, Chosen
from solver.space import reaches
from solver.tables.context import Context
from specs.schema import Spec
from specs.vocab import Objective, SolverStatus, WorkloadKind

#: Relative slack of a budget comparison (a bill this close above the budget fits), as the
#: exhaustive oracle's.
BUDGET_TOL = 1e-12
#: Relative tolerance of "as fast": clusters within it of the best are ties, and the cheapest wins.
TIE_TOL = 1e-12
#: Whether _cheapest_as_fast leaves out, before its walk, the thresholds whose branch cannot hold a
#: cheaper cluster (its least cost of a copy at the need rules it out); off only to check that it
#: changes no answer (tests/test_cheapest_as_fast.py).
SKIP_CLOSED_THRESHOLDS = True
#: Levels per block of _best_in_class's floor bounds (a block's mask is this many x the columns).
FLOOR_BLOCK = 128
#: The least capacity a cluster needs: the data row with its slack (solver.model.DATA_SLACK).
Q_MIN = 1.0 - DATA_SLACK


@dataclass
class ColumnTable:
    """One provider's columns as arrays: what the knapsacks need."""

    provider: str
    contexts: list[Context]
    terms: SlaTerms
    max_cluster: int
    cost: np.ndarray  # monthly compute + storage of one unit
    x: np.ndarray  # T_c = N x_c / s_c, kops (expected workload): a copy of the data's worth
    p: np.ndarray  # the same on the perturbed workload
    share: np.ndarray  # k_c / unit = N / (s_c unit): units of this column per copy of the data (fractional)
    fixed: float  # SLA terms that do not depend on the cluster (flat, per GB of data, transfer)
    group: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # VM type, a label per column
    #: per column, the most units of a cluster it may be in (solver.space.reach: its scans' fan-out
    #: was tabled at that many; inf: any count) when its throughput on the expected workload
    #: counts, and when the perturbed one's does. Empty: every column any count.
    reach_x: np.ndarray = field(default_factory=lambda: np.zeros(0))
    reach_p: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def reach(self, *per_copy: np.ndarray) -> np.ndarray:
        """Per column, the most units of a cluster valued by the ``per_copy`` arrays (``x``, ``p``)."""
        out = np.full(self.share.size, math.inf)
        for v in per_copy:
            r = self.reach_p if v is self.p else self.reach_x
            if r.size:
                out = np.minimum(out, r)
        return out

    #: nodes a count counts: a replicated spec's replica group (RF nodes of one column, a Raft group
    #: of cosine-raft; cost_models.replication.replica_nodes), else 1. Every count, cost, share,
    #: cap and SLA node term of the table is per unit; chosen_of hands back nodes.
    unit: int = 1

    @property
    def bill_model(self) -> BillModel:
        return BillModel(self.fixed, self.terms.per_node, self.terms.percent_terms, self.terms.transfer)

    _cache: dict[Any, Any] = field(default_factory=dict)  # derived arrays (w, key columns)

    @property
    def w(self) -> np.ndarray:
        """A node's bill: compute, storage and the SLA's per-node terms."""
        if "w" not in self._cache:
            self._cache["w"] = self.cost + self.terms.per_node
        return np.asarray(self._cache["w"])

    @property
    def node_x(self) -> np.ndarray:
        """Each column's node throughput (kops), expected workload."""
        return self.x / self.share

    @property
    def node_p(self) -> np.ndarray:
        return self.p / self.share

    def by_value(self, value: np.ndarray) -> np.ndarray:
        """Every column by decreasing ``value`` (stable), sorted once per value array."""
        key = ("by_value", value.tobytes())
        if key not in self._cache:
            self._cache[key] = np.argsort(-value, kind="stable")
        return np.asarray(self._cache[key])

    def by_gk(self) -> np.ndarray:
        """Every column by VM type, shard size, cost and position (what :meth:`items` walks)."""
        if "by_gk" not in self._cache:
            n = self.share.size
            self._cache["by_gk"] = np.lexsort((np.arange(n), self.cost, self.share, self.group))
        return np.asarray(self._cache["by_gk"])

    def items(self, cols: np.ndarray) -> np.ndarray:
        """The knapsack's items of the columns ``cols``: :func:`solver.knapsack.staircase` per VM
        type (a cluster runs one column of each; by one sort of all columns, each set's once)."""
        by_gk = self.by_gk()
        member = np.zeros(self.share.size, dtype=bool)
        member[cols] = True
        compiled = numba_search()
        if compiled is not None:  # quicker than the cache's key
            return np.asarray(compiled.staircase_members(by_gk, member, self.share, self.group, self.cost))
        if "cost_rank" not in self._cache:
            self._cache["cost_rank"] = np.unique(self.cost, return_inverse=True)
        key = ("items", np.packbits(member).tobytes())
        if key not in self._cache:
            levels, rank = self._cache["cost_rank"]
            self._cache[key] = staircase_of_grouped(self.share, self.group, by_gk[member[by_gk]], levels, rank)
        return np.asarray(self._cache[key])

    def budget_rows(self, budget: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The bill's rows within ``budget`` (:meth:`BillModel.rows`) and the most nodes of each
        column alone it buys (:meth:`BillModel.most_nodes`), once per budget (every class of a
        band asks: neither depends on the cluster's size)."""
        key = ("budget_rows", budget)
        if key not in self._cache:
            bill = self.bill_model
            coefs, rhs = bill.rows(self.cost, budget)
            self._cache[key] = (coefs, rhs, bill.most_nodes(self.cost, budget))
        return self._cache[key]  # type: ignore[no-any-return]

    def column_of(self) -> dict[int, int]:
        """Each column's index by its context's identity (once per table)."""
        if "column_of" not in self._cache:
            self._cache["column_of"] = {id(c): i for i, c in enumerate(self.contexts)}
        where: dict[int, int] = self._cache["column_of"]
        return where

    def digest(self) -> str:
        """SHA-256 of everything a band's search reads of the table (solver.band_cache): the
        provider, cap, unit and SLA terms, and every column's arrays, by their bytes; once per table
        (:func:`within_cap`'s tables share the derived arrays: the cap and the terms are in the key)."""
        key = ("digest", self.max_cluster, self.terms)
        if key not in self._cache:
            h = hashlib.sha256()
            terms = json.dumps(dataclasses.asdict(self.terms), sort_keys=True)
            h.update(f"{self.provider}\0{self.max_cluster}\0{self.unit}\0{terms}\0{len(self.contexts)}\0".encode())
            for name in ("cost", "x", "p", "share", "group", "reach_x", "reach_p"):
                a = np.ascontiguousarray(getattr(self, name))
                h.update(f"{name} {a.dtype.str}{a.shape}\0".encode() + a.tobytes())
            self._cache[key] = h.hexdigest()
        return str(self._cache[key])

    def value(self, objective: Objective) -> np.ndarray:
        """The objective's throughput per copy: perturbed for PERTURBED, else expected."""
        return self.p if objective == Objective.PERTURBED else self.x

    def need(self) -> np.ndarray:
        """Nodes of each column alone that hold the data and meet the SLA's node minimum."""
        return np.maximum(np.ceil(self.share * Q_MIN), self.terms.min_nodes)


def column_table(spec: Spec, catalog: Catalog, contexts: list[Context], provider: str, max_cluster: int) -> ColumnTable:
    """The columns of ``provider`` (none when it cannot price the spec's SLAs)."""
    N = spec.workload.entries
    unit = replica_nodes(spec)
    terms = unit_terms(bill_terms(spec, catalog, provider), unit)
    ctx = [] if terms.unavailable else [c for c in contexts if c.provider == provider]
    vm_names = sorted({c.vm.name for c in ctx})
    return ColumnTable(
        provider=provider,
        contexts=ctx,
        terms=terms,
        # a node holds one key at least: no more nodes than keys (a unit holds unit copies of one)
        max_cluster=min(max_cluster, N) // unit,
        cost=np.array([c.cost_month * unit for c in ctx], dtype=float),
        x=np.array([N * c.throughput / c.entries * X_SCALE for c in ctx], dtype=float),
        p=np.array([N * c.perturbed / c.entries * X_SCALE for c in ctx], dtype=float),
        share=np.array([N / (c.entries * unit) for c in ctx], dtype=float),
        fixed=terms.fixed,
        group=np.array([vm_names.index(c.vm.name) for c in ctx], dtype=np.int64),
        reach_x=np.array(reaches(spec, (c.entries for c in ctx), WorkloadKind.EXPECTED, unit), dtype=float),
        reach_p=np.array(reaches(spec, (c.entries for c in ctx), WorkloadKind.PERTURBED, unit), dtype=float),
        unit=unit,
    )


#: A class of clusters (:func:`reach_classes`): (the most units, the fewest, the columns).
ReachClass = tuple[int, int, np.ndarray]


def reach_classes(tab: ColumnTable, mask: np.ndarray, r: np.ndarray) -> list[ReachClass]:
    """The band problem over ``mask`` split by the clusters' size: with U_1 < U_2 < ... the distinct
    reaches ``r`` of its columns (units) below the cap and the cap, class j holds the clusters of U_{j-1}
    + 1 to U_j units, of the columns of reach at least U_j. A cluster of m units is in the class of
    the least U_j >= m and no other (its columns' reaches are at least m, so at least U_j), so the
    best of the classes' optima is the optimum. One class (the cap's) when no reach is below it."""
    cap = tab.max_cluster
    caps = [int(u) for u in np.unique(r[mask & (r < cap)]).tolist()] + [cap]
    return [(u, (caps[j - 1] + 1 if j else 1), mask & (r >= u)) for j, u in enumerate(caps)]


def within_cap(tab: ColumnTable, cap: int, least: int = 1) -> ColumnTable:
    """``tab`` with the cluster cap ``cap`` and at least ``least`` units (beside the SLA's node
    minimum): one class of :func:`reach_classes` (its derived arrays shared: none depends on either)."""
    if cap == tab.max_cluster and least <= tab.terms.min_nodes:
        return tab
    terms = dataclasses.replace(tab.terms, min_nodes=max(tab.terms.min_nodes, least))
    return dataclasses.replace(tab, max_cluster=cap, terms=terms)


def unit_terms(terms: SlaTerms, unit: int) -> SlaTerms:
    """``terms`` per unit of ``unit`` nodes: the per-node fees times ``unit``, the least node count in
    units (rounded up)."""
    if unit == 1:
        return terms
    return dataclasses.replace(terms, per_node=terms.per_node * unit, min_nodes=-(-terms.min_nodes // unit))


#: A cluster as (column index, count) pairs.
Nodes = list[tuple[int, int]]


def capacity(tab: ColumnTable, nodes: Nodes) -> float:
    """Q: copies of the data the cluster's nodes hold."""
    return float(sum(k / tab.share[i] for i, k in nodes))


def cluster_value(tab: ColumnTable, per_copy: np.ndarray, nodes: Nodes) -> float:
    """min over the used columns of ``per_copy`` times Q (kops)."""
    return min(float(per_copy[i]) for i, _ in nodes) * capacity(tab, nodes) if nodes else 0.0


def chosen_of(spec: Spec, tab: ColumnTable, nodes: Nodes) -> Chosen:
    """A cluster of (column, count of units), billed as solver.model.read_solution bills it; its
    nodes are counted in nodes."""
    used = [(tab.contexts[i], k * tab.unit) for i, k in nodes]
    compute = sum(c.vm.usd_per_month * k for c, k in used)
    storage = sum(c.storage.usd_month * k for c, k in used)
    sla = sla_cost(tab.terms, sum(k for _, k in nodes), compute + storage)
    return Chosen(
        tab.provider,
        used,
        cluster_value(tab, tab.x, nodes),
        compute + storage + sla,
        compute,
        storage,
        sla,
        cluster_value(tab, tab.p, nodes),
    )


def fits(bill: float, budget: float) -> bool:
    """Whether a bill fits a budget (relative slack :data:`BUDGET_TOL`)."""
    return bill <= budget * (1 + BUDGET_TOL)


@dataclass
class Floor:
    """A lower bound on the other throughput of the cluster: min over used columns of ``per_copy``
    times Q must reach ``at_least`` (kops)."""

    per_copy: np.ndarray
    at_least: float


def _nodes(idx: np.ndarray, counts: np.ndarray) -> Nodes:
    return [(int(idx[j]), int(n)) for j, n in enumerate(counts) if n > 0]


def _q_bound(tab: ColumnTable, idx: np.ndarray, rhs0: float) -> float:
    """An upper bound on Q of clusters of columns ``idx``: the budget row alone (the percent terms at
    their minimum) and the cluster cap alone, each as an LP."""
    if idx.size == 0 or rhs0 < 0:
        return 0.0
    per_copy_cost = tab.share[idx] * tab.w[idx]
    return min(rhs0 / float(per_copy_cost.min()), tab.max_cluster / float(tab.share[idx].min()))


def homogeneous(tab: ColumnTable, mask: np.ndarray, budget: float) -> np.ndarray:
    """Per column, the most nodes of it alone the budget buys within the cap, 0 where that does not
    hold the data or meet the node minimum (or the column is not in ``mask``)."""
    n = np.minimum(tab.budget_rows(budget)[2], tab.max_cluster)
    return np.where(mask & (n >= tab.need()), n, 0).astype(np.int64)


def entering(tab: ColumnTable, per_copy: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Per column, whether it enters the knapsack's items (the staircase of its VM type,
    :meth:`ColumnTable.items`) of the ``usable`` columns at or above its level of ``per_copy`` when
    its level is added (columns by ``per_copy`` descending): it is cheaper than every column of its
    VM type and of its shard size or a larger one already there. A level none of whose columns
    enters has the items of the level above, which is worth more (a higher threshold, the same
    capacity): only the others need a search.
    Whether a column enters does not change when columns dearer than it are left out (they never
    block it), so one pass over the usable columns serves every budget."""
    key = (per_copy.tobytes(), usable.tobytes())
    if key in tab._cache:
        return np.asarray(tab._cache[key])
    out = np.zeros(per_copy.size, dtype=bool)
    idx = np.flatnonzero(usable)
    if idx.size:
        order = idx[np.argsort(-per_copy[idx], kind="stable")]
        vs = per_copy[order]
        levels_end = np.append(np.flatnonzero(vs[1:] != vs[:-1]), vs.size - 1)
        ks, rank = np.unique(tab.share[order], return_inverse=True)
        compiled = numba_search()
        grp = tab.group[order]
        if compiled is not None and int(grp.min()) >= 0:  # labels index the compiled pass's rows
            out = compiled.entering_sorted(
                order.astype(np.int64),
                levels_end.astype(np.int64),
                rank.astype(np.int64),
                np.ascontiguousarray(tab.cost[order], dtype=float),
                grp.astype(np.int64),
                int(grp.max()) + 1,
                int(ks.size),
                per_copy.size,
            )
            tab._cache[key] = out
            return np.asarray(out)
        prefix: dict[int, list[float]] = {}  # per VM type, the least cost of any shard size up to each rank
        ranks, costs, groups = rank.tolist(), tab.cost[order].tolist(), grp.tolist()
        start = 0
        for end in levels_end.tolist():
            for j in range(start, end + 1):  # a level's columns are compared with the levels above
                pm = prefix.get(groups[j])
                if pm is None or costs[j] < pm[ranks[j]] * (1 - 1e-12):
                    out[order[j]] = True
            for j in range(start, end + 1):
                pm = prefix.setdefault(groups[j], [math.inf] * ks.size)
                r, c = ranks[j], costs[j]
                for rr in range(r, ks.size):
                    if c < pm[rr]:
                        pm[rr] = c
                    else:
                        break
            start = end + 1
    tab._cache[key] = out
    return out


@dataclass
class BandAnswer:
    """One band's optimum (None: no cluster of the columns fits) with its certificate."""

    chosen: Chosen | None
    result: Result
    note: str = ""
    mip_solves: int = 0  # kept for the frontier's count: the threshold method solves no MIP
    nodes: Nodes | None = None  # the answer as (column index, count)
    #: the highest bound of a threshold not searched to the end (-inf: none)
    open_bound: float = -math.inf
    #: an unfinished search's (``finish=False``) thresholds that may hold as fast a cluster, and its
    #: candidate columns: what :func:`_cheapest_as_fast` needs
    ties: list[float] = field(default_factory=list)
    cand: np.ndarray | None = None


def best_within(
    spec: Spec,
    tab: ColumnTable,
    objective: Objective,
    mask: np.ndarray,
    budget: float,
    *,
    floor: Floor | None = None,
    start: Nodes | None = None,
    backend: str = "highs",
) -> BandAnswer:
    """The band's optimum over the columns in ``mask``: max of the objective's min T * Q (expected
    for EXPECTED and ROBUST, perturbed for PERTURBED) within ``budget``, subject to ``floor``; of
    equally fast clusters the cheapest. ``start``: a cluster known to be feasible here (a cheaper
    band's answer), the first incumbent. The certificate's objective is -X* and its bound -(the
    highest bound of a threshold not searched to the end).
    Columns whose scans were tabled at a fan-out below the cap (:func:`reach_classes`) are solved
    class by class, in decreasing order of a class's bound (its best column's T times its LP
    capacity), each searching only above the best found so far (ties kept: the cheapest wins)."""
    value = tab.value(objective)
    classes = reach_classes(tab, mask, tab.reach(value) if floor is None else tab.reach(value, floor.per_copy))
    if len(classes) == 1:
        cap, _, m = classes[0]
        sub = within_cap(tab, cap)
        return _best_in_class(spec, sub, objective, m, budget, floor=floor, start=start, backend=backend)
    t0 = time.perf_counter()
    _, rhs, most = tab.budget_rows(budget)
    rhs0 = float(rhs[0])
    bounds = np.array([_class_bound(tab, value, m, cap, rhs0, least, floor, most) for cap, least, m in classes])
    found: list[tuple[int, int, BandAnswer]] = []
    best_x, open_bound, visited, searched, note = -math.inf, -math.inf, 0, 0, ""
    # by bound, of equal bounds the larger clusters first (a large budget's best is there)
    for ci in np.lexsort((-np.array([c[0] for c in classes]), -bounds)).tolist():
        if not math.isfinite(bounds[ci]) or bounds[ci] < best_x * (1 - TIE_TOL):
            break
        cap, least, m = classes[ci]
        size = sum(k for _, k in start) if start is not None else 0
        st = start if start is not None and all(m[i] for i, _ in start) and least <= size <= cap else None
        sub = within_cap(tab, cap, least)
        ans = _best_in_class(
            spec,
            sub,
            objective,
            m,
            budget,
            floor=floor,
            start=st,
            backend=backend,
            beat=best_x * (1 - 2 * TIE_TOL),
            finish=False,
        )
        searched += 1
        visited += ans.result.nodes
        open_bound = max(open_bound, ans.open_bound)
        note = note or ans.note
        if ans.nodes is None:
            continue
        found.append((cap, least, ans))
        best_x = max(best_x, cluster_value(tab, value, ans.nodes))
    # of the classes as fast as the best, each one's cheapest as fast cluster; the cheapest of them
    bill_model = tab.bill_model
    best_nodes: Nodes | None = None
    best_bill = math.inf
    for cap, least, ans in found:
        assert ans.nodes is not None and ans.cand is not None
        if cluster_value(tab, value, ans.nodes) < best_x * (1 - TIE_TOL):
            continue
        sub = within_cap(tab, cap, least)
        nodes = _cheapest_as_fast(sub, value, floor, ans.nodes, best_x, ans.ties, budget, ans.cand)
        nodes = _reseat(sub, value, floor, nodes, ans.cand)
        b = bill_model.bill(tab.cost[[i for i, _ in nodes]], np.array([k for _, k in nodes]))
        if b < best_bill * (1 - TIE_TOL):
            best_nodes, best_bill = nodes, b
    secs = time.perf_counter() - t0
    if best_nodes is None:
        return BandAnswer(None, Result.infeasible(backend, visited, secs), note or "no cluster fits the budget")
    x_star = cluster_value(tab, value, best_nodes)
    upper = max(x_star, open_bound)
    res = Result(
        SolverStatus.OPTIMAL if upper <= x_star else SolverStatus.FEASIBLE,
        -x_star,
        -upper,
        (upper - x_star) / max(x_star, 1e-9),
        max(visited, 1),
        secs,
        None,
        backend,
        0.0,
    )
    chosen = chosen_of(spec, tab, best_nodes)
    note = _note(
        tab,
        best_nodes,
        x_star,
        chosen,
        f"{searched} of {len(classes)} fan-out classes searched, {visited} knapsack nodes",
    )
    return BandAnswer(chosen, res, note, 0, best_nodes, open_bound)


def _note(tab: ColumnTable, nodes: Nodes, x_star: float, chosen: Chosen, searched: str) -> str:
    """A band answer's log line: its value, cluster, capacity and bill, and what was ``searched``."""
    return (
        f"X* = {x_star:,.6g} kops: {' + '.join(f'{k} x {tab.contexts[i].vm.name}' for i, k in nodes)} "
        f"(Q = {capacity(tab, nodes):.6g} copies), ${chosen.monthly_cost:,.2f}/month; {searched}"
    )


def _class_bound(
    tab: ColumnTable,
    value: np.ndarray,
    mask: np.ndarray,
    cap: int,
    rhs0: float,
    least: int = 1,
    floor: Floor | None = None,
    most: np.ndarray | None = None,
) -> float:
    """An upper bound on a class's optimum: its best column's ``value`` times the largest capacity
    of its columns within the budget row ``rhs0`` and ``cap`` units, each as an LP, and the sum of
    its nodes' rates (min_c T_c Q <= sum_d n_d T_d / k_d): ``cap`` of the fastest unit, or as many
    of the fastest per dollar as the budget row buys (-inf: none holds the data, the budget row
    buys fewer than ``least`` units of its cheapest, or, with a ``floor`` and each column's
    ``most`` nodes the budget buys, no cluster reaches the floor: :func:`_best_in_class`'s own
    first test, made before its search is set up)."""
    idx = np.flatnonzero(mask & (value > 0))
    if idx.size == 0 or rhs0 < 0 or rhs0 < least * float(tab.w[idx].min()) * (1 - TIE_TOL):
        return -math.inf
    if floor is not None and most is not None:
        reachable = np.flatnonzero(mask & (most >= 1) & (floor.per_copy > 0))
        if reachable.size and _floor_reach(tab, reachable, floor, rhs0, cap) < floor.at_least * (1 - TIE_TOL):
            return -math.inf
    q = min(rhs0 / float((tab.share[idx] * tab.w[idx]).min()), cap / float(tab.share[idx].min()))
    if q < Q_MIN * (1 - TIE_TOL):
        return -math.inf
    rate = value[idx] / tab.share[idx]  # a unit's
    return min(float(value[idx].max()) * q, cap * float(rate.max()), rhs0 * float((rate / tab.w[idx]).max()))


def _floor_reach(tab: ColumnTable, idx: np.ndarray, floor: Floor, rhs0: float, cap: int) -> float:
    """The most floor throughput a cluster of the columns ``idx`` may have: at most the sum of its
    nodes' rates, as many of the best per dollar as the budget row ``rhs0`` buys, or of the best
    per node as ``cap`` units allow."""
    node_w = floor.per_copy[idx] / tab.share[idx]
    return min(max(rhs0, 0.0) * float((node_w / tab.w[idx]).max()), cap * float(node_w.max()))


def _best_in_class(
    spec: Spec,
    tab: ColumnTable,
    objective: Objective,
    mask: np.ndarray,
    budget: float,
    *,
    floor: Floor | None = None,
    start: Nodes | None = None,
    backend: str = "highs",
    beat: float = -math.inf,
    finish: bool = True,
) -> BandAnswer:
    """:func:`best_within` of one class: every column in ``mask`` may be in a cluster of
    ``tab.max_cluster`` units. ``beat``: only clusters worth more are of interest (another class's
    best): thresholds whose bound does not reach it are not searched. ``finish`` False: the
    fastest cluster found, as found (no cheapest of equally fast ones, no certificate: the caller
    finishes it with the answer's ``ties`` and ``cand``)."""
    t0 = time.perf_counter()
    value = tab.value(objective)
    coefs_all, rhs, most = tab.budget_rows(budget)
    rhs0 = float(rhs[0])
    cand = mask & (most >= 1)
    if floor is not None:
        cand &= floor.per_copy > 0
    idx_all = np.flatnonzero(cand)
    visited, unproven = 0, -math.inf
    best_x, best_nodes = -math.inf, None
    if floor is not None and idx_all.size:
        # the floor's throughput is at most the sum of the nodes' rates: as many of the best per
        # dollar as the budget buys, or of the best per node as the cap allows
        if _floor_reach(tab, idx_all, floor, rhs0, tab.max_cluster) < floor.at_least * (1 - TIE_TOL):
            res = Result.infeasible(backend, 0, time.perf_counter() - t0)
            return BandAnswer(None, res, "no cluster within the budget reaches the floor")

    def consider(nodes: Nodes) -> None:
        nonlocal best_x, best_nodes
        if not nodes:
            return
        if floor is not None and cluster_value(tab, floor.per_copy, nodes) < floor.at_least * (1 - TIE_TOL):
            return
        v = cluster_value(tab, value, nodes)
        if v > best_x * (1 + TIE_TOL):
            best_x, best_nodes = v, nodes

    # incumbents: the start, and every column alone at the most nodes the budget buys
    if start is not None and all(cand[i] for i, _ in start):
        consider(start)
    homog = homogeneous(tab, cand, budget)
    hv = np.where(homog > 0, value * homog / tab.share, -math.inf)
    if floor is not None:
        hv = np.where(floor.per_copy * homog / tab.share >= floor.at_least * (1 - TIE_TOL), hv, -math.inf)
    if idx_all.size and np.isfinite(hv).any():
        j = int(np.argmax(hv))
        consider([(j, int(homog[j]))])

    # thresholds by decreasing bound; only the levels that change the knapsack's items
    order = tab.by_value(value)
    order = order[cand[order]]  # the candidates by decreasing value (one sort per table and value)
    vs = value[order]
    levels = vs[np.append(True, vs[1:] != vs[:-1])] if order.size else np.zeros(0)
    per_copy_cost = tab.share[order] * tab.w[order]
    cheapest_copy = np.minimum.accumulate(per_copy_cost) if order.size else per_copy_cost
    least_k = np.minimum.accumulate(tab.share[order]) if order.size else per_copy_cost
    last = np.searchsorted(-vs, -levels, side="right") - 1  # each level's branch: columns up to here
    qub = np.minimum(np.maximum(rhs0, 0.0) / cheapest_copy[last], tab.max_cluster / least_k[last])
    by_w_all = idx_all[np.argsort(floor.per_copy[idx_all], kind="stable")] if floor is not None else idx_all
    usable = value > 0 if floor is None else (value > 0) & (floor.per_copy > 0)
    left_out = usable & ~cand
    if left_out.any() and order.size and tab.cost[left_out].min() <= tab.cost[order].max():
        usable = usable & cand  # a mask that leaves out cheaper columns: no shared pass
    enters = entering(tab, value, usable)[order]
    level_of = np.searchsorted(-levels, -vs)  # each column's level
    keys = np.zeros(levels.size, dtype=bool)
    keys[level_of[enters]] = True
    # a branch's bound: its threshold times its LP capacity, and the sum of its nodes' rates
    # (min_c T_c Q <= sum_d n_d T_d / k_d): the cap's units of its fastest, or the budget row's of
    # its fastest per dollar
    unit_v = value[order] / tab.share[order] if order.size else per_copy_cost
    by_rates = np.minimum(
        np.maximum.accumulate(unit_v)[last] * tab.max_cluster if order.size else levels,
        np.maximum.accumulate(unit_v / tab.w[order])[last] * max(rhs0, 0.0) if order.size else levels,
    )
    ub = np.where(keys & (qub >= Q_MIN * (1 - TIE_TOL)), np.minimum(levels * qub, by_rates), -math.inf)
    if floor is not None:
        # with a floor, only the columns a cluster of the level's largest capacity could use count:
        # one round of the elimination below, per level (a valid, tighter bound)
        w_order = floor.per_copy[order]
        copy_order = tab.share[order] * tab.w[order]
        k_order = tab.share[order]
        fin = np.flatnonzero(np.isfinite(ub))
        compiled = numba_search()
        need = floor.at_least * (1 - TIE_TOL)
        pos = np.arange(order.size)
        # the levels' least cost of a copy and share over the columns they may use: compiled, as
        # loops over every level at once; the reference in blocks, each a levels x columns mask
        # (the same products as one by one)
        step = max(fin.size, 1) if compiled is not None else FLOOR_BLOCK
        for s in range(0, fin.size, step):
            li = fin[s : s + step]
            if compiled is not None:
                least_copy, least_share, some = compiled.floor_level_bounds(
                    li, last, qub, w_order, copy_order, k_order, need
                )
            else:
                ok = (pos[None, :] <= last[li][:, None]) & (w_order[None, :] * qub[li][:, None] >= need)
                least_copy = np.where(ok, copy_order[None, :], math.inf).min(axis=1)
                least_share = np.where(ok, k_order[None, :], math.inf).min(axis=1)
                some = ok.any(axis=1)
            q2 = np.minimum(max(rhs0, 0.0) / least_copy, tab.max_cluster / least_share)
            fine = some & (q2 >= Q_MIN * (1 - TIE_TOL))
            ub[li] = np.where(fine, np.minimum(levels[li] * q2, by_rates[li]), -math.inf)
    searched = 0
    packs: dict[bytes, tuple[float, _Pack]] = {}  # an item set's largest capacity above a beat
    for li in np.argsort(-ub, kind="stable"):
        t = float(levels[li])
        bar = max(best_x, beat)  # what a threshold must beat: the best here, or another class's
        if ub[li] <= bar * (1 + TIE_TOL):
            break
        branch = order[: last[li] + 1]
        if t * _integer_bound(tab, branch, rhs0) <= bar * (1 + TIE_TOL):
            continue  # the integer bound of its budget row rules it out
        searched += 1
        if floor is None:
            pack = _max_q(tab, branch, coefs_all, rhs, Q_MIN, bar / t)
            visited += pack.nodes
            if not pack.proven:
                unproven = max(unproven, t * pack.bound)
            if pack.counts is not None:
                consider(_nodes(pack.idx, pack.counts))
            continue
        # the floor: a column c can be used only in a cluster of capacity Q >= floor / W_c. Drop
        # the columns that need more than the largest capacity of the columns left, until none
        # does: every cluster meeting the floor keeps its columns throughout (its capacity is at
        # most each round's largest), and the last round's largest packing meets the floor
        cols = _floor_columns(tab, by_w_all[value[by_w_all] >= t], floor, rhs0, (bar / t) * (1 + TIE_TOL))
        while cols.size:
            items = tab.items(cols)
            key = items.tobytes()
            need = max(best_x, beat) / t
            if key not in packs or packs[key][0] > need:  # a search above a higher need may miss
                found = _max_q(tab, items, coefs_all, rhs, Q_MIN, need, items_given=True)
                visited += found.nodes
                if not found.proven:
                    unproven = max(unproven, t * found.bound)
                packs[key] = (need, found)
            pack = packs[key][1]
            if pack.counts is None:
                break  # no packing of these columns beats the incumbent, nor of fewer
            keep = floor.per_copy[cols] * pack.value >= floor.at_least * (1 - TIE_TOL)
            if keep.all():
                consider(_nodes(pack.idx, pack.counts))
                break
            cols = cols[keep]

    secs = time.perf_counter() - t0
    if best_nodes is None:
        res = Result.infeasible(backend, visited, secs)
        return BandAnswer(None, res, "no cluster of these columns fits the budget", open_bound=unproven)
    # of equally fast clusters, the cheapest
    ties = [float(t) for t in levels[keys & (levels * qub >= best_x * (1 - TIE_TOL))]]
    if not finish:
        res = Result(SolverStatus.FEASIBLE, -best_x, -max(best_x, unproven), 0.0, max(visited, 1), secs, None, backend)
        return BandAnswer(None, res, "", 0, best_nodes, unproven, ties, cand)
    best_nodes = _cheapest_as_fast(tab, value, floor, best_nodes, best_x, ties, budget, cand)
    best_nodes = _reseat(tab, value, floor, best_nodes, cand)
    x_star = cluster_value(tab, value, best_nodes)
    upper = max(x_star, unproven)
    chosen = chosen_of(spec, tab, best_nodes)
    note = _note(tab, best_nodes, x_star, chosen, f"{searched} thresholds searched, {visited} knapsack nodes")
    res = Result(
        SolverStatus.OPTIMAL if upper <= x_star else SolverStatus.FEASIBLE,
        -x_star,
        -upper,
        (upper - x_star) / max(x_star, 1e-9),
        max(visited, 1),
        time.perf_counter() - t0,
        None,
        backend,
        0.0,
    )
    return BandAnswer(chosen, res, note, 0, best_nodes, unproven)


def _integer_bound(tab: ColumnTable, cols: np.ndarray, rhs0: float) -> float:
    """A bound on the capacity the columns ``cols`` buy within the budget row ``rhs0`` (the percent
    terms at their minimum), tighter than the LP's: as many nodes of the best column per dollar as
    fit, and what is left at the next best rate (Martello and Toth's U2: the first column's count
    only lowers it below that). At most the cluster cap's bound too."""
    rate = 1.0 / (tab.share[cols] * tab.w[cols])  # copies per dollar
    j = int(np.argmax(rate))
    budget = max(rhs0, 0.0)
    n1 = math.floor(budget / float(tab.w[cols[j]]) * (1 + 1e-12))
    second = float(np.partition(rate, -2)[-2]) if rate.size > 1 else 0.0
    u2 = n1 / float(tab.share[cols[j]]) + max(budget - n1 * float(tab.w[cols[j]]), 0.0) * second
    return min(u2, tab.max_cluster / float(tab.share[cols].min()))


def _floor_columns(tab: ColumnTable, cols: np.ndarray, floor: Floor, rhs0: float, beat: float) -> np.ndarray:
    """The columns of ``cols`` (in ascending floor throughput) a cluster meeting ``floor`` can use,
    as far as capacity bounds tell:
    a column c needs a capacity of at least floor / W_c, and no cluster of a set of columns has
    more than its LP bound; dropping the columns that need more leaves the set of the columns
    with W at or above the least W whose set's bound covers its need (the lowest W drop first).
    Empty when that bound is below the data's need or at most ``beat`` (no better than known)."""
    if cols.size == 0:
        return cols
    by_w = cols
    w = floor.per_copy[by_w]
    copy = np.minimum.accumulate((tab.share[by_w] * tab.w[by_w])[::-1])[::-1]
    least_k = np.minimum.accumulate(tab.share[by_w][::-1])[::-1]
    q_lp = np.minimum(max(rhs0, 0.0) / copy, tab.max_cluster / least_k)
    ok = np.flatnonzero(w * q_lp >= floor.at_least * (1 - TIE_TOL))
    if ok.size == 0:
        return cols[:0]
    first = int(ok[0])
    if q_lp[first] < Q_MIN * (1 - TIE_TOL) or q_lp[first] <= beat:
        return cols[:0]
    return by_w[first:]


@dataclass
class _Pack(Packing):
    idx: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # the items' columns


def _max_q(
    tab: ColumnTable,
    idx: np.ndarray,
    coefs_all: np.ndarray,
    rhs: np.ndarray,
    q_min: float,
    beat: float,
    items_given: bool = False,
) -> _Pack:
    """max Q over the columns ``idx`` (their staircase; ``items_given``: ``idx`` is one) within the
    rows, above ``beat`` copies."""
    items = idx if items_given else tab.items(idx)
    p = max_capacity(
        1.0 / tab.share[items],
        coefs_all[:, items],
        rhs,
        tab.max_cluster,
        tab.terms.min_nodes,
        q_min,
        floor_value=beat,
        groups=tab.group[items],
    )
    return _Pack(p.counts, p.value, p.proven, p.bound, p.nodes, items)


def _cheapest_as_fast(
    tab: ColumnTable,
    value: np.ndarray,
    floor: Floor | None,
    nodes: Nodes,
    x_star: float,
    thresholds: list[float],
    budget: float,
    cand: np.ndarray,
) -> Nodes:
    """The cheapest cluster of the columns in ``cand`` as fast as ``nodes`` (within
    :data:`TIE_TOL`), over ``thresholds`` (every one whose bound reaches it) and the answer's own."""
    bill = tab.bill_model
    best_bill = bill.bill(tab.cost[[i for i, _ in nodes]], np.array([k for _, k in nodes]))
    best = nodes
    target = x_star * (1 - TIE_TOL)
    own = min(float(value[i]) for i, _ in nodes)

    def item_sets(branch: np.ndarray, base: float) -> Iterator[tuple[np.ndarray, float]]:
        """The branch's item sets and each one's need: the branch's own without a floor; with
        one, per item set of the suffixes by floor throughput (as best_within), its least
        tau's need, each made as the last is searched (a cheaper cluster found ends them
        sooner: a later suffix's bound is no lower). Compiled (solver.knapsack_numba.floor_suffix),
        the walk yields only the sets whose lower bill is below the best bill."""
        if floor is None:
            yield tab.items(branch), base
            return
        ws = branch[np.argsort(floor.per_copy[branch], kind="stable")]
        w_of = floor.per_copy[ws]
        suffix_copy = np.ascontiguousarray(np.minimum.accumulate((tab.share[ws] * tab.w[ws])[::-1])[::-1])
        # every suffix's need is at least the floor's over its fastest column's floor throughput
        least_need = max(base, floor.at_least / float(w_of[-1]) * (1 - TIE_TOL))
        pos = 0
        compiled = numba_search()
        if compiled is not None:
            by_gk = tab.by_gk()
            while pos >= 0:
                lead, need, pos = compiled.floor_suffix(
                    ws, w_of, suffix_copy, pos, floor.per_copy, tab.share, tab.w, by_gk, tab.group, tab.cost,
                    bill.fixed, least_need, base, floor.at_least, best_bill * (1 - TIE_TOL), 1 - TIE_TOL,
                )  # fmt: skip
                if pos >= 0:
                    yield lead, need
            return
        while pos < ws.size:
            if bill.fixed + least_need * float(suffix_copy[pos]) >= best_bill * (1 - TIE_TOL):
                return  # fewer columns cost no less
            lead = tab.items(ws[pos:])
            tau = float(floor.per_copy[lead].min())
            yield lead, max(base, floor.at_least / tau * (1 - TIE_TOL))
            pos = int(np.searchsorted(w_of, tau, side="right"))

    # the thresholds whose branch may hold a cheaper cluster at the first best bill (a later, lower
    # one rules out no fewer): a branch is the candidates at or above its threshold, its least cost
    # of a copy a running minimum over the candidates by decreasing value
    ts = np.array(sorted(set(thresholds) | {own}, reverse=True))
    by_v = np.flatnonzero(cand)
    by_v = by_v[np.argsort(-value[by_v], kind="stable")]
    by_v = by_v[value[by_v] >= -math.inf]  # no nan
    in_branch = np.searchsorted(-value[by_v], -ts, side="right")
    least_copy = np.minimum.accumulate(tab.share[by_v] * tab.w[by_v]) if by_v.size else np.zeros(0)
    bases = np.maximum(Q_MIN, target / ts)
    open_ts = (in_branch > 0) & (
        bill.fixed + bases * least_copy[np.maximum(in_branch - 1, 0)] < best_bill * (1 - TIE_TOL)
        if by_v.size
        else False
    )
    if not SKIP_CLOSED_THRESHOLDS:
        open_ts[:] = True
    for t in ts[open_ts].tolist():
        branch = np.flatnonzero(cand & (value >= t))
        if branch.size == 0:
            continue
        base = max(Q_MIN, target / t)
        if bill.fixed + base * float((tab.share[branch] * tab.w[branch]).min()) >= best_bill * (1 - TIE_TOL):
            continue  # no cluster of these columns as fast is cheaper
        for items, q_need in item_sets(branch, base):
            if items.size == 0:
                continue
            lower = bill.fixed + q_need * float((tab.share[items] * tab.w[items]).min())
            if lower >= best_bill * (1 - TIE_TOL):
                continue
            p = min_bill(
                1.0 / tab.share[items],
                tab.cost[items],
                bill,
                tab.max_cluster,
                tab.terms.min_nodes,
                q_need,
                ceiling=best_bill * (1 - TIE_TOL),
                groups=tab.group[items],
            )
            if p.counts is not None and fits(p.value, budget):
                found = _nodes(items, p.counts)
                if cluster_value(tab, value, found) >= target and (
                    floor is None or cluster_value(tab, floor.per_copy, found) >= floor.at_least * (1 - TIE_TOL)
                ):
                    best, best_bill = found, p.value
    return best


def _reseat(tab: ColumnTable, value: np.ndarray, floor: Floor | None, nodes: Nodes, cand: np.ndarray) -> Nodes:
    """Of the columns a one-group answer's n nodes could equally be (as cheap, holding the data at n
    nodes, each node at least as fast on the objective's workload: the same value and bill), the
    one whose nodes are fastest on the other workload, then the one tabled nearest the keys its
    nodes hold (the largest k at most n): the band model values a node at its column's rate, so
    this is the least pessimistic of equals (a tie-break: value and bill do not change)."""
    if len(nodes) != 1:
        return nodes
    i, n = nodes[0]
    other = tab.x if value is tab.p else tab.p
    node_v, node_o = value / tab.share, other / tab.share
    ok = (
        cand
        & (tab.cost <= tab.cost[i] * (1 + TIE_TOL))
        & (tab.share <= n * (1 + 1e-9))
        & (node_v >= node_v[i] * (1 - TIE_TOL))
    )
    if floor is not None:
        ok &= floor.per_copy / tab.share * n >= floor.at_least * (1 - TIE_TOL)
    js = np.flatnonzero(ok)
    if js.size == 0:
        return nodes
    j = int(js[np.lexsort((-tab.share[js], -node_o[js]))[0]])
    return [(j, n)] if node_o[j] > node_o[i] * (1 + TIE_TOL) or tab.share[j] > tab.share[i] else nodes


def cheapest_reaching(tab: ColumnTable, mask: np.ndarray, at_least: float) -> tuple[Nodes | None, float, bool]:
    """The cheapest cluster of the columns in ``mask`` whose expected throughput (min T * Q) is at
    least ``at_least`` kops (0: the cheapest that holds the data): (nodes, bill, proven); the
    cheapest of :func:`reach_classes`' (of equal bills the first class's, the smallest)."""
    best: tuple[Nodes | None, float, bool] = (None, math.inf, True)
    proven = True
    for cap, least, m in reach_classes(tab, mask, tab.reach(tab.x)):
        nodes, bill, ok = _cheapest_in_class(within_cap(tab, cap, least), m, at_least, best[1])
        proven &= ok
        if nodes is not None and bill < best[1]:
            best = (nodes, bill, True)
    return best[0], best[1], proven


def _cheapest_in_class(
    tab: ColumnTable, mask: np.ndarray, at_least: float, ceiling: float = math.inf
) -> tuple[Nodes | None, float, bool]:
    """:func:`cheapest_reaching` of one class (every column in ``mask`` in clusters of up to
    ``tab.max_cluster`` units), only clusters cheaper than ``ceiling``."""
    bill = tab.bill_model
    idx = np.flatnonzero(mask & (tab.x > 0))
    if idx.size == 0:
        return None, math.inf, True
    best_nodes: Nodes | None = None
    best_bill, proven = ceiling, True
    levels = np.unique(tab.x[idx])
    if at_least <= 0:
        levels = levels[:1]  # every column: the largest branch
    # a branch's LP bound: its q need times its cheapest copy (the columns at least as fast as its
    # level: the least copy of the fastest ones, a running minimum down the columns by speed)
    xs = tab.x[idx]
    by_speed = np.sort(xs)
    copy = (tab.share[idx] * tab.w[idx])[np.argsort(-xs, kind="stable")]
    least = np.minimum.accumulate(copy)[idx.size - 1 - np.searchsorted(by_speed, levels, side="left")]
    bounds = bill.fixed + np.maximum(Q_MIN, at_least / levels) * least
    for li in np.argsort(bounds, kind="stable"):
        if bounds[li] >= best_bill * (1 - TIE_TOL):
            break
        t = float(levels[li])
        branch = idx[tab.x[idx] >= t]
        items = tab.items(branch)
        q_need = max(Q_MIN, at_least / t)
        p = min_bill(
            1.0 / tab.share[items],
            tab.cost[items],
            bill,
            tab.max_cluster,
            tab.terms.min_nodes,
            q_need,
            best_bill,
            groups=tab.group[items],
        )
        proven &= p.proven
        if p.counts is not None and p.value < best_bill:
            best_nodes, best_bill = _nodes(items, p.counts), p.value
    return best_nodes, best_bill, proven
