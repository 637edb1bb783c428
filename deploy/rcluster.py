"""A small Redis Cluster client (RESP2, blocking): slots from ``CLUSTER SLOTS``, keys routed
by CRC16 with hash tags, ``-MOVED`` followed, retries while a shard elects a leader.

Enough for the replicated deployment's tests and fault benchmarks (``cosine deploy --local
--replicas RF``: each shard a Raft group of cosine-servers speaking the Redis Cluster
protocol, engine-template/crates/cosine-server/src/cluster.rs). Requests whose outcome is
unknown (the connection broke after they were sent, or the server said the write may still
commit) are answered with an :class:`Unknown` error, never retried: retrying is the
caller's choice (a ``GET`` may be retried, a ledger of acknowledged writes must know).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from measure.resp import Connection, Reply, RespError, encode

SLOTS = 16384
HOST = "127.0.0.1"
#: Seconds a request keeps following redirections and waiting out elections.
DEFAULT_PATIENCE_S = 10.0

Addr = tuple[str, int]


class Unknown(RespError):
    """A request that may or may not have been executed."""


def crc16(data: bytes) -> int:
    """CRC16/XMODEM, the hash of Redis Cluster (``crc16("123456789") == 0x31C3``)."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key: bytes) -> int:
    """The hash slot of ``key``: of its hash tag (between the first ``{`` and the next ``}``, if not empty)."""
    open_ = key.find(b"{")
    if open_ >= 0:
        close = key.find(b"}", open_ + 1)
        if close > open_ + 1:
            key = key[open_ + 1 : close]
    return crc16(key) % SLOTS


def _moved(r: Reply) -> Addr | None:
    if isinstance(r, RespError) and str(r).startswith("MOVED "):
        host, port = str(r).split()[2].rsplit(":", 1)
        return host, int(port)
    return None


def _no_leader(r: Reply) -> bool:
    """An error saying the request was not executed and may be retried at once elsewhere or later."""
    return isinstance(r, RespError) and str(r).startswith(("CLUSTERDOWN the shard has no leader", "TRYAGAIN"))


class ClusterClient:
    """Routes requests by key slot to the shard leaders a cluster reports."""

    def __init__(self, seeds: Sequence[Addr], timeout: float = 5.0, patience: float = DEFAULT_PATIENCE_S) -> None:
        self.seeds = list(seeds)
        self.timeout, self.patience = timeout, patience
        self.slots: list[Addr | None] = [None] * SLOTS
        self.conns: dict[Addr, Connection] = {}
        self.refresh()

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> None:
        """The slot map from ``CLUSTER SLOTS`` of the first node that answers."""
        known = {a for a in self.slots if a is not None}
        for addr in [*known, *self.seeds]:
            try:
                with Connection(*addr, timeout=self.timeout) as c:
                    ranges: Any = c.call("CLUSTER", "SLOTS")
            except (OSError, ConnectionError, RespError):
                continue
            for lo, hi, leader, *_ in ranges:
                node = (leader[0].decode(), int(leader[1]))
                for s in range(int(lo), int(hi) + 1):
                    self.slots[s] = node
            return
        raise ConnectionError(f"no node of the cluster answers CLUSTER SLOTS (seeds {self.seeds})")

    def conn(self, addr: Addr) -> Connection:
        c = self.conns.get(addr)
        if c is None:
            c = self.conns[addr] = Connection(*addr, timeout=self.timeout)
        return c

    def drop(self, addr: Addr) -> None:
        c = self.conns.pop(addr, None)
        if c is not None:
            c.close()

    def node_of(self, key: bytes) -> Addr:
        node = self.slots[key_slot(key)]
        if node is None:
            self.refresh()
            node = self.slots[key_slot(key)]
        if node is None:
            raise ConnectionError(f"no node serves the slot of {key!r}")
        return node

    def call(self, *args: bytes | str | int) -> Reply:
        """One keyed request (``args[1]`` is its key); an error reply is returned, not raised."""
        return self.pipeline([args])[0]

    def pipeline(self, requests: Sequence[tuple[bytes | str | int, ...]]) -> list[Reply]:
        """Keyed requests, pipelined per node; replies in request order. Redirected requests and
        requests refused during an election are sent again (until ``patience``); requests whose
        connection broke get :class:`Unknown`."""
        replies: list[Reply] = [None] * len(requests)
        todo = list(range(len(requests)))
        deadline = time.monotonic() + self.patience
        while todo:
            groups: dict[Addr, list[int]] = {}
            for i in todo:
                key = requests[i][1]
                k = key if isinstance(key, bytes) else str(key).encode()
                try:
                    groups.setdefault(self.node_of(k), []).append(i)
                except ConnectionError as exc:
                    replies[i] = RespError(str(exc))
            todo = []
            for addr, idx in groups.items():
                try:
                    c = self.conn(addr)
                except OSError:
                    self.drop(addr)
                    todo += idx  # nothing was sent
                    continue
                try:
                    c.sock.sendall(b"".join(encode(*requests[i]) for i in idx))
                except OSError:
                    self.drop(addr)
                    todo += idx
                    continue
                got = 0
                try:
                    for i in idx:
                        replies[i] = c.read()
                        got += 1
                except (OSError, ConnectionError) as exc:
                    self.drop(addr)
                    for i in idx[got:]:
                        replies[i] = Unknown(f"no reply from {addr[0]}:{addr[1]}: {exc}")
                for i in idx[:got]:
                    to = _moved(replies[i])
                    if to is not None:
                        self.slots[key_slot(_key(requests[i]))] = to
                        todo.append(i)
                    elif _no_leader(replies[i]):
                        todo.append(i)
                    elif isinstance(replies[i], RespError) and str(replies[i]).startswith("CLUSTERDOWN"):
                        replies[i] = Unknown(str(replies[i]))
            if todo:
                if time.monotonic() > deadline:
                    for i in todo:
                        replies[i] = RespError(f"gave up after {self.patience:.0f} s: {replies[i]!r}")
                    break
                if any(_no_leader(replies[i]) or replies[i] is None for i in todo):
                    time.sleep(0.02)
                    try:
                        self.refresh()
                    except ConnectionError:
                        pass
        return replies


def _key(req: tuple[bytes | str | int, ...]) -> bytes:
    k = req[1]
    return k if isinstance(k, bytes) else str(k).encode()
