"""A measured run covers the design's merge cycle, on tmpfs and on an emulated volume alike
(measure.cycle.covering_ops): a shorter run samples one phase of the cycle."""

from __future__ import annotations

import math

import pytest

from cost_models.cpu import LOCAL_DEVICE, DeviceModel
from measure.cycle import MAX_CYCLE_STRETCH, MAX_DEVICE_RUN_SECONDS, covering_ops, merge_cycle
from measure.engine import workload_json
from measure.grid import designs, shipped_spec

VOLUME = DeviceModel(iops=3000.0, bytes_per_s=125 * 2**20, read_latency_s=250e-6)
RECORDS = 50_000


def _wl(mix: dict, put: str = "uniform") -> dict:
    """A workload.json of ``mix`` over RECORDS keys, puts drawn ``put`` (uniform or zipfian 0.99)."""
    wl = workload_json(shipped_spec("ycsb_a"), RECORDS, 1000, 1)
    dist = {"kind": "zipfian", "theta": 0.99} if put == "zipfian" else {"kind": "uniform"}
    return {**wl, "mix": mix, "distribution": {"get": dist, "put": dist}}


@pytest.mark.parametrize("name", ["rocksdb", "wiredtiger", "faster", "hybrid-base"])
@pytest.mark.parametrize("mix", [{"get": 0.5, "update": 0.5}, {"get": 0.95, "update": 0.05}, {"get": 1.0}])
@pytest.mark.parametrize("device", [LOCAL_DEVICE, VOLUME])
def test_a_run_covers_the_merge_cycle_within_the_stretch(name: str, mix: dict, device: DeviceModel) -> None:
    secs = designs(RECORDS, quick=True, optima=False)[name]
    ops = 5000
    cycle = math.ceil(merge_cycle(secs, _wl(mix)))
    n = covering_ops(ops, secs, _wl(mix), device, 0.0)
    assert n == min(max(ops, cycle), MAX_CYCLE_STRETCH * ops)
    if "update" not in mix:
        assert n == ops, "a read-only mix has no merge cycle"


def test_only_the_local_device_stretches_a_run_to_its_minimum_time() -> None:
    """On tmpfs a run also lasts MIN_RUN_SECONDS at the predicted rate; a throttled volume's
    run is long anyway and is not stretched by it."""
    secs = designs(RECORDS, quick=True, optima=False)["rocksdb"]
    fast = 1e7  # ops/s: 0.25 s of it is far past the stretch
    assert covering_ops(5000, secs, _wl({"get": 1.0}), LOCAL_DEVICE, fast) == MAX_CYCLE_STRETCH * 5000
    assert covering_ops(5000, secs, _wl({"get": 1.0}), VOLUME, fast) == 5000


def test_a_device_run_lasts_at_most_its_time_cap() -> None:
    """A slow design on a throttled volume covers its cycle only up to MAX_DEVICE_RUN_SECONDS
    at the predicted rate (never below the asked operations)."""
    secs = designs(RECORDS, quick=True, optima=False)["rocksdb"]
    mix = {"get": 0.5, "update": 0.5}
    cycle = math.ceil(merge_cycle(secs, _wl(mix)))
    slow = 100.0  # ops/s
    assert covering_ops(500, secs, _wl(mix), VOLUME, slow) == min(
        max(500, cycle), max(500, math.ceil(MAX_DEVICE_RUN_SECONDS * slow))
    )
    assert covering_ops(5000, secs, _wl(mix), VOLUME, 1.0) == 5000


@pytest.mark.parametrize("name", ["rocksdb", "wiredtiger", "hybrid-base"])
def test_skewed_puts_lengthen_the_cycle(name: str) -> None:
    """Zipfian puts repeat hot keys, so the buffer and the runs above the last level take more
    puts to fill with distinct keys: the cycle in operations is longer than under uniform puts,
    and longer than the entries above the last level over the write share (the cycle before docs/journal/s22-s30.md §25,
    as if every put were a new key)."""
    from cost_models.engine_model import engine_layout

    secs = designs(RECORDS, quick=True, optima=False)[name]
    mix = {"get": 0.5, "update": 0.5}
    uniform, zipf = merge_cycle(secs, _wl(mix)), merge_cycle(secs, _wl(mix, "zipfian"))
    lay = engine_layout(secs, float(RECORDS), overwrites=True)
    above = float(lay.E_B[0]) + float(lay.cap[0, : int(lay.L[0]) - 1].sum())
    assert zipf > uniform
    assert zipf > above / 0.5


@pytest.mark.parametrize("name", ["rocksdb", "hybrid-base"])
def test_the_warm_up_centres_the_run_between_deep_merges(name: str) -> None:
    """steady_warmup's run (the real engine) finds two merges into the last level after its
    cycle, and starts the measured phase where a run shorter than their spacing holds none (the
    knife edge of docs/journal/s22-s30.md §25.8: a run started where one is due takes it or not by the
    background worker's timing). as_ran gives the model the warm-up the engine ran."""
    from cost_models.engine_model import steady_depth
    from measure.cycle import steady_warmup
    from measure.engine import TEMPLATE, as_ran, build, run_scratch
    from render.config import to_toml

    build(TEMPLATE)
    secs = designs(RECORDS, quick=True, optima=False)[name]
    wl = _wl({"get": 0.5, "update": 0.5}, "zipfian")
    ops = math.ceil(merge_cycle(secs, wl))
    wl = {**wl, "operations": int(0.2 * ops)}
    fields = steady_warmup(secs, wl)
    # (a run that fills less than the buffer also starts at the buffer's mean: test_warmup_buffer.py)
    assert {k: v for k, v in fields.items() if k not in ("warmup_buffered", "warmup_depth")} == {
        "warmup_operations": ops,
        "warmup_phase_aligned": True,
    }
    assert fields["warmup_depth"] == steady_depth(secs, wl)
    wl = {**wl, **fields}
    rep = run_scratch(to_toml({**secs, "algorithms": {**secs["algorithms"], "threads": 1}}), wl, "warmup-deep")
    warm = rep["warmup"]
    first, second = warm["deep_merges_at"]
    spacing = second - first
    assert fields["warmup_operations"] < first < second
    assert warm["phase"] == (spacing - wl["operations"] % spacing) // 2
    if "warmup_buffered" in fields:
        assert warm["operations"] >= second + warm["phase"] and warm["buffered"] >= fields["warmup_buffered"]
    else:
        assert warm["operations"] == second + warm["phase"]
    if wl["operations"] < spacing / 2:
        assert rep["background"]["deep_merges"] == 0, "the run holds no merge into the last level"
    ran = as_ran(wl, rep)
    assert ran["warmup_operations"] == warm["operations"] and not ran["warmup_phase_aligned"]


def test_a_hash_log_warms_up_without_a_deep_merge_search() -> None:
    from measure.cycle import steady_warmup

    secs = designs(RECORDS, quick=True, optima=False)["faster"]
    assert not steady_warmup(secs, _wl({"get": 0.5, "update": 0.5}))["warmup_phase_aligned"]
