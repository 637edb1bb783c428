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
* **latency**: p50 and p99 of each operation in the same loop simulated with cosine-server's
  commit point (cost_models.latency.PassLoop): a worker serves, in passes, every batch one poll of
  its sockets found, and a batch that wrote is answered at the end of its pass (the worker parks:
  its run queue is empty, and the durability waiter syncs) or at the waiter's tick, then its sync
  time; an rmw's write is a second batch, sent once its read is answered. Without writes the
  simulation is the finite-source queue (tests/test_served_model.py checks its throughput and
  quantiles against ClosedLoop's closed forms); with them a write waits for its pass to end: at
  saturation the writes' p50 is 150-230 us above the reads' at depth 1 (BENCHMARKS.md §20,
  journal §41.5).
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
from cost_models.cpu import Demands, throughput
from cost_models.engine_model import engine_breakdown
from cost_models.latency import P50, P99, ClosedLoop, PassLoop, PassResult
from cost_models.network import served_mix
from cost_models.serving import (
    GROUP_COMMIT_INTERVAL_S,
    Serving,
    per_cluster_op,
    rmw_share,
    served,
    write_request_share,
)
from measure.engine import TEMPLATE, build, scaled_config, scratch_root, workload_json
from measure.server import HOST, Server, core_split, cosine_server, free_port, need, pinned, start
from render.config import config_device, to_toml
from render.workspace import RENDER_META, RenderMeta
from specs.errors import InputError, check_range
from specs.io import read_record
from specs.schema import Spec

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
#: Requests each prediction's loop is simulated for (cost_models.latency.PassLoop): its p99 from
#: ~1,000 requests above it; ~0.3 s at depth 1. More when an operation is rarer than
#: PASS_SAMPLES in that many, up to PASS_MAX_REQUESTS.
PASS_REQUESTS = 100_000
PASS_SAMPLES = 1_000
PASS_MAX_REQUESTS = 2_000_000


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


def engine_state(port: int) -> dict[str, Any]:
    """The engine's shape as the server's ``INFO keyspace`` reports it (its buffered entries and each
    disk level's entries and runs), in the form of the in-process bench's ``load.shape``
    (cost_models.engine_model.observed_state reads either)."""
    with socket.create_connection((HOST, port), timeout=30) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$8\r\nkeyspace\r\n")
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError(f"cosine-server on port {port} closed the connection on INFO keyspace")
            got += chunk
        head, _, body = got.partition(b"\r\n")
        if not head.startswith(b"$"):
            raise RuntimeError(f"cosine-server on port {port} answered INFO keyspace with {head[:80]!r}")
        size = int(head[1:])
        while len(body) < size:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError(f"cosine-server on port {port} closed the connection in its INFO reply")
            body += chunk
    state: dict[str, Any] = {"buffered": 0.0, "levels": []}
    for line in body[:size].decode().splitlines():
        name, _, value = line.partition(":")
        if name == "buffered_entries":
            state["buffered"] = float(value)
        elif name.startswith("level") and name[5:].isdigit():
            fields = dict(kv.split("=", 1) for kv in value.split(","))
            state["levels"].append(
                {"level": int(name[5:]), "entries": float(fields["entries"]), "runs": float(fields["runs"])}
            )
    return state


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
) -> dict[str, Any]:
    """The model's served throughput and p50/p99 for this run (module docstring). ``shape`` /
    ``end_shape``: a node's engine when the measured phase began and ended (:func:`engine_state`;
    None: the model's expected state), as the in-process validation predicts on its report's."""
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
    # each class's latency: the same loop with cosine-server's commit point, simulated
    # (cost_models.latency.PassLoop: a batch that wrote is answered at the end of the runtime's pass)
    mix = tuple((op, float(v)) for op, v in sm.mix.items() if v > 0)
    synced = _wal_sync(cfg) != "none"
    service = pipeline * c / node_ops / turn if node_ops > 0 else math.inf
    passes = PassLoop(c, service, clients, pipeline, rtt_s, sync_s, _tick_s(cfg), mix, synced)
    # enough requests that the rarest operation has PASS_SAMPLES of its own (at most PASS_MAX_REQUESTS)
    rarest = min((v for _, v in mix), default=0.0) / max(sum(v for _, v in mix), 1e-300)
    requests = int(min(max(PASS_REQUESTS, math.ceil(PASS_SAMPLES / max(rarest, 1e-300))), PASS_MAX_REQUESTS))
    sim = passes.simulate(requests) if node_ops > 0 and mix else None
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
        "cpu_bound_us_per_op": cores_per_node * nodes / capacity * 1e6 if capacity > 0 else math.inf,
        "engine_cpu_us_per_op": float(d.serial[0] + d.parallel[0]) * 1e6 / sm.scale - sm.serving_seconds * 1e6,
        "wire_bytes_per_op": sm.wire_bytes_per_op,
        "fanout_scale": sm.scale,
        "rtt_us": rtt_s * 1e6,
        "sync_us": sync_s * 1e6,
        "latency_us": {"p50": _quantile_us(sim, P50), "p99": _quantile_us(sim, P99)},
        # the simulated loop's own throughput (the finite-source queue's is the prediction: within 2 % of
        # it on the served Fig. 4B's rows, journal §41.5; equal without writes, tests/test_served_model.py)
        "simulated_ops": sim.throughput / sm.scale if sim is not None else 0.0,
        "per_op": per_op,
    }


def _cpu_per_op(d: Demands, threads: int) -> float:
    """CPU seconds per cluster operation of every node together: each of the N nodes spends the
    demands per (cluster operation / N) on N-th of the operations."""
    serial, parallel = d.at_threads(threads)
    return float(serial[0] + parallel[0] + d.background[0])


def _quantile_us(sim: PassResult | None, prob: float, op: str | None = None) -> float:
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
    per_node = _entries_per_node(workspace / RENDER_META)
    if per_node is not None:
        text = scaled_config(text, (n / nodes) / float(per_node))
    cores_per_node = len(server_cores) / nodes
    threads = max(1, int(math.ceil(cores_per_node)))
    config = node_config(text, threads)
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
        cpu0, t0 = sum(s.cpu_seconds() for s in servers[:nodes]), time.perf_counter()
        proxy0 = sum(s.cpu_seconds() for s in servers[nodes:])
        measured = drive(
            driver, root, wl, HOST, host_port, servers[:nodes], clients, pipeline, client_cores, load=False
        )
        cpu1, t1 = sum(s.cpu_seconds() for s in servers[:nodes]), time.perf_counter()
        proxy = sum(s.cpu_seconds() for s in servers[nodes:]) - proxy0
        end_state = mean_state([engine_state(s.port) for s in servers[:nodes]])
        measured["engine_state"] = {"start": start_state, "end": end_state}
        done = max(int(measured["run"]["operations"]), 1)
        wall = max(t1 - t0, 1e-9)
        measured["server"] = {
            "cpu_seconds": cpu1 - cpu0,
            "cpu_us_per_op": (cpu1 - cpu0) / done * 1e6,
            "busy_share": (cpu1 - cpu0) / (wall * len(server_cores)),
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
