"""Replicated shards: each node of the plan becomes a shard of RF cosine-server replicas,
a Raft group (engine-template/crates/cosine-raft), and clients route themselves with the
Redis Cluster protocol (``CLUSTER SLOTS``, ``-MOVED``) instead of going through twemproxy.

:func:`topology` writes ``cluster.json``, the file every replica reads (``cosine-server
--cluster FILE --node-id N``): the shards, their hash slots (16,384 split evenly, in shard
order), each replica's RESP and bus ports, the read consistency and the Raft timing.
:func:`leaders` asks every replica whom it follows; :func:`wait_leaders` waits until every
shard has a leader a majority of its replicas follow; :func:`shard_views` is each shard as
``cosine deploy --status`` shows it (its replicas, those that answer, its leader).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from measure.resp import info
from specs.errors import check_range

if TYPE_CHECKING:
    from deploy.cluster import DeployState, NodeState
    from solver.rundir import Solution

SLOTS = 16384
HOST = "127.0.0.1"
#: Most replicas per shard (the bill's replication factor is 1..3).
MAX_REPLICAS = 3
#: Seconds a started cluster may take to elect a leader in every shard.
ELECTION_TIMEOUT_S = 30.0


class Routing(StrEnum):
    """How clients reach a deployment's shards."""

    PROXY = "proxy"  # through nutcracker (twemproxy), one server per shard
    CLUSTER = "cluster"  # the Redis Cluster protocol, to each shard's Raft leader


class Consistency(StrEnum):
    """Which replicas answer reads (``cluster.json``'s ``consistency``)."""

    STRONG = "strong"  # every read through the shard's leader, after a heartbeat round: linearizable
    EVENTUAL = "eventual"  # a connection that sent READONLY reads its replica as it is (may be stale)


@dataclass(frozen=True)
class RaftTiming:
    """The Raft groups' timing (cosine-raft's ``Timing``; its defaults)."""

    heartbeat_ms: int = 100
    election_min_ms: int = 500
    election_max_ms: int = 1000
    snapshot_entries: int = 20_000
    keep_entries: int = 1000
    request_timeout_ms: int = 5000


def default_replicas(sol: Solution) -> tuple[int, str]:
    """The solution's replication factor (solution.json ``replication.factor``: the copies of every
    entry the answer pays for) and where it comes from."""
    r = sol.replication
    return r.factor, f"the solution's replication factor ({r.label})"


def check_replicas(replicas: int, routing: Routing) -> None:
    """``--replicas`` 1..3; twemproxy routes to one server per shard, so replicas need cluster routing."""
    check_range("--replicas", replicas, 1, MAX_REPLICAS, integer=True)
    if replicas > 1 and routing == Routing.PROXY:
        from specs.errors import InputError

        raise InputError(
            f"--replicas {replicas} with --routing proxy: twemproxy sends a key to one server, "
            "it cannot follow a shard's leader; replicas are reached with --routing cluster (the default for RF > 1)"
        )


def slot_ranges(shards: int) -> list[tuple[int, int]]:
    """The hash slots of each shard: 16,384 split evenly, in order."""
    return [(s * SLOTS // shards, (s + 1) * SLOTS // shards - 1) for s in range(shards)]


def topology(nodes: Sequence[NodeState], consistency: Consistency, timing: RaftTiming) -> dict[str, Any]:
    """``cluster.json`` for the replicas ``nodes`` (grouped by their ``shard``)."""
    shard_ids = sorted({n.shard for n in nodes})
    replicas = {s: [(n.raft_id, n.port, n.bus_port) for n in nodes if n.shard == s] for s in shard_ids}
    return cluster_json(replicas, consistency, timing)


def cluster_json(
    replicas: Mapping[int, Sequence[tuple[int | None, int, int | None]]], consistency: Consistency, timing: RaftTiming
) -> dict[str, Any]:
    """``cluster.json`` for each shard's replicas as (Raft id, RESP port, bus port), shards in order."""
    shards = []
    for (s, reps), (lo, hi) in zip(sorted(replicas.items()), slot_ranges(len(replicas)), strict=True):
        entries = [{"id": rid, "host": HOST, "port": port, "bus_port": bus} for rid, port, bus in reps]
        shards.append({"id": s, "slots": [[lo, hi]], "replicas": entries})
    return {"consistency": str(consistency), "raft": vars(timing), "shards": shards}


def replication(port: int) -> dict[str, str] | None:
    """``INFO replication`` of the server on ``port``; None if it does not answer."""
    try:
        return info(HOST, port, "replication", timeout=1.0)
    except (OSError, ConnectionError):
        return None


@dataclass(frozen=True)
class ShardView:
    """One shard as its replicas report it (``cosine deploy --status``)."""

    shard: int
    replicas: tuple[str, ...]  # every replica's name, in order
    answering: tuple[str, ...]  # those that answered INFO
    leader: str | None  # the replica that says it leads and a majority of the shard follows; None: no leader
    term: int | None  # the leader's term

    @property
    def degraded(self) -> bool:
        """A replica does not answer, or the shard has no leader (it takes no writes)."""
        return self.leader is None or len(self.answering) < len(self.replicas)


Views = Mapping[int, Mapping[str, str] | None]


def leader_index(st: DeployState, views: Views, shard: int) -> int | None:
    """The index (in ``st.nodes``) of the replica of ``shard`` that says it leads and that a
    majority of the shard's replicas follow, from their ``INFO replication`` ``views`` (None:
    did not answer); None while there is none. (A paused old leader still says "leader": the
    majority decides.)"""
    return majority_leader({i: str(st.nodes[i].raft_id) for i in st.members(shard)}, views)


def majority_leader(raft_ids: Mapping[int, str], views: Views) -> int | None:
    """Of the replicas ``raft_ids`` (index -> Raft id), the one whose ``INFO replication`` view
    says it leads and that a majority of them follow (a replica without a view follows no one)."""
    for i, rid in raft_ids.items():
        v = views.get(i)
        if not v or v.get("raft_state") != "leader":
            continue
        follow = sum(1 for j in raft_ids if (views.get(j) or {}).get("raft_leader") == rid)
        if 2 * follow > len(raft_ids):
            return i
    return None


def shard_views(st: DeployState, views: Views) -> list[ShardView]:
    """Every shard of a replicated deployment, from its replicas' ``views``."""
    out = []
    for shard in sorted({n.shard for n in st.nodes}):
        members = st.members(shard)
        lead = leader_index(st, views, shard)
        term = (views.get(lead) or {}).get("raft_term") if lead is not None else None
        out.append(
            ShardView(
                shard,
                tuple(st.nodes[i].name for i in members),
                tuple(st.nodes[i].name for i in members if views.get(i)),
                st.nodes[lead].name if lead is not None else None,
                int(term) if term is not None and term.isdigit() else None,
            )
        )
    return out


def leaders(st: DeployState) -> dict[int, int | None]:
    """Per shard, the index (in ``st.nodes``) of its leader (:func:`leader_index`); None while there is none."""
    views = {i: replication(n.port) for i, n in enumerate(st.nodes)}
    return {shard: leader_index(st, views, shard) for shard in sorted({n.shard for n in st.nodes})}


def wait_leaders(st: DeployState, timeout: float = ELECTION_TIMEOUT_S) -> dict[int, int]:
    """Waits until every shard has a leader; {shard: node index}."""
    deadline = time.monotonic() + timeout
    while True:
        got = leaders(st)
        if all(v is not None for v in got.values()):
            return {k: v for k, v in got.items() if v is not None}
        if time.monotonic() > deadline:
            missing = [s for s, v in got.items() if v is None]
            raise RuntimeError(f"shards {missing} have no leader {timeout:.0f} s after the start")
        time.sleep(0.05)
