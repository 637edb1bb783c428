"""Serialization in one place: every file the project writes goes through here.

* Rows of a parquet file are a dataclass; :func:`arrow_schema` derives the
  file's schema from the dataclass's fields (no hand-written schemas), and
  :func:`read_rows` checks a file against it before anything uses it.
* Every parquet file carries its row type and format version in its schema
  metadata (:data:`ROWS_KEY`, :data:`VERSION_KEY`); :func:`read_rows` refuses
  a file of another type or version, and each row's own ``check()`` (if the
  row type has one) refuses values no writer produces (NaN, a negative cost...).
* A file written ``sealed`` (the caches and the sweep journal) also carries a
  SHA-256 of its payload (:data:`DIGEST_KEY`, :func:`table_digest`); every read
  of a file that has one checks it, and a ``sealed`` read refuses a file without.
* Writes are atomic (a temporary file in the same directory, then a rename),
  so a crash never leaves half a file under the final name; a rename replaces
  a symbolic link instead of writing through it.
* Outputs are checked before any long work (:func:`check_output_dir`,
  :func:`check_output_file`): a run's directory must be new, empty or a previous run of the
  same command (:func:`check_run_dir`, the one rule), and an output file must not replace a
  file the command reads (:func:`check_not_an_input`).
* JSON is strict: numpy scalars become Python numbers and non-finite floats
  become null (:func:`clean`), never ``NaN`` tokens other tools reject.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import gc
import hashlib
import json
import math
import os
import sys
import types
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from specs.errors import InputError

R = TypeVar("R")

#: Schema-metadata keys of every parquet file written by :func:`write_rows`.
ROWS_KEY, VERSION_KEY = b"cosine.rows", b"cosine.version"
#: Schema-metadata key of a sealed file's content hash (:func:`table_digest`).
DIGEST_KEY = b"cosine.sha256"

_ARROW = {int: "int64", float: "float64", str: "string", bool: "bool_"}


@contextlib.contextmanager
def kept_objects() -> Iterator[None]:
    """Build many objects a process keeps (a cache file's columns, a run directory's records:
    held by the readers' memos for the process's life) without Python's cyclic garbage collector
    tracing them: collection is paused while they are built, then every object tracked so far is
    moved out of the collector's generations (``gc.freeze``), so no later collection traces them
    again. They form no cycles, so reference counting still frees them when dropped; what freezing
    costs is that a garbage cycle already unreachable at that moment, or one among the frozen
    objects later, is never collected (a short-lived command's process does not notice; a long one
    keeps such cycles). Measured on `cosine whatif` of ycsb_a (stop 65): the collector took 0.13 s
    of 0.86 s, most of it while the table cache's 52,000 columns were built and, after them, in
    full collections over the grown heap; paused alone 0.75 s, paused and frozen 0.56 s."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def column_name(f: dataclasses.Field[Any]) -> str:
    """A field's column: its name, or ``metadata["column"]`` (for names Python reserves, like ``class``)."""
    return str(f.metadata.get("column", f.name))


def _base_type(tp: Any) -> tuple[type, bool]:
    """(the scalar type, nullable) of a field annotation such as ``float | None``."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported column type {tp!r}")
        return _base_type(inner[0])[0], True
    if isinstance(tp, type) and issubclass(tp, str):  # StrEnum columns are strings
        return str, False
    if tp not in _ARROW:
        raise TypeError(f"unsupported column type {tp!r}")
    return tp, False


def arrow_schema(row_type: type) -> Any:
    """The parquet schema of a row dataclass (field order, types, nullability)."""
    import pyarrow as pa

    hints = typing.get_type_hints(row_type)
    cols = []
    for f in dataclasses.fields(row_type):
        base, nullable = _base_type(hints[f.name])
        cols.append(pa.field(column_name(f), getattr(pa, _ARROW[base])(), nullable=nullable))
    return pa.schema(cols)


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _replace(tmp: Path, path: Path) -> None:
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (never through a symbolic link at ``path``)."""
    tmp = _tmp(path)
    try:
        tmp.write_bytes(data)
        _replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return write_bytes(path, text.encode())


def write_text_unless_same(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` (not atomically) unless the file already holds exactly it; whether
    it wrote. A re-solve into the same run directory rewrites ~1,000 one-line band logs
    (solver.frontier) that mostly say what they said: a stat and a read instead of truncating and
    rewriting each (74 µs a file on this ext4, docs/journal/s43-s51.md §38.1), which was 16 % of a
    warm ycsb_a re-solve in process (§39.5)."""
    data = text.encode()
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    path.write_bytes(data)
    return True


def row_version(row_type: type) -> int:
    """A row type's format version: its ``VERSION`` class variable (1 if it has none)."""
    return int(getattr(row_type, "VERSION", 1))


def _first_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


#: Longest name of one path component on Linux file systems (NAME_MAX), bytes.
NAME_MAX = 255


def _check_names(path: Path, flag: str) -> None:
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise InputError(
                f"{flag} {path}: the name {part[:32]}... is {len(os.fsencode(part))} bytes, longer than the "
                f"{NAME_MAX} a file system allows (give a shorter --out)"
            )


def _probe(directory: Path, flag: str, path: Path) -> None:
    """Create and remove a file in ``directory``: the only sure test that it takes writes (root may
    "access" /proc, a read-only mount answers W_OK)."""
    probe = directory / f".cosine-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot write in {directory} ({exc.strerror or exc})") from None


def check_output_dir(path: Path, flag: str) -> None:
    """An output directory must be a directory that takes files, or creatable as one: checked before any
    long work by creating it (and what is missing above it) and a file in it; what this check created
    is removed again, so a refused command leaves nothing behind."""
    _check_names(path, flag)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise InputError(f"{flag} {path}: exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError(f"{flag} {path}: the directory is not writable")
        _probe(path, flag, path)
        return
    anc = _first_existing(path)
    if not anc.is_dir():
        raise InputError(f"{flag} {path}: cannot create it, {anc} is a file")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: cannot create it, {anc} is not writable")
    created = [p for p in [path, *path.absolute().parents] if not p.exists()]
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot create it ({exc.strerror or exc})") from None
    try:
        _probe(path, flag, path)
    finally:
        for p in created:  # deepest first
            with contextlib.suppress(OSError):
                p.rmdir()


def check_output_file(path: Path, flag: str) -> None:
    """An output file's directory must exist and take files; the file, if there, must be a regular file."""
    _check_names(path, flag)
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a directory, expected a file name")
    if path.exists() and not path.is_file():
        raise InputError(f"{flag} {path}: exists and is not a regular file")
    parent = path.parent
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: the directory {parent} is not writable")
    _probe(parent, flag, path)


def _lands_at(path: Path) -> Path:
    """Where a write to ``path`` lands: its directory with links resolved, its own name kept (an
    atomic write replaces a symbolic link at ``path`` itself, not the link's target)."""
    return path.absolute().parent.resolve() / path.name


def check_not_an_input(path: Path, flag: str, inputs: Iterable[Path]) -> None:
    """Refuse an output file that would replace one of the command's inputs: a file it reads (by
    any spelling of its name: ``..``, a linked directory, a link to it) or a file under a
    directory it reads. Checked before any work, after :func:`check_output_file`."""
    try:
        out = _lands_at(path)
    except (OSError, RuntimeError) as exc:  # a loop of symbolic links (RuntimeError before Python 3.13)
        raise InputError(f"{flag} {path}: cannot resolve it ({exc})") from None
    for given in inputs:
        try:
            places = {_lands_at(given), given.resolve()}
        except (OSError, RuntimeError):
            continue  # no file can be read there either: its reader refuses it
        for where in places:
            if out == where or where in out.parents:
                what = given if out == where else f"inside {given}"
                raise InputError(f"{flag} {path}: is {what}, which this command reads; refusing to overwrite it")


#: Names only a `cosine render` workspace holds (render.workspace writes them; its ``MARKER``): a
#: directory holding one is never taken for another command's run directory.
WORKSPACE_FILES = ("Cargo.toml", "engine.toml", ".cosine-render")


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """The files of a command's run directory, by which :func:`check_run_dir` recognises a previous
    run of ``command``: ``finished``, the files every finished run holds; ``writes``, every name a
    run writes at the top of its directory; ``started``, the one of them a run makes before any
    other (a run stopped half-way leaves it and some of the others), None if a run writes nothing
    before it ends; ``rows``, the finished files :func:`write_rows` wrote, each with its row type's
    name: a file of the name that holds other rows (another tool's, a user's) is not the run's."""

    command: str
    finished: tuple[str, ...]
    writes: tuple[str, ...]
    started: str | None = None
    rows: tuple[tuple[str, str], ...] = ()


def rows_of(path: Path) -> str:
    """The row type a parquet file of :func:`write_rows` holds ("" for any other file)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except Exception:  # not a parquet file: not one of ours
        return ""
    return meta.get(ROWS_KEY, b"").decode(errors="replace")


def is_previous_run(path: Path, run: RunFiles) -> bool:
    """Whether the directory ``path`` is a previous run of ``run.command`` (:func:`check_run_dir`'s rule)."""
    if any((path / n).exists() or (path / n).is_symlink() for n in WORKSPACE_FILES):
        return False
    if all((path / n).is_file() for n in run.finished):
        return all(rows_of(path / name) == row_type for name, row_type in run.rows)
    if run.started is None or not (path / run.started).is_dir():
        return False
    return all(p.name in run.writes or _tmp_of(p.name) in run.writes for p in path.iterdir())


def _tmp_of(name: str) -> str:
    """The file a temporary file of :func:`_tmp` was for (a killed write leaves one), else ""."""
    parts = name.split(".")
    if len(parts) < 4 or parts[0] or parts[-1] != "tmp" or not parts[-2].isdigit():
        return ""
    return ".".join(parts[1:-2])


def check_run_dir(path: Path, flag: str, run: RunFiles) -> None:
    """The output directory of a command that writes a run (`cosine solve`, `cosine robust-eval`):
    :func:`check_output_dir`'s checks, and an existing directory that holds anything must be a
    previous run of the same command, since a run writes its files over any of the same names.

    The rule, here only: a directory is a previous run of ``run.command`` if it holds none of a
    render workspace's files (:data:`WORKSPACE_FILES`) and either every file a finished run holds
    (``run.finished``) or, left by an interrupted run, the directory a run makes first
    (``run.started``) and nothing but names a run writes (``run.writes``); a finished run's
    parquet files hold its own rows (``run.rows``). Anything else is
    refused before any work. A finished run's directory may hold more (a report, a plot, a
    deployment) and stays a run."""
    check_output_dir(path, flag)
    if not path.is_dir():
        return  # check_output_dir created and removed it: a new directory
    try:
        empty = not any(path.iterdir())
        ours = empty or is_previous_run(path, run)
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot list it ({exc.strerror or exc})") from None
    if not ours:
        raise InputError(
            f"{flag} {path}: not empty and not a previous {run.command} run (which holds "
            f"{' and '.join(run.finished)}); refusing to overwrite it"
        )


#: The Python values each column type of :data:`_ARROW` takes (bool is an int to Python: not here).
_TAKES: dict[str, tuple[type, ...]] = {
    "int64": (int, np.integer),
    "double": (int, float, np.integer, np.floating),
    "string": (str,),
    "bool": (bool, np.bool_),
}


def _arrow_array(values: list[Any], field: Any) -> Any:
    """One column of :func:`write_rows`, built from its buffers: ``pa.array`` and
    ``pa.Table.from_pylist`` import pandas on their first call (a quarter of a second, a fifth
    of a warm `cosine solve`). A value of another type, a None in a non-nullable column or a
    number the column cannot hold is a TypeError naming the column (as pyarrow refuses them)."""
    import pyarrow as pa

    kind = str(field.type)
    takes = _TAKES[kind]
    for v in values:
        if v is None:
            if not field.nullable:
                raise TypeError(f"column {field.name}: None in a column that does not allow it")
        elif not isinstance(v, takes) or (kind != "bool" and isinstance(v, bool | np.bool_)):
            raise TypeError(f"column {field.name}: {v!r} is not a {kind}")
    n = len(values)
    valid = np.array([v is not None for v in values], dtype=bool)
    nulls = n - int(valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    if kind == "string":
        raw = [b"" if v is None else v.encode() for v in values]
        ends = np.cumsum([len(b) for b in raw], dtype=np.int64)
        if ends.size and ends[-1] > np.iinfo(np.int32).max:
            raise TypeError(f"column {field.name}: more than 2 GiB of text")
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        bufs = [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(raw))]
    elif kind == "bool":
        bits = np.array([bool(v) for v in values], dtype=bool) if n else np.zeros(0, dtype=bool)
        bufs = [bitmap, pa.py_buffer(np.packbits(bits, bitorder="little"))]
    else:
        dtype = np.int64 if kind == "int64" else np.float64
        try:
            data = np.array([0 if v is None else v for v in values], dtype=dtype)
        except OverflowError:
            raise TypeError(f"column {field.name}: a number out of the {kind} range") from None
        bufs = [bitmap, pa.py_buffer(data)]
    return pa.Array.from_buffers(field.type, n, bufs, null_count=nulls)


def write_rows(path: Path, rows: Iterable[Any], row_type: type, *, sealed: bool = False) -> Path:
    """Write dataclass rows (or dicts keyed by column) as parquet, atomically, with the derived schema;
    ``sealed``: with the content hash of the rows (:func:`table_digest`) in the schema metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [column_name(f) for f in dataclasses.fields(row_type)]
    recs = []
    for r in rows:
        if dataclasses.is_dataclass(r):
            recs.append({column_name(f): getattr(r, f.name) for f in dataclasses.fields(r)})
        else:
            recs.append({n: r.get(n) for n in names})
    meta = {ROWS_KEY: row_type.__name__.encode(), VERSION_KEY: str(row_version(row_type)).encode()}
    schema = arrow_schema(row_type).with_metadata(meta)
    table = pa.Table.from_arrays([_arrow_array([r[f.name] for r in recs], f) for f in schema], schema=schema)
    if sealed:
        table = table.replace_schema_metadata({**meta, DIGEST_KEY: table_digest(table).encode()})
    tmp = _tmp(path)
    try:
        pq.write_table(table, tmp)
        _replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_records(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write free-form result rows (a study's table whose columns vary with its options) as parquet, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = _tmp(path)
    try:
        pq.write_table(pa.Table.from_pylist(clean(rows)), tmp)
        _replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _checked_table(path: Path, row_type: type, what: str, sealed: bool = False) -> Any:
    """The pyarrow table of a file written with :func:`write_rows`, its row type, version
    and schema checked against ``row_type``, and its content hash if it has one (``sealed``: it must)."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InputError(f"{path}: no such file ({what})")
    try:
        table = pq.ParquetFile(path).read()
    except Exception:
        raise InputError(f"{path}: not a readable parquet file ({what}; the file is corrupt or truncated)") from None
    meta = table.schema.metadata or {}
    rows_of = meta.get(ROWS_KEY, b"").decode(errors="replace")
    if rows_of != row_type.__name__:
        got = f"holds {rows_of} rows" if rows_of else "has no cosine row type (another tool's, or an older cosine's)"
        raise InputError(f"{path}: not a {what}: the file {got}, expected {row_type.__name__}")
    version = meta.get(VERSION_KEY, b"").decode(errors="replace")
    if version != str(row_version(row_type)):
        raise InputError(
            f"{path}: {what} format version {version or 'none'}, this cosine reads version {row_version(row_type)}"
        )
    want = arrow_schema(row_type)
    for fld in want:
        if fld.name not in table.column_names:
            raise InputError(f"{path}: not a {what} (no column {fld.name!r})")
        got = table.schema.field(fld.name).type
        if got != fld.type and not (got == "null" and fld.nullable):
            raise InputError(f"{path}: column {fld.name!r} is {got}, expected {fld.type} ({what})")
        if not fld.nullable and table.column(fld.name).null_count:
            raise InputError(f"{path}: column {fld.name!r} has missing values ({what})")
    digest = meta.get(DIGEST_KEY)
    if digest is None and sealed:
        raise InputError(f"{path}: no content hash ({what}; written by an older cosine or another tool)")
    if digest is not None and digest.decode(errors="replace") != table_digest(table):
        raise InputError(f"{path}: the content hash does not match the data ({what}; altered since it was written)")
    return table


def _bits(buf: Any, offset: int, n: int) -> np.ndarray:
    """``n`` bits of an arrow bitmap from bit ``offset``, as booleans."""
    return np.unpackbits(np.frombuffer(buf, dtype=np.uint8), bitorder="little")[offset : offset + n].astype(bool)


def table_digest(table: Any) -> str:
    """SHA-256 of a table's payload: its row count, then each column's name, type, validity and
    values, read from the arrow buffers in one canonical form (a missing value's slot counts as
    0 or empty), so that the table :func:`write_rows` builds and the same table read back (in
    one or several row groups, at an offset) hash alike; the exact bits of every number."""
    import pyarrow as pa

    h = hashlib.sha256(f"rows {table.num_rows}\0".encode())
    for name, col in zip(table.column_names, table.columns, strict=True):
        arr = col.combine_chunks()
        n, off, bufs = len(arr), arr.offset, [b if b is not None else b"" for b in arr.buffers()]
        valid = np.full(n, arr.null_count == 0) if not bufs[0] else _bits(bufs[0], off, n)
        h.update(f"{name}\0{arr.type}\0".encode() + np.packbits(valid).tobytes())
        if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):
            dtype = np.dtype(arr.type.to_pandas_dtype())
            values = np.frombuffer(bufs[1], dtype=dtype, count=n, offset=off * dtype.itemsize).copy()
            values[~valid] = 0
            h.update(values.tobytes())
        elif pa.types.is_boolean(arr.type):
            h.update(np.packbits(_bits(bufs[1], off, n) & valid).tobytes())
        elif pa.types.is_string(arr.type):
            ends = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=off * 4).astype(np.int64)
            lengths = np.where(valid, np.diff(ends), 0)
            data = memoryview(bufs[2])
            if (lengths == np.diff(ends)).all():
                text = bytes(data[ends[0] : ends[-1]])
            else:  # a missing value's slot holds bytes: left out
                text = b"".join(bytes(data[a:b]) for a, b, v in zip(ends[:-1], ends[1:], valid, strict=True) if v)
            h.update(lengths.tobytes() + text)
        elif not pa.types.is_null(arr.type):  # no column write_rows writes: hashed by value
            h.update(repr(arr.to_pylist()).encode())
    return h.hexdigest()


def read_rows(path: Path, row_type: type[R], what: str, *, sealed: bool = False) -> list[R]:
    """Rows of a parquet file written with :func:`write_rows`: its row type, version and
    schema checked against ``row_type``, its content hash if it has one (``sealed``: it must),
    then every row's own ``check()``."""
    table = _checked_table(path, row_type, what, sealed)
    cols = {column_name(f): f.name for f in dataclasses.fields(row_type)}  # type: ignore[arg-type]
    out = [row_type(**{cols[k]: v for k, v in r.items() if k in cols}) for r in table.to_pylist()]
    check = getattr(row_type, "check", None)
    if check is not None:
        for i, row in enumerate(out, start=1):
            try:
                check(row)
            except (ValueError, TypeError) as exc:
                raise InputError(f"{path}: row {i}: {exc} ({what})") from None
    return out


def _numpy_column(col: Any) -> np.ndarray:
    """A pyarrow column without nulls as a numpy array. Numbers are read from the column's data
    buffer: pyarrow's own ``to_numpy`` imports pandas (0.2-0.3 s, the most of a warm solve's
    reading of its table cache); booleans from the bitmap; strings through a Python list (pyarrow's
    dictionary encoding would take fewer Python objects, but its first use imports pyarrow.compute:
    45 ms, more than demo_ycsb_a's whole warm read of its tables, stop 65)."""
    import pyarrow as pa

    arr = col.combine_chunks()
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):
        dtype = np.dtype(arr.type.to_pandas_dtype())
        data = arr.buffers()[1]
        if data is None:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(data, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize).copy()
    if len(arr) == 0:
        return np.zeros(0, dtype=bool if pa.types.is_boolean(arr.type) else object)
    if pa.types.is_boolean(arr.type):
        return _bits(arr.buffers()[1], arr.offset, len(arr))
    return np.array(arr.to_pylist(), dtype=object)


def read_columns(path: Path, row_type: type, what: str, *, sealed: bool = False) -> dict[str, Any]:
    """The columns of a parquet file written with :func:`write_rows` by field name (numpy
    arrays; a nullable column is a list, None where missing), checked as :func:`read_rows`
    checks the file; then ``row_type.check_columns(columns)`` (if it has one) instead of a
    check per row: for large files read by column."""
    table = _checked_table(path, row_type, what, sealed)
    schema = arrow_schema(row_type)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(row_type):  # type: ignore[arg-type]
        col = table.column(column_name(f))
        out[f.name] = col.to_pylist() if schema.field(column_name(f)).nullable else _numpy_column(col)
    check = getattr(row_type, "check_columns", None)
    if check is not None:
        try:
            check(out)
        except (ValueError, TypeError) as exc:
            raise InputError(f"{path}: {exc} ({what})") from None
    return out


def require(ok: bool, problem: str) -> None:
    """A row check: raise ValueError(problem) unless ``ok`` (:func:`read_rows` names the file and row)."""
    if not ok:
        raise ValueError(problem)


def finite(x: float | None, lo: float = 0.0, *, nullable: bool = False) -> bool:
    """Whether ``x`` is a finite number >= ``lo`` (or None, when ``nullable``)."""
    if x is None:
        return nullable
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= lo


def load_yaml(text: str) -> Any:
    """A YAML document the project ships (the phi, codec and constants tables) with the safe
    loader, libyaml's when PyYAML has it (about 10x the pure-Python one's speed). Raises
    ``yaml.YAMLError`` as ``yaml.safe_load`` does; user specs have their own guarded loader
    (specs.schema)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader


def read_json(path: Path, what: str) -> Any:
    """A JSON document; missing or malformed is an :class:`InputError` naming the file."""
    if not path.is_file():
        raise InputError(f"{path}: no such file ({what})")
    try:
        return loads_json(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(
            f"{path}: not valid JSON ({what}; {exc.__class__.__name__} at {getattr(exc, 'pos', '?')})"
        ) from None
    except ValueError as exc:  # loads_json's nesting or integer past the limit
        raise InputError(f"{path}: not valid JSON ({what}; {exc})") from None


def loads_json(text: str) -> Any:
    """``json.loads``, with the two documents it cannot build as a ValueError naming the problem:
    nesting past the interpreter's recursion limit (RecursionError) and an integer of more than
    ``sys.get_int_max_str_digits()`` digits (4,300; int()'s own ValueError, worded for Python)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
        raise ValueError(f"an integer of more than {sys.get_int_max_str_digits():,} digits") from None


def clean(obj: Any) -> Any:
    """JSON-safe copy: numpy scalars to Python, non-finite floats to None, enums to their strings."""
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [clean(v) for v in obj.tolist()]
    if isinstance(obj, np.floating | np.integer | np.bool_):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, str):
        return str(obj)
    return obj


def to_json(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``obj`` (see :func:`clean`)."""
    return json.dumps(clean(obj), indent=indent, allow_nan=False)


def write_json(path: Path, obj: Any) -> Path:
    """Write ``obj`` as strict JSON, atomically."""
    return write_text(path, to_json(obj) + "\n")


# ----------------------------------------------------------------------------- typed JSON records
#
# A JSON document the project writes and reads back (solution.json, a deployment's state.json) is
# a dataclass: :func:`to_record` writes it, :func:`from_record` reads it back checked field by
# field against the dataclass's annotations (types, enum members, finite numbers, unknown or
# missing keys) and then against the type's own ``check()``, and :func:`json_schema` derives its
# JSON Schema (docs/solution.schema.json). Field metadata: ``column`` renames a field (``class``),
# ``omit_none`` leaves a None field out of the document.


def omit_none(**metadata: Any) -> Any:
    """Metadata of a field that is left out of the document when it is None."""
    return {"omit_none": True, **metadata}


def to_record(obj: Any) -> Any:
    """``obj`` (a dataclass, or lists and dicts of them) as plain JSON values (:func:`clean`'s rules)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if v is None and f.metadata.get("omit_none"):
                continue
            out[column_name(f)] = to_record(v)
        return out
    if isinstance(obj, dict):
        return {str(k): to_record(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_record(v) for v in obj]
    return clean(obj)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def from_record(tp: Any, value: Any, where: str) -> Any:
    """``value`` (parsed JSON) as an instance of ``tp``, checked; an :class:`InputError` names ``where``
    and the path of the first bad field."""
    if tp in _SCALARS:  # first: most fields are numbers or strings (no typing introspection for them)
        if value is None:
            raise InputError(f"{where}: null where a {_type_name(tp)} is expected")
        return _scalar(tp, value, where)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported record type {tp!r}")
        return from_record(inner[0], value, where)
    if value is None:
        raise InputError(f"{where}: null where a {_type_name(tp)} is expected")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_from_record(tp, value, where)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise InputError(f"{where}: not a list")
        item = args[0]
        items = [from_record(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise InputError(f"{where}: not a JSON object")
        kt, vt = args
        return {from_record(kt, k, f"{where} key {k!r}"): from_record(vt, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if value not in {m.value for m in tp}:
            raise InputError(f"{where}: {value!r} is not one of {', '.join(str(m.value) for m in tp)}")
        return tp(value)
    raise TypeError(f"unsupported record type {tp!r}")


#: The scalar types of a record field (:func:`_scalar`).
_SCALARS = frozenset({bool, int, float, str})


def _scalar(tp: type, value: Any, where: str) -> Any:
    """``value`` as a record's ``tp`` field, one of :data:`_SCALARS` (not None), checked."""
    if tp is bool:
        if not isinstance(value, bool):
            raise InputError(f"{where}: {value!r} is not true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: {value!r} is not an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InputError(f"{where}: {value!r} is not a finite number")
        return float(value)
    if not isinstance(value, str):
        raise InputError(f"{where}: {value!r} is not a string")
    return value


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A record class's field types (resolved once per class: a run's log has a record per band)."""
    return typing.get_type_hints(cls)


def _dataclass_from_record(cls: type[R], value: Any, where: str) -> R:
    if not isinstance(value, dict):
        raise InputError(f"{where}: not a JSON object")
    hints = _hints(typing.cast(type, cls))
    known, kwargs = set(), {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = column_name(f)
        known.add(key)
        path = f"{where}.{key}" if where else key
        if key not in value:
            if not _has_default(f):
                raise InputError(f"{path}: missing")
            continue
        kwargs[f.name] = from_record(hints[f.name], value[key], path)
    unknown = sorted(set(value) - known)
    if unknown:
        raise InputError(f"{where}: unknown field {unknown[0]!r}" if where else f"unknown field {unknown[0]!r}")
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    if check is not None:
        try:
            check()
        except ValueError as exc:
            raise InputError(f"{where}: {exc}" if where else str(exc)) from None
    return obj


def write_record(path: Path, obj: Any) -> Path:
    """Write a dataclass document as strict JSON, atomically."""
    return write_text(path, json.dumps(to_record(obj), indent=2, allow_nan=False) + "\n")


def read_record(path: Path, cls: type[R], what: str) -> R:
    """A dataclass document written by :func:`write_record`, checked (:func:`from_record`)."""
    raw = read_json(path, what)
    try:
        return typing.cast(R, from_record(cls, raw, ""))
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a record type: every dataclass once, under ``$defs``."""
    defs: dict[str, Any] = {}
    root = _schema_of(tp, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **root, "$defs": defs}


def _schema_of(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return {}
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return {"anyOf": [_schema_of(inner[0], defs), {"type": "null"}]}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # a placeholder: a type may hold itself
            hints = typing.get_type_hints(tp)
            props, required = {}, []
            for f in dataclasses.fields(tp):
                key = column_name(f)
                props[key] = _schema_of(hints[f.name], defs)
                if not _has_default(f):
                    required.append(key)
            doc = (tp.__doc__ or "").strip().split("\n\n")[0]
            defs[name] = {
                "type": "object",
                "description": " ".join(doc.split()),
                "properties": props,
                "required": required,
                "additionalProperties": False,
            }
        return {"$ref": f"#/$defs/{name}"}
    if origin in (list, tuple):
        return {"type": "array", "items": _schema_of(args[0], defs)}
    if origin is dict:
        out: dict[str, Any] = {"type": "object", "additionalProperties": _schema_of(args[1], defs)}
        if isinstance(args[0], type) and issubclass(args[0], enum.Enum):
            out["propertyNames"] = {"enum": [m.value for m in args[0]]}
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"type": "string", "enum": [m.value for m in tp]}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"unsupported record type {tp!r}")
