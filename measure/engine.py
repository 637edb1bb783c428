"""Build and drive the Rust engine's `cosine-bench` binary from Python.

Used by `cosine bench` (measure.bench), `cosine validate` and `cosine calibrate`:
write a workload.json from a spec (scaled to this machine), scale the design's
memory budgets to the records actually loaded, run the driver, parse its JSON.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from cost_models import REPO_ROOT
from cost_models.transient import RunMerges
from render.config import to_toml
from specs.errors import InputError, check_range
from specs.limits import (
    MAX_BLOOM_BITS,
    MAX_BUFFER_BYTES,
    MAX_ENTRIES,
    MAX_LEVELS,
    MAX_SIZE_RATIO,
    MIN_SIZE_RATIO,
)
from specs.limits import MAX_THREADS as ENGINE_MAX_THREADS
from specs.schema import MAX_KEY_BYTES, Spec, Workload
from specs.vocab import Compaction, DesignClass, DeviceKind, EnginePeer, Operation, RunStrategy, WalSync

TEMPLATE = REPO_ROOT / "engine-template"
#: The peers' driver (RocksDB, fjall through cosine-bench's workload code): built by
#: bench/engine_peers_setup.sh, never by a test or a command.
PEERS_BINARY = REPO_ROOT / "bench" / "peers" / "target" / "release" / "cosine-peers"
PEERS_SETUP = "bench/engine_peers_setup.sh"
#: Records `cosine bench` loads by default (the spec's, up to this), and the most it accepts.
DEFAULT_RECORDS = 1_000_000
MAX_RECORDS = 100_000_000
MAX_OPERATIONS = 1_000_000_000
#: Most driver threads `cosine bench` starts (the driver spawns one OS thread each, and
#: threads beyond the cores only contend: 256 is 128x this project's 2-core machines).
MAX_THREADS = 256
#: Environment variable: run cosine-bench at this nice level (e.g. -15 as root, so a calibration's
#: speed-ups on a machine other programs load are not those programs' preemptions).
NICE_ENV = "COSINE_BENCH_NICE"


#: How the engine reports a configuration it refuses (cosine-core ``Error::Config``'s Display).
ENGINE_CONFIG_ERROR = "invalid configuration: "


def config_error(text: str) -> str:
    """The engine's configuration error on one line: a TOML parse error spans several (where, the
    source line under a caret, what was wrong), joined here without the caret's drawing."""
    parts = []
    for line in text.strip().splitlines():
        gutter = re.match(r"\s*\d*\s*\|", line)  # the source excerpt's "13 | " margin
        kept = (line[gutter.end() :] if gutter else line).strip()
        if kept and set(kept) != {"^"}:
            parts.append(kept)
    return ": ".join(parts)


#: Most bytes the writes of one calibration point append to their store's WAL (a fresh store each
#: point: measure.served_calibration's SETs, measure.calibrate.wal's updates). The
#: memtable holds every key, so nothing flushes and the WAL only grows: past a few hundred MiB on
#: tmpfs this host's SETs cost 2-4x more CPU (8.6 us at 0.1-1.3 GB of WAL, 13.7 us at 1.3-2.6 GB,
#: against 3.5-4.5 us on a fresh store: 4 KiB values at depth 64, the kernel's copy into new page
#: cache pages, `copy_folio_from_iter_atomic`, 45 % of perf's samples; docs/journal/s43-s51.md
#: §31), which a server whose memtable flushes, and whose WAL is then dropped, never pays.
WAL_BYTES_PER_POINT = 64 << 20


@dataclass(frozen=True)
class _Number:
    """One engine.toml number the model reads: required (no default the model could assume),
    a TOML integer (the engine's usize/u64) or any number, and its range."""

    required: bool
    integer: bool
    lo: float
    hi: float = math.inf
    lo_open: bool = False


#: The engine.toml numbers the model reads (cost_models.engine_model, render.config.config_device,
#: :func:`scaled_config`), by section. The ranges are the engine's (cosine-config
#: ``Config::validate``), or the design's bounds (specs.limits) where the engine has none. The
#: engine gives every key a default; the model predicts from the file and assumes none of them.
CONFIG_NUMBERS: dict[str, dict[str, _Number]] = {
    "layout": {
        "key_bytes": _Number(True, True, 1, MAX_KEY_BYTES),
        "value_bytes": _Number(True, True, 0, 1 << 30),
        "block_entries": _Number(True, True, 1, 1 << 16),
        "size_ratio": _Number(True, False, MIN_SIZE_RATIO, MAX_SIZE_RATIO),
        "runs_per_hot_level": _Number(True, True, 1, 1 << 16),
        "runs_per_cold_level": _Number(True, True, 1, 1 << 16),
        "buffer_bytes": _Number(True, True, 1, int(MAX_BUFFER_BYTES)),
        "hot_levels": _Number(False, True, 0, MAX_LEVELS),
        "block_cache_bytes": _Number(False, True, 0, int(MAX_BUFFER_BYTES)),
    },
    "algorithms": {
        "threads": _Number(False, True, 1, ENGINE_MAX_THREADS),
        "merge_threshold": _Number(False, False, 0.0, 1.0, lo_open=True),
        "full_compaction_levels": _Number(False, True, 0),
        "file_entries": _Number(True, True, 1, MAX_ENTRIES),
    },
}
#: A volume's numbers (``[device] kind = "volume"``): its IOPS, MiB/s and read latency.
DEVICE_NUMBERS: dict[str, _Number] = {
    "iops": _Number(True, False, 1.0, 1e8),
    "throughput_mib_s": _Number(False, False, 0.01, 1e6),
    "read_latency_us": _Number(False, False, 0.0, 1e6),
}
#: The engine.toml choices the model reads: (section, key) -> (required, the choices).
CONFIG_CHOICES: dict[tuple[str, str], tuple[bool, type[StrEnum]]] = {
    ("design", "class"): (True, DesignClass),
    ("algorithms", "compaction"): (False, Compaction),
    ("algorithms", "run_strategy"): (False, RunStrategy),
    ("durability", "wal_sync"): (False, WalSync),
    ("device", "kind"): (False, DeviceKind),
}
#: The engine.toml lists of bits the model reads, each entry in [0, 64] (the engine's range).
CONFIG_BITS = (("layout", "bloom_bits_per_key"), ("range_filter", "bits_per_height"))
#: Most heights of the range filter (cosine-filter ``MAX_HEIGHTS``).
MAX_RANGE_HEIGHTS = 64


def check_config(cfg: dict[str, Any], where: Path | str) -> None:
    """Refuse an engine.toml (parsed) whose fields the model reads are missing, of the wrong type or
    out of the engine's range, in one line naming ``where`` (the file) and the field: before a build
    and a run whose prediction would then fail (KeyError, TypeError) or be of a design the engine
    refuses."""
    sections = ("design", "layout", "algorithms", "durability", "range_filter", "device")
    for sec in sections:
        if sec in cfg and not isinstance(cfg[sec], dict):
            raise InputError(f"{where}: {sec} must be a [{sec}] table, got {type(cfg[sec]).__name__} {cfg[sec]!r}")
    for (sec, key), (required, kind) in CONFIG_CHOICES.items():
        body = cfg.get(sec, {})
        if key not in body:
            if required:
                raise InputError(f"{where}: {sec}.{key}: required field is missing")
            continue
        v = body[key]
        if not isinstance(v, str) or v not in set(kind):
            raise InputError(f"{where}: {sec}.{key}: {v!r} is not one of {', '.join(kind)}")
    for sec, numbers in CONFIG_NUMBERS.items():
        for key, num in numbers.items():
            _check_number(where, sec, cfg.get(sec, {}), key, num)
    lay, alg = cfg["layout"], cfg["algorithms"]
    entry = lay["key_bytes"] + lay["value_bytes"]
    if lay["buffer_bytes"] < entry:
        raise InputError(f"{where}: layout.buffer_bytes must hold an entry of {entry} bytes, got {lay['buffer_bytes']}")
    if alg["file_entries"] < lay["block_entries"]:
        raise InputError(
            f"{where}: algorithms.file_entries must be at least layout.block_entries ({lay['block_entries']})"
        )
    for sec, key in CONFIG_BITS:
        bits = cfg.get(sec, {}).get(key, [])
        if not isinstance(bits, list):
            raise InputError(f"{where}: {sec}.{key} must be a list of bits per key, got {bits!r}")
        if key == "bits_per_height" and len(bits) > MAX_RANGE_HEIGHTS:
            raise InputError(f"{where}: {sec}.{key} has {len(bits)} heights, at most {MAX_RANGE_HEIGHTS}")
        for i, b in enumerate(bits):
            check_range(f"{where}: {sec}.{key}[{i}]", b, 0.0, MAX_BLOOM_BITS)
    dev = cfg.get("device", {})
    if dev.get("kind", DeviceKind.LOCAL) == DeviceKind.VOLUME:
        for key, num in DEVICE_NUMBERS.items():
            _check_number(where, "device", dev, key, num)


def _check_number(where: Path | str, sec: str, body: dict[str, Any], key: str, num: _Number) -> None:
    name = f"{where}: {sec}.{key}"
    if key not in body:
        if num.required:
            raise InputError(f"{name}: required field is missing")
        return
    v = body[key]
    if num.integer and isinstance(v, float):
        raise InputError(f"{name} must be a TOML integer (no decimal point), got {v!r}")
    check_range(name, v, num.lo, num.hi, lo_open=num.lo_open, integer=num.integer)


def config_text(secs: dict[str, Any], threads: int, **layout: Any) -> str:
    """engine.toml of the sections ``secs`` with ``threads`` client threads and the ``layout``
    entries replaced (e.g. ``block_cache_bytes``)."""
    return to_toml(
        {**secs, "layout": {**secs["layout"], **layout}, "algorithms": {**secs["algorithms"], "threads": threads}}
    )


def binary(workspace: Path, name: str = "cosine-bench") -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", workspace / "target"))
    return target / "release" / name


def build(workspace: Path, name: str = "cosine-bench", quiet: bool = True, *, user: bool = False) -> Path:
    """`cargo build --release --bin NAME` in the workspace (a no-op when fresh). ``user``: the
    workspace is one the user named (``--engine``), so a failed build is bad input (InputError,
    naming it and cargo's first error), not the template's own failure (RuntimeError)."""
    if not (workspace / "Cargo.toml").is_file():
        raise InputError(f"{workspace}: not an engine workspace (no Cargo.toml); run `cosine render` first")
    if shutil.which("cargo") is None:
        raise InputError("cargo is not installed; the engine needs a Rust toolchain")
    cmd = ["cargo", "build", "--release", "--bin", name]
    if quiet:
        cmd.append("--quiet")
    res = subprocess.run(cmd, cwd=workspace, capture_output=True, text=True)
    if res.returncode != 0:
        if user:
            raise InputError(f"--engine {workspace}: cargo build failed: {cargo_error(res.stderr)}")
        last = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"cargo build failed in {workspace}: {last}")
    return binary(workspace, name)


def cargo_error(stderr: str) -> str:
    """Cargo's first error on one line, with the place it names (``error: ... --> Cargo.toml:1:9``);
    the last line when no line is an error (a caret under a source excerpt says nothing alone)."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("error"):
            at = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith("-->") else ""
            return f"{ln} {at}".strip()
    return lines[-1] if lines else "(no output)"


#: Cap on scans x records in one run where a scan costs O(records): a hash log
#: selects a range among all its keys (no order in a hash index), so 20,000
#: scans of a 500k-key log take > 15 min on this machine; 10^9 keeps a run to
#: about a minute and still times thousands of scans.
RANGE_ENTRY_BUDGET = 1_000_000_000


def scan_capped_ops(operations: int, records: int, range_share: float) -> int:
    """Operations for a hash-log run: at most RANGE_ENTRY_BUDGET keys visited by scans, at least 1,000 ops."""
    if range_share <= 0:
        return operations
    return max(1000, min(operations, int(RANGE_ENTRY_BUDGET / (records * range_share))))


def scratch_root() -> Path:
    """Where engine runs keep their data: $COSINE_VALIDATE_DIR, else tmpfs (/dev/shm) when there is one."""
    env = os.environ.get("COSINE_VALIDATE_DIR")
    if env:
        return Path(env)
    return Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def run_scratch(config_text: str, wl: dict[str, Any], tag: str, workspace: Path = TEMPLATE) -> dict[str, Any]:
    """One run of the template engine on a fresh data directory under :func:`scratch_root`, removed afterwards."""
    db = scratch_root() / f"cosine-{tag}-{os.getpid()}"
    try:
        return run(workspace, config_text, wl, data_dir=db)
    finally:
        shutil.rmtree(db, ignore_errors=True)


def as_ran(wl: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """A workload.json as a cosine-bench run performed it: a warm-up aligned to the merge cycle
    (``warmup_phase_aligned``) ran a count only the report knows, and the model's key count
    after the warm-up (its inserts) depends on it."""
    warm = report.get("warmup")
    if not isinstance(warm, dict) or "operations" not in warm:
        return wl
    return {**wl, "warmup_operations": int(warm["operations"]), "warmup_phase_aligned": False}


def short_of_depth(report: dict[str, Any]) -> bool:
    """Whether a cosine-bench run's warm-up was asked for a depth (``warmup_depth``) and did not
    reach it: the run then started a level shallower than the model's steady state (a tiered last
    level the model's room rule takes a level too deep, docs/journal/s31-s42.md §37.4)."""
    warm = report.get("warmup")
    depth = warm.get("depth") if isinstance(warm, dict) else None
    return isinstance(depth, dict) and int(depth.get("reached", 0)) < int(depth.get("target", 0))


def run_merges(report: dict[str, Any]) -> RunMerges | None:
    """The flushes and merges into the deepest level a cosine-bench run completed in its measured
    phase (not in the settle after it: a merge the run started late is mostly paid after it, at a
    volume's rate a deep merge can outlast the run), with the engine's spacing of deep merges when
    the warm-up searched for two (``warmup.deep_merges_at``); None where the report does not count
    them (another engine, or an older build)."""
    run = report.get("run", {})
    n = run.get("deep_merges")
    if n is None:
        return None
    at = (report.get("warmup") or {}).get("deep_merges_at")
    spacing = float(at[1]) - float(at[0]) if isinstance(at, list) and len(at) == 2 else None
    flushes = run.get("flushes")
    return RunMerges(int(n), spacing, None if flushes is None else int(flushes))


def buffered_share(report: dict[str, Any]) -> float | None:
    """Share of a cosine-bench run's lookups (gets, rmw reads) a memtable answered (None: the run
    made none)."""
    lookups = sum(report["per_op"].get(op, {}).get("count", 0) for op in (Operation.GET, Operation.RMW))
    return report.get("background", {}).get("buffer_hits", 0) / lookups if lookups else None


def runqueue_share(report: dict[str, Any], threads: int) -> float:
    """Share of a cosine-bench run's client-thread time spent waiting for a CPU another program held."""
    waited = float((report.get("cpu") or {}).get("foreground_runqueue_seconds") or 0.0)
    return waited / max(float(report["run"]["seconds"]) * threads, 1e-12)


def workload_json(spec: Spec, records: int, operations: int, threads: int, seed: int = 42) -> dict[str, Any]:
    """The contract's workload.json for a spec scaled to ``records``."""
    return workload_dict(spec.workload, records, operations, threads, seed)


def workload_dict(wl: Workload, records: int, operations: int, threads: int, seed: int = 42) -> dict[str, Any]:
    """The contract's workload.json for a workload scaled to ``records``."""
    # a scan reads a number of entries (YCSB's scan length), whatever the data size
    scan = max(1.0, min(float(records), round(wl.scan_length))) if wl.operations.get("range", 0) > 0 else 1.0
    return {
        "records": int(records),
        "operations": int(operations),
        "key_bytes": wl.key_bytes,
        "value_bytes": wl.value_bytes,
        "mix": dict(wl.operations),
        "scan_length": int(scan),
        "empty_range_width": int(wl.empty_range_width),
        "compressibility": float(wl.compressibility),
        "distribution": {"get": wl.get_distribution.as_dict(), "put": wl.put_distribution.as_dict()},
        "threads": int(threads),
        "seed": int(seed),
    }


def scaled_config(config_text: str, scale: float) -> str:
    """Scale buffer and block-cache bytes of an engine.toml by ``scale``."""
    import tomllib

    from render.config import to_toml

    try:
        cfg = tomllib.loads(config_text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"engine.toml is not valid TOML: {exc}") from None
    lay = cfg.get("layout", {})
    entry = int(lay.get("key_bytes", 16)) + int(lay.get("value_bytes", 100))
    if "buffer_bytes" in lay:
        lay["buffer_bytes"] = max(64 * entry, int(lay["buffer_bytes"] * scale))
    if "block_cache_bytes" in lay:
        lay["block_cache_bytes"] = int(lay["block_cache_bytes"] * scale)
    return to_toml(cfg, f"scaled by {scale:.4g} from the rendered design (records / keys per node)")


def run(
    workspace: Path,
    config_text: str,
    wl: dict[str, Any],
    *,
    engine: EnginePeer = EnginePeer.COSINE,
    data_dir: Path | None = None,
    timeout: float | None = None,
    exe: Path | None = None,
) -> dict[str, Any]:
    """Run cosine-bench once (the workspace's, or the binary ``exe``); returns its JSON report."""
    if exe is None:
        exe = binary(workspace)
        if not exe.is_file():
            exe = build(workspace)
    with tempfile.TemporaryDirectory(prefix="cosine-bench-") as tmp:
        t = Path(tmp)
        (t / "engine.toml").write_text(config_text)
        (t / "workload.json").write_text(json.dumps(wl))
        db = data_dir or t / "db"
        nice = os.environ.get(NICE_ENV)
        cmd = (["nice", "-n", str(int(nice))] if nice else []) + [
            str(exe),
            "--config",
            str(t / "engine.toml"),
            "--workload",
            str(t / "workload.json"),
            "--dir",
            str(db),
            "--json",
            "--engine",
            engine,
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        if ENGINE_CONFIG_ERROR in res.stderr:  # the design is bad input, not an engine failure
            detail = config_error(res.stderr.split(ENGINE_CONFIG_ERROR, 1)[1])
            raise InputError(f"the engine refuses the design: {detail.replace(str(t / 'engine.toml'), 'engine.toml')}")
        last = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"cosine-bench failed: {last}")
    try:
        return json.loads(res.stdout)
    except json.JSONDecodeError:
        raise RuntimeError("cosine-bench printed no JSON report") from None


#: The volume's I/Os per operation a device-mode run reports (cosine-bench ``device``): all, foreground
#: reads (an operation's own), background reads (flush and merge inputs), writes (flushes, merges, WAL pages).
DEVICE_IO_KINDS = ("device_ios", "device_foreground_reads", "device_background_reads", "device_writes")


def device_ios(rep: dict[str, Any]) -> dict[str, float]:
    """:data:`DEVICE_IO_KINDS` per operation of a cosine-bench report (zeros on the local device)."""
    d = rep.get("device") or {}
    ops = max(1, int(rep["operations"]))
    keys = ("ios", "foreground_read_ios", "background_read_ios", "write_ios")
    return {k: float(d.get(src, 0)) / ops for k, src in zip(DEVICE_IO_KINDS, keys, strict=True)}
