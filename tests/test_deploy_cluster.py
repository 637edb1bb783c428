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

import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from cli import app
from deploy import cluster
from deploy.resp import Connection, encode
from deploy.scatter import range_scan
from deploy.twemproxy import SERVER_RETRY_TIMEOUT_MS

KEYS = 2000
#: Requests per pipeline through the proxy.
DEPTH = 16


def require(program: str, package: str) -> None:
    if shutil.which(program) is None:
        pytest.fail(f"{program} is not installed: apt-get install {package} (`make setup` installs it as root)")


def key(i: int) -> bytes:
    return b"user%06d" % i


class ProxyWriter:
    """Writes through the proxy in pipelines of :data:`DEPTH`, reconnecting after a failure;
    remembers every acknowledgement and the writes sent but not acknowledged since."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: Connection | None = None
        self.acked: dict[bytes, bytes] = {}
        self.unacked: dict[bytes, set[bytes]] = {}
        self.errors: dict[bytes, int] = {}
        self.ops = 0
        self.seq = 0

    def batch(self, ks: list[bytes]) -> None:
        vals = []
        for k in ks:
            self.seq += 1
            vals.append(b"v%d" % self.seq)
            self.unacked.setdefault(k, set()).add(vals[-1])
        self.ops += len(ks)
        replies: list[Any] = []
        try:
            if self.conn is None:
                self.conn = Connection("127.0.0.1", self.port, timeout=5.0)
            self.conn.sock.sendall(b"".join(encode("SET", k, v) for k, v in zip(ks, vals, strict=True)))
            for _ in ks:
                replies.append(self.conn.read())
        except (OSError, ConnectionError):
            if self.conn is not None:
                self.conn.close()
            self.conn = None
        for i, (k, v) in enumerate(zip(ks, vals, strict=True)):
            if i < len(replies) and replies[i] == "OK":
                self.acked[k] = v
                self.unacked[k] = set()
            else:
                self.errors[k] = self.errors.get(k, 0) + 1

    def run(self, seconds: float, rng: random.Random) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.batch([key(rng.randrange(KEYS)) for _ in range(DEPTH)])

    def holds_acked(self, k: bytes, v: bytes | None) -> bool:
        """``v`` is the last acknowledged value of ``k`` or a write sent after it (in flight at a failure)."""
        return v is not None and (v == self.acked[k] or v in self.unacked.get(k, set()))


def shard_values(ports: list[int], keys: list[bytes]) -> list[dict[bytes, bytes]]:
    """What each shard holds for ``keys``, asked directly (bypassing the proxy)."""
    out = []
    for p in ports:
        with Connection("127.0.0.1", p) as c:
            vals: Any = c.call("MGET", *keys)
            out.append({k: v for k, v in zip(keys, vals, strict=True) if v is not None})
    return out


def test_cluster_survives_a_shard_crash(solved: tuple[Path, Path, dict[str, Any]], runner: Any, tmp_path: Path) -> None:
    require("nutcracker", "nutcracker")
    _, run_dir, _ = solved
    out = tmp_path / "cluster"
    res = runner.invoke(app, ["deploy", str(run_dir), "--local", "--nodes", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    try:
        st = cluster.read_state(out)
        ports = st.shard_ports()
        assert len(ports) == 2 and st.proxy.port not in ports
        rng = random.Random(16)
        w = ProxyWriter(st.proxy.port)
        # load through the proxy (pipelined), then learn which shard owns each key
        with Connection("127.0.0.1", st.proxy.port) as c:
            replies = c.pipeline([("SET", key(i), b"init") for i in range(KEYS)])
        assert replies == ["OK"] * KEYS
        keys = [key(i) for i in range(KEYS)]
        w.acked = dict.fromkeys(keys, b"init")
        held = shard_values(ports, keys)
        owner = {k: i for i, h in enumerate(held) for k in h}
        assert len(owner) == KEYS and all(0 < len(h) < KEYS for h in held), "ketama must spread keys over both shards"
        # scans bypass the proxy: every shard, merged
        with Connection("127.0.0.1", ports[0]) as a, Connection("127.0.0.1", ports[1]) as b:
            got = range_scan([a, b], key(100), 50)
        assert [k for k, _ in got] == keys[100:150]

        w.run(0.7, rng)
        before_kill = w.ops
        cluster.kill_node(st, 1)
        w.run(2.0 + SERVER_RETRY_TIMEOUT_MS / 1000, rng)  # errors, then ejection: node-1's keys go to node-0
        cluster.start_node(st, 1)
        w.run(SERVER_RETRY_TIMEOUT_MS / 1000 + 1.5, rng)  # the retry timeout passes: node-1 rejoins the ring
        total_errors = sum(w.errors.values())

        assert w.ops > 3000, f"only {w.ops} operations through the proxy"
        assert before_kill > 0 and total_errors > 0, "the crash was not felt"
        wrong = [k for k in w.errors if owner[k] != 1]
        assert not wrong, f"{len(wrong)} keys of the live shard saw errors, e.g. {wrong[:3]}"

        held = shard_values(ports, keys)
        lost, shadowed = [], []
        for k in w.acked:
            if w.holds_acked(k, held[owner[k]].get(k)):
                continue
            if w.holds_acked(k, held[1 - owner[k]].get(k)):
                shadowed.append(k)  # acknowledged by the other shard while the owner was ejected
            else:
                lost.append(k)
        print(
            f"\n{w.ops} SETs through the proxy ({before_kill} before the kill), {total_errors} failed "
            f"(all on the killed shard's keys), {len(w.acked)} keys acknowledged, {len(shadowed)} shadowed, 0 lost"
        )
        assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:3]}"
        assert all(owner[k] == 1 for k in shadowed)
        # through the proxy, every key reads its owner's value again
        with Connection("127.0.0.1", st.proxy.port) as c:
            vals: Any = c.call("MGET", *keys)
        mismatch = [k for k, v in zip(keys, vals, strict=True) if v != held[owner[k]].get(k)]
        assert not mismatch, f"{len(mismatch)} keys read through the proxy differ from their shard"
        status = runner.invoke(app, ["deploy", str(run_dir), "--status", "--out", str(out), "--json"])
        assert status.exit_code == 0, status.output
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
