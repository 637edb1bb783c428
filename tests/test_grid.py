"""The count check behind the certificate's grid_gap (solver.grid), against brute force.

1. What it rests on: a node's exact throughput, for one design on one VM and volume, rises (never
   falls) as its keys fall while its layout (levels L, cold levels Y) stays; the layout's levels
   fall with the keys. Checked node count by node count on columns of every design class,
   operation mix and key distribution. (Across a layout change the throughput can drop: counted,
   so the property is not vacuous.)
2. What it says: every count vector of an answer's columns within the budget, evaluated exactly,
   is at most the bound; a one-group answer is the best of its counts (polished when the band
   model's count is not).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from solver.bottleneck import best_within, column_table
from solver.exact import Reevaluations, reevaluate
from solver.grid import check_counts
from specs.vocab import Objective
from tests.test_differential import random_spec, small
from tests.test_solver import make_spec, small_catalog, tables_for

MIXES = [
    (0.5, 0.0, 0.0, 0.0, 0.5, 0.0),
    (0.95, 0.0, 0.0, 0.05, 0.0, 0.0),
    (0.0, 0.0, 0.9, 0.1, 0.0, 0.0),
    (0.25, 0.0, 0.0, 0.25, 0.25, 0.25),
    (0.1, 0.4, 0.0, 0.5, 0.0, 0.0),
]
DISTS = ["{kind: uniform}", "{kind: zipfian, theta: 0.99}", "{kind: skew, hot_fraction: 0.01, hot_probability: 0.9}"]


@pytest.mark.parametrize(
    "mix, dist", [(m, DISTS[i % len(DISTS)]) for i, m in enumerate(MIXES)] + [(MIXES[0], DISTS[0])]
)
def test_cluster_throughput_rises_as_nodes_are_added_within_a_layout(mix, dist):
    """What the count check (solver/grid.py) relies on: within one layout, n nodes of a column are
    worth at least n - 1 of them. (A node's own rate rises as its keys fall, except that every scan
    reaches every shard of the served cluster, issue 48: with scans in the mix a node's rate in
    operations of the cluster falls as nodes are added, the cluster's rises.)"""
    cat = small_catalog("ondemand", per_provider=3)
    spec = make_spec(20_000_000, mix, dist, 1000.0, "aws, gcp", "", 12, "{noise: 0.1}")
    tables = tables_for(spec, cat)
    ex = Reevaluations(spec)
    N = spec.workload.entries
    checked = 0
    for ctx in tables.contexts.values():
        for c in ctx[:: max(1, len(ctx) // 6)]:
            k = round(N / c.entries)
            prev = None
            for n in range(k, k + 14):
                r = ex.node_rate(c, N / n)
                if prev is not None:
                    assert r.levels <= prev.levels, (c.vm.name, c.design, n, "levels rose as keys fell")
                    if r.layout == prev.layout:
                        assert n * r.x >= (n - 1) * prev.x * (1 - 1e-9), (c.vm.name, c.design, n, prev.x, r.x)
                        assert n * r.xp >= (n - 1) * prev.xp * (1 - 1e-9), (c.vm.name, c.design, n, prev.xp, r.xp)
                        checked += 1
                prev = r
            # the table's layout is the exact model's at the column's own shard
            at_k = ex.node_rate(c, float(c.entries))
            assert (c.levels, c.cold_levels) == at_k.layout
    assert checked > 40


def test_throughput_can_drop_across_a_layout_change():
    """The reason the check looks at every layout's stretch: on ycsb_a's mix a tiered tree of one
    level merges more per update than one of two, and more nodes of the same design are slower."""
    cat = small_catalog("ondemand", per_provider=3)
    spec = make_spec(100_000_000, MIXES[0], DISTS[1], 1000.0, "aws, gcp", "", 40, "")
    tables = tables_for(spec, cat)
    ex = Reevaluations(spec)
    N = spec.workload.entries

    def drops(c):
        k = round(N / c.entries)
        rates = [ex.node_rate(c, N / n) for n in range(k, k + 6)]
        return any(b.layout != a.layout and b.x < a.x for a, b in zip(rates, rates[1:], strict=False))

    assert any(drops(c) for ctx in tables.contexts.values() for c in ctx)


@pytest.mark.parametrize("seed", range(4700, 4712))
def test_no_count_of_the_answers_nodes_beats_the_bound(seed):
    """Every count vector of the answer's columns that the budget buys (brute force, exact
    re-evaluation) is at most the check's bound; for one group the best of them is the bound,
    and is the answer once polished."""
    _, spec = random_spec(seed)
    cat = small(spec.pricing)
    tables = tables_for(spec, cat)
    ex = Reevaluations(spec)
    for provider, ctx in tables.contexts.items():
        tab = column_table(spec, cat, ctx, provider, tables.max_cluster)
        for budget in (spec.budget_usd, spec.budget_usd * 4):
            ans = best_within(spec, tab, Objective.EXPECTED, tab.w + tab.fixed <= budget, budget)
            if ans.nodes is None:
                continue
            exact = reevaluate(spec, ans.chosen.nodes)
            chk = check_counts(tab, ans.nodes, budget, exact.throughput, ex.node_rate)
            bill = tab.bill_model
            cols = [i for i, _ in ans.nodes]
            need = tab.terms.min_nodes
            best = 0.0
            for counts in itertools.product(range(tab.max_cluster + 1), repeat=len(cols)):
                n = np.array(counts)
                q = float(sum(k / tab.share[i] for i, k in zip(cols, counts, strict=True)))
                if n.sum() < need or n.sum() > tab.max_cluster or q < 1 - 1e-9:
                    continue
                if bill.bill(tab.cost[cols], n) > budget * (1 + 1e-12):
                    continue
                nodes = [(ctx[i], int(k)) for i, k in zip(cols, counts, strict=True) if k > 0]
                got = reevaluate(spec, nodes).throughput
                best = max(best, got)
                assert got <= chk.bound * (1 + 1e-9), (seed, provider, budget, counts, got, chk)
            if len(cols) == 1:
                assert chk.bound == pytest.approx(max(best, exact.throughput), rel=1e-9)
                if chk.better is not None:
                    assert chk.better[0][0] == cols[0]
                    polished = reevaluate(spec, [(ctx[cols[0]], chk.better[0][1])]).throughput
                    assert polished == pytest.approx(chk.bound, rel=1e-9)
            assert chk.gap >= 0 and math.isfinite(chk.gap)
