"""The search as a mixed-integer program, declared once, solver-agnostically.

A :class:`LinearModel` is named variable blocks and named constraint blocks
over numpy arrays (row-wise sparse), in the spirit of linopy; the back ends in
``solver.backends`` only translate it. :func:`build_mip` declares Cosine's
problem over the precomputed contexts (``solver.tables``):

* ``n[c]`` integer: nodes of column c (VM type x entries per node x volume x
  design); ``y[c]`` binary: column c is used; ``z[p]`` binary: provider p is chosen.
* ``Q`` continuous: the cluster's capacity, ``sum_c n_c / k_c`` copies of the data (in
  units of 1/:data:`Q_UNITS` copy)
  (a node of column c is tabled holding s_c = N / k_c entries). Keys are spread in
  proportion to capacity (solver.exact), so a node of column c holds s_c / Q <= s_c
  entries and serves a share s_c / (N Q) of the operations.
* ``X`` continuous: the cluster's throughput (kops) on the expected workload. A node of
  column c serves at least its tabled rate x_c (it holds no more than s_c entries), so it
  limits X to x_c N Q / s_c = T_c Q (T_c = N x_c / s_c); ``X <= T_c Q + M (1 - y_c)`` is
  the epigraph of the minimum over the used columns. A homogeneous cluster of n nodes
  is worth n x_c: every node count from k_c up is a cluster, more nodes more throughput.
* data: ``Q >= 1``; size: ``sum_c n_c <= max cluster`` and ``>= min nodes`` of the
  required SLAs (availability wants two VMs), and ``<= r_c`` where column c is used when its
  scans' fan-out was tabled at r_c nodes (solver.space.reach); at most one column of each VM type
  (``sum_{c of type v} y_c <= 1``: a configuration runs one design per VM type).
* bill: ``sum_c cost_c n_c + SLA(n, z) <= budget`` where the SLA bundle is
  linear (per node, per GB, flat) plus, for percent-of-spend support plans, a
  variable ``sup >= max(minimum z_p, percent * spend_p)`` (epigraph).

Objectives (:class:`Objective`): maximize X (expected), maximize P (perturbed: the
bottleneck rows then hold T^p_c), or maximize X subject to ``P >= floor`` (the robust
rule). A floor on the other throughput is ``T'_c Q >= floor y_c`` for every column (linear:
it binds only the used ones). A tie-break of at most 1e-6 of the objective's scale
prefers the cheaper of two equally fast configurations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cost_models.bill import bill_terms
from cost_models.pricing.catalog import Catalog
from cost_models.replication import replica_nodes
from solver.space import cluster_cap, reaches
from solver.tables.context import Context
from specs.schema import Spec
from specs.vocab import Objective, WorkloadKind

#: Throughput is modelled in thousands of operations per second.
X_SCALE = 1e-3
#: Relative weight of the cheaper-is-better tie-break in the objective.
TIE_BREAK = 1e-6
#: Relative slack of the data row: shard sizes are N/k, so k shards of N/k must cover N
#: after rounding.
DATA_SLACK = 1e-9
#: The capacity variable counts 1/Q_UNITS copies of the data: the CP-SAT back end resolves a
#: continuous variable to 10^-3 of its unit (solver.backends.ortools), so Q is resolved to 10^-7
#: copies and X to 10^-7 of a column's worth.
Q_UNITS = 1e4


@dataclass
class VarBlock:
    name: str
    start: int
    size: int
    lb: np.ndarray
    ub: np.ndarray
    integer: bool

    def idx(self, i: int | np.ndarray = slice(None)) -> np.ndarray:  # type: ignore[assignment]
        return np.arange(self.start, self.start + self.size)[i]


@dataclass
class ConBlock:
    name: str
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    start: int = 0

    @property
    def size(self) -> int:
        return int(self.lo.size)


@dataclass
class LinearModel:
    """min c^T x  s.t.  lo <= A x <= hi,  lb <= x <= ub,  some x integer."""

    vars: dict[str, VarBlock] = field(default_factory=dict)
    cons: dict[str, ConBlock] = field(default_factory=dict)
    n_vars: int = 0
    n_cons: int = 0
    cost: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def add_vars(
        self, name: str, size: int, lb: float | np.ndarray = 0.0, ub: float | np.ndarray = np.inf, integer: bool = False
    ) -> VarBlock:
        b = VarBlock(
            name,
            self.n_vars,
            size,
            np.broadcast_to(np.asarray(lb, float), (size,)).copy(),
            np.broadcast_to(np.asarray(ub, float), (size,)).copy(),
            integer,
        )
        self.vars[name] = b
        self.n_vars += size
        self.cost = np.concatenate([self.cost, np.zeros(size)])
        return b

    def add_cons(
        self, name: str, rows: list[tuple[np.ndarray, np.ndarray]], lo: float | np.ndarray, hi: float | np.ndarray
    ) -> ConBlock:
        """Add len(rows) constraints; each row is (variable indices, coefficients)."""
        m = len(rows)
        lens = np.array([len(r[0]) for r in rows], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        indices = np.concatenate([np.asarray(r[0], np.int64) for r in rows]) if m else np.zeros(0, np.int64)
        data = np.concatenate([np.asarray(r[1], float) for r in rows]) if m else np.zeros(0)
        b = ConBlock(
            name,
            indptr,
            indices,
            data,
            np.broadcast_to(np.asarray(lo, float), (m,)).copy(),
            np.broadcast_to(np.asarray(hi, float), (m,)).copy(),
            self.n_cons,
        )
        self.cons[name] = b
        self.n_cons += m
        return b

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All constraints stacked: (indptr, indices, data, lo, hi)."""
        blocks = list(self.cons.values())
        indptr = [np.zeros(1, np.int64)]
        off = 0
        for b in blocks:
            indptr.append(b.indptr[1:] + off)
            off += int(b.indptr[-1])
        return (
            np.concatenate(indptr),
            np.concatenate([b.indices for b in blocks]),
            np.concatenate([b.data for b in blocks]),
            np.concatenate([b.lo for b in blocks]),
            np.concatenate([b.hi for b in blocks]),
        )

    def bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lb, ub, is_integer) over all variables."""
        blocks = sorted(self.vars.values(), key=lambda b: b.start)
        return (
            np.concatenate([b.lb for b in blocks]),
            np.concatenate([b.ub for b in blocks]),
            np.concatenate([np.full(b.size, b.integer) for b in blocks]),
        )

    def objective_value(self, x: np.ndarray) -> float:
        return float(self.cost @ x)

    def violation(self, x: np.ndarray) -> float:
        """Largest bound or constraint violation of a point (for checks)."""
        indptr, indices, data, lo, hi = self.csr()
        ax = np.add.reduceat(data * x[indices], indptr[:-1]) if data.size else np.zeros(0)
        ax = np.where(np.diff(indptr) > 0, ax, 0.0)
        lb, ub, _ = self.bounds()
        return float(
            max(
                0.0,
                np.max(lo - ax, initial=0.0),
                np.max(ax - hi, initial=0.0),
                np.max(lb - x, initial=0.0),
                np.max(x - ub, initial=0.0),
            )
        )


@dataclass
class MipMeta:
    """What the variables mean, to read a solution back."""

    contexts: list[Context]
    providers: list[str]
    entries: int
    x_hat: np.ndarray  # per column: T_c = N x_c / s_c in kops (expected workload), a copy's worth
    p_hat: np.ndarray  # per column: the same on the perturbed workload
    fixed_cost: np.ndarray  # per provider: flat + per-GB SLA terms
    per_node_sla: np.ndarray  # per column
    big_m: float
    budget_row: int
    tie: float
    objective: Objective = Objective.EXPECTED
    max_cluster: int = 1
    share: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per column: k_c / unit = N / (s_c unit)
    unit: int = 1  # nodes a count of ``n`` counts (a replica group's RF, else 1)


def latency_target_kops(spec: Spec) -> float:
    """The throughput (kops/s) every band must reach because of a latency bound: none. Until issue 48
    ``max_latency_s`` became 1 / max_latency_s of throughput (Eq. 3); it now bounds every node's
    predicted request latency, which the design tables apply per column (solver.tables.scoring.vm_caps,
    cost_models.latency), holding a node's utilization below 1 where the bound needs it."""
    del spec
    return 0.0


def columns_for(contexts: list[Context], objective: Objective, max_node_cost: float = math.inf) -> list[Context]:
    """The columns one solve can need, of the tables': per provider and shard size only the
    columns no cheaper one beats in the throughputs the objective sees (the expected one for
    EXPECTED, the perturbed one for PERTURBED, both for ROBUST): swapping a column for one of the
    same shard that is as cheap and as fast there keeps every constraint and the objective, so
    the restriction is exact. ``max_node_cost``: columns of which one node costs more can never
    be bought. (Lower bounds on a cluster's throughput are no longer column filters: a column
    slower than a bound reaches it with more nodes.)"""

    def seen(c: Context) -> tuple[float, ...]:
        if objective == Objective.PERTURBED:
            return (c.perturbed,)
        return (c.throughput, c.perturbed) if objective == Objective.ROBUST else (c.throughput,)

    groups: dict[tuple[str, float], list[Context]] = {}
    for c in contexts:
        if c.cost_month <= max_node_cost:
            groups.setdefault((c.provider, c.entries), []).append(c)
    out: list[Context] = []
    for _, cs in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        kept: list[Context] = []
        for c in sorted(cs, key=lambda c: (c.cost_month, tuple(-v for v in seen(c)))):
            if not any(all(a >= b for a, b in zip(seen(d), seen(c), strict=True)) for d in kept):
                kept.append(c)
        out += kept
    return out


def build_mip(
    spec: Spec,
    catalog: Catalog,
    contexts: list[Context],
    budget: float,
    max_cluster: int | None = None,
    providers: list[str] | None = None,
    objective: Objective = Objective.EXPECTED,
    floor_kops: float = 0.0,
    target_kops: float = 0.0,
) -> tuple[LinearModel, MipMeta]:
    """Declare the MIP for one budget over the given columns; ``X`` is the expected throughput,
    or the perturbed one for ``Objective.PERTURBED``. ``floor_kops``: with ``Objective.ROBUST``,
    the floor on the perturbed throughput; ``target_kops``: a floor on the expected throughput
    (a latency target; with the expected objectives the bound of X itself)."""
    provs = providers or sorted({c.provider for c in contexts})
    N = spec.workload.entries
    # n counts units: a replicated spec's replica groups of RF nodes of one column (RF copies of
    # a shard, one Raft group), else nodes; a unit costs its nodes and holds their keys
    unit = replica_nodes(spec)
    mc = min(cluster_cap(spec, catalog, provs) if max_cluster is None else max_cluster, N) // unit
    terms = {p: bill_terms(spec, catalog, p) for p in provs}
    ctx = [c for c in contexts if c.provider in provs and not terms[c.provider].unavailable]
    C = len(ctx)
    pidx = np.array([provs.index(c.provider) for c in ctx], dtype=np.int64)
    share = np.array([N / (c.entries * unit) for c in ctx])
    x_hat = np.array([N * c.throughput / c.entries * X_SCALE for c in ctx])
    p_hat = np.array([N * c.perturbed / c.entries * X_SCALE for c in ctx])
    v_hat = p_hat if objective == Objective.PERTURBED else x_hat
    cost = np.array([c.cost_month * unit for c in ctx])
    per_node = np.array([terms[c.provider].per_node * unit for c in ctx])
    fixed = np.array([terms[p].fixed for p in provs])
    # X is at most the sum of its nodes' rates (each operation is served by one node)
    big_m = float(mc * (v_hat / share).max()) if C else 1.0
    q_max = float(mc / share.min()) * Q_UNITS if C else 1.0

    m = LinearModel()
    n = m.add_vars("n", C, 0, float(mc), integer=True)
    y = m.add_vars("y", C, 0, 1, integer=True)
    z = m.add_vars("z", len(provs), 0, 1, integer=True)
    X = m.add_vars("X", 1, 0, big_m)
    Q = m.add_vars("Q", 1, 0, q_max)
    pct = [(i, pc, mn) for i, p in enumerate(provs) for pc, mn in terms[p].percent_terms]
    sup = m.add_vars("sup", len(pct), 0, np.inf)
    for i, p in enumerate(provs):
        if terms[p].unavailable:
            z.ub[i] = 0.0

    one = np.ones(1)
    # Q <= the capacity (it is worth the most at equality; an inequality, so that a back end that
    # rounds coefficients keeps every cluster feasible)
    m.add_cons(
        "capacity", [(np.concatenate([Q.idx(), n.idx()]), np.concatenate([one, -Q_UNITS / share]))], -np.inf, 0.0
    )
    m.add_cons("data", [(Q.idx(), one)], Q_UNITS * (1.0 - DATA_SLACK), np.inf)
    m.add_cons("cluster_size", [(n.idx(), np.ones(C))], -np.inf, mc)
    # a column whose scans were tabled at a fan-out of r_c units is credited in clusters of at
    # most r_c units (solver.space.reach): size + (mc - r_c) y_c <= mc, with size = sum_c n_c
    valued = WorkloadKind.of(objective, objective == Objective.ROBUST and floor_kops > 0, target_kops > 0)
    r_units = np.array(reaches(spec, (c.entries for c in ctx), valued, unit), dtype=float)
    short = np.flatnonzero(r_units < mc)
    if short.size:
        size = m.add_vars("size", 1, 0, float(mc), integer=True)
        m.add_cons("size", [(np.concatenate([size.idx(), n.idx()]), np.concatenate([one, -np.ones(C)]))], 0.0, 0.0)
        m.add_cons(
            "reach",
            [(np.array([size.start, y.start + c]), np.array([1.0, float(mc) - r_units[c]])) for c in short.tolist()],
            -np.inf,
            float(mc),
        )
    m.add_cons("one_provider", [(z.idx(), np.ones(len(provs)))], 1.0, 1.0)
    m.add_cons(
        "use", [(np.array([n.start + c, y.start + c]), np.array([1.0, -float(mc)])) for c in range(C)], -np.inf, 0.0
    )
    # one column per VM type (solution.json lists one design per VM type)
    by_vm: dict[tuple[str, str], list[int]] = {}
    for c, cx in enumerate(ctx):
        by_vm.setdefault((cx.provider, cx.vm.name), []).append(c)
    shared = [cs for cs in by_vm.values() if len(cs) > 1]
    if shared:
        m.add_cons(
            "one_column_per_vm",
            [(np.array([y.start + c for c in cs]), np.ones(len(cs))) for cs in shared],
            -np.inf,
            1.0,
        )
    if len(provs) > 1:  # with one provider z = 1 and the link is void
        m.add_cons(
            "provider_link",
            [(np.array([y.start + c, z.start + pidx[c]]), np.array([1.0, -1.0])) for c in range(C)],
            -np.inf,
            0.0,
        )
    m.add_cons(
        "min_nodes",
        [
            (
                np.concatenate([n.idx()[pidx == i], [z.start + i]]),
                np.concatenate([np.ones(int((pidx == i).sum())), [-float(-(-terms[p].min_nodes // unit))]]),
            )
            for i, p in enumerate(provs)
        ],
        0.0,
        np.inf,
    )
    # X <= T_c Q for the used columns: X - T_c Q <= u_c and u_c <= M (1 - y_c), the binary apart
    # from Q in a row of its own (a back end that scales rows to integers keeps both well resolved)
    u = m.add_vars("slack_x", C, 0, big_m)
    m.add_cons(
        "bottleneck",
        [(np.array([X.start, Q.start, u.start + c]), np.array([1.0, -v_hat[c] / Q_UNITS, -1.0])) for c in range(C)],
        -np.inf,
        0.0,
    )
    m.add_cons(
        "bottleneck_use",
        [(np.array([u.start + c, y.start + c]), np.array([1.0, big_m])) for c in range(C)],
        -np.inf,
        big_m,
    )
    floors = []
    if objective == Objective.ROBUST and floor_kops > 0:
        floors.append(("robust_floor", p_hat, floor_kops))
    if target_kops > 0:
        floors.append(("target", x_hat, target_kops))
    for name, per_copy, at_least in floors:
        # T'_c Q >= at_least for the used columns: T'_c Q + v_c >= at_least, v_c <= at_least (1 - y_c)
        v = m.add_vars(f"slack_{name}", C, 0, at_least)
        m.add_cons(
            name,
            [(np.array([Q.start, v.start + c]), np.array([per_copy[c] / Q_UNITS, 1.0])) for c in range(C)],
            at_least,
            np.inf,
        )
        m.add_cons(
            f"{name}_use",
            [(np.array([v.start + c, y.start + c]), np.array([1.0, at_least])) for c in range(C)],
            -np.inf,
            at_least,
        )
    for k, (i, pc, mn) in enumerate(pct):
        sel = pidx == i
        m.add_cons(f"support_min_{k}", [(np.array([sup.start + k, z.start + i]), np.array([1.0, -mn]))], 0.0, np.inf)
        m.add_cons(
            f"support_pct_{k}",
            # a support plan's percent is of the whole bill: the nodes' and the provider's transfer
            [
                (
                    np.concatenate([[sup.start + k, z.start + i], n.idx()[sel]]),
                    np.concatenate([one, [-pc * terms[provs[i]].transfer], -pc * cost[sel]]),
                )
            ],
            0.0,
            np.inf,
        )
    bud = m.add_cons(
        "budget",
        [(np.concatenate([n.idx(), z.idx(), sup.idx()]), np.concatenate([cost + per_node, fixed, np.ones(len(pct))]))],
        -np.inf,
        budget,
    )
    meta = MipMeta(
        contexts=ctx,
        providers=provs,
        entries=N,
        x_hat=x_hat,
        p_hat=p_hat,
        fixed_cost=fixed,
        per_node_sla=per_node,
        big_m=big_m,
        budget_row=bud.start,
        tie=0.0,
        objective=objective,
        max_cluster=mc,
        share=share,
        unit=unit,
    )
    set_budget(m, meta, budget)
    return m, meta


def set_budget(m: LinearModel, meta: MipMeta, budget: float) -> None:
    """Move the budget row's bound (bands share one model) and rescale the
    cheaper-is-better tie-break to it."""
    m.cons["budget"].hi[:] = budget
    tie = TIE_BREAK * meta.big_m / max(budget, 1.0)
    bud = m.cons["budget"]
    m.cost = np.zeros(m.n_vars)
    m.cost[bud.indices] = tie * bud.data
    m.cost[m.vars["X"].start] = -1.0
    meta.tie = tie


@dataclass
class Chosen:
    """A configuration read back from a solution vector."""

    provider: str
    nodes: list[tuple[Context, int]]
    throughput_kops: float  # the MIP's X (expected workload)
    monthly_cost: float
    compute: float
    storage: float
    sla: float
    perturbed_kops: float = 0.0  # the MIP's P (perturbed workload)

    def value(self, objective: Objective) -> float:
        """What ``objective`` maximizes: P for PERTURBED, else X."""
        return self.perturbed_kops if objective == Objective.PERTURBED else self.throughput_kops


def read_solution(m: LinearModel, meta: MipMeta, x: np.ndarray, spec: Spec, catalog: Catalog) -> Chosen:
    """Decode counts, provider and the bill (recomputed from the catalog); the throughputs are the
    model's (min over the used columns of T_c, times the capacity)."""
    from cost_models.cloud import sla_cost

    n = np.rint(x[m.vars["n"].idx()]).astype(int)
    used = [(meta.contexts[c], int(n[c]) * meta.unit) for c in np.flatnonzero(n > 0)]
    zs = x[m.vars["z"].idx()]
    provider = meta.providers[int(np.argmax(zs))] if len(meta.providers) else ""
    compute = sum(c.vm.usd_per_month * k for c, k in used)
    storage = sum(c.storage.usd_month * k for c, k in used)
    terms = bill_terms(spec, catalog, provider)
    sla = sla_cost(terms, sum(k for _, k in used), compute + storage)
    idx = np.flatnonzero(n > 0)
    q = float((n[idx] / meta.share[idx]).sum()) if used else 0.0
    return Chosen(
        provider,
        used,
        float(meta.x_hat[idx].min()) * q if used else 0.0,
        compute + storage + sla,
        compute,
        storage,
        sla,
        float(meta.p_hat[idx].min()) * q if used else 0.0,
    )
