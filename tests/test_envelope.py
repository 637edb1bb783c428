"""The guard in the certificate: every solve records whether each chosen node's predicted
throughput per core lies inside the calibrated envelope; audit flags bands outside it; solve
warns when the headline answer is outside."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml

import cost_models.phi as phi_module
from cli.main import app
from cost_models.cpu import envelope_rows
from cost_models.envelope import COMPARABLE_MIX, bound, check_nodes, mix_distance, served_bound
from cost_models.phi import PHI_TABLE, load_phi
from solver.audit import audit


def test_mix_distance() -> None:
    assert mix_distance({"get": 1.0}, {"get": 2.0}) == 0.0
    assert mix_distance({"get": 1.0}, {"update": 1.0}) == 1.0
    assert mix_distance({"get": 0.5, "update": 0.5}, {"get": 0.95, "update": 0.05}) == pytest.approx(0.45)
    assert 0.45 > COMPARABLE_MIX


def test_check_nodes_against_the_table() -> None:
    # a served node is checked against the lower of the engine's and cosine-server's envelope (issue 48)
    b = served_bound("lsm", {"get": 0.5, "update": 0.5})
    assert b.per_core_ops is not None and b.per_core_ops > 0
    node = SimpleNamespace(vm_type="x", design_class="lsm", threads=4, node_throughput_ops=4 * b.per_core_ops * 0.5)
    assert check_nodes([node], {"get": 0.5, "update": 0.5}).inside
    node.node_throughput_ops = 4 * b.per_core_ops * 1.5
    out = check_nodes([node], {"get": 0.5, "update": 0.5})
    assert not out.inside and out.nodes[0].envelope_per_core_ops == b.per_core_ops
    # a mix no run resembles is bounded by its operations alone: 1 / sum theta_o / X_o
    alone = {
        next(iter(r["mix"])): r["per_core_ops"]
        for r in envelope_rows(load_phi())
        if r["class"] == "lsm" and len(r["mix"]) == 1 and r["kind"] == "cached"
    }
    mixed = bound("lsm", {"range": 0.5, "rmw": 0.5})
    assert mixed.per_core_ops is not None and mixed.workload.startswith("its operations alone")
    assert mixed.per_core_ops >= 1 / (0.5 / alone["range"] + 0.5 / alone["rmw"]) * (1 - 1e-9)


def test_no_calibration_no_envelope(monkeypatch) -> None:
    import cost_models.cpu as cpu
    import cost_models.envelope as env

    monkeypatch.setattr(cpu, "envelope_rows", lambda phi: [])
    out = check_nodes(
        [SimpleNamespace(vm_type="x", design_class="btree", threads=2, node_throughput_ops=10.0)], {"get": 1.0}
    )
    assert out.inside is False and out.nodes[0].envelope_per_core_ops is None
    assert "no calibration run" in env.describe_outside(out.nodes)[0]


def test_solution_records_the_envelope(solved) -> None:
    _, out, sol = solved
    env = sol["certificate"]["envelope"]
    assert set(env) == {"inside", "nodes"} and env["nodes"]
    for n in env["nodes"]:
        assert n["predicted_per_core_ops"] > 0 and isinstance(n["inside"], bool)
    recs = [json.loads(line) for line in (out / "solver.log.jsonl").read_text().splitlines()]
    assert all("envelope_inside" in r for r in recs)
    assert any(r["envelope_inside"] is not None for r in recs)


def test_outside_the_envelope_warns_and_audit_flags(runner, solved, tmp_path, monkeypatch) -> None:
    spec, _, _ = solved
    table = yaml.safe_load(PHI_TABLE.read_text())
    for row in table["envelope"]:
        row["per_core_ops"] = 1.0  # the engine "reached" 1 op/s per core: every answer is outside
    doctored = tmp_path / "phi.yaml"
    doctored.write_text(yaml.safe_dump(table))
    monkeypatch.setattr(phi_module, "PHI_TABLE", doctored)  # the table the CLI ships with
    out = tmp_path / "run"
    res = runner.invoke(app, ["solve", str(spec), "--out", str(out), "--bands", "4", "--json"])
    assert res.exit_code == 0, res.output
    sol = json.loads(res.stdout)
    assert sol["certificate"]["envelope"]["inside"] is False
    assert "warning: outside the calibrated envelope" in res.stderr
    assert runner.invoke(app, ["audit", str(out)]).exit_code == 1
    flagged = [f for row in audit(out, 1e-3, 1e-2) for f in row.flags]
    assert flagged and all(f.startswith("outside the calibrated envelope") for f in flagged)


def test_inside_the_envelope_is_quiet(runner, solved, tmp_path, monkeypatch) -> None:
    spec, _, _ = solved
    table = yaml.safe_load(PHI_TABLE.read_text())
    for row in table["envelope"]:
        row["per_core_ops"] = 1e12
    generous = tmp_path / "phi.yaml"
    generous.write_text(yaml.safe_dump(table))
    monkeypatch.setattr(phi_module, "PHI_TABLE", generous)
    out = tmp_path / "run"
    res = runner.invoke(app, ["solve", str(spec), "--out", str(out), "--bands", "4", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["certificate"]["envelope"]["inside"] is True
    assert "warning" not in res.stderr
    assert runner.invoke(app, ["audit", str(out)]).exit_code == 0


@pytest.mark.parametrize("cls", ["lsm", "btree", "lsh", "hybrid"])
def test_a_cached_get_on_a_large_node_stays_inside_what_was_measured(cls) -> None:
    """The headline bug of issue 12: a cached B-tree/hybrid get at a fit's floor made ycsb_c
    ~10 M ops/s per vCPU. A get that reads no block, on 10^8 keys, one thread per core, must now
    be below the fastest get per core the engine was measured to do (the calibration's smallest
    size), and cost more than it did there."""
    import numpy as np

    from cost_models.cpu import NodeShape, node_throughput
    from cost_models.io_model import IOCost
    from specs.vocab import DesignClass

    zero = np.zeros(1)
    io = IOCost(zero, zero, zero, zero, zero, zero, zero, get_buffered=zero)
    code = np.array([DesignClass(cls).code])

    def per_core(keys: float) -> float:
        shape = NodeShape(code, np.array([4096.0]), keys, 144.0, np.array([1000.0]))
        return float(node_throughput(load_phi(), io, np.inf, shape, {"get": 1.0}, 2, 20.0, cores=3.0)[0]) / 2

    measured = bound(cls, {"get": 1.0}).per_core_ops
    assert measured is not None
    assert per_core(1e8) < 0.5 * measured
    assert per_core(1e8) < per_core(1e6) < per_core(1e5)
