"""Faults under load: write through the proxy (or, with replicas, through the Redis
Cluster protocol) while a shard is killed and restarted, then account for every
acknowledged write.

:class:`AckLedger` writes pipelines of SETs through the proxy and remembers, per key,
the last acknowledged value and the values sent after it that were not acknowledged
(in flight when a shard died: they may or may not have been applied). :func:`audit`
reads every shard directly afterwards and classifies each acknowledged key:

* ``on_owner``: the key's shard (the one ketama maps it to) holds it;
* ``shadowed``: another shard holds it: it was acknowledged while its shard was
  ejected (``auto_eject_hosts``: twemproxy maps an ejected shard's keys to the next
  shard of the ring until the retry timeout), and once the shard is back reads go
  to it again and no longer see this value;
* ``lost``: no shard holds it.

With replicated shards (``cosine deploy --replicas RF``) the same ledger writes through a
:class:`deploy.rcluster.ClusterClient` (``seeds``): a key has one shard and no other shard
ever acknowledges it, so :func:`audit_cluster` classifies each acknowledged key as held
(the value read back through its shard's leader is the last acknowledged one or one sent
after it) or **lost**; :func:`audit_replicas` reads every replica itself (``READONLY``, a
deployment with eventual reads) once they have caught up. :class:`Reader` counts reads of
keys that exist answered "not found"; :class:`Prober` measures how long a shard acknowledges
no write (the unavailability window).

Used by tests/test_deploy_cluster.py, tests/test_deploy_raft.py, bench/ycsb_bench.py and
bench/raft_faults.py.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deploy.rcluster import ClusterClient, Unknown, key_slot
from measure.resp import Connection, RespError, encode

HOST = "127.0.0.1"


def shard_values(ports: list[int], keys: list[bytes], chunk: int = 1000) -> list[dict[bytes, bytes]]:
    """What each shard holds for ``keys``, asked directly (bypassing the proxy)."""
    out = []
    for p in ports:
        held: dict[bytes, bytes] = {}
        with Connection(HOST, p) as c:
            for i in range(0, len(keys), chunk):
                part = keys[i : i + chunk]
                vals: Any = c.call("MGET", *part)
                held.update({k: v for k, v in zip(part, vals, strict=True) if v is not None})
        out.append(held)
    return out


def owners(ports: list[int], keys: list[bytes]) -> dict[bytes, int]:
    """The shard index holding each key (after a load through the proxy, before any fault)."""
    return {k: i for i, h in enumerate(shard_values(ports, keys)) for k in h}


@dataclass
class AckLedger:
    """SETs through the proxy in pipelines of ``depth``; what was acknowledged and what failed."""

    port: int
    depth: int = 16
    acked: dict[bytes, bytes] = field(default_factory=dict)
    unacked: dict[bytes, set[bytes]] = field(default_factory=dict)
    errors: dict[bytes, int] = field(default_factory=dict)
    ops: int = 0
    seq: int = 0
    conn: Connection | None = None
    #: a replicated deployment's servers: write through the Redis Cluster protocol instead of the proxy
    seeds: list[tuple[str, int]] | None = None
    client: ClusterClient | None = None

    def batch(self, ks: list[bytes]) -> None:
        vals = []
        for k in ks:
            self.seq += 1
            vals.append(b"v%d" % self.seq)
            self.unacked.setdefault(k, set()).add(vals[-1])
        self.ops += len(ks)
        replies: list[Any] = []
        if self.seeds is not None:
            try:
                if self.client is None:
                    self.client = ClusterClient(self.seeds, timeout=5.0)
                replies = self.client.pipeline([("SET", k, v) for k, v in zip(ks, vals, strict=True)])
            except (OSError, ConnectionError):
                if self.client is not None:
                    self.client.close()
                self.client = None
        else:
            try:
                if self.conn is None:
                    self.conn = Connection(HOST, self.port, timeout=5.0)
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

    def run(self, seconds: float, pick: Callable[[], bytes]) -> None:
        """Write for ``seconds``, each key drawn by ``pick``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.batch([pick() for _ in range(self.depth)])

    def holds_acked(self, k: bytes, v: bytes | None) -> bool:
        """``v`` is the last acknowledged value of ``k`` or a write sent after it."""
        return v is not None and (v == self.acked[k] or v in self.unacked.get(k, set()))


@dataclass
class Audit:
    on_owner: int
    shadowed: list[bytes]
    lost: list[bytes]
    errors_on_other_shards: list[bytes]
    errors: int


def audit(ledger: AckLedger, ports: list[int], owner: dict[bytes, int], killed: int) -> Audit:
    """Classify every acknowledged key by where it is now (see the module doc)."""
    keys = sorted(ledger.acked)
    held = shard_values(ports, keys)
    on_owner, shadowed, lost = 0, [], []
    for k in keys:
        if ledger.holds_acked(k, held[owner[k]].get(k)):
            on_owner += 1
        elif any(ledger.holds_acked(k, h.get(k)) for i, h in enumerate(held) if i != owner[k]):
            shadowed.append(k)
        else:
            lost.append(k)
    wrong = [k for k in ledger.errors if owner[k] != killed]
    return Audit(on_owner, shadowed, lost, wrong, sum(ledger.errors.values()))


def random_keys(keys: list[bytes], seed: int) -> Callable[[], bytes]:
    rng = random.Random(seed)
    return lambda: keys[rng.randrange(len(keys))]


@dataclass
class ClusterAudit:
    held: int
    lost: list[bytes]
    errors: int


def read_all(client: ClusterClient, keys: Sequence[bytes], chunk: int = 500) -> dict[bytes, bytes | None]:
    """Every key's value through its shard's leader (linearizable reads); retries a read whose
    connection broke (a read changes nothing)."""
    out: dict[bytes, bytes | None] = {}
    todo = list(keys)
    for _ in range(20):
        again = []
        for i in range(0, len(todo), chunk):
            part = todo[i : i + chunk]
            for k, v in zip(part, client.pipeline([("GET", k) for k in part]), strict=True):
                if isinstance(v, RespError):
                    again.append(k)
                else:
                    out[k] = v if isinstance(v, bytes) else None
        if not again:
            return out
        todo = again
        time.sleep(0.2)
    raise ConnectionError(f"{len(todo)} keys could not be read back")


def audit_cluster(ledger: AckLedger, seeds: Sequence[tuple[str, int]]) -> ClusterAudit:
    """Reads every acknowledged key back through its shard's leader: held or lost."""
    with ClusterClient(list(seeds), timeout=5.0, patience=30.0) as c:
        got = read_all(c, sorted(ledger.acked))
    lost = [k for k, v in got.items() if not ledger.holds_acked(k, v)]
    return ClusterAudit(len(got) - len(lost), lost, sum(ledger.errors.values()))


def audit_replicas(
    ledger: AckLedger, replicas: Sequence[tuple[int, int]], slots: Sequence[tuple[int, int]]
) -> dict[int, list[bytes]]:
    """Per replica (its shard's index, its port), the acknowledged keys of its shard it does not
    hold, read on the replica itself with READONLY (a deployment with eventual reads), once every
    replica has applied what its leader has (the caller waits)."""
    out: dict[int, list[bytes]] = {}
    for shard, port in replicas:
        lo, hi = slots[shard]
        keys = [k for k in sorted(ledger.acked) if lo <= key_slot(k) <= hi]
        missing: list[bytes] = []
        with Connection(HOST, port, timeout=10.0) as c:
            if c.call("READONLY") != "OK":
                raise ConnectionError(f"port {port} refuses READONLY")
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                for k, v in zip(part, c.pipeline([("GET", k) for k in part]), strict=True):
                    if isinstance(v, RespError) or not ledger.holds_acked(k, v if isinstance(v, bytes) else None):
                        missing.append(k)
        out[port] = missing
    return out


@dataclass
class Reader:
    """GETs of keys that exist (loaded before, never deleted) through the cluster: a nil answer
    is a read wrongly answered "not found"."""

    seeds: list[tuple[str, int]]
    keys: list[bytes]
    ok: int = 0
    not_found: int = 0
    errors: int = 0
    done: list[float] = field(default_factory=list)  # monotonic times of answered reads

    def run(self, seconds: float, seed: int = 11, depth: int = 8) -> None:
        rng = random.Random(seed)
        end = time.monotonic() + seconds
        client: ClusterClient | None = None
        while time.monotonic() < end:
            ks = [self.keys[rng.randrange(len(self.keys))] for _ in range(depth)]
            try:
                if client is None:
                    client = ClusterClient(self.seeds, timeout=5.0)
                replies = client.pipeline([("GET", k) for k in ks])
            except (OSError, ConnectionError):
                self.errors += depth
                client = None
                time.sleep(0.05)
                continue
            now = time.monotonic()
            for r in replies:
                if isinstance(r, RespError):
                    self.errors += 1
                elif r is None:
                    self.not_found += 1
                else:
                    self.ok += 1
                    self.done.append(now)
        if client is not None:
            client.close()


@dataclass
class Prober:
    """One SET every ``interval`` seconds to a key of each shard; the times each was acknowledged."""

    seeds: list[tuple[str, int]]
    slots: list[tuple[int, int]]
    interval: float = 0.01
    acks: dict[int, list[float]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def keys(self) -> list[bytes]:
        """A key in each shard's slots ({tag} keys)."""
        out = []
        for lo, hi in self.slots:
            tag = next(t for t in range(100_000) if lo <= key_slot(b"{%d}" % t) <= hi)
            out.append(b"{%d}probe" % tag)
        return out

    def run(self) -> None:
        keys = self.keys()
        self.acks = {s: [] for s in range(len(keys))}
        clients: dict[int, ClusterClient] = {}

        def one(s: int) -> None:
            n = 0
            while not self._stop.is_set():
                n += 1
                try:
                    c = clients.get(s) or clients.setdefault(s, ClusterClient(self.seeds, timeout=2.0, patience=2.0))
                    r = c.call("SET", keys[s], b"%d" % n)
                except (OSError, ConnectionError):
                    clients.pop(s, None)
                    r = None
                if r == "OK":
                    self.acks[s].append(time.monotonic())
                time.sleep(self.interval)

        threads = [threading.Thread(target=one, args=(s,), daemon=True) for s in range(len(keys))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in clients.values():
            c.close()

    def stop(self) -> None:
        self._stop.set()

    def window(self, shard: int, start: float, end: float) -> float:
        """The longest time shard ``shard`` acknowledged no write, among gaps that overlap [start, end]."""
        times = self.acks.get(shard, [])
        gaps = [(b - a) for a, b in zip(times, times[1:], strict=False) if b >= start and a <= end]
        return max(gaps, default=end - start)


def unknown(r: Any) -> bool:
    """A reply saying the request may or may not have been executed."""
    return isinstance(r, Unknown)
