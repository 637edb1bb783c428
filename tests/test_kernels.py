"""The compiled evaluator against the numpy path, its reference (issue 50).

The fused kernels (cost_models.kernels_numba) compose the scalar functions sympy prints from the
one model (cost_models.symbolic_scalar); the numpy path composes the numpy functions it prints
(cost_models.symbolic_compiled). Every column of the design tables, Cosine's and every preset's,
built both ways for ycsb_a, demo_ycsb_a and ycsb_e at several shard sizes, must agree to 1e-9
relative, field by field; so must each kernel against its numpy function on edge cases."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cost_models import kernels, symbolic
from cost_models.evaluate import workload_partitions
from cost_models.phi import load_phi
from cost_models.pricing.catalog import load_catalog
from cost_models.windows import distinct_keys, window
from solver.space import cluster_cap, grid_for, shard_counts
from solver.tables import build as TB
from specs.schema import load_spec
from specs.vocab import PRESETS

pytest.importorskip("numba")

SPECS = Path(__file__).resolve().parent.parent / "specs"
REL = 1e-9


def _close(a: Any, b: Any, where: str) -> None:
    """``a`` equals ``b`` to :data:`REL` relative in every float, exactly elsewhere."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _close(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _close(a[k], b[k], f"{where}[{k}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float | np.floating | np.ndarray) and not isinstance(a, np.ndarray) or isinstance(a, float):
        assert math.isclose(float(a), float(b), rel_tol=REL, abs_tol=1e-300) or (
            math.isnan(float(a)) and math.isnan(float(b))
        ), f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _job(spec_name: str, k: int) -> dict[str, list[Any]]:
    spec = load_spec(SPECS / f"{spec_name}.yaml")
    cat = load_catalog(spec.pricing)
    provs = tuple(p for p in spec.providers if cat.vms.get(p)) or tuple(sorted(cat.vms))
    vms = [vm for p in provs for vm in cat.vms[p]]
    args = ((spec,), cat, grid_for(spec), spec.workload.entries / k, vms, workload_partitions(spec.workload), PRESETS)
    return TB.shard_job((*args, load_phi()))[0]


def _shards(spec_name: str) -> list[int]:
    """The spec's smallest, a middle and its largest shard count (of solver.space.shard_counts)."""
    spec = load_spec(SPECS / f"{spec_name}.yaml")
    cat = load_catalog(spec.pricing)
    provs = tuple(p for p in spec.providers if cat.vms.get(p)) or tuple(sorted(cat.vms))
    counts = shard_counts(min(cluster_cap(spec, cat, provs), spec.workload.entries))
    return sorted({counts[0], counts[len(counts) // 2], counts[-1]})


@pytest.mark.parametrize("spec_name", ["ycsb_a", "demo_ycsb_a", "ycsb_e", "ycsb_d"])
def test_every_column_matches_the_numpy_path(spec_name: str) -> None:
    kernels.load()
    assert kernels.numba_kernels() is not None, "numba is a dependency: the kernels must load"
    for k in _shards(spec_name):
        fast = _job(spec_name, k)
        with kernels.reference():
            assert kernels.numba_kernels() is None
            ref = _job(spec_name, k)
        assert ref["cosine"], f"{spec_name} at {k} shards: no column"
        _close(fast, ref, f"{spec_name}@{k}")


def test_level_cache_kernel_matches_the_numpy_path() -> None:
    """Che's per-level cache hits of 'latest' gets (io_model.level_cache_alpha) compiled against
    numpy on random designs: caches below, inside and past the blocks read, levels never read."""
    from cost_models.io_model import level_cache_alpha

    rng = np.random.default_rng(5)
    n, m, lv, parts = 40, 3, 5, 7
    found = rng.uniform(0, 1, (n, lv, parts)) * (rng.uniform(size=(n, lv, 1)) > 0.2)
    fp = rng.uniform(0, 0.3, (n, lv, parts))
    probe = rng.uniform(0, 1, (n, m, lv))
    p_get = rng.dirichlet(np.ones(parts))
    blocks = rng.uniform(0, 1e4, (n, lv)) * (rng.uniform(size=(n, lv)) > 0.1)
    cache = rng.choice([0.5, 10.0, 1e3, 3e4, 1e9], (n, m))
    kernels.load()
    fast = level_cache_alpha(found, blocks, fp, probe, p_get, cache)
    with kernels.reference():
        ref = level_cache_alpha(found, blocks, fp, probe, p_get, cache)
    assert 0 < np.count_nonzero((ref > 0) & (ref < 1)) < ref.size, "partial hits were compared"
    np.testing.assert_allclose(fast, ref, rtol=REL, atol=1e-300)


def test_scalar_helpers_match_the_numpy_helpers() -> None:
    from cost_models.scalar_helpers import geom, geom1

    a = np.array([0.0, -0.1, 1e-9, 1e-5, 0.01, 0.3, 0.999999, 1.0, 1.5, np.nan, 0.2, 0.2, 0.2, np.inf])
    n = np.array([0.0, 3.0, 5.0, 2.5, 40.0, 7.0, 1e6, 3.0, 0.5, 2.0, np.nan, np.inf, 0.0, 4.0])
    with np.errstate(all="ignore"):
        for ours, ref in ((geom, symbolic._geom), (geom1, symbolic._geom1)):
            want = ref(a, n)
            got = np.array([ours(float(x), float(y)) for x, y in zip(a, n, strict=True)])
            np.testing.assert_allclose(got, want, rtol=REL, equal_nan=True)


def test_window_kernels_match_the_numpy_path() -> None:
    spec = load_spec(SPECS / "ycsb_e.yaml")
    put = workload_partitions(spec.workload).put
    counts = np.array([0.5, 1.0, 7.0, 1e3, 123456.7, 9.99e6, 1e7, 2e7, np.inf])
    puts = np.array([0.0, 1.0, 1e3, 1e7, 1e12, np.inf])
    kernels.load()
    for iota in (0.0, 0.05, 1.0):
        fast_w, fast_d = window(counts, put, 1e7, iota), distinct_keys(puts, put, 1e7, iota)
        with kernels.reference():
            ref_w, ref_d = window(counts, put, 1e7, iota), distinct_keys(puts, put, 1e7, iota)
        # (distinct_part is U (1 - exp(-x)): at one put, x ~ 1e-7, one ulp of exp — numpy's and
        # the C library's differ by that — is 1e-9 of the result; the columns are held to REL)
        np.testing.assert_allclose(fast_w, ref_w, rtol=1e-8)
        np.testing.assert_allclose(fast_d, ref_d, rtol=1e-8)


def test_generated_scalar_model_is_current() -> None:
    """cost_models/symbolic_scalar.py is exactly what sympy prints for today's expressions."""
    assert symbolic.GENERATED_SCALAR.read_text() == symbolic.generate_scalar_source(), (
        "regenerate it: python -m cost_models.symbolic"
    )


def test_numba_is_loaded_only_to_build_tables() -> None:
    """A process that builds no table (a warm solve's exact re-evaluation, ``cosine whatif``)
    runs the numpy path and never pays numba's start-up."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from cost_models.evaluate import workload_partitions\n"
        "from cost_models.windows import window\n"
        "from specs.schema import load_spec\n"
        f"spec = load_spec({str(SPECS / 'ycsb_a.yaml')!r})\n"
        "window(np.array([10.0, 1e4]), workload_partitions(spec.workload).put, 1e6, 0.0)\n"
        "assert 'numba' not in sys.modules, 'numba was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=SPECS.parent)


@pytest.mark.parametrize("d", [3, 4, 6])
def test_pareto_kernel_matches_the_numpy_path(d: int) -> None:
    from cost_models.pareto import pareto_mask

    kernels.load()
    rng = np.random.default_rng(d)
    for n in (1, 5, 300, 3000):
        c = rng.integers(0, 6, size=(n, d)).astype(float)  # many ties and identical rows
        c[rng.random(n) < 0.05, rng.integers(0, d)] = np.nan
        c[rng.random(n) < 0.05, rng.integers(0, d)] = np.inf
        fast = pareto_mask(c)
        with kernels.reference():
            ref = pareto_mask(c)
        assert np.array_equal(fast, ref)
        # the compiled order is numpy's stable lexicographic one of the rows without a NaN
        k = kernels.numba_kernels()
        assert k is not None
        idx = np.flatnonzero(~np.isnan(c).any(axis=1))
        assert np.array_equal(k.lex_order(c), idx[np.lexsort(c[idx].T[::-1])])
    assert not pareto_mask(np.full((4, d), np.nan)).any()


@pytest.mark.parametrize("spec_name", ["ycsb_a", "ycsb_e"])
def test_memory_split_kernels_match_the_numpy_path(spec_name: str) -> None:
    """cost_models.layout.split_memory compiled (split_levels, split_use) against numpy on the
    grid's every layout and filter setting at memory sizes from too small for any buffer to past
    every level hot: which levels are hot, their filters, the memory each part takes, the cache
    left and feasibility, field by field; with and without the Monkey memo."""
    from cost_models.io_model import window_tables
    from cost_models.layout import MonkeyMemo, split_memory
    from solver.tables.grid_eval import _split_groups, shard_prep, workloads

    spec = load_spec(SPECS / f"{spec_name}.yaml")
    grid = grid_for(spec)
    parts = workload_partitions(spec.workload)
    s = spec.workload.entries / 40
    wins: list[Any] = []
    for w in workloads(spec):
        wins.append(window_tables(parts, w.operations, s, wins[0][1] if wins else None))
    kernels.load()
    prep = shard_prep(spec, grid, s, parts, wins, 512 * 2**30)
    groups = _split_groups(grid, prep)
    assert len(groups) >= 2
    for g in groups:
        memo = MonkeyMemo(*g.shape.sized.shape)
        for mem in (1e6, 3e8, 2**31, 5e10, 512 * 2**30):
            fast = split_memory(g.shape, g.batch, mem, monkey=memo)
            with kernels.reference():
                ref = split_memory(g.shape, g.batch, mem)
            for f in dataclasses.fields(ref):
                a, b = getattr(fast, f.name), getattr(ref, f.name)
                where = f"{spec_name} at {mem:.3g} bytes: {f.name}"
                if isinstance(b, np.ndarray) and b.dtype.kind == "f":
                    np.testing.assert_allclose(a, b, rtol=REL, atol=1e-300, equal_nan=True, err_msg=where)
                elif isinstance(b, np.ndarray):
                    assert np.array_equal(a, b), where
                else:
                    _close(a, b, where)
        assert 0 < np.count_nonzero(ref.hot) < ref.hot.size or g.is_lsh


def test_row_scatter_kernels_match_the_numpy_path() -> None:
    """solver.tables.grid_eval.scatter_rows compiled against numpy: one value per design or one per
    level (the shallower tree padded with zeros, either side deeper), with and without fresh rows."""
    from solver.tables.grid_eval import scatter_rows

    rng = np.random.default_rng(7)
    n = 50
    perm = rng.permutation(n)
    fresh_at, old_at = np.sort(perm[:20]), np.sort(perm[20:])
    old_rows = rng.integers(0, 40, old_at.size)
    kernels.load()
    cases: list[tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]] = [
        (rng.random(20), rng.random(40), fresh_at, old_at),
        (rng.random((20, 3)), rng.random((40, 5)), fresh_at, old_at),
        (rng.random((20, 6)), rng.random((40, 2)), fresh_at, old_at),
        (None, rng.random((40, 4)), np.zeros(0, dtype=np.int64), np.arange(n)),
        (None, rng.random(40), np.zeros(0, dtype=np.int64), np.arange(n)),
    ]
    for fresh, old, f_at, o_at in cases:
        rows = old_rows if o_at.size == old_at.size else rng.integers(0, 40, o_at.size)
        fast = scatter_rows(n, f_at, fresh, o_at, old, rows)
        with kernels.reference():
            ref = scatter_rows(n, f_at, fresh, o_at, old, rows)
        assert fast.shape == ref.shape and fast.dtype == ref.dtype
        assert np.array_equal(fast, ref)


@pytest.mark.parametrize("d", [3, 5])
def test_grouped_pareto_is_each_groups_front(d: int) -> None:
    """pareto_mask_grouped, compiled and on the numpy path, is pareto_mask of each group on its own:
    rows with many ties, identical rows, NaN and inf, in groups given as labels in any order."""
    from cost_models.pareto import pareto_mask, pareto_mask_grouped

    kernels.load()
    rng = np.random.default_rng(10 + d)
    for n in (1, 7, 400, 3000):
        c = rng.integers(0, 5, size=(n, d)).astype(float)
        c[rng.random(n) < 0.05, rng.integers(0, d)] = np.nan
        c[rng.random(n) < 0.05, rng.integers(0, d)] = np.inf
        groups = rng.choice([7, -2, 30], n)
        want = np.zeros(n, dtype=bool)
        for g in np.unique(groups):
            rows = np.flatnonzero(groups == g)
            want[rows[pareto_mask(c[rows])]] = True
        assert np.array_equal(pareto_mask_grouped(c, groups), want)
        with kernels.reference():
            assert np.array_equal(pareto_mask_grouped(c, groups), want)
