"""The persistent table cache: the design tables of one provider, kept between solves.

The tables (solver.tables) are most of a cold solve's time and depend on neither
the budget, the SLAs nor the other providers. A solve that changes only those
reads them back instead of rebuilding them.

**Key.** Two files per provider (Cosine's own columns; every preset's in
``presets@<file>``: a what-if reads Cosine's alone, a third of a solved spec's rows),
named by a SHA-256 of everything its tables depend on (:func:`table_key`): the spec's
workload, design space (without the cluster cap), robustness and cost model; the provider's slice of the price set
(its VM types, storage products and VM storage limits: a price set that prices
them differently is another key); and the code version, the content of every
file of ``cost_models/`` (formulas, ``data/phi.yaml``, constants), of the
table package ``solver/tables/`` and of the search-space module. Any change to any of them is a new key; old
files are never read again.

**Content.** Data only: parquet rows (:class:`CachedColumn`) written and read by
specs.io, sealed: the file carries a SHA-256 of its rows (specs.io.table_digest) in
its schema metadata. A read checks the row type, version, schema and that hash, then
the columns' :meth:`CachedColumn.check_columns`. A row is one column of the MIP (or of a preset's
table) at one shard size, tagged with the shard's node count k (entries N/k);
the shard sizes present are the ones computed, so a solve whose cluster cap
asks for other sizes computes only those and adds them. A (kind, shard size) computed
without any column (no VM type holds the shard: a preset's at ycsb_d's largest sizes)
leaves no row; it is listed in ``<file>.empty.json`` beside it (sealed JSON,
solver.sealed_json), so it is not computed again (until stop 62 it was, every solve:
ycsb_d's warm solve took 198 s).

**Trust.** A file that cannot be read, fails the schema, its content hash (a value
edited after it was written) or a row check, or names a VM type the catalog does not
have is reported in one line and recomputed (then overwritten); it is never used.

**Where.** ``$COSINE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/cosine/tables``,
else ``~/.cache/cosine/tables`` (a user cache dir, shared by every run directory).
``cosine solve --no-cache`` neither reads nor writes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from cost_models.cloud import StorageChoice
from cost_models.design import Design
from cost_models.pricing.catalog import Catalog, VmType
from solver.sealed_json import default_dir, read_sections, write_sections
from solver.tables.context import COSINE, Context
from specs.errors import InputError
from specs.io import kept_objects, read_columns, require, write_rows
from specs.schema import Spec
from specs.vocab import DESIGN_CLASSES, SlaFeature

#: Directories whose every file is part of the code version of the key.
_CODE_DIRS = ("cost_models",)
#: Modules (and packages: every file of the folder) that are part of it too.
_CODE_FILES = ("solver/tables", "solver/space.py", "solver/table_cache.py")
_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class CachedColumn:
    """One column of a provider's tables at one shard size (a parquet row)."""

    VERSION: ClassVar[int] = 4  # 3: sealed (a content hash in the schema metadata); 4: the backup's share

    kind: str  # solver.tables.context.COSINE, or a preset's name
    shard_count: int  # k: the node holds N/k entries
    vm: str  # VM type name within the provider
    storage_product: str
    storage_disks: int
    storage_gib: float
    storage_iops: float
    storage_usd_month: float
    storage_mibps: float  # inf: no throughput limit
    storage_backup_usd_month: float  # of storage_usd_month: the node's backup
    cost_month: float
    throughput: float
    perturbed: float
    io_total: float
    design_class: str
    levels: int
    cold_levels: int
    T: int
    K: int
    Z: int
    buffer_bytes: float
    bloom_bits: float
    bloom_allocation: str
    block_bytes: int
    range_bits: float
    codec_hot: str
    codec_cold: str
    lsh: bool
    all_hot: bool
    threads: int | None
    design_name: str
    hash_index_bytes: float | None

    @staticmethod
    def check_columns(c: dict[str, Any]) -> None:
        """Values no writer produces, refused by column (specs.io.read_columns)."""
        require(bool((c["shard_count"] >= 1).all()), "a shard_count below 1")
        for name in (
            "storage_gib",
            "storage_iops",
            "storage_usd_month",
            "storage_backup_usd_month",
            "cost_month",
            "throughput",
            "perturbed",
        ):
            v = c[name]
            require(bool((np.isfinite(v) & (v >= 0)).all()), f"column {name}: a negative or non-finite value")
        require(bool((np.isfinite(c["io_total"]) & (c["io_total"] >= 0)).all()), "column io_total: a bad value")
        require(bool((c["storage_mibps"] > 0).all()), "column storage_mibps: a value not above 0")
        require(bool(np.isin(c["design_class"], DESIGN_CLASSES).all()), "column design_class: an unknown class")
        hib = [x for x in c["hash_index_bytes"] if x is not None]
        require(all(math.isfinite(x) and x > 0 for x in hib), "column hash_index_bytes: a bad value")

    @classmethod
    def of(cls, kind: str, k: int, c: Context) -> CachedColumn:
        return cls(
            kind=kind,
            shard_count=k,
            vm=c.vm.name,
            **{f"storage_{f}": getattr(c.storage, f) for f in _STORAGE},
            **{f: getattr(c, f) for f in _CONTEXT},
            **{col: getattr(c.design, f) for f, col in _DESIGN.items()},
        )


#: The fields of a column's volume (cost_models.cloud.StorageChoice), stored as ``storage_<field>``.
_STORAGE = ("product", "disks", "gib", "iops", "usd_month", "mibps", "backup_usd_month")
#: The column's own figures (solver.tables.context.Context).
_CONTEXT = ("cost_month", "throughput", "perturbed", "io_total", "design_class", "levels", "cold_levels")
#: The design's fields (cost_models.design.Design) and their stored names.
_DESIGN = {
    **{f: f for f in ("T", "K", "Z", "buffer_bytes", "bloom_bits", "bloom_allocation", "block_bytes")},
    **{f: f for f in ("range_bits", "codec_hot", "codec_cold", "lsh", "all_hot", "threads", "hash_index_bytes")},
    "name": "design_name",
}


def code_files(modules: tuple[str, ...] = _CODE_FILES) -> list[Path]:
    """The files :func:`code_version` hashes: every file of ``cost_models/``, then each of
    ``modules`` (a folder: every file in it), in a fixed order, without bytecode caches."""

    def under(rel: str) -> list[Path]:
        p = _ROOT / rel
        if not p.is_dir():
            return [p]
        return [f for f in sorted(p.rglob("*")) if f.is_file() and "__pycache__" not in f.parts]

    return [f for rel in (*_CODE_DIRS, *modules) for f in under(rel)]


#: :func:`code_version`'s digests in this process, per ``modules``, with the files' stamps (path,
#: mtime, size, inode) they were read at: a file edited since is read and hashed again.
_CODE_SEEN: dict[tuple[str, ...], tuple[tuple[tuple[str, int, int, int], ...], str]] = {}


def code_version(modules: tuple[str, ...] = _CODE_FILES) -> str:
    """SHA-256 of the files the tables' values come from (module docstring, :func:`code_files`);
    ``modules``: the modules hashed besides ``cost_models/`` (solver.reeval_cache names its own).
    Hashed once per process while no file changes (:data:`_CODE_SEEN`; the three caches' keys
    asked for it ~10 times a what-if, ~4 ms each)."""
    files = code_files(modules)
    stamps = tuple((str(p), st.st_mtime_ns, st.st_size, st.st_ino) for p in files for st in (p.stat(),))
    seen = _CODE_SEEN.get(modules)
    if seen is not None and seen[0] == stamps:
        return seen[1]
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(_ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    _CODE_SEEN[modules] = (stamps, h.hexdigest())
    return h.hexdigest()


def spec_parts(spec: Spec) -> list[str]:
    """What of a spec decides its tables and their re-evaluations: the workload, the design space
    (without the cluster cap, which only adds shard sizes), robustness, the cost model, whether the
    SLAs require a backup (a volume is priced with its backup then), a replicated node's view (its
    plan and the workload's own mix, which robustness perturbs) and how the node is served (issue 48:
    the clients' pipeline, the latency bounds, the network duty cycle, and the throughput target,
    which sets the operating point of the reported latency)."""
    return [
        repr(spec.workload),
        repr(dataclasses.replace(spec.design, max_cluster_size=None)),
        repr((spec.noise, spec.kl_radius, spec.tolerance, spec.cost_model)),
        repr(SlaFeature.BACKUP in spec.slas),
        repr(spec.node_view),
        repr(
            (
                spec.pipeline,
                spec.max_latency_s,
                spec.max_latency_p50_s,
                spec.network_duty_cycle,
                spec.min_throughput,
            )
        ),
    ]


def table_key(spec: Spec, catalog: Catalog, provider: str, code: str) -> str:
    """The cache key of one provider's tables (module docstring)."""
    parts = [
        f"rows v{CachedColumn.VERSION}",
        code,
        *spec_parts(spec),
        provider,
        repr(catalog.vms.get(provider, [])),
        repr(catalog.storage.get(provider, [])),
        repr(catalog.vm_storage.get(provider, [])),
        repr(catalog.slas.get(provider, {}).get(SlaFeature.BACKUP)),  # a volume's snapshots
        repr(catalog.regions.get(provider)),  # an instance store's backup in object storage
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


#: (kind, k) -> the columns of one provider at one shard size, in table order.
Shards = dict[tuple[str, int], list[Context]]


@dataclass
class TableCache:
    """A directory of cached tables; ``notes`` collects the one-line reports of files it refused."""

    directory: Path = field(default_factory=default_dir)
    notes: list[str] = field(default_factory=list)
    hits: int = 0  # (provider, kind, shard) entries read back
    misses: int = 0  # computed
    _code: str = ""

    def path(self, spec: Spec, catalog: Catalog, provider: str, kind: str = COSINE) -> Path:
        """The file of ``provider``'s columns of ``kind``: Cosine's own, or every preset's
        (``presets@<file>``)."""
        if not self._code:
            self._code = code_version()
        name = f"{provider}-{table_key(spec, catalog, provider, self._code)[:32]}.parquet"
        return self.directory / (name if kind == COSINE else f"{PRESETS_FILE}@{name}")

    def empty_path(self, spec: Spec, catalog: Catalog, provider: str) -> Path:
        """The file of the shard sizes computed without a column (:meth:`load`)."""
        return self.path(spec, catalog, provider).with_suffix(".empty.json")

    def load(self, spec: Spec, catalog: Catalog, provider: str, kinds: tuple[str, ...] | None = None) -> Shards:
        """The cached shards of ``provider`` (empty when there is no valid file), with the shard sizes
        computed without any column (an empty list each: no VM type holds such a shard, and they are
        the largest, dearest shards to compute); ``kinds``: only those (Cosine's own, a preset's),
        else every kind there is. A file this process has read is not read again while it is
        unchanged, and a kind's columns are built once (:data:`_READ`)."""
        out: Shards = {}
        files: dict[str, _Held | None] = {}  # each file read (and a refused one reported) once

        def held(kind: str) -> _Held | None:
            name = COSINE if kind == COSINE else PRESETS_FILE
            if name not in files:
                files[name] = self._held(spec, catalog, provider, name)
            return files[name]

        if kinds is None:
            presets = held(PRESETS_FILE)
            kinds = (COSINE, *(presets.kinds() if presets is not None else ()))
        for kind in kinds:
            h = held(kind)
            if h is not None:
                out.update((k, list(v)) for k, v in h.shards_of(kind, catalog, provider).items())
        for key in self._empties(spec, catalog, provider):
            if key[0] in kinds:
                out.setdefault(key, [])
        return out

    def _empties(self, spec: Spec, catalog: Catalog, provider: str, report: bool = True) -> list[tuple[str, int]]:
        """The (kind, shard count) pairs computed without a column (a refused file: none, reported
        unless ``report`` is False: a save after the load that reported it)."""
        path = self.empty_path(spec, catalog, provider)
        if not path.exists():
            return []
        key = table_key(spec, catalog, provider, self._code or code_version())
        try:
            names = read_sections(path, EMPTY_WHAT, EMPTY_VERSION, key, {"empty": lambda e: e is True})["empty"]
            out = []
            for name in names:
                kind, _, k = name.rpartition(" ")
                out.append((kind, int(k)))
            return out
        except (InputError, ValueError) as exc:
            if report:
                self.note(f"table cache ignored and rebuilt: {path}: {exc}")
            return []

    def _held(self, spec: Spec, catalog: Catalog, provider: str, kind: str, report: bool = True) -> _Held | None:
        """The file of ``kind`` (:meth:`path`) as read, checked (None: no file, or a refused one,
        reported unless ``report`` is False), memoized by :data:`_READ`."""
        path = self.path(spec, catalog, provider, kind)
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino, spec.workload.entries)
        held = _READ.get(path)
        if held is not None and held.stamp == stamp:
            _READ[path] = _READ.pop(path)  # the most recently used last
            return held
        cols = self._read(path, catalog, provider, report)
        if cols is None:
            return None
        kinds = np.asarray(cols["kind"], dtype=object)
        if bool(((kinds == COSINE) != (kind == COSINE)).any()):
            if report:
                wrong = "a preset's" if kind == COSINE else "Cosine's"
                self.note(f"table cache ignored and rebuilt: {path}: {wrong} rows in this file")
            return None
        held = _READ[path] = _Held(stamp, cols, kinds, {})
        while len(_READ) > READ_FILES:
            del _READ[next(iter(_READ))]
        return held

    def _read(self, path: Path, catalog: Catalog, provider: str, report: bool = True) -> dict[str, Any] | None:
        """The columns of the file at ``path``, checked (None, and reported, when it is not valid)."""
        try:
            cols = read_columns(path, CachedColumn, "table cache", sealed=True)
            vm_of = {vm.name: vm for vm in catalog.vms.get(provider, [])}
            unknown = sorted(set(cols["vm"].tolist()) - set(vm_of))
            if unknown:
                raise InputError(f"{path}: VM type {unknown[0]!r} is not in the catalog (table cache)")
        except InputError as exc:
            if report:
                self.note(f"table cache ignored and rebuilt: {exc}")
            return None
        return cols

    def save(self, spec: Spec, catalog: Catalog, provider: str, shards: Shards) -> None:
        """Write ``provider``'s shards (atomically; a write that fails is reported, not fatal): Cosine's
        file if they hold Cosine's, the presets' if they hold a preset's, with the presets of that file
        they lack (a what-if asks for Cosine's alone); the empty shard sizes of the kinds they lack stay."""
        given = sorted({kind for kind, _ in shards})
        own = {key: cs for key, cs in shards.items() if key[0] == COSINE}
        presets = {key: cs for key, cs in shards.items() if key[0] != COSINE}
        held = self._held(spec, catalog, provider, PRESETS_FILE, report=False) if presets else None
        if held is not None:
            for kind in held.kinds():
                if kind not in given:
                    presets |= held.shards_of(kind, catalog, provider)
        for kind, part in ((COSINE, own), (PRESETS_FILE, presets)):
            if (kind == COSINE and COSINE not in given) or (kind == PRESETS_FILE and not presets):
                continue
            rows = [CachedColumn.of(kd, k, c) for (kd, k), cs in sorted(part.items()) for c in cs]
            path = self.path(spec, catalog, provider, kind)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_rows(path, rows, CachedColumn, sealed=True)
            except OSError as exc:
                self.note(f"table cache not written: {path}: {exc.strerror or exc}")
                return
        kept = [(kind, k) for kind, k in self._empties(spec, catalog, provider, report=False) if kind not in given]
        empty = {f"{kind} {k}": True for kind, k in kept} | {
            f"{kind} {k}": True for (kind, k), cs in sorted(shards.items()) if not cs
        }
        if empty:
            key = table_key(spec, catalog, provider, self._code or code_version())
            note = write_sections(
                self.empty_path(spec, catalog, provider), EMPTY_WHAT, EMPTY_VERSION, key, {"empty": empty}
            )
            if note is not None:
                self.note(note)

    def note(self, text: str) -> None:
        self.notes.append(text)


#: The shard sizes computed without a column, beside each provider's file (``<file>.empty.json``,
#: sealed JSON: solver.sealed_json): without it such a size was computed again by every solve.
EMPTY_WHAT = "table cache's empty shards"
EMPTY_VERSION = 1

#: Files whose shards a process keeps (:meth:`TableCache.load`): a what-if in one process (the
#: report's page, a sweep's worker) reads each once. Its Contexts are shared by the solves (nothing
#: changes a Context once built); each caller gets its own dict and lists.
READ_FILES = 16


@dataclass
class _Held:
    """A file this process read: its stamp (mtime, size, inode, entries: a file rewritten since,
    another solve having added shard sizes, is read again), its checked columns (specs.io.read_columns:
    numpy arrays, a nullable field's a list), the kind of each row, and its shards built so far, by kind."""

    stamp: tuple[int, int, int, int]
    cols: dict[str, Any]
    kind_of: np.ndarray
    built: dict[str, Shards]

    def kinds(self) -> list[str]:
        """The kinds of the file's rows."""
        return sorted(set(self.kind_of.tolist()))

    def shards_of(self, kind: str, catalog: Catalog, provider: str) -> Shards:
        """The shards of ``kind``, built at the first call (:func:`_shards`)."""
        if kind not in self.built:
            vm_of = {vm.name: vm for vm in catalog.vms.get(provider, [])}
            with kept_objects():
                self.built[kind] = _shards(self._rows_of(kind), provider, vm_of, self.stamp[3])
        return self.built[kind]

    def _rows_of(self, kind: str) -> dict[str, list[Any]]:
        """The columns of the rows of ``kind``, as Python values."""
        mask = self.kind_of == kind
        picked = np.flatnonzero(mask).tolist()
        return {
            name: col[mask].tolist() if isinstance(col, np.ndarray) else [col[i] for i in picked]
            for name, col in self.cols.items()
        }


#: The name the presets' file takes before its ``@`` (:meth:`TableCache.path`).
PRESETS_FILE = "presets"


#: The files read, by path (:class:`_Held`).
_READ: dict[Path, _Held] = {}


def _shards(cols: dict[str, list[Any]], provider: str, vm_of: dict[str, VmType], n_entries: int) -> Shards:
    """The columns of a cache file (by field name, checked) as tables' contexts. Rows with equal
    volume or design fields share one (frozen) StorageChoice or Design. (The warm solve's largest
    step: each Context is built from its fields by name, no dict per row.)"""
    vols: dict[tuple[Any, ...], StorageChoice] = {}
    designs: dict[tuple[Any, ...], Design] = {}
    vol_rows = zip(*(cols[f"storage_{f}"] for f in _STORAGE), strict=True)
    design_rows = zip(*(cols[col] for col in _DESIGN.values()), strict=True)
    figures = ("cost_month", "throughput", "perturbed", "io_total", "design_class", "levels", "cold_levels")
    context_rows = zip(*(cols[f] for f in figures), strict=True)  # unpacked by these names below
    out: Shards = {}
    rows = zip(cols["kind"], cols["shard_count"], cols["vm"], vol_rows, design_rows, context_rows, strict=True)
    for kind, k, vm, v, d, (cost, x, xp, io, cls, levels, cold) in rows:
        vol = vols.get(v)
        if vol is None:
            vol = vols[v] = StorageChoice(provider, *v)
        design = designs.get(d)
        if design is None:
            design = designs[d] = Design(**dict(zip(_DESIGN, d, strict=True)))
        ctx = Context(
            provider, vm_of[vm], n_entries / k, vol, design=design, design_class=cls, levels=levels,
            cold_levels=cold, cost_month=cost, throughput=x, perturbed=xp, io_total=io,
        )  # fmt: skip
        out.setdefault((kind, k), []).append(ctx)
    return out
