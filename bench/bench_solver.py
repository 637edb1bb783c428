"""Benchmark the frontier search (issue 3 section 5). Prints figures; not a test.

    .venv/bin/python -m bench.bench_solver [--spec specs/ycsb_a.yaml] [--bands 40] [--repeat 3]

1. The full frontier: 3 providers x 7 VM types, >= 40 bands, heterogeneous
   clusters up to 30 VMs: wall time split into design tables / model build /
   MIP solves / exact re-evaluation, max MIP gap, max approximation error,
   peak memory (this process and its workers).
2. MIP vs exhaustive enumeration of the same contexts on reduced spaces
   (one provider, two VM types, growing cluster size): time of each and the
   ratio, with both optima (they must agree).
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import time

from cost_models.pricing.catalog import Catalog, load_catalog
from solver.backends import HighsBackend
from solver.exhaustive import exhaustive
from solver.frontier import solve_frontier
from solver.model import build_mip, read_solution
from solver.tables.build import build_tables
from specs.schema import load_spec


def peak_mib() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


def full_frontier(spec_path: str, bands: int, repeat: int) -> None:
    spec = load_spec(spec_path)
    cat = load_catalog(spec.pricing)
    walls, tabs, builds, solves = [], [], [], []
    fr = tables = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        tables = build_tables(spec, cat, spec.providers)
        t1 = time.perf_counter()
        fr = solve_frontier(spec, cat, tables, HighsBackend(), bands=bands)
        t2 = time.perf_counter()
        walls.append(t2 - t0)
        tabs.append(t1 - t0)
        builds.append(fr.build_seconds)
        solves.append(fr.solve_seconds)
    assert fr is not None and tables is not None
    pts = [p for ps in fr.points.values() for p in ps if p.chosen]
    gaps = [p.result.gap for p in pts if p.result]
    errs = [p.approx_error for p in pts]
    n_solves = sum(len(ps) for ps in fr.points.values())
    n_mip = fr.n_solves
    designs = sorted(set(tables.grid_size.values()))
    print(
        f"spec {spec.name}: {spec.workload.entries:.0e} entries, providers {', '.join(spec.providers)}, "
        f"{sum(len(v) for v in cat.vms.values())} VM types, max cluster {tables.max_cluster}"
    )
    print(
        f"design grid per VM: {designs[0]:,}..{designs[-1]:,} designs (T x K x Z x buffer x bits x block + LSH); "
        f"MIP columns (contexts): " + ", ".join(f"{p} {len(c)}" for p, c in tables.contexts.items())
    )
    print(
        f"bands {len(fr.budgets)} x providers {len(fr.points)} = {n_solves} band answers from {n_mip} MIP solves "
        "(bands below the cheapest cluster or above the fastest one's cost need no solve)"
    )
    rest = statistics.median(walls) - statistics.median(tabs) - statistics.median(builds) - statistics.median(solves)
    print(
        f"wall time (median of {repeat}): {statistics.median(walls):.2f} s "
        f"= tables {statistics.median(tabs):.2f} s + model build {statistics.median(builds):.3f} s "
        f"+ solves {statistics.median(solves):.2f} s + re-evaluation/rest "
        f"{rest:.2f} s"
    )
    print(
        f"max MIP gap {max(gaps):.2e}; max approximation error {max(errs):.2e}; "
        f"bands with a configuration {len(pts)}/{n_solves}; monotone {fr.monotone}"
    )
    print(f"peak memory {peak_mib():.0f} MiB")


def small_catalog(cat: Catalog, provider: str, k: int) -> Catalog:
    return Catalog(
        price_set=cat.price_set,
        vms={provider: cat.vms[provider][:k]},
        storage=cat.storage,
        slas=cat.slas,
        regions=cat.regions,
    )


def mip_vs_exhaustive(spec_path: str) -> None:
    from dataclasses import replace

    base = load_spec(spec_path)
    cat = load_catalog(base.pricing)
    print("\nMIP vs exhaustive enumeration on reduced spaces (aws, 2 VM types, same contexts)")
    print(
        f"{'max cluster':>11} {'contexts':>8} {'clusters':>10} {'MIP s':>8} {'exhaustive s':>12} {'ratio':>7}  optimum"
    )
    for mc in (2, 3, 4, 6, 8, 10):
        spec = replace(base, providers=("aws",), design=replace(base.design, max_cluster_size=mc))
        small = small_catalog(cat, "aws", 2)
        tables = build_tables(spec, small, ("aws",), workers=1)
        ctx = tables.contexts["aws"]
        budget = spec.budget_usd / 4
        t0 = time.perf_counter()
        m, meta = build_mip(spec, small, ctx, budget, providers=["aws"])
        res = HighsBackend().solve(m, gap=1e-6)
        t_mip = time.perf_counter() - t0
        t0 = time.perf_counter()
        try:
            ex = exhaustive(spec, small, ctx, budget, mc, limit=50_000_000)
        except Exception as exc:  # too large
            print(f"{mc:>11} {len(ctx):>8} {'-':>10} {t_mip:>8.3f} {'(refused)':>12}  {exc}")
            continue
        t_ex = time.perf_counter() - t0
        x_mip = read_solution(m, meta, res.x, spec, small).throughput_kops if res.x is not None else -1
        print(
            f"{mc:>11} {len(ctx):>8} {ex.visited:>10,} {t_mip:>8.3f} {t_ex:>12.3f} {t_ex / t_mip:>7.1f}x  "
            f"MIP {x_mip:,.1f} kops = exhaustive {ex.throughput_kops:,.1f} kops"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="specs/ycsb_a.yaml")
    ap.add_argument("--bands", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(
        f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}, "
        f"{__import__('os').cpu_count()} CPUs"
    )
    full_frontier(a.spec, a.bands, a.repeat)
    mip_vs_exhaustive(a.spec)


if __name__ == "__main__":
    main()
