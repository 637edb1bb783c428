"""`cosine calibrate`: measure the CPU model's terms on the Rust engine (paper Algorithm 1, extended).

What is measured, and how (docs/model.md, "CPU and throughput"):

* **CPU seconds per operation** of each (design class, operation), timed
  directly: the driver threads' own CPU time (the kernel's schedstat) over the
  operations, on a warm engine whose block cache holds all the data (the
  bench writes the buffer out and reads every block once first), so the run
  reads no blocks. Writes run on that engine too, as many as fit in the
  buffer, so no flush or merge runs beside them. Two data sizes.
* **phi** of each (class, operation): Eq. 2 on the speed-up from 1 to the
  machine's cores on the same cached runs (Algorithm 1, averaged over the
  sizes). The speed-up is taken over the time each driver thread did not
  spend waiting for a CPU held by another process (schedstat's run-queue
  wait), which on a quiet machine is all of it.
* **Ranges**: CPU = a + scan length x r per tree class, N x k + scan length x
  r for the hash log (its index has no order: every scan walks all N keys),
  by least squares over two scan lengths and two sizes.
* **Block reads** (the per-block and per-byte CPU of reading a block): least
  squares over the runs that read blocks — the class designs as they are, on
  single-operation and mixed (YCSB A, B, D, F) workloads, 1 thread — of the
  CPU each operation spent beyond its cached CPU, against its blocks read.
* **Background** (flush/merge CPU per block, fixed and per byte, and on the
  hash log per entry of the block: its index update): least squares of the
  background thread's CPU against the flush and merge blocks, over every run
  that wrote.
* **Memtable**: a search's CPU per doubling of the memtable from gets the
  memtable answers (two memtables), an insert's from cached blind writes at
  two memtables (SMALL_MEMTABLE runs write 1/8 as much).

Nothing is clamped: a fit that wants a value at or past a bound (phi outside
(0, 1], a time that is not positive) stops the calibration with a message
(:class:`CalibrationError`). The single-operation runs of the loaded designs
are kept as a check of the model on what it was not fitted to alone; Fig. 4B
(:func:`fig4b`) checks the end-to-end prediction on mixed workloads at a size
the calibration did not use.

On a 2-core machine only eta = 1, 2 can be measured; Amdahl's law with the
learned phi extrapolates to a VM's cores, as Algorithm 1 does. The table
records the machine and the date.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models import cpu_count
from cost_models.cpu import (
    FLAT_SEARCHES,
    INDEX_WALKS,
    LOCAL_DEVICE,
    LOOKUP_SLOPES,
    PHI_SCHEMA,
    PHI_TABLE,
    REFERENCE_BLOCK_BYTES,
    DeviceModel,
    NodeShape,
    curve_at,
    node_throughput,
    phi_table,
    search_slope,
    usable_cores,
    using_table,
)
from cost_models.engine_model import (
    deepest_merge_puts,
    engine_throughput,
    run_start_buffered,
    steady_depth,
    write_share,
)
from cost_models.io_model import IOCost, wal_pages
from measure.cores import on_two_cores
from measure.engine import (
    TEMPLATE,
    as_ran,
    buffered_share,
    build,
    config_text,
    run_merges,
    run_scratch,
    runqueue_share,
    workload_json,
)
from measure.grid import KEY, VALUE, designs, mix_spec, shipped_spec
from render.config import device_section
from specs.errors import InputError
from specs.io import finite, read_rows, require, write_records, write_rows, write_text
from specs.schema import Spec
from specs.vocab import DESIGN_CLASSES, OPERATIONS, WRITE_OPERATIONS, CalibrationRun, DesignClass, Operation

#: One design per class: the paper's three baselines and the base hybrid (the grid's, ~1% buffer).
CLASS_DESIGNS = {"lsm": "rocksdb", "btree": "wiredtiger", "lsh": "faster", "hybrid": "hybrid-base"}
#: Share of the buffer a cached write run fills: its buffer is sized so the
#: run's writes (which start on an empty buffer) never flush.
BUFFER_RUN_SHARE = 0.8
#: Block cache of a cached run, as a multiple of the data (decoded blocks carry overhead).
CACHED_CACHE_FACTOR = 3.0
#: Scan lengths of the cached range runs: two, far apart, so the per-entry CPU stands out of
#: the per-scan part (a hash log's scan walks its whole index: milliseconds).
SCAN_LENGTHS = (10, 1000)
#: Scan length of the loaded range runs (YCSB-E's mean is 50).
LOADED_SCAN = 20
#: Keys a calibration run's hash-log scans may visit in all (each scan walks the whole index):
#: about a second of CPU on this machine, which times a few hundred scans.
HASH_SCAN_KEYS = 30_000_000
#: The cached write runs of the SMALL_MEMTABLE kind write this share of a cached write run's
#: operations, into a memtable that much smaller: the two identify how an insert's CPU grows
#: with the memtable (memtable_insert_seconds_per_doubling).
SMALL_MEMTABLE_SHARE = 0.125
#: The writes whose runs identify the insert slope: blind writes, an insert each. An rmw inserts
#: the same way (Engine::write) but its run is ~2-3 us of get CPU per operation, whose run-to-run
#: noise (0.1-0.3 us) is the size of the slope's effect over 3 doublings (0.2 us): measured
#: at 1/8 the writes its growth came out -142 to +143 ns per doubling, the blind writes' 58-114.
BLIND_WRITES = (Operation.INSERT, Operation.UPDATE)
#: Memtables of the buffered-get runs: the design's buffer (0.8 of it), and all the data (its size
#: in records, marked 0): two sizes identify the CPU per doubling of the memtable.
BUFFERED_MEMTABLES = (BUFFER_RUN_SHARE, 0.0)
#: Block sizes (multiples of the class design's) of extra loaded get runs on the LSM design, run
#: every round: with its own they are the block sizes (232 B to 32 KiB, 2 to 256 entries) of the
#: measured curve of a block read's CPU over its bytes (fit_block_read).
BLOCK_SIZE_STEPS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 2.0, 4.0, 8.0)
#: Mixed workloads of the calibration (YCSB A, B, D, F).
MIXED = ("ycsb_a", "ycsb_b", "ycsb_d", "ycsb_f")
#: Mixed workloads of Fig. 4B: the paper's 25% mix and three YCSB mixes.
FIG4B_WORKLOADS = ("mixed_25", "ycsb_a", "ycsb_b", "ycsb_f")


class CalibrationError(InputError):
    """A fit wanted a value at or past a bound: the table would not be a measurement."""


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu} ({cpu_count()} CPUs), {platform.system()} {platform.release()}"


def provenance() -> dict[str, Any]:
    """What wrote a table: the command line, the commit of this checkout (with '+' when it has
    uncommitted changes) and the machine's load average (1, 5, 15 min) when the table was written."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {
        "command": " ".join(["cosine", *sys.argv[1:]]),
        "commit": commit + ("+" if dirty else ""),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


@dataclass
class Sample:
    """One engine run of the calibration."""

    #: CACHED, LOADED or BUFFERED (see those constants)
    kind: str
    cls: str
    #: the operation of a single-operation run, or the YCSB workload's name
    workload: str
    records: int
    threads: int
    operations: int
    scan_length: int
    block_bytes: float
    #: the run's mix as JSON (operation -> share)
    mix: str
    #: measured operations per second (wall clock)
    throughput: float
    #: share of the driver threads' time spent waiting for a CPU another program held
    runqueue_share: float
    #: sum over driver threads of operations / (their time - their run-queue wait): the
    #: throughput without other programs' load (= throughput on a quiet machine)
    free_throughput: float
    #: driver-thread CPU seconds per operation
    fg_cpu: float
    #: blocks the operations read, per operation
    fg_blocks: float
    #: background-thread CPU seconds per operation (the run and the settle after it)
    bg_cpu: float
    #: flush and merge blocks per operation (the run and the settle after it)
    bg_blocks: float
    #: share of the run's lookups (gets, rmw reads) a memtable answered
    get_buffered: float
    #: mean entries in the memtable during the run (half the buffer when it was flushed)
    memtable_entries: float
    #: runs of this point dropped because the host ran its two threads on one core, and whether
    #: the one kept still ran so (measure.cores; always 0 and False at one thread)
    runs_dropped_shared_core: int = 0
    on_shared_core: bool = False

    #: 2: the shared-core columns
    VERSION = 2

    def check(self) -> None:
        """Values a measurement gives (read_rows calls this on every row of a calibration.parquet)."""
        require(self.kind in tuple(CalibrationRun), f"unknown calibration run kind {self.kind!r}")
        require(self.cls in DESIGN_CLASSES, f"unknown design class {self.cls!r}")
        require(self.records >= 1 and self.threads >= 1 and self.operations >= 1, "records, threads, operations >= 1")
        require(self.runs_dropped_shared_core >= 0, f"runs dropped {self.runs_dropped_shared_core} is negative")
        require(finite(self.throughput) and self.throughput > 0, f"throughput {self.throughput} is not positive")
        for name in ("fg_cpu", "fg_blocks", "bg_cpu", "bg_blocks", "get_buffered", "memtable_entries", "block_bytes"):
            v = getattr(self, name)
            require(finite(v) and v >= 0, f"{name} {v} is not a finite non-negative number")
        try:
            mix = json.loads(self.mix)
        except ValueError:
            mix = None
        require(isinstance(mix, dict) and set(mix) <= set(OPERATIONS), f"mix {self.mix!r} is not a JSON operation mix")

    @property
    def ops_mix(self) -> dict[str, float]:
        return {k: float(v) for k, v in json.loads(self.mix).items()}


def free_throughput(rep: dict[str, Any]) -> float:
    """Operations per second of a run over the time its driver threads did not wait for a CPU
    another program held, summed per thread (a thread that finished early is not waited for)."""
    threads = (rep.get("cpu") or {}).get("threads") or []
    total = 0.0
    for t in threads:
        busy = float(t["seconds"]) - float(t.get("runqueue_seconds") or 0.0)
        total += float(t["operations"]) / max(busy, 1e-9)
    return total or float(rep["run"]["throughput_ops"])


def memtable_entries(rep: dict[str, Any], secs: dict[str, Any]) -> float:
    """Mean entries in the memtable during a run: half the buffer if the run flushed it (the fill
    cycles), else the mean of its fill at the start and at the end."""
    if rep.get("background", {}).get("flushes", 0) > 0:
        return _buffer_entries(secs) / 2.0
    start = float(rep["load"]["shape"].get("buffered", 0))
    end = float((rep.get("stats") or {}).get("buffered", start))
    return (start + end) / 2.0


def _sample(kind: str, cls: str, workload: str, wl: dict[str, Any], secs: dict[str, Any], rep: dict) -> Sample:
    ops = int(wl["operations"])
    th = int(wl["threads"])
    cpu = rep.get("cpu") or {}
    if not cpu:
        raise CalibrationError("cosine-bench reported no CPU times (needs Linux /proc/thread-self/schedstat)")
    bg = rep.get("background", {})
    bg_blocks = sum(
        bg.get(k, 0)
        for k in ("flush_blocks_written", "flush_blocks_read", "compaction_blocks_read", "compaction_blocks_written")
    )
    lay = secs["layout"]
    buffered = buffered_share(rep)
    return Sample(
        kind=kind,
        cls=cls,
        workload=workload,
        records=int(wl["records"]),
        threads=th,
        operations=ops,
        scan_length=int(wl["scan_length"]),
        block_bytes=float(lay["block_entries"] * (lay["key_bytes"] + lay["value_bytes"])),
        mix=json.dumps({k: v for k, v in wl["mix"].items() if v > 0}, sort_keys=True),
        throughput=float(rep["run"]["throughput_ops"]),
        runqueue_share=runqueue_share(rep, th),
        free_throughput=free_throughput(rep),
        fg_cpu=float(cpu["foreground_seconds"]) / ops,
        fg_blocks=sum(v.get("blocks_read", 0) for v in rep["per_op"].values()) / ops,
        bg_cpu=(float(cpu["background_seconds"]) + float(cpu["settle_background_seconds"])) / ops,
        bg_blocks=bg_blocks / ops,
        get_buffered=0.0 if buffered is None else buffered,
        memtable_entries=memtable_entries(rep, secs),
    )


def calibration_designs(records: int) -> dict[str, dict[str, Any]]:
    """The class designs (engine.toml sections), as the validation grid has them."""
    grid = designs(records, quick=True, optima=False)
    return {cls: grid[name] for cls, name in CLASS_DESIGNS.items()}


@dataclass(frozen=True)
class Plan:
    """Data sizes and run lengths of a calibration."""

    sizes: tuple[int, ...]
    #: operations of a cached read run, a cached write run, and a loaded run
    read_ops: int
    write_ops: int
    ops: int
    #: Fig. 4B: records (a size the calibration does not use), operations, runs per point
    fig4b_records: int
    fig4b_ops: int
    repeats: int = 3
    #: runs of each cached (class, operation, size, threads) point: phi is Eq. 2 on the medians
    phi_repeats: int = 1


#: The full calibration, and --quick.
DEFAULT_PLAN = Plan((100_000, 400_000), 1_000_000, 200_000, 200_000, 250_000, 200_000, phi_repeats=3)
QUICK_PLAN = Plan((100_000, 400_000), 300_000, 50_000, 50_000, 250_000, 50_000, phi_repeats=3)


def thread_counts() -> tuple[int, ...]:
    """1 .. the machine's cores (at least 2: one speed-up per run identifies phi)."""
    return tuple(range(1, max(2, cpu_count()) + 1))


CACHED, LOADED, BUFFERED = CalibrationRun.CACHED, CalibrationRun.LOADED, CalibrationRun.BUFFERED
SMALL_MEMTABLE = CalibrationRun.SMALL_MEMTABLE
#: The operation name of the buffered runs.
BUFFER_GET = "buffer_get"


def _runs(plan: Plan) -> list[tuple[CalibrationRun, str, str, Spec, int, int, float]]:
    """(kind, class, workload, spec, records, threads, factor) of every calibration run; the
    factor scales the block size of a loaded run, and sets the memtable of a buffered one.

    The ``plan.phi_repeats`` runs of a cached point are not back to back: the runs come in
    rounds, each round every cached point once and then its share of the other runs. The host's
    slow phases last minutes (BENCHMARKS §33.4: the same point 10-25 % apart 15 minutes later),
    so back-to-back repeats fell into one phase together and a point's median carried that
    phase into its term; spread over the session, every point's repeats see the same phases,
    and the terms keep their ratios (which the rankings depend on) however the host drifts."""
    repeated: list[tuple[CalibrationRun, str, str, Spec, int, int, float]] = []
    once: list[tuple[CalibrationRun, str, str, Spec, int, int, float]] = []
    threads = thread_counts()
    for n in plan.sizes:
        for cls in CLASS_DESIGNS:
            for op in OPERATIONS:
                scans = SCAN_LENGTHS if op == Operation.RANGE else (LOADED_SCAN,)
                for scan in scans:
                    spec = mix_spec({op: 1.0}, scan=scan, name=str(op))
                    for th in threads:
                        repeated.append((CACHED, cls, str(op), spec, n, th, 1.0))
                    if op in BLIND_WRITES:
                        repeated.append((SMALL_MEMTABLE, cls, str(op), spec, n, 1, 1.0))
            for share in BUFFERED_MEMTABLES:
                spec = mix_spec({Operation.GET: 1.0}, name=BUFFER_GET)
                once.append((BUFFERED, cls, BUFFER_GET, spec, n, 1, share))
            for op in OPERATIONS:
                spec = mix_spec({op: 1.0}, scan=LOADED_SCAN, name=str(op))
                once.append((LOADED, cls, str(op), spec, n, 1, 1.0))
            for w in MIXED:
                for th in threads:
                    once.append((LOADED, cls, w, shipped_spec(w), n, th, 1.0))
            if cls == DesignClass.LSM:
                for f in BLOCK_SIZE_STEPS:
                    repeated.append((LOADED, cls, str(Operation.GET), mix_spec({Operation.GET: 1.0}), n, 1, f))
    rounds = plan.phi_repeats
    return [run for r in range(rounds) for run in (*repeated, *once[r::rounds])]


def _buffer_entries(secs: dict[str, Any]) -> int:
    lay = secs["layout"]
    return int(lay["buffer_bytes"]) // (int(lay["key_bytes"]) + int(lay["value_bytes"]))


def _run_config(spec: Spec, cls: str, records: int, plan: Plan, kind: str, secs: dict[str, Any]) -> tuple[int, dict]:
    """Operations of a run and the layout changes it runs with."""
    mix = spec.workload.operations
    writes = sum(mix.get(o, 0.0) for o in WRITE_OPERATIONS)
    entry = KEY + VALUE
    if kind in (LOADED, BUFFERED):
        ops, layout = (plan.ops if kind == LOADED else plan.read_ops), {}
    elif writes > 0:
        # the buffer starts empty after the warm-up and holds every write of the run
        ops = plan.write_ops if kind == CACHED else int(plan.write_ops * SMALL_MEMTABLE_SHARE)
        buffer = max(int(secs["layout"]["buffer_bytes"]), int(ops * writes / BUFFER_RUN_SHARE) * entry)
        layout = {"buffer_bytes": buffer, "block_cache_bytes": int(CACHED_CACHE_FACTOR * records * entry)}
    else:
        ops = plan.read_ops
        layout = {"block_cache_bytes": int(CACHED_CACHE_FACTOR * records * entry)}
    if mix.get(Operation.RANGE, 0.0) > 0:
        # about as many entries as a point run has operations
        ops = max(1000, ops // max(10, int(spec.workload.scan_length)))
    walks = sum(mix.get(o, 0.0) for o in INDEX_WALKS)
    if cls == DesignClass.LSH and walks > 0:
        ops = min(ops, max(100, int(HASH_SCAN_KEYS / (records * walks))))
    return ops, layout


def measure(
    plan: Plan,
    progress: Callable[[int, int, str], None] | None = None,
    runs: list[tuple[CalibrationRun, str, str, Spec, int, int, float]] | None = None,
) -> list[Sample]:
    """Run every calibration run of ``plan`` (module docstring), or just ``runs`` of it, and return the samples."""
    build(TEMPLATE)
    runs = _runs(plan) if runs is None else runs
    out: list[Sample] = []
    by_size = {n: calibration_designs(n) for n in plan.sizes}
    for i, (kind, cls, name, spec, size, th, block_factor) in enumerate(runs):
        secs = by_size[size][cls]
        n = size
        if kind == BUFFERED:
            # the data in the memtable: the design's buffer holds n (its usual size), or all of it
            n = int(block_factor * _buffer_entries(secs)) if block_factor > 0 else size
            secs = {**secs, "layout": {**secs["layout"], "buffer_bytes": int(n / BUFFER_RUN_SHARE + 1) * (KEY + VALUE)}}
        elif block_factor != 1.0:
            lay = secs["layout"]
            secs = {**secs, "layout": {**lay, "block_entries": max(1, round(lay["block_entries"] * block_factor))}}
        o, layout = _run_config(spec, cls, n, plan, kind, secs)
        wl = workload_json(spec, n, o, th)
        wl["warm_cache"] = kind in (CACHED, SMALL_MEMTABLE)
        one = partial(run_scratch, config_text(secs, th, **layout), wl, f"calibrate-{i}")
        # a run the host gave one core for its threads is run again (measure.cores)
        rep, dropped, shared = on_two_cores(one, th)
        s = _sample(kind, cls, name, wl, secs, rep)
        s.runs_dropped_shared_core, s.on_shared_core = dropped, shared
        if kind != LOADED and s.fg_blocks > 0:
            raise CalibrationError(
                f"{kind} {cls} {name} run read {s.fg_blocks:.3g} blocks per operation: the "
                + ("buffer did not hold the data" if kind == BUFFERED else "block cache did not hold the data")
            )
        out.append(s)
        if progress:
            progress(i + 1, len(runs), f"{kind} {cls} {name}, {n:,} records, {th} threads")
    return out


# ----------------------------------------------------------------------------- fitting


def _positive_lstsq(A: np.ndarray, y: np.ndarray, names: list[str], what: str) -> dict[str, float]:
    """Least squares of relative residuals (each run weighs by 1 / its measured value: run-to-run
    noise is multiplicative); every coefficient must come out positive (nothing is clamped)."""
    if A.shape[0] < A.shape[1]:
        raise CalibrationError(f"{what}: {A.shape[0]} runs cannot identify {A.shape[1]} terms")
    w = 1.0 / np.maximum(np.abs(y), 1e-300)
    sol, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
    bad = [f"{n} = {v:.3g}" for n, v in zip(names, sol, strict=True) if not (math.isfinite(v) and v > 0)]
    if bad:
        raise CalibrationError(
            f"{what}: the least-squares fit wants {', '.join(bad)} (must be positive); the runs do not "
            "identify it — re-run on a quiet machine or with more operations"
        )
    return {n: float(v) for n, v in zip(names, sol, strict=True)}


def cached_points(samples: list[Sample]) -> dict[tuple[str, str, int, int, int], list[Sample]]:
    """The cached runs by point (class, operation, records, scan length, threads): a point's repeats."""
    runs: dict[tuple[str, str, int, int, int], list[Sample]] = {}
    for s in samples:
        if s.kind == CACHED:
            runs.setdefault((s.cls, s.workload, s.records, s.scan_length, s.threads), []).append(s)
    return runs


#: How far past 1 a measured phi is still 1. A thread's busy share is its CPU time over its wall time
#: less its run-queue delay, clocks read apart; single 2-thread cached runs of perfectly parallel
#: reads (a hash log's range and empty range) measured busy shares of 0.984-1.019 (calibrate-27d,
#: BENCHMARKS §24.2). Past it a speed-up is super-linear and the fit is refused.
PHI_NOISE = 0.02


def fit_phi(samples: list[Sample], cores: int) -> dict[tuple[str, str], float]:
    """phi per (class, operation) from the cached runs at n threads (1 < n <= cores): Eq. 2 on the
    driver threads' busy share, averaged over sizes and scan lengths (Algorithm 1's aggregate).

    Each of n threads is on a CPU a share u_n = X_n c_n / n of the time no other program held it
    (X_n: the throughput over that time; c_n: CPU seconds per operation; of each run, then the
    median of the repeated runs of a point: the host's slow mode changes X_n and c_n of a run
    together, so a product of medians taken over different runs is not any run's share). In Eq. 2's
    program a thread waits for the others' serial sections, so u_n = 1 / (1 + (1 - phi)(n - 1)):
    phi = 1 - (1/u_n - 1)/(n - 1), at most 1 by construction
    (within PHI_NOISE past 1 it is 1; further, refused).
    The speed-up X_n / X_1 that Algorithm 1 uses also counts a change of the CPU an operation costs
    at n threads, which on this sandbox's VM measured the host: a 2-thread run either gets two cores
    or shares one without the guest seeing it (no steal time), at 1.8x the CPU per operation, and
    two threads scanning the same data warm each other's caches (BENCHMARKS §20.3).
    """
    vals: dict[tuple[str, str], list[float]] = {}
    for (cls, op, _n, _scan, th), reps in cached_points(samples).items():
        if not 1 < th <= cores:
            continue
        busy = float(np.median([r.free_throughput * r.fg_cpu / th for r in reps]))
        vals.setdefault((cls, op), []).append(1.0 - (1.0 / busy - 1.0) / (th - 1))
    out = {}
    for key, v in sorted(vals.items()):
        phi = float(np.mean(v))
        if 1.0 < phi <= 1.0 + PHI_NOISE:
            phi = 1.0  # perfectly parallel, within what the busy share can tell
        if not 0.0 < phi <= 1.0:
            cls, op = key
            raise CalibrationError(
                f"phi of {cls} {op} is {phi:.3f} (per size and scan length {', '.join(f'{x:.3f}' for x in v)}): "
                "outside (0, 1] (more threads ran "
                + ("slower" if phi <= 0 else "faster than linearly")
                + "); Eq. 2 cannot describe it — re-run on a quiet machine"
            )
        out[key] = phi
    return out


def fit_concurrent_cpu(samples: list[Sample], cores: int) -> dict[tuple[str, str], float]:
    """CPU per operation of a thread among others over a thread alone, per (class, operation): the
    cached runs' driver CPU per operation at the most threads measured (at most ``cores``) over one
    thread's, medians of the repeated runs of a point, averaged over sizes and scan lengths as phi is.

    fit_phi measures the parallel fraction on the busy share of those runs, whose CPU per operation
    is the many-thread one; Eq. 2 with phi and one thread's CPU would predict a speed-up of n where
    the runs measured n u_n c_1 / c_n (BENCHMARKS §24.2). Held at the threads measured: a larger
    machine's cost of sharing data between more cores is not measured here.
    """
    runs = cached_points(samples)
    top = max((p[-1] for p in runs if 1 < p[-1] <= cores), default=None)
    vals: dict[tuple[str, str], list[float]] = {}
    for (cls, op, n, scan, th), reps in runs.items():
        one = runs.get((cls, op, n, scan, 1))
        if th != top or not one:
            continue
        cpu = float(np.median([r.fg_cpu for r in reps])) / float(np.median([r.fg_cpu for r in one]))
        vals.setdefault((cls, op), []).append(cpu)
    out = {}
    for key, v in sorted(vals.items()):
        r = float(np.mean(v))
        if not (math.isfinite(r) and r > 0.0):
            raise CalibrationError(f"CPU per operation of {key[0]} {key[1]} at {top} threads over 1 is {r!r}")
        out[key] = r
    return out


@dataclass(frozen=True)
class MemtableFit:
    """How a memtable's descents grow past the size that fits the CPU's caches: a search's and an
    insert's seconds per doubling, each past its own base (the smallest memtable its runs measured:
    below it the cost is flat, in the operation's cached CPU)."""

    search_slope: float
    search_base: float
    insert_slope: float
    insert_base: float


def fit_memtable(samples: list[Sample]) -> tuple[float, float]:
    """(seconds per doubling of the memtable past its base size, the base size in entries), from
    the buffered gets (one skip-list descent each) at the design's memtable and at all the data:
    b = (c_large - c_small) / log2(E_large / E_small) per class and size, averaged. A memtable
    no larger than the base one fits the CPU's caches: its descent is in the gets' cached CPU."""
    rows = [s for s in samples if s.kind == BUFFERED and s.threads == 1]
    slopes, bases = [], []
    for cls in sorted({s.cls for s in rows}):
        # per size one run at the design's memtable and one at all the data: the k-th smallest
        # memtable pairs with the k-th of the larger half
        runs = sorted((s for s in rows if s.cls == cls), key=lambda s: s.memtable_entries)
        half = len(runs) // 2
        for small, large in zip(runs[:half], runs[half:], strict=False):
            if large.memtable_entries > small.memtable_entries:
                slopes.append(
                    (large.fg_cpu - small.fg_cpu) / math.log2(large.memtable_entries / small.memtable_entries)
                )
                bases.append(small.memtable_entries)
    b = _mean_slope(slopes, "memtable CPU", "buffered-get runs", "gets answered by a larger memtable")
    return b, float(np.exp(np.mean(np.log(bases))))


def _mean_slope(slopes: list[float], term: str, runs: str, which: str) -> float:
    """The mean of per-pair slopes (seconds per doubling of the memtable); a fit that wants it at
    or below 0 stops the calibration."""
    if not slopes:
        raise CalibrationError(f"{term}: no {runs} at two memtable sizes")
    b = float(np.mean(slopes))
    if not (math.isfinite(b) and b > 0):
        raise CalibrationError(
            f"{term}: {which} were not slower (slope {b:.3g} s per doubling, must be positive) — "
            "re-run on a quiet machine"
        )
    return b


def fit_memtable_insert(samples: list[Sample], search: tuple[float, float]) -> MemtableFit:
    """The memtable terms: ``search`` (fit_memtable's slope and base) and an insert's seconds per
    doubling of the memtable from the cached blind-write runs at two memtables (CACHED,
    SMALL_MEMTABLE; same class, operation and data size; BLIND_WRITES): the CPU difference over
    log2 of the memtables' ratio, averaged. A write's descent grows less than a search's: charging
    writes the search slope took ~0.55 us out of a cached hash-log update at a 23 k-entry memtable
    that a write into the design's 1.6 k-entry memtable still pays. Its base is the small runs'
    memtable (their geometric mean): writes are flat below it (every class measured 0.49-0.57 us
    per write into 650-, 2,600- and 12,000-entry memtables, BENCHMARKS §21), and a slope taken
    past it and extrapolated down to the search's base charged half of that."""
    slope_s, base_s = search
    runs: dict[tuple[str, str, int, str], list[Sample]] = {}
    for s in samples:
        if s.kind in (CACHED, SMALL_MEMTABLE) and s.threads == 1 and s.workload in BLIND_WRITES:
            runs.setdefault((s.cls, s.workload, s.records, s.kind), []).append(s)
    slopes, bases = [], []
    for (cls, op, n, kind), small in runs.items():
        large = runs.get((cls, op, n, CACHED))
        if kind != SMALL_MEMTABLE or not large:
            continue
        lo = float(np.mean([s.memtable_entries for s in small]))
        hi = float(np.mean([s.memtable_entries for s in large]))
        if not hi > lo:
            continue
        grown = float(np.mean([s.fg_cpu for s in large]) - np.mean([s.fg_cpu for s in small]))
        slopes.append(grown / math.log2(hi / lo))
        bases.append(lo)
    b = _mean_slope(slopes, "memtable insert CPU", "cached write runs", "writes into a larger memtable")
    return MemtableFit(slope_s, base_s, b, float(np.exp(np.mean(np.log(bases)))))


def memtable_cpu(s: Sample, memtable: MemtableFit) -> float:
    """The memtable descents' CPU in one operation of a run beyond a base-size memtable's."""
    from cost_models.cpu import MEMTABLE_DESCENTS

    mix = s.ops_mix
    total = sum(mix.values()) or 1.0
    searches = sum(w * MEMTABLE_DESCENTS[Operation(op)][0] for op, w in mix.items()) / total
    inserts = sum(w * MEMTABLE_DESCENTS[Operation(op)][1] for op, w in mix.items()) / total
    e = s.memtable_entries
    return searches * memtable.search_slope * math.log2(
        max(e, memtable.search_base) / memtable.search_base
    ) + inserts * memtable.insert_slope * math.log2(max(e, memtable.insert_base) / memtable.insert_base)


def fit_lookup(samples: list[Sample], memtable: MemtableFit) -> dict[str, Any]:
    """How the lookups' CPU grows with the data: per class and measured search (get, empty get;
    cost_models.cpu.LOOKUP_SLOPES), least squares over the cached single-thread runs at every size
    of c = a + b log2(keys / reference), the reference the smallest size. b (seconds per doubling)
    and a must come out positive: a fit that wants a lookup no slower on more data stops."""
    rows = [s for s in samples if s.kind == CACHED and s.threads == 1 and s.workload in LOOKUP_SLOPES]
    sizes = sorted({s.records for s in rows})
    if len(sizes) < 2:
        raise CalibrationError("lookup CPU: cached lookups at two data sizes are needed (one was measured)")
    ref = float(sizes[0])
    per: dict[str, dict[str, float]] = {}
    at_ref: dict[tuple[str, str], float] = {}
    for cls in CLASS_DESIGNS:
        per[cls] = {}
        for op in LOOKUP_SLOPES:
            mine = [s for s in rows if s.cls == cls and s.workload == op]
            y = np.array([s.fg_cpu - memtable_cpu(s, memtable) for s in mine])
            if (cls, op) in FLAT_SEARCHES:  # no slope to learn: one CPU at every size
                at_ref[(cls, str(op))] = _positive_lstsq(
                    np.ones((len(mine), 1)), y, ["at_reference"], f"{cls} {op} CPU"
                )["at_reference"]
                continue
            A = np.array([[1.0, math.log2(s.records / ref)] for s in mine]).reshape(-1, 2)
            f = _positive_lstsq(
                A, y, ["at_reference", "per_doubling"], f"{cls} {op} CPU (a + b log2(keys / {ref:,.0f}))"
            )
            per[cls][str(op)] = f["per_doubling"]
            at_ref[(cls, str(op))] = f["at_reference"]
    return {"per_doubling": per, "reference_keys": ref, "at_reference": at_ref}


def run_doublings(s: Sample, lookup: dict[str, Any]) -> float:
    """Doublings of a run's keys past the lookup fit's reference size (0 below it): the fit's
    counterpart of cost_models.cpu.doublings, before any table holds the reference."""
    ref = float(lookup["reference_keys"])
    return math.log2(max(s.records, ref) / ref)


def lookup_cpu(s: Sample, lookup: dict[str, Any]) -> float:
    """The searches' CPU in one operation of a run beyond what they cost at the reference size."""
    from cost_models.cpu import LOOKUP_OF

    mix = s.ops_mix
    total = sum(mix.values()) or 1.0
    doublings = run_doublings(s, lookup)
    slope = lookup["per_doubling"][s.cls]
    return (
        sum(
            w / total * search_slope(slope, s.cls, LOOKUP_OF[Operation(op)]) for op, w in mix.items() if op in LOOKUP_OF
        )
        * doublings
    )


def buffered_walk(cpu: dict[tuple[str, str], float], lookup: dict[str, Any], s: Sample) -> float:
    """CPU a lookup of run ``s`` skips when the buffer answers it: the get's walk of the levels at
    the run's size (its cached CPU and growth, :func:`lookup_cpu`) less a buffered get's. The
    model charges a lookup the buffer answers as a buffered get (cost_models.cpu.demands) by the
    same difference."""
    slope = search_slope(lookup["per_doubling"][s.cls], s.cls, Operation.GET)
    return cpu[(s.cls, Operation.GET)] + slope * run_doublings(s, lookup) - cpu[(s.cls, BUFFER_GET)]


#: Cached runs whose lookups a memtable can answer (their own writes filled it): an rmw reads the
#: key it writes, so in a cached rmw run of 200,000 operations the memtable answers 57 % of the
#: reads at 100,000 keys and 21 % at 400,000 (BENCHMARKS §33.1).
SELF_BUFFERED = (Operation.RMW,)


def fit_cpu(
    samples: list[Sample],
    memtable: MemtableFit,
    lookup: dict[str, Any],
    walks: dict[tuple[str, str], float] | None = None,
) -> dict[tuple[str, str], float]:
    """Cached single-thread CPU seconds per (class, operation) at the reference size with an empty
    memtable: the memtable descents (fit_memtable, fit_memtable_insert) and the searches' growth
    with the data (fit_lookup) taken out, averaged over the sizes and memtables (ranges: see
    fit_range). An operation of :data:`SELF_BUFFERED` is the CPU of one that walks the levels: its
    runs' lookups the memtable answered get the walk they skipped added back
    (:func:`buffered_walk`, from the get and buffered get of these samples, or of ``walks`` — a
    table's — when the samples hold only the one operation)."""
    vals: dict[tuple[str, str], list[float]] = {}

    def own(s: Sample) -> float:
        grown = lookup_cpu(s, lookup) if s.kind != BUFFERED else 0.0
        return s.fg_cpu - memtable_cpu(s, memtable) - grown

    runs = [s for s in samples if s.kind in (CACHED, BUFFERED, SMALL_MEMTABLE) and s.threads == 1]
    for s in runs:
        if s.workload != Operation.RANGE and s.workload not in SELF_BUFFERED:
            vals.setdefault((s.cls, s.workload), []).append(own(s))
    out = {k: float(np.mean(v)) for k, v in vals.items()}
    known = {**(walks or {}), **out}
    for s in runs:
        if s.workload in SELF_BUFFERED:
            if s.get_buffered > 0 and not {(s.cls, Operation.GET), (s.cls, BUFFER_GET)} <= known.keys():
                raise CalibrationError(
                    f"{s.cls} {s.workload}: no get and buffered-get CPU to add its buffered reads back"
                )
            walk = buffered_walk(known, lookup, s) if s.get_buffered > 0 else 0.0
            vals.setdefault((s.cls, s.workload), []).append(own(s) + s.get_buffered * walk)
    out = {k: float(np.mean(v)) for k, v in vals.items()}
    bad = [f"{c} {o} {v:.3g} s" for (c, o), v in out.items() if not v > 0]
    if bad:
        raise CalibrationError(
            f"CPU per operation without the memtable's descents is not positive for {', '.join(bad)}: the "
            "memtable slope is larger than the runs support — re-run on a quiet machine"
        )
    return out


def fit_range(samples: list[Sample], lookup: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Range CPU per class: a + scan length x r on a tree; on the hash log a per-scan part at
    each size (its whole-index walk) + scan length x r, the per-scan part then divided by the
    keys and averaged over the sizes (per_key). The seek's growth with the data (fit_lookup) is
    taken out first."""
    out = {}
    for cls in CLASS_DESIGNS:
        rows = [
            s for s in samples if s.kind == CACHED and s.threads == 1 and s.workload == Operation.RANGE and s.cls == cls
        ]
        sizes = sorted({s.records for s in rows}) if cls == DesignClass.LSH else [0]
        A = np.zeros((len(rows), len(sizes) + 1))
        for i, s in enumerate(rows):
            A[i, sizes.index(s.records) if cls == DesignClass.LSH else 0] = 1.0
            A[i, -1] = float(s.scan_length)
        y = np.array([s.fg_cpu - lookup_cpu(s, lookup) for s in rows])
        names = [f"per_scan_{n}" for n in sizes] + ["per_entry"]
        f = _positive_lstsq(A, y, names, f"{cls} range CPU (per scan + scan length x per entry)")
        if cls == DesignClass.LSH:
            out[cls] = {"per_key": float(np.mean([f[f"per_scan_{n}"] / n for n in sizes])), "per_entry": f["per_entry"]}
        else:
            out[cls] = {"per_scan": f["per_scan_0"], "per_entry": f["per_entry"]}
    return out


def cached_cpu(
    cpu: dict[tuple[str, str], float], rng: dict[str, dict[str, float]], lookup: dict[str, Any], s: Sample
) -> float:
    """The cached CPU seconds of one operation of a run's mix (the fit so far) at the run's data
    size, its lookups the buffer answered charged as such."""
    t = lookup_cpu(s, lookup)
    cls = s.cls
    walk = buffered_walk(cpu, lookup, s)
    for op, w in s.ops_mix.items():
        if op == Operation.RANGE:
            r = rng[cls]
            base = r["per_key"] * s.records if cls == DesignClass.LSH else r["per_scan"]
            t += w * (base + s.scan_length * r["per_entry"])
        else:
            t += w * cpu[(cls, op)]
            if op in (Operation.GET, Operation.RMW):
                t -= w * s.get_buffered * walk
    return t


def fit_block_read(
    samples: list[Sample],
    cpu: dict,
    rng: dict[str, dict[str, float]],
    memtable: MemtableFit,
    lookup: dict[str, Any],
) -> dict[str, Any]:
    """CPU of a block read: t_class s(bytes) + k bytes d(N). Per class the time of a 4 KiB block
    (what reading a block involves differs: a hot run's data block, a cold run's index and data
    blocks, a log block found through the hash index); one curve s of how it changes with the
    block's bytes, s(4 KiB) = 1, measured on the LSM design at every block size it ran
    (:data:`BLOCK_SIZE_STEPS`; cost_models.cpu.block_read_shape interpolates it); one time k per
    byte per doubling d(N) of the data past the reference size (cost_models.cpu.read_block_seconds:
    a large block's copy from a larger page cache misses more).

    One least squares, linear: a term per LSM block size (the LSM's block time there), one per
    other class and block size, and k, over the loaded single-thread runs (single operations and
    mixes) that read blocks; a hash log's ranges are left out: their CPU is the walk over the whole
    index (milliseconds), beside which their blocks are below the noise. The curve is the LSM's
    terms over their value at 4 KiB (interpolated), each other class's time at 4 KiB its term over
    the curve at its block size (averaged over its sizes, weighed by runs)."""
    rows = [
        s
        for s in samples
        if s.kind == LOADED
        and s.threads == 1
        and s.fg_blocks > 0
        and not (s.cls == DesignClass.LSH and Operation.RANGE in s.ops_mix)
    ]
    lsm = str(DesignClass.LSM)
    runs = Counter((s.cls, s.block_bytes) for s in rows)  # runs per (class, block size): a term each
    terms = sorted(runs)
    column = {t: i for i, t in enumerate(terms)}
    knots = [b for c, b in terms if c == lsm]
    if len(knots) < 2:
        raise CalibrationError(
            f"block-read CPU: the LSM design read blocks of {len(knots)} size(s); the curve over the block's "
            "bytes needs two or more (measure.calibrate.BLOCK_SIZE_STEPS)"
        )
    y = np.array([s.fg_cpu - cached_cpu(cpu, rng, lookup, s) - memtable_cpu(s, memtable) for s in rows])
    A = np.zeros((len(rows), len(terms) + 1))
    for k, s in enumerate(rows):
        A[k, column[(s.cls, s.block_bytes)]] = s.fg_blocks
        A[k, -1] = s.fg_blocks * s.block_bytes * run_doublings(s, lookup)
    names = [f"block_read_seconds_{c}_{b:.0f}B" for c, b in terms]
    growth = "block_read_seconds_per_byte_doubling"
    f = _positive_lstsq(A, y, [*names, growth], "block-read CPU (blocks x t(class, block bytes) + k bytes doublings)")
    at = {t: f[n] for t, n in zip(terms, names, strict=True)}
    lsm_times = np.array([at[(lsm, b)] for b in knots])
    ratio = lsm_times / float(curve_at(REFERENCE_BLOCK_BYTES, knots, lsm_times))
    per_class: dict[str, float] = {}
    for c in CLASS_DESIGNS:
        mine = [(b, runs[(c, b)]) for cc, b in terms if cc == c]
        if not mine:
            raise CalibrationError(f"block-read CPU: no loaded single-thread run of {c} read a block")
        per_class[c] = sum(n * at[(c, b)] / float(curve_at(b, knots, ratio)) for b, n in mine) / sum(n for _, n in mine)
    return {
        "per_class": per_class,
        "shape": {"block_bytes": [float(b) for b in knots], "ratio": [float(r) for r in ratio]},
        "per_byte_doubling": f[growth],
        # the growth is held at the largest size that measured it (cost_models.cpu.block_read_doublings)
        "growth_max_keys": float(max(s.records for s in rows)),
    }


def fit_background(samples: list[Sample]) -> dict[str, float]:
    """Background CPU per flush/merge block, fixed and per byte, and on the hash log per entry of
    the block (its flush inserts each entry into the hash index, its GC looks each up), from
    every loaded run that wrote."""
    rows = [s for s in samples if s.kind == LOADED and s.bg_blocks > 0]
    A = np.array(
        [
            [
                s.bg_blocks,
                s.bg_blocks * s.block_bytes,
                s.bg_blocks * s.block_bytes / (KEY + VALUE) * (s.cls == DesignClass.LSH),
            ]
            for s in rows
        ]
    ).reshape(-1, 3)
    y = np.array([s.bg_cpu for s in rows])
    return _positive_lstsq(
        A,
        y,
        ["background_block_seconds", "background_block_seconds_per_byte", "hash_index_entry_seconds"],
        "background CPU (merge blocks x (t + bytes x t_byte + hash-log entries x t_index))",
    )


def envelope(samples: list[Sample], cores: int) -> list[dict[str, Any]]:
    """Per (class, workload): the highest throughput per core the engine was measured to reach
    (over the time its threads had a CPU: ``Sample.free_throughput``). The buffered runs (all the
    data in a small buffer) calibrate a CPU term; they are no workload a node runs."""
    best: dict[tuple[str, str, str], Sample] = {}

    def per_core(s: Sample) -> float:
        return s.free_throughput / min(s.threads, cores)

    for s in samples:
        if s.kind in (BUFFERED, SMALL_MEMTABLE):
            continue
        key = (s.cls, s.workload, s.mix)
        if key not in best or per_core(s) > per_core(best[key]):
            best[key] = s
    return [
        {  # plain strings: a measured sample's class and kind are StrEnums, which yaml.safe_dump refuses
            "class": str(cls),
            "workload": str(w),
            "mix": json.loads(mix),
            "per_core_ops": round(per_core(s), 1),
            "threads": s.threads,
            "records": s.records,
            "kind": str(s.kind),
        }
        for (cls, w, mix), s in sorted(best.items())
    ]


def fit(samples: list[Sample], cores: int | None = None) -> dict[str, Any]:
    """Every term of the CPU model from the samples (module docstring); raises CalibrationError at a bound."""
    cores = cpu_count() if cores is None else cores
    memtable = fit_memtable_insert(samples, fit_memtable(samples))
    lookup = fit_lookup(samples, memtable)
    rng = fit_range(samples, lookup)
    cpu = fit_cpu(samples, memtable, lookup)
    for cls in CLASS_DESIGNS:
        for op in OPERATIONS:
            if op != Operation.RANGE and (cls, op) not in cpu:
                raise CalibrationError(f"no cached single-thread run of {cls} {op}")
        if (cls, BUFFER_GET) not in cpu:
            raise CalibrationError(f"no buffered-get run of {cls}")
        if cls != DesignClass.LSH:
            cpu[(cls, Operation.RANGE)] = rng[cls]["per_scan"]
    drop_index_walks(cpu)
    phi = fit_phi(samples, cores)
    concurrent = fit_concurrent_cpu(samples, cores)
    missing = [f"{c} {o}" for c in CLASS_DESIGNS for o in OPERATIONS if (c, o) not in phi or (c, o) not in concurrent]
    if missing:
        raise CalibrationError(f"no speed-up measured for {', '.join(missing)} (the machine has {cores} core)")
    return {
        "cpu": cpu,
        "phi": phi,
        "concurrent_cpu": concurrent,
        "range": rng,
        "memtable": memtable,
        "lookup": lookup,
        "block_read": fit_block_read(samples, cpu, rng, memtable, lookup),
        "background": fit_background(samples),
        "envelope": envelope(samples, cores),
    }


def drop_index_walks(cpu: dict[tuple[str, str], float]) -> None:
    """A hash log's empty range walks its whole index as its range does: the model charges that
    walk from hash_scan_per_key_seconds (fit_range), so the table holds no per-operation CPU for it."""
    for op in INDEX_WALKS:
        if op != Operation.RANGE:
            cpu.pop((DesignClass.LSH, op), None)


TABLE_HEADER = (
    "# The CPU model's measured terms: per design class and operation the CPU seconds on a cached engine\n"
    "# and phi (Eq. 2); block-read and background CPU; the envelope of measured throughput per core.\n"
    "# Written by `cosine calibrate` (measure/calibrate.py); read through cost_models/cpu.py.\n"
)


def write_table(result: dict[str, Any], samples: list[Sample], path: Path = PHI_TABLE) -> Path:
    """Rewrite data/phi.yaml with the learned values (and how they were obtained)."""
    classes: dict[str, Any] = {}
    for cls in CLASS_DESIGNS:
        classes[cls] = {
            "range_entry_seconds": float(f"{result['range'][cls]['per_entry']:.4g}"),
            "buffer_get_seconds": float(f"{result['cpu'][(cls, BUFFER_GET)]:.4g}"),
            "block_read_seconds": float(f"{result['block_read']['per_class'][cls]:.4g}"),
            "lookup_seconds_per_doubling": {
                op: float(f"{v:.4g}") for op, v in result["lookup"]["per_doubling"][cls].items()
            },
            "phi": {str(op): round(result["phi"][(cls, op)], 4) for op in OPERATIONS},
            "concurrent_cpu_factor": {str(op): round(result["concurrent_cpu"][(cls, op)], 4) for op in OPERATIONS},
            "cpu_seconds": {
                str(op): float(f"{result['cpu'][(cls, op)]:.4g}") for op in OPERATIONS if (cls, op) in result["cpu"]
            },
        }
    sizes = sorted({s.records for s in samples if s.kind != BUFFERED})
    threads = sorted({s.threads for s in samples})
    terms = result["background"]
    doc = {
        "schema": PHI_SCHEMA,
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "provenance": provenance(),
        "method": (
            f"cosine calibrate (measure/calibrate.py): the class presets (rocksdb, wiredtiger, faster, "
            f"hybrid-base) at {sizes} records, threads {threads}. "
            "cpu_seconds: driver-thread CPU per operation on a warm engine whose cache holds the data (no "
            "block reads; writes fill part of an empty buffer, no flush; an rmw's reads that buffer "
            "answered get the level walk they skipped added back); phi: Eq. 2 on those runs' "
            "busy share at 2 threads (throughput x CPU per operation / threads), averaged (1 when "
            f"measured at most {PHI_NOISE} past it); "
            "concurrent_cpu_factor: those runs' CPU per operation at 2 threads over 1 thread's, averaged; "
            "empty_range: its own cached runs (hash log: the index walk of "
            "hash_scan_per_key_seconds, its phi measured); lookups: a_op + b log2(keys / smallest size) by "
            "least squares over the sizes; memtable insert slope: cached blind writes at two memtables, past the "
            "smaller one (writes are flat below it); "
            "range: a + scan length x r (hash log: keys x k + scan "
            "length x r); block_read: least squares of the extra CPU of loaded single-operation and YCSB "
            "A/B/D/F runs against their blocks read, a term per class and block size (the LSM's at each block "
            "size it ran: block_read_shape, its terms over their value at 4 KiB), plus a time per byte per "
            "doubling of the keys (held past the largest size measured); background: least squares of the "
            "background thread's CPU against flush and merge blocks (and, on the hash log, their entries). "
            "No value is clamped."
        ),
        "memtable_seconds_per_doubling": float(f"{result['memtable'].search_slope:.4g}"),
        "memtable_insert_seconds_per_doubling": float(f"{result['memtable'].insert_slope:.4g}"),
        "memtable_base_entries": float(f"{result['memtable'].search_base:.4g}"),
        "memtable_insert_base_entries": float(f"{result['memtable'].insert_base:.4g}"),
        "lookup_reference_keys": float(result["lookup"]["reference_keys"]),
        "block_read_shape": {
            "block_bytes": result["block_read"]["shape"]["block_bytes"],
            "ratio": [float(f"{r:.4g}") for r in result["block_read"]["shape"]["ratio"]],
        },
        "block_read_seconds_per_byte_doubling": float(f"{result['block_read']['per_byte_doubling']:.4g}"),
        "block_read_growth_max_keys": result["block_read"]["growth_max_keys"],
        "background_block_seconds": float(f"{terms['background_block_seconds']:.4g}"),
        "background_block_seconds_per_byte": float(f"{terms['background_block_seconds_per_byte']:.4g}"),
        "hash_scan_per_key_seconds": float(f"{result['range'][DesignClass.LSH]['per_key']:.4g}"),
        "hash_index_entry_seconds": float(f"{terms['hash_index_entry_seconds']:.4g}"),
        "classes": classes,
        "envelope": result["envelope"],
    }
    write_text(path, TABLE_HEADER + yaml.safe_dump(doc, sort_keys=False))
    return path


# ----------------------------------------------------------------------------- one operation


#: Operations `cosine calibrate --operation` measures alone: their cached runs give the CPU per
#: operation and phi with the table's memtable and lookup terms. A range needs its two scan
#: lengths and the hash log's walk, a get and an empty get the lookup-growth fit over the same
#: runs: only the whole calibration measures those.
SINGLE_OPERATIONS = tuple(op for op in OPERATIONS if op != Operation.RANGE and op not in LOOKUP_SLOPES)


def check_single_operation(op: Operation) -> None:
    """--operation names an operation that can be measured alone (SINGLE_OPERATIONS)."""
    if op not in SINGLE_OPERATIONS:
        raise InputError(
            f"--operation {op}: only {', '.join(SINGLE_OPERATIONS)} can be measured alone "
            "(range and the lookups need the whole calibration)"
        )


def operation_runs(plan: Plan, op: Operation) -> list[tuple[CalibrationRun, str, str, Spec, int, int, float]]:
    """The cached runs of ``op`` in the calibration of ``plan`` (every class, size and thread count)."""
    return [r for r in _runs(plan) if r[0] == CACHED and r[2] == op]


def table_terms(table: dict[str, Any]) -> tuple[MemtableFit, dict[str, Any]]:
    """The memtable and lookup-growth terms of a written table, as fit_memtable_insert and fit_lookup return them."""
    memtable = MemtableFit(
        float(table["memtable_seconds_per_doubling"]),
        float(table["memtable_base_entries"]),
        float(table["memtable_insert_seconds_per_doubling"]),
        float(table["memtable_insert_base_entries"]),
    )
    lookup = {
        "per_doubling": {c: dict(v["lookup_seconds_per_doubling"]) for c, v in table["classes"].items()},
        "reference_keys": float(table["lookup_reference_keys"]),
    }
    return memtable, lookup


def fit_operation(samples: list[Sample], op: Operation, table: dict[str, Any], cores: int) -> dict[str, Any]:
    """CPU seconds and phi of ``op`` per class from its cached runs (fit_cpu, fit_phi), the memtable
    and lookup terms taken from ``table``; raises CalibrationError at a bound or for a missing class."""
    mine = [s for s in samples if s.kind == CACHED and s.workload == op]
    memtable, lookup = table_terms(table)
    walks: dict[tuple[str, str], float] = {}
    for cls, entry in table["classes"].items():  # what an rmw's buffered reads skipped (fit_cpu)
        walks[(cls, Operation.GET)] = float(entry["cpu_seconds"][Operation.GET])
        walks[(cls, BUFFER_GET)] = float(entry["buffer_get_seconds"])
    cpu = fit_cpu(mine, memtable, lookup, walks)
    phi = fit_phi(mine, cores)
    concurrent = fit_concurrent_cpu(mine, cores)
    missing = [c for c in CLASS_DESIGNS if (c, op) not in cpu or (c, op) not in phi or (c, op) not in concurrent]
    if missing:
        raise CalibrationError(f"{op}: no cached runs at 1 and 2 threads of {', '.join(missing)}")
    drop_index_walks(cpu)
    return {"operation": op, "cpu": cpu, "phi": phi, "concurrent_cpu": concurrent}


def merge_operation(result: dict[str, Any], samples: list[Sample], path: Path = PHI_TABLE) -> Path:
    """Write one operation's measured CPU and phi into the table at ``path``, every other entry as
    it was; its provenance goes under ``operation_provenance``, and its ``<op>_note`` (a value
    that was not measured) is removed."""
    op = str(result["operation"])
    doc = yaml.safe_load(path.read_text())
    for cls in CLASS_DESIGNS:
        entry = doc["classes"][cls]
        entry["phi"][op] = round(result["phi"][(cls, op)], 4)
        entry.setdefault("concurrent_cpu_factor", {})[op] = round(result["concurrent_cpu"][(cls, op)], 4)
        if (cls, op) in result["cpu"]:
            entry["cpu_seconds"][op] = float(f"{result['cpu'][(cls, op)]:.4g}")
        else:
            entry["cpu_seconds"].pop(op, None)
    sizes = sorted({s.records for s in samples})
    threads = sorted({s.threads for s in samples})
    doc.pop(f"{op}_note", None)
    doc.setdefault("operation_provenance", {})[op] = {
        **provenance(),
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "method": (
            f"cosine calibrate --operation {op}: only {op}'s cached runs (the class presets at {sizes} "
            f"records, threads {threads}), fitted as the whole calibration fits them (fit_cpu, fit_phi, "
            "fit_concurrent_cpu) with this table's memtable and lookup terms; merged into the table, every other entry "
            "unchanged (hash log: CPU is the index walk, hash_scan_per_key_seconds)."
        ),
    }
    write_text(path, TABLE_HEADER + yaml.safe_dump(doc, sort_keys=False))
    return path


def calibrate_operation(
    op: Operation,
    quick: bool,
    samples_from: Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    write: bool = False,
    out: Path | None = None,
) -> tuple[list[Sample], dict[str, Any]]:
    """Measure (or reload) the cached runs of one operation, fit, optionally merge into the table."""
    check_single_operation(op)
    plan = QUICK_PLAN if quick else DEFAULT_PLAN
    table = phi_table(PHI_TABLE)
    if samples_from is not None:
        samples = [s for s in load_samples(samples_from) if s.kind == CACHED and s.workload == op]
    else:
        samples = measure(plan, progress, operation_runs(plan, op))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_rows(out / "calibration.parquet", samples, Sample)
    res = fit_operation(samples, op, table, cpu_count())
    if write:
        merge_operation(res, samples)
    return samples, res


# ----------------------------------------------------------------------------- checks


def predicted(s: Sample, cores: int) -> float:
    """The model's throughput for a calibration run, given the blocks the run read and merged."""
    per: dict[str, np.ndarray] = {str(op): np.array([0.0]) for op in OPERATIONS}
    mix = s.ops_mix
    # measured blocks, spread over the operations that cause them
    reads = [op for op in mix if op not in (Operation.INSERT, Operation.UPDATE)]
    writes = [op for op in mix if op in WRITE_OPERATIONS]
    rshare = sum(mix[o] for o in reads)
    wshare = sum(mix[o] for o in writes)
    for op in reads:
        per[op] = per[op] + (s.fg_blocks / rshare if rshare else 0.0)
    # the engine counts flush and merge blocks; the model's put also carries its WAL pages (which
    # demands() takes back off as the writer's own): without them a put's merges would vanish
    for op in writes:
        per[op] = per[op] + (s.bg_blocks / wshare if wshare else 0.0) + wal_pages(KEY + VALUE)
    if Operation.RMW in mix:
        per[Operation.GET] = np.array([s.fg_blocks / rshare if rshare else 0.0])
    io = IOCost.of(per, get_buffered=np.array([s.get_buffered]))
    shape = NodeShape(
        np.array([DesignClass(s.cls).code]),
        np.array([s.block_bytes]),
        float(s.records),
        KEY + VALUE,
        np.array([s.memtable_entries]),
    )
    return float(
        node_throughput(io, math.inf, shape, mix, s.threads, s.scan_length, cores=usable_cores(s.threads, cores))[0]
    )


def accuracy(pred: float, meas: float) -> float:
    """1 - |predicted - measured| / measured, at least 0 (the paper's accuracy)."""
    return max(0.0, 1.0 - abs(pred - meas) / meas) if meas > 0 else 0.0


def checks(samples: list[Sample], cores: int) -> list[dict[str, Any]]:
    """Model vs measured throughput of every loaded run (single operations: the check; mixes: the fit's)."""
    rows = []
    for s in samples:
        if s.kind != LOADED:
            continue
        p = predicted(s, cores)
        rows.append(
            {
                "class": s.cls,
                "workload": s.workload,
                "records": s.records,
                "threads": s.threads,
                "group": "mixed" if s.workload.startswith("ycsb") else "single operation",
                "predicted_ops": p,
                "measured_ops": s.throughput,
                "runqueue_share": s.runqueue_share,
                "accuracy": accuracy(p, s.throughput),
                # over the time the driver threads had a CPU (= measured on a quiet machine)
                "measured_free_ops": s.free_throughput,
                "accuracy_free": accuracy(p, s.free_throughput),
            }
        )
    return rows


#: The volume's I/Os per operation a device-mode run reports (cosine-bench ``device``): all, foreground
#: reads (an operation's own), background reads (flush and merge inputs), writes (flushes, merges, WAL pages).
DEVICE_IO_KINDS = ("device_ios", "device_foreground_reads", "device_background_reads", "device_writes")


def device_ios(rep: dict[str, Any]) -> dict[str, float]:
    """:data:`DEVICE_IO_KINDS` per operation of a cosine-bench report (zeros on the local device)."""
    d = rep.get("device") or {}
    ops = max(1, int(rep["operations"]))
    keys = ("ios", "foreground_read_ios", "background_read_ios", "write_ios")
    return {k: float(d.get(src, 0)) / ops for k, src in zip(DEVICE_IO_KINDS, keys, strict=True)}


#: Merge cycles (:func:`merge_cycle`) a warm-up runs before it looks for a merge into the last
#: level: the workload's own writes pass through the buffer and every level above the last once.
WARMUP_CYCLES = 1.0


def merge_cycle(secs: dict[str, Any], wl: dict[str, Any]) -> float:
    """Operations of a workload.json's mix between two merges into the last level of its store
    (:func:`cost_models.engine_model.deepest_merge_puts` over the mix's write share; 0 for a
    read-only mix): the deepest merge happens about once per such cycle. Until §25 this was the
    entries above the last level over the write share, as if every put were a new key: under
    YCSB A's zipfian puts that is 1.7-4.7x short, and a run of it measured 0-2 deep merges."""
    writes = write_share({k: float(v) for k, v in wl["mix"].items()})
    if not writes > 0:
        return 0.0
    return deepest_merge_puts(secs, wl) / writes


def steady_warmup(secs: dict[str, Any], wl: dict[str, Any]) -> dict[str, Any]:
    """The workload.json fields of an unmeasured warm-up after the load: :data:`WARMUP_CYCLES`
    merge cycles (:func:`merge_cycle`) of the mix, then (a tree's levels) cosine-bench's
    ``warmup_phase_aligned``: on until two merges into the last level, whose spacing is the
    engine's own cycle, and into the next cycle as far as the measured run's length allows from
    a deep merge at either end (the report's ``warmup`` says what it ran: :func:`measure.engine.as_ran`).

    The load leaves the memtable full of its last keys and every key at a random level, where the
    model's steady state has the workload's recently written (hot) keys in the buffer and the
    upper levels. A run of a few thousand operations at 5 % writes (YCSB B) barely changes that:
    on the B-tree preset (250,000 keys, 5,000 operations, 3,000 IOPS) the memtable answered 24 %
    of the gets against the model's 53 %, and the run read 2.56 blocks per operation against the
    model's 1.24, at 1,172 ops/s against 2,415 predicted; after one buffer's worth of warm-up, 51 %
    and 1.64 blocks (the levels still the load's); after one cycle of this warm-up (2.1 M
    operations), 1.13 blocks against 1.16 and 2,671 ops/s against 2,586 (BENCHMARKS.md §17.4).
    A fixed count (1.5 cycles until §26) left the phase to the load's: the hybrid preset's
    1-thread YCSB A runs at 3,000 IOPS started where a deep merge was due and took it or not by
    the background worker's timing (1,608-10,261 ops/s measured, BENCHMARKS.md §25.8); and the
    engine's spacing of deep merges is not the model's cycle (the hybrid's partial merges into
    its last level come 1.75x as often at 50,000 keys, §26), so the phase is measured, not
    computed. Last, a run shorter than a buffer's fill starts with the buffer where the run's mean
    is the model's (``warmup_buffered``: :func:`cost_models.engine_model.run_start_buffered`), not
    where the last flush left it. The warm-up is not throttled (cosine-bench throttles the
    measured phase only)."""
    ops = math.ceil(WARMUP_CYCLES * merge_cycle(secs, wl))
    aligned = ops > 0 and secs["design"]["class"] != DesignClass.LSH  # a hash log has no levels
    return buffered_warmup(secs, wl, ops, aligned)


def buffered_warmup(secs: dict[str, Any], wl: dict[str, Any], ops: int, aligned: bool) -> dict[str, Any]:
    """The workload.json fields of a warm-up of ``ops`` operations (``aligned``: cosine-bench's
    ``warmup_phase_aligned``) that ends with the buffer where the run's mean is the model's
    (``warmup_buffered``, :func:`cost_models.engine_model.run_start_buffered`, when it applies),
    and starts when the tree is as deep as the workload keeps it (``warmup_depth``,
    :func:`cost_models.engine_model.steady_depth`: a tiered last level under overwrites deepens
    some flushes after the load)."""
    out: dict[str, Any] = {"warmup_operations": ops, "warmup_phase_aligned": aligned}
    target = run_start_buffered(secs, {**wl, **out}) if ops > 0 else None
    if target is not None:
        out["warmup_buffered"] = target
    depth = steady_depth(secs, wl) if ops > 0 else None
    if depth is not None:
        out["warmup_depth"] = depth
    return out


#: The longest a Fig. 4B run on the local device is stretched to cover a merge cycle, as a
#: multiple of the plan's operations (YCSB B's 5 % writes would need 56x the quick plan's).
MAX_CYCLE_STRETCH = 10


#: The longest a device-mode run is stretched to cover its merge cycle, at the model's throughput:
#: a YCSB E design at 3,000 IOPS runs ~700 scans per second, and 50,000 operations (the stretch)
#: would take 70 s per run, 45 minutes for the ranking's 13 designs x 3 runs of one workload.
MAX_DEVICE_RUN_SECONDS = 10.0


#: The shortest a measured run on the local device should last, at the model's throughput: a
#: read-only run of 50,000 operations on a 1.5 M ops/s design lasts 33 ms, where three runs of the
#: ranking's YCSB C pick spread 1.3x (BENCHMARKS.md §21).
MIN_RUN_SECONDS = 0.25


def covering_ops(
    ops: int,
    secs: dict[str, Any],
    wl: dict[str, Any],
    device: DeviceModel | None,
    predicted_ops_per_s: float = 0.0,
) -> int:
    """Operations of one measured run that should take ``ops``. On the local device a run covers a
    whole merge cycle (:func:`merge_cycle`) and lasts :data:`MIN_RUN_SECONDS` at the predicted
    throughput, within ``ops`` and :data:`MAX_CYCLE_STRETCH` times it: the model amortizes merges
    and their write stalls over the cycle, and a shorter run measures whether the deepest merge
    happened to fall inside it (and the scheduler). The hybrid preset on the 25 % mix at
    1 thread: 50,000 operations (0.15 s) ran at 343-357 k ops/s with or without that merge,
    500,000 at 444-496 k (BENCHMARKS.md §19); the ranking's B-tree pick on YCSB B, 50,000
    operations (20 ms): three runs spread 2.5x (BENCHMARKS.md §21). In device mode (runs
    throttled to the volume's rate, long enough) the run covers the merge cycle too, within
    the same stretch and :data:`MAX_DEVICE_RUN_SECONDS` at the predicted throughput: 5,000
    operations of the ranking's YCSB A pick at 3,000 IOPS measured 8,788 / 24,256 / 31,799 /
    19,290 ops/s after 0 / 30,000 / 210,000 / 600,000 operations of warm-up, where the model's
    cycle average is 18,855 (BENCHMARKS.md §22.6)."""
    cycle = math.ceil(merge_cycle(secs, wl))
    if device is not None and device != LOCAL_DEVICE:
        longest = MAX_CYCLE_STRETCH * ops
        if math.isfinite(predicted_ops_per_s) and predicted_ops_per_s > 0:
            longest = min(longest, max(ops, math.ceil(MAX_DEVICE_RUN_SECONDS * predicted_ops_per_s)))
        return int(min(max(ops, cycle), longest))
    timed = math.ceil(MIN_RUN_SECONDS * predicted_ops_per_s) if math.isfinite(predicted_ops_per_s) else 0
    return int(min(max(ops, cycle, timed), MAX_CYCLE_STRETCH * ops))


def fig4b_ops(plan: Plan, secs: dict[str, Any], spec: Spec, threads: int, cores: int, cpu_scale: float = 1.0) -> int:
    """Operations of one Fig. 4B run on the local device (:func:`covering_ops` of the plan's)."""
    wl = workload_json(spec, plan.fig4b_records, plan.fig4b_ops, threads)
    x, _ = engine_throughput(secs, wl, cores, cpu_scale=cpu_scale)
    return covering_ops(plan.fig4b_ops, secs, wl, None, x)


#: The probe of :func:`host_speed`: cached single-operation runs of the calibration's, the read
#: and the blind write every Fig. 4B and ranking mix is made of.
HOST_SPEED_OPERATIONS = (Operation.GET, Operation.UPDATE)


#: How far this host's CPU may be from the calibration host's before the table is stale: issue 12's
#: throughput accuracy target (85 %), which a factor beyond it alone breaks on every CPU-bound run.
HOST_SPEED_TOLERANCE = 0.85


@dataclass(frozen=True)
class HostSpeed:
    """This host's CPU against the calibration host's (:func:`host_speed`)."""

    #: median over the probe's runs of measured / tabled CPU seconds per operation
    factor: float
    #: one row per probe run: class, operation, measured and tabled microseconds per operation
    rows: list[dict[str, Any]]

    @property
    def stale(self) -> bool:
        """True when the table no longer describes this host (:data:`HOST_SPEED_TOLERANCE`)."""
        return not HOST_SPEED_TOLERANCE <= self.factor <= 1.0 / HOST_SPEED_TOLERANCE


def host_speed(plan: Plan, repeats: int = 2, progress: Callable[[int, int, str], None] | None = None) -> HostSpeed:
    """How many times the calibration host's CPU seconds an operation takes on this host now.

    The phi table is one machine's: the same engine binary ran its cached gets 1.5-2.0x slower on
    this sandbox's host of another day (BENCHMARKS.md §22.1). The probe re-runs the calibration's
    own cached runs of :data:`HOST_SPEED_OPERATIONS` (every class, the plan's smallest size, one
    thread, ``repeats`` each) and compares each run's driver CPU per operation with what the table
    says for it (the inverse of :func:`predicted` on one thread); the factor is their median. A full
    `cosine calibrate` is the remedy; this is the check that says whether it is due, and the scale
    that puts a validation on another host on the table's footing (:meth:`Demands.scaled`)."""
    if repeats < 1:
        raise CalibrationError(f"host-speed probe: repeats must be >= 1, got {repeats}")
    n = plan.sizes[0]
    runs = [
        (CACHED, cls, str(op), mix_spec({op: 1.0}, name=str(op)), n, 1, 1.0)
        for _ in range(repeats)
        for op in HOST_SPEED_OPERATIONS
        for cls in CLASS_DESIGNS
    ]
    samples = measure(plan, progress, runs)
    rows: list[dict[str, Any]] = []
    for s in samples:
        tabled = 1.0 / predicted(s, cpu_count())
        rows.append(
            {
                "class": s.cls,
                "operation": s.workload,
                "records": s.records,
                "measured_us": s.fg_cpu * 1e6,
                "tabled_us": tabled * 1e6,
                "ratio": s.fg_cpu / tabled,
                "runqueue_share": s.runqueue_share,
            }
        )
    factor = float(statistics.median(float(r["ratio"]) for r in rows))
    if not (math.isfinite(factor) and factor > 0):
        raise CalibrationError(f"host-speed probe: measured/tabled CPU ratio {factor} is not a positive number")
    return HostSpeed(factor, rows)


def fig4b(
    plan: Plan,
    cores: int,
    progress: Callable[[int, int, str], None] | None = None,
    device: DeviceModel | None = None,
    warmup: bool = False,
    cpu_scale: float = 1.0,
) -> list[dict[str, Any]]:
    """Paper Fig. 4B on the grid's class presets (the paper's ~1% buffer, not the calibration's),
    at a size the calibration did not use: predicted vs measured throughput, median of
    ``plan.repeats`` runs, per (class, mixed workload, threads). ``warmup``: run
    :func:`steady_warmup` operations unmeasured (and unthrottled) first. ``cpu_scale``: the
    model's CPU seconds scaled to this host (:func:`host_speed`); each row also holds the
    table's own prediction (``predicted_table_ops``)."""
    grid = designs(plan.fig4b_records, quick=True, optima=False)
    n = plan.fig4b_records
    rows = []
    total = len(CLASS_DESIGNS) * len(FIG4B_WORKLOADS) * len(thread_counts())
    for cls, dname in CLASS_DESIGNS.items():
        secs = grid[dname]
        if device is not None:
            secs = {**secs, "device": device_section(device)}
        for w in FIG4B_WORKLOADS:
            spec = shipped_spec(w)
            for th in thread_counts():
                text = config_text(secs, th)
                ops = plan.fig4b_ops if device is not None else fig4b_ops(plan, secs, spec, th, cores, cpu_scale)
                wl = workload_json(spec, n, ops, th)
                if warmup:
                    wl.update(steady_warmup(secs, wl))
                meas, preds, tabled, rq, free, blocks, ios, warm = [], [], [], [], [], [], [], []
                dropped, shared = 0, 0
                for r in range(plan.repeats):
                    one = partial(run_scratch, text, {**wl, "seed": 42 + r}, f"fig4b-{cls}-{w}-{th}-{r}")
                    # a run the host gave one core for its threads is run again (measure.cores)
                    rep, lost, on_one = on_two_cores(one, th)
                    dropped, shared = dropped + lost, shared + int(on_one)
                    ran = as_ran(wl, rep)
                    warm.append(rep.get("warmup") or {})
                    meas.append(float(rep["run"]["throughput_ops"]))
                    free.append(free_throughput(rep))
                    rq.append(runqueue_share(rep, th))
                    dev = device or LOCAL_DEVICE
                    state = (rep["load"]["shape"], rep.get("stats"))
                    deep = run_merges(rep)
                    x, b = engine_throughput(secs, ran, cores, dev, *state, cpu_scale=cpu_scale, merges=deep)
                    preds.append(x)
                    tabled.append(
                        x if cpu_scale == 1.0 else engine_throughput(secs, ran, cores, dev, *state, merges=deep)[0]
                    )
                    blocks.append(b)
                    ios.append(device_ios(rep))
                m, p = statistics.median(meas), statistics.median(preds)
                rows.append(
                    {
                        "class": cls,
                        "design": dname,
                        "workload": w,
                        "threads": th,
                        "records": n,
                        "predicted_ops": p,
                        "predicted_table_ops": statistics.median(tabled),
                        "accuracy_table": accuracy(statistics.median(tabled), m),
                        "cpu_scale": cpu_scale,
                        "measured_ops": m,
                        "measured_runs": meas,
                        "accuracy": accuracy(p, m),
                        "runqueue_share": statistics.median(rq),
                        # over the time the driver threads had a CPU (= measured on a quiet machine)
                        "measured_free_ops": statistics.median(free),
                        "accuracy_free": accuracy(p, statistics.median(free)),
                        # the model's blocks per operation, and the volume's I/Os per operation
                        # (median of the runs; 0 on the local device)
                        "predicted_blocks": statistics.median(blocks),
                        **{k: statistics.median(r[k] for r in ios) for k in DEVICE_IO_KINDS},
                        # the warm-up the runs did, and how many saw a merge into the last level
                        "warmup_operations": statistics.median(int(x.get("operations", 0)) for x in warm),
                        "warmup_aligned_runs": sum(x.get("phase") is not None for x in warm),
                        # runs run again because the host gave the threads one core, and kept so
                        "runs_dropped_shared_core": dropped,
                        "runs_on_shared_core": shared,
                    }
                )
                if progress:
                    progress(len(rows), total, f"Fig. 4B {cls} {w} {th} threads")
    return rows


@dataclass
class Calibration:
    """What one `cosine calibrate` measured and learned."""

    samples: list[Sample]
    result: dict[str, Any]
    checks: list[dict[str, Any]]
    fig4b: list[dict[str, Any]]


def load_samples(path: Path) -> list[Sample]:
    """A calibration.parquet written earlier (to refit without measuring)."""
    samples = read_rows(path, Sample, "calibration.parquet")
    if not samples:
        raise InputError(f"--samples {path}: the calibration has no samples")
    return samples


def calibrate(
    quick: bool,
    samples_from: Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    write: bool = False,
    out: Path | None = None,
) -> Calibration:
    """Measure (or reload) the samples, fit, optionally write the table, then run Fig. 4B with it.

    The samples are written to ``out``/calibration.parquet before the fit, so a fit that stops
    at a bound can be redone from them (``--samples``) without measuring again."""
    plan = QUICK_PLAN if quick else DEFAULT_PLAN
    cores = cpu_count()
    samples = load_samples(samples_from) if samples_from is not None else measure(plan, progress)
    if out is not None and samples_from is None:
        out.mkdir(parents=True, exist_ok=True)
        write_rows(out / "calibration.parquet", samples, Sample)
    res = fit(samples, cores)
    if write:
        write_table(res, samples)
        return Calibration(samples, res, checks(samples, cores), fig4b(plan, cores, progress))
    with tempfile.TemporaryDirectory(prefix="cosine-phi-") as tmp:
        table = write_table(res, samples, Path(tmp) / "phi.yaml")
        with using_table(table):
            return Calibration(samples, res, checks(samples, cores), fig4b(plan, cores, progress))


def write(cal: Calibration, out: Path) -> list[Path]:
    """calibration.parquet (the samples), calibration_checks.parquet and fig4b.parquet."""
    out.mkdir(parents=True, exist_ok=True)
    return [
        write_rows(out / "calibration.parquet", cal.samples, Sample),
        write_records(out / "calibration_checks.parquet", cal.checks),
        write_records(out / "fig4b.parquet", cal.fig4b),
    ]
