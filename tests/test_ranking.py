"""`cosine validate --ranking`: Spearman's rho, the median of interleaved repeats, and its options."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli import app
from measure.ranking import ranking, spearman, summary


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


def test_ranking_repeats_report_the_median_run(engine_binary):
    rows = ranking(3000, 400, workloads=("ycsb_c",), repeats=3)
    assert len(rows) >= 8, "presets, the pick, its neighbours and the hybrids"
    assert {r["design"] for r in rows} >= {"cosine pick", "rocksdb", "wiredtiger", "faster"}
    for r in rows:
        assert r["runs"] == 3
        assert r["measured_ops"] > 0 and r["predicted_ops"] > 0
        assert r["measured_free_ops"] >= r["measured_ops"] * 0.5, "free throughput: the same run without waits"
        assert 1.0 <= r["measured_spread"] < math.inf
        assert r["runs_dropped_shared_core"] >= 0 and 0 <= r["runs_on_shared_core"] <= r["runs"]
        assert 0 <= r["runs_short_of_depth"] <= r["runs"]
    (s,) = summary(rows)
    assert s["workload"] == "ycsb_c" and 0 < s["pick_vs_best"] <= 1.0
    assert -1.0 <= s["spearman_rho"] <= 1.0 and -1.0 <= s["spearman_rho_free"] <= 1.0
    assert 0 < s["pick_vs_best_free"] <= 1.0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--repeats", "2"], "--repeats applies only with --ranking"),
        (["--ranking", "--repeats", "0"], "--repeats"),
        (["--ranking", "--repeats", "100"], "--repeats"),
    ],
)
def test_ranking_options_are_checked_before_any_run(runner: CliRunner, tmp_path: Path, args, message):
    res = runner.invoke(app, ["validate", "--quick", "--out", str(tmp_path / "v"), *args])
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
    exactly 50,000 keys, and the run's inserts added a level (BENCHMARKS.md §25)."""
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
    assert entry["predicted_throughput_ops"] == pytest.approx(b, rel=1e-9)


@pytest.mark.parametrize("workload", ["ycsb_d", "ycsb_e", "ycsb_a"])
def test_an_insert_workloads_designs_start_at_one_store_size(workload: str) -> None:
    """Each design's own merge cycles (and the search for its deep merges) grew YCSB D's stores
    to 74,000-153,000 keys by design (BENCHMARKS.md §28): an insert workload's designs warm up
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
