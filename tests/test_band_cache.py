"""The persistent cache of band answers (solver.band_cache): a warm solve reads every band it
searched before back instead of searching it and writes the same solution.json as a --no-cache
solve; a what-if at another budget searches only the bands whose inputs changed; the keys follow
every input of a band's search; a damaged file is reported and ignored."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest

import solver.band_cache
import solver.bottleneck
import solver.frontier
from solver.band_cache import CODE_FILES, PREFETCHED, READ_BACK, BandCache, band_key
from solver.bottleneck import ColumnTable, Floor, best_within
from specs.vocab import Objective
from tests.conftest import TINY_SPEC
from tests.test_reeval_cache import _answer, _solve
from tests.test_solver import make_spec


def _args(spec: Path) -> list[str]:
    return ["solve", str(spec), "--bands", "6", "--json", "--workers", "1"]


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_SPEC + "replication: {factors: [2]}\n")  # one plan: one band file
    monkeypatch.setenv("COSINE_CACHE_DIR", str(tmp_path / "cache"))
    return spec


def test_a_warm_solve_reads_every_band_back(tmp_path, runner, monkeypatch, tiny):
    args = _args(tiny)
    _solve(runner, [*args, "--no-cache"], tmp_path / "cold")
    assert not list((tmp_path / "cache").glob("bands-*.json"))  # --no-cache writes none
    _solve(runner, args, tmp_path / "fill")
    (bands,) = (tmp_path / "cache").glob("bands-*.json")
    assert json.loads(bands.read_text())["bands"]

    def refuse(*_a, **_k):
        raise AssertionError("a warm solve searched a band the cache holds")

    monkeypatch.setattr(solver.band_cache, "best_within", refuse)
    monkeypatch.setattr(solver.band_cache, "cheapest_reaching", refuse)  # nor a provider's floor
    _solve(runner, args, tmp_path / "warm")
    assert _answer(tmp_path / "warm") == _answer(tmp_path / "cold") == _answer(tmp_path / "fill")
    logs = [p.read_text() for p in (tmp_path / "warm" / "solver").rglob("band*.log")]
    assert logs and any(READ_BACK in text for text in logs)


def test_another_budget_searches_only_the_bands_that_changed(tmp_path, runner, monkeypatch, tiny):
    args = _args(tiny)
    _solve(runner, args, tmp_path / "fill")
    searched: list[float] = []

    def counting(spec, tab, objective, mask, budget, **kw):
        searched.append(budget)
        return best_within(spec, tab, objective, mask, budget, **kw)

    monkeypatch.setattr(solver.band_cache, "best_within", counting)
    _solve(runner, [*args, "--budget", "4321"], tmp_path / "warm")
    warm = list(searched)  # (the --no-cache solve below searches every band)
    _solve(runner, [*args, "--budget", "4321", "--no-cache"], tmp_path / "cold")
    assert _answer(tmp_path / "warm") == _answer(tmp_path / "cold")
    # the grid loses the spec's budget and gains 4321: searched are the new band and the bands
    # after the change whose incumbent (the cheaper band's answer) changed; the rest read back
    assert 4321.0 in warm and len(set(warm)) <= 3
    logs = [p.read_text() for p in (tmp_path / "warm" / "solver").rglob("band*.log")]
    assert sum(READ_BACK in text for text in logs) >= 2


def _table(n: int = 6, seed: int = 0) -> ColumnTable:
    spec = make_spec(2_000_000, providers="aws")
    from cost_models.bill import bill_terms
    from cost_models.pricing.catalog import load_catalog

    terms = bill_terms(spec, load_catalog(spec.pricing), "aws")
    from cost_models.cloud import StorageChoice
    from cost_models.design import Design
    from cost_models.pricing.catalog import VmType
    from solver.tables.context import Context

    rng = np.random.default_rng(seed)
    hourly = rng.uniform(0.1, 0.7, n)
    vol = StorageChoice("aws", "gp3", 1, 100.0, 3000.0, 8.0, 125.0)
    contexts = [
        Context("aws", VmType("aws", f"vm{i}", 2, 8.0, float(h)), 1e6, vol, 0.0, 1e4, 1.0, Design(T=6), "lsm", 3, 1)
        for i, h in enumerate(hourly)
    ]
    return ColumnTable(
        provider="aws",
        contexts=contexts,
        terms=terms,
        max_cluster=40,
        cost=np.array([c.vm.usd_per_month + vol.usd_month for c in contexts]),
        x=rng.uniform(1, 10, n),
        p=rng.uniform(1, 10, n),
        share=rng.uniform(0.5, 4, n),
        fixed=terms.fixed,
        group=np.arange(n, dtype=np.int64),
        reach_x=np.full(n, math.inf),
        reach_p=np.full(n, math.inf),
    )


def test_keys_follow_every_input_of_a_band():
    tab = _table()
    mask = np.ones(6, dtype=bool)
    base = band_key(tab, Objective.EXPECTED, mask, 1000.0, None, None, "highs")
    assert band_key(_table(), Objective.EXPECTED, mask, 1000.0, None, None, "highs") == base  # same inputs
    rep = dataclasses.replace
    other_mask = mask.copy()
    other_mask[3] = False
    changed = [
        band_key(tab, Objective.PERTURBED, mask, 1000.0, None, None, "highs"),
        band_key(tab, Objective.EXPECTED, other_mask, 1000.0, None, None, "highs"),
        band_key(tab, Objective.EXPECTED, mask, 1000.0000001, None, None, "highs"),
        band_key(tab, Objective.EXPECTED, mask, 1000.0, Floor(tab.p, 3.0), None, "highs"),
        band_key(tab, Objective.EXPECTED, mask, 1000.0, Floor(tab.p, 3.5), None, "highs"),
        band_key(tab, Objective.EXPECTED, mask, 1000.0, Floor(tab.x, 3.0), None, "highs"),
        band_key(tab, Objective.EXPECTED, mask, 1000.0, None, [(1, 2)], "highs"),
        band_key(tab, Objective.EXPECTED, mask, 1000.0, None, [(1, 3)], "highs"),
        band_key(tab, Objective.EXPECTED, mask, 1000.0, None, None, "scip"),
    ]
    cost = tab.cost.copy()
    cost[2] += 1e-9
    for t in (
        rep(tab, cost=cost, _cache={}),
        rep(tab, x=tab.x * 1.0000001, _cache={}),
        rep(tab, p=tab.p[::-1].copy(), _cache={}),
        rep(tab, share=tab.share + 1e-12, _cache={}),
        rep(tab, group=tab.group[::-1].copy(), _cache={}),
        rep(tab, reach_x=np.full(6, 5.0), _cache={}),
        rep(tab, max_cluster=41, _cache={}),
        rep(tab, unit=2, _cache={}),
        rep(tab, terms=rep(tab.terms, min_nodes=tab.terms.min_nodes + 1), _cache={}),
        rep(tab, provider="gcp", _cache={}),
    ):
        changed.append(band_key(t, Objective.EXPECTED, mask, 1000.0, None, None, "highs"))
    assert len({base, *changed}) == len(changed) + 1
    # a table capped by within_cap shares the derived arrays, not the digest
    capped = solver.bottleneck.within_cap(tab, 7)
    assert capped.digest() != tab.digest() and tab.digest() == _table().digest()


@pytest.mark.parametrize(
    "damage", [b"not json", b'{"version": 1, "key": "x", "bands": {}}', b"[]", b'{"sha256": "0", "bands": {}}']
)
def test_a_damaged_file_is_reported_and_ignored(tmp_path, damage):
    spec = make_spec(2_000_000, providers="aws")
    cache = BandCache(tmp_path)
    cache.path(spec).write_bytes(damage)
    cache.load(spec)
    assert len(cache.notes) == 1 and "\n" not in cache.notes[0] and "band cache ignored" in cache.notes[0]


def test_an_answer_comes_back_as_it_was_found(tmp_path):
    """Every band of a small table, searched, saved, loaded and read back: the same cluster,
    certificate and note (marked as read back); an edited entry fails the file's hash."""
    spec = make_spec(2_000_000, providers="aws")
    tab = _table(8, seed=3)
    mask = np.ones(8, dtype=bool)
    budgets = [100.0, 700.0, 2500.0, 9000.0]
    first = BandCache(tmp_path)
    first.load(spec)
    kw = {"floor": None, "start": None, "backend": "highs"}
    found = [first.best_within(spec, tab, Objective.EXPECTED, mask, b, **kw) for b in budgets]
    assert first.misses == len(budgets) and first.hits == 0
    first.save(spec)
    again = BandCache(tmp_path)
    again.load(spec)
    back = [again.best_within(spec, tab, Objective.EXPECTED, mask, b, **kw) for b in budgets]
    assert again.hits == len(budgets) and again.misses == 0 and not again.notes
    assert any(a.nodes for a in found)
    for a, b in zip(found, back, strict=True):
        assert a.nodes == b.nodes and a.open_bound == b.open_bound
        assert (a.result.status, a.result.nodes) == (b.result.status, b.result.nodes)
        for f in ("objective", "bound", "gap"):
            x, y = getattr(a.result, f), getattr(b.result, f)
            assert x == y or (math.isinf(x) and math.isinf(y))
        assert b.note == (a.note + READ_BACK if a.note else "")
        if a.chosen is not None:
            assert b.chosen is not None
            same = (b.chosen.monthly_cost, b.chosen.throughput_kops)
            assert (a.chosen.monthly_cost, a.chosen.throughput_kops) == same
    path = again.path(spec)
    doc = json.loads(path.read_text())
    key = next(k for k, e in doc["bands"].items() if e["nodes"])
    doc["bands"][key]["nodes"][0][1] += 1
    path.write_text(json.dumps(doc))
    edited = BandCache(tmp_path)
    edited.load(spec)
    assert len(edited.notes) == 1 and "content hash does not match" in edited.notes[0]


def test_a_floor_comes_back_as_it_was_found(tmp_path):
    """The cheapest cluster reaching a throughput (a provider's floor), through the cache: the
    search's own answer, then the same nodes, bill and proof read back from the file; none
    reaching it is kept too; another throughput or table is another key."""
    spec = make_spec(2_000_000, providers="aws")
    tab = _table(8, seed=5)
    everything = np.ones(8, dtype=bool)
    needs = [0.0, 25.0, 180.0, 1e9]  # kops; the last one no cluster of the cap reaches
    first = BandCache(tmp_path)
    first.load(spec)
    found = [first.cheapest_reaching(tab, y) for y in needs]
    assert found == [solver.bottleneck.cheapest_reaching(tab, everything, y) for y in needs]
    assert found[0][0] is not None and found[-1][0] is None and first.misses == len(needs)
    first.save(spec)
    again = BandCache(tmp_path)
    again.load(spec)
    assert [again.cheapest_reaching(tab, y) for y in needs] == found
    assert again.hits == len(needs) and again.misses == 0 and not again.notes
    again.cheapest_reaching(tab, 26.0)
    again.cheapest_reaching(_table(8, seed=6), 25.0)
    assert again.misses == 2


def test_the_key_hashes_the_code_that_searches():
    """The file key names the modules whose code finds a band's answer: the one defining
    best_within and its knapsacks."""
    from solver import knapsack

    root = Path(solver.band_cache.__file__).resolve().parent.parent
    named = {str(Path(f)) for f in CODE_FILES}
    for fn in (best_within, knapsack.max_capacity, knapsack.min_bill):
        src = inspect.getsourcefile(fn)
        assert src is not None and str(Path(src).resolve().relative_to(root)) in named
    assert all((root / f).is_file() for f in CODE_FILES)


def test_a_cold_solve_searches_its_bands_in_worker_processes(tmp_path, runner, monkeypatch, tiny):
    """With two workers a --no-cache solve searches its chains of bands in forked processes
    (solver.frontier._prefetch) and reads every band back in order: the same solution.json as one
    process searching them all."""
    import os

    args = ["solve", str(tiny), "--bands", "6", "--json", "--no-cache"]
    _solve(runner, [*args, "--workers", "1"], tmp_path / "one")
    parent = os.getpid()

    def only_in_workers(*a, **k):
        if os.getpid() == parent:
            raise AssertionError("the solving process searched a band its workers had searched")
        return best_within(*a, **k)

    monkeypatch.setattr(solver.band_cache, "best_within", only_in_workers)
    two = _solve(runner, [*args, "--workers", "2"], tmp_path / "two")
    assert _answer(tmp_path / "two") == _answer(tmp_path / "one")
    assert "Traceback" not in two.stderr  # (the workers end quietly)
    logs = [p.read_text() for p in (tmp_path / "two" / "solver").rglob("band*.log")]
    assert any(PREFETCHED in text for text in logs) and not any(READ_BACK in text for text in logs)
    assert not (tmp_path / "cache").exists()  # --no-cache: nothing written


def test_a_re_solve_into_its_run_directory_rewrites_only_the_band_logs_that_changed(tmp_path, runner, tiny):
    args = _args(tiny)
    _solve(runner, args, tmp_path / "run")
    _solve(runner, args, tmp_path / "run")  # warm: every log now says it was read back
    logs = sorted((tmp_path / "run" / "solver").rglob("band*.log"))
    assert logs
    before = {p: (p.stat().st_mtime_ns, p.read_text()) for p in logs}
    changed = logs[0]
    changed.write_text("a note from another solve\n")
    stamp = changed.stat().st_mtime_ns
    _solve(runner, args, tmp_path / "run")
    for p in logs:
        if p != changed:
            assert (p.stat().st_mtime_ns, p.read_text()) == before[p], f"{p.name} rewritten with the same text"
    assert changed.read_text() == before[changed][1] and changed.stat().st_mtime_ns >= stamp


def test_write_text_unless_same(tmp_path):
    from specs.io import write_text_unless_same

    p = tmp_path / "x.log"
    assert write_text_unless_same(p, "one\n") and p.read_text() == "one\n"
    assert not write_text_unless_same(p, "one\n")
    assert write_text_unless_same(p, "two\n") and p.read_text() == "two\n"
    assert write_text_unless_same(p, "twx\n") and p.read_text() == "twx\n"  # same size, other text
    assert write_text_unless_same(p, "two!\n") and p.read_text() == "two!\n"


def test_the_cheapest_answers_use_the_frontiers_tables(tmp_path, runner, monkeypatch, tiny):
    """The cheapest clusters (the lowest bill, the one meeting the need) are searched on the column
    tables their plan's frontier built (solver.replicas.cheapest_of_plans): each provider's table of
    a plan is built once a solve."""
    built: list[tuple[str, int]] = []
    real = solver.frontier.column_table

    def counted(spec, catalog, contexts, provider, max_cluster):
        built.append((provider, id(contexts)))
        return real(spec, catalog, contexts, provider, max_cluster)

    monkeypatch.setattr(solver.frontier, "column_table", counted)
    _solve(runner, [*_args(tiny), "--no-cache"], tmp_path / "run")
    assert built and len(built) == len(set(built)), built
