"""The model's merge I/O against the engine's own compaction strategy, run without I/O.

`cosine-sim` (engine-template `cosine-compaction`) executes the engine's `TemplateStrategy` and
`apply_compaction_result` over in-memory key lists and counts the data blocks every merge reads
and writes, as the engine's worker would: thousands of fill cycles in seconds, where an engine
run measures a few. Used by tests/test_partial_compaction.py, tests/test_transient.py and
`python -m bench.merge_model`.
"""

from __future__ import annotations

import functools
import json
import math
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cost_models.distributions import marginal, partitions
from cost_models.engine_model import distribution, engine_layout, predict
from cost_models.io_model import merge_terms
from cost_models.layout import PutStream, uniform_puts
from cost_models.windows import ExactWindow
from measure.engine import TEMPLATE, build
from render.config import to_toml
from specs.schema import Distribution
from specs.vocab import Compaction, DistributionKind, FilePicking, Operation, RunStrategy

#: Entries of the preset the studies start from (16-byte keys, 100-byte values).
ENTRY_BYTES = 116


@functools.cache
def simulator() -> Path:
    """cosine-sim, built (release) if stale: once per process."""
    return build(TEMPLATE, "cosine-sim")


def preset(name: str = "hybrid") -> dict[str, Any]:
    """An engine preset's engine.toml sections (cosine-sim --emit-toml)."""
    args = [str(simulator()), "--preset", name, "--emit-toml"]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return tomllib.loads(out.stdout)


def study_config(
    compaction: Compaction, K: int, T: int, files: int, picking: FilePicking = FilePicking.DENSE_FP
) -> dict[str, Any]:
    """A small tree (256-entry buffer, 8-entry blocks) with the given merge policy: K runs above
    the last level, one at the last, merges at full capacity, partial merges from the oldest run."""
    cfg = preset()
    cfg["layout"].update(
        size_ratio=float(T),
        runs_per_hot_level=K,
        runs_per_cold_level=1,
        buffer_bytes=256 * ENTRY_BYTES,
        block_entries=8,
    )
    cfg["algorithms"].update(
        compaction=compaction,
        file_entries=files,
        merge_threshold=1.0,
        full_compaction_levels=1,
        file_picking=picking,
        run_strategy=RunStrategy.FIRST,
    )
    return cfg


#: Buffer (entries) of :func:`tree_config`'s trees.
TREE_BUFFER = 256


def tree_config(T: int, K: int, Z: int) -> dict[str, Any]:
    """A small tree of full merges (:data:`TREE_BUFFER`-entry buffer, 8-entry blocks, one file per
    run): K runs above the last level, Z at the last, merges at full capacity."""
    cfg = preset()
    cfg["layout"].update(
        size_ratio=float(T),
        runs_per_hot_level=K,
        runs_per_cold_level=Z,
        buffer_bytes=TREE_BUFFER * ENTRY_BYTES,
        block_entries=8,
    )
    cfg["algorithms"].update(
        compaction=Compaction.FULL,
        file_entries=1 << 20,
        merge_threshold=1.0,
        full_compaction_levels=1,
        run_strategy=RunStrategy.FIRST,
    )
    return cfg


def depth(report: dict[str, Any]) -> int:
    """The deepest level holding entries in a cosine-sim report (0: all in the buffer)."""
    return max((int(lv["level"]) for lv in report["levels"] if int(lv["entries"]) > 0), default=0)


@dataclass
class SimRun:
    """One cosine-sim run: puts of keys drawn from ``universe`` keys (0: every key new), then
    overwrites of keys drawn from those put (``--updates``)."""

    report: dict[str, Any]

    @property
    def blocks(self) -> int:
        return int(self.report["blocks_written"]) + int(self.report["blocks_read"])

    @property
    def shape(self) -> dict[str, Any]:
        """The state as cosine-bench reports it (``load.shape``): buffer and levels."""
        levels = [{"level": lv["level"], "entries": lv["entries"], "runs": lv["runs"]} for lv in self.report["levels"]]
        return {"buffered": self.report["buffered"], "levels": levels}


def simulate(
    cfg: dict[str, Any], puts: int, universe: int = 0, seed: int = 42, updates: int = 0, zipf: float | None = None
) -> SimRun:
    """Run the engine's strategy over ``puts`` puts and then ``updates`` overwrites of the keys put,
    uniform or zipfian of skew ``zipf`` by insertion order (the same seed replays the same keys)."""
    with tempfile.TemporaryDirectory(prefix="cosine-sim-") as tmp:
        path = Path(tmp) / "engine.toml"
        path.write_text(to_toml(cfg))
        args = [str(simulator()), "--config", str(path), "--inserts", str(puts), "--json", "--seed", str(seed)]
        args += ["--universe", str(universe)] if universe else []
        args += ["--updates", str(updates)] if updates else []
        args += ["--zipf", repr(zipf)] if zipf is not None else []
        res = subprocess.run(args, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"cosine-sim: {res.stderr.strip() or res.returncode}")
    return SimRun(json.loads(res.stdout))


def sim_puts(n_keys: int, zipf: float | None = None) -> PutStream:
    """The model's put stream (cost_models.layout.PutStream) of :func:`simulate`'s overwrites of
    ``n_keys`` loaded keys: uniform, or zipfian of skew ``zipf`` (rank = insertion order)."""
    if zipf is None:
        return uniform_puts(n_keys)
    return ExactWindow(marginal(Distribution(kind=DistributionKind.ZIPFIAN, theta=zipf), n_keys), n_keys, 0.0)


def steady_state(cfg: dict[str, Any], universe: int, before: int, measured: int) -> tuple[float, float]:
    """(simulated, modelled) merge blocks per overwrite: ``before`` random overwrites of a
    ``universe``-key space, then the blocks of the next ``measured`` ones, against the model's
    steady state at the distinct keys present half-way (merge_terms, no WAL)."""
    start, end = simulate(cfg, before, universe), simulate(cfg, before + measured, universe)
    n = universe * (1 - math.exp(-(before + measured / 2) / universe))
    lay = engine_layout(cfg, n, overwrites=True)  # the run overwrites its universe's keys
    parts = partitions(distribution({}), distribution({}), n)
    mt = merge_terms(lay, parts, 0.0, ExactWindow(parts.put, n, 0.0))
    return (end.blocks - start.blocks) / measured, float(mt.per_put.sum())


def short_run(cfg: dict[str, Any], op: Operation, records: int, operations: int) -> tuple[float, float]:
    """(simulated, modelled) merge blocks per put of a measured run as `cosine validate` makes
    one: ``records`` loaded (inserts), then ``operations`` inserts or uniform overwrites of the
    loaded keys; modelled from the state the run starts in (engine_model.predict with the
    observed shapes, less its WAL pages)."""
    start = simulate(cfg, records)
    if op == Operation.INSERT:
        end = simulate(cfg, records + operations)
    else:
        end = simulate(cfg, records, updates=operations)
    wl = {"records": records, "mix": {str(op): 1.0}, "operations": operations}
    io = predict(cfg, wl, shape=start.shape, end_shape=end.shape)
    wal = (cfg["layout"]["key_bytes"] + cfg["layout"]["value_bytes"]) / 4096  # cosine-sim has no WAL
    return (end.blocks - start.blocks) / operations, float(getattr(io, str(op))[0]) - wal
