"""What the design tables share between memory sizes, workloads and shard sizes changes no bit:
the layouts of every buffer built from one buffer's (solver.space.Grid.layouts), the memory splits
of a shard's memory sizes as views of its families' batches with the Monkey rates solved once per
hot level count (solver.tables.grid_eval.grid_splits, cost_models.layout.MonkeyMemo), the demands' shape
terms shared by the expected and the noisy mix (cost_models.cpu.shape_terms), combine's terms of
a memory split shared by the workloads' structures (cost_models.io_model.split_terms), the
costs' cascades taken whole (cost_models.io_model.IOCost.take, .flat) and the block cache's hit
rates solved once per distinct (cache, block) row (cost_models.io_model.cache_alpha)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cost_models.cloud import GIB
from cost_models.design import Design, DesignBatch
from cost_models.evaluate import workload_partitions
from cost_models.io_model import (
    IOCost,
    _cache_alpha_rows,
    cache_alpha,
    combine,
    index_cache_alpha,
    range_cache_alpha,
    split_terms,
    window_tables,
)
from cost_models.layout import Layout, split_memory
from cost_models.phi import load_phi
from cost_models.range_filter import layout_fpr
from cost_models.robust import perturbed_workload
from cost_models.serving import served_demands, spec_served
from solver.space import Grid, fanout_nodes, grid_for
from solver.tables import grid_eval as TG
from solver.tables import scoring as TS
from specs.schema import parse_spec

SPEC = """
name: sharing
workload:
  entries: {entries}
  key_bytes: 16
  value_bytes: 200
  operations: {{get: 0.4, update: 0.3, insert: 0.1, range: 0.1, empty_get: 0.1}}
  distribution: {{get: {{kind: zipfian, theta: 0.99}}, put: {{kind: zipfian, theta: 0.99}}}}
budget: {{monthly_usd: 900}}
providers: [aws]
design: {{size_ratio: [2, 8], block_bytes: [4096, 32768], memory_step: 0.25}}
robustness: {{noise: 0.1, tolerance: 0.1}}
"""


def _same(a: object, b: object) -> bool:
    """Every field of two dataclasses (arrays bit for bit, NaNs equal)."""
    for f in dataclasses.fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                return False
        elif dataclasses.is_dataclass(x):
            if not _same(x, y):
                return False
        elif x != y:
            return False
    return True


@pytest.mark.parametrize("classes", [("lsm", "btree", "lsh", "hybrid"), ("btree",), ("lsh",), ("lsm", "lsh")])
def test_layouts_are_each_buffers_designs(classes: tuple[str, ...]) -> None:
    grid = Grid(T=(2, 4, 10), bits=(0.0, 5.0), blocks=(4096, 16384), buffer_ratio=3.5, epsilon=0.25, max_runs=4,
                classes=classes)  # fmt: skip
    for memory, data in ((64 * GIB, 1e12), (8 * GIB, 3e8), (1e9, 1e4)):
        want: list[Design] = []
        for buf in grid.buffers(memory, data):
            for blk in grid.blocks:
                if set(classes) & {"lsm", "btree", "hybrid"}:
                    for t in grid.T:
                        for k in grid.K(t):
                            for z in grid.Z(t):
                                want.append(Design(T=t, K=k, Z=z, buffer_bytes=buf, bloom_bits=0.0, block_bytes=blk))
                if "lsh" in classes:
                    want.append(Design(buffer_bytes=buf, bloom_bits=0.0, block_bytes=blk, lsh=True))
        assert want
        assert _same(grid.layouts(memory, data), DesignBatch.of(want))


def _splits(spec_text: str) -> tuple[list[TG.Splits], list[TG.Splits], list[list[Layout]]]:
    """A shard's splits over ascending memory sizes from one prep (views, Monkey memo); each
    memory size's from a fresh prep (no memo history); and each split's layouts split from rows
    taken from the family (copies, no memo)."""
    spec = parse_spec(spec_text)
    wl = spec.workload
    grid = grid_for(spec)
    parts = workload_partitions(wl)
    s = float(wl.entries)
    wins = [window_tables(parts, w.operations, s) for w in TG.workloads(spec)]
    mems = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0]
    top = mems[-1] * GIB * (1 - spec.design.memory_headroom)
    prep = TG.shard_prep(spec, grid, s, parts, wins, top)
    shared = [TG.grid_splits(spec, grid, s, m, prep) for m in mems]
    fresh = [TG.grid_splits(spec, grid, s, m, TG.shard_prep(spec, grid, s, parts, wins, top)) for m in mems]
    taken: list[list[Layout]] = []
    for m, splits in zip(mems, shared, strict=True):
        mem = m * GIB * (1 - spec.design.memory_headroom)
        fits = TG.buffer_fits(spec, grid, s, m, prep.lays)
        groups = [g for g in TG._split_groups(grid, prep) if (fits & (prep.lays.lsh == g.is_lsh)).any()]
        assert len(groups) == len(splits)
        rows = [TG._repeat_pos(g, sp.sel) for g, sp in zip(groups, splits, strict=True)]
        taken.append([split_memory(g.shape.take(r), g.batch.take(r), mem) for g, r in zip(groups, rows, strict=True)])
    return shared, fresh, taken


@pytest.mark.parametrize("entries", [3_000_000, 300_000_000])
def test_splits_over_memory_sizes_equal_fresh_ones(entries: int) -> None:
    shared, fresh, taken = _splits(SPEC.format(entries=entries))
    for a, b, c in zip(shared, fresh, taken, strict=True):
        assert len(a) == len(b) == len(c)
        for x, y, lay in zip(a, b, c, strict=True):
            assert np.array_equal(x.sel, y.sel) and x.m == y.m
            assert _same(x.batch, y.batch) and _same(x.lay, y.lay) and _same(x.lay, lay)
    if entries < 100_000_000:
        return  # (3 GB of data: every filtered design is hot from the smallest size on)
    # the memo had to solve rows again: some design's hot levels change between memory sizes
    changed = 0
    for a, b in zip(shared[:-1], shared[1:], strict=True):
        for x, y in zip(a, b, strict=True):
            n = min(x.lay.hot.shape[0], y.lay.hot.shape[0])
            changed += int(((x.lay.hot[:n] != y.lay.hot[:n]).any(axis=1) & (x.batch.bloom_bits[:n] > 0)).sum())
    assert changed > 0


def test_shared_shape_terms_change_no_demand() -> None:
    """design_demands shares the designs' shape terms between the expected and the noisy mix:
    the demands equal each mix's own."""
    spec = parse_spec(SPEC.format(entries=30_000_000))
    wl = spec.workload
    assert perturbed_workload(spec).scan_length == wl.scan_length
    grid = grid_for(spec)
    parts = workload_partitions(wl)
    s = float(wl.entries)
    wins = [window_tables(parts, w.operations, s) for w in TG.workloads(spec)]
    prep = TG.shard_prep(spec, grid, s, parts, wins, 8 * GIB)
    ge = TG.evaluate_splits(spec, s, parts, TG.grid_splits(spec, grid, s, 8.0, prep), prep, load_phi())
    assert ge is not None and ge.io_p is not None
    idx = np.flatnonzero(ge.ok)
    de, dp = TS.design_demands(spec, ge, idx)
    shape = ge.shape.take(idx)
    # served demands (issue 48), the node of one shard (entries = N), its scans tabled at the most
    # nodes below the next breakpoint (solver.space.fanout_nodes: its own 1)
    f = fanout_nodes(spec, s)
    assert f == 1
    own = served_demands(load_phi(), ge.io.map(lambda v: v[idx]), shape, spec_served(spec, wl, f), wl.scan_length)
    pw = perturbed_workload(spec)
    own_p = served_demands(load_phi(), ge.io_p.map(lambda v: v[idx]), shape, spec_served(spec, pw, f), pw.scan_length)
    assert dp is not None and own_p is not None
    assert _same(de, own) and _same(dp, own_p)


def test_take_and_flat_equal_map() -> None:
    rng = np.random.default_rng(7)
    n, m, lm = 5, 3, 4
    from cost_models.io_model import Cascades

    def cost(shape: tuple[int, ...]) -> IOCost:
        ops = {op: rng.random(shape) for op in ("get", "empty_get", "range", "insert", "update", "rmw", "empty_range")}
        casc = Cascades(rng.random((*shape, lm)), rng.random((*shape, lm)), rng.random(shape))
        index = IOCost.of({k: rng.random(shape) for k in ops})
        return dataclasses.replace(IOCost.of(ops, get_buffered=rng.random(shape)), index=index, cascades=casc)

    flat = cost((n, m))
    assert _same(flat.flat(), flat.map(np.ravel))
    one = flat.map(np.ravel)
    rows = np.array([4, 0, 7, 7, 14])
    assert _same(one.take(rows), one.map(lambda v: v[rows]))


def test_workloads_share_combines_split_terms() -> None:
    """_evaluate combines a split with each workload's structure from the split terms of the
    first: the costs equal each combine's own."""
    spec = parse_spec(SPEC.format(entries=30_000_000))
    wl = spec.workload
    grid = grid_for(spec)
    parts = workload_partitions(wl)
    s = float(wl.entries)
    wins = [window_tables(parts, w.operations, s) for w in TG.workloads(spec)]
    prep = TG.shard_prep(spec, grid, s, parts, wins, 4 * GIB)
    checked = 0
    for sp in TG.grid_splits(spec, grid, s, 4.0, prep):
        lay, n, m = sp.lay, sp.sel.size, sp.m
        abc = cache_alpha(lay.mem_cache, lay.B, lay.entry_bytes, parts, s, wins[0][1])
        arc = range_cache_alpha(lay.mem_cache, lay.B, lay.entry_bytes, parts, s, wins[0][1], wl.scan_length)
        args = (
            sp.sel,
            lay.fpr.reshape(n, m, -1),
            lay.hot.reshape(n, m, -1),
            abc.reshape(n, m, -1),
            parts.p_get,
            layout_fpr(lay.range_bits, wl.empty_range_width).reshape(n, m),
            arc.reshape(n, m, -1),
            index_cache_alpha(lay).reshape(n, m),
        )
        assert len(sp.sts) == 2
        terms = split_terms(sp.sts[0], *args)
        for st in sp.sts:
            assert _same(combine(st, *args, terms=terms).flat(), combine(st, *args).flat())
            checked += 1
    assert checked >= 4


def test_cache_alpha_per_distinct_row_equals_every_row() -> None:
    """cache_alpha solves each distinct (cache bytes, block entries) pair once: bit for bit what
    solving every row gives, on a shard's splits (which repeat the pairs) and on rows with zero,
    tiny and shard-holding caches."""
    spec = parse_spec(SPEC.format(entries=300_000_000))
    wl = spec.workload
    grid = grid_for(spec)
    parts = workload_partitions(wl)
    s = float(wl.entries)
    wins = [window_tables(parts, w.operations, s) for w in TG.workloads(spec)]
    prep = TG.shard_prep(spec, grid, s, parts, wins, 16 * GIB)
    repeated = 0
    for mem in (1.0, 4.0, 16.0):
        for sp in TG.grid_splits(spec, grid, s, mem, prep):
            lay = sp.lay
            pairs = {(float(c), float(b)) for c, b in zip(lay.mem_cache, lay.B, strict=True)}
            repeated += lay.mem_cache.size - len(pairs)
            for cache in (lay.mem_cache, lay.mem_cache / (1.0 + wl.scan_length / lay.B)):
                got = cache_alpha(cache, lay.B, lay.entry_bytes, parts, s, wins[0][1])
                want = _cache_alpha_rows(cache, lay.B, lay.entry_bytes, parts, s, wins[0][1])
                assert got.shape == want.shape and np.array_equal(got, want)
    assert repeated > 0
    edge = np.array([0.0, 1.0, 4096.0 * 8, 1e6, 1e6, 0.0, 1e18, 4096.0 * 8])
    blocks = np.array([8.0, 8.0, 8.0, 8.0, 64.0, 64.0, 8.0, 8.0])
    got = cache_alpha(edge, blocks, 216, parts, s, wins[0][1])
    assert np.array_equal(got, _cache_alpha_rows(edge, blocks, 216, parts, s, wins[0][1]))
