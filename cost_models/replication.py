"""Replicas: what a replication factor does to a node's work, its data and the bill.

A cluster keeps RF copies of every entry (``replication.factors`` of the spec), each copy of a shard
in another zone of the region when RF >= 2 (:func:`plans`), so that the data survives a node's and
a zone's loss. Per operation of the workload (docs/model.md, "Replication"):

* a write (insert, update) is applied by every replica: the leader's and the RF - 1 followers';
* an rmw is a read and a write on the leader, and that write on each follower;
* a read (get, empty_get, range, empty_range) asks q replicas: one (consistency ``one``: the
  leader, or a follower allowed to answer) or a majority, floor(RF / 2) + 1 (``quorum``).

A node therefore serves *node operations*: A = sum_o theta_o a_o of them per operation of the
workload (a_o: the replicas operation o touches), in the mix theta'_o = theta_o a_o / A
(:func:`node_operations`), and holds RF x N / n of the keys when n nodes keep RF copies of N
entries. The cluster's throughput is its node operations per second over A: the solver evaluates
designs on the node workload and divides (:func:`node_spec`).

The data the answer provisions for is the data at the end of the spec's growth horizon: the
entries now plus the inserts of ``growth_horizon_days`` (at most ``retention_days`` of them), at
the workload's stated rate (:func:`horizon_entries`).
"""

from __future__ import annotations

import dataclasses
import math

from cost_models.pricing.catalog import HOURS_PER_MONTH, Catalog
from specs.schema import NodeView, ReplicaPlan, Spec, Workload
from specs.vocab import Operation, SlaFeature

#: Operations that read (one replica, or a majority, answers them).
READS = (Operation.GET, Operation.EMPTY_GET, Operation.RANGE, Operation.EMPTY_RANGE)
#: Operations every replica applies.
BLIND_WRITES = (Operation.INSERT, Operation.UPDATE)
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600.0
DAYS_PER_MONTH = HOURS_PER_MONTH / 24.0
GIB = float(2**30)


def node_operations(operations: dict[str, float], plan: ReplicaPlan) -> tuple[dict[str, float], float]:
    """(the node operations' mix, A: node operations per operation of the workload) under ``plan``."""
    counts: dict[str, float] = dict.fromkeys(operations, 0.0)
    for op, share in operations.items():
        if op in READS:
            counts[op] += share * plan.read_replicas
        elif op in BLIND_WRITES:
            counts[op] += share * plan.rf
        elif op == Operation.RMW:
            counts[Operation.RMW] = counts.get(Operation.RMW, 0.0) + share
            counts[Operation.UPDATE] = counts.get(Operation.UPDATE, 0.0) + share * (plan.rf - 1)
        else:
            raise ValueError(f"no replication rule for operation {op!r}")
    amplification = sum(counts.values())
    return {op: c / amplification for op, c in counts.items()}, amplification


def stated_operations_per_second(spec: Spec) -> float | None:
    """The traffic the spec states: ``operations_per_month`` as an average rate, else
    ``performance.min_throughput``; None when it states neither."""
    if spec.workload.operations_per_month is not None:
        return spec.workload.operations_per_month / SECONDS_PER_MONTH
    return spec.min_throughput


def horizon_days(spec: Spec) -> float:
    """The days of inserts the answer provisions for: the growth horizon, at most the retention."""
    wl = spec.workload
    return wl.growth_horizon_days if wl.retention_days is None else min(wl.growth_horizon_days, wl.retention_days)


def horizon_entries(spec: Spec) -> float:
    """The entries at the end of the growth horizon: today's plus the inserts of
    ``growth_horizon_days`` (at most ``retention_days`` of them: older inserts are gone), at the
    stated traffic's insert share. No stated traffic: no growth (the solution says so)."""
    wl = spec.workload
    rate = stated_operations_per_second(spec)
    if rate is None:
        return float(wl.entries)
    inserts = rate * logical_operations(spec).get(Operation.INSERT, 0.0) * horizon_days(spec) * 86400.0
    return float(wl.entries) + inserts


def plans(spec: Spec, catalog: Catalog, provider: str) -> list[ReplicaPlan]:
    """The replication plans a provider's answer may use: each factor of the spec, its copies in as
    many of the region's zones as it has (one zone for RF 1); the availability SLA keeps only plans
    of two or more zones (it needs instances in two zones, slas.csv)."""
    zones_here = catalog.region(provider).zones
    out = []
    for rf in spec.replication.factors:
        plan = ReplicaPlan(rf, min(rf, zones_here), spec.replication.consistency)
        if SlaFeature.AVAILABILITY in spec.slas and plan.zones < 2:
            continue
        out.append(plan)
    return out


def node_spec(spec: Spec, plan: ReplicaPlan) -> tuple[Spec, float]:
    """(the spec a node of ``plan`` serves, A). Its workload holds every copy of the data at the end
    of the horizon (RF x :func:`horizon_entries`) and the node operations' mix; the solver's
    throughputs on it are node operations per second, the cluster's operations per second A
    times fewer."""
    mix, amplification = node_operations(spec.workload.operations, plan)
    logical = horizon_entries(spec)
    entries = max(1, math.ceil(plan.rf * logical))
    wl: Workload = dataclasses.replace(spec.workload, entries=entries, operations=mix)
    view = NodeView(plan, amplification, logical, dict(spec.workload.operations))
    return dataclasses.replace(spec, workload=wl, node_view=view), amplification


def amplification(spec: Spec) -> float:
    """Node operations per operation of the workload (1: a spec as written)."""
    return 1.0 if spec.node_view is None else spec.node_view.amplification


def distinct_entries(spec: Spec) -> float:
    """The distinct keys the workload draws from: one copy of the data (a node view's entries hold
    RF copies of each key; its replicas hold the same keys, drawn as often)."""
    return float(spec.workload.entries) if spec.node_view is None else float(spec.node_view.logical_entries)


def replica_nodes(spec: Spec) -> int:
    """The fewest nodes a cluster of the spec's node view has: one per copy (1 as written)."""
    return 1 if spec.node_view is None else spec.node_view.plan.rf


def as_node_mix(spec: Spec, mix: dict[str, float]) -> tuple[dict[str, float], float]:
    """A mix of the workload's operations (one robustness perturbed) as the node operations its
    nodes serve, and their A (``mix`` itself and 1 on a spec as written)."""
    if spec.node_view is None:
        return dict(mix), 1.0
    return node_operations(mix, spec.node_view.plan)


def workload_io_per_op(spec: Spec, node_io: dict[str, float]) -> dict[str, float]:
    """The I/Os of one operation of the workload across its replicas, from a node's I/Os per node
    operation: a read's q replicas', a write's RF, an rmw's own plus RF - 1 updates' (as
    :func:`node_operations` counts them; ``node_io`` itself on a spec as written)."""
    if spec.node_view is None:
        return dict(node_io)
    plan = spec.node_view.plan
    out = dict(node_io)
    for op in node_io:
        if op in READS:
            out[op] = node_io[op] * plan.read_replicas
        elif op in BLIND_WRITES:
            out[op] = node_io[op] * plan.rf
        elif op == Operation.RMW:
            out[op] = node_io[op] + (plan.rf - 1) * node_io.get(Operation.UPDATE, 0.0)
    return out


def logical_operations(spec: Spec) -> dict[str, float]:
    """The workload's own mix: a node view's, before its plan mapped it to node operations."""
    return spec.workload.operations if spec.node_view is None else spec.node_view.logical_operations


def logical_data_gib(spec: Spec) -> float:
    """GiB of one copy of the data the answer provisions for (at the end of the growth horizon on a
    node view; the spec's own data as written)."""
    entries = float(spec.workload.entries) if spec.node_view is None else spec.node_view.logical_entries
    return entries * spec.workload.entry_bytes / GIB


def backup_usd_per_node(spec: Spec, catalog: Catalog, provider: str, local: bool, entries: float) -> float:
    """A month's backup of one node holding ``entries`` copies: its share of one copy of the data
    (``entries`` / RF) at the backup's rate: a block volume's snapshots (slas.csv ``backup``), an
    instance store's copy in object storage (regions.csv). Priced when the spec requires the
    ``backup`` SLA, and always for an instance store with one copy (RF 1): a VM's local store is
    lost when the VM stops or fails, so one copy there must be backed up to be durable."""
    rf = 1 if spec.node_view is None else spec.node_view.plan.rf
    required = SlaFeature.BACKUP in spec.slas or (local and rf == 1)
    if not required:
        return 0.0
    gib = entries / rf * spec.workload.entry_bytes / GIB
    if local:
        return gib * catalog.region(provider).object_usd_per_gb_month
    snap = catalog.slas.get(provider, {}).get(SlaFeature.BACKUP)
    return gib * (snap.usd_per_gb_month if snap is not None and snap.available else 0.0)


def replication_gib_month(spec: Spec, plan: ReplicaPlan) -> float:
    """GiB a month that leave a zone: each write's entry sent to the followers in other zones
    (min(RF, zones) - 1 of them), and, with clients in every zone, the requests and replies of the
    share of clients in another zone than the leader's (1 - 1 / zones). Counted on the stated
    traffic (:func:`stated_operations_per_second`; none: 0). An entry is its key and value bytes:
    the framing a replication message adds is left out (a lower bound)."""
    rate = stated_operations_per_second(spec)
    if rate is None or plan.zones < 2:
        return 0.0
    wl, mix = spec.workload, logical_operations(spec)
    writes = sum(mix.get(op, 0.0) for op in (*BLIND_WRITES, Operation.RMW))
    per_month = rate * SECONDS_PER_MONTH
    replicated = per_month * writes * (plan.zones - 1) * wl.entry_bytes
    clients = 0.0
    if spec.replication.clients_across_zones:
        # a request carries its key (and a write its value); a reply a read's value (a scan's entries)
        reads = sum(mix.get(op, 0.0) for op in READS) + mix.get(Operation.RMW, 0.0)
        scan = mix.get(Operation.RANGE, 0.0) * (wl.scan_length - 1)
        per_op = wl.key_bytes + writes * wl.value_bytes + (reads + scan) * wl.entry_bytes
        clients = per_month * per_op * (1.0 - 1.0 / plan.zones)
    return (replicated + clients) / GIB


def transfer_usd_month(spec: Spec, catalog: Catalog, provider: str, plan: ReplicaPlan) -> float:
    """What the cross-zone traffic of :func:`replication_gib_month` costs (regions.csv)."""
    return replication_gib_month(spec, plan) * catalog.region(provider).cross_zone_usd_per_gb
