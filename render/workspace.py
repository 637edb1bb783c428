"""`cosine render`: a solution (or a preset) -> a Rust engine workspace.

Copies ``engine-template/`` (without build output) and writes ``engine.toml``
(:mod:`render.config`) for the design of each VM type of the solution, plus a
README saying which design it is and how to run it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cost_models import REPO_ROOT
from cost_models.design import DesignEntry
from render.config import engine_sections, preset_design_entry, storage_device, to_toml
from solver.rundir import NodeDesign, write_solution
from specs.errors import InputError
from specs.io import check_output_dir, require, write_bytes, write_record, write_text
from specs.limits import MAX_ENTRIES
from specs.vocab import MODELLED_WAL_SYNC, PRESETS, DesignClass, WalSync

TEMPLATE = REPO_ROOT / "engine-template"
MARKER = ".cosine-render"
#: What `cosine bench` reads back from a render: the design's class and keys per node.
RENDER_META = "render.json"
#: What a file name made from a name read from a file (a VM type) may look like: no
#: separators, no "..", no leading dot (the name must stay inside --out).
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: The build cache cargo keeps in a workspace: never written by a render, left as it is.
BUILD_DIR = "target"


def safe_file_name(name: str, suffix: str) -> str:
    """``name`` (spaces as underscores) + ``suffix``, or an InputError if it could leave its directory."""
    stem = str(name).replace(" ", "_")
    if not SAFE_NAME.fullmatch(stem) or ".." in stem:
        raise InputError(f"{name!r} cannot name a file (letters, digits, '.', '_', '-' only)")
    return stem + suffix


def _no_links(out: Path) -> None:
    """Refuse an output tree with a symbolic link anywhere a render writes (a write would follow it out)."""
    if out.is_symlink():
        raise InputError(f"--out {out}: is a symbolic link; give the directory itself")
    for root, dirs, files in os.walk(out):
        here = Path(root)
        if here == out and BUILD_DIR in dirs:
            dirs.remove(BUILD_DIR)
        for name in dirs + files:
            if (here / name).is_symlink():
                raise InputError(f"--out {out}: {here / name} is a symbolic link; refusing to write through it")


def _prepare(out: Path) -> None:
    """Check ``out`` (a new or empty directory, or a previous render without symbolic links) and
    copy the template into it; every file is written atomically."""
    check_output_dir(out, "--out")
    o, t = out.resolve(), TEMPLATE.resolve()
    if o == t or t in o.parents or o in t.parents:
        raise InputError(f"--out {out}: overlaps the engine template {TEMPLATE}")
    if out.exists():
        _no_links(out)
        if any(out.iterdir()) and not (out / MARKER).is_file():
            raise InputError(f"--out {out}: not empty and not a previous render; refusing to overwrite it")
    out.mkdir(parents=True, exist_ok=True)
    for src_root, dirs, files in os.walk(TEMPLATE):
        here = Path(src_root)
        rel = here.relative_to(TEMPLATE)
        if here == TEMPLATE:
            dirs[:] = [d for d in dirs if d != BUILD_DIR and not d.startswith(".")]
            files = [f for f in files if not f.startswith(".")]
        dirs[:] = [d for d in dirs if d != BUILD_DIR]
        dst_dir = out / rel
        if dst_dir.exists() and not dst_dir.is_dir():
            raise InputError(f"--out {out}: {dst_dir} is a file where the template has a directory")
        dst_dir.mkdir(exist_ok=True)
        for f in files:
            name = "TEMPLATE.md" if here == TEMPLATE and f == "README.md" else f
            write_bytes(dst_dir / name, (here / f).read_bytes())
    write_text(out / MARKER, "rendered by cosine render; safe to overwrite with another render\n")


def render_solution(solution_path: Path, out: Path, *, wal_sync: WalSync = MODELLED_WAL_SYNC) -> list[Path]:
    """Render every VM type's design of a solution.json into a workspace."""
    from cost_models.pricing.catalog import load_catalog
    from solver.rundir import read_solution
    from specs.schema import validate

    sol = read_solution(solution_path)  # version, spec, every design entry in range, VM types of the catalog
    wl = validate(sol.spec_raw).workload
    key_bytes, value_bytes, mix = wl.key_bytes, wl.value_bytes, wl.operations
    files = [safe_file_name(d.vm_type, ".toml") for d in sol.designs]
    _prepare(out)
    cat = load_catalog(sol.pricing)
    written = []
    (out / "engines").mkdir(exist_ok=True)
    for i, (d, fname) in enumerate(zip(sol.designs, files, strict=True)):
        vcpu = cat.vm(sol.provider, d.vm_type).vcpu
        name = f"{sol.spec} on {sol.provider}:{d.vm_type} (x{d.count})"
        secs = engine_sections(
            d,
            key_bytes,
            value_bytes,
            mix,
            name,
            vcpu=vcpu,
            wal_sync=wal_sync,
            device=storage_device(sol.storage_of(d.vm_type)),
        )
        header = (
            f"Rendered by `cosine render` from {solution_path}\n{name}: {d.design_class} design, "
            f"{d.entries_per_node:.4g} keys per node\nSee docs/engine-contract.md in the Cosine repository."
        )
        text = to_toml(secs, header)
        written.append(write_text(out / "engines" / fname, text))
        if i == 0:
            written.insert(0, write_text(out / "engine.toml", text))
    write_solution(out / "solution.json", sol)  # sealed again, as `cosine solve` wrote it
    _meta(out, sol.designs[0], key_bytes, value_bytes, sol.spec)
    _readme(out, sol.spec, sol.designs)
    return written


def render_preset(
    name: str,
    out: Path,
    *,
    key_bytes: int = 16,
    value_bytes: int = 100,
    records: float = 1e6,
    memory_bytes: float = 2 * 2**30,
    wal_sync: WalSync = MODELLED_WAL_SYNC,
) -> Path:
    """Render one of the paper's baselines (rocksdb | wiredtiger | faster)."""
    if name not in PRESETS:
        raise InputError(f"--preset: unknown preset {name!r} (valid: {', '.join(PRESETS)})")
    d = preset_design_entry(name, records, key_bytes, value_bytes, memory_bytes)
    _prepare(out)
    secs = engine_sections(d, key_bytes, value_bytes, {"get": 1.0}, name, wal_sync=wal_sync)
    header = (
        f"Rendered by `cosine render --preset {name}`: the paper's {name} baseline (Table 1, Sec. 7)\n"
        f"for {records:.3g} records of {key_bytes}+{value_bytes} bytes and {memory_bytes / 2**30:.1f} GiB."
    )
    write_text(out / "engine.toml", to_toml(secs, header))
    _meta(out, d, key_bytes, value_bytes, f"preset {name}")
    _readme(out, f"preset {name}", [d])
    return out / "engine.toml"


@dataclass
class RenderMeta:
    """render.json: what `cosine bench` needs to scale a rendered design to the records it loads."""

    source: str
    design_class: DesignClass = field(metadata={"column": "class"})
    entries_per_node: float | None = None  # None: a hand-written workspace
    key_bytes: int = 0
    value_bytes: int = 0

    def check(self) -> None:
        n = self.entries_per_node
        require(n is None or 0 < n <= MAX_ENTRIES, f"entries_per_node {n} outside (0, {MAX_ENTRIES:.0e}]")


def _meta(out: Path, d: DesignEntry, key_bytes: int, value_bytes: int, source: str) -> None:
    """render.json (:class:`RenderMeta`)."""
    write_record(out / RENDER_META, RenderMeta(source, d.design_class, d.entries_per_node, key_bytes, value_bytes))


def _readme(out: Path, title: str, designs: Sequence[DesignEntry]) -> None:
    lines = [f"# Rendered Cosine engine: {title}", ""]
    for d in designs:
        layout = (
            "log-structured hash table"
            if d.lsh or d.design_class == DesignClass.LSH
            else f"T={d.T}, K={d.K}, Z={d.Z}, {d.L} levels of which {d.Y} cold"
        )
        where = f"`{d.vm_type}` x{d.count}" if isinstance(d, NodeDesign) else "this machine"
        lines.append(
            f"* {where}: **{d.design_class}** — {layout}; buffer "
            f"{d.buffer_bytes / 2**20:,.0f} MiB; Bloom bits per level "
            f"{', '.join(f'{b:.1f}' for b in d.bloom_bits_per_level or [0.0])}; "
            f"{d.entries_per_node:,.0f} keys per node."
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
    write_text(out / "README.md", "\n".join(lines) + "\n")
