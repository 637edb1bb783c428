"""The solution's cluster scaled to this machine.

A solution recommends ``count`` nodes of each VM type, each running its design
(``designs[i]`` of solution.json); with a replication factor RF they are RF copies of
``count / RF`` shards, and a node of the plan is a shard. A local deployment runs:

* **nodes**: ``--nodes N``, default ``min(recommended, this machine's cores)``
  (one server per core; more would only time-share the cores). VM types keep
  their shares of the cluster (largest remainder), every type at least once
  when N allows;
* **memory scaled by S**: every memory budget of the design (buffer, block
  cache; filters and fences follow the data) is multiplied by ``--scale S``.
  The default S keeps the design's memory-to-data ratio for the data a local
  cluster holds (:data:`DEFAULT_RECORDS` records spread over the nodes, as
  ``cosine bench`` loads by default), capped so that the whole cluster's memory
  stays within :data:`MEMORY_SHARE` of this machine's;
* each node's engine.toml is rendered by :func:`render.config.engine_sections`
  with the node's share of this machine's cores as its vCPUs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cost_models.design import DesignEntry
from measure.engine import DEFAULT_RECORDS
from render.config import engine_sections, to_toml
from specs.errors import check_range
from specs.vocab import WalSync

#: Share of this machine's physical memory the whole local cluster may take by
#: default: the machine is shared (clients, the proxy, the page cache, other work).
MEMORY_SHARE = 0.25
#: Most nodes one machine runs (each is a process with its own runtime and engine).
MAX_NODES = 64


@dataclass
class NodePlan:
    """One node of the local cluster."""

    index: int
    vm_type: str
    design_class: str
    engine_toml: str
    memory_bytes: float  # the scaled design's memory budget (buffer + cache + filters + fences)
    entries_per_node: float  # the keys the cloud node was designed for

    @property
    def name(self) -> str:
        return f"node-{self.index}"


@dataclass
class ClusterPlan:
    """What `cosine deploy --local` starts."""

    spec: str
    provider: str
    recommended_nodes: int
    nodes: list[NodePlan]
    scale: float
    scale_reason: str
    wal_sync: WalSync
    predicted_cloud_ops: float  # the solution's predicted cluster throughput
    predicted_node_ops: float  # its mean per node

    @property
    def predicted_scaled_ops(self) -> float:
        """The solution's prediction for as many nodes as run here (per-node throughput x nodes)."""
        return self.predicted_node_ops * len(self.nodes)


def machine_memory() -> float:
    """Physical memory of this machine, bytes."""
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def machine_cores() -> int:
    return os.cpu_count() or 1


def allocate(counts: list[int], n: int) -> list[int]:
    """``n`` nodes shared among VM types in proportion to ``counts`` (largest remainder),
    every type at least once while ``n`` allows."""
    total = sum(counts)
    exact = [c * n / total for c in counts]
    got = [max(1 if n >= len(counts) else 0, math.floor(x)) for x in exact]
    order = sorted(range(len(counts)), key=lambda i: exact[i] - math.floor(exact[i]), reverse=True)
    i = 0
    while sum(got) < n:
        got[order[i % len(order)]] += 1
        i += 1
    while sum(got) > n:
        j = max(range(len(got)), key=lambda k: got[k] - exact[k])
        got[j] -= 1
    return got


def check_options(recommended: int, nodes: int | None, scale: float | None) -> None:
    """Bounds of --nodes (1 .. the recommended count) and --scale ((0, 1]), checked before anything starts."""
    if nodes is not None:
        check_range(
            f"--nodes (the solution recommends {recommended})", nodes, 1, min(recommended, MAX_NODES), integer=True
        )
    if scale is not None:
        check_range("--scale", scale, 0, 1, lo_open=True)


def data_scale(designs: Sequence[DesignEntry], records: int, n_nodes: int) -> float:
    """S that keeps the design's memory per key when ``records`` are spread over ``n_nodes``."""
    keys = min(d.entries_per_node for d in designs)
    return (records / n_nodes) / max(keys, 1.0)


def default_scale(designs: Sequence[DesignEntry], n_nodes: int, replicas: int = 1) -> tuple[float, str]:
    """S and why: the design's memory per key for :data:`DEFAULT_RECORDS` local records,
    capped by :data:`MEMORY_SHARE` of this machine's memory (for every replica of every node)."""
    keys = min(d.entries_per_node for d in designs)
    by_data = data_scale(designs, DEFAULT_RECORDS, n_nodes)
    total = sum(d.memory_bytes for d in designs) * replicas
    by_memory = MEMORY_SHARE * machine_memory() / max(total, 1.0)
    if min(by_data, by_memory) >= 1.0:
        return 1.0, "the design fits unscaled"
    if by_data <= by_memory:
        return by_data, f"{DEFAULT_RECORDS:,} records over {n_nodes} nodes, designed for {keys:,.0f} keys per node"
    each = f" over {replicas} replicas of each node" if replicas > 1 else ""
    return by_memory, f"{MEMORY_SHARE:.0%} of this machine's memory{each}"


def plan_cluster(
    run_dir: Path,
    *,
    nodes: int | None = None,
    scale: float | None = None,
    wal_sync: WalSync = WalSync.GROUP_COMMIT,
    replicas: int = 1,
) -> ClusterPlan:
    """The local cluster for RUN_DIR's solution (validated; nothing is started): its shards (the
    answer's VMs over its replication factor), each node of the plan a shard that may run as
    ``replicas`` servers (a Raft group): they share this machine's memory and cores."""
    from solver.rundir import SOLUTION, read_solution
    from specs.schema import validate

    path = run_dir / SOLUTION
    sol = read_solution(path)  # version, spec, every design entry checked
    wl = validate(sol.spec_raw).workload
    designs = sol.designs
    # a replicated answer's VMs are RF copies of each shard (docs/model.md, "Replication"): its
    # shards are its VMs over RF, each deployed as ``replicas`` servers
    factor = sol.replication.factor
    counts = [max(1, d.count // factor) for d in designs]
    recommended = sum(counts)
    check_options(recommended, nodes, scale)
    n = nodes if nodes is not None else min(recommended, machine_cores(), MAX_NODES)
    per_type = allocate(counts, n)
    chosen = [d for d, k in zip(designs, per_type, strict=True) for _ in range(k)]
    s, why = (scale, "--scale") if scale is not None else default_scale(chosen, n, replicas)
    vcpu = max(1, machine_cores() // (n * replicas))
    plans = []
    for i, d in enumerate(chosen):
        name = f"{sol.spec} on {sol.provider}:{d.vm_type} (node {i} of {n}, memory x{s:.4g})"
        secs = engine_sections(
            d, wl.key_bytes, wl.value_bytes, wl.operations, name, vcpu=vcpu, wal_sync=wal_sync, scale=s
        )
        header = f"Rendered by `cosine deploy` from {path}: {name}"
        plans.append(
            NodePlan(
                i,
                d.vm_type,
                d.design_class,
                to_toml(secs, header),
                d.memory_bytes * s,
                d.entries_per_node,
            )
        )
    predicted = sol.predicted.throughput_ops
    return ClusterPlan(
        spec=sol.spec,
        provider=sol.provider,
        recommended_nodes=recommended,
        nodes=plans,
        scale=s,
        scale_reason=why,
        wal_sync=wal_sync,
        predicted_cloud_ops=predicted,
        predicted_node_ops=predicted / recommended,
    )
