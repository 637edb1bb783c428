"""Each formula against a value worked out by hand for a tiny case.

The working is written next to each assertion. The functions under test are the
compiled sympy expressions (cost_models.symbolic) and the model composed from them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_models.design import Design, DesignBatch
from cost_models.distributions import harmonic, marginal, partitions
from cost_models.io_model import io_costs, overwrites_keys
from cost_models.layout import derive
from cost_models.symbolic import compiled, derived
from cost_models.windows import window
from specs.schema import Distribution

C = compiled()
UNI = Distribution("uniform")


def test_bloom_fpr_10_bits():
    # ln 2 = 0.693147, ln^2 2 = 0.480453; 10 bits -> exp(-4.80453) = 0.0081925
    # (e^-4.8 = 0.0082297, e^-0.00453 = 0.99548)
    assert C["bloom_fpr"](10.0) == pytest.approx(0.0081925, rel=1e-4)
    # inverse: bits for 1% FPR = -ln(0.01) / 0.480453 = 4.60517 / 0.480453 = 9.5851
    assert C["bloom_bits"](0.01) == pytest.approx(9.5851, rel=1e-4)


def test_coupon_collector():
    # f(V, M) = V ln(V / (V - M + 1)); f(100, 10) = 100 ln(100/91) = 9.4311
    assert C["coupon_collector"](100.0, 10.0) == pytest.approx(9.4311, rel=1e-4)


def test_window_inverts_uniform_distinct_count():
    # One uniform partition of U = 1000 keys, updates only: distinct(W) = 1000 (1 - e^{-W/1000}).
    # 500 distinct keys need W = -1000 ln(0.5) = 693.147 puts; the report's
    # coupon collector f(1000, 500) = 1000 ln(1000/501) = 691.15 (within 0.3%).
    w = window(np.array([500.0]), marginal(UNI, 1000), 1000, 0.0)[0]
    assert w == pytest.approx(693.147, rel=1e-4)
    assert w == pytest.approx(C["coupon_collector"](1000.0, 500.0), rel=5e-3)
    # Inserts only (iota = 1): every put is a new key, W = R.
    assert window(np.array([500.0]), marginal(UNI, 1000), 1000, 1.0)[0] == pytest.approx(500.0, rel=1e-6)


def test_run_sum_and_survival():
    # Runs of a level: sum_{r=1}^{4} (A - B r) x^r with A = 1, B = 0.1, x = 0.7:
    # 0.9*0.7 + 0.8*0.49 + 0.7*0.343 + 0.6*0.2401 = 0.63 + 0.392 + 0.2401 + 0.14406 = 1.40616
    assert C["run_sum"](1.0, 0.1, 0.3, 4.0) == pytest.approx(1.40616)
    # alpha -> 0 (no updates reach the partition): sum (A - B r) = 4 - 0.1*10 = 3
    assert C["run_sum"](1.0, 0.1, 0.0, 4.0) == pytest.approx(3.0)
    # survival of a key after 200 inserts into 1000 keys: 1 - 200/1000 = 0.8
    assert C["survival"](200.0, 1000.0, 1.0, 1.0, 1000.0) == pytest.approx(0.8)
    # after 693.15 uniform updates of 1000 keys: e^{-0.69315} = 0.5
    assert C["survival"](693.147, 1000.0, 1.0, 0.0, 1000.0) == pytest.approx(0.5, rel=1e-5)


def test_merge_cost():
    # read 1000 incoming + write 1000, plus rewrite (read+write) a 500-entry run,
    # B = 10, over 2000 puts: ((1000 + 1000)/10 + 2*500/10) / 2000 = 0.15
    assert C["merge_cost"](1.0, 1000.0, 1.0, 500.0, 10.0, 2000.0) == pytest.approx(0.15)


def test_wal_append():
    # one 1024-byte entry per put into 4096-byte WAL pages: 1/4 page per put
    assert C["wal_append"](1024.0, 4096.0) == pytest.approx(0.25)


def test_log_append_and_amdahl():
    # every append kills a version, GC at half dead, B = 4: (1 + 1*1.5/0.5)/4 = 1.0
    assert C["log_append"](1.0, 0.5, 4.0) == pytest.approx(1.0)
    # phi = 0.9, eta = 4: 1 / (1 - 0.9 * 0.75) = 3.0769
    assert C["amdahl"](0.9, 4.0) == pytest.approx(3.0769, rel=1e-4)
    # S = 0.1 ms serial, P = 0.9 ms parallel, D = 0.5 ms device wait on 4 threads:
    # 1 / (0.1 + 1.4 / 4) ms = 2222.2 ops/s; on 4 cores with G = 0.2 ms of background:
    # 1/X = 0.1 ms + 0.9 ms / (4 - 0.2 ms X) -> X = 2768.89 ops/s (4 - 0.5538 = 3.4462 cores;
    # 0.1 + 0.9 / 3.4462 = 0.36116 ms)
    assert C["throughput_threads"](1e-4, 9e-4, 5e-4, 4.0) == pytest.approx(2222.22, rel=1e-5)
    assert C["throughput_shared_cores"](1e-4, 9e-4, 2e-4, 4.0) == pytest.approx(2768.89, rel=1e-5)
    # 0.5 I/O per op at 1000 IOPS: 2000 ops/s
    assert C["throughput_io"](1000.0, 0.5) == pytest.approx(2000.0)


def test_harmonic_numbers():
    # H(4, 1) = 1 + 1/2 + 1/3 + 1/4 = 2.08333
    assert harmonic(4, 1.0) == pytest.approx(25 / 12)
    # H(n, 0.99) past the exact range agrees with brute force to 1e-9
    n = 30_000
    brute = float(np.sum(np.arange(1, n + 1, dtype=float) ** -0.99))
    assert harmonic(n, 0.99) == pytest.approx(brute, rel=1e-9)


@pytest.mark.parametrize("sd", [0.1, 1e-6, 1e-12])
def test_normal_bins_are_stddev_halves_at_any_stddev(sd):
    # 16 bins of stddev/2 over mean +- 4 stddev, plus the rest of the key space: an absolute margin
    # on arange's stop added bins once the stddev neared it (19 edges at 1e-12, 2e288 at 1e-300)
    m = marginal(Distribution("normal", mean=0.5, stddev=sd), 1e8)
    assert m.frac.size == 17
    assert m.frac[:16] == pytest.approx(np.full(16, sd / 2), rel=1e-3)
    assert m.prob.sum() == pytest.approx(1.0)


def _tiny(N: float, mix: dict[str, float], scan: float = 1.0, **kw):
    # key 8 B + value 92 B = 100 B entries; buffer 100 entries; 4 entries per block
    d = Design(
        T=10,
        K=1,
        Z=1,
        buffer_bytes=100 * 100,
        bloom_bits=kw.get("bits", 0.0),
        bloom_allocation="uniform",
        block_bytes=400,
    )
    lay = derive(DesignBatch.of([d]), N, 8, 92, 1e12, overwrites=overwrites_keys(mix))
    from dataclasses import replace

    lay = replace(lay, mem_cache=np.zeros(1))
    return lay, io_costs(lay, partitions(UNI, UNI, N), mix, scan)


def test_levels_and_occupancy():
    # E_B = 100, T = 10: level capacities 1000, 10000; N = 5000 -> L = 2.
    # Level 1 is half full on average (500); the last level holds the rest (4500).
    lay, _ = _tiny(5000, {"get": 1.0})
    assert lay.L[0] == 2 and lay.Y[0] == 0
    assert lay.occ[0, 0] == pytest.approx(500) and lay.occ[0, 1] == pytest.approx(4500)


def test_single_result_lookup_one_level():
    # N = 500 fits level 1 (cap 1000): one run with every key, no filter, no cache.
    # Read-only: the buffer holds the newest 50 of 500 keys, alpha0 = 0.1, so
    # sigma_l = 1 - 0.1 = 0.9 (the key's block, unless it is in the buffer).
    _, io = _tiny(500, {"get": 1.0})
    assert io.get[0] == pytest.approx(0.9, rel=1e-6)


def test_no_result_lookup_with_filters():
    # Two hot levels, one run each, 10 bits/key: 2 * 0.0081925 = 0.016385
    _, io = _tiny(5000, {"empty_get": 1.0}, bits=10.0)
    assert io.empty_get[0] == pytest.approx(2 * 0.0081925, rel=1e-3)


def test_range_cost():
    # 50 of 5000 keys: s = 0.01. Level 1: 1 + 0.01*500/4 = 2.25 blocks; level 2:
    # 1 + 0.01*4500/4 = 12.25 blocks. Total 14.5.
    _, io = _tiny(5000, {"range": 1.0}, scan=50)
    assert io.range[0] == pytest.approx(14.5)


def test_put_cost_leveling_inserts():
    # Inserts only (each put is a new key), B = 4.
    # Flush into level 1 (one run of capacity 1000): each 100-entry flush is
    # written (25 blocks) and merged into the run, which holds 0, 100, .., 900
    # entries at those merges: 450 on average, read and rewritten (225 blocks);
    # once per 100 puts -> 2.5 per put.
    # Level 1 -> 2 (the last level, its run holds 4500): read + write 1000
    # entries (500 blocks) and 4500 (2250 blocks) every 1000 puts -> 2.75.
    # The WAL appends each 100-byte put once into 4096-byte pages: 100/4096.
    _, io = _tiny(5000, {"insert": 1.0})
    assert io.insert[0] == pytest.approx(5.25 + 100 / 4096, rel=1e-6)
    assert io.update[0] == pytest.approx(io.insert[0])


def test_generated_module_is_the_expressions():
    """cost_models/symbolic_compiled.py is exactly what sympy prints for today's expressions."""
    from cost_models.symbolic import GENERATED, generate_source

    assert GENERATED.read_text() == generate_source(), "regenerate it: python -m cost_models.symbolic"


def test_run_time_loads_no_code_from_a_cache(tmp_path):
    """A model evaluation imports no sympy and reads nor writes any cache directory."""
    import os
    import subprocess
    import sys

    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "HOME": str(tmp_path)}
    code = "from cost_models.symbolic import compiled; import sys; compiled(); print('sympy' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False" and not cache.exists()


def test_compiled_matches_fresh_derivation():
    fresh = derived()
    x = np.linspace(0.01, 0.99, 7)
    for name in ("alpha_window", "run_sum", "merge_cost", "throughput_shared_cores", "throughput_threads"):
        n_args = len(fresh[name].args)
        args = [x + i * 0.1 for i in range(n_args)]
        assert np.allclose(C[name](*args), fresh[name](*args), equal_nan=True)


def test_monkey_beats_uniform_for_the_same_memory():
    # Monkey's allocation never has a higher sum of FPRs than uniform bits.
    kw = dict(T=10, K=1, Z=1, buffer_bytes=100 * 100, bloom_bits=5.0, block_bytes=400)
    mk = derive(DesignBatch.of([Design(**kw, bloom_allocation="monkey")]), 1e6, 8, 92, 1e12, overwrites=False)
    un = derive(DesignBatch.of([Design(**kw, bloom_allocation="uniform")]), 1e6, 8, 92, 1e12, overwrites=False)
    assert mk.mem_filter[0] == pytest.approx(un.mem_filter[0], rel=1e-3)
    assert (mk.runs * mk.fpr)[mk.exists].sum() < (un.runs * un.fpr)[un.exists].sum()
    assert math.isfinite(mk.fpr[mk.exists].sum())


def _geom1_everywhere(alpha, n):
    """geom1 with every form computed on every element, then picked (the reference)."""
    a, nn = np.asarray(alpha, dtype=float), np.asarray(n, dtype=float)
    small = a * np.maximum(nn, 1.0) < 1e-4
    safe = np.where(small | (a <= 0), 0.5, np.minimum(a, 1.0))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        xn = np.exp(nn * np.log1p(-np.minimum(safe, 1.0 - 1e-300)))
        closed = (1 - (nn + 1) * xn + nn * xn * (1 - safe)) / (safe * safe)
        series = nn * (nn + 1) / 2 - a * (nn - 1) * nn * (nn + 1) / 3
    return np.where(small | (a <= 0), series, np.where(a >= 1.0, np.minimum(nn, 1.0), closed))


def _geom_everywhere(alpha, n):
    """geom with the closed form computed on every element, then picked (the reference)."""
    a, nn = np.asarray(alpha, dtype=float), np.asarray(n, dtype=float)
    safe = np.where(a > 0, a, 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        val = -np.expm1(np.where(nn > 0, nn * np.log1p(-np.minimum(safe, 1.0)), 0.0)) / safe
    return np.where(a > 0, val, nn)


def test_geom_forms_only_where_they_apply():
    # _geom and _geom1 compute each form only on its own elements: bit for bit (signed zeros and
    # infinities included; NaNs where they were, whose sign bit numpy itself does not keep from
    # one array length to another) what computing every form everywhere and picking gives
    from cost_models.symbolic import _geom, _geom1

    rng = np.random.default_rng(7)
    alphas = np.array([0.0, -0.0, 1e-320, 1e-9, 1e-5, 3e-5, 0.3, 0.999, 1 - 1e-16, 1.0, 1.5, np.inf, -1.0, np.nan])
    ns = np.array([0.0, 0.5, 1.0, 2.0, 7.0, 1e6, 1e300, np.inf, np.nan, -1.0])
    cases = [
        (alphas[:, None], ns[None, :]),
        (rng.random((40, 15)) ** rng.integers(1, 40, (40, 15)), rng.integers(0, 30, (40, 1)).astype(float)),
        (np.where(rng.random(200) < 0.6, 1.0, rng.random(200)), rng.integers(0, 5, 200).astype(float)),
        (0.25, 3.0),
        (1.0, 0.0),
        (0.0, 4.0),
    ]
    with np.errstate(all="ignore"):
        for a, n in cases:
            for fast, ref in ((_geom1, _geom1_everywhere), (_geom, _geom_everywhere)):
                got, want = np.asarray(fast(a, n)), np.asarray(ref(a, n))
                assert got.shape == want.shape and got.dtype == want.dtype
                nan = np.isnan(want)
                assert np.array_equal(np.isnan(got), nan)
                assert np.array_equal(got[~nan].view(np.int64), want[~nan].view(np.int64))
