"""`cosine validate ranking`: Spearman's rho, the median of interleaved repeats, and its options."""

from __future__ import annotations

import itertools
import math
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app
from measure.ranking import (
    PICK,
    confirmation_order,
    confirmation_rounds,
    confirmed_ratio,
    ranking,
    rivals,
    spearman,
    summary,
)


def _rank(v: list[float]) -> list[float]:
    """Average ranks by counting (ties share the mean of the ranks they span)."""
    return [sum(w < x for w in v) + (sum(w == x for w in v) - 1) / 2 for x in v]


def _pearson(a: list[float], b: list[float]) -> float:
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    va = sum((x - ma) ** 2 for x in a)
    vb = sum((y - mb) ** 2 for y in b)
    return cov / math.sqrt(va * vb)


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=3, max_size=12))
def test_spearman_is_pearson_on_average_ranks(pairs):
    a = [float(x) for x, _ in pairs]
    b = [float(y) for _, y in pairs]
    got = spearman(a, b)
    ra, rb = _rank(a), _rank(b)
    if len(set(ra)) == 1 or len(set(rb)) == 1:
        assert math.isnan(got)
    else:
        assert got == pytest.approx(_pearson(ra, rb), abs=1e-12)


def test_spearman_without_ties_is_the_textbook_formula():
    for perm in itertools.permutations(range(5)):
        d2 = sum((i - p) ** 2 for i, p in enumerate(perm))
        assert spearman(list(range(5)), list(perm)) == pytest.approx(1 - 6 * d2 / (5 * 24))


def test_ranking_repeats_report_the_median_run(engine_binary, monkeypatch):
    # one attempt per run: on a host whose cores the probe finds shared, each of the ~40 runs would
    # otherwise be run up to 4 times with 5 s waits (7 minutes of CI at stop 59); the retries
    # themselves are tests/test_core_probe.py's, and a run kept on a shared core is still counted
    import measure.ranking
    from measure.cores import on_two_cores

    monkeypatch.setattr(measure.ranking, "on_two_cores", partial(on_two_cores, attempts=1))
    rows = ranking(3000, 400, workloads=("ycsb_c",), repeats=3, confirm=2)
    assert len(rows) >= 8, "presets, the pick, its neighbours and the hybrids"
    assert {r["design"] for r in rows} >= {"cosine pick", "rocksdb", "wiredtiger", "faster"}
    for r in rows:
        assert r["runs"] == 3
        assert r["measured_ops"] > 0 and r["predicted_ops"] > 0
        assert r["measured_free_ops"] >= r["measured_ops"] * 0.5, "free throughput: the same run without waits"
        assert 1.0 <= r["measured_spread"] < math.inf
        ran = r["runs"] + r["confirm_runs"]
        assert len(r["measured_ops_runs"]) == r["runs"] and len(r["confirm_ops_runs"]) == r["confirm_runs"]
        assert r["measured_ops"] == sorted(r["measured_ops_runs"])[r["runs"] // 2]
        assert r["runs_dropped_shared_core"] >= 0 and 0 <= r["runs_on_shared_core"] <= ran
        assert 0 <= r["runs_short_of_depth"] <= ran
    pick = next(r for r in rows if r["design"] == PICK)
    beat = {r["design"] for r in rows if r["measured_ops"] > pick["measured_ops"]}
    for r in rows:  # the pick and the designs measured above it, and only those, were run again
        if beat and (r is pick or r["design"] in beat):
            assert r["confirm_runs"] == 2 and r["confirm_measured_ops"] > 0
        else:
            assert r["confirm_runs"] == 0 and math.isnan(r["confirm_measured_ops"])
    (s,) = summary(rows)
    assert 0 < s["pick_vs_best_confirmed"] <= 1.0
    assert (s["confirmed_best_design"] == PICK) == (s["pick_vs_best_confirmed"] == 1.0 or not beat)
    assert s["workload"] == "ycsb_c" and 0 < s["pick_vs_best"] <= 1.0
    assert -1.0 <= s["spearman_rho"] <= 1.0 and -1.0 <= s["spearman_rho_free"] <= 1.0
    assert 0 < s["pick_vs_best_free"] <= 1.0


@pytest.mark.parametrize(
    "args, message",
    [
        (["io", "--repeats", "2"], "No such option: --repeats"),
        (["ranking", "--repeats", "0"], "--repeats"),
        (["ranking", "--repeats", "100"], "--repeats"),
        (["io", "--confirm", "2"], "No such option: --confirm"),
        (["ranking", "--confirm", "-1"], "--confirm"),
        (["ranking", "--confirm", "10"], "--confirm"),
    ],
)
def test_ranking_options_are_checked_before_any_run(runner: CliRunner, tmp_path: Path, args, message):
    res = runner.invoke(app, ["validate", args[0], "--quick", "--out", str(tmp_path / "v"), *args[1:]])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not (tmp_path / "v").exists()


def test_a_neighbour_is_another_design_not_the_pick_renamed() -> None:
    """A move that leaves the design as it was (no filters on a design without filters, a block
    already at the floor) is no neighbour: measured beside the pick it would only rank the noise."""
    from dataclasses import replace

    from cost_models.design import Design
    from measure.ranking import neighbours

    d = Design(T=10, K=1, Z=1, buffer_bytes=1 << 20, bloom_bits=0.0, block_bytes=256, name="cosine")
    moved = neighbours(d)
    names = [n for n, _ in moved]
    assert "no filters" not in names and "block /4" not in names
    assert all(replace(x, name=d.name) != d for _, x in moved)


def test_the_pick_is_scored_on_the_store_its_run_grows_to() -> None:
    """With ``grown_keys`` every design is scored at the worse of the loaded and the grown store:
    the pick is the best of that score, and it keeps its levels as the run's inserts grow the
    store. Regression: YCSB E's pick at 50,000 records was a size ratio whose one level held
    exactly 50,000 keys, and the run's inserts added a level (docs/journal/s22-s30.md §25)."""
    from dataclasses import replace

    from cost_models import cpu_count
    from cost_models.cpu import LOCAL_DEVICE, usable_cores
    from cost_models.design import DesignBatch
    from cost_models.evaluate import evaluate_designs, workload_partitions
    from measure.grid import KEY, MEMORY_SHARE, VALUE, shipped_spec
    from measure.local import best_design

    spec = shipped_spec("ycsb_e")
    records, grown = 50_000, 55_000
    memory = MEMORY_SHARE * records * (KEY + VALUE)

    def worst(designs: list) -> list[float]:
        out = []
        for n in (records, grown):
            wl = replace(spec.workload, entries=n)
            ne = evaluate_designs(DesignBatch.of(designs), wl, n, memory, workload_partitions(wl))
            out.append(ne.throughput(wl, LOCAL_DEVICE.iops, 2, cores=usable_cores(2, cpu_count()), device=LOCAL_DEVICE))
        return [float(min(a, b)) for a, b in zip(*out, strict=True)]

    def levels(d, n: int) -> int:
        wl = replace(spec.workload, entries=n)
        return int(evaluate_designs(DesignBatch.of([d]), wl, n, memory, workload_partitions(wl)).layout.L[0])

    plain, _ = best_design(spec, records, memory, 2)
    pick, entry = best_design(spec, records, memory, 2, grown_keys=grown)
    assert levels(pick, records) == levels(pick, grown)
    a, b = worst([plain, pick])
    assert b >= a
    assert entry.predicted_throughput_ops == pytest.approx(b, rel=1e-9)


@pytest.mark.parametrize("workload", ["ycsb_d", "ycsb_e", "ycsb_a"])
def test_an_insert_workloads_designs_start_at_one_store_size(workload: str) -> None:
    """Each design's own merge cycles (and the search for its deep merges) grew YCSB D's stores
    to 74,000-153,000 keys by design (docs/journal/s22-s30.md §28): an insert workload's designs warm up
    by the same inserts, unaligned, and start at one store size; an update workload, and one
    that scans (YCSB E: a million scans of the hash log take too long), keep each design's
    aligned warm-up."""
    from cost_models.cpu import LOCAL_DEVICE
    from cost_models.engine_model import run_keys
    from measure.grid import designs, shipped_spec
    from measure.ranking import INSERT_WARMUP_SHARE, RunPlan

    records = 50_000
    plan = RunPlan(records, 5_000, 2, 2, LOCAL_DEVICE, True, 1.0)
    spec = shipped_spec(workload)
    grid = designs(records, quick=False, optima=False)
    wls = [plan.workload(spec, grid[name])[1] for name in ("rocksdb", "wiredtiger", "hybrid-base")]
    starts = {run_keys(wl)[0] for wl in wls}
    ops = spec.workload.operations
    if ops.get("insert", 0.0) > 0 and not ops.get("range", 0.0) > 0:
        assert starts == {records * (1 + INSERT_WARMUP_SHARE)}
        assert not any(wl["warmup_phase_aligned"] for wl in wls)
    else:
        aligned = [wl["warmup_phase_aligned"] for wl in wls]
        assert all(aligned) and (workload != "ycsb_a" or starts == {float(records)})
        assert len({wl["warmup_operations"] for wl in wls}) > 1, "each design's own cycle"


def test_rivals_are_the_designs_measured_above_the_pick_fastest_first():
    medians = {PICK: 10.0, "a": 12.0, "b": 9.0, "c": 15.0, "d": 10.0}
    assert rivals(medians, PICK) == ["c", "a"]
    assert rivals({PICK: 20.0, "a": 12.0}, PICK) == []


@given(st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=6, unique=True), st.integers(1, 8))
def test_confirmation_rounds_alternate_so_every_design_runs_equally_early_and_late(names, rounds):
    order = [confirmation_order(names, i) for i in range(rounds)]
    assert all(sorted(o) == sorted(names) for o in order)
    if rounds % 2 == 0:  # ABBA: every design's mean position over the rounds is the middle
        for n in names:
            assert sum(o.index(n) for o in order) / rounds == pytest.approx((len(names) - 1) / 2)


def _row(design: str, measured: float, confirmed: float | None) -> dict:
    runs = 0 if confirmed is None else 3
    return {
        "design": design,
        "measured_ops": measured,
        "confirm_measured_ops": math.nan if confirmed is None else confirmed,
        "confirm_runs": runs,
    }


def test_the_confirmed_ratio_rates_the_pick_on_the_fresh_runs():
    # the pick measured 0.90x the best, and within 2 % of it on the confirmation's runs
    rows = [_row(PICK, 90.0, 98.0), _row("a", 100.0, 100.0), _row("b", 95.0, 96.0), _row("c", 80.0, None)]
    assert confirmed_ratio(rows) == (pytest.approx(0.98), "a")
    # a pick faster than every rival on the fresh runs is the best of them
    rows = [_row(PICK, 90.0, 101.0), _row("a", 100.0, 100.0)]
    assert confirmed_ratio(rows) == (1.0, PICK)
    # no design beat the pick: nothing to confirm
    assert confirmed_ratio([_row(PICK, 100.0, None), _row("a", 90.0, None)]) == (1.0, PICK)
    # rivals never run again (confirm=0): no confirmed figure
    ratio, best = confirmed_ratio([_row(PICK, 90.0, None), _row("a", 100.0, None)])
    assert math.isnan(ratio) and best == ""


def _runs(design: str, runs: list[float]) -> dict[str, Any]:
    return {"design": design, "confirm_ops_runs": runs}


def test_the_sign_test_pairs_the_pick_with_the_best_round_by_round():
    # below the best in all three rounds: p = 1/8 (three fair coins all landing one way)
    rows = [_runs(PICK, [90.0, 91.0, 89.0]), _runs("a", [100.0, 99.0, 101.0]), _runs("b", [95.0, 80.0, 99.0])]
    assert confirmation_rounds(rows, "a") == (3, 3, pytest.approx(1 / 8))
    # two rounds of three: p = P(at least two of three below) = 4/8
    assert confirmation_rounds(rows, "b") == (2, 3, pytest.approx(4 / 8))
    rows = [_runs(PICK, [100.0, 90.0, 102.0, 99.0, 101.0]), _runs("a", [99.0, 95.0, 101.0, 100.0, 100.0])]
    assert confirmation_rounds(rows, "a") == (2, 5, pytest.approx(26 / 32))
    # the pick is the best, or nothing was confirmed: nothing to pair
    assert confirmation_rounds(rows, PICK) == (0, 0, 1.0)
    assert confirmation_rounds([_runs(PICK, []), _runs("a", [])], "a") == (0, 0, 1.0)


@given(st.lists(st.tuples(st.floats(1, 1e6), st.floats(1, 1e6)), min_size=1, max_size=9))
def test_the_sign_test_p_is_a_binomial_tail(pairs):
    rows = [_runs(PICK, [a for a, _ in pairs]), _runs("a", [b for _, b in pairs])]
    below, n, p = confirmation_rounds(rows, "a")
    assert n == len(pairs) and below == sum(a < b for a, b in pairs)
    # the tail of a fair binomial: 1 at zero rounds below, 2^-n at all of them, falling in between
    assert p == pytest.approx(sum(math.comb(n, k) for k in range(below, n + 1)) / 2**n)
    assert (p == 1.0) == (below == 0) and 2.0**-n <= p <= 1.0
