"""`cosine calibrate`: learn phi and the CPU time per operation (paper Algorithm 1).

For every design class (LSM, B-tree, LSH, hybrid) and operation type the
engine runs a single-operation workload with 1..eta threads on several data
sizes. Eq. 2 turns each observed speed-up g^ = X(c) / X(1) into
phi = (1 - 1/g^) / (1 - 1/c); the values are averaged per (class, op)
(Algorithm 1 lines 12-17). Only c <= the machine's cores enter phi: threads
beyond the cores cannot speed anything up, and Eq. 2 would read that as
serial work.

The single-thread time per operation is split into block I/O and CPU:
t = cpu + fg x (t_block + B x t_byte) + bg x t_bg, where fg are the blocks
the operation reads itself, B the design's block size in bytes and bg the
flush/merge blocks charged to each put. t_block and t_byte (a block read
served by the page cache: a fixed part, and copying/checksumming/searching its
bytes) are identified across classes from the point reads (get, empty_get,
rmw: one CPU intercept per operation, shared slopes; the classes' blocks are
0.9, 4 and 32 KiB), t_bg likewise from the blind writes; each (class, op)'s CPU time is
then what remains of its measured time. The model charges the blocks to the
VM's device and the CPU time to its cores, so in-memory operations are never
free.

On a 2-core machine only eta = 1, 2 can be measured: phi is identified from
one speed-up per run, and a VM with more cores extrapolates along Eq. 2 with
the same phi (Amdahl's law is exactly that extrapolation). The table records
the machine and the date.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models import cpu_count
from cost_models.cpu import PHI_TABLE, block_time
from measure.engine import TEMPLATE, build, run_scratch, scan_capped_ops, workload_json
from measure.grid import KEY, VALUE, designs, mix_spec, shipped_spec
from measure.validate import measured
from render.config import to_toml
from specs.errors import InputError
from specs.io import finite, read_rows, require, write_records, write_rows, write_text
from specs.vocab import DESIGN_CLASSES, OPERATIONS


def range_ops(ops: int, records: int) -> int:
    """Scans per range run: a tenth of `ops`, at least 1,000, within the hash log's scan budget."""
    return scan_capped_ops(ops // 10, records, 1.0)


#: One design per class: the paper's three baselines and the base hybrid.
CLASS_DESIGNS = {"lsm": "rocksdb", "btree": "wiredtiger", "lsh": "faster", "hybrid": "hybrid-base"}


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu} ({os.cpu_count()} CPUs), {platform.system()} {platform.release()}"


@dataclass
class Sample:
    cls: str
    op: str
    records: int
    threads: int
    throughput: float
    #: blocks the operation read itself, per operation
    fg_blocks: float
    #: flush and merge blocks (and WAL pages) charged per put
    bg_blocks: float

    def check(self) -> None:
        """Values a measurement gives (read_rows calls this on every row of a calibration.parquet)."""
        require(self.cls in DESIGN_CLASSES, f"unknown design class {self.cls!r}")
        require(self.op in OPERATIONS, f"unknown operation {self.op!r}")
        require(self.records >= 1 and self.threads >= 1, "records and threads must be positive")
        require(finite(self.throughput) and self.throughput > 0, f"throughput {self.throughput} is not positive")
        require(finite(self.fg_blocks) and finite(self.bg_blocks), "block counts must be finite and non-negative")


def measure(
    sizes: tuple[int, ...], ops: int, threads: tuple[int, ...], progress: Callable[[int, int, str], None] | None = None
) -> list[Sample]:
    build(TEMPLATE)
    out: list[Sample] = []
    total = len(CLASS_DESIGNS) * len(OPERATIONS) * len(sizes) * len(threads)
    done = 0
    for n in sizes:
        grid = designs(n, quick=True)
        for cls, dname in CLASS_DESIGNS.items():
            secs = grid[dname]
            for op in OPERATIONS:
                spec = mix_spec({op: 1.0}, name=op)
                for th in threads:
                    text = to_toml({**secs, "algorithms": {**secs["algorithms"], "threads": th}})
                    wl = workload_json(spec, n, range_ops(ops, n) if op == "range" else ops, th)
                    rep = run_scratch(text, wl, f"calibrate-{done}")
                    per = rep["per_op"].get(op, {})
                    fg = per.get("blocks_read", 0) / max(per.get("count", 0), 1)
                    bg = measured(rep).get(op, fg) - fg
                    out.append(Sample(cls, op, n, th, float(rep["run"]["throughput_ops"]), fg, bg))
                    done += 1
                    if progress:
                        progress(done, total, f"{cls} {op} {n:,} records, {th} threads")
    return out


def _least_squares(
    samples: list[Sample], ops: tuple[str, ...], regressors: list[Callable[[Sample], float]]
) -> list[float]:
    """Seconds per unit of each regressor: one intercept per operation, slopes shared by all classes.

    A slope the data would make negative is dropped and the rest refitted (time never falls with I/O).
    """
    rows = [s for s in samples if s.op in ops]
    if not rows:
        return [0.0] * len(regressors)
    keep = list(range(len(regressors)))
    while keep:
        A = np.zeros((len(rows), len(ops) + len(keep)))
        y = np.zeros(len(rows))
        for i, s in enumerate(rows):
            A[i, ops.index(s.op)] = 1.0
            for j, r in enumerate(keep):
                A[i, len(ops) + j] = regressors[r](s)
            y[i] = 1.0 / s.throughput
        sol, *_ = np.linalg.lstsq(A, y, rcond=None)
        slopes = sol[len(ops) :]
        if (slopes >= 0).all():
            out = [0.0] * len(regressors)
            for j, r in enumerate(keep):
                out[r] = float(slopes[j])
            return out
        keep.pop(int(np.argmin(slopes)))
    return [0.0] * len(regressors)


@lru_cache(maxsize=8)
def class_block_bytes(records: int) -> dict[str, float]:
    """Block size in bytes of each class's calibration design at ``records`` keys."""
    grid = designs(records, quick=True)
    return {cls: float(grid[d]["layout"]["block_entries"] * (KEY + VALUE)) for cls, d in CLASS_DESIGNS.items()}


def fit(samples: list[Sample], cores: int | None = None) -> dict[str, Any]:
    """phi per (class, op) from the speed-ups (threads <= cores); the per-block
    times and each (class, op)'s CPU time from the single-thread runs."""
    cores = cpu_count() if cores is None else cores
    single = [s for s in samples if s.threads == 1]

    def nbytes(s: Sample) -> float:
        return class_block_bytes(s.records)[s.cls]

    # Reads: a fixed time per block plus a time per byte of block (the designs'
    # blocks range from ~1 KiB to 32 KiB; one time per block fits neither end).
    t_block, t_byte = _least_squares(
        single, ("get", "empty_get", "rmw"), [lambda s: s.fg_blocks, lambda s: s.fg_blocks * nbytes(s)]
    )
    t_block = max(t_block, 1e-8)
    (t_bg,) = _least_squares(single, ("insert", "update"), [lambda s: s.bg_blocks])
    per_entry = float(yaml.safe_load(PHI_TABLE.read_text()).get("range_per_entry_seconds", 1.0e-7))
    left: dict[tuple[str, str], list[float]] = {}
    for s in single:
        scan = 20.0 if s.op == "range" else 0.0
        fg_time = s.fg_blocks * float(block_time(nbytes(s), t_block, t_byte))
        rest = 1.0 / s.throughput - fg_time - s.bg_blocks * t_bg - scan * per_entry
        left.setdefault((s.cls, s.op), []).append(rest)
    #: floor: no operation costs less than 0.1 us of CPU
    cpu = {k: max(float(np.mean(v)), 1e-7) for k, v in left.items()}
    phis: dict[tuple[str, str], list[float]] = {}
    by = {(s.cls, s.op, s.records, s.threads): s for s in samples}
    for s in samples:
        if s.threads == 1 or s.threads > cores:
            continue
        base = by.get((s.cls, s.op, s.records, 1))
        if base is None or base.throughput <= 0:
            continue
        g = s.throughput / base.throughput
        phi = (1 - 1 / g) / (1 - 1 / s.threads) if g > 0 else 0.0
        phis.setdefault((s.cls, s.op), []).append(float(np.clip(phi, 0.0, 1.0)))
    return {
        "t_block": t_block,
        "t_block_byte": t_byte,
        "t_bg": t_bg,
        "cpu": cpu,
        "phi": {k: float(np.mean(v)) for k, v in phis.items()},
        "phi_samples": {f"{k[0]}/{k[1]}": v for k, v in phis.items()},
    }


def write_table(result: dict[str, Any], samples: list[Sample], path: Path = PHI_TABLE) -> Path:
    """Rewrite data/phi.yaml with the learned values (and how they were obtained)."""
    old = yaml.safe_load(path.read_text())
    classes: dict[str, Any] = {}
    for cls in CLASS_DESIGNS:
        phi = {str(op): round(result["phi"].get((cls, op), old["classes"][cls]["phi"][op]), 4) for op in OPERATIONS}
        cpu = {
            str(op): float(f"{result['cpu'].get((cls, op), old['classes'][cls]['cpu_seconds'][op]):.4g}")
            for op in OPERATIONS
        }
        classes[cls] = {"phi": phi, "cpu_seconds": cpu}
    sizes = sorted({s.records for s in samples})
    threads = sorted({s.threads for s in samples})
    doc = {
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "method": (
            f"cosine calibrate: the Rust engine's class presets (rocksdb, wiredtiger, faster, hybrid-base) "
            f"on single-operation workloads, {sizes} records, threads {threads}; phi from Eq. 2 on each "
            f"speed-up with threads <= cores, averaged (Algorithm 1); per-block times by least squares "
            f"across classes (time = cpu + foreground blocks x (t_block + block bytes x t_byte) + merge "
            f"blocks x t_bg), CPU seconds "
            f"per (class, op) the rest of the single-thread time"
        ),
        "local_block_seconds": float(f"{result['t_block']:.4g}"),
        "local_block_seconds_per_byte": float(f"{result.get('t_block_byte', 0.0):.4g}"),
        "local_background_block_seconds": float(f"{result['t_bg']:.4g}"),
        "classes": classes,
        "range_per_entry_seconds": old.get("range_per_entry_seconds", 1.0e-7),
    }
    header = (
        "# Amdahl parallel fraction phi and single-thread CPU time per operation, per design class.\n"
        "# Written by `cosine calibrate` (measure/calibrate.py); the solver reads it through cost_models/cpu.py.\n"
    )
    write_text(path, header + yaml.safe_dump(doc, sort_keys=False))
    from cost_models.cpu import phi_table

    phi_table.cache_clear()
    return path


def fig4b(threads: tuple[int, ...], records: int, ops: int, result: dict[str, Any]) -> list[dict[str, Any]]:
    """Paper Fig. 4B: YCSB A with 25% each of lookups, inserts, blind updates and
    rmws, across thread counts: the model's throughput vs the engine's.

    The prediction is Eq. 2-3 with the learned table: per operation, the
    model's blocks (foreground reads at t_block, merge blocks at t_bg) plus the
    learned CPU time, sped up by Amdahl's law over min(threads, cores) — more
    threads than cores cannot run at once.
    """
    from cost_models.engine_model import predict
    from cost_models.symbolic import compiled

    spec = shipped_spec("mixed_25")
    mix = spec.workload.operations
    table = yaml.safe_load(PHI_TABLE.read_text())["classes"]
    cores = cpu_count()
    grid = designs(records, quick=True)
    rows = []
    for cls, dname in CLASS_DESIGNS.items():
        secs = grid[dname]
        phi = sum(w * result["phi"].get((cls, op), table[cls]["phi"][op]) for op, w in mix.items())
        for th in threads:
            text = to_toml({**secs, "algorithms": {**secs["algorithms"], "threads": th}})
            wl = workload_json(spec, records, ops, th)
            rep = run_scratch(text, wl, f"fig4b-{cls}-{th}")
            io = predict(secs, wl, shape=rep["load"]["shape"], end_shape=rep.get("stats"))
            time1 = 0.0
            for op, w in mix.items():
                if w <= 0:
                    continue
                blocks = float(getattr(io, op)[0])
                fg = float(io.get[0]) if op == "rmw" else (0.0 if op in ("insert", "update") else blocks)
                cpu = result["cpu"].get((cls, op), table[cls]["cpu_seconds"][op])
                t_fg = float(block_time(class_block_bytes(records)[cls], result["t_block"], result["t_block_byte"]))
                time1 += w * (fg * t_fg + (blocks - fg) * result["t_bg"] + cpu)
            x = float(compiled()["amdahl"](phi, min(th, cores))) / time1
            meas = float(rep["run"]["throughput_ops"])
            rows.append(
                {
                    "class": cls,
                    "design": dname,
                    "threads": th,
                    "predicted_ops": x,
                    "measured_ops": meas,
                    "accuracy": max(0.0, 1 - abs(x - meas) / meas),
                    "p99_us": rep["run"]["latency_us"]["p99"],
                }
            )
    return rows


#: (data sizes, operations per run): the full calibration, and --quick.
DEFAULT_PLAN = ((100_000, 500_000), 200_000)
QUICK_PLAN = ((20_000, 80_000), 30_000)


def thread_counts() -> tuple[int, ...]:
    """1 .. the machine's cores (at least 2: one speed-up per run identifies phi)."""
    return tuple(range(1, max(2, cpu_count()) + 1))


@dataclass
class Calibration:
    """What one `cosine calibrate` measured and learned."""

    samples: list[Sample]
    result: dict[str, Any]
    fig4b: list[dict[str, Any]]


def load_samples(path: Path) -> list[Sample]:
    """A calibration.parquet written earlier (to refit without measuring)."""
    samples = read_rows(path, Sample, "calibration.parquet")
    if not samples:
        raise InputError(f"--samples {path}: the calibration has no samples")
    return samples


def calibrate(
    quick: bool, samples_from: Path | None = None, progress: Callable[[int, int, str], None] | None = None
) -> Calibration:
    """Measure (or reload) the samples, fit phi and CPU times, and run Fig. 4B with the fit."""
    plan_sizes, ops = QUICK_PLAN if quick else DEFAULT_PLAN
    sizes: tuple[int, ...] = plan_sizes
    threads = thread_counts()
    if samples_from is not None:
        samples = load_samples(samples_from)
        sizes = tuple(sorted({s.records for s in samples}))
    else:
        samples = measure(sizes, ops, threads, progress=progress)
    res = fit(samples)
    if progress:
        progress(0, 1, "Fig. 4B: mixed workload across threads")
    rows = fig4b(tuple(sorted({1, 2, 4} | set(threads))), sizes[-1], ops, res)
    return Calibration(samples, res, rows)


def write(cal: Calibration, out: Path) -> list[Path]:
    """calibration.parquet (the samples) and fig4b.parquet."""
    out.mkdir(parents=True, exist_ok=True)
    return [
        write_rows(out / "calibration.parquet", cal.samples, Sample),
        write_records(out / "fig4b.parquet", cal.fig4b),
    ]
