"""The block cache holds the blocks the engine charges it for, not its entries' bytes: a decoded
block costs n x (key + value + 9) + 64 bytes (engine-template cosine-run Block::charge, checked
there by `charge_is_the_cost_models`); the model's block count of a cache uses the same charge."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import cost_models.io_model as io
from cost_models.design import model_constants
from cost_models.engine_model import engine_layout
from measure.grid import designs

ROOT = Path(__file__).resolve().parent.parent
BLOCK_RS = ROOT / "engine-template" / "crates" / "cosine-run" / "src" / "block.rs"


def test_the_models_charge_is_the_engine_tests():
    """The constants the engine's own test asserts are the model's."""
    m = re.search(r"n \* \(key \+ value \+ (\d+)\) \+ (\d+)", BLOCK_RS.read_text())
    assert m, "cosine-run block.rs: charge_is_the_cost_models not found"
    k = model_constants()
    assert (int(m.group(1)), int(m.group(2))) == (k["cache_entry_overhead_bytes"], k["cache_block_overhead_bytes"])


def test_a_block_of_two_entries_takes_more_than_its_entries():
    assert float(io.block_charge(2, 116)) == 2 * 125 + 64  # 1.35x the 232 bytes of its entries
    assert np.allclose(io.block_charge(np.array([1, 70]), 116), [189, 70 * 125 + 64])


def test_a_caches_blocks_are_its_bytes_over_the_charge():
    secs = designs(50_000, quick=True, optima=False)["rocksdb"]
    lay_s = dict(secs["layout"])
    entry = int(lay_s["key_bytes"]) + int(lay_s["value_bytes"])
    charge = float(io.block_charge(int(lay_s["block_entries"]), entry))
    lay_s["block_cache_bytes"] = int(40 * charge)
    lay = engine_layout({**secs, "layout": lay_s}, 50_000.0, overwrites=False)
    assert np.allclose(io.cache_blocks(lay), 40.0)
