"""Any data size from one entry up gets a valid, certified answer (issue 14: 1,000 entries were
"infeasible" and one entry an internal error, because buffer sizes started at 16 MiB)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli.main import app
from solver.space import grid_for
from specs.schema import load_spec
from tests.conftest import TINY_SPEC

runner = CliRunner()


@pytest.mark.parametrize("entries", [1, 1000])
def test_small_data_solves_and_passes_audit(tmp_path, entries):
    spec = tmp_path / "small.yaml"
    spec.write_text(TINY_SPEC.replace("entries: 2000000", f"entries: {entries}"))
    out = tmp_path / "run"
    res = runner.invoke(app, ["solve", str(spec), "--out", str(out), "--bands", "4", "--json"])
    assert res.exit_code == 0, res.stderr
    sol = json.loads(res.stdout)
    assert sol["target"]["met"] and sol["predicted"]["throughput_ops"] > 0
    assert sum(d["entries_per_node"] * d["count"] for d in sol["designs"]) >= entries
    grid = grid_for(load_spec(spec))
    for d in sol["designs"]:  # the buffer ladder starts at the data, not at 16 MiB
        data = d["entries_per_node"] * (16 + 100)
        assert grid.buffers(64 * 2**30, data)[0] <= data * (1 + 1e-9)
    res = runner.invoke(app, ["audit", str(out)])  # every band's certificate within 1e-3 gap, 1e-2 error
    assert res.exit_code == 0, res.stdout
    res = runner.invoke(app, ["render", str(out), "--out", str(tmp_path / "engine")])
    assert res.exit_code == 0, res.stderr


def test_one_entry_evaluates():
    from cost_models.design import parse_design
    from cost_models.evaluate import evaluate_config
    from cost_models.pricing.catalog import load_catalog
    from specs.schema import parse_spec

    spec = parse_spec(TINY_SPEC.replace("entries: 2000000", "entries: 1"))
    cat = load_catalog(spec.pricing)
    for design in ("rocksdb", "wiredtiger", "faster", "T=4,K=1,Z=1,buffer=116,bloom_bits=8"):
        ev = evaluate_config(spec, parse_design(design), cat.vm("aws", "r5d.large"), 2, catalog=cat)
        assert all(v >= 0 for v in ev.io_per_op.values()), design
        assert ev.throughput_ops > 0, design
