"""`cosine render`: a solution (or a preset) -> a Rust engine workspace.

Copies ``engine-template/`` (without build output) and writes ``engine.toml``
— the contract of docs/engine-contract.md — for the design of each VM type of
the solution, plus a README saying which design it is and how to run it.
Algorithm 3 of the paper maps the layout to the algorithmic primitives; the
thread count is where Eq. 2's speed-up stops improving by more than 1%.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from cost_models import REPO_ROOT
from cost_models.design import Design, DesignBatch, preset
from cost_models.layout import CLASS_CODES, derive
from solver.errors import InputError

TEMPLATE = REPO_ROOT / "engine-template"
MARKER = ".cosine-render"
#: Speed-up gain below which another thread is not worth it (Algorithm 3: "the
#: point where Equation 2 converges").
THREAD_GAIN = 0.01
#: Entries per SST file: the engine's unit of partial compaction (a 64 Ki-entry
#: file is 6.5 MiB at 100-byte entries).
FILE_ENTRIES = 65536


def threads_from_phi(cls: str, mix: dict[str, float], vcpu: int) -> int:
    """Smallest eta whose Amdahl speed-up is within THREAD_GAIN of all cores'."""
    import numpy as np

    from cost_models.cpu import workload_phi
    from cost_models.symbolic import compiled

    phi = float(workload_phi(np.array([CLASS_CODES[cls]]), mix)[0])
    g = compiled()["amdahl"]
    full = float(g(phi, float(vcpu)))
    for eta in range(1, vcpu + 1):
        if float(g(phi, float(eta))) >= full * (1 - THREAD_GAIN):
            return eta
    return vcpu


def algorithms(cls: str, levels: int, cold: int) -> dict[str, Any]:
    """Paper Algorithm 3 + Table 1: the algorithmic primitives of a layout class."""
    if cls == "lsm":
        return {
            "compaction": "full",
            "run_strategy": "first",
            "file_picking": "dense_fp",
            "merge_threshold": 1.0,
            "full_compaction_levels": max(1, levels),
        }
    if cls == "btree":
        return {
            "compaction": "partial",
            "run_strategy": "first",
            "file_picking": "choose_first",
            "merge_threshold": 1.0,
            "full_compaction_levels": 0,
        }
    if cls == "hybrid":  # LSM-like hot levels compacted fully, B-tree-like cold levels partially
        return {
            "compaction": "hybrid",
            "run_strategy": "fullest",
            "file_picking": "dense_fp",
            "merge_threshold": 1.0,
            "full_compaction_levels": max(1, levels - cold),
        }
    if cls == "lsh":
        from cost_models.design import model_constants

        return {
            "compaction": "partial",
            "run_strategy": "first",
            "file_picking": "oldest_flushed",
            "merge_threshold": 1.0 - model_constants()["lsh_gc_dead_fraction"],
            "full_compaction_levels": 0,
        }
    raise InputError(f"unknown design class {cls!r}")


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(float(v)) if math.isfinite(v) else "0.0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


def to_toml(sections: dict[str, dict[str, Any]], header: str = "") -> str:
    out = [f"# {line}" for line in header.splitlines()] + ([""] if header else [])
    for name, body in sections.items():
        out.append(f"[{name}]")
        out += [f"{k} = {_toml_value(v)}" for k, v in body.items()]
        out.append("")
    return "\n".join(out)


def engine_sections(
    d: dict[str, Any],
    key_bytes: int,
    value_bytes: int,
    mix: dict[str, float],
    name: str,
    vcpu: int | None = None,
    wal_sync: str = "group_commit",
    scale: float = 1.0,
) -> dict[str, dict]:
    """engine.toml sections for one design entry of solution.json (``designs[i]``).

    ``scale`` multiplies the memory budgets (buffer, cache) when the engine
    runs a smaller data set than the node the design was made for.
    """
    entry = key_bytes + value_bytes
    cls = d["class"]
    levels, cold = int(d["L"]), int(d["Y"])
    bits = [float(b) for b in d.get("bloom_bits_per_level") or [0.0]] or [0.0]
    threads = d.get("threads") or 1
    if vcpu:
        threads = threads_from_phi(cls, mix, vcpu)
    lsh = bool(d.get("lsh")) or cls == "lsh"
    T = float(d["T"])
    if lsh:  # Table 1: T = N E / M_B, one level that is never compacted (K = Z = T - 1)
        T = max(2.0, math.ceil(d.get("entries_per_node", 1e6) * entry / max(d["buffer_bytes"], 1.0)))
    return {
        "design": {"name": name, "class": cls},
        "layout": {
            "key_bytes": int(key_bytes),
            "value_bytes": int(value_bytes),
            "block_entries": max(1, int(d["block_bytes"]) // entry),
            "size_ratio": T,
            "runs_per_hot_level": int(T - 1) if lsh else int(d["K"]),
            "runs_per_cold_level": int(T - 1) if lsh else int(d["Z"]),
            "buffer_bytes": max(entry * 64, int(d["buffer_bytes"] * scale)),
            "bloom_bits_per_key": [0.0] if lsh else [round(b, 4) for b in bits],
            "hot_levels": 1 if lsh else max(0, levels - cold),
            "block_cache_bytes": int(max(0.0, d.get("cache_bytes", 0.0)) * scale),
        },
        "algorithms": {
            "filter_granularity": "file",
            **algorithms(cls, levels, cold),
            "file_entries": FILE_ENTRIES,
            "threads": int(threads),
        },
        "durability": {"wal_sync": wal_sync, "group_commit_interval_us": 1000},
    }


def preset_design_entry(
    name: str, n_keys: float, key_bytes: int, value_bytes: int, memory_bytes: float
) -> dict[str, Any]:
    """A preset as a solution.json design entry (layout derived by the model)."""
    d: Design = preset(name)
    lay = derive(DesignBatch.of([d]), n_keys, key_bytes, value_bytes, memory_bytes)
    return {
        "vm_type": "local",
        "count": 1,
        "entries_per_node": n_keys,
        "class": lay.class_name(0),
        "T": d.T,
        "K": d.K,
        "Z": d.Z,
        "L": int(lay.L[0]),
        "Y": int(lay.Y[0]),
        "lsh": d.lsh,
        "block_bytes": d.block_bytes,
        "buffer_bytes": d.buffer_bytes,
        "bloom_bits_per_key": d.bloom_bits,
        "bloom_bits_per_level": [float(b) for b, e in zip(lay.bits[0], lay.exists[0], strict=True) if e],
        "fence_bytes": float(lay.mem_fence[0]),
        "cache_bytes": float(lay.mem_cache[0]),
        "threads": 1,
    }


def _prepare(out: Path, force: bool) -> None:
    if out.exists():
        if not out.is_dir():
            raise InputError(f"--out {out}: exists and is not a directory")
        if any(out.iterdir()):
            if not (out / MARKER).exists():
                raise InputError(f"--out {out}: not empty and not a previous render; refusing to overwrite it")
            if not force:
                pass  # a previous render: refresh the template files in place, keep target/ (build cache)
    out.mkdir(parents=True, exist_ok=True)
    for item in TEMPLATE.iterdir():
        if item.name in ("target",) or item.name.startswith("."):
            continue
        dst = out / ("TEMPLATE.md" if item.name == "README.md" else item.name)
        if item.is_dir():
            shutil.copytree(item, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("target"))
        else:
            shutil.copy2(item, dst)
    (out / MARKER).write_text("rendered by cosine render; safe to overwrite with another render\n")


def render_solution(solution_path: Path, out: Path, *, wal_sync: str = "group_commit") -> list[Path]:
    """Render every VM type's design of a solution.json into a workspace."""
    if not solution_path.is_file():
        raise InputError(f"{solution_path}: no such file")
    try:
        sol = json.loads(solution_path.read_text())
        designs = sol["designs"]
        raw = sol.get("spec_raw") or {}
        wl = raw.get("workload", {})
        key_bytes, value_bytes = int(wl["key_bytes"]), int(wl["value_bytes"])
        mix = {k: float(v) for k, v in wl.get("operations", {}).items()}
        for d in designs:
            for k in ("class", "T", "K", "Z", "L", "Y", "buffer_bytes", "block_bytes", "vm_type"):
                d[k]  # noqa: B018 - presence check
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{solution_path}: not a cosine solution.json ({type(exc).__name__}: {exc})") from None
    if not designs:
        raise InputError(f"{solution_path}: the solution has no designs")
    _prepare(out, force=True)
    from cost_models.pricing import load_catalog

    cat = load_catalog(sol.get("pricing", "paper2021"))
    written = []
    (out / "engines").mkdir(exist_ok=True)
    for i, d in enumerate(designs):
        vcpu = next((v.vcpu for p in cat.vms.values() for v in p if v.name == d["vm_type"]), None)
        name = f"{sol['spec']} on {sol['provider']}:{d['vm_type']} (x{d['count']})"
        secs = engine_sections(d, key_bytes, value_bytes, mix, name, vcpu=vcpu, wal_sync=wal_sync)
        header = (
            f"Rendered by `cosine render` from {solution_path}\n{name}: {d['class']} design, "
            f"{d['entries_per_node']:.4g} keys per node\nSee docs/engine-contract.md in the Cosine repository."
        )
        text = to_toml(secs, header)
        p = out / "engines" / f"{d['vm_type'].replace(' ', '_')}.toml"
        p.write_text(text)
        written.append(p)
        if i == 0:
            (out / "engine.toml").write_text(text)
            written.insert(0, out / "engine.toml")
    shutil.copy2(solution_path, out / "solution.json")
    _meta(out, designs[0], key_bytes, value_bytes, sol["spec"])
    _readme(out, sol, designs)
    return written


def render_preset(
    name: str,
    out: Path,
    *,
    key_bytes: int = 16,
    value_bytes: int = 100,
    records: float = 1e6,
    memory_bytes: float = 2 * 2**30,
    wal_sync: str = "group_commit",
) -> Path:
    """Render one of the paper's baselines (rocksdb | wiredtiger | faster)."""
    from cost_models.design import PRESETS

    if name not in PRESETS:
        raise InputError(f"--preset: unknown preset {name!r} (valid: {', '.join(PRESETS)})")
    d = preset_design_entry(name, records, key_bytes, value_bytes, memory_bytes)
    _prepare(out, force=True)
    secs = engine_sections(d, key_bytes, value_bytes, {"get": 1.0}, name, wal_sync=wal_sync)
    header = (
        f"Rendered by `cosine render --preset {name}`: the paper's {name} baseline (Table 1, Sec. 7)\n"
        f"for {records:.3g} records of {key_bytes}+{value_bytes} bytes and {memory_bytes / 2**30:.1f} GiB."
    )
    (out / "engine.toml").write_text(to_toml(secs, header))
    _meta(out, d, key_bytes, value_bytes, f"preset {name}")
    _readme(out, {"spec": f"preset {name}", "provider": "local"}, [d])
    return out / "engine.toml"


def _meta(out: Path, d: dict[str, Any], key_bytes: int, value_bytes: int, source: str) -> None:
    """render.json: what `cosine bench` needs to scale the design to its records."""
    (out / "render.json").write_text(
        json.dumps(
            {
                "source": source,
                "class": d["class"],
                "entries_per_node": d.get("entries_per_node"),
                "key_bytes": key_bytes,
                "value_bytes": value_bytes,
            },
            indent=2,
        )
    )


def _readme(out: Path, sol: dict[str, Any], designs: list[dict[str, Any]]) -> None:
    lines = [f"# Rendered Cosine engine: {sol['spec']}", ""]
    for d in designs:
        layout = (
            "log-structured hash table"
            if d.get("lsh") or d["class"] == "lsh"
            else f"T={d['T']}, K={d['K']}, Z={d['Z']}, {d['L']} levels of which {d['Y']} cold"
        )
        lines.append(
            f"* `{d['vm_type']}` x{d.get('count', 1)}: **{d['class']}** — {layout}; buffer "
            f"{d['buffer_bytes'] / 2**20:,.0f} MiB; Bloom bits per level "
            f"{', '.join(f'{b:.1f}' for b in d.get('bloom_bits_per_level') or [0.0])}; "
            f"{d.get('entries_per_node', 0):,.0f} keys per node."
        )
    lines += [
        "",
        "`engine.toml` holds the first design; `engines/<vm type>.toml` each VM type's. The crates and",
        "their semantics are described in `TEMPLATE.md`.",
        "",
        "```sh",
        "cargo build --release",
        "cargo test --release",
        "./target/release/cosine-bench --config engine.toml --workload workloads/get_uniform_1m.json "
        "--dir /tmp/cosine-db --json",
        "```",
        "",
        "Or from the Cosine repository: `cosine bench SPEC --engine THIS_DIR` (builds if needed, scales the",
        "design's memory to the records it loads, and prints throughput, latency and block I/O per operation).",
    ]
    (out / "README.md").write_text("\n".join(lines) + "\n")
