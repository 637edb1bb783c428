"""Serialization in one place: every file the project writes goes through here.

* Rows of a parquet file are a dataclass; :func:`arrow_schema` derives the
  file's schema from the dataclass's fields (no hand-written schemas), and
  :func:`read_rows` checks a file against it before anything uses it.
* Writes are atomic (a temporary file in the same directory, then a rename),
  so a crash never leaves half a file under the final name.
* JSON is strict: numpy scalars become Python numbers and non-finite floats
  become null (:func:`clean`), never ``NaN`` tokens other tools reject.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from specs.errors import InputError

R = TypeVar("R")

_ARROW = {int: "int64", float: "float64", str: "string", bool: "bool_"}


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


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    tmp = _tmp(path)
    try:
        tmp.write_text(text)
        _replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_rows(path: Path, rows: Iterable[Any], row_type: type) -> Path:
    """Write dataclass rows (or dicts keyed by column) as parquet, atomically, with the derived schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [column_name(f) for f in dataclasses.fields(row_type)]
    recs = []
    for r in rows:
        if dataclasses.is_dataclass(r):
            recs.append({column_name(f): getattr(r, f.name) for f in dataclasses.fields(r)})
        else:
            recs.append({n: r.get(n) for n in names})
    table = pa.Table.from_pylist(recs, schema=arrow_schema(row_type))
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


def read_table(path: Path, what: str) -> list[dict[str, Any]]:
    """All rows of a parquet file as dicts; a missing or unreadable file is an :class:`InputError`."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InputError(f"{path}: no such file ({what})")
    try:
        return list(pq.ParquetFile(path).read().to_pylist())
    except Exception:
        raise InputError(f"{path}: not a readable parquet file ({what}; the file is corrupt or truncated)") from None


def read_rows(path: Path, row_type: type[R], what: str) -> list[R]:
    """Rows of a parquet file written with :func:`write_rows`, checked against ``row_type``'s schema."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InputError(f"{path}: no such file ({what})")
    try:
        table = pq.ParquetFile(path).read()
    except Exception:
        raise InputError(f"{path}: not a readable parquet file ({what}; the file is corrupt or truncated)") from None
    want = arrow_schema(row_type)
    for fld in want:
        if fld.name not in table.column_names:
            raise InputError(f"{path}: not a {what} (no column {fld.name!r})")
        got = table.schema.field(fld.name).type
        if got != fld.type and not (got == "null" and fld.nullable):
            raise InputError(f"{path}: column {fld.name!r} is {got}, expected {fld.type} ({what})")
        if not fld.nullable and table.column(fld.name).null_count:
            raise InputError(f"{path}: column {fld.name!r} has missing values ({what})")
    cols = {column_name(f): f.name for f in dataclasses.fields(row_type)}  # type: ignore[arg-type]
    return [row_type(**{cols[k]: v for k, v in r.items() if k in cols}) for r in table.to_pylist()]


def read_json(path: Path, what: str) -> Any:
    """A JSON document; missing or malformed is an :class:`InputError` naming the file."""
    if not path.is_file():
        raise InputError(f"{path}: no such file ({what})")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(
            f"{path}: not valid JSON ({what}; {exc.__class__.__name__} at {getattr(exc, 'pos', '?')})"
        ) from None


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
