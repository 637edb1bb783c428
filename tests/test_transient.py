"""Short runs: the merges a measured run performs from the state it starts in
(cost_models.transient, engine_model.transient_put) against the engine's own compaction
strategy run by its I/O-free simulator (measure.simulate) over the same puts.

The validate grid's write runs triple the data (inserts) or overwrite it from a loaded state:
a few fill cycles, where the tree grows under the run and levels are pushed down whole.
docs/model.md, "Short runs".
"""

from __future__ import annotations

import copy

import pytest

from measure.grid import designs
from measure.simulate import short_run
from specs.vocab import Operation

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


@pytest.mark.parametrize("op", [Operation.INSERT, Operation.UPDATE])
def test_a_short_run_pays_the_merges_the_engine_strategy_makes(sim_binary: object, op: Operation) -> None:
    grid = designs(RECORDS, quick=False, optima=False)
    accuracies = []
    for name in NAMES:
        measured, predicted = short_run(copy.deepcopy(grid[name]), op, RECORDS, OPERATIONS)
        accuracies.append(max(0.0, 1 - abs(predicted - measured) / measured))
        assert accuracies[-1] > 0.85, (name, measured, predicted)
    assert sum(accuracies) / len(accuracies) > 0.95
