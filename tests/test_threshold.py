"""The band problem solved by its bottleneck (solver.bottleneck, the threshold
algorithm) against enumeration of every cluster (solver.exhaustive), and the
Pareto pruning (cost_models.pareto) against the definition, row by row.
Small instances: two VM types per provider, clusters of at most four nodes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_models import pareto
from cost_models.pareto import pareto_mask
from solver.bottleneck import Floor, best_within, cheapest_reaching, cluster_value, column_table
from solver.exhaustive import exhaustive
from solver.model import X_SCALE
from specs.vocab import Objective
from tests.test_solver import make_spec, small_catalog, tables_for

MIX = (0.5, 0.0, 0.0, 0.0, 0.5, 0.0)
ZIPF = "{kind: zipfian, theta: 0.99}"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.floats(60, 3000),
    provider=st.sampled_from(["aws", "gcp", "azure"]),
    slas=st.sampled_from(["", "availability", "backup, support", "availability, support"]),
    mc=st.integers(2, 4),
    objective=st.sampled_from([Objective.EXPECTED, Objective.PERTURBED, Objective.ROBUST]),
    tolerance=st.sampled_from([0.05, 0.3]),
)
def test_threshold_algorithm_matches_exhaustive(budget, provider, slas, mc, objective, tolerance):
    """The highest throughput within the budget (any count of every column: capacity credited),
    and its bill, equal enumeration's: with a linear bill, a percent-of-spend support plan, the
    availability SLA's two-node minimum, and the robust rule's floor."""
    cat = small_catalog("ondemand")
    spec = make_spec(3_000_000, MIX, ZIPF, budget, provider, slas, mc, "{noise: 0.1}")
    ctx = tables_for(spec, cat).contexts.get(provider, [])
    tab = column_table(spec, cat, ctx, provider, mc)
    floor_kops, flo = 0.0, None
    if objective == Objective.ROBUST:
        best_p = exhaustive(spec, cat, ctx, budget, mc, objective=Objective.PERTURBED)
        floor_kops = (1 - tolerance) * max(best_p.perturbed_kops, 0.0)
        flo = Floor(tab.p, floor_kops)
    oracle = exhaustive(spec, cat, ctx, budget, mc, objective=objective, floor_kops=floor_kops)
    mask = tab.cost <= budget
    ans = best_within(spec, tab, objective, mask, budget, floor=flo)
    if not oracle.nodes:
        assert ans.chosen is None
        return
    assert ans.chosen is not None, ans.note
    want = oracle.perturbed_kops if objective == Objective.PERTURBED else oracle.throughput_kops
    assert ans.chosen.value(objective) == pytest.approx(want, rel=1e-9)
    assert ans.chosen.monthly_cost == pytest.approx(oracle.cost, rel=1e-6)
    assert ans.chosen.monthly_cost <= budget * (1 + 1e-9)
    assert ans.result.gap == pytest.approx(0.0, abs=1e-9) and ans.result.status == "optimal"


@pytest.mark.parametrize("slas", ["", "availability", "availability, support"])
def test_cheapest_reaching_matches_exhaustive(slas):
    """The cheapest cluster that holds the data, and the cheapest reaching a throughput, cost the
    least of any cluster: enumeration finds none below either."""
    cat = small_catalog("ondemand")
    spec = make_spec(3_000_000, MIX, ZIPF, 1e6, "gcp", slas, 3, "{noise: 0.1}")
    ctx = tables_for(spec, cat).contexts["gcp"]
    tab = column_table(spec, cat, ctx, "gcp", 3)
    everything = np.ones(len(tab.contexts), dtype=bool)
    for at_least in (0.0, 0.5 * float(tab.node_x.max()), 2.0 * float(tab.node_x.max())):
        nodes, bill, proven = cheapest_reaching(tab, everything, at_least)
        assert nodes is not None and proven
        assert cluster_value(tab, tab.x, nodes) >= at_least * (1 - 1e-12)
        below = exhaustive(spec, cat, ctx, bill * (1 - 1e-9), 3, min_throughput=at_least / X_SCALE)
        assert not below.nodes, f"a cluster of ${below.cost:,.2f} is cheaper than ${bill:,.2f}"
        at = exhaustive(spec, cat, ctx, bill * (1 + 1e-9), 3, min_throughput=at_least / X_SCALE)
        assert at.nodes and at.cost == pytest.approx(bill, rel=1e-9)


def _dominated_brute(c: np.ndarray) -> np.ndarray:
    """The definition: a row is kept unless another weakly dominates it (of equal rows the first stays)."""
    n = len(c)
    keep = np.zeros(n, dtype=bool)
    for i in range(n):
        if np.isnan(c[i]).any():
            continue
        keep[i] = not any(
            j != i and not np.isnan(c[j]).any() and (c[j] <= c[i]).all() and ((c[j] < c[i]).any() or j < i)
            for j in range(n)
        )
    return keep


@pytest.mark.parametrize("staircase_rows_min", [pareto.STAIRCASE_ROWS_MIN, 0])
@pytest.mark.parametrize("d", [2, 3, 4])
def test_pareto_mask_is_the_definition(d, staircase_rows_min, monkeypatch):
    """Every path of pareto_mask (two columns; three by staircase, also on few rows; chunks,
    also past CHUNK rows and with many distinct first columns) keeps exactly the undominated rows."""
    monkeypatch.setattr(pareto, "STAIRCASE_ROWS_MIN", staircase_rows_min)
    rng = np.random.default_rng(d)
    for trial in range(40):
        n = int(rng.integers(1, 40 if trial % 4 else 600))
        levels = 4 if trial % 2 else 200
        c = rng.integers(0, levels, size=(n, d)).astype(float)
        if trial % 5 == 0:
            c[rng.integers(0, n)] = np.nan
        if n > 300:  # the brute force is quadratic in Python: check a large case against a small-chunk run
            sub = c[:300]
            assert (pareto_mask(sub) == _dominated_brute(sub)).all()
            continue
        assert (pareto_mask(c) == _dominated_brute(c)).all(), (trial, n, levels)


@pytest.mark.parametrize("shrink", [0.0, pareto.PEEL_SHRINK, 1.0])
@pytest.mark.parametrize("peels", [0, 1, 5, pareto.PEELS])
@pytest.mark.parametrize("d", [4, 5])
def test_pareto_mask_peels_and_pivots_are_exact(d, peels, shrink, monkeypatch):
    """The peel and pivot passes (more than three columns: the first front rows found one by
    one, then rows a few strong rows strictly dominate dropped), forced on small tables, keep
    exactly the undominated rows, also with infinite values (a column with one is left out of
    the pivots' scaled sums) and ties; whether the peel cuts its table down never (0), after a
    peel that leaves at most half (its default) or after every peel (1)."""
    monkeypatch.setattr(pareto, "PIVOT_ROWS_MIN", 0)
    monkeypatch.setattr(pareto, "PEELS", peels)
    monkeypatch.setattr(pareto, "PEEL_SHRINK", shrink)
    rng = np.random.default_rng(10 + d)
    for trial in range(40):
        n = int(rng.integers(1, 300))
        c = rng.integers(0, 4 if trial % 2 else 200, size=(n, d)).astype(float)
        if trial % 3 == 0:
            c[rng.integers(0, n), rng.integers(0, d)] = -np.inf if trial % 2 else np.inf
        if trial % 5 == 0:
            c[rng.integers(0, n)] = np.nan
        assert (pareto_mask(c) == _dominated_brute(c)).all(), (trial, n)


def test_robust_front_is_the_per_volume_front_then_the_column_pruning():
    """solver.tables.columns.robust_front (all volumes at once, pre-pruned) keeps exactly the
    (volume, design) pairs that the per-volume Pareto fronts followed by prune_columns's
    rule (cost, expected, perturbed) keep, in the same order: ties and dead designs included."""
    from cost_models.cloud import StorageChoice
    from cost_models.pricing.catalog import VmType
    from solver.tables.columns import robust_front

    rng = np.random.default_rng(7)
    vm = VmType("aws", "m", 2, 8.0, 0.1)
    for _ in range(60):
        rows, cols = int(rng.integers(1, 8)), int(rng.integers(1, 30))
        xe = rng.integers(0, 5, size=(rows, cols)).astype(float)  # 0: the design does not fit the volume
        xp = rng.integers(1, 5, size=(rows, cols)).astype(float)
        choices = [StorageChoice("aws", "gp3", 1, 100.0, 3000.0, float(rng.integers(1, 4))) for _ in range(rows)]
        raw = []
        for r in range(rows):
            live = np.flatnonzero(xe[r] > 0)
            if live.size:
                raw += [(r, int(j)) for j in live[pareto_mask(np.stack([-xe[r, live], -xp[r, live]], axis=1))]]
        cost = [vm.usd_per_month + choices[r].usd_month for r, _ in raw]
        table = np.array([(c, -xe[r, j], -xp[r, j]) for c, (r, j) in zip(cost, raw, strict=True)]).reshape(-1, 3)
        want = [p for p, k in zip(raw, pareto_mask(table), strict=True) if k] if raw else []
        assert robust_front(vm, choices, xe, xp) == want


def test_equally_fast_designs_are_told_apart_by_their_cpu_headroom():
    """solver.tables.columns.picked: of designs equally fast on a volume (device-bound), the column
    carries the one whose CPU allows the most; with robustness, the front's pair equal in both
    throughputs does too; without headroom, the first (as before)."""
    from cost_models.cloud import StorageChoice
    from cost_models.pricing.catalog import VmType
    from solver.tables.columns import picked, robust_front
    from specs.schema import parse_spec

    vm = VmType("aws", "m", 2, 8.0, 0.1)
    choices = [StorageChoice("aws", "gp3", 1, 100.0, 3000.0, 1.0), StorageChoice("aws", "gp3", 1, 200.0, 6000.0, 2.0)]
    xe = np.array([[5.0, 5.0, 4.0, 5.0], [7.0, 6.0, 7.0, 7.0]])
    xp = np.array([[3.0, 3.0, 3.0, 3.0], [2.0, 2.0, 2.0, 2.0]])
    headroom = np.array([9.0, 20.0, 30.0, 12.0])
    fits = np.ones_like(xe, dtype=bool)
    spec = parse_spec(
        "name: t\nworkload: {entries: 1000000, key_bytes: 16, value_bytes: 100, operations: {get: 0.5, update: 0.5}}\n"
        "budget: {monthly_usd: 1000}\n"
    )
    cand = np.arange(4)
    rows = [c.row for c in picked(spec, vm, 1e6, choices, None, cand, fits, xe, xp, "t", headroom=headroom)]
    assert rows == [1, 2]  # volume 0: designs 0, 1, 3 tie at 5 -> 1; volume 1: 0, 2, 3 tie at 7 -> 2
    assert [c.row for c in picked(spec, vm, 1e6, choices, None, cand, fits, xe, xp, "t")] == [0, 0]
    assert robust_front(vm, choices, xe, xp, headroom) == [(0, 1), (1, 2)]
    assert robust_front(vm, choices, xe, xp) == [(0, 0), (1, 0)]
