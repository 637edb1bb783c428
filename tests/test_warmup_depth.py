"""A tiered last level under overwrites deepens the tree some flushes after the load
(cost_models.layout.last_level_room), so the warm-up first overwrites keys until the tree is as
deep as the model's steady state (cost_models.engine_model.steady_depth, cosine-bench's
``warmup_depth``): the ranking's YCSB B pick (T 6, Z 5) otherwise started its run just after
the deepening, level 1 empty, and read 0.49 blocks per operation against the steady state's
0.30 (docs/journal/s31-s42.md §37)."""

from __future__ import annotations

import pytest

from cost_models.engine_model import engine_layout, steady_depth
from measure.cycle import buffered_warmup
from measure.grid import designs

RECORDS = 50_000


def _tiered(T: float, Z: int) -> dict:
    """The rocksdb preset's engine.toml at ``RECORDS`` with a tiered last level and a buffer of a
    fifth of the keys (the ranking's YCSB B pick: level 1 holds 6 buffers, all the keys)."""
    secs = designs(RECORDS, quick=True, optima=False)["rocksdb"]
    lay = secs["layout"]
    buffer = RECORDS // 5 * (lay["key_bytes"] + lay["value_bytes"])
    lay = {**lay, "size_ratio": T, "runs_per_hot_level": 1, "runs_per_cold_level": Z, "buffer_bytes": buffer}
    return {**secs, "layout": lay}


def _wl(mix: dict[str, float]) -> dict:
    return {
        "records": RECORDS,
        "operations": 10_000,
        "key_bytes": 16,
        "value_bytes": 100,
        "mix": mix,
        "threads": 1,
        "distribution": {"get": {"kind": "zipfian", "theta": 0.99}, "put": {"kind": "zipfian", "theta": 0.99}},
    }


def test_the_steady_depth_is_the_models_levels_under_overwrites() -> None:
    secs = _tiered(6.0, 5)
    wl = _wl({"get": 0.95, "update": 0.05})
    lay = engine_layout(secs, float(RECORDS), overwrites=True)
    assert steady_depth(secs, wl) == int(lay.L[0])
    # the tiered last level's older runs deepen the tree past the one level the keys fill
    assert int(lay.L[0]) > int(engine_layout(secs, float(RECORDS), overwrites=False).L[0])


@pytest.mark.parametrize(
    "mix",
    [{"get": 1.0}, {"get": 0.95, "insert": 0.05}, {"get": 0.5, "update": 0.25, "insert": 0.25}],
)
def test_no_depth_without_overwrites_or_with_inserts(mix: dict[str, float]) -> None:
    """A read-only mix cannot deepen the tree, and inserts grow it (the run's key count counts them)."""
    assert steady_depth(_tiered(6.0, 5), _wl(mix)) is None


def test_a_hash_log_has_no_depth() -> None:
    secs = designs(RECORDS, quick=True, optima=False)["faster"]
    assert steady_depth(secs, _wl({"get": 0.5, "update": 0.5})) is None


def test_the_warm_up_asks_for_the_depth() -> None:
    secs, wl = _tiered(6.0, 5), _wl({"get": 0.95, "update": 0.05})
    assert buffered_warmup(secs, wl, 1000, aligned=True)["warmup_depth"] == steady_depth(secs, wl)
    assert "warmup_depth" not in buffered_warmup(secs, wl, 0, aligned=False)


def test_the_engine_reaches_the_depth_before_the_mix() -> None:
    """On the engine: the load leaves one level; the warm-up's report says it overwrote keys until
    the tree had the model's two, and the run starts with level 1 holding every key."""
    from measure.engine import TEMPLATE, build, run_scratch
    from render.config import to_toml

    build(TEMPLATE)
    secs = _tiered(6.0, 5)
    secs = {**secs, "algorithms": {**secs["algorithms"], "threads": 1}}
    wl = _wl({"get": 0.95, "update": 0.05})
    wl.update(buffered_warmup(secs, wl, 1000, aligned=False))
    rep = run_scratch(to_toml(secs), wl, "warmup-depth")
    depth = rep["warmup"]["depth"]
    assert depth["target"] == depth["reached"] == wl["warmup_depth"] == 2, depth
    assert depth["puts"] > RECORDS, depth
    shape = rep["load"]["shape"]
    levels = {lv["level"]: lv["entries"] for lv in shape["levels"]}
    # every key was overwritten since the tree deepened: in level 1 or still in the buffer
    assert levels[1] + shape["buffered"] >= RECORDS and levels[2] > 0, shape


@pytest.mark.parametrize(
    ("warmup", "short"),
    [
        ({"operations": 10, "depth": {"target": 2, "reached": 1, "puts": 800}}, True),
        ({"operations": 10, "depth": {"target": 2, "reached": 2, "puts": 75}}, False),
        ({"operations": 10, "depth": None}, False),
        (None, False),
    ],
)
def test_a_run_short_of_its_depth_is_told(warmup: dict | None, short: bool) -> None:
    from measure.engine import short_of_depth

    assert short_of_depth({"warmup": warmup}) is short
