"""Sealed parquet rows (specs.io): a file written ``sealed`` carries a SHA-256 of its rows; the
table hashes alike however it is read back (row groups, chunks, an offset), an edit of any
column type is refused by every read, and a sealed read refuses a file without a hash."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specs.errors import InputError
from specs.io import DIGEST_KEY, read_columns, read_rows, table_digest, write_rows
from tests.test_content_hash import edit_parquet


@dataclasses.dataclass
class _Row:
    n: int
    x: float
    s: str
    b: bool
    maybe: float | None
    label: str | None


def _rows(count: int) -> list[_Row]:
    return [
        _Row(i, i / 7, "k" * (i % 5), i % 2 == 0, None if i % 3 == 0 else i * 1.5, None if i % 4 == 0 else f"v{i}")
        for i in range(count)
    ]


def test_a_table_hashes_alike_however_it_is_read_back(tmp_path):
    """Written sealed, read back whole, in row groups, as chunks and at an offset: one hash."""
    rows = _rows(500)
    path = write_rows(tmp_path / "r.parquet", rows, _Row, sealed=True)
    table = pq.ParquetFile(path).read()
    assert table.schema.metadata[DIGEST_KEY].decode() == table_digest(table)
    pq.write_table(table, tmp_path / "groups.parquet", row_group_size=64)
    assert read_rows(tmp_path / "groups.parquet", _Row, "rows", sealed=True) == rows
    assert read_columns(tmp_path / "groups.parquet", _Row, "rows", sealed=True)["n"].tolist() == list(range(500))
    chunked = pa.concat_tables([table.slice(0, 100), table.slice(100, 250), table.slice(350)])
    assert chunked.column("s").num_chunks == 3 and table_digest(chunked) == table_digest(table)
    part = table.slice(7, 50)
    fresh = pa.Table.from_pylist(part.to_pylist(), schema=table.schema)
    assert part.column("n").chunks[0].offset == 7 and table_digest(part) == table_digest(fresh)
    assert write_rows(tmp_path / "empty.parquet", [], _Row, sealed=True).exists()
    assert read_rows(tmp_path / "empty.parquet", _Row, "rows", sealed=True) == []


@pytest.mark.parametrize(
    "column, row, change",
    [
        ("n", 3, lambda v: v + 1),
        ("x", 2, lambda v: v * (1 + 2**-52)),  # the last bit of a float
        ("s", 1, lambda v: v + "k"),
        ("b", 0, lambda v: not v),
        ("maybe", 0, lambda v: 1.0),  # a missing value filled in
        ("maybe", 1, lambda v: None),  # a value removed
        ("label", 2, lambda v: "w2"),
    ],
)
def test_an_edit_of_any_column_is_refused(tmp_path, column, row, change):
    path = write_rows(tmp_path / "r.parquet", _rows(10), _Row, sealed=True)
    edit_parquet(path, column, row, change)
    for read in (read_rows, read_columns):
        with pytest.raises(InputError, match="content hash does not match"):
            read(path, _Row, "rows")  # a file that has a hash is checked by every read


def test_a_sealed_read_refuses_a_file_without_a_hash(tmp_path):
    path = write_rows(tmp_path / "r.parquet", _rows(3), _Row)
    assert read_rows(path, _Row, "rows") == _rows(3)
    with pytest.raises(InputError, match="no content hash"):
        read_rows(path, _Row, "rows", sealed=True)
