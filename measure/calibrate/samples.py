"""Running the calibration on the engine: one :class:`Sample` per run, and where it came from."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from cost_models import cpu_count
from measure.calibrate import CalibrationError
from measure.calibrate.plan import (
    BUFFER_RUN_SHARE,
    BUFFERED,
    CACHED,
    LOADED,
    SMALL_MEMTABLE,
    Plan,
    Run,
    buffer_entries,
    calibration_designs,
    calibration_runs,
    run_config,
)
from measure.cores import on_two_cores
from measure.engine import (
    TEMPLATE,
    buffered_share,
    build,
    config_text,
    run_scratch,
    runqueue_share,
    workload_json,
)
from measure.grid import KEY, VALUE
from specs.errors import InputError
from specs.io import finite, read_rows, require
from specs.vocab import DESIGN_CLASSES, OPERATIONS, CalibrationRun


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
        return buffer_entries(secs) / 2.0
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


def measure(
    plan: Plan,
    progress: Callable[[int, int, str], None] | None = None,
    runs: list[Run] | None = None,
) -> list[Sample]:
    """Run every calibration run of ``plan`` (module docstring), or just ``runs`` of it, and return the samples."""
    build(TEMPLATE)
    runs = calibration_runs(plan) if runs is None else runs
    out: list[Sample] = []
    by_size = {n: calibration_designs(n) for n in plan.sizes}
    for i, (kind, cls, name, spec, size, th, block_factor) in enumerate(runs):
        secs = by_size[size][cls]
        n = size
        if kind == BUFFERED:
            # the data in the memtable: the design's buffer holds n (its usual size), or all of it
            n = int(block_factor * buffer_entries(secs)) if block_factor > 0 else size
            secs = {**secs, "layout": {**secs["layout"], "buffer_bytes": int(n / BUFFER_RUN_SHARE + 1) * (KEY + VALUE)}}
        elif block_factor != 1.0:
            lay = secs["layout"]
            secs = {**secs, "layout": {**lay, "block_entries": max(1, round(lay["block_entries"] * block_factor))}}
        o, layout = run_config(spec, cls, n, plan, kind, secs)
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


def load_samples(path: Path) -> list[Sample]:
    """A calibration.parquet written earlier (to refit without measuring)."""
    samples = read_rows(path, Sample, "calibration.parquet")
    if not samples:
        raise InputError(f"--samples {path}: the calibration has no samples")
    return samples


def cached_points(samples: list[Sample]) -> dict[tuple[str, str, int, int, int], list[Sample]]:
    """The cached runs by point (class, operation, records, scan length, threads): a point's repeats."""
    runs: dict[tuple[str, str, int, int, int], list[Sample]] = {}
    for s in samples:
        if s.kind == CACHED:
            runs.setdefault((s.cls, s.workload, s.records, s.scan_length, s.threads), []).append(s)
    return runs
