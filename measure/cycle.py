"""A measured run and the engine's merge cycle: the warm-up that brings a tree to the steady
state the model describes, and a run long enough to cover a cycle."""

from __future__ import annotations

import math
from typing import Any

from cost_models.cpu import (
    LOCAL_DEVICE,
    DeviceModel,
)
from cost_models.engine_model import (
    deepest_merge_puts,
    run_start_buffered,
    steady_depth,
    write_share,
)
from specs.vocab import DesignClass

#: Merge cycles (:func:`merge_cycle`) a warm-up runs before it looks for a merge into the last
#: level: the workload's own writes pass through the buffer and every level above the last once.
WARMUP_CYCLES = 1.0


def merge_cycle(secs: dict[str, Any], wl: dict[str, Any]) -> float:
    """Operations of a workload.json's mix between two merges into the last level of its store
    (:func:`cost_models.engine_model.deepest_merge_puts` over the mix's write share; 0 for a
    read-only mix): the deepest merge happens about once per such cycle. Until docs/journal/s22-s30.md §25 this was the
    entries above the last level over the write share, as if every put were a new key: under
    YCSB A's zipfian puts that is 1.7-4.7x short, and a run of it measured 0-2 deep merges."""
    writes = write_share({k: float(v) for k, v in wl["mix"].items()})
    if not writes > 0:
        return 0.0
    return deepest_merge_puts(secs, wl) / writes


def steady_warmup(secs: dict[str, Any], wl: dict[str, Any]) -> dict[str, Any]:
    """The workload.json fields of an unmeasured warm-up after the load: :data:`WARMUP_CYCLES`
    merge cycles (:func:`merge_cycle`) of the mix, then (a tree's levels) cosine-bench's
    ``warmup_phase_aligned``: on until two merges into the last level, whose spacing is the
    engine's own cycle, and into the next cycle as far as the measured run's length allows from
    a deep merge at either end (the report's ``warmup`` says what it ran: :func:`measure.engine.as_ran`).

    The load leaves the memtable full of its last keys and every key at a random level, where the
    model's steady state has the workload's recently written (hot) keys in the buffer and the
    upper levels. A run of a few thousand operations at 5 % writes (YCSB B) barely changes that:
    on the B-tree preset (250,000 keys, 5,000 operations, 3,000 IOPS) the memtable answered 24 %
    of the gets against the model's 53 %, and the run read 2.56 blocks per operation against the
    model's 1.24, at 1,172 ops/s against 2,415 predicted; after one buffer's worth of warm-up, 51 %
    and 1.64 blocks (the levels still the load's); after one cycle of this warm-up (2.1 M
    operations), 1.13 blocks against 1.16 and 2,671 ops/s against 2,586 (docs/journal/s17-s21.md §17.4).
    A fixed count (1.5 cycles until docs/journal/s22-s30.md §26) left the phase to the load's: the hybrid preset's
    1-thread YCSB A runs at 3,000 IOPS started where a deep merge was due and took it or not by
    the background worker's timing (1,608-10,261 ops/s measured, docs/journal/s22-s30.md §25.8); and the
    engine's spacing of deep merges is not the model's cycle (the hybrid's partial merges into
    its last level come 1.75x as often at 50,000 keys, §26), so the phase is measured, not
    computed. Last, a run shorter than a buffer's fill starts with the buffer where the run's mean
    is the model's (``warmup_buffered``: :func:`cost_models.engine_model.run_start_buffered`), not
    where the last flush left it. The warm-up is not throttled (cosine-bench throttles the
    measured phase only)."""
    ops = math.ceil(WARMUP_CYCLES * merge_cycle(secs, wl))
    aligned = ops > 0 and secs["design"]["class"] != DesignClass.LSH  # a hash log has no levels
    return buffered_warmup(secs, wl, ops, aligned)


def buffered_warmup(secs: dict[str, Any], wl: dict[str, Any], ops: int, aligned: bool) -> dict[str, Any]:
    """The workload.json fields of a warm-up of ``ops`` operations (``aligned``: cosine-bench's
    ``warmup_phase_aligned``) that ends with the buffer where the run's mean is the model's
    (``warmup_buffered``, :func:`cost_models.engine_model.run_start_buffered`, when it applies),
    and starts when the tree is as deep as the workload keeps it (``warmup_depth``,
    :func:`cost_models.engine_model.steady_depth`: a tiered last level under overwrites deepens
    some flushes after the load)."""
    out: dict[str, Any] = {"warmup_operations": ops, "warmup_phase_aligned": aligned}
    target = run_start_buffered(secs, {**wl, **out}) if ops > 0 else None
    if target is not None:
        out["warmup_buffered"] = target
    depth = steady_depth(secs, wl) if ops > 0 else None
    if depth is not None:
        out["warmup_depth"] = depth
    return out


#: The longest a Fig. 4B run on the local device is stretched to cover a merge cycle, as a
#: multiple of the plan's operations (YCSB B's 5 % writes would need 56x the quick plan's).
MAX_CYCLE_STRETCH = 10


#: The longest a device-mode run is stretched to cover its merge cycle, at the model's throughput:
#: a YCSB E design at 3,000 IOPS runs ~700 scans per second, and 50,000 operations (the stretch)
#: would take 70 s per run, 45 minutes for the ranking's 13 designs x 3 runs of one workload.
MAX_DEVICE_RUN_SECONDS = 10.0


#: The shortest a measured run on the local device should last, at the model's throughput: a
#: read-only run of 50,000 operations on a 1.5 M ops/s design lasts 33 ms, where three runs of the
#: ranking's YCSB C pick spread 1.3x (docs/journal/s17-s21.md §21).
MIN_RUN_SECONDS = 0.25


def covering_ops(
    ops: int,
    secs: dict[str, Any],
    wl: dict[str, Any],
    device: DeviceModel | None,
    predicted_ops_per_s: float = 0.0,
) -> int:
    """Operations of one measured run that should take ``ops``. On the local device a run covers a
    whole merge cycle (:func:`merge_cycle`) and lasts :data:`MIN_RUN_SECONDS` at the predicted
    throughput, within ``ops`` and :data:`MAX_CYCLE_STRETCH` times it: the model amortizes merges
    and their write stalls over the cycle, and a shorter run measures whether the deepest merge
    happened to fall inside it (and the scheduler). The hybrid preset on the 25 % mix at
    1 thread: 50,000 operations (0.15 s) ran at 343-357 k ops/s with or without that merge,
    500,000 at 444-496 k (docs/journal/s17-s21.md §19); the ranking's B-tree pick on YCSB B, 50,000
    operations (20 ms): three runs spread 2.5x (docs/journal/s17-s21.md §21). In device mode (runs
    throttled to the volume's rate, long enough) the run covers the merge cycle too, within
    the same stretch and :data:`MAX_DEVICE_RUN_SECONDS` at the predicted throughput: 5,000
    operations of the ranking's YCSB A pick at 3,000 IOPS measured 8,788 / 24,256 / 31,799 /
    19,290 ops/s after 0 / 30,000 / 210,000 / 600,000 operations of warm-up, where the model's
    cycle average is 18,855 (docs/journal/s22-s30.md §22.6)."""
    cycle = math.ceil(merge_cycle(secs, wl))
    if device is not None and device != LOCAL_DEVICE:
        longest = MAX_CYCLE_STRETCH * ops
        if math.isfinite(predicted_ops_per_s) and predicted_ops_per_s > 0:
            longest = min(longest, max(ops, math.ceil(MAX_DEVICE_RUN_SECONDS * predicted_ops_per_s)))
        return int(min(max(ops, cycle), longest))
    timed = math.ceil(MIN_RUN_SECONDS * predicted_ops_per_s) if math.isfinite(predicted_ops_per_s) else 0
    return int(min(max(ops, cycle, timed), MAX_CYCLE_STRETCH * ops))
