"""The served node's CPU (issue 48.1): what cosine-server spends on a request beyond the engine.

A request reaching cosine-server is read from its socket, parsed, run against the engine and
answered (engine-template/crates/cosine-server): point reads on the connection's network task
("read"), scans on tokio's blocking pool ("scan"), writes on the blocking pool and then a wait for
the WAL policy's durability on another blocking thread ("write"). Beyond the engine's own CPU per
operation (cost_models.cpu, data/phi.yaml) each request costs, by its kind,

    c_req + c_batch / p + c_byte x (bytes in + bytes out)        (symbolic ``serving_seconds``)

with p the client's pipeline depth: the system calls and wake-ups are paid once per batch of p
requests (a connection parses every complete request it has received as one batch and writes the
batch's replies together), the parsing and encoding per request, the copies per byte
(cost_models.network gives the bytes). Each kind has its own terms (:data:`KIND_TERMS`: a get's
and a scan's per-request term measure as 0 and are not fitted): a write's bytes are also copied
into the WAL and the memtable, CPU the engine's table (measured with 116-byte entries) does not
charge per byte, so the byte term of a kind holds all its per-byte CPU beyond the engine's at that
size; a write's request term is signed (:data:`SIGNED_TERMS`: a batch of SETs is one write group).
``cosine calibrate serving`` measures the terms on cosine-server pinned to one core with
redis-benchmark on the other (measure/served_calibration.py) and writes ``data/serving.yaml`` with
its provenance; a fit that wants a value at or past a bound is refused, as phi's are.

The serving CPU runs on any core, per connection: it joins the parallel part P of the node's CPU
demands (docs/model.md, "CPU and throughput"), as the engine's per-operation CPU does.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models.cpu import Demands, NodeShape, ShapeTerms, node_demands
from cost_models.io_model import IOCost
from cost_models.network import Wire, WireLoad, served_mix, wire, wire_load
from cost_models.phi import PhiTable
from cost_models.symbolic import compiled
from specs.errors import InputError
from specs.io import load_yaml
from specs.vocab import OPERATIONS, Operation

#: The shipped table, written by `cosine calibrate serving`.
SERVING_TABLE = Path(__file__).resolve().parent / "data" / "serving.yaml"
#: serving.yaml's layout version.
SERVING_SCHEMA = 1
#: How cosine-server runs each kind of request (see the module docstring).
KINDS = ("read", "scan", "write")
#: Each kind's terms in serving.yaml: seconds per request, per pipelined batch, per byte on the wire.
TERMS = ("request_seconds", "batch_seconds", "byte_seconds")
#: The terms each kind has. A term whose fit is indistinguishable from 0 is not fitted and the
#: model has none (0), as phi.yaml's FLAT_SEARCHES: a scan's CPU per request beyond its batch's
#: and its bytes' (+0.09 us in one calibration, -0.19 us in the next, against ~6 us per batch),
#: and a get's (+0.013 and -0.027 us in two calibrations of stop 60, against ~6.5 us per batch and
#: the engine's 0.23 us memtable get: docs/journal/s43-s51.md §31).
KIND_TERMS: dict[str, tuple[str, ...]] = {
    "read": ("batch_seconds", "byte_seconds"),
    "scan": ("batch_seconds", "byte_seconds"),
    "write": TERMS,
}
#: The one signed term. A connection's consecutive pipelined SETs are one write group
#: (cosine-server's ``set_run``): one WAL append and one hand-off to the write thread per batch,
#: which the engine's CPU per write (phi.yaml, measured in process, a write group per write) charges
#: every write. So a write's request term holds the server's own CPU per SET *less* the engine's
#: group cost its batch saves, and fits below 0 (-0.37 and -0.40 us at stop 60); its bound is the
#: engine's whole CPU per write on the calibration's store (``write_engine_seconds`` in the table):
#: a write may not cost nothing.
SIGNED_TERMS = frozenset({("write", "request_seconds")})
#: The requests of each operation, by kind (an rmw is YCSB's read, then write).
REQUESTS: dict[Operation, tuple[str, ...]] = {
    Operation.GET: ("read",),
    Operation.EMPTY_GET: ("read",),
    Operation.RANGE: ("scan",),
    Operation.EMPTY_RANGE: ("scan",),
    Operation.INSERT: ("write",),
    Operation.UPDATE: ("write",),
    Operation.RMW: ("read", "write"),
}


class ServingTableError(InputError):
    """data/serving.yaml is missing a term or holds an impossible value."""


@dataclass(frozen=True, eq=False)
class ServingTable:
    """A checked serving table: per kind, seconds per request and per batch; seconds per byte."""

    path: Path
    raw: Mapping[str, Any]

    def request_seconds(self, kind: str) -> float:
        """Seconds per request of ``kind`` (0 for a kind without the term: :data:`KIND_TERMS`)."""
        return float(self.raw["kinds"][kind].get("request_seconds", 0.0))

    def batch_seconds(self, kind: str) -> float:
        return float(self.raw["kinds"][kind]["batch_seconds"])

    def byte_seconds(self, kind: str) -> float:
        return float(self.raw["kinds"][kind]["byte_seconds"])

    def __reduce__(self) -> tuple[Any, ...]:
        return (load_serving, (self.path,))


_LOADED: dict[tuple[str, int], ServingTable] = {}


def load_serving(path: Path = SERVING_TABLE) -> ServingTable:
    """The serving table at ``path`` (default: the shipped one), checked once per file version."""
    p = str(path)
    try:
        stamp = os.stat(p).st_mtime_ns
    except OSError:
        raise ServingTableError(f"{p}: no such serving table (run `cosine calibrate serving`)") from None
    hit = _LOADED.get((p, stamp))
    if hit is None:
        hit = _LOADED[(p, stamp)] = ServingTable(Path(p), check_table(_read(Path(p)), Path(p).name))
        _SERVED.clear()  # a new version of a table: no answer of an older one is read again
    return hit


def _read(path: Path) -> Any:
    try:
        return load_yaml(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ServingTableError(f"{path.name}: not a readable YAML serving table ({type(e).__name__})") from None


def check_table(raw: Any, name: str) -> dict[str, Any]:
    """A serving table's document, checked: every term of :data:`KIND_TERMS` positive but the
    :data:`SIGNED_TERMS`, which must stay above minus the engine's CPU per write they correct."""
    if not isinstance(raw, dict) or raw.get("schema") != SERVING_SCHEMA:
        raise ServingTableError(f"{name}: not a schema-{SERVING_SCHEMA} serving table; run `cosine calibrate serving`")
    kinds = raw.get("kinds")
    if not isinstance(kinds, dict):
        raise ServingTableError(f"{name}: kinds must map {', '.join(KINDS)} to their terms")
    floor = raw.get("write_engine_seconds")
    if not isinstance(floor, (int, float)) or not math.isfinite(floor) or floor <= 0:
        raise ServingTableError(f"{name}: write_engine_seconds must be a positive number, got {floor!r}")
    for k in KINDS:
        for term in KIND_TERMS[k]:
            v = kinds.get(k, {}).get(term) if isinstance(kinds.get(k), dict) else None
            if (k, term) in SIGNED_TERMS:
                if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= -floor:
                    raise ServingTableError(
                        f"{name}: kinds.{k}.{term} must be a number above -write_engine_seconds "
                        f"({-floor:.4g}), got {v!r}"
                    )
            elif not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ServingTableError(f"{name}: kinds.{k}.{term} must be a positive number, got {v!r}")
    return raw


def shipped_or(table: ServingTable | None) -> ServingTable:
    return table if table is not None else load_serving(SERVING_TABLE)


@dataclass(frozen=True)
class Serving:
    """How clients reach a node: their pipeline depth, the shards a scan fans out to, the table."""

    pipeline: int = 1
    shards: float = 1.0
    table: ServingTable | None = None


def op_serving_seconds(table: ServingTable, w: Wire, op: Operation, pipeline: int, rmw_share: float = 0.0) -> float:
    """Server CPU of one ``op`` beyond the engine's, with clients pipelining ``pipeline`` operations:
    each kind's terms are the table's, whatever share of the batch writes. An rmw's write depends
    on its read: it goes out with the batch's other rmw writes once the batch is answered, a batch of
    SETs of ``1 + (pipeline - 1) x rmw_share`` on average (the rmws among the other operations).

    A batch of SETs is one write group (cosine-server's ``set_run``), a batch of mixed requests one
    group per run of SETs. Until the server deferred its log writes to the sync (100ac91: one write
    system call per sync, not per group) a group cost g ~ -c_req (the write's signed request term),
    and a write in a mixed batch paid the groups its batch's SETs did not share: its terms were
    w c_req and c_batch + (1 - w) c_req at a share w of SETs. A group now costs the server no
    system call, and that credit over-charged a mixed batch: YCSB A at depth 16 (half GETs) was
    predicted at 2.01 us of server CPU per operation and measured at 1.46-1.50 (73.4-75.2 %
    throughput accuracy, 3 runs, docs/journal/s43-s51.md §36); with the table's own terms it is
    1.49. (Stop 63's server, d45d40f, which wrote each group: 1.84-1.89 us measured, 2.02 predicted
    with the credit.)"""
    return sum(total for total, _ in op_visit_seconds(table, w, op, pipeline, rmw_share))


#: The share of a batch's fixed serving seconds (its ``batch_seconds``) that writing its replies
#: takes, in the served latency model (cost_models.latency.RuntimeLoop: the reply writer's poll):
#: the batch's two system calls are the read of its requests and the write of its replies, and the
#: fit does not tell them apart, so each is taken as half (an assumption; the simulated p50s moved
#: by less than 3 % with the reply's share of a request's seconds anywhere in 0.2-0.4, journal §42).
REPLY_BATCH_SHARE = 0.5


def op_visit_seconds(
    table: ServingTable, w: Wire, op: Operation, pipeline: int, rmw_share: float = 0.0
) -> list[tuple[float, float]]:
    """:func:`op_serving_seconds` per visit of ``op`` to the node (one; an rmw's read, then its write),
    each as (its seconds, the part of them that writing its reply takes: its outbound bytes' and
    :data:`REPLY_BATCH_SHARE` of its batch's). A write's seconds may be negative (its request term,
    the engine's WAL write that the server defers to the sync): the reply's part is the caller's to
    bound by the request's whole seconds, the engine's with them."""
    c = compiled()["serving_seconds"]
    inbound, outbound = w.framed(op, pipeline)
    kinds = REQUESTS[op]
    per_byte = (inbound + outbound) / len(kinds)
    out = []
    for k in kinds:
        depth = 1.0 + (pipeline - 1) * rmw_share if (op == Operation.RMW and k == "write") else float(pipeline)
        total = float(c(table.request_seconds(k), table.batch_seconds(k), depth, table.byte_seconds(k), per_byte))
        reply = table.byte_seconds(k) * outbound / len(kinds) + REPLY_BATCH_SHARE * table.batch_seconds(k) / depth
        out.append((total, reply))
    return out


@dataclass(frozen=True)
class ServedMix:
    """A node's served work per operation of the cluster over its shards: the mix it runs, how
    many of its operations that is per cluster operation (scan fan-out), the serving CPU and the
    bytes on the wire per operation of its mix."""

    mix: dict[str, float]
    scale: float
    serving_seconds: float
    load: WireLoad

    @property
    def wire_bytes_per_op(self) -> float:
        """Bytes on the wire (in + out) per operation of the cluster's mix the node serves."""
        return self.load.total * self.scale


#: :func:`served`'s answers in this process, by its arguments (a table by identity, the shipped one by
#: its path; :func:`load_serving` clears it when it reads a new version of a file). The design tables ask for
#: the same few (mix, fan-out) once per VM type and preset; a ServedMix is frozen and never changed.
_SERVED: dict[tuple[Any, ...], ServedMix] = {}
_SERVED_MAX = 4096


def served(mix: dict[str, float], key_bytes: int, value_bytes: int, scan_length: float, serving: Serving) -> ServedMix:
    """A node's :class:`ServedMix` for the spec's ``mix`` under ``serving``."""
    # the shipped table by its path (the file is read, and its version checked, on a miss only:
    # os.stat on every call was ~0.5 s of a cold ycsb_a solve's CPU; a new version clears this cache)
    which = serving.table if serving.table is not None else SERVING_TABLE
    key = (which, tuple(mix.items()), key_bytes, value_bytes, scan_length, serving.pipeline, serving.shards)
    hit = _SERVED.get(key)
    if hit is not None:
        return hit
    table = shipped_or(serving.table)
    node_mix, scale = served_mix(mix, serving.shards)
    w = wire(key_bytes, value_bytes, scan_length)
    rs = rmw_share(node_mix)
    secs = sum(v * op_serving_seconds(table, w, Operation(op), serving.pipeline, rs) for op, v in node_mix.items())
    out = ServedMix(node_mix, scale, secs, wire_load(w, node_mix, serving.pipeline))
    if len(_SERVED) >= _SERVED_MAX:
        _SERVED.clear()
    _SERVED[key] = out
    return out


def per_cluster_op(d: Demands, scale: float) -> Demands:
    """Demands per (cluster operation / shards) from demands per operation of the node's mix: every
    per-operation quantity times ``scale``; the buffers' slack (operations) over it. Throughput on
    the result is the throughput on ``d`` over ``scale`` (the stall term too: rate x scale, slack /
    scale at throughput / scale)."""
    if scale == 1.0:
        return d

    def s(v: np.ndarray | None) -> np.ndarray | None:
        return None if v is None else v * scale

    return replace(
        d,
        serial=d.serial * scale,
        parallel=d.parallel * scale,
        wait=d.wait * scale,
        background=d.background * scale,
        io=d.io * scale,
        io_bytes=d.io_bytes * scale,
        stall_rate=s(d.stall_rate),
        stall_slack=None if d.stall_slack is None else d.stall_slack / scale,
        serial_concurrent=s(d.serial_concurrent),
        parallel_concurrent=s(d.parallel_concurrent),
    )


def served_demands(
    phi: PhiTable,
    io: IOCost,
    shape: NodeShape,
    sm: ServedMix,
    scan_length: float,
    read_latency_s: float = 0.0,
    extra_cpu: float | np.ndarray = 0.0,
    terms: ShapeTerms | None = None,
) -> Demands:
    """The node's CPU demands served (cost_models.cpu.node_demands on the node's mix with the serving
    CPU on the parallel part), per operation of the cluster over its shards."""
    d = node_demands(phi, io, shape, sm.mix, scan_length, read_latency_s, extra_cpu, terms)
    d.parallel = d.parallel + sm.serving_seconds
    return per_cluster_op(d, sm.scale)


__all__ = [
    "KINDS",
    "OPERATIONS",
    "REQUESTS",
    "SERVING_TABLE",
    "ServedMix",
    "Serving",
    "ServingTable",
    "load_serving",
    "op_serving_seconds",
    "op_visit_seconds",
    "rmw_share",
    "per_cluster_op",
    "served",
    "served_demands",
]


#: The range of a write's wait for its sync under group commit. cosine-server syncs when its worker
#: is about to park, or at the group-commit interval on a server too busy to park (docs/deploy.md),
#: so below saturation the wait is one to two of the volume's fdatasync times; the catalog has no
#: volume's fdatasync latency, so the model takes the wait as uniform on [0, the rendered
#: group-commit interval] (render/config.py renders
#: ``group_commit_interval_us = 1000``, the engine's own periodic sync; tests/test_served_model.py
#: checks they agree). An assumption, not a measurement: right for a volume whose fdatasync takes
#: about 0.33-0.5 ms, high for a faster one, low for a slower one.
GROUP_COMMIT_INTERVAL_S = 1e-3
#: The node's utilization the reported latency is taken at when the spec states no demand (neither
#: performance.min_throughput nor workload.operations_per_month): a stated assumption, not a
#: measurement (docs/model.md, "Request latency").
DEFAULT_UTILIZATION = 0.7


def write_request_share(mix: dict[str, float]) -> float:
    """The share of a pipelined batch's requests that write: one request per operation, an insert's
    or an update's SET; an rmw's read is in the batch, its write in a batch of the rmw writes once
    the read is answered (:func:`op_serving_seconds`; until stop 61 the driver sent both in one
    batch and the model counted the rmw a read and a write request of it)."""
    total = sum(v for v in mix.values() if v > 0)
    writes = sum(v for op, v in mix.items() if v > 0 and REQUESTS[Operation(op)] == ("write",))
    return writes / total if total > 0 else 0.0


def rmw_share(mix: dict[str, float]) -> float:
    """The share of a node's operations that are rmws (each sends a dependent write after its batch)."""
    total = sum(v for v in mix.values() if v > 0)
    return max(mix.get(Operation.RMW, 0.0), 0.0) / total if total > 0 else 0.0


@dataclass(frozen=True)
class NodeCaps:
    """What bounds a served node besides its CPU and volume (per node, in operations of the cluster
    over its shards): its VM's network, and the highest throughput its latency bounds allow."""

    network_ops: float
    latency_ops: np.ndarray

    def apply(self, x: np.ndarray) -> np.ndarray:
        return np.minimum(np.minimum(np.asarray(x, dtype=float), self.network_ops), self.latency_ops)


def latency_terms(sm: ServedMix, rtt_s: float) -> Any:
    """The latency model's terms of a node's served mix (cost_models.latency.LatencyTerms): the share
    of its operations that wait for a group commit, an rmw's as an update's (its write is in a batch
    of its own, :func:`write_request_share` leaves it out)."""
    from cost_models.latency import LatencyTerms

    return LatencyTerms(rtt_s, write_request_share(sm.mix) + rmw_share(sm.mix), GROUP_COMMIT_INTERVAL_S)


def node_caps(
    x: np.ndarray,
    sm: ServedMix,
    cores: float,
    pipeline: int,
    vm: Any,
    max_p99: float | None,
    max_p50: float | None,
    duty_cycle: float = 1.0,
) -> NodeCaps:
    """The :class:`NodeCaps` of nodes of capacity ``x`` (cost_models.cpu.throughput of their served
    demands) on ``vm`` (a catalog VmType): its network (cost_models.network.network_cap) and the
    latency bounds (cost_models.latency.throughput_within on the node's own requests: its mix's
    operations are ``sm.scale`` per cluster operation over the shards)."""
    from cost_models.latency import throughput_within
    from cost_models.network import network_cap

    net = network_cap(
        sm.load, vm.network_bytes_per_s, vm.network_burst_bytes_per_s, vm.network_ingress_limited, duty_cycle
    )
    node_ops = np.asarray(x, dtype=float) * sm.scale
    within = throughput_within(node_ops, cores, pipeline, latency_terms(sm, vm.rtt_s), max_p99, max_p50)
    return NodeCaps(net / sm.scale, within / sm.scale)


def spec_serving(spec: Any, nodes: float) -> Serving:
    """How clients reach a node of ``spec`` (its pipeline) in a cluster of ``nodes`` nodes holding
    its keys. A replicated node's spec (its node view) holds RF copies: a scan reaches one replica
    of every shard, ``nodes`` / RF of them."""
    from cost_models.replication import replica_nodes

    return Serving(pipeline=spec.pipeline, shards=max(1.0, nodes / replica_nodes(spec)))


def spec_served(spec: Any, workload: Any, shards: float) -> ServedMix:
    """A node's :class:`ServedMix` under ``spec`` for ``workload`` on ``shards`` nodes holding
    ``workload``'s keys (:func:`spec_serving`)."""
    return served(
        workload.operations, workload.key_bytes, workload.value_bytes, workload.scan_length, spec_serving(spec, shards)
    )


def served_throughput(
    phi: PhiTable,
    io: IOCost,
    shape: NodeShape,
    sm: ServedMix,
    scan_length: float,
    iops: float | np.ndarray,
    threads: float,
    *,
    cores: float | None = None,
    read_latency_s: float = 0.0,
    bytes_per_s: float | np.ndarray = math.inf,
    extra_cpu: float | np.ndarray = 0.0,
) -> np.ndarray:
    """A served node's throughput (operations of the cluster over its shards per second): the CPU
    model on :func:`served_demands`, capped by the device (cost_models.cpu.throughput)."""
    from cost_models.cpu import throughput

    d = served_demands(phi, io, shape, sm, scan_length, read_latency_s, extra_cpu)
    return throughput(d, iops, threads, cores, bytes_per_s)


def served_rates(table: ServingTable | None = None) -> dict[str, float]:
    """The highest served requests per second per core cosine-server reached for each kind in its
    calibration (``points`` of serving.yaml: requests over the server's CPU seconds): what it was
    ever measured to do, over RESP."""
    t = shipped_or(table)
    best: dict[str, float] = {}
    for p in t.raw.get("points", []):
        cpu = float(p["server_cpu_seconds"])
        if cpu > 0:
            best[p["kind"]] = max(best.get(p["kind"], 0.0), float(p["requests"]) / cpu)
    return best


def served_envelope(mix: dict[str, float], table: ServingTable | None = None) -> float | None:
    """The served envelope of a mix: ``1 / sum_o theta_o sum_(its requests) 1 / X_kind``, X_kind the
    kind's highest served rate per core (:func:`served_rates`); None when a kind was never measured."""
    rates = served_rates(table)
    total = sum(v for v in mix.values() if v > 0) or 1.0
    secs = 0.0
    for op, v in mix.items():
        if v <= 0:
            continue
        for kind in REQUESTS[Operation(op)]:
            if rates.get(kind, 0.0) <= 0:
                return None
            secs += v / total / rates[kind]
    return 1.0 / secs if secs > 0 else None
