"""Short runs: the merges a measured run performs from the state it starts in
(cost_models.transient, engine_model.transient_put) against the engine's own compaction
strategy run by its I/O-free simulator (cosine-sim) over the same puts.

The validate grid's write runs triple the data (inserts) or overwrite it 3 times from a loaded
state: a few fill cycles, where the tree grows under the run and levels are pushed down whole.
docs/model.md, "Short runs".
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cost_models.engine_model import predict
from measure.grid import designs
from render.config import to_toml

RECORDS, OPERATIONS = 50_000, 150_000
#: designs of the validate grid: leveled and tiered, full, hybrid and partial merges
NAMES = (
    "rocksdb",
    "wiredtiger",
    "hybrid-base",
    "hybrid-T=3",
    "hybrid-K=5",
    "hybrid-Z=3",
    "hybrid-buffer=0.25",
    "hybrid-compaction=full",
    "hybrid-compaction=partial",
)


def _sim(sim: Path, cfg: dict[str, Any], tmp: Path, inserts: int, universe: int) -> dict[str, Any]:
    path = tmp / "engine.toml"
    path.write_text(to_toml(cfg))
    args = [str(sim), "--config", str(path), "--inserts", str(inserts), "--json"]
    args += ["--universe", str(universe)] if universe else []
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


def _shape(rep: dict[str, Any]) -> dict[str, Any]:
    levels = [{"level": lv["level"], "entries": lv["entries"], "runs": lv["runs"]} for lv in rep["levels"]]
    return {"buffered": rep["buffered"], "levels": levels}


def _blocks(rep: dict[str, Any]) -> int:
    return int(rep["blocks_written"]) + int(rep["blocks_read"])


@pytest.fixture(scope="module")
def grid() -> dict[str, dict[str, Any]]:
    return designs(RECORDS, quick=False, optima=False)


@pytest.mark.parametrize("op", ["insert", "update"])
def test_a_short_run_pays_the_merges_the_engine_strategy_makes(
    sim_binary: Path, tmp_path: Path, grid: dict[str, dict[str, Any]], op: str
) -> None:
    accuracies = []
    for name in NAMES:
        cfg = json.loads(json.dumps(grid[name], default=str))
        # inserts: a load of fresh keys, then as many again 3 times; updates: 3 universes of
        # overwrites of a 50,000-key universe, then 3 more
        load, universe = (RECORDS, 0) if op == "insert" else (3 * RECORDS, RECORDS)
        start = _sim(sim_binary, cfg, tmp_path, load, universe)
        end = _sim(sim_binary, cfg, tmp_path, load + OPERATIONS, universe)
        measured = (_blocks(end) - _blocks(start)) / OPERATIONS
        wl = {"records": RECORDS, "mix": {op: 1.0}, "operations": OPERATIONS}
        io = predict(cfg, wl, shape=_shape(start), end_shape=_shape(end))
        wal = (cfg["layout"]["key_bytes"] + cfg["layout"]["value_bytes"]) / 4096  # the simulator has no WAL
        predicted = float(getattr(io, op)[0]) - wal
        accuracies.append(max(0.0, 1 - abs(predicted - measured) / measured))
        assert accuracies[-1] > 0.85, (name, measured, predicted)
    assert sum(accuracies) / len(accuracies) > 0.95
