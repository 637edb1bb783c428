"""`cosine calibrate serving`: the server's CPU per request beyond the engine's (cost_models.serving),
measured on cosine-server pinned to one core with redis-benchmark (redis-tools) on the other.

Every point is one redis-benchmark run of ``n`` requests of one command (GET, SET, or RANGE) at
one pipeline depth p (``-P``), 50 connections, keys ``key:NNNNNNNNNNNN`` (16 bytes, ``-r``)
with values of V bytes; its figure is the server's CPU seconds over the run (the process's
user + system time from /proc, every thread: the network tasks, the blocking pool, the group-commit
thread) per request, less the engine's own CPU for that operation on a store its memtable holds
(data/phi.yaml's LSM class: ``buffer_get_seconds`` for a get, ``cpu_seconds.update`` for a set,
``cpu_seconds.range`` plus ``range_entry_seconds`` per entry for a RANGE). CPU time, not wall
time: another program's load on the machine slows the run but does not enter its CPU per request.

The fit: least squares of ``c_req[kind] + c_batch[kind] / p + c_byte x wire bytes`` over every
point (three per kind), the bytes those of
cost_models.network. A coefficient at or below 0 is a fit at a bound: refused
(:class:`~measure.calibrate.CalibrationError`), as phi's are.
"""

from __future__ import annotations

import csv
import io
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models.network import Wire, wire
from cost_models.phi import PhiTable, shipped_or
from cost_models.serving import KIND_TERMS, KINDS, SERVING_SCHEMA, SERVING_TABLE, check_table
from measure.calibrate import CalibrationError
from measure.calibrate.samples import machine, provenance
from measure.engine import TEMPLATE, build, config_text, scratch_root
from measure.grid import designs
from measure.server import core_split, cosine_server, need, pinned
from specs.io import write_text
from specs.vocab import Operation

#: Keys as redis-benchmark makes them with ``-r``: ``key:`` and 12 digits.
KEY_BYTES = 16
#: Distinct keys of a run (``-r``) and the connections (``-c``).
KEYSPACE = 10_000
CONNECTIONS = 50
#: Pipeline depths and value sizes measured (``--quick``: fewer).
DEPTHS = (1, 4, 16, 64)
VALUES = (64, 1024, 4096)
QUICK_DEPTHS = (1, 16)
QUICK_VALUES = (64, 1024, 4096)
#: Entries a measured RANGE asks for.
SCAN_COUNTS = (1, 16)
#: Requests per run by kind at depth 1: 0.2-1 s each on this machine (~100,000 GETs or SETs a second
#: at depth 1 with `wal_sync = none`, ~100,000 RANGEs of one entry); the server's CPU is read from
#: /proc in 10 ms ticks. No more SETs: 100,000 deep ones of 4 KiB already fill the memtable twice,
#: and 500,000 made the flushes' CPU a SET's (15-20 us against 6-7 at 100,000).
REQUESTS = {"read": 100_000, "scan": 20_000, "write": 20_000}
#: Requests of a run at depth > 1 over one at depth 1 (a deep pipeline costs ~5x less a request).
DEEP_FACTOR = 5
#: Memory of the calibration's store: its memtable holds every key (no flush, no block read).
BUFFER_BYTES = 256 << 20
#: The scans' store: a small memtable (the loads flush into levels) and a cache that holds the data.
SCAN_BUFFER_BYTES = 64 << 10
CACHE_BYTES = 512 << 20


@dataclass
class ServingPoint:
    """One measured run."""

    kind: str
    command: str
    pipeline: int
    value_bytes: int
    entries: int  # a RANGE's count (0 otherwise)
    requests: int
    seconds: float  # wall clock of the run
    server_cpu_seconds: float
    engine_seconds: float  # the engine's CPU per request, from data/phi.yaml
    wire_bytes: float  # in + out per request, framed

    @property
    def serving_seconds(self) -> float:
        return self.server_cpu_seconds / self.requests - self.engine_seconds


def engine_seconds(phi: PhiTable, kind: str, entries: int) -> float:
    """The engine's own CPU per request of the calibration's store (module docstring)."""
    lsm = phi["classes"]["lsm"]
    if kind == "read":
        return float(lsm["buffer_get_seconds"])  # the memtable answers every get
    if kind == "write":
        return float(lsm["cpu_seconds"]["update"])
    return float(lsm["cpu_seconds"]["range"]) + entries * float(lsm["range_entry_seconds"])


def wire_bytes(w: Wire, kind: str, pipeline: int) -> float:
    op = {"read": Operation.GET, "write": Operation.UPDATE, "scan": Operation.RANGE}[kind]
    a, b = w.framed(op, pipeline)
    return a + b


def bench_command(kind: str, value_bytes: int, entries: int) -> list[str]:
    if kind == "read":
        return ["-t", "get", "-d", str(value_bytes)]
    if kind == "write":
        return ["-t", "set", "-d", str(value_bytes)]
    return ["RANGE", "key:", str(entries)]


def run_point(
    server_cpu: Callable[[], float], port: int, client: tuple[int, ...], args: list[str], n: int, pipeline: int
) -> tuple[float, float]:
    """(wall seconds, server CPU seconds) of one redis-benchmark run."""
    cmd = [need("redis-benchmark", "redis-tools"), "-h", "127.0.0.1", "-p", str(port), "-q", "--csv"]
    cmd += ["-n", str(n), "-c", str(CONNECTIONS), "-P", str(pipeline), "-r", str(KEYSPACE), *args]
    c0, t0 = server_cpu(), time.perf_counter()
    res = subprocess.run(pinned(cmd, client), capture_output=True, text=True)
    t1, c1 = time.perf_counter(), server_cpu()
    if res.returncode != 0 or "ERR" in res.stdout:
        raise RuntimeError(f"redis-benchmark {' '.join(args)} failed: {(res.stderr or res.stdout).strip()[-200:]}")
    return t1 - t0, c1 - c0


def measure(
    quick: bool, progress: Callable[[int, int, str], None] | None = None, phi: PhiTable | None = None
) -> list[ServingPoint]:
    """Every point of the plan, on one cosine-server per value size."""
    table = shipped_or(phi)
    server_cores, client_cores = core_split()
    depths, values = (QUICK_DEPTHS, QUICK_VALUES) if quick else (DEPTHS, VALUES)
    binary = build(TEMPLATE, "cosine-server")
    secs = designs(KEYSPACE, quick=True, optima=False)["rocksdb"]
    work = scratch_root() / f"cosine-serving-{int(time.time())}"
    points: list[ServingPoint] = []
    total = len(values) * len(depths) * (2 + len(SCAN_COUNTS))
    try:
        for v in values:
            w = wire(KEY_BYTES, v, 1)
            # gets and sets on a memtable that holds every key (no flush, no block read); scans on a
            # store whose data the loads flushed into cached levels (the memtable's own range scan
            # copies its entries: docs/journal's scans are on levels, as a long-running node's are)
            for store, kinds, buffer in (
                ("mem", ("read", "write"), BUFFER_BYTES),
                ("levels", ("scan",), SCAN_BUFFER_BYTES),
            ):
                conf = work / f"engine-{v}-{store}.toml"
                conf.parent.mkdir(parents=True, exist_ok=True)
                text = config_text(
                    secs, 1, key_bytes=KEY_BYTES, value_bytes=v, buffer_bytes=buffer, block_cache_bytes=CACHE_BYTES
                )
                conf.write_text(text)
                log = work / f"server-{v}-{store}.log"
                with cosine_server(binary, conf, work / f"db-{v}-{store}", server_cores, log) as srv:
                    # every key written (unmeasured), so that gets and scans find values of v bytes
                    run_point(srv.cpu_seconds, srv.port, client_cores, ["-t", "set", "-d", str(v)], 5 * KEYSPACE, 64)
                    for kind in kinds:
                        for entries in SCAN_COUNTS if kind == "scan" else (0,):
                            for p in depths:
                                # at least ~1 s of server CPU a point: /proc counts it in 10 ms ticks
                                n = REQUESTS[kind] * (1 if p == 1 else DEEP_FACTOR)
                                wall, cpu = run_point(
                                    srv.cpu_seconds, srv.port, client_cores, bench_command(kind, v, entries), n, p
                                )
                                wb = wire_bytes(wire(KEY_BYTES, v, entries) if kind == "scan" else w, kind, p)
                                points.append(
                                    ServingPoint(
                                        kind,
                                        kind,
                                        p,
                                        v,
                                        entries,
                                        n,
                                        wall,
                                        cpu,
                                        engine_seconds(table, kind, entries),
                                        wb,
                                    )
                                )
                                if progress:
                                    progress(len(points), total, f"{kind} p={p} v={v}")
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return points


def fit(points: list[ServingPoint]) -> dict[str, Any]:
    """The table's terms by least squares (module docstring); refuses a fit at a bound."""
    cols = [(k, t) for k in KINDS for t in KIND_TERMS[k]]
    a = np.zeros((len(points), len(cols)))
    y = np.zeros(len(points))
    regressor = {"request_seconds": lambda p: 1.0, "batch_seconds": lambda p: 1.0 / p.pipeline}
    for i, pt in enumerate(points):
        for j, (k, t) in enumerate(cols):
            if k == pt.kind:
                a[i, j] = pt.wire_bytes if t == "byte_seconds" else regressor[t](pt)
        y[i] = pt.serving_seconds
    if np.linalg.matrix_rank(a) < len(cols):
        raise CalibrationError("the serving points do not determine every term (too few depths or sizes)")
    # relative least squares: a depth-64 request (~1 us) counts as much as a depth-1 one (~10 us)
    wgt = 1.0 / np.maximum(y, 1e-9)
    coef, *_ = np.linalg.lstsq(a * wgt[:, None], y * wgt, rcond=None)
    bad = [f"{k}.{t} = {v:.3g} s" for (k, t), v in zip(cols, coef, strict=True) if not v > 0]
    if bad:
        raise CalibrationError(f"the serving fit wants a term at or below 0 ({'; '.join(bad)}): not a measurement")
    pred = a @ coef
    kinds: dict[str, dict[str, float]] = {k: {} for k in KINDS}
    for (k, t), v in zip(cols, coef, strict=True):
        kinds[k][t] = float(f"{v:.4g}")
    return {
        "kinds": kinds,
        "fit_accuracy": float(f"{float(np.mean(1 - np.abs(pred - y) / y)):.4f}"),
    }


def table_doc(points: list[ServingPoint], quick: bool) -> dict[str, Any]:
    """serving.yaml's document: the fit, its provenance and the measured points."""
    f = fit(points)
    doc = {
        "schema": SERVING_SCHEMA,
        "machine": machine(),
        "date": date.today().isoformat(),
        "provenance": provenance(),
        "method": (
            "cosine calibrate serving (measure/served_calibration.py): cosine-server (the engine "
            "template's release build, the LSM preset with a memtable holding every key) pinned to "
            "the first half of the cores, redis-benchmark pinned to the rest, "
            f"{CONNECTIONS} connections, {KEYSPACE} keys of {KEY_BYTES} bytes, GET / SET / RANGE at "
            f"depths {list(QUICK_DEPTHS if quick else DEPTHS)} and values "
            f"{list(QUICK_VALUES if quick else VALUES)} bytes; server CPU (user + system, every thread) per "
            "request less the engine's (phi.yaml); relative least squares of c_req[kind] + c_batch[kind] / "
            "depth + c_byte[kind] x wire bytes. No value is clamped."
        ),
        **f,
        "points": [
            {
                **{k: v for k, v in asdict(p).items() if k != "command"},
                "serving_seconds": float(f"{p.serving_seconds:.4g}"),
            }
            for p in points
        ],
    }
    check_table(doc, "serving fit")
    return doc


def write(doc: dict[str, Any], path: Path = SERVING_TABLE) -> Path:
    head = (
        "# The served node's CPU per request beyond the engine's (cost_models/serving.py): per kind of\n"
        "# request (read: the network task; scan, write: the blocking pool; write: also the durability\n"
        "# wait) seconds per request and per pipelined batch, and seconds per byte on the wire.\n"
        "# Written by `cosine calibrate serving` (measure/served_calibration.py).\n"
    )
    return write_text(path, head + yaml.safe_dump(doc, sort_keys=False))


def points_csv(points: list[ServingPoint]) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["kind", "pipeline", "value_bytes", "entries", "requests", "seconds", "server_cpu_s", "serving_us"])
    for p in points:
        w.writerow(
            [
                p.kind,
                p.pipeline,
                p.value_bytes,
                p.entries,
                p.requests,
                f"{p.seconds:.3f}",
                f"{p.server_cpu_seconds:.3f}",
                f"{p.serving_seconds * 1e6:.2f}",
            ]
        )
    return out.getvalue()
