"""`cosine bench SPEC --engine DIR --served`: the rendered design served over RESP, predicted beside
measured (issue 48.5).

The design's cosine-server (one, or ``--nodes`` N behind nutcracker) runs pinned to the first half
of this machine's cores; ``cosine-resp-bench`` (engine-template, a Rust RESP client on tokio)
drives the spec's mix from the other half: ``--clients`` C connections each sending a batch of
``--pipeline`` P requests and reading their replies before the next, scans sent to every shard
(deploy/scatter.py). It loads the records over RESP, runs a quarter of the operations unmeasured,
then the measured operations, and reports throughput and p50/p99 per operation.

The prediction is the model's for the same configuration on this core split:

* **capacity**: the engine's demands (cost_models.engine_model, the scaled engine.toml on this
  machine's device, on the shape its ``INFO keyspace`` reports when the measured phase begins and
  ends, as the in-process validation predicts on its report's) for the node's served mix
  (cost_models.network.served_mix: every scan reaches every shard), plus the server's CPU per
  request (cost_models.serving, data/serving.yaml, at this depth and these bytes), on the node's
  share of the server cores (cost_models.cpu.throughput);
* **the closed loop**: C connections keep one batch each outstanding; a batch spends, outside the
  server's cores, the loopback round trip and, when it writes, its sync (the server syncs as soon
  as a batch waits: the sync in progress, uniform on [0, sync], and its own, the device's sync
  time); both are measured here before the run (:func:`probe_rtt`, :func:`probe_sync`). The
  batches at the servers are the finite-source M/M/c//C queue of C clients thinking that long
  (cost_models.latency.ClosedLoop): its throughput is the prediction;
* **latency**: p50 and p99 of each operation in the same loop served by cosine-server's tokio
  runtime, simulated (cost_models.latency.RuntimeLoop: the workers' polls of the sockets, the LIFO
  slot, the reply writer's yield, the durability syncs by a parking worker or the waiter's tick;
  each request's seconds the model's in proportion, :func:`request_visits`; docs/model.md). The
  servers' own reply-wait and sync counters (``INFO server``) are read around the measured phase
  and reported beside the simulation's (``replies``; bench.reply_wait prints both).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cost_models import cpu_count
from cost_models.cpu import Demands, DeviceModel, throughput
from cost_models.engine_model import EngineBreakdown, engine_breakdown, op_seconds
from cost_models.latency import P50, P99, ClosedLoop, RuntimeLoop, RuntimeResult, Visit
from cost_models.network import served_mix, wire
from cost_models.serving import (
    GROUP_COMMIT_INTERVAL_S,
    Serving,
    load_serving,
    op_visit_seconds,
    per_cluster_op,
    rmw_share,
    served,
    write_request_share,
)
from measure.engine import TEMPLATE, build, scaled_config, scratch_root, workload_json
from measure.resp import info
from measure.server import HOST, Server, core_split, cosine_server, free_port, need, pinned, start
from render.config import config_device, to_toml
from render.workspace import RENDER_META, RenderMeta
from specs.errors import InputError, check_range
from specs.io import read_record
from specs.schema import Spec
from specs.vocab import Operation, ReplyWait, SyncBy

#: Records and operations by default (the issue's 100k keys); measured operations per record.
DEFAULT_RECORDS = 100_000
#: Connections by default (redis-benchmark's default, and the issue's).
DEFAULT_CLIENTS = 50
MAX_CLIENTS = 10_000
MAX_PIPELINE = 1024
MAX_NODES = 16
#: Unmeasured operations before the measured ones, as a share of them.
WARMUP_SHARE = 0.25
#: Round trips and syncs the probes time (their medians are used).
PROBES = 200
#: The driver's binary in the engine workspace.
DRIVER = "cosine-resp-bench"
#: Requests each prediction's loop is simulated for (cost_models.latency.RuntimeLoop): its p99 from
#: ~1,000 requests above it; ~0.5 s at depth 1. More when an operation is rarer than
#: LOOP_SAMPLES in that many, up to LOOP_MAX_REQUESTS.
LOOP_REQUESTS = 100_000
LOOP_SAMPLES = 1_000
LOOP_MAX_REQUESTS = 2_000_000


@dataclass
class ServedResult:
    """One served run: what ran, the driver's report, the model's prediction beside it."""

    config: dict[str, Any]
    measured: dict[str, Any]
    predicted: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"config": self.config, "measured": self.measured, "predicted": self.predicted, "notes": self.notes}

    def accuracy(self) -> dict[str, float]:
        """1 - |predicted - measured| / measured: throughput, the server's CPU per operation, and each
        operation's p50."""
        out: dict[str, float] = {}
        x_m, x_p = float(self.measured["run"]["throughput_ops"]), float(self.predicted["throughput_ops"])
        if x_m > 0:
            out["throughput"] = max(0.0, 1 - abs(x_p - x_m) / x_m)
        srv = self.measured.get("server")
        if srv and srv["cpu_us_per_op"] > 0:
            c_p = float(self.predicted["server_cpu_us_per_op"])
            out["server_cpu"] = max(0.0, 1 - abs(c_p - srv["cpu_us_per_op"]) / srv["cpu_us_per_op"])
        for op, m in self.measured["per_op"].items():
            p = self.predicted["per_op"].get(op)
            if p and m["latency_us"]["p50"] > 0:
                out[f"{op}_p50"] = max(0.0, 1 - abs(p["p50_us"] - m["latency_us"]["p50"]) / m["latency_us"]["p50"])
        return out


def check_options(pipeline: int, clients: int, nodes: int) -> None:
    check_range("--pipeline", pipeline, 1, MAX_PIPELINE, integer=True)
    check_range("--clients", clients, 1, MAX_CLIENTS, integer=True)
    check_range("--nodes", nodes, 1, MAX_NODES, integer=True)


def probe_rtt(port: int, n: int = PROBES) -> float:
    """Median seconds of a PING round trip on loopback to the server (one connection, depth 1)."""
    with socket.create_connection((HOST, port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            got = b""
            while not got.endswith(b"\r\n"):
                got += s.recv(64)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: Seconds an ``INFO`` of a server in the middle of a run may take (a loaded server answers late).
INFO_TIMEOUT_S = 30.0


def engine_state(port: int) -> dict[str, Any]:
    """The engine's shape as the server's ``INFO keyspace`` reports it (its buffered entries and each
    disk level's entries and runs), in the form of the in-process bench's ``load.shape``
    (cost_models.engine_model.observed_state reads either)."""
    state: dict[str, Any] = {"buffered": 0.0, "levels": []}
    for name, value in info(HOST, port, "keyspace", timeout=INFO_TIMEOUT_S).items():
        if name == "buffered_entries":
            state["buffered"] = float(value)
        elif name.startswith("level") and name[5:].isdigit():
            fields = dict(kv.split("=", 1) for kv in value.split(","))
            state["levels"].append(
                {"level": int(name[5:]), "entries": float(fields["entries"]), "runs": float(fields["runs"])}
            )
    return state


def reply_counters(port: int) -> dict[str, float]:
    """The server's reply-wait and sync counters (``INFO server``: ``reply_wait_<kind>`` batches and
    microseconds in all, ``durable_syncs_<who>``), as ``<kind>_batches``, ``<kind>_usec`` and
    ``syncs_<who>`` totals since it started."""
    out: dict[str, float] = {}
    for name, value in info(HOST, port, "server", timeout=INFO_TIMEOUT_S).items():
        if name.startswith("reply_wait_"):
            fields = dict(kv.split("=", 1) for kv in value.split(","))
            out[f"{name[len('reply_wait_') :]}_batches"] = float(fields["batches"])
            out[f"{name[len('reply_wait_') :]}_usec"] = float(fields["usec"])
        elif name.startswith("durable_syncs_"):
            out[f"syncs_{name[len('durable_syncs_') :]}"] = float(value)
    missing = [k.value for k in ReplyWait if f"{k.value}_batches" not in out] + [
        k.value for k in SyncBy if f"syncs_{k.value}" not in out
    ]
    if missing:
        raise RuntimeError(
            f"cosine-server on port {port}: INFO server has no reply-wait counters for {', '.join(missing)}"
        )
    return out


#: The provisioned volume's counters ``INFO engine`` reports (none on a local device).
DEVICE_COUNTERS = ("device_ios", "device_read_ios", "device_foreground_read_ios", "device_sleeps", "device_waited_usec")


def device_counters(port: int) -> dict[str, float]:
    """The server's volume counters (:data:`DEVICE_COUNTERS`; empty on a local device): its I/Os
    and how often and how long the engine's threads slept for the volume."""
    got = info(HOST, port, "engine", timeout=INFO_TIMEOUT_S)
    return {k: float(got[k]) for k in DEVICE_COUNTERS if k in got}


def device_stats(before: list[dict[str, float]], after: list[dict[str, float]], ops: int) -> dict[str, float]:
    """Each volume counter per operation between two readings of :func:`device_counters` on each
    server (summed over the servers; empty when they have no volume)."""
    keys = [k for k in DEVICE_COUNTERS if all(k in a for a in after) and all(k in b for b in before)]
    pairs = list(zip(after, before, strict=True))
    return {f"{k.removeprefix('device_')}_per_op": sum(a[k] - b[k] for a, b in pairs) / max(ops, 1) for k in keys}


def reply_stats(before: list[dict[str, float]], after: list[dict[str, float]]) -> dict[str, Any]:
    """The servers' reply waits (batches, mean microseconds) per kind and syncs per 1,000 batches
    between two readings of :func:`reply_counters` on each (summed over the servers)."""

    def delta(key: str) -> float:
        return sum(a[key] - b[key] for a, b in zip(after, before, strict=True))

    batches = sum(delta(f"{k.value}_batches") for k in ReplyWait)
    waits = {}
    for k in ReplyWait:
        n = delta(f"{k.value}_batches")
        waits[k.value] = {"batches": int(n), "mean_us": delta(f"{k.value}_usec") / n if n else 0.0}
    return {
        "waits": waits,
        "syncs_per_1000_batches": {k.value: delta(f"syncs_{k.value}") * 1e3 / max(batches, 1.0) for k in SyncBy},
    }


def mean_state(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The nodes' mean shape (:func:`engine_state` of each): buffered entries and, level by level,
    entries and runs (a level a node lacks counts as empty there)."""
    n = len(states)
    levels = sorted({lv["level"] for st in states for lv in st["levels"]})

    def total(level: int, key: str) -> float:
        return sum(float(lv[key]) for st in states for lv in st["levels"] if lv["level"] == level)

    return {
        "buffered": sum(float(st["buffered"]) for st in states) / n,
        "levels": [{"level": lv, "entries": total(lv, "entries") / n, "runs": total(lv, "runs") / n} for lv in levels],
    }


def probe_sync(directory: Path, n: int = 50) -> float:
    """Median seconds of a 4 KiB write and fdatasync in ``directory`` (the WAL's device)."""
    path = directory / ".sync-probe"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        times = []
        block = b"\0" * 4096
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return statistics.median(times)


def served_config(workspace: Path, text: str, records: int, nodes: int, threads: int) -> str:
    """The engine.toml a node serves: the workspace's ``text`` scaled to the node's share of
    ``records`` (the rendered design's memory per entry, RENDER_META) on ``threads`` workers."""
    per_node = _entries_per_node(workspace / RENDER_META)
    if per_node is not None:
        text = scaled_config(text, (records / nodes) / float(per_node))
    return node_config(text, threads)


def node_config(text: str, threads: int) -> str:
    """engine.toml with ``threads`` workers (cosine-server's tokio runtime)."""
    cfg = tomllib.loads(text)
    cfg.setdefault("algorithms", {})["threads"] = int(threads)
    return to_toml(cfg, f"served by `cosine bench --served` on {threads} worker thread(s)")


def predict(
    spec: Spec,
    config: str,
    wl: dict[str, Any],
    nodes: int,
    cores_per_node: float,
    pipeline: int,
    clients: int,
    rtt_s: float,
    sync_s: float,
    shape: dict[str, Any] | None = None,
    end_shape: dict[str, Any] | None = None,
    service_scale: float = 1.0,
) -> dict[str, Any]:
    """The model's served throughput and p50/p99 for this run (module docstring). ``shape`` /
    ``end_shape``: a node's engine when the measured phase began and ended (:func:`engine_state`;
    None: the model's expected state), as the in-process validation predicts on its report's.
    ``service_scale`` multiplies the seconds a request takes in the latency simulation only
    (bench.reply_wait: the measured server CPU's over the predicted, to judge the runtime's schedule
    apart from the CPU model)."""
    cfg = tomllib.loads(config)
    w = spec.workload
    sm = served(w.operations, w.key_bytes, w.value_bytes, float(wl["scan_length"]), Serving(pipeline, float(nodes)))
    node_wl = {
        **wl,
        "mix": sm.mix,
        "records": int(wl["records"] / nodes),
        "warmup_operations": float(wl.get("warmup_operations", 0)) / nodes,
    }
    device = config_device(cfg)
    threads = int(cfg["algorithms"]["threads"])
    bd = engine_breakdown(cfg, node_wl, max(1, int(math.ceil(cores_per_node))), device, shape, end_shape)
    d = bd.demands
    d.parallel = d.parallel + sm.serving_seconds
    d = per_cluster_op(d, sm.scale)
    x_node = float(throughput(d, device.iops, threads, cores_per_node, device.bytes_per_s)[0])
    capacity = x_node * nodes  # the cluster's operations per second at full use
    engine_only = float(bd.throughput) * nodes
    # the closed loop: C batches of P in all; outside the server each spends the round trip and,
    # when it writes, its sync: under group_commit the server syncs on demand, so a batch waits for
    # the sync in progress (uniform on [0, sync]: half of it on average) and its own
    writes, rmws = write_request_share(sm.mix), rmw_share(sm.mix)
    p_write_batch = 1 - (1 - writes) ** pipeline
    window = sync_s if _wal_sync(cfg) == "group_commit" else 0.0
    durable = window / 2 + (sync_s if _wal_sync(cfg) != "none" else 0.0)
    # a batch holding an rmw sends its writes once the batch is answered: a second round trip and sync
    p_rmw_batch = 1 - (1 - rmws) ** pipeline
    think = rtt_s + p_write_batch * durable + p_rmw_batch * (rtt_s + durable)
    c = max(1, round(cores_per_node * nodes))
    node_ops = capacity * sm.scale  # requests at the servers per second at full use
    # the finite-source queue of the C connections' visits to the servers (cost_models.latency.ClosedLoop):
    # a connection's turn is its batch and, when the batch holds an rmw, the rmw writes' batch after it,
    # 1 + P(rmw in the batch) visits sharing the turn's p requests' service (p c / capacity on one of
    # the c cores) and its time outside
    turn = 1 + p_rmw_batch
    loop = ClosedLoop(c, pipeline * c / node_ops / turn, clients, think / turn) if node_ops > 0 else None
    lam = loop.throughput() * pipeline / turn if loop is not None else 0.0
    x = lam / sm.scale
    # each class's latency: the same loop served by cosine-server's runtime, simulated
    # (cost_models.latency.RuntimeLoop), each request's seconds in the model's proportions
    mix = tuple((op, float(v)) for op, v in sm.mix.items() if v > 0)
    synced = _wal_sync(cfg) != "none"
    per_request = service_scale * c / node_ops if node_ops > 0 else 0.0
    costs = request_visits(cfg, node_wl, bd, device, shape, end_shape, spec, pipeline, per_request)
    runtime = RuntimeLoop(c, clients, pipeline, rtt_s, sync_s, _tick_s(cfg), mix, costs, synced)
    # enough requests that the rarest operation has LOOP_SAMPLES of its own (at most LOOP_MAX_REQUESTS)
    rarest = min((v for _, v in mix), default=0.0) / max(sum(v for _, v in mix), 1e-300)
    requests = int(min(max(LOOP_REQUESTS, math.ceil(LOOP_SAMPLES / max(rarest, 1e-300))), LOOP_MAX_REQUESTS))
    sim = runtime.simulate(requests) if node_ops > 0 and mix else None
    per_op: dict[str, Any] = {
        name: {"p50_us": _quantile_us(sim, P50, name), "p99_us": _quantile_us(sim, P99, name)}
        for name in w.operations
        if w.operations[name] > 0
    }
    return {
        "throughput_ops": x,
        "capacity_ops": capacity,
        "engine_in_process_ops": engine_only,
        "utilization": lam / node_ops if node_ops > 0 else 0.0,
        "serving_us_per_op": sm.serving_seconds * 1e6,
        # the servers' CPU per operation: the node's CPU demand (serial, parallel and background
        # seconds per cluster operation / shards, summed over the shards), whatever bounds the node; it
        # was the cores over the capacity, which for a device-bound node (YCSB D) is not its CPU
        "server_cpu_us_per_op": _cpu_per_op(d, threads) * 1e6,
        # of which the background thread's (merges and flushes: the engine's cosine-worker thread)
        "background_cpu_us_per_op": float(d.background[0]) * 1e6,
        "cpu_bound_us_per_op": cores_per_node * nodes / capacity * 1e6 if capacity > 0 else math.inf,
        "engine_cpu_us_per_op": float(d.serial[0] + d.parallel[0]) * 1e6 / sm.scale - sm.serving_seconds * 1e6,
        "wire_bytes_per_op": sm.wire_bytes_per_op,
        "fanout_scale": sm.scale,
        "rtt_us": rtt_s * 1e6,
        "sync_us": sync_s * 1e6,
        "latency_us": {"p50": _quantile_us(sim, P50), "p99": _quantile_us(sim, P99)},
        # the simulated loop's own throughput (the finite-source queue's is the prediction; equal
        # without writes at depth 1, tests/test_runtime_loop.py)
        "simulated_ops": sim.throughput / sm.scale if sim is not None else 0.0,
        "per_op": per_op,
        # how the simulated batches' replies waited, as the servers' INFO reports them (measured)
        "replies": replies_of(sim) if sim is not None else {},
    }


def thread_split(before: list[dict[str, float]], after: list[dict[str, float]], ops: int) -> dict[str, float]:
    """Microseconds of CPU per operation by thread name between two readings of each server's
    ``Server.cpu_by_thread`` (summed over the servers)."""
    out: dict[str, float] = {}
    for b, a in zip(before, after, strict=True):
        for name, secs in a.items():
            out[name] = out.get(name, 0.0) + (secs - b.get(name, 0.0)) / max(ops, 1) * 1e6
    return dict(sorted(out.items()))


def _cpu_per_op(d: Demands, threads: int) -> float:
    """CPU seconds per cluster operation of every node together: each of the N nodes spends the
    demands per (cluster operation / N) on N-th of the operations."""
    serial, parallel = d.at_threads(threads)
    return float(serial[0] + parallel[0] + d.background[0])


def request_visits(
    cfg: dict[str, Any],
    node_wl: dict[str, Any],
    bd: EngineBreakdown,
    device: DeviceModel,
    shape: dict[str, Any] | None,
    end_shape: dict[str, Any] | None,
    spec: Spec,
    pipeline: int,
    per_request_s: float,
) -> tuple[tuple[str, tuple[Visit, ...]], ...]:
    """Each operation's :class:`Visit` (two for an rmw: its read, its write) on one of the node's
    workers: the engine's foreground seconds of it (cost_models.engine_model.op_seconds; an rmw's
    split between its read and its write as a get's and an update's) and its serving seconds, the
    reply's write apart (cost_models.serving.op_visit_seconds), scaled so that a request of the mix
    takes ``per_request_s`` on average (the node's capacity: its merges and stalls spread over the
    requests in these proportions)."""
    w = spec.workload
    mix = {Operation(op): float(v) for op, v in node_wl["mix"].items() if float(v) > 0}
    engine = op_seconds(cfg, node_wl, bd, device, shape, end_shape)
    table = load_serving()
    wr = wire(w.key_bytes, w.value_bytes, float(node_wl["scan_length"]))
    rs = rmw_share(node_wl["mix"])
    raw: dict[Operation, list[tuple[float, float]]] = {}
    for op in mix:
        served_parts = op_visit_seconds(table, wr, op, pipeline, rs)
        if op == Operation.RMW:
            get, upd = engine[Operation.GET], engine[Operation.UPDATE]
            read = engine[op] * get / max(get + upd, 1e-300)
            eng = [read, engine[op] - read]
        else:
            eng = [engine[op]]
        raw[op] = [(e + t, min(max(r, 0.0), e + t)) for e, (t, r) in zip(eng, served_parts, strict=True)]
    mean = sum(v * sum(t for t, _ in raw[op]) for op, v in mix.items()) / sum(mix.values())
    k = per_request_s / mean if mean > 0 else 0.0
    return tuple(
        (op.value, tuple(Visit(k * (total - reply), k * reply) for total, reply in parts)) for op, parts in raw.items()
    )


def replies_of(sim: RuntimeResult) -> dict[str, Any]:
    """A simulation's reply waits per kind (batches, mean microseconds) and syncs per 1,000 batches,
    in the form :func:`reply_stats` gives the servers' (INFO server)."""
    batches = sum(len(v) for v in sim.waits.values())
    return {
        "waits": {
            k.value: {"batches": len(v), "mean_us": statistics.fmean(v) * 1e6 if v else 0.0}
            for k, v in sim.waits.items()
        },
        "syncs_per_1000_batches": {k.value: n * 1e3 / max(batches, 1) for k, n in sim.syncs.items()},
    }


def _quantile_us(sim: RuntimeResult | None, prob: float, op: str | None = None) -> float:
    """The ``prob``-quantile in microseconds of ``op``'s latency (None: every request's) in the simulated
    loop (inf: a node of no capacity)."""
    return sim.quantile(prob, op) * 1e6 if sim is not None else math.inf


def _tick_s(cfg: dict[str, Any]) -> float:
    """The durability waiter's tick: the rendered ``group_commit_interval_us``."""
    return float((cfg.get("durability") or {}).get("group_commit_interval_us", GROUP_COMMIT_INTERVAL_S * 1e6)) * 1e-6


def _wal_sync(cfg: dict[str, Any]) -> str:
    return str((cfg.get("durability") or {}).get("wal_sync", "group_commit"))


def drive(
    driver: Path,
    root: Path,
    wl: dict[str, Any],
    host: str,
    port: int,
    shards: list[Server],
    clients: int,
    pipeline: int,
    cores: tuple[int, ...],
    *,
    load: bool,
) -> dict[str, Any]:
    """One run of the RESP driver pinned to ``cores``; its JSON report."""
    path = root / ("workload-load.json" if load else "workload.json")
    path.write_text(json.dumps(wl))
    cmd = [str(driver), "--workload", str(path), "--host", f"{host}:{port}"]
    cmd += ["--shards", ",".join(f"{host}:{s.port}" for s in shards), "--connections", str(clients)]
    cmd += ["--pipeline", str(pipeline), "--threads", str(len(cores))]
    if not load:
        cmd.append("--no-load")
    res = subprocess.run(pinned(cmd, cores), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{DRIVER} failed: {res.stderr.strip()[-300:]}")
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def _entries_per_node(path: Path) -> float | None:
    if not path.is_file():
        return None
    return read_record(path, RenderMeta, "a cosine render.json").entries_per_node


def bench_served(
    spec: Spec,
    workspace: Path,
    *,
    records: int | None = None,
    operations: int | None = None,
    pipeline: int = 1,
    clients: int = DEFAULT_CLIENTS,
    nodes: int = 1,
    proxy_config: Callable[[int, list[tuple[str, int]]], str] | None = None,
    data_root: Path | None = None,
) -> ServedResult:
    """Serve the workspace's design and drive the spec's mix over RESP (module docstring).
    ``proxy_config``: nutcracker's YAML for a listen port and the shards (deploy.twemproxy), needed
    for ``nodes`` > 1."""
    check_options(pipeline, clients, nodes)
    if not workspace.is_dir() or not (workspace / "engine.toml").is_file():
        raise InputError(f"--engine {workspace}: no engine.toml; run `cosine render` first")
    if spec.workload.key_bytes < 16:
        raise InputError(
            f"--served needs keys of at least 16 bytes (the driver's keys), the spec has {spec.workload.key_bytes}"
        )
    if nodes > 1 and proxy_config is None:
        raise InputError("--nodes > 1 needs nutcracker's configuration (deploy.twemproxy)")
    if nodes > 1:
        need("nutcracker", "nutcracker")
    need("taskset", "util-linux")
    n = records if records is not None else int(min(spec.workload.entries, DEFAULT_RECORDS))
    check_range("--records", n, 1, 100_000_000, integer=True)
    ops = n if operations is None else operations
    check_range("--ops", ops, 1, 1_000_000_000, integer=True)
    server_cores, client_cores = core_split()
    notes = [
        f"server on cores {','.join(map(str, server_cores))}, client (and nutcracker) on cores "
        f"{','.join(map(str, client_cores))} of {cpu_count()}"
    ]
    text = (workspace / "engine.toml").read_text()
    try:
        engine_keys = int(tomllib.loads(text)["layout"]["key_bytes"])
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError):
        raise InputError(f"--engine {workspace}: engine.toml has no [layout] key_bytes") from None
    if engine_keys < spec.workload.key_bytes:
        raise InputError(
            f"--engine {workspace}: the engine's keys are {engine_keys} bytes, the spec's {spec.workload.key_bytes}: "
            "render the spec's own design (cosine render)"
        )
    cores_per_node = len(server_cores) / nodes
    threads = max(1, int(math.ceil(cores_per_node)))
    config = served_config(workspace, text, n, nodes, threads)
    wl = workload_json(spec, n, ops, threads)
    # the engine template's release build, as `cosine deploy` runs it: the same code serves every
    # design, all that is the design's is its engine.toml (docs/engine-contract.md)
    server_bin = build(TEMPLATE, "cosine-server")
    driver = build(TEMPLATE, DRIVER)
    root = (data_root or scratch_root()) / f"cosine-served-{os.getpid()}-{int(time.time())}"
    servers: list[Server] = []
    try:
        root.mkdir(parents=True)
        conf = root / "engine.toml"
        conf.write_text(config)
        for i in range(nodes):
            servers.append(cosine_server(server_bin, conf, root / f"node-{i}", server_cores, root / f"node-{i}.log"))
        host_port = servers[0].port
        if nodes > 1:
            assert proxy_config is not None
            host_port = free_port()
            yml = root / "nutcracker.yml"
            yml.write_text(proxy_config(host_port, [(f"node-{i}", s.port) for i, s in enumerate(servers)]))
            cmd = [
                need("nutcracker", "nutcracker"),
                "-c",
                str(yml),
                "-o",
                str(root / "nutcracker.log"),
                "-s",
                str(free_port()),
            ]
            servers.append(start(cmd, host_port, root / "nutcracker.out", client_cores))
        rtt = probe_rtt(servers[0].port)
        sync = probe_sync(root)
        warm = int(ops * WARMUP_SHARE)
        # the load and an unmeasured warm-up first, then the measured run with the servers' CPU read
        # around it (a shared machine may take a pinned server's core: the busy share says how much)
        drive(
            driver,
            root,
            {**wl, "operations": max(warm, 1)},
            HOST,
            host_port,
            servers[:nodes],
            clients,
            pipeline,
            client_cores,
            load=True,
        )
        # the engines' shape the measured phase starts from (the model predicts on it, as the
        # in-process validation does on its report's), read before the servers' CPU is
        start_state = mean_state([engine_state(s.port) for s in servers[:nodes]])
        replies0 = [reply_counters(s.port) for s in servers[:nodes]]
        dev0 = [device_counters(s.port) for s in servers[:nodes]]
        by0 = [s.cpu_by_thread() for s in servers[:nodes]]
        cpu0, t0 = sum(sum(b.values()) for b in by0), time.perf_counter()
        proxy0 = sum(s.cpu_seconds() for s in servers[nodes:])
        measured = drive(
            driver, root, wl, HOST, host_port, servers[:nodes], clients, pipeline, client_cores, load=False
        )
        by1 = [s.cpu_by_thread() for s in servers[:nodes]]
        cpu1, t1 = sum(sum(b.values()) for b in by1), time.perf_counter()
        dev1 = [device_counters(s.port) for s in servers[:nodes]]
        proxy = sum(s.cpu_seconds() for s in servers[nodes:]) - proxy0
        end_state = mean_state([engine_state(s.port) for s in servers[:nodes]])
        measured["engine_state"] = {"start": start_state, "end": end_state}
        # how the batches' replies waited (the runtime's schedule the latency model simulates)
        measured["replies"] = reply_stats(replies0, [reply_counters(s.port) for s in servers[:nodes]])
        done = max(int(measured["run"]["operations"]), 1)
        wall = max(t1 - t0, 1e-9)
        measured["server"] = {
            "cpu_seconds": cpu1 - cpu0,
            "cpu_us_per_op": (cpu1 - cpu0) / done * 1e6,
            "busy_share": (cpu1 - cpu0) / (wall * len(server_cores)),
            # by thread name: the runtime's (requests), the engine's merge thread, the syncs'
            "cpu_us_per_op_by_thread": thread_split(by0, by1, done),
            # the volume's I/Os and the engine threads' sleeps for it, per operation
            "device": device_stats(dev0, dev1, done),
        }
        # the client's side of the rig: the driver and (for a cluster) nutcracker on the client cores.
        # Near 1, the run measured the rig, not the node: the model predicts the servers only.
        driver_cpu = float(measured["run"].get("client_cpu_seconds", 0.0))
        measured["client"] = {
            "driver_cpu_seconds": driver_cpu,
            "proxy_cpu_seconds": proxy,
            "proxy_cpu_us_per_op": proxy / done * 1e6,
            "busy_share": (driver_cpu + proxy) / (wall * len(client_cores)),
        }
    finally:
        for s in reversed(servers):
            s.stop()
        shutil.rmtree(root, ignore_errors=True)
    predicted = predict(
        spec,
        config,
        {**wl, "warmup_operations": warm},
        nodes,
        cores_per_node,
        pipeline,
        clients,
        rtt,
        sync,
        start_state,
        end_state,
    )
    if measured["run"]["errors"]:
        notes.append(f"{measured['run']['errors']} error replies in the measured run")
    return ServedResult(
        config={
            "nodes": nodes,
            "pipeline": pipeline,
            "clients": clients,
            "records": n,
            "operations": ops,
            "server_cores": list(server_cores),
            "client_cores": list(client_cores),
            "threads_per_node": threads,
            "data": str(data_root or scratch_root()),
            "mix": {k: v for k, v in served_mix(spec.workload.operations, 1.0)[0].items()},
        },
        measured=measured,
        predicted=predicted,
        notes=notes,
    )
