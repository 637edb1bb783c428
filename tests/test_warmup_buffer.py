"""A measured run shorter than a buffer's fill starts where its mean buffer is the model's steady
one (cost_models.engine_model.run_start_buffered, cosine-bench's ``warmup_buffered``): started
where the last flush left it, YCSB D's gets of the latest inserts found a near-empty buffer
(docs/journal/s22-s30.md §28)."""

from __future__ import annotations

from cost_models.engine_model import engine_layout, run_keys, run_start_buffered
from measure.cycle import steady_warmup
from measure.engine import TEMPLATE, build, run_scratch, workload_json
from measure.grid import designs, shipped_spec
from render.config import to_toml

RECORDS = 20_000


def _ycsb_d(operations: int) -> dict:
    return workload_json(shipped_spec("ycsb_d"), RECORDS, operations, 1)


def test_the_target_centres_the_run_on_the_steady_buffer() -> None:
    secs = designs(RECORDS, quick=True, optima=False)["rocksdb"]
    wl = _ycsb_d(2_000)  # 100 inserts: a small share of the buffer's fill
    target = run_start_buffered(secs, wl)
    assert target is not None
    n0, inserted = run_keys(wl)
    lay = engine_layout(secs, n0 + inserted / 2, overwrites=False)  # YCSB D inserts
    # YCSB D's puts are inserts: the run adds one entry per put
    assert abs(target + inserted / 2 - float(lay.buffered[0])) <= 1


def test_no_target_for_a_run_that_cycles_the_buffer_or_does_not_write() -> None:
    secs = designs(RECORDS, quick=True, optima=False)["rocksdb"]
    n0, _ = run_keys(_ycsb_d(1))
    lay = engine_layout(secs, n0, overwrites=False)
    fills = int(float(lay.E_B[0]) / 0.05) * 3  # three buffers' inserts at YCSB D's 5 %
    assert run_start_buffered(secs, _ycsb_d(fills)) is None
    assert run_start_buffered(secs, workload_json(shipped_spec("ycsb_c"), RECORDS, 1_000, 1)) is None


def test_the_engine_starts_the_run_at_the_target() -> None:
    """The real engine: the warm-up ends with the buffer at the target, and the run's mean buffer
    (start and end, a run of inserts) is the model's steady one."""
    build(TEMPLATE)
    secs = designs(RECORDS, quick=True, optima=False)["rocksdb"]
    secs = {**secs, "algorithms": {**secs["algorithms"], "threads": 1}}
    wl = _ycsb_d(4_000)
    wl = {**wl, **steady_warmup(secs, wl)}
    target = wl["warmup_buffered"]
    rep = run_scratch(to_toml(secs), wl, "warmup-buffer")
    start, end = rep["warmup"]["buffered"], rep["stats"]["buffered"]
    assert start == rep["load"]["shape"]["buffered"]
    n0, inserted = run_keys({**wl, "warmup_operations": rep["warmup"]["operations"]})
    lay = engine_layout(secs, n0 + inserted / 2, overwrites=False)  # YCSB D inserts
    # the last step overshoots by a few of its puts (a 16th of the buffer at most, and chance)
    slack = float(lay.E_B[0]) / 8
    assert target <= start <= target + slack
    assert abs((start + end) / 2 - float(lay.buffered[0])) <= slack
