"""Soak of cosine-server's per-client output limit (issue 46 item 1): well-behaved clients next to
misbehaving ones for N minutes, the server's RSS sampled every second. Prints figures; not a test.

    .venv/bin/python -m bench.server_soak [--minutes 10] [--clients 2] [--limits HARD SOFT SECONDS]

The server is the engine template's release ``cosine-server`` (built as ``cosine deploy`` builds it)
on the template's default design (``engine-template/engine.toml``, ``wal_sync = none``) with two
runtime workers, its data on tmpfs, and the output limit at its defaults (256 MiB hard, 64 MiB soft
for 60 s) unless ``--limits`` passes other ``--client-output-buffer-*`` values. Clients, for the
whole run:

* **well-behaved** (``--clients`` processes): pipelines of 16 requests, GET and SET half each of
  100-byte values over 10,000 keys, every reply read and checked; their throughput is the figure;
* **flooders** (three threads, one per value size 1, 8 and 32 MiB): pipeline GETs of the value
  worth 1 GiB of replies and never read; each holds its connection until the server closes it or
  75 s pass, then resets it and connects again 2 s later;
* **slow readers** (two threads): pipeline 200 GETs of a 256 KiB value and read the 50 MiB back
  at about 1.3 MiB/s;
* **quitters** (two threads): pipeline 300 mixed requests (SETs of 1 KiB, GETs of the 1 MiB
  value), read five replies and reset the connection.

Printed: the RSS ceiling (and when), RSS at the start, when the clients stop and 5 s of light
traffic later, ``INFO stats``
``client_output_buffer_limit_disconnections`` (and the server's log lines for them), what each
kind of client saw, and the well-behaved clients' operations per second (overall and the worst
10-second window). A progress line every 10 s when stdout is not a terminal.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

from deploy.cluster import HOST, server_binary
from measure.engine import TEMPLATE, config_text, scratch_root
from measure.resp import Connection, encode, info

KEYS = 10_000
PIPELINE = 16
SMALL = b"v" * 100
FLOOD_SIZES_MIB = (1, 8, 32)
#: Replies a flooder asks for: 1 GiB of them whatever the value size.
FLOOD_BYTES = 1 << 30
#: Seconds a flooder holds its connection when the server does not close it (past the 60 s soft limit).
FLOOD_HOLD_S = 75.0
#: Seconds a flooder waits before it connects again.
FLOOD_PAUSE_S = 2.0
#: Seconds of light traffic after the clients stop before the last RSS sample (mimalloc returns
#: freed pages when a thread next takes fresh ones, at least its 1 s purge delay after the free).
SETTLE_S = 5.0
SLOW_VALUE = 256 << 10
SLOW_GETS = 200
SLOW_CHUNK = 64 << 10
SLOW_PAUSE_S = 0.05
QUIT_REQUESTS = 300
TCP_STATE_ESTABLISHED = 1


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def well_behaved(port: int, deadline: float, seed: int, ops: Synchronized, errors: Synchronized) -> None:
    """GET/SET pipelines with every reply read and checked, until ``deadline`` (time.time())."""
    rng = random.Random(seed)
    with Connection(HOST, port, timeout=30.0) as c:
        while time.time() < deadline:
            reqs: list[tuple[bytes | str | int, ...]] = []
            for i in range(PIPELINE):
                k = f"k{rng.randrange(KEYS)}"
                reqs.append(("SET", k, SMALL) if i % 2 else ("GET", k))
            try:
                replies = c.pipeline(reqs)
            except OSError:
                with errors.get_lock():
                    errors.value += PIPELINE
                return
            want = ["OK" if q[0] == "SET" else SMALL for q in reqs]
            bad = sum(1 for r, w in zip(replies, want, strict=True) if r != w and not (w == SMALL and r is None))
            with ops.get_lock():
                ops.value += PIPELINE - bad
            if bad:
                with errors.get_lock():
                    errors.value += bad


def tcp_state(s: socket.socket) -> int:
    """The kernel's TCP state of ``s`` (``tcpi_state``, the first byte of ``struct tcp_info``)."""
    return int(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0])


def abort(s: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0): what a crashed client does, and nothing lingers."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    s.close()


@dataclass
class Tally:
    """What the misbehaving clients saw (updated by their threads under ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    flood_runs: Counter[int] = field(default_factory=Counter)
    flood_closed: Counter[int] = field(default_factory=Counter)
    flood_close_s: dict[int, list[float]] = field(default_factory=dict)
    slow_done: int = 0
    slow_closed: int = 0
    slow_bytes: int = 0
    quits: int = 0
    failures: list[str] = field(default_factory=list)


def flooder(port: int, mib: int, deadline: float, t: Tally) -> None:
    n = FLOOD_BYTES // (mib << 20)
    wire = encode("GET", f"big{mib}") * n
    while time.time() < deadline - 1:
        s = socket.create_connection((HOST, port), timeout=10)
        s.sendall(wire)
        start = time.monotonic()
        closed = False
        while time.monotonic() - start < FLOOD_HOLD_S and time.time() < deadline:
            if tcp_state(s) != TCP_STATE_ESTABLISHED:
                closed = True
                break
            time.sleep(0.1)
        abort(s)
        with t.lock:
            t.flood_runs[mib] += 1
            if closed:
                t.flood_closed[mib] += 1
                t.flood_close_s.setdefault(mib, []).append(time.monotonic() - start)
        time.sleep(FLOOD_PAUSE_S)


def slow_reader(port: int, deadline: float, t: Tally) -> None:
    want = SLOW_GETS * (SLOW_VALUE + len(b"$%d\r\n\r\n" % SLOW_VALUE))
    while time.time() < deadline - 1:
        s = socket.create_connection((HOST, port), timeout=30)
        s.sendall(encode("GET", "slow") * SLOW_GETS)
        got = 0
        try:
            while got < want and time.time() < deadline:
                chunk = s.recv(SLOW_CHUNK)
                if not chunk:
                    raise ConnectionError("closed by the server")
                got += len(chunk)
                time.sleep(SLOW_PAUSE_S)
        except OSError:
            with t.lock:
                t.slow_closed += 1
        with t.lock:
            t.slow_bytes += got
            t.slow_done += got >= want
        s.close()


def quitter(port: int, deadline: float, seed: int, t: Tally) -> None:
    rng = random.Random(seed)
    while time.time() < deadline - 1:
        reqs = [
            encode("SET", f"q{rng.randrange(KEYS)}", b"q" * 1024) if rng.random() < 0.5 else encode("GET", "big1")
            for _ in range(QUIT_REQUESTS)
        ]
        with Connection(HOST, port, timeout=30.0) as c:
            c.sock.sendall(b"".join(reqs))
            for _ in range(5):
                c.read()
            abort(c.sock)
        with t.lock:
            t.quits += 1
        time.sleep(0.05)


def guarded(target: object, t: Tally, *args: object) -> threading.Thread:
    """A daemon thread running ``target(*args, t)``; an exception is recorded, not lost."""

    def run() -> None:
        try:
            target(*args, t)  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - reported in the summary
            with t.lock:
                t.failures.append(f"{getattr(target, '__name__', target)}: {type(exc).__name__}: {exc}")

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha.strip() + ("+dirty" if dirty.stdout.strip() else "")


def cpu_model() -> str:
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=2, help="well-behaved client processes")
    ap.add_argument("--limits", type=int, nargs=3, metavar=("HARD", "SOFT", "SECONDS"), help="output limit flags")
    a = ap.parse_args()
    binary = server_binary()
    with open(TEMPLATE / "engine.toml", "rb") as fh:
        secs = tomllib.load(fh)
    work = scratch_root() / f"cosine-soak-{os.getpid()}"
    work.mkdir(parents=True)
    (work / "engine.toml").write_text(config_text(secs, 2))
    cmd = [str(binary), "--config", str(work / "engine.toml"), "--dir", str(work / "db"), "--port", "0"]
    if a.limits:
        hard, soft, secs_ = a.limits
        cmd += ["--client-output-buffer-hard-bytes", str(hard), "--client-output-buffer-soft-bytes", str(soft)]
        cmd += ["--client-output-buffer-soft-seconds", str(secs_)]
    log = open(work / "server.log", "wb")  # noqa: SIM115 - closed after the server exits
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
    try:
        assert srv.stdout is not None
        ready = srv.stdout.readline().decode()
        if not ready.startswith("ready "):
            raise RuntimeError(f"cosine-server did not start: {(work / 'server.log').read_text()[-500:]}")
        port = int(ready.rsplit(":", 1)[1])
        run(a, srv.pid, port, work)
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def run(a: argparse.Namespace, pid: int, port: int, work: Path) -> None:
    with Connection(HOST, port, timeout=60.0) as c:
        for mib in FLOOD_SIZES_MIB:
            c.call("SET", f"big{mib}", b"b" * (mib << 20))
        c.call("SET", "slow", b"s" * SLOW_VALUE)
        for i in range(0, KEYS, 500):
            c.pipeline([("SET", f"k{j}", SMALL) for j in range(i, i + 500)])
    start_rss = rss_bytes(pid)
    seconds = a.minutes * 60
    t0 = time.time()
    deadline = t0 + seconds
    ops, errors = mp.Value("q", 0), mp.Value("q", 0)
    procs = [mp.Process(target=well_behaved, args=(port, deadline, i, ops, errors)) for i in range(a.clients)]
    for p in procs:
        p.start()
    t = Tally()
    threads = [guarded(flooder, t, port, mib, deadline) for mib in FLOOD_SIZES_MIB]
    threads += [guarded(slow_reader, t, port, deadline) for _ in range(2)]
    threads += [guarded(quitter, t, port, deadline, 100 + i) for i in range(2)]
    ceiling, ceiling_at = start_rss, 0.0
    per_second: list[int] = []
    last_ops, last_print = 0, t0
    tty = sys.stdout.isatty()
    while time.time() < deadline:
        time.sleep(1.0)
        now = time.time() - t0
        r = rss_bytes(pid)
        if r > ceiling:
            ceiling, ceiling_at = r, now
        done = int(ops.value)
        per_second.append(done - last_ops)
        last_ops = done
        if time.time() - last_print >= 10 or tty:
            last_print = time.time()
            limit = info(HOST, port, "stats", timeout=30).get("client_output_buffer_limit_disconnections", "?")
            rate = sum(per_second[-10:]) / len(per_second[-10:])
            line = (
                f"{now:6.0f} s  RSS {r / 2**20:7.1f} MiB (ceiling {ceiling / 2**20:.1f})  "
                f"limit disconnections {limit}  well-behaved {rate:8.0f} ops/s  errors {errors.value}"
            )
            print(line, end="\r" if tty else "\n", flush=True)
    for p in procs:
        p.join(timeout=60)
    for th in threads:
        th.join(timeout=90)
    stopped_rss = rss_bytes(pid)
    with Connection(HOST, port, timeout=30.0) as c:
        settle = time.time() + SETTLE_S
        while time.time() < settle:
            c.call("GET", "big1")
            time.sleep(0.5)
    end_rss = rss_bytes(pid)
    stats = info(HOST, port, "stats", timeout=30)
    log_lines = (work / "server.log").read_text(errors="replace").splitlines()
    logged = sum("output-buffer limit" in line for line in log_lines)
    windows = [sum(per_second[i : i + 10]) / 10 for i in range(0, len(per_second) - 9, 10)]
    if tty:
        print()
    print(f"cosine-server soak: {a.minutes:g} min, commit {commit()}, {cpu_model()}, {os.cpu_count()} CPUs")
    print(f"  limits: {' '.join(map(str, a.limits)) if a.limits else 'defaults (256 MiB hard, 64 MiB soft, 60 s)'}")
    print(
        f"  RSS: start {start_rss / 2**20:.1f} MiB, ceiling {ceiling / 2**20:.1f} MiB at {ceiling_at:.0f} s, "
        f"{stopped_rss / 2**20:.1f} MiB when the clients stopped, {end_rss / 2**20:.1f} MiB {SETTLE_S:g} s later"
    )
    print(
        f"  client_output_buffer_limit_disconnections: {stats.get('client_output_buffer_limit_disconnections', '?')} "
        f"(server log lines: {logged})"
    )
    overall = sum(per_second) / max(1, len(per_second))
    worst = min(windows) if windows else overall
    print(
        f"  well-behaved ({a.clients} processes, pipelines of {PIPELINE}): {overall:.0f} ops/s overall, "
        f"worst 10-s window {worst:.0f} ops/s, {int(ops.value)} ops, {errors.value} errors"
    )
    for mib in FLOOD_SIZES_MIB:
        closes = t.flood_close_s.get(mib, [])
        when = f", median {statistics.median(closes):.1f} s to the close" if closes else ""
        print(f"  flooder {mib:2d} MiB: {t.flood_runs[mib]} runs, {t.flood_closed[mib]} closed by the server{when}")
    print(
        f"  slow readers: {t.slow_done} pipelines read whole ({t.slow_bytes / 2**20:.0f} MiB), "
        f"{t.slow_closed} closed by the server"
    )
    print(f"  quitters: {t.quits} connections reset mid-pipeline")
    for f in t.failures:
        print(f"  client failure: {f}")


if __name__ == "__main__":
    main()
