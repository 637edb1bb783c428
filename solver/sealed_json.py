"""A cache file of plain JSON sealed by a content hash: the exact re-evaluations'
(solver.reeval_cache) and the band answers' (solver.band_cache).

A file is ``{"version", "key", "sha256", <section>: {entry key: entry}, ...}``: data only, no code.
``sha256`` is the SHA-256 of the rest's canonical JSON (:func:`payload_digest`), checked on every
read, so a number edited in the file (by hand, a tool or a bad disk) is never served; a file of
another version or key, or whose entries fail their check, is refused the same way
(:func:`read_sections` raises :class:`~specs.errors.InputError`; the caches report it in one line
and rebuild the file). Written atomically by specs.io (:func:`write_sections`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specs.errors import InputError
from specs.io import read_json, to_json, write_text


def default_dir() -> Path:
    """The cache files' directory (the table cache's and the sealed ones'): ``$COSINE_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/cosine/tables``, else ``~/.cache/cosine/tables``; an InputError naming
    the variable when it, or the nearest existing path above it, is not a directory (checked when a
    command makes its caches, before any work)."""
    if os.environ.get("COSINE_CACHE_DIR"):
        return _directory(Path(os.environ["COSINE_CACHE_DIR"]), "COSINE_CACHE_DIR")
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg or str(Path.home() / ".cache")
    return _directory(Path(base) / "cosine" / "tables", "XDG_CACHE_HOME" if xdg else "the user cache")


def _directory(path: Path, name: str) -> Path:
    """``path``, unless it or the nearest existing path above it is something other than a directory
    (a cache file under it could be neither read nor written: NotADirectoryError)."""
    for p in (path, *path.parents):
        try:
            if not p.exists():
                continue
        except OSError:  # unreadable: the caches report what they cannot read or write
            return path
        if not p.is_dir():
            where = "" if p == path else f" (above {path})"
            raise InputError(f"{name}: {p} is not a directory{where}; the caches need one")
        return path
    return path


@dataclass
class SealedCache:
    """A directory of sealed cache files (a subclass's): ``notes`` collects one-line reports of
    refused files; ``hits`` and ``misses`` count its lookups; ``_key`` is the file's key once known,
    ``_new`` the entries added since it was read or written."""

    directory: Path = field(default_factory=default_dir)
    notes: list[str] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    _key: str = ""
    _entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    _new: int = 0


def payload_digest(payload: dict[str, Any]) -> str:
    """SHA-256 of a document's canonical JSON (sorted keys, no spaces, floats as Python writes
    them back): a file's text may be reformatted, but no value in it can change, unnoticed.
    Raises ValueError for a non-finite number (no writer here produces one)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def check_digest(path: Path, doc: Any, what: str) -> None:
    """Refuse a document whose ``sha256`` is missing or is not its payload's (:func:`payload_digest`);
    ``what`` names the cache in the message."""
    if not isinstance(doc, dict) or not isinstance(doc.get("sha256"), str):
        raise InputError(f"{path}: no content hash ({what}; written by an older cosine or another tool)")
    payload = {k: v for k, v in doc.items() if k != "sha256"}
    try:
        ok = payload_digest(payload) == doc["sha256"]
    except ValueError:  # a NaN or infinity token
        ok = False
    if not ok:
        raise InputError(f"{path}: the content hash does not match the data ({what}; altered since it was written)")


def read_sections(
    path: Path, what: str, version: int, key: str, checks: Mapping[str, Callable[[Any], bool]]
) -> dict[str, dict[str, Any]]:
    """The sections named by ``checks`` of the file at ``path``, each entry passing its section's
    check; InputError for a file that cannot be read, fails its hash, is of another version or
    key, or has an entry that fails."""
    doc = read_json(path, what)
    check_digest(path, doc, what)
    ok = doc.get("version") == version and doc.get("key") == key
    out: dict[str, dict[str, Any]] = {}
    for name, valid in checks.items():
        section = doc.get(name) if ok else None
        if not isinstance(section, dict) or not all(valid(e) for e in section.values()):
            raise InputError(f"{path}: not a {what} of this version and key")
        out[name] = section
    return out


def write_sections(path: Path, what: str, version: int, key: str, sections: dict[str, Any]) -> str | None:
    """Write the sections, sealed, atomically; the one-line note of a write that failed (else None)."""
    payload = {"version": version, "key": key, **sections}
    doc = {**payload, "sha256": payload_digest(payload)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, to_json(doc, indent=None))
    except OSError as exc:
        return f"{what} not written: {path}: {exc.strerror or exc}"
    return None
