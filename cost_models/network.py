"""The node as the network sees it (issue 48): the bytes each operation puts on the wire, the
scans' fan-out to every shard, and the VM's network bandwidth as a bound on a node's throughput.

**Bytes per operation.** Clients speak RESP2 to cosine-server (docs/deploy.md): a request is an
array of bulk strings, a reply a bulk string, an integer, a status or an array. Per operation of
the spec's mix (key K bytes, value V bytes, scans of ``count`` entries):

======================  ==========================================  ===========================
operation               request                                     reply
======================  ==========================================  ===========================
get                     ``GET key``                                 ``$V value``
empty_get               ``GET key``                                 ``$-1`` (nil)
insert, update          ``SET key value``                           ``+OK``
rmw                     ``GET key`` then ``SET key value``           ``$V value``, ``+OK``
range                   ``RANGE start count`` to *every* shard      ``count`` x (key, value)
empty_range             ``RANGE start count`` to every shard        an empty array
======================  ==========================================  ===========================

plus TCP/IP framing: :data:`HEADER_BYTES` per segment of at most :data:`MSS_BYTES`, the segments
of a pipelined batch of ``p`` requests (or replies) shared by its requests. (cosine-server has no
bounded RANGE: an empty range is priced as a RANGE that finds nothing.) An rmw is YCSB's: a read,
then a write, two requests.

**Scans as deployed** (deploy/scatter.py, bench/ycsb): twemproxy cannot route a range, so a scan
goes from the client to every shard; each returns its own first ``count`` keys >= start (a full
scan of ``count`` entries on its own data), and the client merges them. Over a cluster of k
shards a node therefore serves 1/k of the point operations and every scan: ``served_mix``.

**The VM's bound.** A node's replies leave through its VM's network at most its baseline
bandwidth (the catalog's, pricing/vms.csv); AWS limits inbound traffic as well. A node running at
its peak a stated share d of the time may use burst credits: its peak bandwidth is then
``min(burst, baseline / d)`` (symbolic ``burst_bandwidth``; d = 1, the default, is the baseline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cost_models.symbolic import compiled
from specs.vocab import OPERATIONS, Operation

#: IPv4 (20) + TCP with timestamps (32) + Ethernet (14) bytes per segment.
HEADER_BYTES = 66
#: TCP payload per segment on a 1500-byte MTU with timestamps (1500 - 20 - 32).
MSS_BYTES = 1448
#: Operations whose scan goes to every shard (deploy/scatter.py).
SCANS = (Operation.RANGE, Operation.EMPTY_RANGE)


def bulk(n: float) -> float:
    """Bytes of one RESP bulk string of ``n`` bytes: ``$<n>\\r\\n<bytes>\\r\\n``."""
    return 1 + len(str(int(n))) + 2 + n + 2


def array_header(n: float) -> float:
    """Bytes of a RESP array header of ``n`` elements: ``*<n>\\r\\n``."""
    return 1 + len(str(int(n))) + 2


def command(*args: float) -> float:
    """Bytes of a request of bulk-string arguments of these lengths."""
    return array_header(len(args)) + sum(bulk(a) for a in args)


#: A status reply ``+OK\\r\\n`` and a nil ``$-1\\r\\n``.
OK_BYTES = 5.0
NIL_BYTES = 5.0


@dataclass(frozen=True)
class Wire:
    """Payload bytes of each operation (request, reply) and its requests (an rmw has two)."""

    request: dict[Operation, float]
    reply: dict[Operation, float]
    requests: dict[Operation, int]

    def framed(self, op: Operation, pipeline: int) -> tuple[float, float]:
        """(inbound, outbound) bytes of ``op`` with TCP/IP framing, a client pipelining ``pipeline``
        requests: a batch's requests (and its replies) share their segments' headers."""
        p = max(int(pipeline), 1)
        n = self.requests[op]
        req, rep = self.request[op] / n, self.reply[op] / n
        inbound = n * (req + HEADER_BYTES * math.ceil(p * req / MSS_BYTES) / p)
        outbound = n * (rep + HEADER_BYTES * math.ceil(p * rep / MSS_BYTES) / p)
        return inbound, outbound


def wire(key_bytes: int, value_bytes: int, scan_entries: float) -> Wire:
    """The RESP payload of each operation (module docstring) for keys of ``key_bytes``, values of
    ``value_bytes`` and scans returning ``scan_entries`` entries per shard."""
    k, v = float(key_bytes), float(value_bytes)
    count = max(float(scan_entries), 1.0)
    get, sett = command(3, k), command(3, k, v)
    rng = command(5, k, len(str(int(count))))
    rows = array_header(2 * count) + count * (bulk(k) + bulk(v))
    request = {
        Operation.GET: get,
        Operation.EMPTY_GET: get,
        Operation.INSERT: sett,
        Operation.UPDATE: sett,
        Operation.RMW: get + sett,
        Operation.RANGE: rng,
        Operation.EMPTY_RANGE: rng,
    }
    reply = {
        Operation.GET: bulk(v),
        Operation.EMPTY_GET: NIL_BYTES,
        Operation.INSERT: OK_BYTES,
        Operation.UPDATE: OK_BYTES,
        Operation.RMW: bulk(v) + OK_BYTES,
        Operation.RANGE: rows,
        Operation.EMPTY_RANGE: array_header(0),
    }
    requests = {op: 2 if op == Operation.RMW else 1 for op in OPERATIONS}
    return Wire(request, reply, requests)


def served_mix(mix: dict[str, float], shards: float) -> tuple[dict[str, float], float]:
    """The operation mix one node of ``shards`` serves, and its operations per cluster operation
    over ``shards`` (symbolic ``fanout_scale``): every scan reaches every shard, a point operation
    one. The node's throughput in the cluster's operations per node is its throughput on the
    returned mix divided by that scale."""
    total = sum(v for v in mix.values() if v > 0) or 1.0
    k = max(float(shards), 1.0)
    w = {op: (v / total) * (k if op in SCANS else 1.0) for op, v in mix.items() if v > 0}
    scale = float(compiled()["fanout_scale"](k, sum(mix.get(op, 0.0) for op in SCANS) / total))
    s = sum(w.values())
    return {op: v / s for op, v in w.items()}, scale


@dataclass(frozen=True)
class WireLoad:
    """Bytes per operation of a node's mix: inbound, outbound."""

    inbound: float
    outbound: float

    @property
    def total(self) -> float:
        return self.inbound + self.outbound


def wire_load(w: Wire, mix: dict[str, float], pipeline: int) -> WireLoad:
    """Bytes on the wire per operation of ``mix`` (normalized), with framing."""
    total = sum(v for v in mix.values() if v > 0) or 1.0
    i = o = 0.0
    for op, v in mix.items():
        if v <= 0:
            continue
        a, b = w.framed(Operation(op), pipeline)
        i += v / total * a
        o += v / total * b
    return WireLoad(i, o)


def network_cap(
    load: WireLoad, bytes_per_s: float, burst_bytes_per_s: float, ingress_limited: bool, duty_cycle: float = 1.0
) -> float:
    """Operations per second a VM's network carries at ``load`` bytes per operation: its baseline, or
    under burst credits at ``duty_cycle`` < 1 ``min(burst, baseline / duty_cycle)``; outbound bytes
    always count, inbound where the provider limits them (inf: the catalog has no figure)."""
    if not math.isfinite(bytes_per_s):
        return math.inf
    c = compiled()
    bw = float(c["burst_bandwidth"](burst_bytes_per_s, bytes_per_s, duty_cycle))
    per_op = max(load.outbound, load.inbound if ingress_limited else 0.0)
    return float(c["throughput_network"](bw, per_op)) if per_op > 0 else math.inf


def network_capped(x: np.ndarray, cap: float) -> np.ndarray:
    """Throughputs ``x`` no higher than the network's ``cap``."""
    return np.minimum(np.asarray(x, dtype=float), cap)
