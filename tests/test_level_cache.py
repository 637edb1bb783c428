"""The block cache under 'latest' gets, seen per level (io_model.level_cache_alpha), against a
simulated LRU cache of blocks: keys placed by recency into the buffer and the levels the layout
gives, hashed into each level's blocks, YCSB D's zipfian-over-recency gets. Seen per key
(io_model.cache_alpha alone) the small newest levels get only the cached share of the data,
though each of their blocks is read often (up to 1.8x the simulated misses)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import cost_models.io_model as io
from cost_models.engine_model import engine_layout, workload_partitions
from measure.engine import workload_json
from measure.grid import designs, shipped_spec

N = 50_000
GETS = 200_000


def _layout(cache_blocks: int, buffer_entries: int, T: int, K: int, block_entries: int) -> dict:
    secs = designs(N, quick=True, optima=False)["rocksdb"]
    lay = dict(secs["layout"])
    entry = int(lay["key_bytes"]) + int(lay["value_bytes"])
    lay.update(
        block_entries=block_entries,
        buffer_bytes=buffer_entries * entry,
        bloom_bits_per_key=[24.0],  # false positives ~0: a get reads the block of its key's level
        block_cache_bytes=int(cache_blocks * io.block_charge(block_entries, entry)),  # the engine's charge
        size_ratio=T,
        runs_per_hot_level=K,
        runs_per_cold_level=K,
        hot_levels=8,
    )
    return {**secs, "layout": lay}


def _simulated(lay: io.Layout, cache_blocks: int, block_entries: int) -> float:
    """Misses per get of an LRU cache of ``cache_blocks`` blocks."""
    rng = np.random.default_rng(7)
    occ = [float(o) for o in lay.occ[0] if o > 0]
    starts = np.cumsum([float(lay.buffered[0]), *occ])
    level = np.searchsorted(starts, np.arange(N), side="right") - 1  # -1: in the buffer
    blocks = [max(1, int(np.ceil(o / block_entries))) for o in occ]
    block = np.array([rng.integers(blocks[lv]) if lv >= 0 else -1 for lv in level])
    p = 1.0 / np.arange(1, N + 1) ** 0.99
    ranks = rng.choice(N, size=GETS, p=p / p.sum())  # recency ranks, 0 the newest
    lru: OrderedDict[tuple[int, int], None] = OrderedDict()
    warm, misses = GETS // 5, 0
    for i, r in enumerate(ranks):
        if level[r] < 0:
            continue
        k = (int(level[r]), int(block[r]))
        if k in lru:
            lru.move_to_end(k)
            continue
        misses += i >= warm
        lru[k] = None
        if len(lru) > cache_blocks:
            lru.popitem(last=False)
    return misses / (GETS - warm)


@pytest.mark.parametrize(
    ("cache_blocks", "buffer_entries", "T", "K", "block_entries"),
    [(31, 2500, 4, 4, 282), (100, 2500, 4, 1, 282), (60, 1000, 10, 1, 282), (200, 1000, 10, 1, 35)],
)
def test_the_level_view_matches_a_simulated_lru(
    cache_blocks: int, buffer_entries: int, T: int, K: int, block_entries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    secs = _layout(cache_blocks, buffer_entries, T, K, block_entries)
    wl = workload_json(shipped_spec("ycsb_d"), N, 1000, 1)
    lay, parts = (
        engine_layout(secs, float(N), overwrites=io.overwrites_keys(wl["mix"])),
        workload_partitions(wl, float(N)),
    )
    mix = {k: float(v) for k, v in wl["mix"].items()}
    model = float(io.io_costs(lay, parts, mix, 1.0).get[0])
    sim = _simulated(lay, cache_blocks, block_entries)
    assert abs(model - sim) <= 0.08 * sim + 0.005, f"model {model:.3f} simulated {sim:.3f}"
    # per key only: the newest levels' blocks are cached at the data's cached share
    monkeypatch.setattr(io, "level_cache_alpha", lambda found, *_: np.zeros((found.shape[0], 1, found.shape[2])))
    per_key = float(io.io_costs(lay, parts, mix, 1.0).get[0])
    assert per_key - sim > 2 * abs(model - sim), f"per key {per_key:.3f} simulated {sim:.3f} model {model:.3f}"


def test_other_distributions_keep_the_per_key_cache() -> None:
    """Only 'latest' gets have a level for each partition: zipfian gets carry no ``found``."""
    secs = _layout(100, 2500, 4, 1, 282)
    wl = workload_json(shipped_spec("ycsb_b"), N, 1000, 1)
    lay, parts = (
        engine_layout(secs, float(N), overwrites=io.overwrites_keys(wl["mix"])),
        workload_partitions(wl, float(N)),
    )
    mix = {k: float(v) for k, v in wl["mix"].items()}
    st = io.structure(lay, parts, mix, 1.0, io.exact_windows(parts, mix, float(N))[0])
    assert st.found is None
