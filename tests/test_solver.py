"""The MIP against the exhaustive oracle, back ends against each other, and the
frontier's guarantees. Small instances: few VM types, small clusters."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_models.pricing.catalog import Catalog, load_catalog
from solver.backends import BACKENDS, HighsBackend
from solver.exhaustive import exhaustive
from solver.frontier import solve_frontier
from solver.model import X_SCALE, build_mip, read_solution
from solver.tables.build import build_tables
from specs.schema import parse_spec
from specs.vocab import Method

BASE = """
name: small
workload:
  entries: {entries}
  key_bytes: 16
  value_bytes: 100
  operations: {{get: {g}, empty_get: {e}, range: {r}, insert: {i}, update: {u}, rmw: {w}}}
  distribution:
    get: {dist}
    put: {dist}
budget: {{monthly_usd: {budget}}}
providers: [{providers}]
slas: [{slas}]
design:
  size_ratio: [4, 10]
  max_cluster_size: {mc}
"""


def small_catalog(price_set: str = "paper2021-flat-iops", per_provider: int = 2) -> Catalog:
    full = load_catalog(price_set)
    return Catalog(
        price_set=price_set,
        vms={p: v[:per_provider] for p, v in full.vms.items()},
        storage=full.storage,
        slas=full.slas,
        vm_storage=full.vm_storage,
        regions=full.regions,
    )


def make_spec(
    entries=2_000_000,
    mix=(0.5, 0.0, 0.0, 0.0, 0.5, 0.0),
    dist="{kind: uniform}",
    budget=500.0,
    providers="aws",
    slas="",
    mc=3,
    robustness="",
):
    g, e, r, i, u, w = mix
    extra = f"robustness: {robustness}\n" if robustness else ""
    return parse_spec(
        extra
        + BASE.format(
            entries=entries,
            g=g,
            e=e,
            r=r,
            i=i,
            u=u,
            w=w,
            dist=dist,
            budget=budget,
            providers=providers,
            slas=slas,
            mc=mc,
        )
    )


_TABLES: dict = {}


def tables_for(spec, cat):
    key = repr((spec.workload, spec.providers, spec.slas, spec.design, spec.noise, spec.kl_radius, cat.price_set))
    if key not in _TABLES:
        _TABLES[key] = build_tables(spec, cat, spec.providers, workers=1)
    return _TABLES[key]


mixes = st.sampled_from(
    [
        (0.5, 0.0, 0.0, 0.0, 0.5, 0.0),
        (0.95, 0.0, 0.0, 0.05, 0.0, 0.0),
        (0.0, 0.0, 0.9, 0.1, 0.0, 0.0),
        (0.25, 0.0, 0.0, 0.25, 0.25, 0.25),
        (0.1, 0.4, 0.0, 0.5, 0.0, 0.0),
    ]
)
dists = st.sampled_from(
    ["{kind: uniform}", "{kind: zipfian, theta: 0.99}", "{kind: skew, hot_fraction: 0.01, hot_probability: 0.9}"]
)


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mix=mixes,
    dist=dists,
    entries=st.sampled_from([500_000, 5_000_000, 50_000_000]),
    budget=st.floats(60, 3000),
    provider=st.sampled_from(["aws", "gcp", "azure"]),
    slas=st.sampled_from(["", "availability", "backup, support"]),
    mc=st.integers(2, 3),
    price_set=st.sampled_from(["paper2021-flat-iops", "ondemand"]),
)
def test_mip_matches_exhaustive(mix, dist, entries, budget, provider, slas, mc, price_set):
    """Over the columns of realistic storage (volume type and size per node) and
    of the paper's flat rule; the oracle tries every count up to the cap."""
    cat = small_catalog(price_set)
    spec = make_spec(entries, mix, dist, budget, provider, slas, mc)
    tables = tables_for(spec, cat)
    ctx = tables.contexts.get(provider, [])
    oracle = exhaustive(spec, cat, ctx, budget, mc)
    m, meta = build_mip(spec, cat, ctx, budget, providers=[provider])
    res = HighsBackend().solve(m, gap=1e-6)
    if oracle.throughput_kops < 0:
        assert res.x is None or read_solution(m, meta, res.x, spec, cat).throughput_kops <= 0
        return
    assert res.x is not None, res.status
    ch = read_solution(m, meta, res.x, spec, cat)
    mip_x = ch.throughput_kops
    tol = (res.gap + 1e-6) * max(abs(res.objective), 1.0)
    assert mip_x >= oracle.throughput_kops - tol, (mip_x, oracle.throughput_kops)
    assert mip_x <= oracle.throughput_kops + tol, "the MIP found a cluster the oracle missed"
    assert ch.monthly_cost <= budget * (1 + 1e-6)


@pytest.mark.parametrize("name", [n for n, b in BACKENDS.items() if b.is_available()])
def test_backends_agree(name):
    cat = small_catalog()
    spec = make_spec(
        5_000_000,
        (0.5, 0.0, 0.0, 0.0, 0.5, 0.0),
        "{kind: zipfian, theta: 0.99}",
        900.0,
        "aws, gcp",
        "availability, support",
        3,
    )
    tables = tables_for(spec, cat)
    ctx = [c for p in ("aws", "gcp") for c in tables.contexts[p]]
    m, meta = build_mip(spec, cat, ctx, 900.0)
    ref = HighsBackend().solve(m, gap=1e-6)
    res = BACKENDS[name]().solve(m, gap=1e-6)
    assert res.status == "optimal"
    x_ref = ref.x[m.vars["X"].start]
    x = res.x[m.vars["X"].start]
    # CP-SAT solves a rounded model: its answer is within its scaling error.
    tol = 1e-6 + 10 * res.scaling_error
    assert x == pytest.approx(x_ref, rel=tol)
    # rows mix X (kops) with the capacity's worth: a violation within the same relative tolerance
    assert m.violation(res.x) <= tol * max(1.0, x_ref)


def test_combined_provider_model_equals_best_single_provider():
    cat = small_catalog()
    spec = make_spec(5_000_000, (0.95, 0.0, 0.0, 0.05, 0.0, 0.0), "{kind: uniform}", 700.0, "aws, gcp, azure")
    tables = tables_for(spec, cat)
    ctx = [c for cs in tables.contexts.values() for c in cs]
    m, meta = build_mip(spec, cat, ctx, 700.0)
    both = HighsBackend().solve(m, gap=1e-7)
    best = 0.0
    for p in ("aws", "gcp", "azure"):
        mp, _ = build_mip(spec, cat, tables.contexts[p], 700.0, providers=[p])
        r = HighsBackend().solve(mp, gap=1e-7)
        if r.x is not None:
            best = max(best, r.x[mp.vars["X"].start])
    assert both.x[m.vars["X"].start] == pytest.approx(best, rel=1e-6)


def test_frontier_is_monotone_and_certified(tmp_path):
    cat = small_catalog()
    spec = make_spec(
        5_000_000, (0.5, 0.0, 0.0, 0.0, 0.5, 0.0), "{kind: zipfian, theta: 0.99}", 900.0, "aws, azure", "", 3
    )
    tables = tables_for(spec, cat)
    fr = solve_frontier(spec, cat, tables, HighsBackend(), bands=12, out_dir=tmp_path)
    for p, pts in fr.points.items():
        xs = [pt.throughput for pt in pts]
        assert all(b >= a * (1 - 1e-9) for a, b in zip(xs, xs[1:], strict=False)), p
        for pt in pts:
            if pt.chosen:
                assert pt.result.gap <= 1e-4 + 1e-12
                assert pt.approx_error < 0.05
                assert pt.cost <= pt.budget * (1 + 1e-6)
    assert (tmp_path / "solver").is_dir() and any((tmp_path / "solver").iterdir())


@pytest.mark.parametrize("slas", ["", "availability, support"])
def test_frontier_methods_agree(slas, tmp_path):
    """Every band's answer is the same whether the band MIP is solved by its
    bottleneck (the default), whole by HiGHS, or by enumeration: same throughput
    of the objective, and the same bill within the MIP's gap (ties broken alike)."""
    cat = small_catalog("ondemand")
    spec = make_spec(3_000_000, (0.5, 0.0, 0.0, 0.0, 0.5, 0.0), "{kind: zipfian, theta: 0.99}", 900.0, "gcp", slas, 3)
    tables = tables_for(spec, cat)
    runs = {
        m: solve_frontier(spec, cat, tables, HighsBackend(), method=m, bands=8, gap=1e-9, out_dir=tmp_path / m)
        for m in Method
    }
    ref = runs[Method.EXHAUSTIVE].points["gcp"]
    assert any(pt.chosen for pt in ref), "the instance has feasible bands"
    for m in (Method.THRESHOLD, Method.MIP):
        for got, want in zip(runs[m].points["gcp"], ref, strict=True):
            assert (got.chosen is None) == (want.chosen is None), (m, got.budget)
            if want.chosen is None:
                continue
            assert got.chosen.throughput_kops == pytest.approx(want.chosen.throughput_kops, rel=1e-6), (m, got.budget)
            assert got.cost <= got.budget * (1 + 1e-9)
            assert got.result.gap <= 1e-6, (m, got.result)
    assert runs[Method.MIP].n_solves > 0, "the whole-MIP method solved band MIPs with the back end"


def test_approx_error_is_measured_not_assumed():
    # With shard sizes between breakpoints the exact re-evaluation differs from
    # the table value: the certificate must show it, not zero.
    cat = small_catalog()
    spec = make_spec(5_000_000, (0.5, 0.0, 0.0, 0.0, 0.5, 0.0), "{kind: uniform}", 900.0, "aws", "", 3)
    tables = tables_for(spec, cat)
    ctx = tables.contexts["aws"]
    # hand-pick an over-provisioned cluster: 3 nodes of the N/2 context
    c = next(c for c in ctx if math.isclose(c.entries, spec.workload.entries / 2))
    from solver.exact import reevaluate

    ex = reevaluate(spec, [(c, 3)])
    table_x = spec.workload.entries * c.throughput / c.entries
    assert ex.throughput >= table_x * (1 - 1e-6)  # smaller real shards never hurt
    assert ex.per_node[0].design.entries_per_node == pytest.approx(spec.workload.entries / 3)


def test_exhaustive_refuses_large_instances():
    from specs.errors import InputError

    cat = load_catalog("paper2021-flat-iops")
    spec = replace(make_spec(mc=30), design=replace(make_spec().design, max_cluster_size=30))
    tables = build_tables(spec, cat, ("aws",), workers=1)
    with pytest.raises(InputError, match="too large"):
        exhaustive(spec, cat, tables.contexts["aws"], 1e5, 30)


def test_x_scale_is_kops():
    assert X_SCALE == 1e-3


@pytest.mark.parametrize(
    "mix",
    [
        (0.1, 0.0, 0.0, 0.45, 0.45, 0.0),
        (0.5, 0.0, 0.0, 0.0, 0.5, 0.0),
        (0.0, 0.0, 0.95, 0.05, 0.0, 0.0),
    ],
)
def test_tables_agree_with_the_exact_model(mix):
    """Every table entry, re-evaluated exactly at its own shard size, within 1%
    (the interpolated windows are the only difference). Regression: a buffer
    larger than the shard with inserts once made the table 3x optimistic."""
    from cost_models.cloud import GIB
    from cost_models.design import DesignBatch
    from cost_models.evaluate import evaluate_designs, workload_partitions
    from solver.exact import _evaluate_nodes
    from solver.space import fanout_nodes

    cat = small_catalog(per_provider=3)
    spec = make_spec(3_000_000, mix, "{kind: zipfian, theta: 0.99}", 900.0, "gcp", "", 3)
    tables = tables_for(spec, cat)
    parts = workload_partitions(spec.workload)
    for c in tables.contexts["gcp"]:
        # served (issues 47, 48): a node holding its shard, its scans reaching the next breakpoint's
        # nodes (solver.space.fanout_nodes), as the table prices it
        key = (id(c), c.entries, fanout_nodes(spec, c.entries))
        x = _evaluate_nodes(spec, {key: c}, parts)[key].x
        assert x == pytest.approx(c.throughput, rel=0.01), (c.vm.name, c.entries, c.design)
        # and the engine in process, the same design evaluated alone, is at least as fast
        ne = evaluate_designs(DesignBatch.of([c.design]), spec.workload, c.entries, c.vm.memory_gib * GIB)
        engine = float(
            ne.throughput(spec.workload, c.storage.effective_iops(c.design.block_bytes), c.design.threads)[0]
        )
        assert engine >= x * (1 - 0.01)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.floats(80, 3000),
    provider=st.sampled_from(["aws", "gcp", "azure"]),
    robustness=st.sampled_from(["{noise: 0.1}", "{noise: 0.1, tolerance: 0.3}", "{kl_radius: 0.5}"]),
    mc=st.integers(2, 3),
)
def test_robust_rule_matches_exhaustive(budget, provider, robustness, mc):
    """The robust rule (max expected throughput with perturbed >= (1 - tolerance)
    x the best perturbed one at the budget), solved as one MIP with the floor rows,
    against enumeration of every cluster."""
    from solver.model import columns_for, set_budget
    from specs.vocab import Objective

    cat = small_catalog("ondemand")
    mix = (0.5, 0.0, 0.0, 0.0, 0.5, 0.0)  # tables depend on the workload and noise only: two builds in all
    spec = make_spec(3_000_000, mix, "{kind: zipfian, theta: 0.99}", budget, "aws, gcp, azure", "", 3, robustness)
    tables = tables_for(spec, cat)
    ctx = tables.contexts.get(provider, [])
    best_p = exhaustive(spec, cat, ctx, budget, mc, objective=Objective.PERTURBED)
    m, meta = build_mip(
        spec, cat, columns_for(ctx, Objective.PERTURBED), budget, mc, [provider], objective=Objective.PERTURBED
    )
    set_budget(m, meta, budget)
    res = HighsBackend().solve(m, gap=1e-7)
    if not best_p.nodes:
        assert res.x is None
        return
    p_mip = read_solution(m, meta, res.x, spec, cat).perturbed_kops
    assert p_mip == pytest.approx(best_p.perturbed_kops, rel=1e-6)
    floor = (1 - spec.tolerance) * best_p.perturbed_kops
    oracle = exhaustive(spec, cat, ctx, budget, mc, objective=Objective.ROBUST, floor_kops=floor)
    cols = columns_for(ctx, Objective.ROBUST)
    m, meta = build_mip(spec, cat, cols, budget, mc, [provider], objective=Objective.ROBUST, floor_kops=floor)
    res = HighsBackend().solve(m, gap=1e-7)
    assert res.x is not None and oracle.nodes  # the best perturbed cluster itself meets the floor
    ch = read_solution(m, meta, res.x, spec, cat)
    assert ch.throughput_kops == pytest.approx(oracle.throughput_kops, rel=1e-6)
    assert ch.perturbed_kops >= floor * (1 - 1e-9)
    assert ch.monthly_cost <= budget * (1 + 1e-6)


def test_columns_for_is_exact_on_realistic_storage():
    """Keeping per shard only the columns no cheaper one beats loses nothing:
    the MIP over them equals enumeration over every column."""
    from solver.model import columns_for
    from specs.vocab import Objective

    cat = small_catalog("ondemand", per_provider=3)
    # 2e8 entries: more than the nodes' block caches hold, so the noise's ranges and empty gets
    # make the perturbed throughput disagree with the expected one (a smaller store is cached
    # whole and both fronts coincide: nothing to drop)
    spec = make_spec(
        200_000_000, (0.25, 0.0, 0.0, 0.25, 0.25, 0.25), "{kind: uniform}", 900.0, "gcp", "", 2, "{noise: 0.1}"
    )
    ctx = tables_for(spec, cat).contexts["gcp"]  # Pareto in cost and both throughputs
    cols = columns_for(ctx, Objective.EXPECTED)  # in cost and the expected one
    assert len(cols) < len(ctx)
    for budget in (120.0, 400.0, 900.0, 2500.0):
        oracle = exhaustive(spec, cat, ctx, budget, 2)
        m, meta = build_mip(spec, cat, cols, budget, 2, ["gcp"])
        res = HighsBackend().solve(m, gap=1e-7)
        if not oracle.nodes:
            assert res.x is None
            continue
        assert read_solution(m, meta, res.x, spec, cat).throughput_kops == pytest.approx(oracle.throughput_kops)


def test_storage_is_a_decision():
    """With realistic storage a node's volume (type and size) is chosen with its
    design: the tables offer several volumes per VM type, among them volumes
    larger than the data needs (bought for their IOPS)."""
    cat = small_catalog("ondemand", per_provider=3)
    spec = make_spec(20_000_000, (0.5, 0.0, 0.0, 0.0, 0.5, 0.0), "{kind: uniform}", 900.0, "gcp", "", 3)
    ctx = tables_for(spec, cat).contexts["gcp"]
    data_gib = spec.workload.data_bytes / 2**30
    per_vm: dict[str, set[str]] = {}
    for c in ctx:
        per_vm.setdefault(c.vm.name, set()).add(c.storage.label)
    assert max(len(v) for v in per_vm.values()) > 1
    assert any(c.storage.gib > 3 * data_gib * c.entries / spec.workload.entries for c in ctx)


@pytest.mark.parametrize(
    "mix, robustness",
    [
        ((0.5, 0.0, 0.0, 0.0, 0.5, 0.0), ""),
        ((0.1, 0.4, 0.2, 0.3, 0.0, 0.0), "{noise: 0.1, tolerance: 0.1}"),
        ((0.25, 0.0, 0.0, 0.25, 0.25, 0.25), "{noise: 0.2, tolerance: 0.1, kl_radius: 0.05}"),
    ],
)
def test_reevaluate_many_equals_each_alone(mix, robustness):
    """The frontier's batched exact re-evaluation (nodes of one size evaluated together, each on
    its VM's memory) gives every cluster exactly what re-evaluating it alone gives: homogeneous
    clusters of columns of every shard size, VM type and design class, and mixed ones."""
    from solver.exact import reevaluate, reevaluate_many
    from specs.vocab import PRESETS

    spec = make_spec(mix=mix, dist="{kind: zipfian, theta: 0.99}", robustness=robustness, mc=6)
    tables = build_tables(spec, small_catalog(per_provider=3), spec.providers, workers=1, presets=PRESETS)
    cols = tables.contexts["aws"] + [c for p in tables.presets.values() for c in p["aws"]]
    pick = cols[:: max(1, len(cols) // 60)]
    seen = {c.design_class for c in pick}
    pick += [next(c for c in cols if c.design_class == k) for k in sorted({c.design_class for c in cols} - seen)]
    clusters = [[(c, round(spec.workload.entries / c.entries))] for c in pick]
    clusters += [[(a, 1), (b, 2)] for a, b in zip(pick[::3], pick[1::3], strict=False)]
    many = reevaluate_many(spec, clusters)
    assert many == [reevaluate(spec, nodes) for nodes in clusters]
    # every class the tables kept (since stop 63's put limit the first mix keeps B-trees alone)
    assert {c.design_class for c in pick} == {c.design_class for c in cols} and len({c.entries for c in pick}) > 1
