"""The search as a mixed-integer program, declared once, solver-agnostically.

A :class:`LinearModel` is named variable blocks and named constraint blocks
over numpy arrays (row-wise sparse), in the spirit of linopy; the back ends in
``solver.backends`` only translate it. :func:`build_mip` declares Cosine's
problem over the precomputed contexts (``solver.tables``):

* ``n[c]`` integer: nodes of column c (VM type x entries per node x volume x
  design); ``y[c]`` binary: column c is used; ``z[p]`` binary: provider p is chosen.
* ``X`` continuous: the cluster's throughput (kops/s) on the expected workload.
  Operations are routed to nodes in proportion to the keys they hold, so a node
  of column c with s_c of the N keys limits X to N x_c / s_c (x_c: its
  design's throughput); ``X <= N x_c / s_c + M (1 - y_c)`` is the epigraph of
  that minimum.
* data: ``sum_c s_c n_c >= N``; size: ``sum_c n_c <= max cluster`` and
  ``>= min nodes`` of the required SLAs (availability wants two VMs). A column
  never needs more nodes than it takes to hold the data alone (k_c = N/s_c, or
  the SLA's minimum): dropping the extra ones keeps the data held, the
  throughput and lowers the bill, so ``n_c <= k_c y_c`` is exact and keeps the
  relaxation tight however large the cluster cap.
* bill: ``sum_c cost_c n_c + SLA(n, z) <= budget`` where the SLA bundle is
  linear (per node, per GB, flat) plus, for percent-of-spend support plans, a
  variable ``sup >= max(minimum z_p, percent * spend_p)`` (epigraph).

Objectives (:class:`Objective`): maximize X (expected), maximize P
(perturbed: the bottleneck rows then hold N x_p / s_c), or maximize X subject
to ``P >= floor`` (the robust rule: floor = (1 - tolerance) x the best P at that
budget). Lower bounds on a minimum over the used columns are column filters
(:func:`columns_for`), so every model has one bottleneck family. A tie-break
of at most 1e-6 of the objective's scale prefers the cheaper of two equally
fast configurations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cost_models.bill import bill_terms
from cost_models.cloud import sla_terms
from cost_models.pricing.catalog import Catalog
from solver.space import cluster_cap
from solver.tables.context import Context
from specs.schema import Spec
from specs.vocab import Objective

#: Throughput is modelled in thousands of operations per second.
X_SCALE = 1e-3
#: Relative weight of the cheaper-is-better tie-break in the objective.
TIE_BREAK = 1e-6
#: Relative slack of the data row: shard sizes are N/k, so k shards of N/k must cover N
#: after rounding.
DATA_SLACK = 1e-9


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
    x_hat: np.ndarray  # per column: N x_c / s_c in kops (expected workload)
    p_hat: np.ndarray  # per column: the same on the perturbed workload
    fixed_cost: np.ndarray  # per provider: flat + per-GB SLA terms
    per_node_sla: np.ndarray  # per column
    big_m: float
    budget_row: int
    tie: float
    objective: Objective = Objective.EXPECTED
    max_cluster: int = 1


def latency_target_kops(spec: Spec) -> float:
    """The throughput (kops/s) every band must reach because of a latency bound: none. Until issue 48
    ``max_latency_s`` became 1 / max_latency_s of throughput (Eq. 3); it now bounds every node's
    predicted request latency, which the design tables apply per column (solver.tables.scoring.vm_caps,
    cost_models.latency), holding a node's utilization below 1 where the bound needs it."""
    del spec
    return 0.0


def columns_for(
    contexts: list[Context],
    entries: int,
    objective: Objective,
    floor_kops: float = 0.0,
    target_kops: float = 0.0,
    max_node_cost: float = math.inf,
) -> list[Context]:
    """The columns one solve can need, of the tables' (Pareto in cost and both
    throughputs). Lower bounds on a cluster's throughput are column filters: X
    and P are minima over the used columns, so ``X >= target`` (a latency or
    throughput target) holds exactly when every used column has N x_c / s_c >=
    target, and the robust rule's ``P >= floor`` when every used column has
    N x_p / s_c >= floor. Then, per provider and shard size, only the columns no
    cheaper column beats in the objective's throughput (expected, or perturbed):
    swapping a column for one of the same shard that is as cheap and as fast
    keeps every constraint and the objective, so the restriction is exact.
    ``max_node_cost``: columns of which one node costs more can never be bought."""

    def hat(v: float, c: Context) -> float:
        return entries * v / c.entries * X_SCALE

    sel = [c for c in contexts if hat(c.throughput, c) >= target_kops * (1 - 1e-12) and c.cost_month <= max_node_cost]
    if objective == Objective.ROBUST:
        sel = [c for c in sel if hat(c.perturbed, c) >= floor_kops]
    key = (lambda c: c.perturbed) if objective == Objective.PERTURBED else (lambda c: c.throughput)
    groups: dict[tuple[str, float], list[Context]] = {}
    for c in sel:
        groups.setdefault((c.provider, c.entries), []).append(c)
    out: list[Context] = []
    for _, cs in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        best = -1.0
        for c in sorted(cs, key=lambda c: (c.cost_month, -key(c))):
            if key(c) > best * (1 + 1e-12):
                out.append(c)
                best = key(c)
    return out


def build_mip(
    spec: Spec,
    catalog: Catalog,
    contexts: list[Context],
    budget: float,
    max_cluster: int | None = None,
    providers: list[str] | None = None,
    objective: Objective = Objective.EXPECTED,
) -> tuple[LinearModel, MipMeta]:
    """Declare the MIP for one budget over the given columns (already filtered
    for any throughput bound by :func:`columns_for`); ``X`` is the expected
    throughput, or the perturbed one for ``Objective.PERTURBED``."""
    provs = providers or sorted({c.provider for c in contexts})
    N = spec.workload.entries
    mc = cluster_cap(spec, catalog, provs) if max_cluster is None else max_cluster
    terms = {p: bill_terms(spec, catalog, p) for p in provs}
    ctx = [c for c in contexts if c.provider in provs and not terms[c.provider].unavailable]
    C = len(ctx)
    pidx = np.array([provs.index(c.provider) for c in ctx], dtype=np.int64)
    s = np.array([c.entries for c in ctx])
    x_hat = np.array([N * c.throughput / c.entries * X_SCALE for c in ctx])
    p_hat = np.array([N * c.perturbed / c.entries * X_SCALE for c in ctx])
    v_hat = p_hat if objective == Objective.PERTURBED else x_hat
    cost = np.array([c.cost_month for c in ctx])
    per_node = np.array([terms[c.provider].per_node for c in ctx])
    fixed = np.array([terms[p].fixed for p in provs])
    big_m = float(v_hat.max()) if C else 1.0
    # nodes a column may need: enough to hold the data alone, or the SLA's minimum
    need = np.array([max(math.ceil(N / c.entries * (1 - DATA_SLACK)), terms[c.provider].min_nodes) for c in ctx])
    ub = np.minimum(need, mc).astype(float) if C else np.zeros(0)

    m = LinearModel()
    n = m.add_vars("n", C, 0, ub, integer=True)
    y = m.add_vars("y", C, 0, 1, integer=True)
    z = m.add_vars("z", len(provs), 0, 1, integer=True)
    X = m.add_vars("X", 1, 0, big_m)
    pct = [(i, pc, mn) for i, p in enumerate(provs) for pc, mn in terms[p].percent_terms]
    sup = m.add_vars("sup", len(pct), 0, np.inf)
    for i, p in enumerate(provs):
        if terms[p].unavailable:
            z.ub[i] = 0.0

    one = np.ones(1)
    m.add_cons("data", [(n.idx(), s / N)], 1.0 - DATA_SLACK, np.inf)
    m.add_cons("cluster_size", [(n.idx(), np.ones(C))], -np.inf, mc)
    m.add_cons("one_provider", [(z.idx(), np.ones(len(provs)))], 1.0, 1.0)
    m.add_cons("use", [(np.array([n.start + c, y.start + c]), np.array([1.0, -ub[c]])) for c in range(C)], -np.inf, 0.0)
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
                np.concatenate([np.ones(int((pidx == i).sum())), [-float(terms[p].min_nodes)]]),
            )
            for i, p in enumerate(provs)
        ],
        0.0,
        np.inf,
    )
    m.add_cons(
        "bottleneck",
        [(np.array([X.start, y.start + c]), np.array([1.0, big_m - v_hat[c]])) for c in range(C)],
        -np.inf,
        big_m,
    )
    for k, (i, pc, mn) in enumerate(pct):
        sel = pidx == i
        m.add_cons(f"support_min_{k}", [(np.array([sup.start + k, z.start + i]), np.array([1.0, -mn]))], 0.0, np.inf)
        # a support plan's percent is of the whole bill: the nodes' and the provider's transfer
        m.add_cons(
            f"support_pct_{k}",
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


def drop_redundant_nodes(meta: MipMeta, n: np.ndarray, spec: Spec, catalog: Catalog) -> np.ndarray:
    """Remove nodes the data does not need (a solve within its gap may keep a
    node that only adds cost): slowest columns first, while the rest still holds
    the data and the SLA's node minimum. Throughput can only rise (it is a
    minimum over the used columns) and the bill only fall."""
    n = n.copy()
    s = np.array([c.entries for c in meta.contexts])
    need = meta.entries * (1 - DATA_SLACK)
    least = max((sla_terms(catalog, p, spec.slas).min_nodes for p in meta.providers), default=1)
    for c in sorted(np.flatnonzero(n > 0), key=lambda c: meta.x_hat[c]):
        while n[c] > 0 and float(n @ s) - s[c] >= need and int(n.sum()) - 1 >= least:
            n[c] -= 1
    return n


def read_solution(m: LinearModel, meta: MipMeta, x: np.ndarray, spec: Spec, catalog: Catalog) -> Chosen:
    """Decode counts, provider and the bill (recomputed from the catalog)."""
    from cost_models.cloud import sla_cost

    n = drop_redundant_nodes(meta, np.rint(x[m.vars["n"].idx()]).astype(int), spec, catalog)
    used = [(meta.contexts[c], int(n[c])) for c in np.flatnonzero(n > 0)]
    zs = x[m.vars["z"].idx()]
    provider = meta.providers[int(np.argmax(zs))] if len(meta.providers) else ""
    compute = sum(c.vm.usd_per_month * k for c, k in used)
    storage = sum(c.storage.usd_month * k for c, k in used)
    terms = bill_terms(spec, catalog, provider)
    sla = sla_cost(terms, sum(k for _, k in used), compute + storage)
    return Chosen(
        provider,
        used,
        min(meta.x_hat[c] for c in np.flatnonzero(n > 0)) if used else 0.0,
        compute + storage + sla,
        compute,
        storage,
        sla,
        min(meta.p_hat[c] for c in np.flatnonzero(n > 0)) if used else 0.0,
    )
