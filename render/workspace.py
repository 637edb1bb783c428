"""`cosine render`: a solution (or a preset) -> a Rust engine workspace.

Copies ``engine-template/`` (without build output) and writes ``engine.toml``
(:mod:`render.config`) for the design of each VM type of the solution, plus a
README saying which design it is and how to run it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from cost_models import REPO_ROOT
from cost_models.design import PRESETS
from cost_models.pricing import load_catalog
from render.config import engine_sections, preset_design_entry, to_toml
from specs.errors import InputError

TEMPLATE = REPO_ROOT / "engine-template"
MARKER = ".cosine-render"


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
