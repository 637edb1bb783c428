"""A cosine-server (or redis-server) process to measure: started on a free loopback port, pinned
to a set of cores with ``taskset``, its CPU seconds read from /proc, stopped by its pid.

The served measurements (``cosine calibrate serving``, ``cosine bench --served``, the redis
comparison in bench/redis_peer.py) pin the server to some cores and the client to the others, so
that the client's CPU is not the server's (issue 48: "server pinned to one core, client on the
other").
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from specs.errors import InputError

HOST = "127.0.0.1"
#: Seconds a server has to answer PING after it starts.
READY_TIMEOUT_S = 30.0
#: Seconds a stopped server has to exit after SIGTERM (it flushes its memtable) before SIGKILL.
STOP_TIMEOUT_S = 60.0
#: :meth:`Server.settle`: a process using less than this share of a core over one interval is idle
#: (an idle cosine-server's interval threads, the group commit's and the durability waiter's, wake
#: every millisecond: 1.8 % of a core measured at stop 64), and the longest a settle waits.
SETTLE_SHARE = 0.05
SETTLE_INTERVAL_S = 0.2
SETTLE_TIMEOUT_S = 120.0


def need(tool: str, package: str) -> str:
    """The path of ``tool``; a one-line error naming the Debian package when it is missing."""
    path = shutil.which(tool)
    if path is None:
        raise InputError(f"{tool} is not installed: apt-get install {package} (make setup does it as root)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def cpu_list(cores: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cores)


def pinned(cmd: list[str], cores: tuple[int, ...] | None) -> list[str]:
    """``cmd`` under ``taskset -c CORES`` (as it is when ``cores`` is None)."""
    if cores is None:
        return cmd
    return [need("taskset", "util-linux"), "-c", cpu_list(cores), *cmd]


#: cosine-server's threads by name (/proc's comm): tokio's workers and blocking threads, which serve
#: the requests (tokio's default name), and the engine's merge thread (cosine-engine's worker).
RUNTIME_THREAD = "tokio-rt-worker"
MERGE_THREAD = "cosine-worker"


def thread_name(pid: int, tid: int) -> str:
    """Thread ``tid``'s name (/proc/PID/task/TID/comm: at most 15 bytes; "?" once it exited)."""
    try:
        return Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return "?"


def thread_cpu_ns(pid: int) -> dict[int, int]:
    """Each live thread of process ``pid``: its time on a CPU so far, in nanoseconds
    (/proc/PID/task/TID/schedstat's first field)."""
    out: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread exited between the listing and the read
    return out


@dataclass
class Server:
    """A running server process."""

    pid: int
    port: int
    log: Path
    proc: subprocess.Popen[bytes]
    #: every thread's last CPU figure read (:meth:`cpu_seconds`), by thread id
    seen_ns: dict[int, int] = field(default_factory=dict)
    #: each thread's name when first seen, by thread id
    names: dict[int, str] = field(default_factory=dict)
    #: the last figures of threads whose id a later thread took (its figure then restarts lower), by name
    retired_ns: dict[str, int] = field(default_factory=dict)

    def cpu_seconds(self) -> float:
        """CPU seconds of the process (every thread, user + system) so far, to the nanosecond.

        /proc/PID/stat counts in clock ticks (10 ms): a calibration point of 50 ms of CPU read that
        way is off by up to 20 % (docs/journal/s43-s51.md §31). This sums each thread's
        :func:`thread_cpu_ns`, keeping the last figure of every thread seen: a thread that exits
        between two reads loses only its time since the earlier one (tokio's blocking threads
        outlive 10 s idle; the network tasks and the group-commit thread live as long as the
        server)."""
        for tid, ns in thread_cpu_ns(self.pid).items():
            last = self.seen_ns.get(tid, 0)
            if ns < last:  # a new thread under an exited one's id: keep the old one's time
                old = self.names.pop(tid, "?")
                self.retired_ns[old] = self.retired_ns.get(old, 0) + last
            if tid not in self.names:
                self.names[tid] = thread_name(self.pid, tid)
            self.seen_ns[tid] = ns
        return (sum(self.retired_ns.values()) + sum(self.seen_ns.values())) / 1e9

    def cpu_by_thread(self) -> dict[str, float]:
        """:meth:`cpu_seconds` by thread name (:data:`RUNTIME_THREAD`, :data:`MERGE_THREAD`; the
        syncs' threads ``cosine-wal-sync`` and ``cosine-durable``)."""
        self.cpu_seconds()
        out = {name: ns / 1e9 for name, ns in self.retired_ns.items()}
        for tid, ns in self.seen_ns.items():
            name = self.names.get(tid, "?")
            out[name] = out.get(name, 0.0) + ns / 1e9
        return out

    def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> float:
        """Waits until the process is idle: its CPU over :data:`SETTLE_INTERVAL_S` below
        :data:`SETTLE_SHARE` of a core (a flush or merge the last requests started has ended).
        Returns the seconds waited; raises RuntimeError past ``timeout_s``."""
        start = time.perf_counter()
        last = self.cpu_seconds()
        while True:
            time.sleep(SETTLE_INTERVAL_S)
            now = self.cpu_seconds()
            if now - last < SETTLE_SHARE * SETTLE_INTERVAL_S:
                return time.perf_counter() - start
            if time.perf_counter() - start > timeout_s:
                raise RuntimeError(f"server {self.pid} still busy after {timeout_s:.0f} s")
            last = now

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM (cosine-server flushes and closes), SIGKILL after :data:`STOP_TIMEOUT_S`."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(cmd: list[str], port: int, log: Path, cores: tuple[int, ...] | None) -> Server:
    """Start ``cmd`` (listening on ``port``) pinned to ``cores``; returns once it answers PING."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        proc = subprocess.Popen(pinned(cmd, cores), stdout=fh, stderr=fh, stdin=subprocess.DEVNULL)
    srv = Server(proc.pid, port, log, proc)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if ping(port):
            return srv
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(empty log)"]
            raise RuntimeError(f"{cmd[0]} exited before answering: {tail[0]}")
        time.sleep(0.05)
    srv.stop()
    raise RuntimeError(f"{cmd[0]} did not answer PING on port {port} within {READY_TIMEOUT_S:.0f} s")


def cosine_server(binary: Path, config: Path, data_dir: Path, cores: tuple[int, ...] | None, log: Path) -> Server:
    """cosine-server on ``config`` and ``data_dir`` (emptied first), on a free port."""
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    port = free_port()
    cmd = [str(binary), "--config", str(config), "--dir", str(data_dir), "--bind", HOST, "--port", str(port)]
    return start(cmd, port, log, cores)


def core_split(cores: int | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(server cores, client cores) of this machine: the server gets the first half (at least one),
    the client the rest. One core: both get it (the split then measures a shared core)."""
    n = cores if cores is not None else (os.cpu_count() or 1)
    if n < 2:
        return (0,), (0,)
    half = n // 2
    return tuple(range(half)), tuple(range(half, n))
