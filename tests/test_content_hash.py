"""Every cache and journal file carries a content hash of its payload, checked on every read
(issue 46, item 2). For each kind of file, one number is edited in its payload, the file
staying parseable and of the right type and version (as a hand edit, a tool or a bad disk
would leave it): the edited value is never used (the answers equal the unedited ones) and a
one-line warning names the file (tests/test_sealed_rows.py: the sealed parquet rows of specs.io
under the hood)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cli.main import app
from solver.rundir import FrontierRow, SweepRow
from specs.io import read_rows, to_json
from tests.conftest import TINY_SPEC
from tests.test_golden import strip_timings
from tests.test_sweep import MICRO_SPEC

#: one replication plan (RF 2: TINY_SPEC needs availability): one table file per provider and one
#: re-evaluation file to edit
ONE_PLAN = "replication: {factors: [2]}\n"
SOLVE = ["--bands", "6", "--json", "--workers", "1"]

SWEEP = ["--budgets", "100:2000:2", "--workers", "1"]


def _answer(run_dir: Path) -> tuple[str, list[FrontierRow]]:
    """A solve's answer: solution.json without its timings, and every frontier row."""
    sol = to_json(strip_timings(json.loads((run_dir / "solution.json").read_text())))
    return sol, read_rows(run_dir / "frontier.parquet", FrontierRow, "frontier")


def _solve(spec: Path, out: Path, *extra: str) -> tuple[tuple[str, list[FrontierRow]], list[str]]:
    res = CliRunner().invoke(app, ["solve", str(spec), *SOLVE, *extra, "--out", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    return _answer(out), res.stderr.strip().splitlines()


def edit_parquet(path: Path, column: str, row: int, change: Any) -> None:
    """Rewrite one value of a parquet file in place (``change(old) -> new``), keeping its schema
    and metadata: still a readable file of its row type and version."""
    table = pq.ParquetFile(path).read()
    values = table.column(column).to_pylist()
    new = change(values[row])
    assert new != values[row]
    values[row] = new
    i = table.schema.get_field_index(column)
    edited = table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), path)


def _first_set(path: Path, column: str) -> int:
    """The first row of a parquet file whose ``column`` has a value."""
    return next(i for i, v in enumerate(pq.ParquetFile(path).read().column(column).to_pylist()) if v is not None)


def _other_digit(x: float) -> float:
    """x with its first digit changed (18720000.0 -> 98720000.0, as measured in issue 46)."""
    text = repr(float(x))
    return float(("9" if text[0] != "9" else "1") + text[1:])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, list[FrontierRow]], Path]:
    """(spec, its --no-cache answer, a cache directory its solve filled)."""
    d = tmp_path_factory.mktemp("hash")
    spec = d / "tiny.yaml"
    spec.write_text(TINY_SPEC + ONE_PLAN)
    reference, _ = _solve(spec, d / "nocache", "--no-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("COSINE_CACHE_DIR", str(d / "cache"))
    try:
        filled, notes = _solve(spec, d / "fill")
    finally:
        mp.undo()
    assert filled == reference and not notes
    return spec, reference, d / "cache"


def _cache_copy(tiny: tuple[Path, Any, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(tiny[2], cache)
    monkeypatch.setenv("COSINE_CACHE_DIR", str(cache))
    return cache


def test_an_edited_reevaluation_is_never_served(tiny, tmp_path, monkeypatch):
    """The measured case: the largest throughput in reeval-*.json with its first digit changed
    (the file still valid JSON of the right version and key)."""
    spec, reference, _ = tiny
    (path,) = _cache_copy(tiny, tmp_path, monkeypatch).glob("reeval-*.json")
    text = path.read_text()
    numbers = re.findall(r'"throughput": ([0-9.e+]+)', text)
    top = max(numbers, key=float)
    assert text.count(f'"throughput": {top}') == 1
    path.write_text(text.replace(f'"throughput": {top}', f'"throughput": {_other_digit(float(top))!r}'))
    json.loads(path.read_text())  # still parseable

    answer, notes = _solve(spec, tmp_path / "edited")
    assert answer == reference
    assert len(notes) == 1 and notes[0].startswith("re-evaluation cache ignored and rebuilt")
    assert str(path) in notes[0] and "content hash" in notes[0]
    again, notes = _solve(spec, tmp_path / "again")  # rewritten: read back without a word
    assert again == reference and not notes


def test_an_edited_table_column_is_never_used(tiny, tmp_path, monkeypatch):
    """One column's throughput in a provider's table cache made ten times larger (the row check
    passes: a positive number): the best column a cluster within the budget can use, which the
    MIP would then choose."""
    spec, reference, _ = tiny
    cache = _cache_copy(tiny, tmp_path, monkeypatch)
    (path,) = cache.glob("aws-*.parquet")
    table = pq.ParquetFile(path).read()
    x, cost = table.column("throughput").to_pylist(), table.column("cost_month").to_pylist()
    best = max((i for i in range(len(x)) if cost[i] <= 400), key=lambda i: x[i])
    edit_parquet(path, "throughput", best, lambda v: v * 10)

    answer, notes = _solve(spec, tmp_path / "edited")
    assert answer == reference
    assert len(notes) == 1 and notes[0].startswith("table cache ignored and rebuilt")
    assert str(path) in notes[0] and "content hash" in notes[0]
    again, notes = _solve(spec, tmp_path / "again")
    assert again == reference and not notes


@pytest.fixture(scope="module")
def micro(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    d = tmp_path_factory.mktemp("hash_sweep")
    specs = []
    for i, entries in enumerate((1_000_000, 2_000_000)):
        specs.append(d / f"s{i}.yaml")
        specs[-1].write_text(MICRO_SPEC.format(name=f"s{i}", entries=entries) + ONE_PLAN)
    return specs, d


def _sweep(specs: list[Path], out: Path) -> Any:
    return CliRunner().invoke(app, ["sweep", *map(str, specs), *SWEEP, "--out", str(out)])


def test_an_edited_journal_part_is_refused_and_its_task_redone(micro, tmp_path):
    """An interrupted sweep left a journal part; one number in it (a row's latency_s) is edited.
    The resumed sweep names the part, removes it and solves its rows again."""
    specs, _ = micro
    ref = tmp_path / "ref.parquet"
    res = _sweep(specs[:1], ref)
    assert res.exit_code == 0, res.output + res.stderr
    out = tmp_path / "out.parquet"
    parts = tmp_path / ".out.parquet.parts"
    parts.mkdir()
    part = parts / "0a1b2c3d.parquet"
    shutil.copyfile(ref, part)  # a part is the sweep file's format: this task's rows, as a sweep journals them
    edit_parquet(part, "latency_s", _first_set(part, "latency_s"), _other_digit)

    res = _sweep(specs[:1], out)
    assert res.exit_code == 0, res.output + res.stderr
    assert read_rows(out, SweepRow, "sweep file") == read_rows(ref, SweepRow, "sweep file")
    assert "4 rows (4 new, 0 already there)" in res.output
    notes = res.stderr.strip().splitlines()
    assert len(notes) == 1 and "sweep journal part refused" in notes[0], res.stderr
    assert str(part) in notes[0] and "content hash" in notes[0]
    assert not parts.exists()


def test_an_edited_sweep_file_is_refused_before_any_work(micro, tmp_path):
    """The sweep file itself, re-read on resume: one number edited (a row's throughput). The
    resumed sweep exits 2 naming the file and leaves it as it is (it is the user's: it may hold
    rows of other specs)."""
    specs, _ = micro
    out = tmp_path / "out.parquet"
    res = _sweep(specs[:1], out)
    assert res.exit_code == 0, res.output + res.stderr
    edit_parquet(out, "throughput_ops", _first_set(out, "throughput_ops"), _other_digit)
    edited = out.read_bytes()

    res = _sweep(specs, out)
    assert res.exit_code == 2, res.output + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert str(out) in line and "content hash" in line and "move it away" in line
    assert out.read_bytes() == edited and not (tmp_path / ".out.parquet.parts").exists()


def test_a_sweep_reports_an_edited_cache_and_recomputes(micro, tmp_path, monkeypatch):
    """A sweep's tasks read the same caches: an edited re-evaluation is not used there either,
    and the task's note reaches the sweep's stderr (from a worker's cache, through its result)."""
    specs, _ = micro
    monkeypatch.setenv("COSINE_CACHE_DIR", str(tmp_path / "cache"))
    ref = tmp_path / "ref.parquet"
    res = _sweep(specs[:1], ref)
    assert res.exit_code == 0 and not res.stderr.strip(), res.output + res.stderr
    (path,) = (tmp_path / "cache").glob("reeval-*.json")
    text = path.read_text()
    top = max(re.findall(r'"throughput": ([0-9.e+]+)', text), key=float)
    path.write_text(text.replace(f'"throughput": {top}', f'"throughput": {_other_digit(float(top))!r}'))

    out = tmp_path / "out.parquet"
    res = _sweep(specs[:1], out)
    assert res.exit_code == 0, res.output + res.stderr
    assert read_rows(out, SweepRow, "sweep file") == read_rows(ref, SweepRow, "sweep file")
    notes = res.stderr.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith("re-evaluation cache ignored and rebuilt"), res.stderr
    assert str(path) in notes[0] and "content hash" in notes[0]
