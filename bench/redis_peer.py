"""cosine-server against Debian's redis-server in one run (issue 48.6; BENCHMARKS.md §20b).

redis-benchmark (redis-tools) GET and SET, 1 KB values, 50 connections, 100,000 keys, pipeline 1
and 16, each server pinned to the first half of the cores and redis-benchmark to the rest, data
on the same directory (``--dir``, default the working tree's disk, so that a sync is a real one).
cosine-server runs ``--engine``'s design (a rendered workspace: ycsb_c's answer in BENCHMARKS.md
§20b, as the issue measured), its memory scaled to the 100,000 keys as `cosine bench --served`
scales it, one worker thread, and on the same local disk as redis-server (``[device] kind = "local"``:
redis has no volume to throttle to; ``--device design`` keeps the design's emulated volume, whose
IOPS cap the SETs):

* cosine-server with ``wal_sync`` group_commit (1 ms) and every_write (each ``+OK`` after the
  fdatasync covering it), and none (acknowledged before any sync);
* redis-server with ``appendfsync always`` (acknowledged after fsync), ``everysec`` (before it,
  at most a second's writes lost) and no persistence.

Each server is started fresh, its keys written once (pipelined SETs, unmeasured), then SET and
GET at each depth are measured; the server's CPU seconds per request are printed beside the
throughput, counted until the server is idle again (measure.server.Server.settle: a phase's CPU
includes the flush its SETs started, and the next phase starts without it).
``python -m bench.redis_peer --engine WS [--device local|design] [--requests N] [--dir DIR] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

from measure.engine import TEMPLATE, build, scaled_config
from measure.served import reply_counters, reply_stats
from measure.server import Server, core_split, cosine_server, free_port, need, pinned, start
from render.config import to_toml

KEYS = 100_000
VALUE = 1024
CONNECTIONS = 50
DEPTHS = (1, 16)
#: cosine-server's modes and redis-server's, as (label, setting).
COSINE_MODES = (
    ("group_commit", "group_commit"),
    ("every_write", "every_write"),
    ("none", "none"),
)
REDIS_MODES = (
    ("appendfsync always", ["--appendonly", "yes", "--appendfsync", "always"]),
    ("appendfsync everysec", ["--appendonly", "yes", "--appendfsync", "everysec"]),
    ("no persistence", ["--appendonly", "no"]),
)


def bench(srv: Server, client: tuple[int, ...], test: str, depth: int, n: int, cosine: bool = False) -> dict[str, Any]:
    """One redis-benchmark phase; on a cosine-server also how its replies waited (INFO server's
    reply-wait and sync counters around the phase: measure.served.reply_stats)."""
    cmd = [need("redis-benchmark", "redis-tools"), "-h", "127.0.0.1", "-p", str(srv.port), "-q", "--csv"]
    cmd += ["-t", test, "-n", str(n), "-c", str(CONNECTIONS), "-P", str(depth), "-d", str(VALUE), "-r", str(KEYS)]
    before = [reply_counters(srv.port)] if cosine else []
    c0 = srv.cpu_seconds()
    res = subprocess.run(pinned(cmd, client), capture_output=True, text=True, check=True)
    # the background work the requests started (a memtable's flush, its merge) is theirs, not the
    # next phase's: until stop 64 a phase ended with the last reply
    srv.settle()
    c1 = srv.cpu_seconds()
    row = [x.strip('"') for x in res.stdout.strip().splitlines()[-1].split(",")]
    out: dict[str, Any] = {
        "rps": float(row[1]),
        "p50_ms": float(row[4]),
        "p99_ms": float(row[6]),
        "server_cpu_us": (c1 - c0) / n * 1e6,
    }
    if cosine:
        out["replies"] = reply_stats(before, [reply_counters(srv.port)])
    return out


def run_server(srv: Server, client: tuple[int, ...], n: int, cosine: bool = False) -> dict[str, Any]:
    # every key written once, pipelined (unmeasured)
    bench(srv, client, "set", 64, 2 * KEYS)
    out: dict[str, Any] = {}
    for depth in DEPTHS:
        for test in ("set", "get"):
            # SETs that wait for a sync at depth 1 are slow: fewer of them
            reqs = n // 5 if (test == "set" and depth == 1) else n
            out[f"{test.upper()} P{depth}"] = bench(srv, client, test, depth, reqs, cosine)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--dir", type=Path, default=Path("runs/redis-peer"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--engine", type=Path, required=True, help="a workspace written by `cosine render`")
    ap.add_argument(
        "--device",
        choices=("local", "design"),
        default="local",
        help="cosine-server on the local disk as redis (default) or on the design's emulated volume",
    )
    a = ap.parse_args()
    server_cores, client_cores = core_split()
    server_bin = build(TEMPLATE, "cosine-server")
    redis = need("redis-server", "redis-server")
    root = a.dir.resolve() / f"run-{int(time.time())}"
    root.mkdir(parents=True)
    meta = json.loads((a.engine / "render.json").read_text())
    base = tomllib.loads(scaled_config((a.engine / "engine.toml").read_text(), KEYS / float(meta["entries_per_node"])))
    results: dict[str, Any] = {}
    try:
        for label, mode in COSINE_MODES:
            cfg = {**base, "durability": {**base.get("durability", {}), "wal_sync": mode}}
            cfg["algorithms"] = {**cfg["algorithms"], "threads": 1}
            if a.device == "local":
                cfg["device"] = {"kind": "local"}
            conf = root / f"cosine-{mode}.toml"
            conf.write_text(to_toml(cfg, f"{a.engine} scaled to {KEYS} keys, wal_sync {mode}"))
            with cosine_server(
                server_bin, conf, root / f"cosine-{mode}", server_cores, root / f"cosine-{mode}.log"
            ) as srv:
                results[f"cosine-server, {label}"] = run_server(srv, client_cores, a.requests, cosine=True)
        for label, flags in REDIS_MODES:
            d = root / f"redis-{label.replace(' ', '-')}"
            d.mkdir()
            port = free_port()
            cmd = [redis, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d), "--save", "", *flags]
            with start(cmd, port, d / "redis.log", server_cores) as srv:
                results[f"redis-server, {label}"] = run_server(srv, client_cores, a.requests)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if a.json:
        print(json.dumps({"device": a.device, "servers": results}, indent=2))
        return
    cols = [f"{t} P{d}" for d in DEPTHS for t in ("SET", "GET")]
    print("| | " + " | ".join(cols) + " |")
    print("| --- |" + " ---: |" * len(cols))
    for name, r in results.items():
        print(
            f"| {name} | "
            + " | ".join(f"{r[c]['rps'] / 1e3:.1f}k ({r[c]['server_cpu_us']:.1f} us)" for c in cols)
            + " |"
        )


if __name__ == "__main__":
    main()
