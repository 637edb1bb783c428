"""Robustness: the KL dual against brute force, the noise model, robust solves."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app
from cost_models.robust import kl_divergence, kl_worst_case, noisy_mix

runner = CliRunner()


def brute_force(c: np.ndarray, w: np.ndarray, rho: float, steps: int = 200) -> float:
    """max w^.c over a grid of the 3-simplex restricted to KL(w^||w) <= rho."""
    best = -np.inf
    g = np.linspace(0.0, 1.0, steps + 1)
    a, b = np.meshgrid(g, g)
    a, b = a.ravel(), b.ravel()
    ok = a + b <= 1.0
    W = np.stack([a[ok], b[ok], 1 - a[ok] - b[ok]], axis=1)
    inside = kl_divergence(W, w[None, :]) <= rho
    if inside.any():
        best = float((W[inside] @ c).max())
    return best


@settings(max_examples=30, deadline=None)
@given(
    c=st.lists(st.floats(0.0, 100.0), min_size=3, max_size=3),
    w=st.lists(st.floats(0.05, 1.0), min_size=3, max_size=3),
    rho=st.floats(0.001, 3.0),
)
def test_dual_matches_brute_force(c, w, rho):
    c = np.array(c)
    w = np.array(w) / sum(w)
    dual = float(kl_worst_case(c[None, :], w, rho)[0])
    grid = brute_force(c, w, rho)
    # the grid's best is feasible, so the exact maximum is >= it; the grid step
    # (1/200) bounds how far below the maximum it can be
    assert dual >= grid - 1e-9 * max(1.0, abs(grid))
    assert dual <= grid + 0.02 * (c.max() - c.min()) + 1e-9
    assert w @ c - 1e-9 <= dual <= c.max() + 1e-9


def test_dual_limits():
    c = np.array([[1.0, 5.0, 3.0]])
    w = np.array([0.2, 0.3, 0.5])
    assert kl_worst_case(c, w, 0.0)[0] == pytest.approx(w @ c[0])
    assert kl_worst_case(c, w, 50.0)[0] == pytest.approx(5.0, rel=1e-3)
    # monotone in rho
    vals = [kl_worst_case(c, w, r)[0] for r in (0.01, 0.1, 0.5, 1.0, 2.0)]
    assert all(b >= a for a, b in zip(vals, vals[1:], strict=False))


def test_noise_adds_missing_operations():
    m = noisy_mix({"get": 0.5, "insert": 0.5}, 0.12)
    assert sum(m.values()) == pytest.approx(1.0)
    assert m["range"] == pytest.approx(0.02) and m["get"] == pytest.approx(0.44 + 0.02)


SPEC = """
name: rob
workload:
  entries: 2000000
  key_bytes: 16
  value_bytes: 100
  operations: {{get: 0.5, insert: 0.5}}
budget: {{monthly_usd: 600, range: [10, 5000]}}
providers: [aws]
design: {{size_ratio: [4, 10], max_cluster_size: 3}}
robustness: {robust}
"""


@pytest.mark.parametrize("robust", ["{noise: 0.1}", "{kl_radius: 0.5}"])
def test_robust_solve_reports_both_choices(tmp_path, robust):
    p = tmp_path / "s.yaml"
    p.write_text(SPEC.format(robust=robust))
    res = runner.invoke(app, ["solve", str(p), "--out", str(tmp_path / "o"), "--bands", "4", "--json"])
    assert res.exit_code == 0, res.stderr
    sol = json.loads(res.stdout)
    r = sol["robustness"]
    assert sol["objective"].startswith("robust")
    rob, nom, best = r["robust_choice"], r["nominal_choice"], r["best_perturbed_choice"]
    # the headline is the expected workload's throughput, of the robust choice
    assert sol["predicted"]["throughput_ops"] == pytest.approx(rob["expected_ops"])
    # the nominal choice is best at the expected workload; the robust one keeps
    # within the tolerance of the best perturbed throughput at this budget
    # (exact re-evaluations; the rule holds on the model's values, within the approximation error)
    assert nom["expected_ops"] >= rob["expected_ops"] * (1 - 1e-3)
    assert rob["perturbed_ops"] >= (1 - r["tolerance"]) * best["perturbed_ops"] * (1 - 1e-3)
    # the band model credits a column's nodes at the rate tabled for its shard with its scans at
    # the next breakpoint's fan-out (solver.space.reach); in the exact model its nodes hold fewer
    # keys and scans reach fewer shards (faster): a lower bound, off by a few percent here (noise
    # 0.061, KL 0.033 on 546da08; with scans credited at the shard count it was over 2 on ycsb_a)
    assert sol["certificate"]["approx_error"] < 0.08, sol["certificate"]["approx_error"]
    assert -sol["certificate"]["objective"] * 1e3 <= sol["predicted"]["throughput_ops"] * (1 + 1e-9)


def test_robust_eval_command(tmp_path):
    res = runner.invoke(app, ["robust-eval", "--samples", "300", "--rho", "0..1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.stderr
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(tmp_path / "robust_eval.parquet").read().to_pylist()
    assert len(rows) == 15 * 300 * 4  # expected workloads x samples x radii {0, .25, .5, 1}
    assert {r["rho_expected"] for r in rows} == {0.0, 0.25, 0.5, 1.0}
    # at rho = 0 the robust tuning is the nominal one: no gain, no loss
    assert all(r["delta"] == 0 for r in rows if r["rho_expected"] == 0)
    assert (tmp_path / "robust_delta_vs_rho.png").stat().st_size > 1000
    assert runner.invoke(app, ["robust-eval", "--rho", "a..b"]).exit_code == 2
