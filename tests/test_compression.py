"""Compression as a design knob (issue 17 §1): the spec's compressibility, the measured codec
table, the model's storage/CPU terms, and the engine's codecs against the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from cost_models import compression
from cost_models.design import Design, DesignBatch, DesignError, parse_design
from cost_models.evaluate import evaluate_config, evaluate_designs
from cost_models.pricing.catalog import load_catalog
from measure.compression import factors
from measure.engine import run_scratch
from measure.grid import small_lsm, small_workload
from render.config import to_toml
from specs.schema import SpecError, parse_spec
from tests.conftest import TINY_SPEC

runner = CliRunner()


def _spec(extra: str) -> str:
    return TINY_SPEC.replace("  value_bytes: 100\n", f"  value_bytes: 100\n{extra}")


@pytest.mark.parametrize("value", ["0", "1.5", "-0.1", "lots", ".nan"])
def test_compressibility_is_range_checked(tmp_path: Path, value: str):
    with pytest.raises(SpecError, match="workload.compressibility"):
        parse_spec(_spec(f"  compressibility: {value}\n"))
    p = tmp_path / "s.yaml"
    p.write_text(_spec(f"  compressibility: {value}\n"))
    res = runner.invoke(app, ["evaluate", str(p), "--design", "rocksdb", "--vm", "aws:r5d.large"])
    assert res.exit_code == 2
    assert len(res.stderr.splitlines()) == 1 and "workload.compressibility" in res.stderr


def test_default_is_incompressible_and_codecs_parse():
    assert parse_spec(TINY_SPEC).workload.compressibility == 1.0
    d = parse_design("T=8,K=1,Z=1,buffer=64MiB,bloom_bits=10,codec_hot=lz4,codec_cold=zstd,range_bits=16")
    assert (d.codec_hot, d.codec_cold, d.range_bits) == ("lz4", "zstd:3", 16.0)
    for bad in ("codec_cold=zstd:23", "codec_hot=gzip", "range_bits=-1"):
        with pytest.raises((DesignError, ValueError)):
            parse_design(f"T=8,{bad}")


def test_incompressible_data_leaves_only_no_codec_in_the_search():
    """The bound on the search: at compressibility 1.0 every calibrated codec stores at
    least the raw bytes and costs CPU, so no codec can win and none is searched."""
    for codec in compression.table()["codecs"]:
        f, enc, dec = compression.codec_factors(codec, 1.0)
        assert f >= 1.0 and enc >= 0 and dec >= 0, codec
    assert compression.searched(1.0) == (("none", "none"),)
    assert ("none", "lz4") in compression.searched(0.5)
    # and the measured factors fall with the compressibility
    assert compression.codec_factors("lz4", 0.25)[0] < compression.codec_factors("lz4", 0.5)[0] < 1.0


def test_compressed_design_bills_less_storage_and_costs_cpu():
    spec = parse_spec(_spec("  compressibility: 0.25\n").replace("entries: 2000000", "entries: 200000000"))
    cat = load_catalog(spec.pricing)
    vm = cat.vm("gcp", "n1-highmem-8")  # network storage: billed per GiB
    plain = evaluate_config(spec, Design(T=10, buffer_bytes=2**28, bloom_bits=10), vm, 4, catalog=cat)
    packed = evaluate_config(
        spec, Design(T=10, buffer_bytes=2**28, bloom_bits=10, codec_hot="lz4", codec_cold="lz4"), vm, 4, catalog=cat
    )
    assert packed.io_per_op == plain.io_per_op  # a codec changes no block count
    f = compression.codec_factors("lz4", 0.25)[0]
    assert packed.extra["disk_block_bytes"] < plain.extra["disk_block_bytes"] * (f + 0.2)
    # the bytes stored (what a volume must hold, and is billed for) shrink by the factor
    batch = DesignBatch.of([packed.design, plain.design])
    ne = evaluate_designs(batch, spec.workload, 5e7, vm.memory_gib * 2**30)
    assert ne.disk_gib()[0] == pytest.approx(ne.disk_gib()[1] * f, rel=1e-6)
    # the codec's CPU: lz4 decompresses every block read, so a CPU-bound node serves fewer ops
    assert packed.node_throughput <= plain.node_throughput * (1 + 1e-9)


def test_engine_codec_matches_the_calibrated_table(engine_binary: Path):
    """The table was measured on 1 KiB entries in 4 KiB blocks; another record shape
    (256-byte entries, 2 KiB blocks) stores the size factor the table says, within 10%."""
    secs = small_lsm("codec-test", "get", block_bytes=2048, codec_hot="lz4", codec_cold="zstd:3")
    assert secs["compression"] == {"hot": "lz4", "cold": "zstd:3"}
    secs["compression"] = {"hot": "lz4", "cold": "lz4"}
    wl = small_workload("get", 20_000, 4_000, compressibility=0.5, seed=3)
    rep = run_scratch(to_toml(secs), wl, "codec-test")
    got = factors(rep)
    want = compression.codec_factors("lz4", 0.5)[0]
    assert got["size_factor"] == pytest.approx(want, rel=0.10), (got, want)
    assert got["blocks_decompressed"] > 0
    print(json.dumps({"measured": got, "table": want}))
