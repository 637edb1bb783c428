"""The oracle: enumerate every cluster over the same contexts, no MIP.

Clusters are multisets of contexts of one provider with at most ``max_cluster``
nodes that hold the data (sum of entries >= N). The cluster's throughput is
min over its contexts of N x_c / s_c (the same epigraph the MIP uses), on the
expected and on the perturbed workload, and its bill is computed with the same
SLA price model. Any of the MIP's objectives (specs.vocab.Objective) can be
asked for, the robust one with its floor on the perturbed throughput. Every
count up to the cap is tried (the MIP's per-column bound is not assumed), so
the oracle also checks that bound. Feasible only for small instances; it is
what the tests compare the MIP against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cost_models.bill import bill_terms
from cost_models.cloud import sla_cost
from cost_models.pricing.catalog import Catalog
from solver.model import X_SCALE
from solver.tables.context import Context
from specs.schema import Spec
from specs.vocab import Objective

#: Refuse instances whose cluster count is estimated above this.
MAX_ENUMERATION = 5_000_000


@dataclass
class Best:
    throughput_kops: float = -1.0
    cost: float = math.inf
    nodes: tuple[tuple[int, int], ...] = ()  # (context index, count)
    provider: str = ""
    visited: int = 0
    perturbed_kops: float = -1.0


def estimate(n_contexts: int, max_cluster: int) -> float:
    """Multisets of size <= m from n kinds: C(n + m, m)."""
    return math.comb(n_contexts + max_cluster, max_cluster)


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
) -> Best:
    """Best cluster within ``budget`` for ``objective`` (then the cheapest):
    ``throughput_kops`` is the expected throughput X, ``perturbed_kops`` P; the
    robust objective maximizes X among clusters with P >= ``floor_kops``."""
    from specs.errors import InputError

    N = spec.workload.entries
    best = Best()
    # (a latency bound is a per-node constraint of the tables, not a throughput floor: issue 48)
    target = (0.0 if min_throughput is None else min_throughput) * X_SCALE
    for provider in sorted({c.provider for c in contexts}):
        terms = bill_terms(spec, catalog, provider)
        if terms.unavailable:
            continue
        ctx = [(i, c) for i, c in enumerate(contexts) if c.provider == provider]
        if estimate(len(ctx), max_cluster) > limit:
            raise InputError(
                f"exhaustive search over {len(ctx)} contexts x {max_cluster} nodes is too large "
                f"(> {limit:,} clusters); use --method threshold or mip, or a smaller instance"
            )
        x_hat = [N * c.throughput / c.entries * X_SCALE for _, c in ctx]
        p_hat = [N * c.perturbed / c.entries * X_SCALE for _, c in ctx]

        def rec(
            k: int,
            nodes: int,
            entries: float,
            cost: float,
            xmin: float,
            pmin: float,
            chosen: list[tuple[int, int]],
            provider: str = provider,
            ctx: list = ctx,
            x_hat: list = x_hat,
            p_hat: list = p_hat,
            terms=terms,
        ) -> None:
            if k == len(ctx):
                if nodes == 0 or entries < N * (1 - 1e-9) or nodes < terms.min_nodes:
                    return
                total = cost + sla_cost(terms, nodes, cost)
                best.visited += 1
                if total > budget * (1 + 1e-12) or xmin < target * (1 - 1e-12):
                    return
                if objective == Objective.ROBUST and pmin < floor_kops * (1 - 1e-12):
                    return
                value = pmin if objective == Objective.PERTURBED else xmin
                incumbent = best.perturbed_kops if objective == Objective.PERTURBED else best.throughput_kops
                better = value > incumbent * (1 + 1e-12) or (value >= incumbent * (1 - 1e-12) and total < best.cost)
                if better:
                    best.throughput_kops, best.perturbed_kops, best.cost = xmin, pmin, total
                    best.nodes, best.provider = tuple(chosen), provider
                return
            i, c = ctx[k]
            rec(k + 1, nodes, entries, cost, xmin, pmin, chosen)
            for cnt in range(1, max_cluster - nodes + 1):
                add = cnt * c.cost_month
                if cost + add > budget * (1 + 1e-12):
                    break
                chosen.append((i, cnt))
                rec(
                    k + 1,
                    nodes + cnt,
                    entries + cnt * c.entries,
                    cost + add,
                    min(xmin, x_hat[k]),
                    min(pmin, p_hat[k]),
                    chosen,
                )
                chosen.pop()

        rec(0, 0, 0.0, 0.0, math.inf, math.inf, [])
    return best
