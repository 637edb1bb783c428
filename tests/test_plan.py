"""`cosine plan`: the exact DP against brute force over plans, SOPHIA's
availability rule, the baselines' ordering, naive reconfiguration losing to
not reconfiguring, trace input errors, and the shipped traces."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specs.errors import InputError
from studies.plan.dp import (
    ConfigInfo,
    PlanProblem,
    ReconfigCosts,
    default_plan,
    naive_plan,
    offline_seconds,
    optimal_plan,
    phases,
    plan_report,
    receding_plan,
    rounds,
    simulate,
    static_plan,
)
from studies.plan.trace import TRACE_COLUMNS, load_trace, quantize

TRACES = Path(__file__).resolve().parent.parent / "specs" / "traces"
REL = 1e-9


def cfg(i: int, nodes: int = 4, vm: str = "vm", cls: str = "lsm") -> ConfigInfo:
    return ConfigInfo(f"c{i}", nodes, vm, cls, 1e9)


@st.composite
def problems(draw, max_steps: int = 6, max_configs: int = 3) -> PlanProblem:
    T = draw(st.integers(1, max_steps))
    C = draw(st.integers(1, max_configs))
    floats = st.floats(0.0, 100.0, allow_nan=False)
    dur = draw(st.lists(st.floats(1.0, 10.0), min_size=T, max_size=T))
    cap = np.array(draw(st.lists(st.lists(floats, min_size=C, max_size=C), min_size=T, max_size=T)))
    load = np.array(draw(st.lists(st.floats(0.0, 120.0), min_size=T, max_size=T)))
    off = np.array(draw(st.lists(st.lists(st.floats(0.5, 15.0), min_size=C, max_size=C), min_size=C, max_size=C)))
    np.fill_diagonal(off, 0.0)
    nodes = draw(st.lists(st.integers(1, 9), min_size=C, max_size=C))
    rf = draw(st.integers(1, 5))
    cl = draw(st.integers(1, rf))
    initial = draw(st.one_of(st.none(), st.integers(0, C - 1)))
    return PlanProblem(
        edges=np.concatenate([[0.0], np.cumsum(dur)]),
        load=load,
        capacity=cap,
        configs=[cfg(i, n) for i, n in enumerate(nodes)],
        offline_s=off,
        rf=rf,
        cl=cl,
        initial=initial,
        default=draw(st.integers(0, C - 1)),
    )


def brute_force(p: PlanProblem) -> float:
    """Enumerate every plan (stay, or start a switch to any other configuration
    at every step boundary where none is running) and replay each."""
    best = -math.inf

    def rec(t: int, cur: int, init: int, moves: list[tuple[int, int]]) -> None:
        nonlocal best
        if t >= p.steps:
            best = max(best, simulate(p, init, moves).total_ops)
            return
        rec(t + 1, cur, init, moves)
        for b in range(p.n_configs):
            ph = phases(p.configs[cur].nodes, p.rf, p.cl, float(p.offline_s[cur, b]))
            if b == cur or not ph:
                continue
            end = p.edges[t] + sum(d for d, _, _ in ph)
            nxt = next((u for u in range(t + 1, p.steps + 1) if p.edges[u] >= end), p.steps)
            rec(nxt, b, init, [*moves, (t, b)])

    for init in [p.initial] if p.initial is not None else range(p.n_configs):
        rec(0, init, init, [])
    return best


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_dp_equals_brute_force(p: PlanProblem) -> None:
    opt = optimal_plan(p)
    assert opt.total_ops == pytest.approx(brute_force(p), rel=REL, abs=1e-6)
    cert = opt.certificate
    assert cert["optimal"] and cert["dp_value"] == pytest.approx(cert["replayed_value"], rel=REL, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(problems(max_steps=10, max_configs=4), st.integers(1, 4))
def test_ordering_of_plans_and_baselines(p: PlanProblem, lookahead: int) -> None:
    r = plan_report(p, lookahead)
    best, opt, plan = r["best"].total_ops, r["optimal"].total_ops, r["plan"].total_ops
    tol = 1e-9 * max(1.0, best)
    assert best >= opt - tol
    assert opt >= plan - tol  # a receding horizon never beats the full-horizon optimum
    assert best >= r["naive"].total_ops - tol
    if p.initial is None:  # the plan may start where Static-Opt and Default start
        assert opt >= max(r["default"].total_ops, r["static"].total_ops) - tol
    elif p.initial == p.default:
        assert opt >= r["default"].total_ops - tol
    for res in r.values():  # every step serves at most min(best capacity, load) * duration
        assert np.all(res.served <= r["best"].served + 1e-9 * max(1.0, best))


def test_rounds_follow_sophia_section_4_5() -> None:
    # R = N_s - CL * ceil(N_s / RF); rounds = ceil(N_s / R) = RF / (RF - CL) when RF divides N_s
    assert rounds(8, 3, 1) == (5, 2)
    assert rounds(9, 3, 1) == (6, 2)
    assert rounds(30, 3, 2) == (10, 3)
    assert rounds(2, 2, 1) == (1, 2)  # SOPHIA Fig. 2: 2 servers, CL=1, one at a time
    assert rounds(12, 5, 1) == (9, 2)
    for n in range(1, 20):
        for rf in range(1, 6):
            assert rounds(n, rf, rf)[1] == 0  # RF = CL: no node may go offline
            for cl in range(1, rf):
                r, k = rounds(n, rf, cl)
                assert r == n - cl * math.ceil(n / rf) and (r <= 0 or k == math.ceil(n / r))


def two_phase_problem(rf: int = 3, cl: int = 1, off: float = 100.0, nodes: int = 6) -> PlanProblem:
    """c0 serves phase A well, c1 phase B; each phase lasts 10 steps of 60 s."""
    cap = np.array([[100.0, 10.0]] * 10 + [[10.0, 100.0]] * 10)
    return PlanProblem(
        edges=np.arange(21) * 60.0,
        load=np.full(20, np.inf),
        capacity=cap,
        configs=[cfg(0, nodes), cfg(1, nodes)],
        offline_s=np.array([[0.0, off], [off, 0.0]]),
        rf=rf,
        cl=cl,
        initial=0,
    )


def test_switch_accounting_by_hand() -> None:
    # 6 nodes, RF=3, CL=1: R = 6 - 2 = 4 offline at once, 2 rounds (4 then 2 nodes) of 100 s each.
    p = two_phase_problem()
    res = simulate(p, 0, [(10, 1)])
    (sw,) = res.switches
    assert sw.rounds == 2 and sw.end_s - sw.start_s == pytest.approx(200.0)
    # round 1 (600..700 s): 4 offline, 2 old online -> 2/6 * 10; round 2 (700..800 s): the last 2 offline,
    # the 4 reconfigured ones online -> 4/6 * 100
    during = 100 * (2 / 6 * 10) + 100 * (4 / 6 * 100)
    expected = 600 * 100 + during + 400 * 100  # 800..1200 s on c1 at full capacity
    assert res.total_ops == pytest.approx(expected)
    # The optimum starts early (SOPHIA's "when"): at 540 s the first round overlaps the end of phase A,
    # where the 2 old nodes still online serve 100 ops/s each sixth. (Starting at 480 s ties; ties wait.)
    early = 540 * 100 + 60 * (2 / 6 * 100) + 40 * (2 / 6 * 10) + 100 * (4 / 6 * 100) + 460 * 100
    opt = optimal_plan(p)
    assert [(s.step, s.target) for s in opt.switches] == [(9, 1)]
    assert opt.total_ops == pytest.approx(early) and early > expected


def test_rf_equals_cl_forbids_switching() -> None:
    p = two_phase_problem(rf=2, cl=2)
    r = plan_report(p)
    assert r["plan"].switches == [] and r["optimal"].total_ops == pytest.approx(r["default"].total_ops)
    assert "no node may go offline" in r["plan"].certificate["note"]
    with pytest.raises(InputError, match="impossible"):
        simulate(p, 0, [(10, 1)])
    assert naive_plan(p).switches  # naive restarts everything anyway (it ignores availability)


def test_naive_loses_to_default_on_fast_switches() -> None:
    # The workload flips every 5-minute step; a switch (all nodes at once) takes 4 minutes of downtime.
    T = 24
    cap = np.array([[100.0, 60.0] if t % 2 else [60.0, 100.0] for t in range(T)])
    p = PlanProblem(
        edges=np.arange(T + 1) * 300.0,
        load=np.full(T, 1e9),
        capacity=cap,
        configs=[cfg(0, 8), cfg(1, 8)],
        offline_s=np.array([[0.0, 240.0], [240.0, 0.0]]),
        initial=0,
        default=0,
    )
    r = plan_report(p)
    assert r["naive"].total_ops < r["default"].total_ops
    assert r["plan"].total_ops >= r["default"].total_ops
    assert r["plan"].switches == []  # with this cost no switch pays off


def test_lookahead_windows() -> None:
    p = two_phase_problem(off=30.0)
    opt = optimal_plan(p)
    assert receding_plan(p, p.steps).total_ops == pytest.approx(opt.total_ops)
    short = receding_plan(p, 1)
    assert short.total_ops <= opt.total_ops + 1e-9
    with pytest.raises(InputError, match="lookahead"):
        receding_plan(p, 0)


def test_offline_seconds_components() -> None:
    costs = ReconfigCosts(restart_s=25, sync_s=45, rewrite_bytes_per_s=1e8, migrate_bytes_per_s=5e7)
    a = ConfigInfo("a", 8, "aws: 8xr5d.large", "lsm", 1e10)
    assert offline_seconds(a, a, costs) == 0
    assert offline_seconds(a, ConfigInfo("b", 8, a.vm, "lsm", 1e10), costs) == 70  # restart + sync
    assert offline_seconds(a, ConfigInfo("c", 8, a.vm, "btree", 1e10), costs) == 70 + 100  # + rewrite
    assert offline_seconds(a, ConfigInfo("d", 8, "aws: 8xr5d.xlarge", "btree", 1e10), costs) == 70 + 200  # migrate


def test_quantize_keeps_sum_and_grid() -> None:
    rng = np.random.default_rng(3)
    m = rng.dirichlet(np.ones(6), 200)
    for q in (0.05, 0.1, 0.25, 0.5, 1.0):
        z = quantize(m, q)
        assert np.allclose(z.sum(axis=1), 1.0)
        assert np.allclose(np.round(z / q), z / q)
        assert np.abs(z - m).max() <= q + 1e-9
    with pytest.raises(InputError, match="quantum"):
        quantize(m, 0.3)


# ----------------------------------------------------------------------------- trace input


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    path.write_text("\n".join(",".join(map(str, r)) for r in [header, *rows]) + "\n")
    return path


GOOD = [[0, 0.5, 0, 0, 0, 0.5, 0, 1000], [60, 1, 0, 0, 0, 0, 0, 2000]]


@pytest.mark.parametrize(
    ("header", "rows", "match"),
    [
        (list(TRACE_COLUMNS[:-1]), [r[:-1] for r in GOOD], "wrong columns.*missing load_ops"),
        ([*TRACE_COLUMNS[:-1], "load"], GOOD, "wrong columns.*missing load_ops; unknown load"),
        (list(TRACE_COLUMNS), [GOOD[0], [60, 0.5, 0, 0, 0, 0.4, 0, 10]], "row 2: operation fractions sum to 0.9"),
        (list(TRACE_COLUMNS), [GOOD[0], [60, 1, 0, 0, 0, 0, 0, -5]], "row 2: negative load_ops"),
        (list(TRACE_COLUMNS), [GOOD[0], [0, 1, 0, 0, 0, 0, 0, 5]], "row 2: time_s must increase"),
        (list(TRACE_COLUMNS), [GOOD[0], [60, "x", 0, 0, 0, 0, 0, 5]], "row 2, get: 'x' is not a number"),
        (list(TRACE_COLUMNS), [GOOD[0]], "at least 2 rows"),
        ([*TRACE_COLUMNS, "get"], [[*r, 0.9] for r in GOOD], "column 'get' appears 2 times"),
    ],
)
def test_bad_traces(tmp_path: Path, header: list[str], rows: list[list[object]], match: str) -> None:
    p = write_csv(tmp_path / "t.csv", header, rows)
    with pytest.raises(InputError, match=match) as exc:
        load_trace(p)
    assert "\n" not in str(exc.value) and str(p) in str(exc.value)


def test_a_duplicated_parquet_column_is_refused_on_the_command_line(tmp_path: Path, runner) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cli.main import app

    cols = [pa.array([float(r[i]) for r in GOOD]) for i in range(len(TRACE_COLUMNS))]
    pq.write_table(pa.Table.from_arrays([*cols, cols[1]], names=[*TRACE_COLUMNS, "get"]), tmp_path / "t.parquet")
    res = runner.invoke(app, ["plan", str(tmp_path / "t.parquet"), "--json"])
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and res.stderr.count("\n") == 1 and "column 'get' appears 2 times" in res.stderr


def test_missing_trace_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_trace(tmp_path / "nope.csv")
    (tmp_path / "t.json").write_text("{}")
    with pytest.raises(InputError, match=".csv or .parquet"):
        load_trace(tmp_path / "t.json")


def test_parquet_trace_equals_csv(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    csv_t = load_trace(write_csv(tmp_path / "t.csv", list(TRACE_COLUMNS), GOOD))
    cols = {c: [float(r[i]) for r in GOOD] for i, c in enumerate(TRACE_COLUMNS)}
    pq.write_table(pa.table(cols), tmp_path / "t.parquet")
    pq_t = load_trace(tmp_path / "t.parquet")
    assert np.array_equal(csv_t.edges, pq_t.edges) and np.array_equal(csv_t.mixes, pq_t.mixes)
    assert csv_t.edges[-1] == 120  # the last step lasts as long as the one before


def test_unknown_provider_and_bad_flags() -> None:
    from cost_models.pricing.catalog import load_catalog
    from specs.schema import load_spec
    from studies.plan.build import build_plan_problem

    spec = load_spec(Path(__file__).resolve().parent.parent / "specs" / "ycsb_a.yaml")
    trace = load_trace(TRACES / "mgrast.csv")
    cat = load_catalog(spec.pricing)
    with pytest.raises(InputError, match="unknown provider 'oracle'"):
        build_plan_problem(trace, spec, cat, provider="oracle")
    with pytest.raises(InputError, match="--cl must be a whole number from 1 to 1"):
        build_plan_problem(trace, spec, cat, rf=1, cl=2)


# ----------------------------------------------------------------------------- shipped traces, real cost model


def test_shipped_traces_are_reproducible(tmp_path: Path) -> None:
    from specs.traces.generate import main

    main(["--seed", "7", "--out", str(tmp_path)])
    for name in ("mgrast", "bus", "hpc"):
        assert (tmp_path / f"{name}.csv").read_bytes() == (TRACES / f"{name}.csv").read_bytes(), name
        t = load_trace(TRACES / f"{name}.csv")
        assert 100 <= t.steps <= 1000


def test_naive_loses_to_default_on_mgrast_with_the_cost_model() -> None:
    """SOPHIA Sec. 6, Exp. 1: naive reconfiguration loses to the default on MG-RAST.

    Candidates are given explicitly to keep the test fast: the solver's optima
    for MG-RAST's read state (a B-tree, T = 2) and write state (a hash log) on
    SOPHIA's 8-node cluster (``cosine plan`` searches them per workload), under
    the CPU table they were chosen with (tests/data/phi_sophia.yaml). The test
    is about the plan's logic, so its table is pinned: with the table measured
    on 2026-11-23 (a loaded 2-core machine; phi of a B-tree get 0.89, of a
    hash-log get 0.96) Amdahl's law over 8 vCPUs makes the hash log the fastest
    in MG-RAST's read state too, naive never switches, and the experiment has
    no reconfiguration to study (docs/journal/s17-s21.md §17.2)."""
    from cost_models.design import Design
    from cost_models.phi import load_phi
    from cost_models.pricing.catalog import load_catalog
    from specs.schema import load_spec
    from studies.plan.build import build_plan_problem

    spec = load_spec(TRACES / "sophia.yaml")
    cat = load_catalog(spec.pricing)
    vm = cat.vm("aws", "r5d.2xlarge")
    read = Design(T=2, K=1, Z=1, buffer_bytes=16 * 2**20, bloom_bits=0.0, block_bytes=4096, name="btree")
    write = Design(buffer_bytes=32 * 2**20, bloom_bits=0.0, lsh=True, name="hashlog")
    configs = [("btree", read, vm, 8), ("hashlog", write, vm, 8)]
    built = build_plan_problem(
        load_trace(TRACES / "mgrast.csv"),
        spec,
        cat,
        configs=configs,
        phi=load_phi(Path(__file__).parent / "data" / "phi_sophia.yaml"),
    )
    r = plan_report(built.problem)
    assert r["naive"].total_ops < r["default"].total_ops
    assert r["best"].total_ops >= r["plan"].total_ops >= max(r["default"].total_ops, r["static"].total_ops)
    assert r["plan"].certificate["optimum"]["replay_rel_diff"] < 1e-9
    assert default_plan(built.problem).total_ops == r["default"].total_ops
    assert static_plan(built.problem).total_ops == r["static"].total_ops
