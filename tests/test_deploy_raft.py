"""`cosine deploy --local --replicas 3` end to end: 2 shards, each a Raft group of 3
cosine-servers on loopback, reached with the Redis Cluster protocol (no proxy).

Keys load through deploy.rcluster.ClusterClient (CLUSTER SLOTS, -MOVED) and through
`redis-cli -c`; a scan is scatter-gathered over the shards' leaders; then a writer
(deploy/faults.py's ledger) writes while the leader of shard 1 is SIGKILLed and restarted,
a reader reads keys that exist the whole time, and afterwards every acknowledged write reads
back through the leaders and from every replica itself (READONLY), and no read of an existing
key answered "not found". Then `--status` names every replica, its role and each shard's
leader; with a shard's leader and a follower killed it is degraded (exit 1) and that shard has
no leader; `--local` again starts the replicas that are down; `--down` stops every replica and
`--local` starts the stopped deployment again on its data (every acknowledged write still
there). Bounded: ~25 s.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cli.main import app
from deploy import cluster, raft
from deploy.faults import AckLedger, Reader, audit_cluster, audit_replicas, random_keys
from deploy.rcluster import ClusterClient, crc16, key_slot
from deploy.scatter import range_scan
from measure.resp import Connection
from specs.errors import InputError

KEYS = 2000


def key(i: int) -> bytes:
    return b"user%06d" % i


def test_slots_and_topology() -> None:
    assert crc16(b"123456789") == 0x31C3
    assert key_slot(b"foo") == 12182 and key_slot(b"{user1000}.a") == key_slot(b"{user1000}.b")
    assert key_slot(b"foo{}{bar}") == crc16(b"foo{}{bar}") % 16384
    assert raft.slot_ranges(2) == [(0, 8191), (8192, 16383)]
    assert raft.slot_ranges(3)[-1] == (10922, 16383)
    with pytest.raises(InputError, match="twemproxy"):
        raft.check_replicas(3, raft.Routing.PROXY)
    with pytest.raises(InputError, match="--replicas"):
        raft.check_replicas(4, raft.Routing.CLUSTER)


def test_replicated_cluster_survives_a_leader_crash(
    solved: tuple[Path, Path, dict[str, Any]], runner: Any, tmp_path: Path
) -> None:
    _, run_dir, _ = solved
    out = tmp_path / "cluster"
    args = ["deploy", str(run_dir), "--local", "--nodes", "2", "--replicas", "3", "--consistency", "eventual"]
    res = runner.invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    try:
        st = cluster.read_state(out)
        assert (st.routing, st.replicas, st.shards, len(st.nodes), st.proxy) == ("cluster", 3, 2, 6, None)
        topo = json.loads(Path(str(st.cluster_file)).read_text())
        assert [s["slots"] for s in topo["shards"]] == [[[0, 8191]], [[8192, 16383]]]
        seeds = st.seeds()
        keys = [key(i) for i in range(KEYS)]
        with ClusterClient(seeds) as c:
            assert c.pipeline([("SET", k, b"init") for k in keys]) == ["OK"] * KEYS
            assert c.call("GET", key(7)) == b"init"
        assert 0 < sum(1 for k in keys if key_slot(k) < 8192) < KEYS, "keys must spread over both shards"
        if shutil.which("redis-cli"):
            port = str(st.nodes[0].port)
            cli = ["redis-cli", "-c", "-p", port]
            assert subprocess.run([*cli, "SET", "cli-key", "x"], capture_output=True, text=True).stdout.strip() == "OK"
            assert subprocess.run([*cli, "GET", "cli-key"], capture_output=True, text=True).stdout.strip() == "x"
        # scans: RANGE on every shard's leader, merged
        leaders = raft.wait_leaders(st)
        conns = [Connection("127.0.0.1", st.nodes[i].port) for i in leaders.values()]
        try:
            got = range_scan(conns, key(100), 50)
        finally:
            for c in conns:
                c.close()
        assert [k for k, _ in got] == keys[100:150]
        # status: every replica up, one leader per shard
        state, rows = cluster.status(out)
        assert cluster.health(state, rows).status == "running"
        assert sorted(r["info"].get("raft_state") for r in rows) == ["follower"] * 4 + ["leader"] * 2

        ledger = AckLedger(0, seeds=seeds)
        ledger.acked = dict.fromkeys(keys, b"init")
        reader = Reader(seeds, keys)
        t = threading.Thread(target=reader.run, args=(5.0,))
        t.start()
        pick = random_keys(keys, 16)
        ledger.run(0.8, pick)
        before = ledger.ops
        victim = leaders[1]
        killed_at = time.monotonic()
        cluster.kill_node(st, victim)
        ledger.run(2.0, pick)
        cluster.start_node(st, victim)
        ledger.run(1.2, pick)
        t.join()
        new = raft.wait_leaders(st)
        a = audit_cluster(ledger, seeds)
        print(
            f"\n{ledger.ops} SETs ({before} before the kill of {st.nodes[victim].name}, "
            f"{time.monotonic() - killed_at:.1f} s ago), {a.errors} not acknowledged, {a.held} keys held, "
            f"{len(a.lost)} lost; reads {reader.ok} ok, {reader.not_found} not found, {reader.errors} errors"
        )
        assert ledger.ops > 2000 and before > 0, f"only {ledger.ops} SETs"
        assert not a.lost, f"{len(a.lost)} acknowledged writes lost, e.g. {a.lost[:5]}"
        assert reader.ok > 500 and reader.not_found == 0
        assert new[1] != victim or leaders[1] == victim  # (a new leader, or the same after re-election)
        # every replica, read on itself once it has applied what its leader has
        deadline = time.monotonic() + 20
        while True:
            idx = {i: (raft.replication(n.port) or {}).get("raft_applied_index") for i, n in enumerate(st.nodes)}
            lead = {s: idx[i] for s, i in new.items()}
            if all(idx[i] == lead[n.shard] for i, n in enumerate(st.nodes)):
                break
            assert time.monotonic() < deadline, f"replicas did not catch up: {idx}"
            time.sleep(0.1)
        ranges = raft.slot_ranges(st.shards)
        missing = audit_replicas(ledger, [(n.shard, n.port) for n in st.nodes], ranges)
        assert all(not m for m in missing.values()), {p: len(m) for p, m in missing.items()}

        # --status names every replica, its role, each shard's leader
        doc = status_json(runner, run_dir, out, 0)
        assert doc["health"]["status"] == "running" and doc["health"]["leaderless"] == []
        assert [s["leader"] for s in doc["health"]["shards"]] == [st.nodes[new[s]].name for s in (0, 1)]
        roles = {p["name"]: p["role"] for p in doc["processes"]}
        assert sorted(roles) == sorted(n.name for n in st.nodes)
        assert sorted(roles.values()) == ["follower"] * 4 + ["leader"] * 2
        # shard 0 loses its leader and a follower: degraded (exit 1), no leader there, shard 1 unaffected
        gone = [new[0], next(i for i in st.members(0) if i != new[0])]
        for i in gone:
            cluster.kill_node(st, i)
        doc = status_json(runner, run_dir, out, 1)
        h = doc["health"]
        assert h["status"] == "degraded" and sorted(h["down"]) == sorted(st.nodes[i].name for i in gone)
        assert h["leaderless"] == [0] and h["shards"][1]["leader"] == st.nodes[new[1]].name
        assert h["shards"][0]["answering"] == [n.name for i, n in enumerate(st.nodes) if n.shard == 0 and i not in gone]
        assert {p["name"]: p["role"] for p in doc["processes"]}[st.nodes[gone[0]].name] == "down"
        res = runner.invoke(app, ["deploy", str(run_dir), "--status", "--out", str(out)])
        assert res.exit_code == 1 and "degraded" in res.stdout and "shard 0: no leader" in res.stdout, res.stdout
        # --local on it starts the replicas that are down (the same configuration, or refused)
        res = runner.invoke(app, [*args[:-2], "--consistency", "strong", "--out", str(out)])
        assert res.exit_code == 2 and "restart the same" in res.stderr, res.stderr
        res = runner.invoke(app, [*args, "--out", str(out)])
        assert res.exit_code == 0, res.output + res.stderr
        st = cluster.read_state(out)
        assert all(cluster.alive(n.pid, cluster.SERVER) for n in st.nodes)
        assert status_json(runner, run_dir, out, 0)["health"]["status"] == "running"
        assert not audit_cluster(ledger, seeds).lost
    finally:
        res = runner.invoke(app, ["deploy", str(run_dir), "--down", "--out", str(out)])
        assert res.exit_code == 0, res.output + res.stderr
    st = cluster.read_state(out)
    assert st.status == "stopped" and all(not cluster.alive(n.pid, cluster.SERVER) for n in st.nodes)
    doc = status_json(runner, run_dir, out, 0)
    assert doc["health"]["status"] == "stopped" and {p["role"] for p in doc["processes"]} == {"down"}
    # a stopped replicated deployment starts again on its data
    res = runner.invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    try:
        assert not audit_cluster(ledger, seeds).lost
    finally:
        res = runner.invoke(app, ["deploy", str(run_dir), "--down", "--out", str(out)])
        assert res.exit_code == 0, res.output + res.stderr


def status_json(runner: Any, run_dir: Path, out: Path, code: int) -> Any:
    """`cosine deploy --status --json`, its exit code checked."""
    res = runner.invoke(app, ["deploy", str(run_dir), "--status", "--json", "--out", str(out)])
    assert res.exit_code == code, res.output + res.stderr
    return json.loads(res.stdout)
