"""The oracle's exact pruning (solver.exhaustive: dominated and unaffordable contexts dropped)
loses nothing: the pruned enumeration equals the unpruned one, cluster value and bill, on
random instances of every objective; and the array enumeration of multisets is the definition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from solver.exhaustive import _chunks, dominance_keep, estimate, exhaustive
from specs.vocab import Objective
from tests.test_differential import random_spec, small
from tests.test_solver import make_spec, small_catalog, tables_for


@pytest.mark.parametrize("n, size", [(1, 1), (3, 2), (5, 3), (7, 4), (12, 3)])
def test_multisets_are_every_combination_with_replacement(n, size):
    got = np.concatenate(list(_chunks(n, size)))
    want = np.array(list(itertools.combinations_with_replacement(range(n), size)))
    assert got.shape == want.shape and (got == want).all()


def test_dominance_keep_is_the_definition():
    """A context is dropped exactly when another has k no larger, both throughputs no lower and a
    cost no higher (of identical ones the first stays)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        share, x, p, cost = (rng.integers(1, 4, size=n).astype(float) for _ in range(4))
        keep = dominance_keep(share, x, p, cost)
        for i in range(n):
            dominated = any(
                j != i
                and share[j] <= share[i]
                and x[j] >= x[i]
                and p[j] >= p[i]
                and cost[j] <= cost[i]
                and ((share[j], x[j], p[j], cost[j]) != (share[i], x[i], p[i], cost[i]) or j < i)
                for j in range(n)
            )
            assert keep[i] == (not dominated)


#: Largest instance (clusters) compared with its unpruned enumeration.
UNPRUNED_LIMIT = 300_000


@pytest.mark.parametrize("seed", range(4700, 4716))
def test_pruned_enumeration_equals_the_unpruned_one(seed):
    """Random specs (tests/test_differential.py's), every provider and objective, three budgets."""
    _, spec = random_spec(seed)
    cat = small(spec.pricing)
    tables = tables_for(spec, cat)
    robust = spec.noise > 0 or spec.kl_radius is not None
    for provider, ctx in tables.contexts.items():
        if estimate(len(ctx), tables.max_cluster) > UNPRUNED_LIMIT:
            continue  # the unpruned enumeration would take minutes
        for budget in (spec.budget_usd / 3, spec.budget_usd, spec.budget_usd * 3):
            objectives = [Objective.EXPECTED, Objective.PERTURBED, Objective.ROBUST] if robust else [Objective.EXPECTED]
            for objective in objectives:
                floor = 0.0
                if objective == Objective.ROBUST:
                    best_p = exhaustive(spec, cat, ctx, budget, tables.max_cluster, objective=Objective.PERTURBED)
                    floor = 0.9 * max(best_p.perturbed_kops, 0.0)
                kw = {"objective": objective, "floor_kops": floor}
                pruned = exhaustive(spec, cat, ctx, budget, tables.max_cluster, **kw)
                full = exhaustive(spec, cat, ctx, budget, tables.max_cluster, prune=False, **kw)
                where = (seed, provider, budget, objective)
                assert bool(pruned.nodes) == bool(full.nodes), where
                if full.nodes:
                    assert pruned.throughput_kops == pytest.approx(full.throughput_kops, rel=1e-12), where
                    assert pruned.perturbed_kops == pytest.approx(full.perturbed_kops, rel=1e-12) or (
                        objective == Objective.EXPECTED
                    ), where
                    assert pruned.cost == pytest.approx(full.cost, rel=1e-12), where
                assert pruned.visited <= full.visited


def test_the_pruning_keeps_fewer_contexts_on_realistic_storage():
    """Not a vacuous pruning: on realistic volumes and a small budget some contexts go (the
    dominance alone drops 74 of 180 on bench/oracle_speed.py's instance: BENCHMARKS.md section 21)."""
    cat = small_catalog("ondemand", per_provider=3)
    spec = make_spec(20_000_000, (0.5, 0.0, 0.0, 0.0, 0.5, 0.0), "{kind: uniform}", 400.0, "gcp", "", 3)
    ctx = tables_for(spec, cat).contexts["gcp"]
    for budget in (150.0, 400.0):
        out = exhaustive(spec, cat, ctx, budget, 3)
        full = exhaustive(spec, cat, ctx, budget, 3, prune=False)
        assert out.nodes and out.throughput_kops == pytest.approx(full.throughput_kops, rel=1e-12)
    assert exhaustive(spec, cat, ctx, 150.0, 3).kept < len(ctx)
