"""The model's sigma_l and sigma_n against the independent Monte-Carlo simulator.

Tolerance: the model describes an *average* state (upper levels half full, the
tech report's weight 1/2) while the simulator averages 12 snapshots of a real
state, so both the model's fill assumption and the sampling contribute error.
We accept |model - sim| <= 25% of the simulated value + 0.03 blocks (the
absolute term covers costs near zero, e.g. lookups of hot keys that live in
the buffer). The measured errors are printed (pytest -s) and recorded in the
issue note.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cost_models.design import Design, DesignBatch
from cost_models.distributions import partitions
from cost_models.io_model import io_costs, overwrites_keys
from cost_models.layout import derive
from specs.schema import Distribution
from tests.simulator import SimDesign, simulate

KEY, VAL = 8, 92
E = KEY + VAL
N = 60_000
REL_TOL, ABS_TOL = 0.25, 0.03


def _model(
    T: int,
    K: int,
    Z: int,
    E_B: int,
    bits: float,
    hot_levels: int | None,
    get: Distribution,
    put: Distribution,
    mix: dict[str, float],
):
    batch = DesignBatch.of(
        [Design(T=T, K=K, Z=Z, buffer_bytes=E_B * E, bloom_bits=bits, bloom_allocation="uniform", block_bytes=4 * E)]
    )
    ow = overwrites_keys(mix)
    lay = derive(batch, N, KEY, VAL, 1e15, overwrites=ow)
    if hot_levels is not None and hot_levels < lay.L[0]:
        lo, hi = float(E_B * E), 1e12  # memory such that exactly hot_levels fit
        for _ in range(200):
            mid = (lo + hi) / 2
            h = lay.L[0] - derive(batch, N, KEY, VAL, mid, overwrites=ow).Y[0]
            lo, hi = (mid, hi) if h < hot_levels else (lo, mid)
        lay = derive(batch, N, KEY, VAL, hi, overwrites=ow)
        assert lay.L[0] - lay.Y[0] == hot_levels
    lay = replace(lay, mem_cache=np.zeros(1))  # the simulator has no block cache
    parts = partitions(get, put, N)
    io = io_costs(lay, parts, mix, 1.0)
    fpr = float(lay.fpr[0, 0]) if lay.hot[0, 0] else 1.0
    return float(io.get[0]), float(io.empty_get[0]), int(lay.L[0]), int(lay.L[0] - lay.Y[0]), fpr


UNI = Distribution("uniform")
SKEW = Distribution("skew", hot_fraction=0.01, hot_probability=0.8)

CASES = [
    # name, T, K, Z, E_B, bits, hot levels, get, put, updates
    ("leveling-uniform", 4, 1, 1, 500, 4.0, None, UNI, UNI, 60_000),
    ("tiering-uniform", 4, 3, 1, 500, 4.0, None, UNI, UNI, 60_000),
    ("leveling-no-filter", 6, 1, 1, 400, 0.0, None, UNI, UNI, 60_000),
    ("cold-levels", 4, 1, 1, 500, 4.0, 2, UNI, UNI, 60_000),
    ("skewed-puts-and-gets", 4, 1, 1, 500, 4.0, None, SKEW, SKEW, 60_000),
    ("skewed-gets-read-only", 4, 2, 1, 500, 2.0, None, SKEW, UNI, 0),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_model_matches_simulation(case):
    name, T, K, Z, E_B, bits, hot, get, put, updates = case
    mix = {"get": 0.5, "update": 0.5} if updates else {"get": 1.0}
    m_l, m_n, L, h, fpr = _model(T, K, Z, E_B, bits, hot, get, put, mix)
    sd = SimDesign(T=T, K=K, Z=Z, E_B=E_B, L=L, hot_levels=h, fpr=fpr)
    gs = (get.hot_fraction, get.hot_probability) if get.kind == "skew" else None
    ps = (put.hot_fraction, put.hot_probability) if put.kind == "skew" else None
    s_l, s_n = simulate(sd, N, updates, snapshots=12, lookups=1500, put_skew=ps, get_skew=gs)
    err_l = abs(m_l - s_l) / max(s_l, 1e-9)
    err_n = abs(m_n - s_n) / max(s_n, 1e-9)
    print(
        f"\n[{name}] L={L} hot={h} sigma_l model={m_l:.4f} sim={s_l:.4f} (err {err_l:.1%}); "
        f"sigma_n model={m_n:.4f} sim={s_n:.4f} (err {err_n:.1%})"
    )
    assert abs(m_l - s_l) <= REL_TOL * s_l + ABS_TOL, f"sigma_l {m_l} vs {s_l}"
    assert abs(m_n - s_n) <= REL_TOL * s_n + ABS_TOL, f"sigma_n {m_n} vs {s_n}"
