"""Volumes are sized for what they hold at their fullest (issue 49): every level above the last full,
the last level, and the largest merge's output written beside its inputs; a hash log at its longest.
On 18f96a3 a volume was sized at the average entries stored (an insert-only tree: 1.00x the data)."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.cloud import StorageChoice
from cost_models.design import Design, DesignBatch, model_constants
from cost_models.evaluate import evaluate_config
from cost_models.layout import derive
from cost_models.pricing.catalog import load_catalog
from specs.schema import parse_spec

N = 10_000_000
ENTRY = (16, 240)


def _lay(d: Design, overwrites: bool = False):
    return derive(DesignBatch.of([d]), N, *ENTRY, 64 * 2**30, overwrites=overwrites)


def test_a_leveled_tree_needs_room_for_its_last_merge() -> None:
    """Leveling at T = 2: the upper levels hold about N between them when full, the last level N,
    and rewriting the last level writes up to N more beside it: close to 3 N at the peak."""
    lay = _lay(Design(T=2, K=1, Z=1, buffer_bytes=2**24, bloom_bits=10))
    assert lay.space_entries[0] == pytest.approx(N, rel=0.05)  # the average: about the data
    assert 2.5 * N <= lay.disk_entries[0] <= 3.2 * N


def test_a_wide_tree_needs_about_twice_the_data() -> None:
    lay = _lay(Design(T=32, K=1, Z=1, buffer_bytes=2**24, bloom_bits=10))
    assert 1.9 * N <= lay.disk_entries[0] <= 2.2 * N


def test_file_by_file_merges_need_little_scratch() -> None:
    """A B-tree (partial compaction) moves a file and the T files it overlaps at a time."""
    d = Design(T=8, K=1, Z=1, buffer_bytes=2**24, bloom_bits=0.0)
    lay = _lay(d)
    files = model_constants()["file_entries"]
    assert lay.disk_entries[0] <= lay.space_entries[0] + np.minimum(lay.cap[0], N).sum() + files * 9 + 1


def test_a_hash_log_is_sized_at_its_longest() -> None:
    """The log at N / (1 - g), a segment a collection copies, and the write-ahead log: the active
    buffer's puts and the frozen buffers' (new keys: E_B records each)."""
    k = model_constants()
    lay = _lay(Design(buffer_bytes=2**24, bloom_bits=0.0, lsh=True))
    wal = (1 + k["frozen_buffers"]) * lay.E_B[0]
    assert lay.disk_entries[0] == pytest.approx(
        N / (1 - k["lsh_gc_dead_fraction"]) + min(lay.E_B[0], N) + wal, rel=1e-9
    )


def test_the_write_ahead_log_is_bounded_by_the_put_limit() -> None:
    """A buffer that holds every key under overwrites flushes at buffer_put_limit x E_B puts (the
    engine's append_group): its log, and the frozen buffers', take at most that many records each,
    where before the limit it had no bound (stop 63)."""
    k = model_constants()
    big = Design(T=10, K=1, Z=1, buffer_bytes=2 * N * sum(ENTRY), bloom_bits=10)  # E_B = 2 N
    lay = _lay(big, overwrites=True)
    without = _lay(Design(T=10, K=1, Z=1, buffer_bytes=2**24, bloom_bits=10), overwrites=True)
    wal = lay.disk_entries[0] - (without.disk_entries[0] - (1 + k["frozen_buffers"]) * without.E_B[0])
    assert np.isfinite(lay.disk_entries[0])
    assert wal <= (1 + k["frozen_buffers"]) * k["buffer_put_limit"] * lay.E_B[0] * (1 + 1e-9)


def test_evaluate_refuses_a_volume_smaller_than_the_design_needs() -> None:
    spec = parse_spec(
        "name: s\nworkload: {entries: 100000000, key_bytes: 128, value_bytes: 896,\n"
        "  operations: {get: 0.5, update: 0.5}}\nbudget: {monthly_usd: 10000}\nproviders: [aws]\n"
    )
    cat = load_catalog()
    vm = cat.vm("aws", "r5d.2xlarge")
    small = StorageChoice("aws", "gp3", 1, 50.0, 3000.0, 4.0, 125.0)
    ev = evaluate_config(spec, Design(T=10, buffer_bytes=2**28, bloom_bits=10), vm, 2, storage=small, catalog=cat)
    assert not ev.feasible and ev.throughput_ops == 0.0
    assert "holds 50.0 GiB; the design needs" in ev.reason
