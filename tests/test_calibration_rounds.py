"""A calibration spreads a cached point's repeats, and the block-size runs', over the session
(measure.calibrate.plan.calibration_runs)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from measure.calibrate.plan import BLOCK_SIZE_STEPS, CACHED, DEFAULT_PLAN, LOADED, SMALL_MEMTABLE, calibration_runs


def _key(run: tuple) -> tuple:
    kind, cls, name, spec, records, threads, factor = run
    return (kind, cls, name, spec.workload.scan_length, records, threads, factor)


def _every_round(key: tuple) -> bool:
    """Cached points, and the LSM's loaded gets at the other block sizes (the block-read curve)."""
    return key[0] in (CACHED, SMALL_MEMTABLE) or (key[0] == LOADED and key[-1] in BLOCK_SIZE_STEPS)


def test_every_run_is_planned_and_a_cached_point_repeats_once_per_round() -> None:
    plan = replace(DEFAULT_PLAN, phi_repeats=3)
    runs = [_key(r) for r in calibration_runs(plan)]
    once = [_key(r) for r in calibration_runs(replace(plan, phi_repeats=1))]
    counts = Counter(runs)
    for key, n in Counter(once).items():
        assert counts[key] == (3 * n if _every_round(key) else n), key
    assert sum(counts.values()) == len(runs)
    # between two runs of a cached point every other cached point runs once: the repeats of a
    # point are a round apart, never back to back
    cached = sorted({k for k in once if k[0] in (CACHED, SMALL_MEMTABLE)})
    for key in cached:
        at = [i for i, k in enumerate(runs) if k == key]
        for a, b in zip(at, at[1:], strict=False):
            between = Counter(k for k in runs[a + 1 : b] if k[0] in (CACHED, SMALL_MEMTABLE))
            assert set(between) == set(cached) - {key}, key
            assert set(between.values()) == {1}, key
