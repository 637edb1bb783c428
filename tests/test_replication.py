"""Replicas (issue 49, cost_models/replication.py): what a replication factor does to a node's
operations, its data, its tables and the bill's cross-zone lines. On 18f96a3 a replication factor
existed only in `cosine plan --rf`: the answer kept one copy of each shard."""

from __future__ import annotations

import dataclasses

import pytest

from cost_models.pricing.catalog import load_catalog
from cost_models.replication import (
    as_node_mix,
    node_operations,
    node_spec,
    plans,
    replication_gib_month,
    transfer_usd_month,
    workload_io_per_op,
)
from cost_models.robust import perturbed_amplification, perturbed_workload
from solver.tables.build import build_tables
from specs.schema import ReplicaPlan, parse_spec
from specs.vocab import Consistency
from tests.test_solver import small_catalog

YCSB_A = {"get": 0.5, "update": 0.5}


def _spec(extra: str = "", ops: str = "{get: 0.5, update: 0.5}", entries: int = 2_000_000):
    return parse_spec(
        f"name: r\nworkload: {{entries: {entries}, key_bytes: 16, value_bytes: 100, operations: {ops},\n"
        "  operations_per_month: 2.6e9}\nbudget: {monthly_usd: 500}\nproviders: [aws]\n"
        "design: {max_cluster_size: 6}\n" + extra
    )


@pytest.mark.parametrize(
    ("plan", "amplification"),
    [
        (ReplicaPlan(1, 1), 1.0),
        (ReplicaPlan(3, 3), 0.5 * 1 + 0.5 * 3),  # a get asks one replica, an update is applied by 3
        (ReplicaPlan(3, 3, Consistency.QUORUM), 0.5 * 2 + 0.5 * 3),  # a get asks a majority: 2 of 3
        (ReplicaPlan(2, 2, Consistency.QUORUM), 0.5 * 2 + 0.5 * 2),
    ],
)
def test_a_write_costs_rf_node_operations_and_a_read_one_or_a_majority(plan, amplification):
    mix, a = node_operations(YCSB_A, plan)
    assert a == pytest.approx(amplification)
    assert sum(mix.values()) == pytest.approx(1.0)
    assert mix["update"] == pytest.approx(0.5 * plan.rf / a)


def test_an_rmw_is_a_read_modify_write_on_the_leader_and_an_update_on_each_follower():
    mix, a = node_operations({"rmw": 1.0}, ReplicaPlan(3, 3))
    assert a == pytest.approx(3.0)
    assert mix == pytest.approx({"rmw": 1 / 3, "update": 2 / 3})
    io = workload_io_per_op(node_spec(_spec(ops="{rmw: 1.0}"), ReplicaPlan(3, 3))[0], {"rmw": 2.0, "update": 1.5})
    assert io["rmw"] == pytest.approx(2.0 + 2 * 1.5)


def test_a_node_spec_holds_every_copy_at_the_horizon_in_the_node_mix():
    spec = _spec(ops="{get: 0.5, insert: 0.5}", extra="")
    ns, a = node_spec(spec, ReplicaPlan(2, 2))
    grown = 2_000_000 + 2.6e9 / (730 * 3600) * 0.5 * 90 * 86400  # 90 days of inserts at the stated rate
    assert ns.workload.entries == pytest.approx(2 * grown, rel=1e-6)
    assert ns.node_view is not None and ns.node_view.logical_entries == pytest.approx(grown, rel=1e-6)
    served = {op: v for op, v in ns.workload.operations.items() if v}
    assert served == pytest.approx({"get": 0.5 / a, "insert": 1.0 / a})
    assert ns.node_view.logical_operations == spec.workload.operations


def test_robustness_perturbs_the_workload_then_maps_it_to_node_operations():
    spec = _spec(ops="{get: 0.9, update: 0.1}", extra="robustness: {noise: 0.2}\n")
    ns, a = node_spec(spec, ReplicaPlan(3, 3))
    noisy_logical = perturbed_workload(spec).operations
    assert perturbed_workload(ns).operations == pytest.approx(as_node_mix(ns, noisy_logical)[0])
    # the noise moves writes into a read-heavy mix's share and out of a write-heavy one: A moves with it
    assert perturbed_amplification(ns) == pytest.approx(node_operations(noisy_logical, ReplicaPlan(3, 3))[1])
    assert perturbed_amplification(ns) != pytest.approx(a)


def test_availability_keeps_only_plans_of_two_zones_or_more():
    cat = load_catalog()
    spec = _spec(extra="slas: [availability]\n")
    got = plans(spec, cat, "aws")
    assert got and all(p.rf >= 2 and p.zones >= 2 for p in got)
    assert [p.rf for p in plans(_spec(), cat, "aws")] == [1, 2, 3]


def test_cross_zone_transfer_is_priced_whenever_copies_sit_in_two_zones():
    cat = load_catalog()
    spec = _spec()
    assert transfer_usd_month(spec, cat, "aws", ReplicaPlan(1, 1)) == 0.0
    gib = replication_gib_month(spec, ReplicaPlan(3, 3))
    # every update's entry (116 B) to two followers in other zones, 2.6e9 operations a month
    assert gib == pytest.approx(2.6e9 * 0.5 * 2 * 116 / 2**30, rel=1e-9)
    rate = cat.region("aws").cross_zone_usd_per_gb
    assert rate > 0 and transfer_usd_month(spec, cat, "aws", ReplicaPlan(3, 3)) == pytest.approx(gib * rate)
    spread = _spec(extra="replication: {clients_across_zones: true}\n")
    assert replication_gib_month(spread, ReplicaPlan(3, 3)) > gib  # 2 of 3 clients' requests cross too


def test_a_replicated_nodes_columns_are_its_node_throughput_over_a():
    """The tables of a node spec: the same node evaluated on the same node workload, in operations of
    the workload (node operations over A), and no shard count below RF."""
    cat = small_catalog("ondemand")
    ns, a = node_spec(_spec(), ReplicaPlan(3, 3))
    plain = dataclasses.replace(ns, node_view=None)
    rep = build_tables(ns, cat, ("aws",), workers=1)
    raw = build_tables(plain, cat, ("aws",), workers=1)
    assert a == pytest.approx(2.0)
    by_key = {(c.vm.name, c.entries, c.storage.label, c.design): c for c in raw.contexts["aws"]}
    assert rep.contexts["aws"]
    for c in rep.contexts["aws"]:
        assert c.entries <= ns.workload.entries / 3 * (1 + 1e-12)  # a node holds one copy at most
        twin = by_key[(c.vm.name, c.entries, c.storage.label, c.design)]
        assert c.throughput == pytest.approx(twin.throughput / a, rel=1e-12)


def test_a_node_views_keys_are_drawn_from_one_copy_of_the_data():
    """The RF copies of a key are one key of the workload's distributions: a replicated node view's
    key partitions are those of the spec as written (over its entries at the horizon), whatever the
    replication factor; so the RF 2 and RF 3 views evaluate a shard of one size alike and share its
    shard job (solver.tables.build.plan_groups)."""
    import numpy as np

    from cost_models.evaluate import spec_partitions, workload_partitions
    from solver.tables.build import _plan as build_plan
    from solver.tables.build import plan_groups, same_partitions

    spec = parse_spec(
        "name: r\nworkload: {entries: 2000000, key_bytes: 16, value_bytes: 100, operations: {get: 0.5, update: 0.5},\n"
        "  distribution: {get: {kind: zipfian}, put: {kind: zipfian}}}\n"
        "budget: {monthly_usd: 500}\nproviders: [aws]\ndesign: {max_cluster_size: 6}\n"
    )
    written = workload_partitions(spec.workload)
    views = [node_spec(spec, ReplicaPlan(rf, rf))[0] for rf in (2, 3)]
    for v, rf in zip(views, (2, 3), strict=True):
        assert v.workload.entries == rf * spec.workload.entries
        assert same_partitions(spec_partitions(v), written)
        # (over every copy the hot keys would be diluted: another partitioning)
        assert not same_partitions(workload_partitions(v.workload), written)
    cat = small_catalog()
    plans_ = [build_plan(v, cat, ("aws",), ("cosine",), None, None) for v in views]
    shared = [members for _, _, members in plan_groups(plans_, cat) if len(members) == 2]
    assert shared and all({i for i, _ in m} == {0, 1} for m in shared)
    for m in shared:
        (_, k0), (_, k1) = sorted(m)
        assert np.isclose(views[0].workload.entries / k0, views[1].workload.entries / k1)
