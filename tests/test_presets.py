"""The paper's presets are defined once, in Rust (engine-template cosine-config presets.rs,
written out as presets/*.toml by its `cosine-presets` binary and checked by a Rust test).
The Python preset table (cost_models.design.PRESETS, which the model and the solver's
baselines use) must describe the same designs: class, size ratio, runs, Bloom bits, block size.
"""

from __future__ import annotations

import tomllib

import pytest

from cost_models.design import DesignBatch, preset
from cost_models.layout import derive
from measure.engine import TEMPLATE
from specs.vocab import PRESETS

#: Block sizes agree within this factor (the engine counts entries per block, the model bytes).
BLOCK_TOLERANCE = 1.25


@pytest.mark.parametrize("name", PRESETS)
def test_python_preset_matches_the_engine_preset(name):
    eng = tomllib.loads((TEMPLATE / "presets" / f"{name}.toml").read_text())
    lay = eng["layout"]
    d = preset(name)
    model = derive(DesignBatch.of([d]), 1e6, lay["key_bytes"], lay["value_bytes"], 2**30, overwrites=False)
    assert eng["design"]["class"] == model.class_name(0), name
    if d.lsh:
        assert eng["design"]["class"] == "lsh"
        return
    assert lay["size_ratio"] == pytest.approx(d.T), name
    assert (lay["runs_per_hot_level"], lay["runs_per_cold_level"]) == (d.K, d.Z), name
    assert lay["bloom_bits_per_key"][0] == pytest.approx(d.bloom_bits), name
    engine_block = lay["block_entries"] * (lay["key_bytes"] + lay["value_bytes"])
    assert 1 / BLOCK_TOLERANCE <= engine_block / d.block_bytes <= BLOCK_TOLERANCE, (name, engine_block, d.block_bytes)
