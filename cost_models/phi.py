"""The phi table: the CPU model's learned constants, as one value.

``data/phi.yaml`` (written by ``cosine calibrate``) holds, per design class and
operation, the CPU seconds of one operation on a warm, fully cached engine and
its parallel fraction phi (paper Eq. 2, Algorithm 1), and the engine-wide
terms of docs/model.md. :func:`load_phi` reads and checks a table once and
returns a :class:`PhiTable`; the CPU model (:mod:`cost_models.cpu`) takes it
as an argument. Nothing selects a table behind the caller's back: the shipped
one is :data:`PHI_TABLE`, and a calibration that evaluates a fit not yet
written passes that table in (like mini-lsm's ``LsmStorageOptions``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from specs.errors import InputError
from specs.io import load_yaml
from specs.vocab import DESIGN_CLASSES, MODELLED_WAL_SYNC, OPERATIONS, DesignClass, Operation

#: The shipped table, written by `cosine calibrate phi`.
PHI_TABLE = Path(__file__).resolve().parent / "data" / "phi.yaml"
#: phi.yaml's layout version (2: measured CPU, block and background terms, the envelope; 3: the
#: block read's CPU over its block size is the measured curve ``block_read_shape``, not a power law).
PHI_SCHEMA = 3
#: Engine-wide entries of the table: seconds, all measured or fitted by `cosine calibrate`.
ENGINE_TERMS = (
    "memtable_seconds_per_doubling",
    "memtable_insert_seconds_per_doubling",
    "memtable_base_entries",
    "memtable_insert_base_entries",
    "lookup_reference_keys",
    "block_read_seconds_per_byte_doubling",
    "block_read_growth_max_keys",
    "background_block_seconds",
    "background_block_seconds_per_byte",
    "hash_scan_per_key_seconds",
    "hash_index_entry_seconds",
)
#: Operations a hash log answers by walking its whole index (it keeps no order).
INDEX_WALKS = (Operation.RANGE, Operation.EMPTY_RANGE)
#: The measured searches whose CPU grows with the data (phi.yaml ``lookup_seconds_per_doubling``).
LOOKUP_SLOPES = (Operation.GET, Operation.EMPTY_GET)
#: Searches whose CPU does not grow with the data, so no slope is learned for them: a hash log's
#: lookup of a key it does not hold probes its in-memory index once and reads nothing from the
#: log (measured flat on a quiet machine: 0.212 us at 100,000 keys, 0.199 us at 400,000;
#: docs/journal/s17-s21.md §20). A fit of a slope there wants a value at its bound, 0.
FLAT_SEARCHES: frozenset[tuple[DesignClass, Operation]] = frozenset({(DesignClass.LSH, Operation.EMPTY_GET)})


class PhiTableError(InputError):
    """The phi table is missing a class/operation or holds an impossible value."""


@dataclass(frozen=True, eq=False)
class PhiTable:
    """A checked phi table: ``raw`` is the YAML document, ``path`` where it was read from."""

    path: Path
    raw: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    def __reduce__(self) -> tuple[Any, ...]:
        # sent to worker processes as its path: each process loads (and checks) it once
        return (load_phi, (self.path,))


#: Loaded tables by (path, modification time): a table is read and checked once per process,
#: and again only when the file changes (`cosine calibrate phi`).
_LOADED: dict[tuple[str, int], PhiTable] = {}


def load_phi(path: Path = PHI_TABLE) -> PhiTable:
    """The phi table at ``path`` (default: the shipped one), checked."""
    p = str(path)
    try:
        stamp = os.stat(p).st_mtime_ns
    except OSError:
        raise PhiTableError(f"{p}: no such phi table") from None
    hit = _LOADED.get((p, stamp))
    if hit is None:
        if len(_LOADED) >= 8:
            _LOADED.clear()
        hit = _LOADED[(p, stamp)] = PhiTable(Path(p), _load_table(Path(p)))
    return hit


def _load_table(path: Path) -> dict[str, Any]:
    """Load and check a phi table."""
    try:
        raw = load_yaml(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise PhiTableError(f"{path.name}: not a readable YAML phi table ({type(e).__name__})") from None
    if not isinstance(raw, dict) or raw.get("schema") != PHI_SCHEMA:
        raise PhiTableError(f"{path.name}: not a schema-{PHI_SCHEMA} phi table; run `cosine calibrate phi`")
    for key in ENGINE_TERMS:
        v = raw.get(key)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise PhiTableError(f"{path.name}: {key} must be a positive number, got {v!r}")
    classes = raw.get("classes", {})
    for cls in DESIGN_CLASSES:
        if cls not in classes:
            raise PhiTableError(f"{path.name}: class {cls!r} missing")
        for key in ("range_entry_seconds", "buffer_get_seconds", "block_read_seconds"):
            v = classes[cls].get(key)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise PhiTableError(f"{path.name}: {cls}.{key} must be a positive number, got {v!r}")
        slopes = classes[cls].get("lookup_seconds_per_doubling")
        for op in LOOKUP_SLOPES:
            if (cls, op) in FLAT_SEARCHES:
                continue
            v = slopes.get(op) if isinstance(slopes, dict) else None
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise PhiTableError(f"{path.name}: {cls}.lookup_seconds_per_doubling.{op} must be positive, got {v!r}")
        for key in ("phi", "cpu_seconds", "concurrent_cpu_factor"):
            for op in OPERATIONS:
                if key == "cpu_seconds" and cls == DesignClass.LSH and op in INDEX_WALKS:
                    continue  # the hash log's scan walks its whole index: hash_scan_per_key_seconds
                v = classes[cls].get(key, {}).get(op)
                if v is None:
                    raise PhiTableError(f"{path.name}: {cls}.{key}.{op} missing")
                if key == "phi" and not 0.0 < float(v) <= 1.0:
                    raise PhiTableError(f"{path.name}: {cls}.phi.{op}={v} outside (0, 1]")
                if key != "phi" and not (math.isfinite(float(v)) and float(v) > 0.0):
                    raise PhiTableError(f"{path.name}: {cls}.{key}.{op} must be a positive number")
    _check_shape(path, raw.get("block_read_shape"))
    _check_wal(path, raw.get("wal"))
    return raw


#: phi.yaml ``wal``'s terms (`cosine calibrate wal`, measure/calibrate/wal.py), each positive.
WAL_TERMS = (
    "reference_entry_bytes",
    "seconds_per_byte",
    "group_seconds",
    "group_background_seconds",
)


def _check_wal(path: Path, sec: Any) -> None:
    """``wal``: a write's CPU by its entry's bytes and the modelled WAL policy's (its terms positive,
    measured under specs.vocab.MODELLED_WAL_SYNC)."""
    if not isinstance(sec, dict):
        raise PhiTableError(f"{path.name}: wal missing; run `cosine calibrate wal`")
    if sec.get("policy") != MODELLED_WAL_SYNC:
        raise PhiTableError(
            f"{path.name}: wal.policy is {sec.get('policy')!r}, the model prices {MODELLED_WAL_SYNC!s}; "
            "run `cosine calibrate wal`"
        )
    for key in WAL_TERMS:
        v = sec.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
            raise PhiTableError(f"{path.name}: wal.{key} must be a positive number, got {v!r}")


def _check_shape(path: Path, shape: Any) -> None:
    """``block_read_shape``: two or more block sizes, ascending, each with a positive ratio."""
    what = f"{path.name}: block_read_shape"
    if not isinstance(shape, dict) or set(shape) != {"block_bytes", "ratio"}:
        raise PhiTableError(f"{what} must map block_bytes and ratio to lists")
    sizes, ratios = shape["block_bytes"], shape["ratio"]
    if not isinstance(sizes, list) or not isinstance(ratios, list) or len(sizes) != len(ratios) or len(sizes) < 2:
        raise PhiTableError(f"{what}: block_bytes and ratio must be lists of one length, at least 2")
    for v in (*sizes, *ratios):
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise PhiTableError(f"{what}: {v!r} is not a positive number")
    if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise PhiTableError(f"{what}: block_bytes must ascend")


def shipped_or(phi: PhiTable | None) -> PhiTable:
    """``phi``, or the shipped table when the caller passes none."""
    return phi if phi is not None else load_phi(PHI_TABLE)
