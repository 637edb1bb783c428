"""What `cosine robust-eval` and `cosine plan` print."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def print_robust_eval(summary: list[dict[str, Any]], buckets: list[dict[str, Any]], samples: int) -> None:
    """ENDURE's normalized delta throughput, by workload type and by observed drift."""
    con = Console()
    t = Table(title=f"normalized delta throughput, robust vs nominal ({samples:,} observed workloads)")
    for c in ("workload type", "expected rho", "mean delta", "median delta", "robust better", "robust worse"):
        t.add_column(c, justify="right")
    for r in summary:
        if r["rho_expected"] > 0:
            t.add_row(
                r["type"],
                f"{r['rho_expected']:g}",
                f"{r['mean_delta']:+.3f}",
                f"{r['median_delta']:+.3f}",
                f"{r['share_better']:.0%}",
                f"{r['share_worse']:.0%}",
            )
    con.print(t)
    b = Table(title="mean delta by observed drift KL(observed || expected)")
    b.add_column("expected rho")
    edges = sorted({(x["observed_from"], x["observed_to"]) for x in buckets})
    for lo, hi in edges:
        b.add_column(f"{lo:g}-{hi:g}", justify="right")
    for rho in sorted({x["rho_expected"] for x in buckets}):
        if rho == 0:
            continue
        vals = {(x["observed_from"], x["observed_to"]): x["mean_delta"] for x in buckets if x["rho_expected"] == rho}
        b.add_row(f"{rho:g}", *[f"{vals.get(e, float('nan')):+.3f}" for e in edges])
    con.print(b)


def print_plan(d: dict[str, Any], trace_name: str, rf: int, cl: int) -> None:
    """Strategies against the baselines, the candidate configurations and the plan's switches."""
    con = Console()
    t = Table(title=f"{trace_name}: operations served over the horizon (RF={rf}, CL={cl})")
    for c in ("strategy", "total ops", "vs default", "vs optimum", "switches"):
        t.add_column(c, justify="right")
    for r in d["results"]:
        t.add_row(
            r["label"],
            f"{r['total_ops']:,.3g}",
            f"{r['vs_default']:+.1%}" if r["vs_default"] is not None else "-",
            f"{r['vs_optimum']:+.1%}" if r["vs_optimum"] is not None else "-",
            str(r["n_switches"]),
        )
    con.print(t)
    cfg = Table(title="candidate configurations")
    for c in ("name", "nodes", "hardware", "class", "origin"):
        cfg.add_column(c)
    for c in d["configurations"]:
        cfg.add_row(str(c["name"]), str(c["nodes"]), str(c["hardware"]), str(c["class"]), str(c["origin"]))
    con.print(cfg)
    plan_row = next(r for r in d["results"] if r["key"] == "plan")
    for sw in plan_row.get("switches", [])[:20]:
        con.print(f"  switch at step {sw['step']} (t={sw['start_s']:,.0f} s): {sw['from']} -> {sw['to']}")
    con.print(f"certificate: {d['certificate']}")
