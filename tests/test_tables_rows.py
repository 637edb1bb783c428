"""Every row of the design tables' grid evaluation is the model's evaluation of that design
(solver.tables: layouts without filters, structures shared across memory sizes and filter
settings), with the same window tables, so nothing but the sharing is under test.

Regression: the shared structures were built from the layouts without filters, whose merges are a
B-tree's (partial, a file at a time), and served every filter setting: every LSM and hybrid of the
tables was scored with a B-tree's merge cost (an LSM of T=5, K=2, Z=4 at 3M entries: 0.0376 I/Os
per put in the tables, 0.0336 in the model; docs/journal/s22-s30.md §24.5)."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.cloud import GIB
from cost_models.design import DesignBatch
from cost_models.evaluate import evaluate_designs, workload_partitions
from cost_models.io_model import window_tables
from cost_models.phi import load_phi
from solver.space import grid_for
from solver.tables import grid_eval as TG
from specs.schema import parse_spec
from specs.vocab import OPERATIONS

SPEC = """
name: rows
workload:
  entries: 3000000
  key_bytes: 16
  value_bytes: 200
  operations: {mix}
  distribution: {{get: {{kind: zipfian, theta: 0.99}}, put: {{kind: zipfian, theta: 0.99}}}}
budget: {{monthly_usd: 900}}
providers: [aws]
design: {{size_ratio: [2, 8], block_bytes: [4096, 32768], memory_step: 0.25}}
"""


@pytest.mark.parametrize(
    "mix",
    [
        "{get: 0.5, update: 0.5}",
        "{get: 0.4, update: 0.3, insert: 0.1, range: 0.1, empty_get: 0.1}",
        "{insert: 0.9, get: 0.1}",
    ],
)
@pytest.mark.parametrize("memory_gib", [1.0, 16.0])
def test_every_row_is_the_models_evaluation(mix: str, memory_gib: float) -> None:
    spec = parse_spec(SPEC.format(mix=mix))
    wl = spec.workload
    grid = grid_for(spec)
    parts = workload_partitions(wl)
    s = float(wl.entries)
    wins = [window_tables(parts, wl.operations, s)]
    mem = memory_gib * GIB * (1 - spec.design.memory_headroom)
    prep = TG.shard_prep(spec, grid, s, parts, wins, mem)
    ge = TG.evaluate_splits(spec, s, parts, TG.grid_splits(spec, grid, s, memory_gib, prep), prep, load_phi())
    assert ge is not None
    batch = DesignBatch.of([b.design(i, threads=1) for b in ge.batches for i in range(b.size)])
    # both merge policies are in the grid: B-trees (no filters) and LSMs or hybrids (filters)
    assert (batch.bloom_bits == 0).any() and (batch.bloom_bits > 0).any()
    ne = evaluate_designs(batch, wl, s, mem, parts, windows=wins[0])
    for op in OPERATIONS:
        np.testing.assert_allclose(getattr(ge.io, op), getattr(ne.io, op), rtol=1e-9, atol=1e-12, err_msg=op)
    np.testing.assert_allclose(ge.total, ne.io.total(wl.operations), rtol=1e-9)
