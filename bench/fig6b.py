"""The paper's Fig. 6B on the Cosine model: robustness to workload drift.

    .venv/bin/python -m bench.fig6b [--spec specs/robust_5050.yaml] [--budget 20000]

Cosine is given the 50/50 lookup/insert workload (YCSB D variant) and $20K per
month; the workload that arrives has 10*V% new operations: (50 - 5V)% lookups,
(50 - 5V)% inserts and 3.33*V% each of blind updates, rmws and ranges
(V = 0..4). For each V we report the throughput loss of the configuration
Cosine chose (with the spec's 10% noise), and of the best RocksDB, WiredTiger
and FASTER configurations for the expected workload, against the optimum for
the workload that arrived (a fresh solve).
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from cost_models.pricing.catalog import load_catalog
from solver.backends import HighsBackend
from solver.exact import reevaluate
from solver.frontier import solve_frontier
from solver.solve import run_solve
from solver.tables.build import build_tables
from specs.schema import load_spec


def drifted(mix: dict[str, float], v: float) -> dict[str, float]:
    new = 0.1 * v  # 10 x V % of the operations are new
    out = {k: x * (1 - new) for k, x in mix.items()}
    for op in ("update", "rmw", "range"):
        out[op] = out.get(op, 0.0) + new / 3
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="specs/robust_5050.yaml")
    ap.add_argument("--budget", type=float, default=20000.0)
    a = ap.parse_args()
    spec = load_spec(a.spec)
    cat = load_catalog(spec.pricing)
    be = HighsBackend()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_solve(spec, cat, be, budget=a.budget, bands=4, out_dir=Path(tmp))
    assert run.answer.chosen is not None, "the budget buys no configuration"
    chosen = run.answer.chosen.nodes
    assert run.answer.plan is not None and run.answer.plan.rf == 1, "Fig. 6B drifts an unreplicated node's mix"
    planned = run.plans.tables_of(run.answer.plan)
    spec = planned.spec  # the node's spec: the data at the horizon (its mix is the workload's at RF 1)
    presets = {}
    for name, per_p in planned.tables.presets.items():  # the presets' best homogeneous cluster for the expected mix
        best = None
        for c in per_p.get("aws", []):
            k = round(spec.workload.entries / c.entries)
            if c.cost_month * k <= a.budget and (best is None or c.throughput * k > best[0]):
                best = (c.throughput * k, c, k)
        if best:
            presets[name] = [(best[1], best[2])]
    print(
        f"Cosine's choice for {spec.name} at ${a.budget:,.0f}: "
        + ", ".join(f"{k} x {c.vm.name} ({c.design_class})" for c, k in chosen)
    )
    print(
        f"{'V':>3} {'drift':>6} {'optimum ops/s':>14} {'cosine loss':>12} "
        + " ".join(f"{p + ' loss':>16}" for p in presets)
    )
    for v in range(5):
        mix = drifted(spec.workload.operations, v)
        s_v = replace(spec, workload=replace(spec.workload, operations=mix), noise=0.0)
        tables = build_tables(s_v, cat, ("aws", "gcp", "azure"))
        fr = solve_frontier(s_v, cat, tables, be, budgets=np.array([a.budget]))
        opt = fr.best[0].throughput
        x_cos = reevaluate(s_v, chosen).throughput
        losses = {p: 1 - reevaluate(s_v, nodes).throughput / opt for p, nodes in presets.items()}
        print(
            f"{v:>3} {10 * v:>5}% {opt:>14,.0f} {1 - x_cos / opt:>11.1%} "
            + " ".join(f"{losses[p]:>15.1%}" for p in presets)
        )


if __name__ == "__main__":
    main()
