"""The oracle: enumerate every cluster over the same contexts, no MIP and no threshold.

Clusters are multisets of contexts of one provider with at most ``max_cluster`` nodes that hold
the data (capacity Q = sum of count / k_c >= 1, k_c = N / s_c). A cluster is valued as solver.model
values it: its throughput is min over its contexts of T_c * Q (T_c = N x_c / s_c), on the expected
and on the perturbed workload, and its bill is computed with the same SLA price model. Any of the
MIP's objectives (specs.vocab.Objective) can be asked for, the robust one with its floor on the
perturbed throughput. Every count up to the cap is tried, except that a context whose scans were
tabled at a fan-out of r nodes is in no cluster of more (solver.space.reach), as the solvers hold.

Two exact prunings keep instances of a few hundred contexts and clusters of four nodes within
minutes (BENCHMARKS.md section 21): a context one node of which costs more than the budget is in no
cluster that fits, and a context is dropped when another of the same VM type *dominates* it: a
node of the other holds at least as much (k no larger), is at least as fast per copy on both
workloads (T and T^p no lower), may be in clusters as large (reach no lower) and costs no more.
Putting the dominating context in place of the dominated one in any cluster raises none of its
bill, the capacity, both throughputs and the node count stay or rise, no reach falls, and it still
runs one context per VM type, so every constraint still holds and the value does not fall: an
optimum (fastest, then cheapest) is among the kept contexts. (A context of another VM type could
not take its place: the cluster may already run that type.) tests/test_exhaustive.py checks the
pruned search against the unpruned one.

The clusters left are enumerated as arrays (all multisets of each size at once, by their first
context), so each is a few vector operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cost_models.bill import bill_terms
from cost_models.pareto import pareto_mask
from cost_models.pricing.catalog import Catalog
from cost_models.replication import replica_nodes
from solver.model import X_SCALE
from solver.space import reaches
from solver.tables.context import Context
from specs.errors import InputError
from specs.schema import Spec
from specs.vocab import Objective, WorkloadKind

#: Refuse instances whose cluster count (after the pruning) is estimated above this: about a
#: minute of enumeration on the shared 2-core machine (BENCHMARKS.md section 21).
MAX_ENUMERATION = 60_000_000
#: Relative tolerances of the comparisons (budget, data, floors, ties), as the solvers'.
TOL = 1e-12
#: Relative slack of the data row (solver.model.DATA_SLACK's scale).
DATA_TOL = 1e-9


@dataclass
class Best:
    throughput_kops: float = -1.0
    cost: float = math.inf
    nodes: tuple[tuple[int, int], ...] = ()  # (context index, count)
    provider: str = ""
    visited: int = 0
    perturbed_kops: float = -1.0
    kept: int = 0  # contexts left after the pruning (summed over providers)


def estimate(n_contexts: int, max_cluster: int) -> float:
    """Multisets of size <= m from n kinds: C(n + m, m)."""
    return math.comb(n_contexts + max_cluster, max_cluster)


def dominance_keep(
    share: np.ndarray,
    x: np.ndarray,
    p: np.ndarray,
    cost: np.ndarray,
    group: np.ndarray | None = None,
    reach: np.ndarray | None = None,
) -> np.ndarray:
    """Which contexts no other one of the same ``group`` (VM type; None: all one group) dominates
    (k no larger, T and T^p no lower, cost no higher, ``reach`` no lower (None: every one any
    count); of identical ones the first stays)."""
    keep = np.zeros(share.size, dtype=bool)
    labels = np.zeros(share.size, dtype=np.int64) if group is None else group
    # the Pareto front minimizes every column: a finite stand-in for an infinite reach
    r = np.zeros(share.size) if reach is None else -np.minimum(reach, np.finfo(float).max)
    for label in np.unique(labels):
        mine = np.flatnonzero(labels == label)
        keep[mine] = pareto_mask(np.stack([share[mine], -x[mine], -p[mine], cost[mine], r[mine]], axis=1))
    return keep


def _multisets(n: int, size: int) -> np.ndarray:
    """Every non-decreasing index tuple of length ``size`` over range(n), lexicographic (rows)."""
    rows = np.arange(n, dtype=np.int32)[:, None]
    for _ in range(size - 1):
        last = rows[:, -1]
        reps = n - last
        base = np.repeat(rows, reps, axis=0)
        starts = np.repeat(last, reps)
        offs = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
        rows = np.concatenate([base, (starts + offs).astype(np.int32)[:, None]], axis=1)
    return rows


#: Clusters evaluated at once (rows of the enumeration's arrays).
CHUNK = 1_000_000


def _chunks(n: int, size: int):  # type: ignore[no-untyped-def]
    """Every multiset of ``size`` of range(n) as index rows, a chunk of at most about :data:`CHUNK`
    at a time: by first index, each followed by the multisets of ``size - 1`` not below it."""
    if size == 1:
        yield np.arange(n, dtype=np.int32)[:, None]
        return
    tails = _multisets(n, size - 1)
    first = tails[:, 0]
    starts = np.searchsorted(first, np.arange(n), side="left")
    batch: list[np.ndarray] = []
    rows = 0
    for i in range(n):
        t = tails[starts[i] :]
        batch.append(np.concatenate([np.full((t.shape[0], 1), i, dtype=np.int32), t], axis=1))
        rows += t.shape[0]
        if rows >= CHUNK:
            yield np.concatenate(batch)
            batch, rows = [], 0
    if batch:
        yield np.concatenate(batch)


def _one_per_vm(rows: np.ndarray, vm: np.ndarray) -> np.ndarray:
    """Per multiset (sorted index rows), whether its distinct contexts are of distinct VM types."""
    ok = np.ones(rows.shape[0], dtype=bool)
    for a in range(rows.shape[1]):
        for b in range(a + 1, rows.shape[1]):
            ok &= (rows[:, a] == rows[:, b]) | (vm[rows[:, a]] != vm[rows[:, b]])
    return ok


def exhaustive(
    spec: Spec,
    catalog: Catalog,
    contexts: list[Context],
    budget: float,
    max_cluster: int,
    min_throughput: float | None = None,
    limit: int = MAX_ENUMERATION,
    objective: Objective = Objective.EXPECTED,
    floor_kops: float = 0.0,
    prune: bool = True,
) -> Best:
    """Best cluster within ``budget`` for ``objective`` (then the cheapest): ``throughput_kops`` is
    the expected throughput X, ``perturbed_kops`` P; the robust objective maximizes X among
    clusters with P >= ``floor_kops``. ``prune``: drop dominated and unaffordable contexts first
    (exact; False only to check that)."""
    N = spec.workload.entries
    # a replicated spec's nodes come in replica groups of ``unit`` nodes of one context (RF copies
    # of a shard): the enumeration counts groups, a group costs ``unit`` nodes
    unit = replica_nodes(spec)
    max_cluster = min(max_cluster, N)  # a node holds one key at least
    best = Best()
    target = (0.0 if min_throughput is None else min_throughput) * X_SCALE
    # (a latency bound is a per-node constraint of the tables, not a throughput floor: issue 48)
    for provider in sorted({c.provider for c in contexts}):
        terms = bill_terms(spec, catalog, provider)
        if terms.unavailable:
            continue
        ctx = [(i, c) for i, c in enumerate(contexts) if c.provider == provider]
        share = np.array([N / (c.entries * unit) for _, c in ctx], dtype=float)
        x = np.array([N * c.throughput / c.entries * X_SCALE for _, c in ctx], dtype=float)
        p = np.array([N * c.perturbed / c.entries * X_SCALE for _, c in ctx], dtype=float)
        cost = np.array([c.cost_month * unit for _, c in ctx], dtype=float)
        names = sorted({c.vm.name for _, c in ctx})
        vm = np.array([names.index(c.vm.name) for _, c in ctx], dtype=np.int64)
        valued = WorkloadKind.of(objective, objective == Objective.ROBUST and floor_kops > 0, target > 0)
        units = np.array(reaches(spec, (c.entries for _, c in ctx), valued, unit), dtype=float)
        keep = np.ones(len(ctx), dtype=bool)
        if prune and keep.size:
            keep = dominance_keep(share, x, p, cost, vm, units) & (cost + terms.per_node * unit <= budget * (1 + TOL))
        kept = np.flatnonzero(keep)
        best.kept += int(kept.size)
        if kept.size == 0:
            continue
        if estimate(kept.size, max_cluster // unit) > limit:
            raise InputError(
                f"exhaustive search over {kept.size} contexts x {max_cluster} nodes is too large "
                f"(> {limit:,} clusters); use --method threshold or mip, or a smaller instance"
            )
        ks, xs, ps, cs, vs, rs = 1.0 / share[kept], x[kept], p[kept], cost[kept], vm[kept], units[kept]
        for size in range(max(-(-terms.min_nodes // unit), 1), max_cluster // unit + 1):
            for r in _chunks(kept.size, size):
                q = ks[r].sum(axis=1)
                spend = cs[r].sum(axis=1)
                bill = terms.fixed + spend + terms.per_node * size * unit + terms.support(spend)
                xv = xs[r].min(axis=1) * q
                pv = ps[r].min(axis=1) * q
                best.visited += int(r.shape[0])
                ok = (q >= 1.0 - DATA_TOL) & (bill <= budget * (1 + TOL)) & (xv >= target * (1 - TOL))
                ok &= _one_per_vm(r, vs) & (rs[r].min(axis=1) >= size)
                if objective == Objective.ROBUST:
                    ok &= pv >= floor_kops * (1 - TOL)
                if not ok.any():
                    continue
                value = np.where(ok, pv if objective == Objective.PERTURBED else xv, -np.inf)
                top = float(value.max())
                incumbent = best.perturbed_kops if objective == Objective.PERTURBED else best.throughput_kops
                if top < incumbent * (1 - TOL):
                    continue
                near = np.flatnonzero(value >= top * (1 - TOL))
                j = int(near[np.argmin(bill[near])])
                if top > incumbent * (1 + TOL) or bill[j] < best.cost:
                    counts: dict[int, int] = {}
                    for col in r[j]:
                        gi = ctx[int(kept[col])][0]
                        counts[gi] = counts.get(gi, 0) + unit
                    best.throughput_kops, best.perturbed_kops, best.cost = float(xv[j]), float(pv[j]), float(bill[j])
                    best.nodes, best.provider = tuple(sorted(counts.items())), provider
    return best
