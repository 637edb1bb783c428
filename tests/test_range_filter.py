"""Range filters (issue 17 §2): the Rosetta FPR model (cost_models/range_filter.py) against
the engine's measured false-positive rate, and the empty-range I/O it predicts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cost_models import range_filter as rf
from cost_models.engine_model import predict
from measure.engine import run_scratch
from measure.grid import small_lsm, small_workload
from render.config import to_toml

WIDTH = 64
RECORDS, OPS = 20_000, 4_000


def test_fpr_recursion_and_allocation():
    # one height, width 1: a plain Bloom filter
    assert rf.fpr([10.0], 1) == pytest.approx(math.exp(-10 * math.log(2) ** 2))
    # no filter passes everything; more bits never hurt; the allocation spends the budget
    assert rf.fpr([], WIDTH) == 1.0
    rates = [rf.design_fpr(b, WIDTH) for b in rf.BITS_LADDER]
    assert rates[0] == 1.0 and all(a > b for a, b in zip(rates, rates[1:], strict=False))
    for b in rf.BITS_LADDER[1:]:
        assert sum(rf.allocate(b, WIDTH)) == pytest.approx(b)
        assert len(rf.allocate(b, WIDTH)) == rf.heights_for(WIDTH)
    # a filter at height 0 only probes every point of the range: 1 - (1 - f0)^W exactly
    f0 = math.exp(-16 * math.log(2) ** 2)
    assert rf.fpr([16.0] + [0.0] * 6, WIDTH) == pytest.approx(1 - (1 - f0) ** WIDTH)
    # doubting: an upper filter only ever lowers the rate
    assert rf.fpr([16.0, 0, 0, 0, 0, 0, 4.0], WIDTH) < rf.fpr([16.0] + [0.0] * 6, WIDTH)


def _config(bits: list[float]) -> str:
    return to_toml(small_lsm("range-filter-test", "empty_range", range_bits_per_height=bits))


def _workload() -> dict:
    return small_workload("empty_range", RECORDS, OPS, empty_range_width=WIDTH)


@pytest.mark.parametrize("bits", [8.0, 12.0, 16.0])
def test_model_fpr_matches_the_engine(engine_binary: Path, bits: float):
    """The engine's filters answer empty ranges at the rate the model derives (binomial
    tolerance: 4 standard errors of the measured rate, plus 15% of the model's for the
    Bloom filters' integer hash counts), and the empty-range blocks it predicts follow."""
    alloc = list(rf.allocate(bits, WIDTH))
    text = _config(alloc)
    rep = run_scratch(text, _workload(), f"rf-{bits:g}")
    c = rep["range_filter"]
    assert c["queries"] >= OPS, c  # every empty range asks at least one hot file's filter
    measured = c["positives"] / c["queries"]
    model = rf.fpr(alloc, WIDTH)
    se = math.sqrt(max(model * (1 - model), 1e-12) / c["queries"])
    assert abs(measured - model) <= 4 * se + 0.15 * model, (bits, measured, model, c)
    per = rep["per_op"]["empty_range"]
    assert per["found"] == 0  # the ranges really were empty
    import tomllib

    io = predict(tomllib.loads(text), _workload(), shape=rep["load"].get("shape"), end_shape=rep.get("stats"))
    blocks = per["blocks_read"] / per["count"]
    want = float(np.asarray(io.empty_range)[0])
    assert blocks == pytest.approx(want, rel=0.35, abs=0.02), (bits, blocks, want)


def test_without_a_filter_every_run_is_read(engine_binary: Path):
    rep = run_scratch(_config([]), _workload(), "rf-none")
    assert rep["range_filter"]["queries"] == 0
    per = rep["per_op"]["empty_range"]
    assert per["blocks_read"] / per["count"] >= 1.0  # at least one seek per run


def _tables_with_range_ladder(monkeypatch: pytest.MonkeyPatch, mix: str):
    """The design tables of the tiny spec with ``mix``, the range-filter ladder offered
    whatever the mix (the search normally offers it only when there are empty ranges)."""
    from dataclasses import replace

    import solver.tables.build as tables
    from cost_models.pricing.catalog import load_catalog
    from solver.space import grid_for
    from specs.schema import parse_spec
    from tests.conftest import TINY_SPEC

    monkeypatch.setattr(tables, "grid_for", lambda s: replace(grid_for(s), range_bits=rf.BITS_LADDER))
    # 2e9 entries (232 GB): more than most nodes' block caches hold, which would answer an
    # empty range's seeks without a filter (io_model.combine: an empty range's blocks are cached
    # with the cache's coverage)
    text = TINY_SPEC.replace("entries: 2000000", "entries: 2000000000")
    spec = parse_spec(text.replace("operations: {get: 0.5, update: 0.5}", mix))
    t = tables.build_tables(spec, load_catalog(spec.pricing), ("aws",), workers=1)
    return spec, [c for cs in t.contexts.values() for c in cs]


def _io_at_hot_levels(spec, ctx, range_bits: float, hot: int) -> float:
    """A context's design with ``range_bits`` of range filter, its ``hot`` upper levels held in
    memory: the workload's I/O per operation."""
    from dataclasses import replace

    from cost_models.cloud import GIB
    from cost_models.design import DesignBatch
    from cost_models.evaluate import node_io, workload_partitions
    from cost_models.io_model import overwrites_keys
    from cost_models.layout import level_shape, split_memory
    from specs.vocab import CostModel

    wl = spec.workload
    batch = DesignBatch.of([replace(ctx.design, range_bits=range_bits)])
    shape = level_shape(batch, ctx.entries, wl.key_bytes, wl.value_bytes, overwrites=overwrites_keys(wl.operations))
    mem = ctx.vm.memory_gib * GIB * (1 - spec.design.memory_headroom)
    lay = split_memory(shape, batch, mem, hot_levels=np.array([float(hot)]))
    io = node_io(CostModel.DISTRIBUTION_AWARE, lay, workload_partitions(wl), wl)
    return float(io.total(wl.operations)[0])


def test_the_search_gives_range_filters_memory_only_for_empty_ranges(monkeypatch: pytest.MonkeyPatch):
    """Without empty ranges a range filter only takes memory: a best design that keeps one
    bought by it a colder split (the filter's memory pushed a level's filters and fences out to
    the cache, which the design space reaches no other way), never the filter itself — the same
    design without it at the same hot levels does as well. With empty ranges most best designs
    buy one."""
    spec, plain = _tables_with_range_ladder(monkeypatch, "operations: {get: 0.5, update: 0.5}")
    assert plain
    kept = [c for c in plain if c.design.range_bits > 0]
    assert len(kept) < 0.1 * len(plain), [c.design for c in kept]
    for c in kept:
        hot = c.levels - c.cold_levels
        with_rf = _io_at_hot_levels(spec, c, c.design.range_bits, hot)
        assert _io_at_hot_levels(spec, c, 0.0, hot) <= with_rf * (1 + 1e-12), c.design
    _, empty = _tables_with_range_ladder(monkeypatch, "operations: {empty_range: 0.6, range: 0.3, insert: 0.1}")
    assert empty and sum(c.design.range_bits > 0 for c in empty) > 0.5 * len(empty), empty
