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
