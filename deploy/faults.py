"""Faults under load: write through the proxy while a shard is killed and restarted,
then account for every acknowledged write.

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

Used by tests/test_deploy_cluster.py and bench/ycsb_faults.py.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deploy.resp import Connection, encode

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
