"""Benchmark the reconfiguration planner (issue 6 section 2). Prints tables; not a test.

    .venv/bin/python -m bench.bench_plan [--repeat 3] [--seed 0]

1. Wall time of the exact DP (transition tables + backward induction + the
   replay that certifies it) against the horizon length (50..2000 steps) and
   the number of configurations (2..64), on random problems shaped like the
   shipped traces (5-minute steps, 8-node clusters, switches of 70-600 s per
   node, RF=3, CL=1).
2. The receding-horizon plan (SOPHIA re-plans every lookahead window) for a
   few window lengths on the largest horizon.
3. Brute-force enumeration of all plans against the DP on short horizons
   (the test suite's oracle), to show why enumeration is not an option.

With ``--traces`` it instead runs the whole pipeline (solver candidates, cost
model capacities, plan, baselines) on the three shipped traces, with SOPHIA's
lookaheads (MG-RAST 5 min, bus tracking 5 h, HPC 1 h; Sec. 6), and prints
the side-by-side results:

    .venv/bin/python -m bench.bench_plan --traces [--spec specs/traces/sophia.yaml]
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from studies.plan.dp import ConfigInfo, PlanProblem, optimal_plan, phases, receding_plan, simulate

STEP_S = 300.0  # MG-RAST's 5-minute step (SOPHIA Sec. 6)
NODES = 8  # SOPHIA's cluster (Sec. 6)
SWITCH_S = (70.0, 600.0)  # restart + sync .. + a shard rewrite (cost_models/data/reconfiguration.yaml)


def random_problem(rng: np.random.Generator, steps: int, configs: int) -> PlanProblem:
    """Phases of a few workloads; each configuration is good at some of them."""
    kinds = max(2, configs // 2)
    phase = np.repeat(rng.integers(0, kinds, steps), 1)
    # persistence: keep the previous phase with probability 0.8 (phases last ~5 steps)
    for t in range(1, steps):
        if rng.random() < 0.8:
            phase[t] = phase[t - 1]
    affinity = rng.uniform(0.3, 1.0, (kinds, configs))
    cap = affinity[phase] * 1e5 * rng.lognormal(0.0, 0.05, (steps, configs))
    off = rng.uniform(*SWITCH_S, (configs, configs))
    np.fill_diagonal(off, 0.0)
    infos = [ConfigInfo(f"c{i}", NODES, "vm", "lsm", 1e10) for i in range(configs)]
    load = np.full(steps, 2e5) * rng.lognormal(0.0, 0.3, steps)
    return PlanProblem(np.arange(steps + 1) * STEP_S, load, cap, infos, off, rf=3, cl=1)


def timed(fn, repeat: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    out, times = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def brute_force_count(p: PlanProblem) -> tuple[int, float]:
    """Number of plans and the best total, by enumeration (exponential)."""
    count, best = 0, -math.inf

    def rec(t: int, cur: int, moves: list[tuple[int, int]]) -> None:
        nonlocal count, best
        if t >= p.steps:
            count += 1
            best = max(best, simulate(p, 0, moves).total_ops)
            return
        rec(t + 1, cur, moves)
        for b in range(p.n_configs):
            if b != cur:
                end = p.edges[t] + sum(d for d, _, _ in phases(NODES, p.rf, p.cl, float(p.offline_s[cur, b])))
                rec(int(np.searchsorted(p.edges, end, side="left")), b, [*moves, (t, b)])

    rec(0, 0, [])
    return count, best


#: Trace -> lookahead in steps: SOPHIA Sec. 6 uses T_L = 5 min for MG-RAST (5-min
#: steps), 5 h for bus tracking (15-min steps) and 1 h for HPC (30-s steps).
SHIPPED = {"mgrast": 1, "bus": 20, "hpc": 120}


def shipped_traces(spec_path: str) -> None:
    from cost_models.pricing.catalog import load_catalog
    from specs.schema import load_spec
    from studies.plan.build import report_dict, run_plan

    spec = load_spec(spec_path)
    cat = load_catalog(spec.pricing)
    root = Path(__file__).resolve().parent.parent / "specs" / "traces"
    for name, lookahead in SHIPPED.items():
        built, results = run_plan(root / f"{name}.csv", spec, cat, lookahead=lookahead)
        d = report_dict(built, results)
        print(f"## {name}.csv on {spec.name} (lookahead {lookahead} steps, RF={d['rf']}, CL={d['cl']})")
        print()
        for c in d["configurations"]:
            print(f"- {c['name']}: {c['hardware']}, ${c['monthly_cost']:,.0f}/month ({c['origin']})")
        print()
        print("| policy | total ops | vs default | vs optimum | switches |")
        print("|---|---|---|---|---|")
        for r in d["results"]:
            print(
                f"| {r['label']} | {r['total_ops']:.4g} | {r['vs_default']:+.1%} | {r['vs_optimum']:+.1%} "
                f"| {r['n_switches']} |"
            )
        cert = d["certificate"]
        t = d["timings_s"]
        print()
        print(
            f"certificate: DP optimum replayed within {cert['optimum']['replay_rel_diff']:.1e}, "
            f"{cert['optimum_vs_bound']:+.2%} from the theoretical-best bound; "
            f"{len(d['workloads'])} workloads, {len(d['configurations'])} configurations; "
            f"candidates {t['candidates_s']:.1f} s, capacities {t['capacity_s']:.1f} s, plan {t['plan_s']:.2f} s"
        )
        print()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--traces", action="store_true", help="plan the shipped traces with the cost model")
    ap.add_argument("--spec", default="specs/traces/sophia.yaml")
    args = ap.parse_args()
    if args.traces:
        shipped_traces(args.spec)
        return
    rng = np.random.default_rng(args.seed)
    print(f"# cosine plan: exact DP wall time ({platform.processor() or platform.machine()}, median of {args.repeat})")
    print()
    configs_axis = (2, 4, 8, 16, 32, 64)
    steps_axis = (50, 100, 200, 500, 1000, 2000)
    print("| steps \\ configurations | " + " | ".join(str(c) for c in configs_axis) + " |")
    print("|---" * (len(configs_axis) + 1) + "|")
    for T in steps_axis:
        cells = []
        for C in configs_axis:
            p = random_problem(rng, T, C)
            secs, _ = timed(lambda p=p: optimal_plan(p), args.repeat)
            cells.append(f"{secs:.3f} s")
        print(f"| {T} | " + " | ".join(cells) + " |")
    print()
    T, C = steps_axis[-1], 16
    p = random_problem(rng, T, C)
    opt = optimal_plan(p)
    print(f"# receding horizon on {T} steps x {C} configurations (optimum {opt.total_ops:.4g} ops)")
    print()
    print("| lookahead (steps) | wall | ops vs full-horizon optimum |")
    print("|---|---|---|")
    for h in (1, 6, 12, 48, 288):
        secs, res = timed(lambda h=h: receding_plan(p, h), 1)
        print(f"| {h} | {secs:.3f} s | {res.total_ops / opt.total_ops - 1:+.2%} |")  # type: ignore[attr-defined]
    print()
    print("# brute-force enumeration of plans vs the DP (3 configurations, switches shorter than a step)")
    print()
    print("| steps | plans | enumeration | DP | same optimum |")
    print("|---|---|---|---|---|")
    for T in (4, 6, 8, 10):
        p = random_problem(rng, T, 3)
        p.initial = 0
        p.offline_s = np.where(p.offline_s > 0, p.offline_s / 10, 0.0)  # every switch fits in its step
        t0 = time.perf_counter()
        n, best = brute_force_count(p)
        t1 = time.perf_counter()
        dp = optimal_plan(p)
        t2 = time.perf_counter()
        same = abs(best - dp.total_ops) <= 1e-9 * best
        print(f"| {T} | {n} | {t1 - t0:.3f} s | {t2 - t1:.4f} s | {same} |")


if __name__ == "__main__":
    main()
