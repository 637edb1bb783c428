"""A tiered last level under overwrites holds fewer keys than its capacity (layout.last_level_room):
the model's depth against the engine's own strategy (`cosine-sim`), which keeps the older runs of a
last level of Z runs and merges every overwrite into its newest run."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.engine_model import engine_layout
from cost_models.layout import last_level_room
from measure.simulate import TREE_BUFFER as BUFFER
from measure.simulate import depth, sim_puts, simulate, steady_state, tree_config

#: Overwrites per key after the load: the older runs' versions all shadowed, the depth settled.
OVERWRITES_PER_KEY = 20


# (T, K, Z, share of level `level`'s capacity): tiered last levels on both sides of the room the
# rule gives, a leveled one, one of many runs
CASES = [
    (5, 1, 4, 0.4, 1),
    (5, 1, 4, 0.6, 1),
    (5, 1, 4, 1.0, 1),
    (5, 1, 4, 0.4, 2),
    (5, 1, 4, 0.6, 2),
    (10, 1, 4, 0.4, 2),
    (10, 1, 4, 0.9, 2),
    (10, 3, 3, 0.4, 1),
    (10, 3, 3, 0.6, 2),
    (4, 1, 2, 0.4, 1),
    (4, 1, 2, 0.6, 1),
    (10, 9, 9, 0.15, 1),
    (10, 9, 9, 0.25, 1),
    (10, 9, 9, 0.4, 2),
    (10, 1, 1, 1.0, 1),
    (10, 1, 1, 0.9, 2),
]


def _tree(T: int, K: int, Z: int, share: float, level: int) -> tuple[dict, int]:
    """A case's engine configuration and its key count."""
    return tree_config(T, K, Z), int(share * BUFFER * T**level)


#: YCSB's skew: cosine-sim's ``--zipf`` draws the overwrites zipfian of it (rank = insertion order)
ZIPF = 0.99

#: Cases whose level 1 runs take two flushes each: the overwrites' runs shadow part of their
#: first flush (T 20, K 9, Z 9 at 0.25 of level 1: the ranking's YCSB A "pick T x2")
SHADOW_CASES = [(20, 9, 9, 0.25, 1), (20, 9, 9, 0.35, 1), (20, 9, 9, 0.5, 1), (20, 9, 9, 0.1, 2)]


@pytest.mark.parametrize("zipf", [None, ZIPF], ids=["uniform", "zipfian"])
@pytest.mark.parametrize(("T", "K", "Z", "share", "level"), CASES + SHADOW_CASES)
def test_the_depth_under_overwrites_is_the_engines(
    sim_binary: object,
    request: pytest.FixtureRequest,
    T: int,
    K: int,
    Z: int,
    share: float,
    level: int,
    zipf: float | None,
) -> None:
    if zipf is not None and (T, K, Z, share, level) == (10, 9, 9, 0.4, 2):
        # level 2 keeps four of the load's 2,304-entry runs and four of the overwrites' ~1,475
        # (one merged level 1 each): 25,356 entries with every key in its newest run, 1 % under
        # the 25,600 that push it down; the engine's fourth load run took an extra flush (2,816)
        # and its first overwrite runs 1,481-1,713, so it passes and deepens
        reason = "a level 1 % short of its push-down: the load's last run is a flush longer"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    cfg, n = _tree(T, K, Z, share, level)
    run = simulate(cfg, n, 0, updates=OVERWRITES_PER_KEY * n, zipf=zipf)
    assert int(engine_layout(cfg, n, overwrites=True, puts=sim_puts(n, zipf)).L[0]) == depth(run.report)


@pytest.mark.parametrize("zipf", [None, ZIPF], ids=["uniform", "zipfian"])
def test_an_overwrites_run_holds_the_distinct_keys_of_its_flushes(sim_binary: object, zipf: float | None) -> None:
    """T 20, K 9, Z 9 at 0.25 of level 1: a run the overwrites make takes two 256-entry flushes
    and holds the distinct keys of their puts (uniform ~460, zipfian ~410), not 512; the load's
    runs, of new keys, hold 512 (layout.last_level_room counts both kinds)."""
    cfg, n = _tree(20, 9, 9, 0.25, 1)
    level1 = next(lv for lv in simulate(cfg, n, 0, updates=3 * n, zipf=zipf).report["levels"] if lv["level"] == 1)
    sizes = [int(e) for e in level1["run_entries"]]  # newest first; the oldest two are the load's
    assert sizes[-2:] == [512, 512]
    made = sizes[1:-2]  # neither the newest (still filling) nor the load's
    assert len(made) >= 3
    room, _, run = last_level_room(
        np.array([[BUFFER * 20.0]]),
        np.array([float(BUFFER)]),
        np.array([9.0]),
        np.array([9.0]),
        np.array([1e9]),
        np.zeros((1, 1), dtype=bool),
        float(n),
        sim_puts(n, zipf),
    )
    assert abs(float(run[0, 0]) - float(np.median(made))) / float(np.median(made)) < 0.05, (run, made)
    # whole flushes would leave 1,024 keys of room for 1,280 (a level deeper than the engine)
    assert float(room[0, 0]) >= n


@pytest.mark.parametrize(("T", "K", "Z", "share", "level"), CASES)
def test_inserts_alone_fill_a_level_to_its_capacity(
    sim_binary: object, T: int, K: int, Z: int, share: float, level: int
) -> None:
    """Without overwrites no run holds an old version: the first level whose capacity holds the keys."""
    cfg, n = _tree(T, K, Z, share, level)
    run = simulate(cfg, n, 0)
    assert int(engine_layout(cfg, n, overwrites=False).L[0]) == depth(run.report)


def test_the_capacity_alone_is_a_level_short_for_tiered_trees(sim_binary: object) -> None:
    """The rule matters: the depth from capacities alone (the model before last_level_room) is a
    level short on most tiered cases above, and never on the leveled ones."""
    short = 0
    for T, K, Z, share, level in CASES:
        cfg, n = _tree(T, K, Z, share, level)
        by_capacity = int(engine_layout(cfg, n, overwrites=False).L[0])
        by_room = int(engine_layout(cfg, n, overwrites=True).L[0])
        assert by_room in (by_capacity, by_capacity + 1)
        if Z == 1:
            assert by_room == by_capacity
        short += by_room > by_capacity
    assert short >= 7


@pytest.mark.parametrize(
    ("T", "K", "Z", "share"),
    [
        (10, 1, 4, 0.3),
        (10, 1, 4, 0.09),
        (5, 1, 4, 0.6),
        (5, 1, 4, 1.0),
        (10, 3, 3, 0.6),
        (4, 1, 2, 1.0),
        (10, 1, 1, 0.6),
        (4, 1, 1, 1.0),
    ],
)
def test_merge_blocks_of_tiered_last_levels_match_the_engine_strategy(
    sim_binary: object, T: int, K: int, Z: int, share: float
) -> None:
    """Merge blocks per overwrite in the steady state: a tiered last level's newest run holds the
    level's keys (io_model.merge_terms' ``whole_last``) and the tree is as deep as the room says;
    a leveled level merges down at cap - batch/2 distinct entries; a level above the last that
    keeps every key (T 10, K 1, Z 4 at 0.9 of level 1) takes every merge into all of them. Priced
    as before (half a run, the depth of the capacities, a level full at cap) these cases read
    0.55-0.97 of the simulated; now 0.92-1.12."""
    universe = int(share * BUFFER * T**2)
    measured, predicted = steady_state(tree_config(T, K, Z), universe, 6 * universe, 8 * universe)
    assert abs(predicted - measured) / measured < 0.15, (measured, predicted)


def test_a_level_that_keeps_every_key_holds_them_with_a_copy_below(sim_binary: object) -> None:
    """T 10, K 1, Z 4 at 0.9 of level 1: level 1 as the last level cannot keep its older runs and
    every key, so the tree deepens once; level 1, leveled above the last, then holds every key
    and never merges down (it would need a batch past its capacity), and level 2 keeps the copy
    the tree deepened with (layout.keeps_every_key)."""
    cfg = tree_config(10, 1, 4)
    n = int(0.9 * BUFFER * 10)
    levels = {
        int(lv["level"]): int(lv["entries"])
        for lv in simulate(cfg, n, 0, updates=OVERWRITES_PER_KEY * n).report["levels"]
    }
    assert levels[1] == n and levels[2] == n
    lay = engine_layout(cfg, n, overwrites=True)
    assert int(lay.L[0]) == 2 and bool(lay.holds_all[0, 0])
    assert float(lay.occ[0, 0]) == float(lay.occ[0, 1]) == n


# (T, K, Z, share of level `level`'s capacity) with a tiered last level that has received fewer
# batches than half its Z runs, or more (its runs are the batches it holds, not Z / 2)
RUN_CASES = [(16, 1, 15, share, 2) for share in (0.1, 0.3, 0.8)] + [
    (10, 1, 9, 0.5, 1),
    (10, 3, 9, 0.35, 2),
    (6, 1, 5, 0.9, 2),
]


@pytest.mark.parametrize(("T", "K", "Z", "share", "level"), RUN_CASES)
def test_a_tiered_last_level_holds_the_batches_it_received(
    sim_binary: object, T: int, K: int, Z: int, share: float, level: int
) -> None:
    """Inserts alone: the last level's runs are its entries over a run's whole batches (at least
    one, at most Z), as the engine's strategy leaves them; the model had Z / 2 whatever the level
    held (the ranking's YCSB D "pick T /2": 7.5 runs where the engine had one, docs/journal/s31-s42.md §37)."""
    cfg, n = _tree(T, K, Z, share, level)
    run = simulate(cfg, n, 0)
    lay = engine_layout(cfg, n, overwrites=False)
    last = int(lay.L[0])
    assert last == depth(run.report)
    sim_runs = next(int(lv["runs"]) for lv in run.report["levels"] if int(lv["level"]) == last)
    # the model's expected count (its occupancy is the expected one) within half a run of the
    # strategy's count at the load's end; half the Z runs was 0.5-6.5 runs off on these cases
    assert abs(float(lay.runs[0, last - 1]) - sim_runs) <= 0.5
