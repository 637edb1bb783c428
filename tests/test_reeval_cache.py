"""The persistent cache of exact re-evaluations (solver.reeval_cache): a warm solve reads every
re-evaluation back instead of computing it and writes the same solution.json as a --no-cache
solve; the keys follow everything a re-evaluation depends on; a damaged file is reported and
ignored."""

from __future__ import annotations

import dataclasses
import json

import pytest

import solver.exact
import solver.frontier
from cli.main import app
from solver.reeval_cache import ReevalCache, cluster_key, spec_key
from solver.table_cache import code_version
from specs.io import to_json
from tests.conftest import TINY_SPEC
from tests.test_golden import strip_timings
from tests.test_solver import make_spec


def _solve(runner, args, out):
    res = runner.invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    return res


def _answer(run_dir) -> str:
    """solution.json's text without its wall-clock timings."""
    return to_json(strip_timings(json.loads((run_dir / "solution.json").read_text())))


def test_a_warm_solve_reads_every_reevaluation_back(tmp_path, runner, monkeypatch):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_SPEC + "replication: {factors: [2]}\n")  # one plan: one re-evaluation file
    monkeypatch.setenv("COSINE_CACHE_DIR", str(tmp_path / "cache"))
    args = ["solve", str(spec), "--bands", "6", "--json", "--workers", "1"]
    _solve(runner, [*args, "--no-cache"], tmp_path / "cold")
    _solve(runner, args, tmp_path / "fill")
    (reevals,) = (tmp_path / "cache").glob("reeval-*.json")
    assert json.loads(reevals.read_text())["clusters"]

    def refuse(*_a, **_k):
        raise AssertionError("a warm solve re-evaluated a cluster the cache holds")

    monkeypatch.setattr(solver.frontier, "reevaluate", refuse)
    monkeypatch.setattr(solver.exact, "reevaluate_many", refuse)
    warm = _solve(runner, args, tmp_path / "warm")
    assert not warm.stderr.strip()
    assert _answer(tmp_path / "warm") == _answer(tmp_path / "cold") == _answer(tmp_path / "fill")
    nc = runner.invoke(app, [*args, "--no-cache", "--out", str(tmp_path / "nc")])  # --no-cache reads nothing
    assert nc.exit_code != 0 and "re-evaluated" in repr(nc.exception) + nc.output + nc.stderr


def test_keys_follow_what_a_reevaluation_depends_on():
    from cost_models.cloud import StorageChoice
    from cost_models.design import Design
    from cost_models.pricing.catalog import VmType
    from solver.tables.context import Context

    spec = make_spec(2_000_000, providers="aws, gcp", robustness="{noise: 0.1}")
    code = code_version()
    key = spec_key(spec, code)
    rep = dataclasses.replace
    same = rep(spec, budget_usd=1.0, slas=("availability",), providers=("aws",))
    assert spec_key(rep(same, design=rep(spec.design, max_cluster_size=9)), code) == key
    assert spec_key(rep(spec, workload=rep(spec.workload, value_bytes=101)), code) != key
    assert spec_key(rep(spec, noise=0.2), code) != key
    assert spec_key(rep(spec, design=rep(spec.design, memory_headroom=0.2)), code) != key
    assert spec_key(spec, code + "0") != key
    vm = VmType("aws", "m5.large", 2, 8.0, 0.096)
    vol = StorageChoice("aws", "gp3", 1, 100.0, 3000.0, 8.0, 125.0)
    c = Context("aws", vm, 1e6, vol, 70.0, 1e4, 1.0, Design(T=6), "lsm", 3, 1)
    base = cluster_key([(c, 3)])
    assert cluster_key([(dataclasses.replace(c, throughput=2e4), 3)]) == base  # a table figure: not an input
    changed = [
        [(c, 4)],
        [(dataclasses.replace(c, entries=2e6), 3)],
        [(dataclasses.replace(c, vm=dataclasses.replace(vm, memory_gib=16.0)), 3)],
        [(dataclasses.replace(c, vm=dataclasses.replace(vm, vcpu=4)), 3)],
        [(dataclasses.replace(c, storage=dataclasses.replace(vol, iops=3001.0)), 3)],
        [(dataclasses.replace(c, design=Design(T=6, bloom_bits=9.0)), 3)],
        [(c, 3), (c, 1)],
    ]
    assert len({base, *(cluster_key(n) for n in changed)}) == len(changed) + 1


@pytest.mark.parametrize("damage", [b"not json", b'{"version": 1, "key": "x", "clusters": {}}', b"[]"])
def test_a_damaged_file_is_reported_and_ignored(tmp_path, damage):
    spec = make_spec(2_000_000, providers="aws")
    cache = ReevalCache(tmp_path)
    cache.path(spec).write_bytes(damage)
    cache.load(spec)
    assert len(cache.notes) == 1 and "\n" not in cache.notes[0] and "re-evaluation cache ignored" in cache.notes[0]


def test_the_key_hashes_the_code_that_reevaluates():
    """The file key names the modules whose code makes a re-evaluation: the one defining
    solver.exact.reevaluate (it left solver/frontier.py once while the key still hashed that
    file, so an edit of the re-evaluation kept serving old answers), and the model's scale."""
    import inspect
    from pathlib import Path

    from solver import exact, model, reeval_cache
    from solver.reeval_cache import CODE_FILES

    root = Path(reeval_cache.__file__).resolve().parent.parent
    named = {str(Path(f)) for f in CODE_FILES}
    for fn in (exact.reevaluate, exact.reevaluate_many):
        src = inspect.getsourcefile(fn)
        assert src is not None and str(Path(src).resolve().relative_to(root)) in named
    assert str(Path(model.__file__).resolve().relative_to(root)) in named
    assert all((root / f).is_file() for f in CODE_FILES)


def _imported(module) -> set[str]:
    """Every solver module a module's source imports, at run time or for type checking only."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(module))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n.startswith("solver.")}


def test_imports_go_one_way_frontier_exact_cache():
    """The cache stores plain rows (CachedReevaluation): it imports neither solver.exact nor
    solver.frontier, and solver.exact does not import solver.frontier (issue 45's cycle)."""
    import solver.exact
    import solver.frontier
    import solver.reeval_cache

    def of(module, name):
        return {n for n in _imported(module) if n == name or n.startswith(f"{name}.")}

    assert not of(solver.reeval_cache, "solver.exact") and not of(solver.reeval_cache, "solver.frontier")
    assert not of(solver.exact, "solver.frontier")
    assert "solver.reeval_cache" in _imported(solver.exact) and "solver.exact" in _imported(solver.frontier)


def test_the_cache_returns_the_row_it_was_given(tmp_path):
    """A row put, saved and loaded comes back equal, and as the cache's own row type (no Exact)."""
    from solver.exact import Exact
    from solver.reeval_cache import CachedReevaluation
    from tests.test_solver import make_spec

    spec = make_spec(2_000_000, providers="aws")
    nodes = _nodes()
    from dataclasses import asdict

    from cost_models.design import hand_entry
    from solver.rundir import NodeDesign, NodeGroup, NodeStorage
    from specs.vocab import DesignClass

    entry = hand_entry(
        design_class=DesignClass.LSM, entries_per_node=1e6, T=6, K=1, Z=1, L=3, Y=0, block_bytes=4096,
        buffer_bytes=2**26, bloom_bits_per_level=[10.0, 8.0, 6.0],
    )  # fmt: skip
    group = NodeGroup(
        NodeDesign(
            **asdict(entry),
            vm_type="m5.large",
            count=3,
            node_throughput_ops=5e5,
            node_perturbed_ops=4e5,
            device_bound=False,
        ),
        NodeStorage("m5.large", "gp3", 1, 100.0, 3000.0, 125.0, 3000.0, 8.0, "gp3 100 GiB"),
    )
    ex = Exact(1.5e6, [group], {"get": 0.25, "update": 1.0}, 1.25e6)
    cache = ReevalCache(tmp_path)
    cache.load(spec)
    cache.put(nodes, ex.cached())
    cache.save(spec)
    back = ReevalCache(tmp_path)
    back.load(spec)
    row = back.get(nodes)
    assert type(row) is CachedReevaluation and row == ex.cached() and Exact.of_cached(row) == ex
    assert not back.notes


def _nodes():
    from cost_models.cloud import StorageChoice
    from cost_models.design import Design
    from cost_models.pricing.catalog import VmType
    from solver.tables.context import Context

    vm = VmType("aws", "m5.large", 2, 8.0, 0.096)
    vol = StorageChoice("aws", "gp3", 1, 100.0, 3000.0, 8.0, 125.0)
    return [(Context("aws", vm, 1e6, vol, 70.0, 1e4, 1.0, Design(T=6), "lsm", 3, 1), 3)]


def test_a_key_reads_the_fields_asdict_reads():
    """cluster_key and node_key read each VM type, volume and design field by field: the same
    values, in the same order, as dataclasses.asdict (the fields are flat: no nested dataclass or
    container for asdict to copy)."""
    import dataclasses

    from cost_models.cloud import StorageChoice
    from cost_models.design import Design
    from cost_models.pricing.catalog import VmType
    from solver.reeval_cache import _fields

    for obj in (VmType("aws", "x", 2, 8.0, 0.1), StorageChoice("aws", "gp3", 1, 100.0, 3000.0, 8.0), Design(T=6)):
        assert list(_fields(obj).items()) == list(dataclasses.asdict(obj).items())
        assert all(
            not dataclasses.is_dataclass(v) and not isinstance(v, list | dict | tuple) for v in _fields(obj).values()
        )
