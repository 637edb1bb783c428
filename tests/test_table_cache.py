"""The persistent table cache (solver.table_cache): a hit gives the same tables
as a build, its key changes with everything the tables depend on and with nothing
else, a corrupt or foreign file is reported in one line and rebuilt, and
``--no-cache`` neither reads nor writes it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cli.main import app
from solver.table_cache import TableCache, code_version, table_key
from solver.tables.build import build_tables
from tests.conftest import TINY_SPEC
from tests.test_solver import make_spec, small_catalog


def _columns(tables):
    """Everything a column carries, per provider, in table order (presets too)."""
    own = {p: [dataclasses.astuple(c) for c in cs] for p, cs in tables.contexts.items()}
    pre = {n: {p: [dataclasses.astuple(c) for c in cs] for p, cs in by.items()} for n, by in tables.presets.items()}
    return own, pre


@pytest.fixture(scope="module")
def spec_cat():
    return make_spec(2_000_000, providers="aws, gcp", robustness="{noise: 0.1}"), small_catalog("ondemand")


def test_hit_equals_build_and_miss_computes_only_what_is_missing(tmp_path, spec_cat):
    spec, cat = spec_cat
    cache = TableCache(tmp_path)
    cold = build_tables(spec, cat, ("aws", "gcp"), workers=1, presets=("rocksdb",), cache=cache)
    assert cache.hits == 0 and cache.misses > 0
    # a file per provider for Cosine's columns, and one beside it for the presets'
    assert sorted(f.name.split("-")[0] for f in tmp_path.iterdir()) == ["aws", "gcp", "presets@aws", "presets@gcp"]
    warm_cache = TableCache(tmp_path)
    warm = build_tables(spec, cat, ("aws", "gcp"), workers=1, presets=("rocksdb",), cache=warm_cache)
    assert warm_cache.misses == 0 and warm_cache.hits > 0 and not warm_cache.notes
    assert _columns(warm) == _columns(cold)
    # a larger cluster cap asks for shard sizes the cache lacks: only those are built
    more = TableCache(tmp_path)
    bigger = build_tables(spec, cat, ("aws",), workers=1, presets=("rocksdb",), max_cluster=5, cache=more)
    assert more.hits > 0 and more.misses == 2  # shards of 4 and 5 nodes
    ref = build_tables(spec, cat, ("aws",), workers=1, presets=("rocksdb",), max_cluster=5)
    assert _columns(bigger) == _columns(ref)


def test_key_follows_what_the_tables_depend_on(spec_cat):
    spec, cat = spec_cat
    code = code_version()
    key = table_key(spec, cat, "aws", code)
    # not on the budget, the SLAs but backup, the other providers or the cluster cap
    same = dataclasses.replace(spec, budget_usd=1.0, slas=("availability",), providers=("aws",))
    same = dataclasses.replace(same, design=dataclasses.replace(spec.design, max_cluster_size=50))
    assert table_key(same, cat, "aws", code) == key
    only_backup = {p: {f: s for f, s in by.items() if f == "backup"} for p, by in cat.slas.items()}
    assert table_key(spec, dataclasses.replace(cat, slas=only_backup), "aws", code) == key
    # on a backup (a volume is priced with it): required, its snapshot price, the object store's
    assert table_key(dataclasses.replace(spec, slas=("backup",)), cat, "aws", code) != key
    assert table_key(spec, dataclasses.replace(cat, slas={}), "aws", code) != key
    region = {**cat.regions, "aws": dataclasses.replace(cat.regions["aws"], object_usd_per_gb_month=1.0)}
    assert table_key(spec, dataclasses.replace(cat, regions=region), "aws", code) != key
    # on the workload, the design space, robustness, the provider's prices and the code (phi table included)
    wl = dataclasses.replace(spec.workload, value_bytes=101)
    assert table_key(dataclasses.replace(spec, workload=wl), cat, "aws", code) != key
    ds = dataclasses.replace(spec.design, size_ratio=(4, 8))
    assert table_key(dataclasses.replace(spec, design=ds), cat, "aws", code) != key
    assert table_key(dataclasses.replace(spec, noise=0.2), cat, "aws", code) != key
    vms = {**cat.vms, "aws": [dataclasses.replace(v, usd_per_hour=v.usd_per_hour * 2) for v in cat.vms["aws"]]}
    assert table_key(spec, dataclasses.replace(cat, vms=vms), "aws", code) != key
    assert table_key(spec, dataclasses.replace(cat, vms=vms), "gcp", code) == table_key(spec, cat, "gcp", code)
    assert table_key(spec, cat, "aws", code + "0") != key


def test_every_field_of_a_column_is_stored():
    """A field added to Context, Design or StorageChoice must be added to the cache's rows."""
    from cost_models.cloud import StorageChoice
    from cost_models.design import Design
    from solver import table_cache
    from solver.tables.context import Context

    assert {f.name for f in dataclasses.fields(Design)} == set(table_cache._DESIGN)
    assert {f.name for f in dataclasses.fields(StorageChoice)} == {"provider", *table_cache._STORAGE}
    assert {f.name for f in dataclasses.fields(Context)} == {
        "provider",
        "vm",
        "entries",
        "storage",
        "design",
        *table_cache._CONTEXT,
    }


def test_code_version_covers_every_module_of_the_tables():
    """Every module the tables' values come from is hashed: the whole solver/tables package (an
    edit of any of its modules is a new key), the search space, and no bytecode cache."""
    import solver.space
    import solver.tables
    from solver import table_cache

    files = {p.resolve() for p in table_cache.code_files()}
    package = Path(solver.tables.__file__).resolve().parent
    modules = [p.resolve() for p in package.glob("*.py")]
    assert len(modules) >= 7 and set(modules) <= files
    assert Path(solver.space.__file__).resolve() in files
    assert not any("__pycache__" in p.parts for p in files)


def test_code_version_hashes_a_file_again_once_it_changes(tmp_path, monkeypatch):
    """code_version is hashed once per process while its files are unchanged, and again as soon
    as one of them is edited (another stamp)."""
    from solver import table_cache

    src = tmp_path / "cost_models" / "model.py"
    src.parent.mkdir()
    src.write_text("x = 1\n")
    monkeypatch.setattr(table_cache, "_ROOT", tmp_path)
    monkeypatch.setattr(table_cache, "_CODE_SEEN", {})
    first = table_cache.code_version(())
    assert table_cache.code_version(()) == first
    src.write_text("x = 22\n")
    assert table_cache.code_version(()) != first


def test_code_version_covers_the_phi_table():
    from cost_models.phi import PHI_TABLE
    from solver import table_cache

    files = [p for d in table_cache._CODE_DIRS for p in (table_cache._ROOT / d).rglob("*")]
    assert PHI_TABLE.resolve() in [p.resolve() for p in files]


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),  # truncated
        lambda p: p.write_bytes(b"not parquet at all"),
        lambda p: p.write_bytes(Path(p.parent / "other.parquet").read_bytes()),  # another row type
    ],
    ids=["truncated", "garbage", "foreign"],
)
def test_a_damaged_file_is_reported_and_rebuilt(tmp_path, spec_cat, damage):
    from specs.io import write_rows

    spec, cat = spec_cat
    write_rows(tmp_path / "other.parquet", [], dataclasses.make_dataclass("Other", [("x", int)]))
    cold = build_tables(spec, cat, ("aws",), workers=1, cache=TableCache(tmp_path))
    (path,) = tmp_path.glob("aws-*.parquet")
    damage(path)
    cache = TableCache(tmp_path)
    again = build_tables(spec, cat, ("aws",), workers=1, cache=cache)
    assert len(cache.notes) == 1 and "\n" not in cache.notes[0] and str(path) in cache.notes[0]
    assert cache.hits == 0 and _columns(again) == _columns(cold)
    clean = TableCache(tmp_path)  # rewritten: the next read is a hit
    build_tables(spec, cat, ("aws",), workers=1, cache=clean)
    assert clean.misses == 0 and not clean.notes


def test_a_row_with_an_impossible_value_is_refused(tmp_path, spec_cat):
    """A file with a matching content hash and a value no writer produces (a writer's bug, not an
    edit: the file is sealed again after the change) is refused by the row check."""
    import pyarrow.parquet as pq

    from specs.io import DIGEST_KEY, table_digest

    spec, cat = spec_cat
    build_tables(spec, cat, ("aws",), workers=1, cache=TableCache(tmp_path))
    (path,) = tmp_path.glob("aws-*.parquet")
    table = pq.read_table(path)
    col = table.column_names.index("throughput")
    bad = table.set_column(col, "throughput", [[-1.0] * table.num_rows])
    pq.write_table(bad.replace_schema_metadata({**table.schema.metadata, DIGEST_KEY: table_digest(bad).encode()}), path)
    cache = TableCache(tmp_path)
    build_tables(spec, cat, ("aws",), workers=1, cache=cache)
    assert len(cache.notes) == 1 and "throughput" in cache.notes[0]


def test_cli_uses_the_cache_and_no_cache_leaves_it_alone(tmp_path, runner, monkeypatch):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_SPEC)
    cache = tmp_path / "cache"
    monkeypatch.setenv("COSINE_CACHE_DIR", str(cache))
    args = ["solve", str(spec), "--bands", "4", "--json", "--workers", "1"]
    res = runner.invoke(app, [*args, "--no-cache", "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert not cache.exists()
    first = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert first.exit_code == 0, first.output
    # a file per provider and replication plan (its node view), one per preset beside it (the
    # baselines'), and a re-evaluation file and a band file per plan
    names = [f.name for f in cache.iterdir()]
    kinds = [n.split("-")[0] for n in names if "@" not in n]
    presets = [n for n in names if "@" in n]
    assert set(kinds) == {"aws", "gcp", "reeval", "bands"}
    assert kinds.count("aws") == kinds.count("reeval") == kinds.count("bands")
    assert presets and {n.split("-")[0] for n in presets} == {"presets@aws", "presets@gcp"}
    for f in cache.iterdir():
        f.write_bytes(b"garbage")
    again = runner.invoke(app, [*args, "--budget", "900", "--out", str(tmp_path / "c")])
    assert again.exit_code == 0
    notes = [line for line in again.stderr.splitlines() if line.startswith("table cache ignored")]
    assert len(notes) == kinds.count("aws") + kinds.count("gcp") + len(presets), again.stderr
    reeval_notes = [line for line in again.stderr.splitlines() if line.startswith("re-evaluation cache ignored")]
    assert len(reeval_notes) == kinds.count("reeval")
    band_notes = [line for line in again.stderr.splitlines() if line.startswith("band cache ignored")]
    assert len(band_notes) == kinds.count("bands")
    warm = runner.invoke(app, [*args, "--out", str(tmp_path / "d")])
    assert warm.exit_code == 0 and not warm.stderr.strip()

    def answer(out: str) -> dict:
        sol = json.loads(out)
        sol["search"].pop("timings_s")
        sol["certificate"].pop("wall_s")
        sol.pop("sha256")  # the seal covers the timings
        need = sol["cheapest_meeting_need"]["configuration"]
        if need is not None:  # the second answer's certificate has its own wall clock
            need["certificate"].pop("wall_s")
        return sol

    assert answer(warm.stdout) == answer(first.stdout) == answer(res.stdout)


def test_a_process_reads_an_unchanged_file_once(tmp_path, spec_cat, monkeypatch):
    """A what-if in one process reads each cache file once while it is unchanged, each caller
    getting its own lists; a rewritten file (another mtime) is read again."""
    import os

    spec, cat = spec_cat
    build_tables(spec, cat, ("aws",), workers=1, cache=TableCache(tmp_path))
    first = TableCache(tmp_path).load(spec, cat, "aws")
    assert first
    reads: list[Path] = []
    real = TableCache._read

    def counted(self, path, *args):  # type: ignore[no-untyped-def]
        reads.append(path)
        return real(self, path, *args)

    monkeypatch.setattr(TableCache, "_read", counted)
    again = TableCache(tmp_path).load(spec, cat, "aws")
    assert reads == [] and again == first
    key = next(iter(again))
    again[key].clear()  # the caller's own list: the next one is whole
    assert TableCache(tmp_path).load(spec, cat, "aws")[key] == first[key]
    (path,) = tmp_path.glob("aws-*.parquet")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert TableCache(tmp_path).load(spec, cat, "aws") == first and reads == [path]


def test_a_load_of_some_kinds_reads_only_their_files_and_a_save_keeps_the_others(tmp_path, spec_cat):
    """A what-if asks for Cosine's columns only: the presets' file is not read, and a save of the
    Cosine shards alone (a shard size the what-if computed) leaves the presets' as they were; a
    save of one preset keeps the file's others."""
    from solver import table_cache
    from solver.tables.context import COSINE

    spec, cat = spec_cat
    build_tables(spec, cat, ("aws",), workers=1, presets=("rocksdb",), cache=TableCache(tmp_path))
    whole = TableCache(tmp_path).load(spec, cat, "aws")
    assert {kind for kind, _ in whole} == {COSINE, "rocksdb"}
    table_cache._READ.clear()
    own = TableCache(tmp_path).load(spec, cat, "aws", (COSINE,))
    assert own == {key: cs for key, cs in whole.items() if key[0] == COSINE}
    assert [p.name.split("-")[0] for p in table_cache._READ] == ["aws"]
    TableCache(tmp_path).save(spec, cat, "aws", own)
    table_cache._READ.clear()
    assert TableCache(tmp_path).load(spec, cat, "aws") == whole
    build_tables(spec, cat, ("aws",), workers=1, presets=("rocksdb", "faster"), cache=TableCache(tmp_path))
    both = TableCache(tmp_path).load(spec, cat, "aws")
    assert {kind for kind, _ in both} == {COSINE, "rocksdb", "faster"}
    TableCache(tmp_path).save(spec, cat, "aws", {key: cs for key, cs in both.items() if key[0] == "faster"})
    table_cache._READ.clear()
    assert TableCache(tmp_path).load(spec, cat, "aws") == both


def test_a_shard_size_without_columns_is_not_computed_again(tmp_path, spec_cat, monkeypatch):
    """A shard size no VM type holds has no column, hence no row: the cache keeps it in its
    ``.empty.json`` beside the file, so the next solve does not compute it again (ycsb_d's three
    largest shards, no VM type holding them: 148 s of every warm solve)."""
    from solver.tables import build

    spec, cat = spec_cat
    real = build.shard_job
    sizes: list[float] = []

    def without_the_largest(args):  # type: ignore[no-untyped-def]
        sizes.append(args[3])
        out = real(args)
        return [{kind: [] for kind in per_spec} for per_spec in out] if args[3] == spec.workload.entries else out

    monkeypatch.setattr(build, "shard_job", without_the_largest)
    cold = build_tables(spec, cat, ("aws",), workers=1, presets=("rocksdb",), cache=TableCache(tmp_path))
    assert spec.workload.entries in sizes
    (empty,) = tmp_path.glob("aws-*.empty.json")
    sizes.clear()
    warm_cache = TableCache(tmp_path)
    warm = build_tables(spec, cat, ("aws",), workers=1, presets=("rocksdb",), cache=warm_cache)
    assert sizes == [] and warm_cache.misses == 0 and not warm_cache.notes
    assert _columns(warm) == _columns(cold)
    empty.write_text(empty.read_text().replace("true", "false"))  # edited: refused, reported, rebuilt
    again = TableCache(tmp_path)
    build_tables(spec, cat, ("aws",), workers=1, presets=("rocksdb",), cache=again)
    assert sizes == [spec.workload.entries] and len(again.notes) == 1 and str(empty) in again.notes[0]


@pytest.mark.parametrize("under", ["", "sub"])
def test_a_cache_dir_that_is_a_file_is_bad_input(tmp_path, runner, monkeypatch, under):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_SPEC)
    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    monkeypatch.setenv("COSINE_CACHE_DIR", str(afile / under) if under else str(afile))
    res = runner.invoke(app, ["solve", str(spec), "--bands", "4", "--workers", "1", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert "\n" not in err and err.startswith("error: COSINE_CACHE_DIR: ") and "not a directory" in err, err
    assert not (tmp_path / "o").exists() and afile.read_text() == "not a directory\n"
