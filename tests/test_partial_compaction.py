"""Partial compaction: the model's merge blocks per put against the engine's own compaction
strategy run by its I/O-free simulator (`cosine-sim`: the engine's `TemplateStrategy` and
`apply_compaction_result` over in-memory key lists, counting data blocks read and written).

Each case loads a universe of keys with random overwrites, then measures the blocks of the next
overwrites (two runs of the same seed, subtracted): the steady state the model prices.
docs/model.md, "Partial compaction".
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cost_models.distributions import partitions
from cost_models.engine_model import distribution, engine_layout
from cost_models.io_model import merge_terms, window
from cost_models.layout import CLASS_COMPACTION, partial_levels
from render.config import to_toml
from specs.vocab import Compaction, DesignClass

UNIVERSE = 100_000
BUFFER_ENTRIES = 256
ENTRY = 116  # the hybrid preset's 16-byte keys and 100-byte values


@pytest.fixture(scope="module")
def sim(sim_binary: Path) -> Path:
    return sim_binary


def _config(sim: Path, compaction: str, K: int, T: int, files: int, picking: str = "dense_fp") -> dict[str, Any]:
    import tomllib

    out = subprocess.run([str(sim), "--preset", "hybrid", "--emit-toml"], capture_output=True, text=True, check=True)
    cfg = tomllib.loads(out.stdout)
    cfg["layout"].update(
        size_ratio=float(T),
        runs_per_hot_level=K,
        runs_per_cold_level=1,
        buffer_bytes=BUFFER_ENTRIES * ENTRY,
        block_entries=8,
    )
    cfg["algorithms"].update(
        compaction=compaction,
        file_entries=files,
        merge_threshold=1.0,
        full_compaction_levels=1,
        file_picking=picking,
        run_strategy="first",
    )
    return cfg


def _simulated(sim: Path, cfg: dict[str, Any], tmp: Path) -> float:
    """Merge blocks (read + written) per overwrite after 3 universes of overwrites, over the next 4."""
    path = tmp / "engine.toml"
    path.write_text(to_toml(cfg))

    def blocks(inserts: int) -> int:
        args = [str(sim), "--config", str(path), "--inserts", str(inserts), "--universe", str(UNIVERSE), "--json"]
        rep = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
        return int(rep["blocks_written"]) + int(rep["blocks_read"])

    a, m = 3 * UNIVERSE, 4 * UNIVERSE
    return (blocks(a + m) - blocks(a)) / m


def _modelled(cfg: dict[str, Any]) -> float:
    n = UNIVERSE * (1 - math.exp(-5.0))  # distinct keys after 5 universes of random draws
    lay = engine_layout(cfg, n)
    parts = partitions(distribution({}), distribution({}), n)
    mt = merge_terms(lay, parts, 0.0, lambda r: window(r, parts.put, n, 0.0))
    return float(mt.per_put.sum())


@pytest.mark.parametrize(
    ("compaction", "K", "T", "files"),
    [
        ("full", 1, 10, 512),  # leveling
        ("full", 2, 10, 512),  # tiering
        ("partial", 1, 10, 512),  # a B-tree: leveled, file by file, many files per level
        ("partial", 1, 32, 512),
        ("partial", 1, 10, 2048),  # level 1 is one or two files
        ("partial", 2, 10, 512),  # tiered levels file by file: one run's range per merge
    ],
)
def test_merge_blocks_match_the_engine_strategy(
    sim: Path, tmp_path: Path, compaction: str, K: int, T: int, files: int
) -> None:
    cfg = _config(sim, compaction, K, T, files)
    measured, predicted = _simulated(sim, cfg, tmp_path), _modelled(cfg)
    assert abs(predicted - measured) / measured < 0.06, (measured, predicted)


def test_partial_tiered_levels_cost_a_target_rewrite_per_run(sim: Path, tmp_path: Path) -> None:
    """The disagreement the validate grid found (BENCHMARKS §19.7): merged file by file, a tiered
    level rewrites the level below once per run, not once per level; the model prices that now."""
    full, partial = _config(sim, "full", 2, 10, 512), _config(sim, "partial", 2, 10, 512)
    m_full, m_partial = _simulated(sim, full, tmp_path), _simulated(sim, partial, tmp_path)
    p_full, p_partial = _modelled(full), _modelled(partial)
    assert m_partial > 1.5 * m_full  # the engine pays it
    assert abs(p_partial / p_full - m_partial / m_full) < 0.1 * (m_partial / m_full)


def test_picking_the_first_file_is_what_cosine_never_renders(sim: Path, tmp_path: Path) -> None:
    """choose_first drains the low end of the key space: the file it moves spans the sparse,
    recently drained range and the dense one past it, and rewrites that much of the level below
    (about 7x dense_fp's blocks here). Cosine renders dense_fp (the densest file, the model's)."""
    first = _simulated(sim, _config(sim, "partial", 1, 10, 512, "choose_first"), tmp_path)
    dense = _simulated(sim, _config(sim, "partial", 1, 10, 512, "dense_fp"), tmp_path)
    assert first > 3 * dense
    from render.config import algorithms

    assert algorithms("btree", 4)["file_picking"] == "dense_fp"


def test_the_policy_is_known_before_memory_is_split() -> None:
    """An LSM and a hybrid differ only in memory (cold levels or not), so they must merge alike:
    the merge terms are computed once for every memory size."""
    assert CLASS_COMPACTION[DesignClass.LSM][0] == CLASS_COMPACTION[DesignClass.HYBRID][0]
    np.testing.assert_array_equal(partial_levels(Compaction.HYBRID, 2, 4), [False, False, True, True])
    np.testing.assert_array_equal(partial_levels(Compaction.FULL, 2, 3), [False, False, False])
