"""The paper's Fig. 5 on the model, at cloud scale: Cosine against RocksDB,
WiredTiger and FASTER over ten workloads and a range of monthly budgets.

The paper (seeds/000 Sec. 7.2) plots, per workload, throughput against the
monthly budget for Cosine (its best configuration per budget, any provider)
and for the three engines at their default configurations (Sec. 7
"Baselines": RocksDB T = 10, 10 bits/key; WiredTiger T = 32, 32 KB leaves;
FASTER's index sized for 1/8 of the keys; 1 GB buffer each — the presets of
``cost_models.design``) deployed on AWS ("we set AWS as the default cloud
provider for the baselines"), with the paper's data (Sec. 7 "Workloads":
10^8 records of 128 B keys and 896 B values) and its price set (paper2021).
It reports Cosine ahead by 53x, 25x and 20x on average.

The figure's panel headers (each panel's operation mix) are not in the text
(seeds/000, 002); what the text says is that A-C and F-H have one dominant
operation, D, E, I, J are mixed, G is range-intensive and H has mostly empty
ranges. :data:`PANELS` is this project's reading, each panel's mix written
beside it. Each panel is one `cosine solve` (its run directory is kept, so
`cosine report` and `cosine whatif` work on it); the presets' points are the
solve's baselines on AWS.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cost_models.pricing.catalog import load_catalog
from solver.backends import get_backend
from solver.solve import run_solve
from specs.schema import Spec, parse_spec
from specs.vocab import PRESETS, BackendName, PriceSet, Provider


@dataclass(frozen=True)
class Panel:
    """One workload of the figure."""

    title: str
    operations: dict[str, float]
    distribution: str = "uniform"  # a spec distribution, for gets and puts
    scan_length: int = 100  # YCSB's default maximum scan length


#: The paper's records (Sec. 7 "Workloads"): 10^8 of 128 B keys and 896 B values.
ENTRIES, KEY_BYTES, VALUE_BYTES = 100_000_000, 128, 896
#: The figure's budgets (USD per month): from one small VM to the largest clusters.
BUDGET_RANGE = (100.0, 100_000.0)
#: "we set AWS as the default cloud provider for the baselines" (Sec. 7.2).
BASELINE_PROVIDER = Provider.AWS
#: The paper's average speed-ups of Cosine over each engine (abstract, Sec. 1 and 7.2).
PAPER_RATIOS = {"rocksdb": 53.0, "wiredtiger": 25.0, "faster": 20.0}
ZIPF = "{kind: zipfian, theta: 0.99}"

PANELS: dict[str, Panel] = {
    "A": Panel("point lookups", {"get": 0.9, "update": 0.1}),
    "B": Panel("no-result lookups", {"empty_get": 0.9, "insert": 0.1}),
    "C": Panel("inserts", {"insert": 0.9, "get": 0.1}),
    "D": Panel("25% lookups, inserts, updates, rmws", {"get": 0.25, "insert": 0.25, "update": 0.25, "rmw": 0.25}),
    "E": Panel("YCSB A: 50% lookups, 50% updates (zipfian)", {"get": 0.5, "update": 0.5}, ZIPF),
    "F": Panel("blind updates", {"update": 0.9, "get": 0.1}),
    "G": Panel("short ranges (100 entries)", {"range": 0.9, "insert": 0.1}),
    # Ranges that hold no key (issue 17 section 2): Cosine may buy a range filter, the presets have none.
    "H": Panel("empty ranges", {"empty_range": 0.9, "insert": 0.1}),
    "I": Panel("50% lookups, 50% inserts", {"get": 0.5, "insert": 0.5}),
    "J": Panel(
        "30% lookups, 30% ranges, 20% inserts, 20% updates", {"get": 0.3, "range": 0.3, "insert": 0.2, "update": 0.2}
    ),
}


def panel_spec(letter: str, budget_range: tuple[float, float] = BUDGET_RANGE, entries: int = ENTRIES) -> Spec:
    """Panel ``letter`` as a spec: the paper's data, prices and providers, no SLAs, no noise."""
    p = PANELS[letter]
    ops = ", ".join(f"{k}: {v}" for k, v in p.operations.items())
    lo, hi = budget_range
    return parse_spec(
        f"name: fig5_{letter}\n"
        f"workload: {{entries: {entries}, key_bytes: {KEY_BYTES}, value_bytes: {VALUE_BYTES}, "
        f"operations: {{{ops}}}, scan_length: {p.scan_length}, "
        f"distribution: {{get: {p.distribution}, put: {p.distribution}}}}}\n"
        f"budget: {{monthly_usd: {math.sqrt(lo * hi):.2f}, range: [{lo}, {hi}]}}\n"
        f"pricing: {PriceSet.PAPER2021}\n"
    )


#: Sec. 7.2's infeasibility example: "RocksDB needs to always use at least $20K/month ...
#: FASTER needs at least $45K/month ... (10^12/8 * 64 * (1 + 1/2048)) ... 21 VMs of type
#: r5d.12xlarge", for 10^12 entries.
PAPER_MEMORY_FLOOR = {"rocksdb": 20_000.0, "faster": 45_000.0}
PAPER_FLOOR_ENTRIES = 10**12


def memory_floor(
    name: str, entries: float, provider: str = BASELINE_PROVIDER, max_nodes: int = 1000
) -> dict[str, Any] | None:
    """The cheapest homogeneous cluster of ``provider`` whose nodes fit preset ``name``'s memory
    (buffer, filters, fences or hash index) for an equal shard of ``entries``: compute only, no
    storage or SLA (what the paper's example counts). None if no cluster of up to ``max_nodes`` fits."""
    from cost_models.cloud import GIB
    from cost_models.design import DesignBatch, preset
    from cost_models.layout import derive

    cat = load_catalog(PriceSet.PAPER2021)
    batch = DesignBatch.of([preset(name)])

    def fits(mem: float, k: int) -> bool:
        # a preset is leveled (Z = 1): overwrites do not change its depth (layout.last_level_room)
        return bool(derive(batch, entries / k, KEY_BYTES, VALUE_BYTES, mem, overwrites=False).feasible[0])

    best: dict[str, Any] | None = None
    for vm in cat.vms.get(provider, []):
        mem = vm.memory_gib * GIB
        if not fits(mem, max_nodes):
            continue
        lo, hi = 1, max_nodes  # fewest nodes that fit: memory per node only falls with more nodes
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(mem, mid) else (mid + 1, hi)
        cost = lo * vm.usd_per_month
        if best is None or cost < best["usd_month"]:
            best = {"vm": vm.name, "count": lo, "usd_month": cost}
    return best


@dataclass
class Fig5Row:
    """One system at one budget of one panel (fig5.parquet)."""

    panel: str
    workload: str
    band: int
    budget: float
    system: str  # cosine or a preset
    provider: str
    monthly_cost: float | None
    throughput_ops: float | None
    design_class: str
    configuration: str


def run_panel(
    letter: str,
    out_dir: Path,
    *,
    bands: int,
    backend: BackendName = BackendName.HIGHS,
    budget_range: tuple[float, float] = BUDGET_RANGE,
    entries: int = ENTRIES,
    workers: int | None = None,
) -> list[Fig5Row]:
    """Solve one panel (run directory ``out_dir``): Cosine's best per band, and each preset's on AWS."""
    from specs.io import to_json

    spec = panel_spec(letter, budget_range, entries)
    cat = load_catalog(spec.pricing)
    run = run_solve(spec, cat, get_backend(backend), bands=bands, out_dir=out_dir, workers=workers)
    fr = run.frontier
    title = PANELS[letter].title
    rows = []
    for pt in fr.best:
        rows.append(
            Fig5Row(
                letter,
                title,
                pt.band,
                pt.budget,
                "cosine",
                pt.provider,
                pt.cost if pt.chosen else None,
                pt.throughput if pt.chosen else None,
                pt.dominant_class(),
                to_json(pt.configuration(), indent=None),
            )
        )
    for name, base in fr.baselines.items():
        for b in base:
            if b["provider"] != BASELINE_PROVIDER:
                continue
            rows.append(
                Fig5Row(
                    letter,
                    title,
                    b["band"],
                    b["budget"],
                    name,
                    b["provider"],
                    b["monthly_cost"],
                    b["throughput_ops"],
                    b["class"],
                    to_json({"vm": b["vm"], "count": b["count"]}, indent=None),
                )
            )
    return rows


def run(
    out_dir: Path,
    *,
    panels: tuple[str, ...] = tuple(PANELS),
    bands: int = 16,
    backend: BackendName = BackendName.HIGHS,
    budget_range: tuple[float, float] = BUDGET_RANGE,
    entries: int = ENTRIES,
    workers: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[Fig5Row]:
    """Every panel; each panel's run directory is ``out_dir/<letter>``."""
    rows: list[Fig5Row] = []
    for i, letter in enumerate(panels):
        if progress:
            progress(i, len(panels), f"panel {letter}: {PANELS[letter].title}")
        rows += run_panel(
            letter,
            out_dir / letter,
            bands=bands,
            backend=backend,
            budget_range=budget_range,
            entries=entries,
            workers=workers,
        )
    if progress:
        progress(len(panels), len(panels), "done")
    return rows


def summary(rows: list[Fig5Row]) -> dict[str, Any]:
    """Cosine / preset throughput per panel and overall (mean over the budgets where both
    have a configuration), and the budgets at which each preset has none."""
    by: dict[tuple[str, str, int], Fig5Row] = {(r.panel, r.system, r.band): r for r in rows}
    panels = sorted({r.panel for r in rows})
    out: dict[str, Any] = {"panels": {}, "overall": {}, "paper": PAPER_RATIOS}
    every: dict[str, list[float]] = {str(p): [] for p in PRESETS}
    for panel in panels:
        budgets = {r.band: r.budget for r in rows if r.panel == panel}
        per: dict[str, Any] = {}
        for preset in PRESETS:
            ratios: list[float] = []
            infeasible: list[float] = []
            cosine_only: list[float] = []
            for b, budget in sorted(budgets.items()):
                c = by.get((panel, "cosine", b))
                p = by.get((panel, preset, b))
                x_cos = c.throughput_ops if c is not None else None
                x_pre = p.throughput_ops if p is not None else None
                if not x_pre:
                    infeasible.append(budget)
                    if x_cos:
                        cosine_only.append(budget)
                elif x_cos:
                    ratios.append(x_cos / x_pre)
            every[preset] += ratios
            per[preset] = {
                "mean_ratio": sum(ratios) / len(ratios) if ratios else None,
                "max_ratio": max(ratios) if ratios else None,
                "min_ratio": min(ratios) if ratios else None,
                "budgets_compared": len(ratios),
                "infeasible_budgets": infeasible,
                "cosine_only_budgets": cosine_only,
            }
        out["panels"][panel] = {"workload": PANELS[panel].title if panel in PANELS else panel, **per}
    for name, rs in every.items():
        out["overall"][name] = {
            "mean_ratio": sum(rs) / len(rs) if rs else None,
            "geomean_ratio": math.exp(sum(math.log(r) for r in rs) / len(rs)) if rs else None,
            "points": len(rs),
        }
    return out
