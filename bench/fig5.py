"""The paper's Fig. 5 at cloud scale, on the model: Cosine vs RocksDB, WiredTiger, FASTER.

    .venv/bin/python -m bench.fig5 [--out runs/fig5] [--bands 16] [--panels ABCDEFGHIJ]

Ten workloads (studies/fig5.py: PANELS) with the paper's data (10^8 x 1 KiB
records), price set (paper2021) and baselines (the presets, on AWS), budgets
$100 .. $100,000 a month. Writes ``OUT/fig5.parquet`` (one row per panel x
system x budget), ``OUT/fig5.png`` (the figure's 2 x 5 layout) and one run
directory per panel (``OUT/<panel>/``: `cosine report` / `cosine whatif` work on
it); prints Cosine's throughput over each preset's per panel and on average,
beside the paper's 53x / 25x / 20x, and the budgets where a preset has no
configuration.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from report.plots import plot_fig5
from specs.io import write_json, write_rows
from specs.vocab import PRESETS
from studies.fig5 import (
    ENTRIES,
    PANELS,
    PAPER_FLOOR_ENTRIES,
    PAPER_MEMORY_FLOOR,
    Fig5Row,
    memory_floor,
    run,
    summary,
)


def _x(v: float | None) -> str:
    return f"{v:8.1f}x" if v is not None else "        -"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("runs/fig5"))
    ap.add_argument("--bands", type=int, default=16)
    ap.add_argument("--panels", default="".join(PANELS))
    a = ap.parse_args()
    panels = tuple(a.panels)
    bad = [p for p in panels if p not in PANELS]
    if bad:
        raise SystemExit(f"--panels: unknown panel(s) {', '.join(bad)} (valid: {''.join(PANELS)})")
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    def progress(i: int, n: int, what: str) -> None:
        print(f"[{time.perf_counter() - t0:6.0f} s] {i}/{n} {what}", flush=True)

    rows = run(a.out, panels=panels, bands=a.bands, progress=progress)
    write_rows(a.out / "fig5.parquet", rows, Fig5Row)
    png = plot_fig5([{**asdict(r), "class": r.design_class} for r in rows], a.out / "fig5.png")
    s = summary(rows)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    write_json(a.out / "fig5_summary.json", {**s, "commit": commit, "bands": a.bands})
    print(
        f"\nCosine throughput / preset throughput (AWS), mean over budgets where both have a configuration ({commit})"
    )
    print(f"{'panel':6} {'workload':52} " + " ".join(f"{p:>9}" for p in PRESETS))
    for panel, per in s["panels"].items():
        print(f"{panel:6} {per['workload'][:52]:52} " + " ".join(_x(per[p]["mean_ratio"]) for p in PRESETS))
    print(
        f"{'all':6} {'mean over every (panel, budget)':52} "
        + " ".join(_x(s["overall"][p]["mean_ratio"]) for p in PRESETS)
    )
    print(f"{'':6} {'geometric mean':52} " + " ".join(_x(s["overall"][p]["geomean_ratio"]) for p in PRESETS))
    print(f"{'paper':6} {'(abstract, Sec. 7.2)':52} " + " ".join(_x(s["paper"][p]) for p in PRESETS))
    print("\nbudgets (USD/month) where a preset has no configuration on AWS:")
    for panel, per in s["panels"].items():
        for p in PRESETS:
            inf = per[p]["infeasible_budgets"]
            if inf:
                print(f"  {panel} {p:10} " + ", ".join(f"${b:,.0f}" for b in inf))
    print("\nmemory floor on AWS (cheapest homogeneous cluster holding the preset's memory; compute only):")
    for n in (ENTRIES, PAPER_FLOOR_ENTRIES):
        for p in PRESETS:
            f = memory_floor(p, n)
            got = f"${f['usd_month']:,.0f} ({f['count']} x {f['vm']})" if f else "no cluster of <= 1000 VMs"
            paper = (
                f"  paper: ${PAPER_MEMORY_FLOOR[p]:,.0f}"
                if n == PAPER_FLOOR_ENTRIES and p in PAPER_MEMORY_FLOOR
                else ""
            )
            print(f"  {n:.0e} entries {p:10} {got}{paper}")
    print(f"\nwrote {a.out}/fig5.parquet, {png.name}, fig5_summary.json ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
