"""The model stays accurate against the engine (issue 5 section 4).

A small slice of `cosine validate` (the full grid is a benchmark): the three
presets and the base hybrid on a read-only, a no-result-lookup and a mixed
update workload, 20,000 records. Target for the full grid: >= 90% mean
accuracy; this slice must stay above 80% (the stated 10-point margin covers
its small size: few cases, short runs that see fewer merge cycles).
"""

from __future__ import annotations

from measure.validate import validate

TARGET, MARGIN = 0.90, 0.10


def test_model_matches_engine_on_a_small_grid():
    v = validate(
        20_000,
        10_000,
        quick=True,
        only_designs=("rocksdb", "wiredtiger", "faster", "hybrid-base"),
        only_workloads=("ycsb_c", "only_empty_get", "uniform_get_put"),
    )
    s = v.summary()
    print(f"\\nvalidation slice: {s}")
    assert s["cases"] >= 12
    assert s["mean_accuracy"] >= TARGET - MARGIN, s
    # reads, which carry no amortization, must be close in every case
    for r in v.rows:
        if r["op"] in ("get", "empty_get"):
            assert r["accuracy"] >= 0.75, r
