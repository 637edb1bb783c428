"""The run sums' stable helpers (cost_models.symbolic ``geom``, ``geom1``) for one element, compiled
by numba: what the generated scalar model (cost_models.symbolic_scalar) calls for sympy's
``geom``/``geom1``. Each is the numpy helper's (``symbolic._geom``, ``symbolic._geom1``) case
analysis applied to one element, its comparisons written so that a nan takes the same branch;
tests/test_kernels.py checks them equal to the numpy helpers on every case. Imported only with
numba (cost_models.kernels)."""

from __future__ import annotations

from math import exp, expm1, log1p

from numba import njit


@njit(cache=True, error_model="numpy")
def geom(a: float, n: float) -> float:  # pragma: no cover - compiled
    """(1 - (1-a)^n) / a without cancellation; n when a = 0 (symbolic._geom)."""
    if not a > 0:
        return n
    if not n > 0:
        return -0.0 / a
    if a >= 1.0:
        return 1.0 / a
    return -expm1(n * log1p(-min(a, 1.0))) / a


@njit(cache=True, error_model="numpy")
def geom1(a: float, n: float) -> float:  # pragma: no cover - compiled
    """sum_{r=1}^{n} r (1-a)^(r-1) without cancellation (symbolic._geom1)."""
    big = n if (n >= 1.0 or n != n) else 1.0  # np.maximum(n, 1): a nan stays nan
    if a * big < 1e-4 or a <= 0:
        return n * (n + 1) / 2 - a * (n - 1) * n * (n + 1) / 3
    if a >= 1.0:
        return n if n < 1.0 else 1.0  # np.minimum(n, 1)
    safe = a if (a < 1.0 or a != a) else 1.0  # np.minimum(a, 1): a nan stays nan
    xn = exp(n * log1p(-(safe if (safe < 1.0 - 1e-300 or safe != safe) else 1.0 - 1e-300)))
    return (1 - (n + 1) * xn + n * xn * (1 - safe)) / (safe * safe)
