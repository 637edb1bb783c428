"""Issue 13 section 4: what the frontier shows on the shipped specs with their
defaults (today's on-demand prices, realistic storage, the derived cluster cap,
the robust rule). Prints one row per finding and the tables behind them; not a
test.

    .venv/bin/python -m bench.frontier_findings [--out runs/findings] [--bands 40] [--specs ycsb_a,mixed_25]

Each spec is solved as `cosine solve` does (run directories under --out, with
frontier.png); the findings are read from those runs, so a second run with
--reuse only re-reads them.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from cost_models.cloud import storage_choices
from cost_models.pricing.catalog import load_catalog
from report.plots import plot_frontier, robust_table
from solver.backends import HighsBackend
from solver.solve import run_solve
from specs.schema import STUDY_SPECS as SPECS
from specs.schema import load_spec

YCSB = tuple(s for s in SPECS if s.startswith("ycsb_"))


def solve(name: str, out: Path, bands: int, reuse: bool) -> dict[str, Any]:
    run_dir = out / name
    secs = None
    if not (reuse and (run_dir / "solution.json").is_file()):
        spec = load_spec(f"specs/{name}.yaml")
        t0 = time.perf_counter()
        run_solve(spec, load_catalog(spec.pricing), HighsBackend(), bands=bands, out_dir=run_dir)
        secs = time.perf_counter() - t0
        plot_frontier(run_dir)
    # the files as written (a bench reads earlier runs too, whatever their format version)
    sol = json.loads((run_dir / "solution.json").read_text())
    rows = pq.ParquetFile(run_dir / "frontier.parquet").read().to_pylist()
    return {"name": name, "solution": sol, "rows": rows, "table": robust_table(rows), "seconds": secs}


def headline(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The headline frontier (best across providers per band), feasible bands only."""
    return [t for t in r["table"] if t["robust_ops"]]


def design_of(sol: dict[str, Any]) -> str:
    ds = sol["designs"]
    main = max(ds, key=lambda d: d["entries_per_node"] * d["count"])
    if main["lsh"]:
        return "lsh (hash log)"
    return f"{main['class']} T={main['T']} K={main['K']} Z={main['Z']}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/findings")
    ap.add_argument("--bands", type=int, default=40)
    ap.add_argument("--specs", default=",".join(SPECS))
    ap.add_argument("--reuse", action="store_true", help="read existing run directories instead of solving")
    a = ap.parse_args()
    out = Path(a.out)
    names = [s for s in a.specs.split(",") if s]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; {platform.processor() or platform.machine()}; bands {a.bands}; runs in {out}/")
    res = {n: solve(n, out, a.bands, a.reuse) for n in names}

    print("\n## per spec: the answer at its budget ($20,000/month) and its frontier")
    print("| spec | answer | design | spend | binding | frontier span | classes along it | providers along it |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, r in res.items():
        sol, h = r["solution"], headline(r)
        vml = ", ".join(f"{v['count']} x {v['type']}" for v in sol["vms"])
        span = h[-1]["robust_ops"] / h[0]["robust_ops"] if h else 0.0
        classes = _runs([t["robust_class"] for t in h])
        provs = _runs([t["robust_provider"] for t in h])
        b = sol["binding"]
        print(
            f"| {n} | {sol['provider']} {vml}, {sol['predicted']['throughput_ops']:,.0f} ops/s | {design_of(sol)} | "
            f"{b['budget_used']:.0%} | {b['resource']} | {span:,.0f}x | {classes} | {provs} |"
        )

    print("\n## findings (issue 13 section 4)")
    print("| finding | measured | holds |")
    print("| --- | --- | --- |")
    rows: list[tuple[str, str, bool]] = []
    if "ycsb_a" in res:
        b = res["ycsb_a"]["solution"]["binding"]
        rows.append(
            (
                "ycsb_a at $20,000 spends >= 50% of the budget, or names the binding resource",
                f"spends {b['budget_used']:.1%}; binding: {b['resource']} ({b['detail']})",
                b["budget_used"] >= 0.5 or b["resource"] != "none",
            )
        )
    for n in (x for x in YCSB if x in res):
        h = headline(res[n])
        span = h[-1]["robust_ops"] / h[0]["robust_ops"] if h else 0.0
        rows.append(
            (
                f"{n}: frontier spans >= 10x from its cheapest point to its top",
                f"{h[0]['robust_ops']:,.0f} ops/s at ${h[0]['robust_cost']:,.0f} -> {h[-1]['robust_ops']:,.0f} ops/s "
                f"at ${h[-1]['robust_cost']:,.0f} ({span:,.0f}x)"
                if h
                else "no feasible band",
                span >= 10,
            )
        )
    for n in ("mixed_25", "ycsb_a"):
        if n in res:
            h = headline(res[n])
            rob = _runs([t["robust_class"] for t in h])
            nom = _runs([t["nominal_class"] for t in res[n]["table"] if t["nominal_ops"]])
            changes = len(rob.split(" -> ")) > 1
            rows.append(
                (f"{n}: the design class changes along the frontier", f"robust: {rob}; nominal: {nom}", changes)
            )
    if "write_heavy" in res:
        sol = res["write_heavy"]["solution"]
        ok = any(d["lsh"] or (d["class"] == "lsm" and d["K"] > 1) for d in sol["designs"])
        rows.append(("write_heavy picks a hash log or an LSM with K > 1 at its budget", design_of(sol), ok))
    if "range_heavy" in res:
        sol = res["range_heavy"]["solution"]
        ok = any(d["class"] == "btree" and d["T"] >= 16 for d in sol["designs"])
        rows.append(("range_heavy picks a B-tree with fanout T >= 16", design_of(sol), ok))
    changing = [n for n, r in res.items() if len(_runs([t["robust_provider"] for t in headline(r)]).split(" -> ")) > 1]
    rows.append(
        (
            "on >= 2 specs the provider changes with budget",
            f"{len(changing)} specs: {', '.join(changing) or '-'}",
            len(changing) >= 2,
        )
    )
    for f, m, ok in rows:
        print(f"| {f} | {m} | {'yes' if ok else '**no**'} |")

    if "ycsb_a" in res:
        print("\n## ycsb_a: nominal vs robust frontier (best across providers per band; every 4th band)")
        print("| budget | nominal ops/s (perturbed) | nominal | robust ops/s (perturbed) | robust | best perturbed |")
        print("| --- | --- | --- | --- | --- | --- |")
        for t in res["ycsb_a"]["table"][::4] + res["ycsb_a"]["table"][-1:]:
            if not t["nominal_ops"]:
                continue
            print(
                f"| ${t['budget']:,.0f} | {t['nominal_ops']:,.0f} ({t['nominal_perturbed_ops']:,.0f}) | "
                f"{t['nominal_provider']} {t['nominal_class']} | "
                f"{(t['robust_ops'] or 0):,.0f} ({(t['robust_perturbed_ops'] or 0):,.0f}) | "
                f"{t['robust_provider']} {t['robust_class']} | {(t['best_perturbed_ops'] or 0):,.0f} |"
            )
    print("\n## why a provider wins: what a dollar buys per node (ondemand, a 10 GiB shard, 4 KiB blocks)")
    print("| provider | cheapest VM | $/month | $/vCPU | $/GiB memory | most IOPS per $ (VM + volume) |")
    print("| --- | --- | --- | --- | --- | --- |")
    cat = load_catalog("ondemand")
    for p, vms in cat.vms.items():
        low = min(vms, key=lambda v: v.usd_per_month)
        best = max(
            (
                (float(c.effective_iops(4096)) / (v.usd_per_month + c.usd_month), v, c)
                for v in vms
                for c in storage_choices(cat, v, 10.0, (4096,))
            ),
            key=lambda t: t[0],
        )
        print(
            f"| {p} | {low.name} | ${low.usd_per_month:,.0f} | ${low.usd_per_month / low.vcpu:,.1f} | "
            f"${low.usd_per_month / low.memory_gib:,.2f} | {best[0]:,.0f} ({best[1].name}, {best[2].label}) |"
        )
    print("\n## solve time and size (wall, this shared machine)")
    for n, r in res.items():
        s = r["solution"]["search"]
        secs = f"{r['seconds']:.0f} s" if r["seconds"] is not None else "(reused)"
        print(
            f"{n}: {secs}; tables {s['timings_s'].get('tables_s', 0):.0f} s, frontier "
            f"{s['timings_s'].get('frontier_s', 0):.0f} s; "
            f"max cluster {s['max_cluster']:,} ({s['max_cluster_source']}); "
            f"columns {json.dumps(s['contexts'])}"
        )


def _runs(xs: list[Any]) -> str:
    """Consecutive distinct values: 'a -> b -> a'."""
    out: list[Any] = []
    for x in xs:
        if x and (not out or out[-1] != x):
            out.append(x)
    return " -> ".join(map(str, out))


if __name__ == "__main__":
    main()
