"""The paper's Fig. 5 study (studies/fig5.py; the full run is `python -m bench.fig5`, BENCHMARKS.md):
the ten workloads as specs, and one panel solved end to end on a small instance."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from cost_models.pricing.catalog import load_catalog
from report.plots import plot_fig5
from specs.io import read_rows, write_rows
from specs.vocab import PRESETS, PriceSet
from studies.fig5 import BASELINE_PROVIDER, ENTRIES, PANELS, Fig5Row, panel_spec, run_panel, summary


def test_the_ten_workloads() -> None:
    assert "".join(PANELS) == "ABCDEFGHIJ"
    for letter in PANELS:
        s = panel_spec(letter)
        ops = sorted(s.workload.operations.values(), reverse=True)
        if letter in "ABCFGH":  # one dominant operation
            assert ops[0] >= 0.9, letter
        else:  # mixed: at least two operations of 20% or more, none dominant
            assert ops[0] <= 0.5 and ops[1] >= 0.2, letter
        assert s.workload.entries == ENTRIES and s.workload.entry_bytes == 1024  # Sec. 7: 10^8 x 1 KiB
        assert s.pricing == PriceSet.PAPER2021 and s.noise == 0 and not s.slas
    assert panel_spec("G").workload.operations["range"] == pytest.approx(0.9)
    assert panel_spec("H").workload.operations["empty_range"] == pytest.approx(0.9)  # ranges holding no key


@pytest.fixture(scope="module")
def small_panel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Fig5Row]]:
    out = tmp_path_factory.mktemp("fig5")
    rows = run_panel("E", out / "E", bands=3, budget_range=(40.0, 4000.0), entries=2_000_000)
    return out, rows


def test_a_panel_end_to_end(small_panel: tuple[Path, list[Fig5Row]]) -> None:
    out, rows = small_panel
    assert (out / "E" / "solution.json").is_file()  # a run directory: cosine report / whatif work on it
    systems = {r.system for r in rows}
    assert systems == {"cosine", *PRESETS}
    assert all(r.provider == BASELINE_PROVIDER for r in rows if r.system != "cosine")
    by = {(r.system, r.band): r for r in rows}
    for (system, band), r in by.items():
        c = by.get(("cosine", band))
        if system in ("rocksdb", "wiredtiger") and r.throughput_ops and c is not None:
            # both designs are in Cosine's space, on the same hardware: Cosine matches or beats them
            assert c.throughput_ops >= r.throughput_ops * 0.99, (system, band)
    s = summary(rows)
    for p in PRESETS:
        per = s["panels"]["E"][p]
        assert per["budgets_compared"] + len(per["infeasible_budgets"]) == len({r.band for r in rows})
        if per["mean_ratio"] is not None:
            assert per["min_ratio"] <= per["mean_ratio"] <= per["max_ratio"]
    assert s["paper"] == {"rocksdb": 53.0, "wiredtiger": 25.0, "faster": 20.0}


def test_table_and_figure(small_panel: tuple[Path, list[Fig5Row]], tmp_path: Path) -> None:
    _, rows = small_panel
    path = write_rows(tmp_path / "fig5.parquet", rows, Fig5Row)
    back = read_rows(path, Fig5Row, "fig5.parquet")
    assert [asdict(r) for r in back] == [asdict(r) for r in rows]
    png = plot_fig5([{**asdict(r), "class": r.design_class} for r in rows], tmp_path / "fig5.png")
    assert png.stat().st_size > 10_000


def test_faster_hashes_an_eighth_of_the_keys() -> None:
    """Sec. 7: FASTER's index has room for 1/8 of the keys (64-byte buckets of 8), 1 GB buffer;
    Sec. 7.2: that is 10^12/8 * 64 * (1 + 1/2048) bytes for 10^12 keys, 21 r5d.12xlarge."""
    from cost_models.cloud import GIB
    from cost_models.design import DesignBatch, preset
    from cost_models.layout import derive
    from studies.fig5 import KEY_BYTES, PAPER_FLOOR_ENTRIES, VALUE_BYTES, memory_floor

    lay = derive(DesignBatch.of([preset("faster")]), 1e9, KEY_BYTES, VALUE_BYTES, 64 * GIB, overwrites=False)
    assert lay.mem_fence[0] == pytest.approx(1e9 / 8 * 64 * (1 + 1 / 2048))
    floor = memory_floor("faster", PAPER_FLOOR_ENTRIES)
    assert floor is not None
    vm = load_catalog(PriceSet.PAPER2021).vm("aws", floor["vm"])
    index = PAPER_FLOOR_ENTRIES / 8 * 64 * (1 + 1 / 2048)
    need = index + floor["count"] * preset("faster").buffer_bytes
    # the cluster holds the index and the buffers, and one VM fewer would not
    assert floor["count"] * vm.memory_gib * GIB >= need > (floor["count"] - 1) * vm.memory_gib * GIB * 0.99
    assert 25_000 < floor["usd_month"] < 45_000  # the paper: "at least $45K/month" with storage
