"""The search as a mixed-integer program, declared once, solver-agnostically.

A :class:`LinearModel` is named variable blocks and named constraint blocks
over numpy arrays (row-wise sparse), in the spirit of linopy; the back ends in
``solver.backends`` only translate it. :func:`build_mip` declares Cosine's
problem over the precomputed contexts (``solver.tables``):

* ``n[c]`` integer: nodes of context c (VM type x entries per node x volume);
  ``y[c]`` binary: context c is used; ``z[p]`` binary: provider p is chosen.
* ``X`` continuous: the cluster's throughput (kops/s). Operations are routed
  to nodes in proportion to the keys they hold, so a node of context c with s_c
  of the N keys limits X to N x_c / s_c (x_c: its best design's throughput);
  ``X <= N x_c / s_c + M (1 - y_c)`` is the epigraph of that minimum.
* data: ``sum_c s_c n_c >= N``; size: ``sum_c n_c <= max cluster`` and
  ``>= min nodes`` of the required SLAs (availability wants two VMs).
* bill: ``sum_c cost_c n_c + SLA(n, z) <= budget`` where the SLA bundle is
  linear (per node, per GB, flat) plus, for percent-of-spend support plans, a
  variable ``sup >= max(minimum z_p, percent * spend_p)`` (epigraph).
* ``X >= min_throughput`` (and ``1/max_latency``) when the spec sets targets.

Objective: maximize X; a tie-break of at most 1e-6 of the objective's scale
prefers the cheaper of two equally fast configurations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cost_models.cloud import GIB, sla_terms
from cost_models.pricing import Catalog
from solver.tables import Context
from specs.schema import Spec

#: Throughput is modelled in thousands of operations per second.
X_SCALE = 1e-3
#: Relative weight of the cheaper-is-better tie-break in the objective.
TIE_BREAK = 1e-6


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
    x_hat: np.ndarray  # per context: N x_c / s_c in kops
    fixed_cost: np.ndarray  # per provider: flat + per-GB SLA terms
    per_node_sla: np.ndarray  # per context
    big_m: float
    budget_row: int
    tie: float


def build_mip(
    spec: Spec,
    catalog: Catalog,
    contexts: list[Context],
    budget: float,
    max_cluster: int | None = None,
    min_throughput: float | None = None,
    providers: list[str] | None = None,
) -> tuple[LinearModel, MipMeta]:
    """Declare the MIP for one budget over the given contexts."""
    provs = providers or sorted({c.provider for c in contexts})
    N = spec.workload.entries
    mc = spec.design.max_cluster_size if max_cluster is None else max_cluster
    data_gib = spec.workload.data_bytes / GIB
    terms = {p: sla_terms(catalog, p, spec.slas) for p in provs}
    ctx = [c for c in contexts if c.provider in provs and not terms[c.provider].unavailable]
    C = len(ctx)
    pidx = np.array([provs.index(c.provider) for c in ctx], dtype=np.int64)
    s = np.array([c.entries for c in ctx])
    x_hat = np.array([N * c.throughput / c.entries * X_SCALE for c in ctx])
    cost = np.array([c.cost_month for c in ctx])
    per_node = np.array([terms[c.provider].per_node for c in ctx])
    fixed = np.array([terms[p].flat + terms[p].per_gb * data_gib for p in provs])
    big_m = float(x_hat.max()) if C else 1.0

    m = LinearModel()
    n = m.add_vars("n", C, 0, mc, integer=True)
    y = m.add_vars("y", C, 0, 1, integer=True)
    z = m.add_vars("z", len(provs), 0, 1, integer=True)
    X = m.add_vars("X", 1, 0, big_m)
    pct = [(i, pc, mn) for i, p in enumerate(provs) for pc, mn in terms[p].percent_terms]
    sup = m.add_vars("sup", len(pct), 0, np.inf)
    for i, p in enumerate(provs):
        if terms[p].unavailable:
            z.ub[i] = 0.0

    one = np.ones(1)
    # shard sizes are N/k: allow 1e-9 relative slack so k shards of N/k cover N after rounding
    m.add_cons("data", [(n.idx(), s / N)], 1.0 - 1e-9, np.inf)
    m.add_cons("cluster_size", [(n.idx(), np.ones(C))], -np.inf, mc)
    m.add_cons("one_provider", [(z.idx(), np.ones(len(provs)))], 1.0, 1.0)
    m.add_cons("use", [(np.array([n.start + c, y.start + c]), np.array([1.0, -mc])) for c in range(C)], -np.inf, 0.0)
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
        [(np.array([X.start, y.start + c]), np.array([1.0, big_m - x_hat[c]])) for c in range(C)],
        -np.inf,
        big_m,
    )
    for k, (i, pc, mn) in enumerate(pct):
        sel = pidx == i
        m.add_cons(f"support_min_{k}", [(np.array([sup.start + k, z.start + i]), np.array([1.0, -mn]))], 0.0, np.inf)
        m.add_cons(
            f"support_pct_{k}",
            [(np.concatenate([[sup.start + k], n.idx()[sel]]), np.concatenate([one, -pc * cost[sel]]))],
            0.0,
            np.inf,
        )
    bud = m.add_cons(
        "budget",
        [(np.concatenate([n.idx(), z.idx(), sup.idx()]), np.concatenate([cost + per_node, fixed, np.ones(len(pct))]))],
        -np.inf,
        budget,
    )
    target = 0.0
    if min_throughput:
        target = max(target, min_throughput)
    if spec.max_latency_s:
        target = max(target, 1.0 / spec.max_latency_s)
    if target > 0:
        m.add_cons("performance", [(X.idx(), one)], target * X_SCALE, np.inf)

    tie = TIE_BREAK * big_m / max(budget, 1.0)
    m.cost[X.start] = -1.0
    m.cost[n.idx()] = tie * (cost + per_node)
    m.cost[z.idx()] = tie * fixed
    m.cost[sup.idx()] = tie
    meta = MipMeta(
        contexts=ctx,
        providers=provs,
        entries=N,
        x_hat=x_hat,
        fixed_cost=fixed,
        per_node_sla=per_node,
        big_m=big_m,
        budget_row=bud.start,
        tie=tie,
    )
    return m, meta


def set_budget(m: LinearModel, meta: MipMeta, budget: float) -> None:
    """Move the budget row's bound (bands share one model)."""
    m.cons["budget"].hi[:] = budget
    tie = TIE_BREAK * meta.big_m / max(budget, 1.0)
    scale = tie / meta.tie
    X = m.vars["X"].start
    m.cost *= scale
    m.cost[X] = -1.0
    meta.tie = tie


@dataclass
class Chosen:
    """A configuration read back from a solution vector."""

    provider: str
    nodes: list[tuple[Context, int]]
    throughput_kops: float
    monthly_cost: float
    compute: float
    storage: float
    sla: float


def read_solution(m: LinearModel, meta: MipMeta, x: np.ndarray, spec: Spec, catalog: Catalog) -> Chosen:
    """Decode counts, provider and the bill (recomputed from the catalog)."""
    from cost_models.cloud import sla_cost

    n = np.rint(x[m.vars["n"].idx()]).astype(int)
    used = [(meta.contexts[c], int(n[c])) for c in np.flatnonzero(n > 0)]
    zs = x[m.vars["z"].idx()]
    provider = meta.providers[int(np.argmax(zs))] if len(meta.providers) else ""
    compute = sum(c.vm.usd_per_month * k for c, k in used)
    storage = sum(c.storage.usd_month * k for c, k in used)
    terms = sla_terms(catalog, provider, spec.slas)
    sla = sla_cost(terms, sum(k for _, k in used), spec.workload.data_bytes / GIB, compute + storage)
    return Chosen(provider, used, float(x[m.vars["X"].start]), compute + storage + sla, compute, storage, sla)
