"""The interpolated window table past its grid (cost_models.windows.WindowTable): the counts
beyond it are solved exactly, each by itself (each distinct count once per table), and equal the
exact window of the whole array."""

from __future__ import annotations

import numpy as np

from cost_models import kernels
from cost_models.distributions import Marginal
from cost_models.kernels import reference
from cost_models.windows import WindowTable, window


def test_beyond_the_grid_is_the_exact_window():
    """Only the counts beyond ``r_max`` are bisected; each equals, bit for bit, what the
    exact window of the whole (2-D) array gives it, and the rest are the interpolation."""
    put = Marginal(np.array([0.25, 0.75]), np.array([0.6, 0.4]))
    n_keys, iota = 1e6, 0.3
    table = WindowTable(put, n_keys, iota)
    R = np.array([[1.0, 10.0, table.r_max * 0.5], [table.r_max * 1.5, 3e6, 5e6]])
    beyond = R > table.r_max
    assert beyond.any() and not beyond.all()
    got = table(R)
    whole = window(np.where(beyond, R, 1.0), put, n_keys, iota)
    assert np.array_equal(got[beyond], whole[beyond])
    interp = np.exp(np.interp(np.log(R), table.logr, table.logw))
    assert np.array_equal(got[~beyond], interp[~beyond])


def test_beyond_the_grid_each_count_once():
    """A count asked for again (in one call or a later one) gets the bits of its first solve,
    which are those of the exact window of any array holding it."""
    put = Marginal(np.array([0.25, 0.75]), np.array([0.6, 0.4]))
    n_keys, iota = 1e6, 0.3
    table = WindowTable(put, n_keys, iota)
    a, b = table.r_max * 1.5, 3e6
    first = table(np.array([a, b, a, b, b]))
    assert sorted(table.beyond.solved) == [a, b]
    later = table(np.array([[b, 5e6], [a, 1.0]]))
    assert sorted(table.beyond.solved) == [a, b, 5e6]
    whole = window(np.array([a, b, 5e6, a]), put, n_keys, iota)
    assert np.array_equal(first, whole[[0, 1, 0, 1, 1]])
    assert np.array_equal(later[:, 0], whole[[1, 0]]) and later[0, 1] == whole[2]


def test_bisection_stops_only_at_a_fixed_point():
    """window() stops bisecting once a step moves no bound: the same bits as all 64 steps."""
    from cost_models.symbolic import compiled

    put = Marginal(np.array([0.25, 0.75]), np.array([0.6, 0.4]))
    n_keys, iota = 1e6, 0.3
    R = np.geomspace(1.0, 3e6, 97)
    c = compiled()

    def count(w: np.ndarray) -> np.ndarray:
        return c["distinct_new"](w, iota) + c["distinct_part"](w[..., None], put.frac * n_keys, put.prob, iota).sum(-1)

    lo = np.log(R)
    hi = lo + 70.0
    for _ in range(64):  # the full bisection, every step
        mid = (lo + hi) / 2
        low = count(np.exp(mid)) < R
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    with reference():  # the numpy path, bit for bit (the kernels run once a table was built here)
        got = window(R, put, n_keys, iota)
    reachable = np.isfinite(got)
    assert reachable.any()
    assert np.array_equal(got[reachable], np.exp(hi)[reachable])
    # the compiled kernel (cost_models.kernels_numba.window), to the reference test's 1e-9
    kernels.load()
    fused = window(R, put, n_keys, iota)
    assert np.allclose(fused[reachable], got[reachable], rtol=1e-9, atol=0.0)


def test_exact_windows_each_count_once():
    """ExactWindow solves each distinct count once and gives the bits of window() on any array
    holding it; the gets' window is shared between mixes."""
    from cost_models.windows import ExactWindow

    put = Marginal(np.array([0.25, 0.75]), np.array([0.6, 0.4]))
    w = ExactWindow(put, 1e6, 0.3)
    R = np.array([[10.0, 5e5], [10.0, 2e6]])
    got = w(R)
    assert sorted(w.solved) == [10.0, 5e5, 2e6]
    assert np.array_equal(got, window(R, put, 1e6, 0.3))
    assert np.array_equal(w(np.array([5e5])), window(np.array([5e5, 7.0]), put, 1e6, 0.3)[:1])
