"""specs.io builds and reads parquet columns from their buffers (pyarrow's own conversions
import pandas): the same file as pyarrow's, the same values back, and bad values refused."""

from __future__ import annotations

import gc
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specs.io import arrow_schema, kept_objects, read_columns, read_rows, write_rows
from specs.vocab import DesignClass


@dataclass
class _Row:
    n: int
    x: float
    name: str
    flag: bool
    cls: DesignClass
    maybe_n: int | None = None
    maybe_x: float | None = None
    maybe_s: str | None = None
    maybe_b: bool | None = None
    klass: str = field(default="", metadata={"column": "class"})


def _rows(k: int, seed: int) -> list[_Row]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(k):
        out.append(
            _Row(
                n=int(rng.integers(-(2**62), 2**62)),
                x=float(rng.normal()) if i % 7 else math.inf,
                name="é" * int(rng.integers(0, 4)) + str(i),
                flag=bool(rng.integers(0, 2)),
                cls=list(DesignClass)[i % len(DesignClass)],
                maybe_n=None if i % 3 == 0 else np.int64(i),
                maybe_x=None if i % 4 == 1 else np.float64(i) / 3,
                maybe_s=None if i % 5 == 2 else f"s{i}",
                maybe_b=None if i % 2 else np.bool_(i % 4 == 0),
                klass="" if i % 6 else "lsm",
            )
        )
    return out


@pytest.mark.parametrize("k", [0, 1, 9, 300])
def test_written_as_pyarrow_writes_it_and_read_back(tmp_path: Path, k: int) -> None:
    rows = _rows(k, k)
    path = write_rows(tmp_path / "rows.parquet", rows, _Row)
    got = pq.ParquetFile(path).read()
    recs = [{("class" if f == "klass" else f): getattr(r, f) for f in _Row.__dataclass_fields__} for r in rows]
    want = pa.Table.from_pylist(recs, schema=got.schema)
    assert got.equals(want)
    assert read_rows(path, _Row, "test rows") == rows
    cols = read_columns(path, _Row, "test rows")
    for f in ("n", "x", "flag"):
        assert cols[f].dtype == np.dtype({"n": np.int64, "x": np.float64, "flag": bool}[f])
        assert cols[f].tolist() == [getattr(r, f) for r in rows]
    assert cols["name"].tolist() == [r.name for r in rows]
    assert cols["maybe_x"] == [r.maybe_x for r in rows]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"n": 1.5}, "column n: 1.5 is not a int64"),
        ({"n": True}, "column n: True is not a int64"),
        ({"n": 2**70}, "column n: a number out of the int64 range"),
        ({"x": "1"}, "column x: '1' is not a double"),
        ({"name": None}, "column name: None in a column that does not allow it"),
        ({"flag": 1}, "column flag: 1 is not a bool"),
    ],
)
def test_a_value_the_column_cannot_hold_is_refused(tmp_path: Path, change: dict, problem: str) -> None:
    row = _rows(1, 0)[0]
    for k, v in change.items():
        setattr(row, k, v)
    with pytest.raises(TypeError, match=problem.replace("(", r"\(")):
        write_rows(tmp_path / "bad.parquet", [row], _Row)
    assert not list(tmp_path.iterdir())


def test_a_sliced_column_is_read_from_its_offset(tmp_path: Path) -> None:
    schema = arrow_schema(_Row)
    path = write_rows(tmp_path / "rows.parquet", _rows(50, 1), _Row)
    table = pq.ParquetFile(path).read().slice(7, 20)
    pq.write_table(table.replace_schema_metadata(pq.ParquetFile(path).schema_arrow.metadata), tmp_path / "s.parquet")
    cols = read_columns(tmp_path / "s.parquet", _Row, "test rows")
    assert cols["n"].tolist() == table.column("n").to_pylist()
    assert schema.names == table.schema.names


def test_no_pandas_on_the_way() -> None:
    import subprocess

    code = (
        "import sys, tempfile, pathlib\n"
        "from tests.test_parquet_columns import _Row, _rows\n"
        "from specs.io import write_rows, read_columns\n"
        "d = pathlib.Path(tempfile.mkdtemp())\n"
        "read_columns(write_rows(d / 'r.parquet', _rows(5, 0), _Row), _Row, 'rows')\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("enabled", [True, False])
def test_kept_objects_are_frozen_and_the_collector_left_as_it_was(enabled: bool) -> None:
    """What a reader builds inside kept_objects is out of the collector's generations afterwards
    (gc.freeze), collection is off while it builds, and on exit, by an exception too, the
    collector is as it was."""
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        frozen = gc.get_freeze_count()
        with kept_objects():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]
        assert gc.get_freeze_count() >= frozen + len(kept)
        assert gc.isenabled() == enabled
        with pytest.raises(ValueError), kept_objects():
            raise ValueError("a refused file")
        assert gc.isenabled() == enabled
    finally:
        gc.enable() if was else gc.disable()
