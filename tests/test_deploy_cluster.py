"""`cosine deploy` end to end: 2 cosine-servers + nutcracker on loopback, a few
thousand operations through the proxy, one shard SIGKILLed under load and
restarted, every acknowledged write checked.

With ``auto_eject_hosts`` twemproxy answers errors for the dead shard's keys
until it ejects the shard, then maps those keys to the other shard until the
retry timeout; writes acknowledged in that window live on the other shard and
are shadowed once the shard is back (twemproxy's documented behaviour for
ejection). The test checks that errors hit the dead shard's keys only, and that
every acknowledged write is on the shard that acknowledged it — none lost.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from cli.main import app
from deploy import cluster, twemproxy
from deploy.faults import AckLedger, audit, owners, random_keys, shard_values
from deploy.scatter import range_scan
from deploy.twemproxy import SERVER_RETRY_TIMEOUT_MS
from measure.resp import Connection

KEYS = 2000


def require(program: str, package: str) -> None:
    if shutil.which(program) is None:
        pytest.fail(f"{program} is not installed: apt-get install {package} (`make setup` installs it as root)")


def key(i: int) -> bytes:
    return b"user%06d" % i


def test_cluster_survives_a_shard_crash(solved: tuple[Path, Path, dict[str, Any]], runner: Any, tmp_path: Path) -> None:
    require("nutcracker", "nutcracker")
    _, run_dir, _ = solved
    out = tmp_path / "cluster"
    res = runner.invoke(app, ["deploy", str(run_dir), "--local", "--nodes", "2", "--replicas", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    try:
        st = cluster.read_state(out)
        ports = st.shard_ports()
        assert len(ports) == 2 and st.proxy.port not in ports
        w = AckLedger(st.proxy.port)
        # load through the proxy (pipelined), then learn which shard owns each key
        keys = [key(i) for i in range(KEYS)]
        with Connection("127.0.0.1", st.proxy.port) as c:
            assert c.pipeline([("SET", k, b"init") for k in keys]) == ["OK"] * KEYS
        w.acked = dict.fromkeys(keys, b"init")
        owner = owners(ports, keys)
        assert len(owner) == KEYS and 0 < sum(owner.values()) < KEYS, "ketama must spread keys over both shards"
        # scans bypass the proxy: every shard, merged
        with Connection("127.0.0.1", ports[0]) as a, Connection("127.0.0.1", ports[1]) as b:
            got = range_scan([a, b], key(100), 50)
        assert [k for k, _ in got] == keys[100:150]

        pick = random_keys(keys, 16)
        w.run(0.7, pick)
        before_kill = w.ops
        cluster.kill_node(st, 1)
        w.run(2.0 + SERVER_RETRY_TIMEOUT_MS / 1000, pick)  # errors, then ejection: node-1's keys go to node-0
        cluster.start_node(st, 1)
        w.run(SERVER_RETRY_TIMEOUT_MS / 1000 + 1.5, pick)  # the retry timeout passes: node-1 rejoins the ring
        a = audit(w, ports, owner, killed=1)
        print(
            f"\n{w.ops} SETs through the proxy ({before_kill} before the kill), {a.errors} failed, "
            f"{a.on_owner} keys on their shard, {len(a.shadowed)} shadowed, {len(a.lost)} lost"
        )
        assert w.ops > 3000, f"only {w.ops} SETs through the proxy"
        assert before_kill > 0 and a.errors > 0, "the crash was not felt"
        pool = twemproxy.stats(st.proxy.stats_port)[twemproxy.POOL]
        assert pool["server_ejects"] >= 1, "the proxy never ejected the dead shard"
        assert pool["node-1"]["server_err"] > 0 and pool["node-0"]["server_err"] == 0
        assert not a.errors_on_other_shards, f"{len(a.errors_on_other_shards)} keys of the live shard saw errors"
        assert not a.lost, f"{len(a.lost)} acknowledged writes lost, e.g. {a.lost[:3]}"
        assert all(owner[k] == 1 for k in a.shadowed)
        # through the proxy, every key reads its owner's value again
        held = shard_values(ports, keys)
        with Connection("127.0.0.1", st.proxy.port) as c:
            vals: Any = c.call("MGET", *keys)
        mismatch = [k for k, v in zip(keys, vals, strict=True) if v != held[owner[k]].get(k)]
        assert not mismatch, f"{len(mismatch)} keys read through the proxy differ from their shard"
        status = runner.invoke(app, ["deploy", str(run_dir), "--status", "--out", str(out), "--json"])
        assert status.exit_code == 0, status.output
        assert json.loads(status.stdout)["health"] == {"status": "running", "down": [], "leaderless": [], "shards": []}
        # issue 46.5: the proxy killed, the cluster is degraded (on 18f96a3: "running", exit 0)
        assert st.proxy.pid is not None
        os.kill(st.proxy.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while cluster.alive(st.proxy.pid, cluster.PROXY) and time.monotonic() < deadline:
            time.sleep(0.05)
        status = runner.invoke(app, ["deploy", str(run_dir), "--status", "--out", str(out), "--json"])
        assert status.exit_code == 1, status.output
        assert json.loads(status.stdout)["health"] == {
            "status": "degraded",
            "down": ["nutcracker"],
            "leaderless": [],
            "shards": [],
        }
        plain = runner.invoke(app, ["deploy", str(run_dir), "--status", "--out", str(out)])
        assert plain.exit_code == 1 and "degraded (nutcracker down)" in " ".join(plain.stdout.split())
    finally:
        stop = runner.invoke(app, ["deploy", str(run_dir), "--down", "--out", str(out)])
    assert stop.exit_code == 0, stop.output
    st = cluster.read_state(out)
    assert st.status == cluster.STOPPED
    assert not any(cluster.alive(n.pid, cluster.SERVER) for n in st.nodes)
    assert sorted(p.name for p in out.iterdir()) == [
        "node-0",
        "node-1",
        "nutcracker.log",
        "nutcracker.yml",
        "state.json",
    ], "the deployment wrote something unexpected"
