"""`cosine calibrate serving`: the server's CPU per request beyond the engine's (cost_models.serving),
measured on cosine-server pinned to one core with a RESP driver on the other: redis-benchmark
(redis-tools; the default, the shipped table's) or ``cosine-resp-bench`` (the engine template's
driver, the one `cosine validate --served` and bench/served_fig4b.py drive the served node with).

Every point is one driver run of ``n`` requests of one command (GET, SET, or RANGE) at one
pipeline depth p, 50 connections, 10,000 keys of 16 bytes with values of V bytes; its
figure is the server's CPU seconds over the run (the process's
user + system time from /proc, every thread: the network tasks, the blocking pool, the group-commit
thread) per request, less the engine's own CPU for that operation on a store its memtable holds
(data/phi.yaml's LSM class: ``buffer_get_seconds`` for a get, ``cpu_seconds.update`` and its entry's
bytes and WAL group (``wal``) for a set,
``cpu_seconds.range`` plus ``range_entry_seconds`` per entry for a RANGE). CPU time, not wall
time: another program's load on the machine slows the run but does not enter its CPU per request.

Both drivers start a scan at a key drawn uniformly (redis-benchmark's ``RANGE key:__rand_int__
N``). Until fa02c71 redis-benchmark's scans all started at the first key (``RANGE key: N``: the
same N entries, hot in every cache, each time): per point, cosine-resp-bench's figure over that
redis-benchmark's was 0.93 for GETs, 0.88 for SETs and 1.39 for RANGEs (geometric means,
docs/journal/s43-s51.md §30); the fit of cosine-resp-bench's points wanted a write term below 0
(refused).

The CPU is each server thread's time on a CPU to the nanosecond (measure.server's
``Server.cpu_seconds``; /proc's 10 ms ticks were up to 20 % of a short point until stop 60), and
each point's SETs go to a fresh store whose WAL they grow by at most
:data:`~measure.engine.WAL_BYTES_PER_POINT`.

The fit: relative least squares of ``c_req[kind] + c_batch[kind] / p + c_byte x wire bytes`` (the
terms of cost_models.serving.KIND_TERMS) over every point, the bytes those of cost_models.network.
A coefficient at or below 0 is a fit at a bound: refused (:class:`~measure.calibrate.CalibrationError`),
as phi's are; the signed write term's bound is minus the engine's CPU per write (cost_models.serving.SIGNED_TERMS).
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models.cpu import wal_seconds
from cost_models.network import Wire, wire
from cost_models.phi import PhiTable, shipped_or
from cost_models.serving import KIND_TERMS, KINDS, SERVING_SCHEMA, SERVING_TABLE, SIGNED_TERMS, check_table
from measure.calibrate import CalibrationError
from measure.calibrate.samples import machine, provenance
from measure.engine import TEMPLATE, WAL_BYTES_PER_POINT, build, config_text, scratch_root, workload_dict
from measure.grid import designs
from measure.served import DRIVER, drive
from measure.server import HOST, Server, core_split, cosine_server, need, pinned
from specs.io import write_text
from specs.schema import Distribution, Workload
from specs.vocab import MODELLED_WAL_SYNC, Operation, ServingDriver

#: Keys as redis-benchmark makes them with ``-r`` (``key:`` and 12 digits), and cosine-resp-bench's
#: shortest (16 hex digits).
KEY_BYTES = 16
#: Distinct keys of a run (``-r``) and the connections (``-c``).
KEYSPACE = 10_000
CONNECTIONS = 50
#: Pipeline depths and value sizes measured (``--quick``: fewer).
DEPTHS = (1, 4, 16, 64)
VALUES = (64, 1024, 4096)
QUICK_DEPTHS = (1, 16)
QUICK_VALUES = (64, 1024, 4096)
#: Entries a measured RANGE asks for: one, a short scan, and YCSB E's (the default scan length a
#: spec without one gets, specs.schema.DEFAULT_SCAN_LENGTH, rounded down): a served E's 51 KiB
#: replies were past the table's 16-entry points, and its serving CPU 2x the fit's at depth 16
#: (docs/journal/s43-s51.md §43.1).
SCAN_COUNTS = (1, 16, 50)
#: Reply bytes a RANGE point moves at most (its requests are bounded by it, :func:`requests`): a
#: 50-entry scan of 4 KiB values replies 200 KiB, and 100,000 of them 20 GB.
SCAN_BYTES_PER_POINT = 2 << 30
#: Turns of every connection a point runs at least (a point shorter than a few rounds of its 50
#: connections' pipelines measures their start, not their steady state).
MIN_TURNS = 10
#: Requests per run by kind at depth 1: 0.2-1 s each on this machine (~100,000 GETs or SETs a second
#: at depth 1 with `wal_sync = none`, ~100,000 RANGEs of one entry); the server's CPU is read from
#: /proc in 10 ms ticks. No more SETs: 100,000 deep ones of 4 KiB already fill the memtable twice,
#: and 500,000 made the flushes' CPU a SET's (15-20 us against 6-7 at 100,000).
REQUESTS = {"read": 100_000, "scan": 20_000, "write": 20_000}
#: Requests of a run at depth > 1 over one at depth 1 (a deep pipeline costs ~5x less a request).
DEEP_FACTOR = 5


def requests(kind: str, pipeline: int, value_bytes: int, entries: int = 0) -> int:
    """Requests of one point: :data:`REQUESTS` (x :data:`DEEP_FACTOR` past depth 1), SETs bounded
    by :data:`WAL_BYTES_PER_POINT`, RANGEs of ``entries`` by :data:`SCAN_BYTES_PER_POINT` (but at
    least :data:`MIN_TURNS` of every connection's pipeline)."""
    n = REQUESTS[kind] * (1 if pipeline == 1 else DEEP_FACTOR)
    if kind == "write":
        n = min(n, WAL_BYTES_PER_POINT // (KEY_BYTES + value_bytes))
    if kind == "scan":
        reply = max(entries, 1) * (KEY_BYTES + value_bytes)
        n = max(min(n, SCAN_BYTES_PER_POINT // reply), MIN_TURNS * CONNECTIONS * pipeline)
    return n


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


def engine_seconds(phi: PhiTable, kind: str, entries: int, value_bytes: int) -> float:
    """The engine's own CPU per request of the calibration's store (module docstring); a write's
    with its entry's bytes and its WAL group, synced by the modelled policy (cost_models.cpu.wal_seconds,
    one group per write: until stop 61 the write terms held them, measured under ``wal_sync = "none"``)."""
    lsm = phi["classes"]["lsm"]
    if kind == "read":
        return float(lsm["buffer_get_seconds"])  # the memtable answers every get
    if kind == "write":
        return float(lsm["cpu_seconds"]["update"]) + sum(wal_seconds(phi, KEY_BYTES + value_bytes))
    return float(lsm["cpu_seconds"]["range"]) + entries * float(lsm["range_entry_seconds"])


#: The operation of the driver's mix for each kind of request.
KIND_OPERATION = {"read": Operation.GET, "write": Operation.UPDATE, "scan": Operation.RANGE}


def wire_bytes(w: Wire, kind: str, pipeline: int) -> float:
    a, b = w.framed(KIND_OPERATION[kind], pipeline)
    return a + b


def bench_command(kind: str, value_bytes: int, entries: int) -> list[str]:
    """redis-benchmark's arguments for one kind of request."""
    if kind == "read":
        return ["-t", "get", "-d", str(value_bytes)]
    if kind == "write":
        return ["-t", "set", "-d", str(value_bytes)]
    # a scan from a key drawn uniformly (redis-benchmark fills `__rand_int__` with one of -r), not
    # always from the first key (the same entries, hot in every cache, each time)
    return ["RANGE", "key:__rand_int__", str(entries)]


def point_workload(kind: str, value_bytes: int, entries: int, requests: int) -> dict[str, Any]:
    """cosine-resp-bench's workload.json for one kind of request: every request of that kind, keys
    drawn uniformly from :data:`KEYSPACE`."""
    wl = Workload(
        entries=KEYSPACE,
        key_bytes=KEY_BYTES,
        value_bytes=value_bytes,
        operations={KIND_OPERATION[kind]: 1.0},
        scan_length=float(max(entries, 1)),
        get_distribution=Distribution(),
        put_distribution=Distribution(),
        operations_per_month=None,
    )
    return workload_dict(wl, KEYSPACE, requests, threads=1)


class Driver:
    """Runs one calibration point against a started server: (wall seconds, server CPU seconds)."""

    def __init__(self, driver: ServingDriver, client: tuple[int, ...], work: Path) -> None:
        self.driver, self.client, self.work = driver, client, work
        #: cosine-resp-bench's build (None: redis-benchmark, from redis-tools)
        self.binary = build(TEMPLATE, DRIVER) if driver == ServingDriver.RESP_BENCH else None

    def fill(self, srv: Server, value_bytes: int) -> None:
        """Writes every key (unmeasured), so that gets and scans find values of ``value_bytes``."""
        if self.binary is None:
            self._redis_benchmark(srv, ["-t", "set", "-d", str(value_bytes)], 5 * KEYSPACE, 64)
        else:
            wl = point_workload("read", value_bytes, 0, 1)
            drive(self.binary, self.work, wl, HOST, srv.port, [srv], CONNECTIONS, 64, self.client, load=True)

    def point(
        self, srv: Server, kind: str, value_bytes: int, entries: int, n: int, pipeline: int
    ) -> tuple[float, float]:
        """``n`` requests of ``kind`` at depth ``pipeline``."""
        c0, t0 = srv.cpu_seconds(), time.perf_counter()
        if self.binary is None:
            self._redis_benchmark(srv, bench_command(kind, value_bytes, entries), n, pipeline)
        else:
            wl = point_workload(kind, value_bytes, entries, n)
            out = drive(
                self.binary, self.work, wl, HOST, srv.port, [srv], CONNECTIONS, pipeline, self.client, load=False
            )
            if out["run"]["errors"]:
                raise RuntimeError(f"{DRIVER} {kind} at depth {pipeline}: {out['run']['errors']} error replies")
        t1, c1 = time.perf_counter(), srv.cpu_seconds()
        return t1 - t0, c1 - c0

    def _redis_benchmark(self, srv: Server, args: list[str], n: int, pipeline: int) -> None:
        cmd = [need("redis-benchmark", "redis-tools"), "-h", HOST, "-p", str(srv.port), "-q", "--csv"]
        cmd += ["-n", str(n), "-c", str(CONNECTIONS), "-P", str(pipeline), "-r", str(KEYSPACE), *args]
        res = subprocess.run(pinned(cmd, self.client), capture_output=True, text=True)
        if res.returncode != 0 or "ERR" in res.stdout:
            raise RuntimeError(f"redis-benchmark {' '.join(args)} failed: {(res.stderr or res.stdout).strip()[-200:]}")


def store_server(
    binary: Path, work: Path, name: str, value_bytes: int, buffer_bytes: int, cores: tuple[int, ...]
) -> Server:
    """cosine-server on a fresh store under ``work`` (the LSM preset, :data:`KEY_BYTES` keys of
    ``value_bytes`` values, a memtable of ``buffer_bytes``, a block cache of :data:`CACHE_BYTES`), its
    WAL synced as a rendered engine's is (specs.vocab.MODELLED_WAL_SYNC; the preset's ``none`` until
    stop 61, which left the group commit's CPU out of the write terms)."""
    preset = designs(KEYSPACE, quick=True, optima=False)["rocksdb"]
    secs = {**preset, "durability": {**preset["durability"], "wal_sync": str(MODELLED_WAL_SYNC)}}
    conf = work / f"engine-{name}.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    text = config_text(
        secs, 1, key_bytes=KEY_BYTES, value_bytes=value_bytes, buffer_bytes=buffer_bytes, block_cache_bytes=CACHE_BYTES
    )
    conf.write_text(text)
    return cosine_server(binary, conf, work / f"db-{name}", cores, work / f"server-{name}.log")


#: Passes of the whole plan a calibration makes by default (``--repeat``); each point's figure is
#: the median of its passes. The host's depth-1 points move by ~20 % between passes minutes apart
#: (a GET of 64 bytes: 7.98 and 9.35 us of server CPU in two calibrations of stop 60, the deep
#: points within 5 %): one pass moved a kind's batch term by 1.2-2.5 us.
REPEATS = 3


def measure(
    quick: bool,
    progress: Callable[[int, int, str], None] | None = None,
    phi: PhiTable | None = None,
    driver: ServingDriver = ServingDriver.REDIS_BENCHMARK,
    repeat: int = REPEATS,
) -> list[ServingPoint]:
    """Every point of the plan: ``repeat`` whole passes (each on its own servers), each point the
    pass of median server CPU (:func:`median_points`)."""
    table = shipped_or(phi)
    binary = build(TEMPLATE, "cosine-server")
    work = scratch_root() / f"cosine-serving-{int(time.time())}"
    passes: list[list[ServingPoint]] = []
    try:
        work.mkdir(parents=True, exist_ok=True)
        client = Driver(driver, core_split()[1], work)
        for i in range(repeat):

            def step(done: int, total: int, what: str, i: int = i) -> None:
                if progress:
                    progress(i * total + done, repeat * total, f"pass {i + 1}/{repeat}: {what}")

            passes.append(measure_pass(quick, binary, client, work / f"pass-{i}", table, step))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return median_points(passes)


def median_points(passes: list[list[ServingPoint]]) -> list[ServingPoint]:
    """Each point (kind, depth, value size, entries) of the passes: the one of median server CPU
    per request (the lower middle of an even count: a measured run, not an average of two)."""
    out = []
    for same in zip(*passes, strict=True):
        key = {(p.kind, p.pipeline, p.value_bytes, p.entries) for p in same}
        if len(key) != 1:
            raise ValueError(f"the passes' points are not the same plan: {sorted(key)}")
        ranked = sorted(same, key=lambda p: p.server_cpu_seconds / p.requests)
        out.append(ranked[(len(ranked) - 1) // 2])
    return out


def measure_pass(
    quick: bool,
    binary: Path,
    client: Driver,
    work: Path,
    table: PhiTable,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[ServingPoint]:
    """Every point of the plan once, on ``binary`` (cosine-server) under ``work``: one server per
    value size and kind, a fresh one per point of SETs."""
    server_cores = core_split()[0]
    depths, values = (QUICK_DEPTHS, QUICK_VALUES) if quick else (DEPTHS, VALUES)
    points: list[ServingPoint] = []
    total = len(values) * len(depths) * (2 + len(SCAN_COUNTS))
    try:
        work.mkdir(parents=True, exist_ok=True)
        for v in values:
            w = wire(KEY_BYTES, v, 1)

            def run(srv: Server, kind: str, entries: int, p: int, n: int, v: int = v, w: Wire = w) -> None:
                wall, cpu = client.point(srv, kind, v, entries, n, p)
                wb = wire_bytes(wire(KEY_BYTES, v, entries) if kind == "scan" else w, kind, p)
                est = engine_seconds(table, kind, entries, v)
                points.append(ServingPoint(kind, kind, p, v, entries, n, wall, cpu, est, wb))
                if progress:
                    progress(len(points), total, f"{kind} p={p} v={v}")

            # gets on a memtable that holds every key (no flush, no block read); scans on a store
            # whose data the loads flushed into cached levels (the memtable's own range scan copies
            # its entries: docs/journal's scans are on levels, as a long-running node's are)
            with store_server(binary, work, f"{v}-mem", v, BUFFER_BYTES, server_cores) as srv:
                client.fill(srv, v)
                for p in depths:
                    run(srv, "read", 0, p, requests("read", p, v))
            shutil.rmtree(work / f"db-{v}-mem", ignore_errors=True)
            with store_server(binary, work, f"{v}-levels", v, SCAN_BUFFER_BYTES, server_cores) as srv:
                client.fill(srv, v)
                for entries in SCAN_COUNTS:
                    for p in depths:
                        run(srv, "scan", entries, p, requests("scan", p, v, entries))
            shutil.rmtree(work / f"db-{v}-levels", ignore_errors=True)
            # sets each on a fresh store (its WAL bounded: :func:`requests`), over keys written once
            for p in depths:
                with store_server(binary, work, f"{v}-set{p}", v, BUFFER_BYTES, server_cores) as srv:
                    client.fill(srv, v)
                    run(srv, "write", 0, p, requests("write", p, v))
                shutil.rmtree(work / f"db-{v}-set{p}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return points


def fit(points: list[ServingPoint]) -> dict[str, Any]:
    """The table's terms by least squares (module docstring); refuses a fit at a bound.

    Each point's residual is weighed by its measured CPU per request (the server's whole, engine
    included: what the clock read), so that a depth-64 request (~1 us) counts as much as a depth-1
    one (~10 us). Until stop 60 the weight was the serving part alone, which is ~0 (or below: a
    deep SET's engine share is its batch's) on the small deep points: those few points then held
    the fit, and it wanted terms below 0 in about every other calibration."""
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
    engine = np.array([pt.engine_seconds for pt in points])
    measured = y + engine
    if not (measured > 0).all():
        raise CalibrationError("a serving point read no server CPU: not a measurement")
    wgt = 1.0 / measured
    coef, *_ = np.linalg.lstsq(a * wgt[:, None], y * wgt, rcond=None)
    floor = write_engine_seconds(points)
    bad = [
        f"{k}.{t} = {v:.3g} s"
        for (k, t), v in zip(cols, coef, strict=True)
        if not (v > -floor if (k, t) in SIGNED_TERMS else v > 0)
    ]
    if bad:
        raise CalibrationError(
            f"the serving fit wants a term at or past its bound ({'; '.join(bad)}): not a measurement"
        )
    pred = a @ coef + engine
    kinds: dict[str, dict[str, float]] = {k: {} for k in KINDS}
    for (k, t), v in zip(cols, coef, strict=True):
        kinds[k][t] = float(f"{v:.4g}")
    return {
        "write_engine_seconds": float(f"{floor:.4g}"),
        "kinds": kinds,
        # on the server's whole CPU per request (the measured figure)
        "fit_accuracy": float(f"{float(np.mean(1 - np.abs(pred - measured) / measured)):.4f}"),
    }


def write_engine_seconds(points: list[ServingPoint]) -> float:
    """The engine's CPU per write the points were corrected by (the bound of the signed write term)."""
    return max((pt.engine_seconds for pt in points if pt.kind == "write"), default=0.0)


def table_doc(points: list[ServingPoint], quick: bool, driver: ServingDriver, repeat: int = REPEATS) -> dict[str, Any]:
    """serving.yaml's document: the fit, its provenance and the measured points."""
    f = fit(points)
    doc = {
        "schema": SERVING_SCHEMA,
        "machine": machine(),
        "date": date.today().isoformat(),
        "driver": str(driver),
        "repeat": repeat,
        "provenance": provenance(),
        "method": (
            "cosine calibrate serving (measure/served_calibration.py): cosine-server (the engine "
            "template's release build, the LSM preset with a memtable holding every key, its WAL "
            f"synced by {MODELLED_WAL_SYNC}, the rendered engines' policy) pinned to "
            f"the first half of the cores, {driver} pinned to the rest, "
            f"{CONNECTIONS} connections, {KEYSPACE} keys of {KEY_BYTES} bytes, GET / SET / RANGE at "
            f"depths {list(QUICK_DEPTHS if quick else DEPTHS)} and values "
            f"{list(QUICK_VALUES if quick else VALUES)} bytes, each point the median of {repeat} passes; "
            "server CPU (every thread's, to the nanosecond) per "
            "request less the engine's (phi.yaml); relative least squares of c_req[kind] + c_batch[kind] / "
            "depth + c_byte[kind] x wire bytes (cost_models.serving.KIND_TERMS), weighed by each point's "
            "measured CPU per request. No value is clamped."
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
