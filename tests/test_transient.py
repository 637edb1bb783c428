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

from cost_models.transient import Tree
from measure.grid import designs
from measure.simulate import short_run
from specs.vocab import Operation, RunStrategy

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


def _tree(**kw: object) -> Tree:
    base: dict[str, object] = dict(
        buffer_entries=100.0,
        size_ratio=10.0,
        hot_runs=2,
        cold_runs=1,
        threshold=1.0,
        partial=[True] * 4,
        file_entries=1e9,
        run_strategy=RunStrategy.FULLEST,
        block_entries=10.0,
        overwrite_share=1.0,
        n_keys=10_000.0,
    )
    base.update(kw)
    return Tree(**base)  # type: ignore[arg-type]


def test_a_loaded_store_holds_each_key_once() -> None:
    """Runs of a load (nothing shadowing) merge without losing an entry; overwrites' entries find
    their key in an older run of e entries with probability e / N."""
    t = _tree()
    assert t.union([(300.0, 0.0), (5_000.0, 0.0)]) == (5_300.0, 0.0)
    out, shadow = t.union([(300.0, 300.0), (5_000.0, 0.0)])
    assert out == pytest.approx(300 + 5_000 - 300 * 5_000 / 10_000)
    assert shadow == 300.0
    # the shadowing entries are the newest: a level observed with 150 of them holds them first
    t.start(1, [100.0, 100.0], 150.0)
    assert t.shadows(1) == [100.0, 50.0]


def test_a_flush_of_overwrites_shadows_what_it_meets() -> None:
    t = _tree()
    t.start(1, [1_000.0], 0.0)
    t.place(0, [], (100.0, 100.0), 1.0)  # into the newest run: it rewrites it
    assert t.runs(1) == [pytest.approx(1_100 - 100 * 1_000 / 10_000)]
    assert t.shadows(1) == [100.0]


def test_fullest_alternates_between_two_runs() -> None:
    """With two runs under overwrites the middle is between them: the picks alternate."""
    t = _tree()
    picks = [t.pick_run(2, [50.0, 60.0]) for _ in range(6)]
    assert sorted(set(picks)) == [0, 1] and sum(picks) == 3
    assert _tree(overwrite_share=0.0).pick_run(2, [50.0, 60.0]) == 1  # inserts: the oldest
