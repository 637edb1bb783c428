"""`cosine bench`: a spec's operation mix on a rendered engine, scaled to this machine, with
the model's prediction for the same run beside the engine's report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cost_models import cpu_count
from measure.engine import (
    DEFAULT_RECORDS,
    MAX_OPERATIONS,
    MAX_RECORDS,
    MAX_THREADS,
    PEERS_BINARY,
    PEERS_SETUP,
    build,
    check_config,
    run,
    scaled_config,
    workload_json,
)
from measure.validate import model_prediction
from render.workspace import RENDER_META, RenderMeta
from specs.errors import InputError, check_range
from specs.io import read_record
from specs.schema import Spec
from specs.vocab import EnginePeer


@dataclass
class BenchResult:
    report: dict[str, Any]
    workload: dict[str, Any]
    config: str
    scale: float
    notes: list[str]
    #: what the model predicts for the same scaled configuration (None for a peer engine)
    prediction: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """`cosine bench --json`: the engine's report with the scale, the notes, the workload and the model."""
        return {
            **self.report,
            "scale": self.scale,
            "notes": self.notes,
            "workload": self.workload,
            "model": self.prediction,
        }


def _entries_per_node(path: Path) -> float | None:
    """The keys per node a rendered design was made for (render.json; None for a hand-written workspace)."""
    if not path.is_file():
        return None
    return read_record(path, RenderMeta, "a cosine render.json").entries_per_node


def bench_spec(
    spec: Spec,
    workspace: Path,
    *,
    records: int | None = None,
    operations: int | None = None,
    threads: int | None = None,
    engine: EnginePeer = EnginePeer.COSINE,
    scale_design: bool = True,
) -> BenchResult:
    """Run a spec's operation mix on a rendered engine, scaled to this machine."""
    if engine != EnginePeer.COSINE and not PEERS_BINARY.is_file():
        raise InputError(f"--peer {engine}: the peers' driver is not built; run `bash {PEERS_SETUP}` (as root) first")
    if not workspace.is_dir():
        raise InputError(f"--engine {workspace}: no such directory (run `cosine render` first)")
    cfg_path = workspace / "engine.toml"
    if not cfg_path.is_file():
        raise InputError(f"--engine {workspace}: no engine.toml; run `cosine render` first")
    per_node = _entries_per_node(workspace / RENDER_META)
    notes = []
    n = int(min(spec.workload.entries, DEFAULT_RECORDS)) if records is None else records
    check_range("--records", n, 1, MAX_RECORDS, integer=True)
    ops = n if operations is None else operations
    check_range("--ops", ops, 1, MAX_OPERATIONS, integer=True)
    if threads is not None:
        check_range("--threads", threads, 1, MAX_THREADS, integer=True)
    if n < spec.workload.entries:
        notes.append(
            f"scaled down: {n:,} of the spec's {spec.workload.entries:,} records, {ops:,} operations "
            f"(this machine: {cpu_count()} CPUs)"
        )
    import tomllib

    try:
        text = cfg_path.read_text()
        cfg = tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{cfg_path}: not valid TOML ({exc})") from None
    check_config(cfg, cfg_path)  # what the model reads, before the build and the run
    design_threads = int(cfg.get("algorithms", {}).get("threads", 1))
    th = min(design_threads, cpu_count()) if threads is None else threads
    scale = 1.0
    if scale_design and per_node is not None:
        scale = n / float(per_node)
        text = scaled_config(text, scale)
        if abs(scale - 1) > 1e-9:
            notes.append(
                f"design memory (buffer, block cache) scaled by {scale:.3g}: the design was made for "
                f"{per_node:,.0f} keys per node"
            )
    wl = workload_json(spec, n, ops, th)
    build(workspace, user=True)
    peer = engine != EnginePeer.COSINE
    report = run(workspace, text, wl, engine=engine, exe=PEERS_BINARY if peer else None)
    pred = model_prediction(text, wl, report) if engine == EnginePeer.COSINE else None
    return BenchResult(report, wl, text, scale, notes, pred)
