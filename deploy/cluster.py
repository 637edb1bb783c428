"""Start, inspect and stop a local cluster: one cosine-server per node on a
loopback port, nutcracker in front; or, with replicas, each node a shard of
RF cosine-server replicas (a Raft group) speaking the Redis Cluster protocol.

Everything lives in the deployment directory (default ``RUN_DIR/deploy/``)::

    state.json          pids, ports, directories (rewritten atomically after every change)
    nutcracker.yml      the proxy's generated config; nutcracker.log, nutcracker.pid
    node-i/engine.toml  node i's rendered design (memory scaled by S)
    node-i/db/          its engine directory; node-i/server.log its output

and with ``--replicas RF`` (or ``--routing cluster``), no proxy::

    cluster.json        the shards, their slots, every replica's ports (deploy/raft.py)
    node-i.r/           replica r of shard i: engine.toml, db/ (engine, Raft log, snapshots), server.log

Processes run in their own sessions, so they outlive the ``cosine deploy`` that
started them; ``--down`` sends SIGTERM (a cosine-server then flushes and closes
its engine) and waits. A stopped deployment starts again on the same data.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy import raft, twemproxy
from deploy.plan import ClusterPlan, plan_cluster
from deploy.raft import Consistency, Routing
from measure.resp import info, ping
from specs.errors import InputError, check_range
from specs.io import check_output_dir, read_record, write_record, write_text
from specs.vocab import DeploymentStatus, WalSync

STATE = "state.json"
#: state.json's format version (2 added replicas; version 1 files read as unreplicated).
STATE_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: Default deployment directory, under the run directory.
DEPLOY_DIR = "deploy"
#: Seconds a server or the proxy may take to answer its first PING.
READY_TIMEOUT_S = 60.0
#: Seconds a server may take to flush and close after SIGTERM before it is killed.
STOP_TIMEOUT_S = 60.0
HOST = "127.0.0.1"
SERVER = "cosine-server"
PROXY = "nutcracker"
RUNNING = DeploymentStatus.RUNNING
STOPPED = DeploymentStatus.STOPPED


@dataclass
class NodeState:
    index: int
    name: str
    vm_type: str
    design_class: str
    port: int
    pid: int | None
    dir: str
    config: str
    log: str
    memory_bytes: float
    shard: int = 0  # the plan's node this server holds a replica of
    replica: int = 0
    raft_id: int | None = None  # its id in its shard's Raft group (replicated deployments)
    bus_port: int | None = None  # its Raft bus port


@dataclass
class ProxyState:
    port: int
    stats_port: int
    pid: int | None
    config: str
    log: str
    pid_file: str


@dataclass
class DeployState:
    version: int
    status: DeploymentStatus
    run_dir: str
    deploy_dir: str
    spec: str
    provider: str
    recommended_nodes: int
    scale: float
    scale_reason: str
    wal_sync: WalSync
    predicted_cloud_ops: float
    predicted_scaled_ops: float
    server_binary: str
    auto_eject: bool
    proxy: ProxyState | None  # None when clients route themselves (Redis Cluster)
    nodes: list[NodeState]
    replicas: int = 1
    routing: Routing = Routing.PROXY
    consistency: Consistency = Consistency.STRONG
    cluster_file: str | None = None

    @property
    def path(self) -> Path:
        return Path(self.deploy_dir)

    @property
    def proxy_port(self) -> int:
        """The proxy's port; an error for a deployment without one."""
        if self.proxy is None:
            raise InputError(f"{self.deploy_dir}: no proxy (clients reach its shards with the Redis Cluster protocol)")
        return self.proxy.port

    @property
    def shards(self) -> int:
        return len({n.shard for n in self.nodes})

    def shard_ports(self) -> list[int]:
        """The servers' ports (with replicas: every replica's)."""
        return [n.port for n in self.nodes]

    def members(self, shard: int) -> list[int]:
        """Indexes (in ``nodes``) of the replicas of ``shard``."""
        return [i for i, n in enumerate(self.nodes) if n.shard == shard]

    def seeds(self) -> list[tuple[str, int]]:
        """Where a cluster client learns the slots (every server)."""
        return [(HOST, n.port) for n in self.nodes]


def write_state(st: DeployState) -> None:
    write_record(st.path / STATE, st)


def read_state(deploy_dir: Path) -> DeployState:
    """A deployment's state.json, checked (every field's type; its version)."""
    path = deploy_dir / STATE
    st = read_record(path, DeployState, "a cosine deployment's state.json")
    if st.version not in READABLE_VERSIONS:
        raise InputError(f"{path}: state version {st.version!r}, this cosine reads {READABLE_VERSIONS}")
    if Path(st.deploy_dir).resolve() != deploy_dir.resolve():
        raise InputError(f"{path}: records deployment {st.deploy_dir}, not this directory (was it moved?)")
    return st


def deploy_dir_of(run_dir: Path, out: Path | None) -> Path:
    return out if out is not None else run_dir / DEPLOY_DIR


def alive(pid: int | None, name: str) -> bool:
    """True if ``pid`` is a live (not zombie) process running ``name``; reaps it if it is our dead child."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read()
    except OSError:
        return False
    if state == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return name.encode() in cmd


def free_port(taken: Collection[int] = ()) -> int:
    """A loopback port nobody listens on now and not in ``taken`` (ports chosen for this deployment
    but not yet bound: the kernel may hand a just-released port out again)."""
    while True:
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            return port


def check_port_free(port: int) -> None:
    """``--port``: refused before anything starts when another process listens there."""
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError as exc:
            raise InputError(f"--port {port}: {HOST}:{port} is in use ({exc.strerror}); choose another port") from None


def server_binary() -> Path:
    """cosine-server, built (release) from the engine template: the same code runs every design,
    all that is design-specific is in each node's engine.toml (docs/engine-contract.md)."""
    from measure.engine import TEMPLATE, build

    return build(TEMPLATE, SERVER)


def _spawn(cmd: list[str], log: Path) -> int:
    with open(log, "ab") as fh:
        p = subprocess.Popen(cmd, stdout=fh, stderr=fh, stdin=subprocess.DEVNULL, start_new_session=True)
    return p.pid


def _last_line(log: Path) -> str:
    try:
        lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def _wait_ready(pid: int, name: str, port: int, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if ping(HOST, port):
            return
        if not alive(pid, name):
            raise RuntimeError(f"{name} on port {port} exited: {_last_line(log)}")
        time.sleep(0.05)
    raise RuntimeError(f"{name} on port {port} did not answer PING within {READY_TIMEOUT_S:.0f} s")


def start_node(st: DeployState, i: int) -> None:
    """Start (or restart, after a crash) node ``i`` on its port and directory; waits until it answers."""
    n = st.nodes[i]
    if alive(n.pid, SERVER):
        raise InputError(f"{n.name} is already running (pid {n.pid})")
    cmd = [st.server_binary, "--config", n.config, "--dir", n.dir, "--bind", HOST, "--port", str(n.port)]
    if st.routing == Routing.CLUSTER:
        assert st.cluster_file is not None and n.raft_id is not None
        cmd += ["--cluster", st.cluster_file, "--node-id", str(n.raft_id)]
    n.pid = _spawn(cmd, Path(n.log))
    write_state(st)
    _wait_ready(n.pid, SERVER, n.port, Path(n.log))


def _start_proxy(st: DeployState) -> None:
    p = st.proxy
    assert p is not None
    p.pid = _spawn(twemproxy.command(Path(p.config), p.stats_port, Path(p.log), Path(p.pid_file)), Path(p.log))
    write_state(st)
    _wait_ready(p.pid, PROXY, p.port, Path(p.log))


def _stop(pid: int | None, name: str, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> str:
    """Signal a process and wait for it to go; SIGKILL after ``timeout``. Says what happened."""
    if not alive(pid, name):
        return "not running"
    assert pid is not None
    os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid, name):
            return "stopped"
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return f"killed (no exit {timeout:.0f} s after SIGTERM)"


def _stop_all(pids: list[int | None], name: str, timeout: float = STOP_TIMEOUT_S) -> list[str]:
    """SIGTERM every process of ``pids`` at once, then wait for them all (SIGKILL after ``timeout``);
    what happened to each. (One at a time, a replicated shard would elect a new leader after each.)"""
    running = [alive(p, name) for p in pids]
    for p, up in zip(pids, running, strict=True):
        if up:
            assert p is not None
            os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(alive(p, name) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    out = []
    for p, up in zip(pids, running, strict=True):
        if not up:
            out.append("not running")
        elif alive(p, name):
            assert p is not None
            os.kill(p, signal.SIGKILL)
            out.append(f"killed (no exit {timeout:.0f} s after SIGTERM)")
        else:
            out.append("stopped")
    return out


def kill_node(st: DeployState, i: int) -> None:
    """SIGKILL node ``i`` (a crash, for fault tests); its state keeps the pid until restarted."""
    _stop(st.nodes[i].pid, SERVER, signal.SIGKILL, timeout=10.0)


def kill_all(st: DeployState) -> None:
    """SIGKILL every server at once (a power cut of the whole cluster, for fault tests), then reap them."""
    for n in st.nodes:
        if alive(n.pid, SERVER):
            assert n.pid is not None
            os.kill(n.pid, signal.SIGKILL)
    for i in range(len(st.nodes)):
        kill_node(st, i)


def stop_node(st: DeployState, i: int) -> str:
    """SIGTERM node ``i`` (it flushes and closes) and waits; says what happened."""
    return _stop(st.nodes[i].pid, SERVER)


def signal_node(st: DeployState, i: int, sig: signal.Signals) -> None:
    """Sends ``sig`` (SIGSTOP, SIGCONT) to node ``i``, a process this deployment started."""
    pid = st.nodes[i].pid
    if not alive(pid, SERVER):
        raise RuntimeError(f"{st.nodes[i].name} is not running")
    assert pid is not None
    os.kill(pid, sig)


def _prepare_dir(d: Path, plan: ClusterPlan, replicas: int, routing: Routing) -> tuple[DeployState | None, bool]:
    """The previous deployment to reuse (None for a fresh directory) and whether some of its servers
    still run (a replicated deployment with replicas down: :func:`repair` starts them); refuses
    anything else."""
    if (d / STATE).is_file():
        old = read_state(d)
        up = [alive(n.pid, SERVER) for n in old.nodes]
        proxy_up = old.proxy is not None and alive(old.proxy.pid, PROXY)
        if all(up) or proxy_up or (any(up) and (old.routing == Routing.PROXY or old.status == STOPPED)):
            raise InputError(f"{d}: a cluster is already running there (stop it with --down first)")
        if old.shards != len(plan.nodes):
            raise InputError(
                f"{d}: the {'running' if any(up) else 'stopped'} deployment there holds {old.shards} shards, this "
                f"plan has {len(plan.nodes)}; its data would map to other shards (use --nodes {old.shards} or --out)"
            )
        if (old.replicas, old.routing) != (replicas, routing):
            raise InputError(
                f"{d}: the deployment there has {old.replicas} replica(s) per shard, routed by {old.routing}; "
                f"start it with --replicas {old.replicas} --routing {old.routing}, or use another --out"
            )
        return old, any(up)
    if d.exists() and (not d.is_dir() or any(d.iterdir())):
        raise InputError(f"{d}: exists and is not a cosine deployment; refusing to write into it")
    return None, False


def repair(st: DeployState) -> list[str]:
    """Starts the replicas of a running replicated deployment that are down, each on its own data
    and configuration (it catches up from its shard's leader: the log, or a snapshot); waits until
    every shard has a leader. The names of the replicas started."""
    started = []
    for i, n in enumerate(st.nodes):
        if not alive(n.pid, SERVER):
            start_node(st, i)
            started.append(n.name)
    raft.wait_leaders(st)
    return started


def up(
    run_dir: Path,
    *,
    out: Path | None = None,
    nodes: int | None = None,
    scale: float | None = None,
    wal_sync: WalSync = WalSync.GROUP_COMMIT,
    proxy_port: int | None = None,
    auto_eject: bool = True,
    replicas: int | None = None,
    routing: Routing | None = None,
    consistency: Consistency = Consistency.STRONG,
    timing: raft.RaftTiming | None = None,
) -> DeployState:
    """Start the local cluster of RUN_DIR's solution; returns its state (also in state.json).
    A stopped deployment starts again on its data; a replicated one with replicas down has
    them started (:func:`repair`).

    ``replicas`` per shard (default: the solution's replication factor, :func:`raft.default_replicas`);
    ``routing`` defaults to the proxy for one replica and to the Redis Cluster protocol otherwise."""
    if proxy_port is not None:
        check_range("--port", proxy_port, 1024, 65535, integer=True)
    check_output_dir(deploy_dir_of(run_dir, out), "--out" if out is not None else "the deployment directory")
    if replicas is None:
        from solver.rundir import SOLUTION, read_solution

        replicas, _ = raft.default_replicas(read_solution(run_dir / SOLUTION))
    routing = routing or (Routing.PROXY if replicas == 1 else Routing.CLUSTER)
    raft.check_replicas(replicas, routing)
    plan = plan_cluster(run_dir, nodes=nodes, scale=scale, wal_sync=wal_sync, replicas=replicas)
    if routing == Routing.CLUSTER and proxy_port is not None:
        raise InputError("--port is the proxy's port; a cluster-routed deployment has no proxy")
    if routing == Routing.PROXY:
        twemproxy.nutcracker_binary()
    run_dir = run_dir.absolute()  # the state holds absolute paths: --status/--down work from anywhere
    d = deploy_dir_of(run_dir, out.absolute() if out is not None else None)
    old, partly_up = _prepare_dir(d, plan, replicas, routing)
    if old is not None and partly_up:
        # a replicated deployment with replicas down: start them as they were configured
        if (old.wal_sync, old.consistency) != (plan.wal_sync, consistency):
            raise InputError(
                f"{d}: its running replicas have wal_sync {old.wal_sync}, {old.consistency} reads; the replicas "
                f"that are down restart the same (give --wal-sync {old.wal_sync} --consistency {old.consistency})"
            )
        repair(old)
        return old
    per_shard = replicas if routing == Routing.CLUSTER else 1
    ports = old.shard_ports() if old else []
    buses = [n.bus_port for n in old.nodes if n.bus_port is not None] if old else []
    if proxy_port is not None and proxy_port in ports:
        raise InputError(f"--port {proxy_port}: a shard of this deployment listens there")
    if proxy_port is not None and (old is None or old.proxy is None or old.proxy.port != proxy_port):
        check_port_free(proxy_port)
    exe = server_binary()
    d.mkdir(parents=True, exist_ok=True)
    reserved = [] if proxy_port is None else [proxy_port]
    count = len(plan.nodes) * per_shard
    while len(ports) < count:
        ports.append(free_port([*ports, *buses, *reserved]))
    if routing == Routing.CLUSTER:
        while len(buses) < count:
            buses.append(free_port([*ports, *buses, *reserved]))
    node_states: list[NodeState] = []
    for n in plan.nodes:
        for r in range(per_shard):
            i = len(node_states)
            name = n.name if routing == Routing.PROXY else f"{n.name}.{r}"
            nd = d / name
            (nd / "db").mkdir(parents=True, exist_ok=True)
            write_text(nd / "engine.toml", n.engine_toml)
            node_states.append(
                NodeState(
                    n.index,
                    name,
                    n.vm_type,
                    n.design_class,
                    ports[i],
                    None,
                    str(nd / "db"),
                    str(nd / "engine.toml"),
                    str(nd / "server.log"),
                    n.memory_bytes,
                    shard=n.index,
                    replica=r,
                    raft_id=i + 1 if routing == Routing.CLUSTER else None,
                    bus_port=buses[i] if routing == Routing.CLUSTER else None,
                )
            )
    proxy, cluster_file = None, None
    if routing == Routing.PROXY:
        pport = proxy_port if proxy_port is not None else (old.proxy.port if old and old.proxy else free_port(ports))
        conf = write_text(
            d / "nutcracker.yml",
            twemproxy.config_yaml(pport, [(n.name, n.port) for n in node_states], auto_eject=auto_eject),
        )
        twemproxy.check_config(conf)
        stats_port = free_port([*ports, pport])  # distinct from every port of the deployment (a clash stops nutcracker)
        proxy = ProxyState(pport, stats_port, None, str(conf), str(d / "nutcracker.log"), str(d / "nutcracker.pid"))
    else:
        topo = raft.topology(node_states, consistency, timing or raft.RaftTiming())
        cluster_file = str(write_text(d / "cluster.json", json.dumps(topo, indent=1) + "\n"))
    st = DeployState(
        version=STATE_VERSION,
        status=RUNNING,
        run_dir=str(run_dir),
        deploy_dir=str(d),
        spec=plan.spec,
        provider=plan.provider,
        recommended_nodes=plan.recommended_nodes,
        scale=plan.scale,
        scale_reason=plan.scale_reason,
        wal_sync=plan.wal_sync,
        predicted_cloud_ops=plan.predicted_cloud_ops,
        predicted_scaled_ops=plan.predicted_scaled_ops,
        server_binary=str(exe),
        auto_eject=auto_eject,
        proxy=proxy,
        nodes=node_states,
        replicas=replicas,
        routing=routing,
        consistency=consistency,
        cluster_file=cluster_file,
    )
    write_state(st)
    try:
        for i in range(len(st.nodes)):
            start_node(st, i)
        if st.proxy is not None:
            _start_proxy(st)
        else:
            raft.wait_leaders(st)
    except BaseException:
        down(d)
        raise
    return st


def down(deploy_dir: Path) -> list[tuple[str, str]]:
    """Stop the proxy, then every server at once (SIGTERM: each flushes and closes its engine)."""
    st = read_state(deploy_dir)
    done = []
    if st.proxy is not None:
        done.append((PROXY, _stop(st.proxy.pid, PROXY)))
        st.proxy.pid = None
    done += zip([n.name for n in st.nodes], _stop_all([n.pid for n in st.nodes], SERVER), strict=True)
    for n in st.nodes:
        n.pid = None
    st.status = STOPPED
    write_state(st)
    if st.proxy is not None:
        Path(st.proxy.pid_file).unlink(missing_ok=True)
    return done


@dataclass(frozen=True)
class Health:
    """A deployment's health (``cosine deploy --status``)."""

    status: DeploymentStatus
    down: list[str]  # processes down or not answering
    shards: list[raft.ShardView]  # a replicated deployment's shards ([] behind a proxy)

    @property
    def leaderless(self) -> list[int]:
        """Shards without a leader (they take no writes)."""
        return [v.shard for v in self.shards if v.leader is None]


def health(st: DeployState, rows: list[dict[str, Any]]) -> Health:
    """A started deployment is degraded while any of its processes is down or does not answer, or
    a shard has no leader."""
    shards = []
    if st.routing == Routing.CLUSTER:
        by_name = {r["name"]: r for r in rows}
        views = {i: by_name[n.name].get("info") if by_name[n.name]["answers"] else None for i, n in enumerate(st.nodes)}
        shards = raft.shard_views(st, views)
    if st.status == STOPPED:
        return Health(STOPPED, [], shards)
    down = [r["name"] for r in rows if not (r["alive"] and r["answers"])]
    bad = down or any(v.leader is None for v in shards)
    return Health(DeploymentStatus.DEGRADED if bad else RUNNING, down, shards)


def status(deploy_dir: Path) -> tuple[DeployState, list[dict[str, Any]]]:
    """The state and one row per process: alive, answering, and each server's INFO counters (with
    replicas: its shard and its role, ``leader``, ``follower``, ``candidate`` or ``down``)."""
    st = read_state(deploy_dir)
    rows: list[dict[str, Any]] = []
    if st.proxy is not None:
        rows.append(
            {
                "name": PROXY,
                "port": st.proxy.port,
                "pid": st.proxy.pid,
                "alive": alive(st.proxy.pid, PROXY),
                "answers": ping(HOST, st.proxy.port),
            }
        )
    for n in st.nodes:
        row: dict[str, Any] = {
            "name": n.name,
            "port": n.port,
            "pid": n.pid,
            "alive": alive(n.pid, SERVER),
            "design": n.design_class,
            "vm_type": n.vm_type,
            "memory_bytes": n.memory_bytes,
        }
        row["answers"] = row["alive"] and ping(HOST, n.port)
        if row["answers"]:
            try:
                row["info"] = info(HOST, n.port)
            except (OSError, ConnectionError):
                row["answers"] = False
        if st.routing == Routing.CLUSTER:
            row["shard"] = n.shard
            row["role"] = row["info"].get("raft_state", "unknown") if row["answers"] else "down"
        rows.append(row)
    return st, rows
