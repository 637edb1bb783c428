"""Short runs: the merges a measured run performs from the state it starts in
(cost_models.transient, engine_model.transient_put) against the engine's own compaction
strategy run by its I/O-free simulator (measure.simulate) over the same puts.

The validate grid's write runs triple the data (inserts) or overwrite it from a loaded state:
a few fill cycles, where the tree grows under the run and levels are pushed down whole.
docs/model.md, "Short runs".
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from cost_models.transient import RunMerges, Tree
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


def test_merges_into_the_deepest_level_are_counted_as_the_engine_counts_them() -> None:
    """The replay lists each rewriting merge whose target is at least the tree's depth (the engine's
    ``deep_merges``): a flush is none, a merge between upper levels none, one into the last level
    one, with its blocks."""
    t = _tree(partial=[False] * 4, overwrite_share=0.0)
    t.start(1, [400.0], 0.0)
    t.start(2, [5_000.0], 0.0)
    t.place(0, [], (100.0, 0.0), 1.0)  # a flush, into level 1's newest run
    assert t.runs(1) == [500.0] and t.deep == []
    t.place(1, [(0, 500.0)], (500.0, 0.0), 1.0)  # level 1 into the last level, 2
    assert t.runs(1) == [] and t.runs(2) == [5_500.0]
    assert t.deep == [pytest.approx((500 + 5_000 + 5_500) / 10)]
    t.start(3, [50_000.0], 0.0)
    t.start(2, [1_000.0, 4_000.0], 0.0)
    t.start(1, [700.0], 0.0)
    t.place(1, [(0, 700.0)], (700.0, 0.0), 1.0)  # level 1 into 2's newest run, above the last: not deep
    assert t.runs(2) == [1_700.0, 4_000.0] and len(t.deep) == 1


def test_a_replay_is_priced_with_the_deep_merges_the_run_made() -> None:
    from cost_models.transient import with_deep_merges

    deep = [40.0, 60.0]
    assert with_deep_merges(500.0, deep, 2, 99.0) == 500.0
    assert with_deep_merges(500.0, deep, 1, 99.0) == 440.0  # the replay's last one did not happen
    assert with_deep_merges(500.0, deep, 0, 99.0) == 400.0
    assert with_deep_merges(500.0, deep, 3, 99.0) == 550.0  # one more, at the replay's mean
    assert with_deep_merges(500.0, [], 1, 99.0) == 599.0  # none replayed: the steady model's


def test_a_missing_deep_merge_is_sized_by_the_engine_s_spacing() -> None:
    """A deep merge the replay did not make is priced at the steady model's amortized cost per put
    times the puts between two of the engine's deep merges (its warm-up's search), so a spacing a
    third of the model's cycle prices a merge a third of the model's size; without a spacing, the
    model's per-merge size."""
    from cost_models.engine_model import deep_merge_blocks, engine_layout, steady_merges, workload_partitions
    from measure.engine import run_merges, workload_json
    from measure.grid import shipped_spec

    secs = designs(RECORDS, quick=False, optima=False)["hybrid-base"]
    wl = workload_json(shipped_spec("ycsb_a"), RECORDS, OPERATIONS, 1)
    mix = {k: float(v) for k, v in wl["mix"].items()}
    lay = engine_layout(secs, float(RECORDS), overwrites=True)  # YCSB A
    parts = workload_partitions(wl, float(RECORDS))
    mt = steady_merges(lay, parts, mix)
    last = int(lay.L[0]) - 1
    per_merge, cycle = float(mt.per_merge[0, last]), float(mt.puts_per_merge[0, last])
    assert per_merge > 0 and cycle > 0
    share = (mix["update"] + mix.get("insert", 0.0)) / sum(mix.values())
    assert deep_merge_blocks(lay, parts, mix, None) == per_merge
    assert deep_merge_blocks(lay, parts, mix, cycle / share) == pytest.approx(per_merge)
    assert deep_merge_blocks(lay, parts, mix, cycle / share / 3) == pytest.approx(per_merge / 3)

    rep = {"run": {"deep_merges": 1, "flushes": 2}, "warmup": {"operations": 9, "deep_merges_at": [1_000, 4_500]}}
    assert run_merges(rep) == RunMerges(1, 3_500.0, 2)
    assert run_merges({"run": {"deep_merges": 0}, "warmup": {"deep_merges_at": None}}) == RunMerges(0, None, None)
    assert run_merges({"run": {}}) is None


def test_a_replay_makes_the_flushes_the_run_completed() -> None:
    """Given the run's flush count, the replay makes that many flushes from the start state (a run
    of fewer puts than a buffer's fill makes none, one that ends just after a flush one), each
    with its merge into level 1; without it, the flushes its puts fill at the model's rate."""
    from cost_models.engine_model import engine_layout, transient_put, workload_partitions
    from measure.engine import workload_json
    from measure.grid import shipped_spec

    secs = designs(RECORDS, quick=False, optima=False)["rocksdb"]
    wl = workload_json(shipped_spec("ycsb_a"), RECORDS, OPERATIONS, 1)
    mix = {k: float(v) for k, v in wl["mix"].items()}
    lay = engine_layout(secs, float(RECORDS), overwrites=True)  # YCSB A
    parts = workload_partitions(wl, float(RECORDS))
    e_b = float(lay.E_B[0])
    shape = {
        "buffered": 0,
        "levels": [{"level": 1, "runs": 1, "entries": 3 * e_b}, {"level": 2, "runs": 1, "entries": RECORDS - 3 * e_b}],
    }
    fallback = np.array([0.0])
    puts = 0.9 * e_b

    def cost(flushes: int | None) -> float:
        return float(transient_put(secs, lay, parts, mix, shape, puts, fallback, merges=RunMerges(0, None, flushes))[0])

    none, one = cost(0), cost(1)
    assert one > none, "a flush merges into level 1"
    # level 1's run (3 buffers) is read and rewritten with the buffer (4): 7 buffers' blocks
    assert (one - none) * puts == pytest.approx(7 * e_b / float(lay.B[0]), rel=0.05)
    assert cost(None) == none  # 0.9 of a buffer's puts from an empty buffer: no flush in the model either
