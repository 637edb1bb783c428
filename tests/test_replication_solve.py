"""Replicas in the answer (issue 49): what `cosine solve` writes for a spec that needs copies.
On 18f96a3 every answer kept one copy of each shard, on ephemeral disks sized to exactly the data,
and the bill had no line for the other copies or the traffic between zones."""

from __future__ import annotations

from pathlib import Path

import pytest

from cost_models.replication import horizon_entries
from solver.backends import get_backend
from solver.rundir import Bill, Solution
from solver.solve import run_solve
from specs.schema import parse_spec
from tests.test_solver import small_catalog


def _solve(tmp_path: Path, slas: str, providers: str = "[aws, gcp]", extra: str = "") -> Solution:
    spec = parse_spec(
        "name: r\nworkload: {entries: 2000000, key_bytes: 16, value_bytes: 100, operations: {get: 0.5, update: 0.5},\n"
        "  operations_per_month: 2.6e9}\nbudget: {monthly_usd: 500}\n"
        f"providers: {providers}\nslas: {slas}\ndesign: {{max_cluster_size: 8}}\n" + extra
    )
    run = run_solve(spec, small_catalog(per_provider=3), get_backend("highs"), bands=4, out_dir=tmp_path, workers=1)
    return run.solution


def _invariants(sol: Solution) -> None:
    """What every answer's replication and bill must hold."""
    rep, bill = sol.replication, sol.monthly_cost
    nodes = sum(v.count for v in sol.vms)
    assert nodes % rep.factor == 0, f"{nodes} nodes are not groups of RF {rep.factor}"
    assert sum(getattr(bill, line) for line in Bill.LINES) == pytest.approx(bill.total)
    # the other copies cost RF - 1 times one copy's VMs and volumes
    assert bill.replicas == pytest.approx((rep.factor - 1) * (bill.compute + bill.storage), rel=1e-9)
    if rep.zones >= 2 and sol.provider != "azure":  # azure charges no inter-zone transfer
        assert bill.transfer > 0 and rep.cross_zone_gib_month > 0
    for d, st in zip(sol.designs, sol.storage, strict=True):
        assert st.gib * 2**30 >= d.entries_per_node * (16 + 100) * (1 - 1e-9), "a volume smaller than its copies"


def test_availability_buys_two_copies_in_two_zones_and_pays_for_them(tmp_path):
    sol = _solve(tmp_path, "[availability]")
    _invariants(sol)
    rep = sol.replication
    assert rep.factor >= 2 and rep.zones >= 2
    assert sol.monthly_cost.replicas > 0
    # every copy of the data at the horizon is on some node's volume
    held = sum(d.entries_per_node * d.count for d in sol.designs)
    assert held >= rep.factor * rep.data_gib * 2**30 / (16 + 100) * (1 - 1e-6)


def test_without_an_sla_one_copy_on_an_instance_store_is_backed_up(tmp_path):
    sol = _solve(tmp_path, "[]")
    _invariants(sol)
    if sol.replication.factor == 1 and any(st.product == "instance" or "instance" in st.label for st in sol.storage):
        assert sol.monthly_cost.backup > 0, "an instance store holding the only copy is lost with its VM"


def test_the_volumes_hold_the_data_at_the_horizon(tmp_path):
    spec = parse_spec(
        "name: g\nworkload: {entries: 2000000, key_bytes: 16, value_bytes: 100, operations: {get: 0.5, insert: 0.5},\n"
        "  operations_per_month: 2.6e9}\nbudget: {monthly_usd: 500}\nproviders: [aws]\nslas: []\n"
        "design: {max_cluster_size: 8}\n"
    )
    grown = horizon_entries(spec)
    assert grown > 10 * spec.workload.entries  # 90 days of 1.3e9 inserts a month
    run = run_solve(spec, small_catalog(per_provider=3), get_backend("highs"), bands=4, out_dir=tmp_path, workers=1)
    sol = run.solution
    _invariants(sol)
    held = sum(d.entries_per_node * d.count for d in sol.designs)
    assert held >= sol.replication.factor * grown * (1 - 1e-9)


def test_azure_zones_charge_no_transfer(tmp_path):
    sol = _solve(tmp_path, "[availability]", providers="[azure]")
    _invariants(sol)
    assert sol.replication.zones >= 2
    assert sol.monthly_cost.transfer == 0.0
