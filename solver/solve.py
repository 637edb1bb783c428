"""`cosine solve`: tables -> frontier -> the answer for the spec's budget -> files.

Files written to the run directory (a contract other tools read):
``solution.json``, ``frontier.parquet`` (one row per band x provider),
``baselines.parquet`` (the presets on the same hardware), ``solver.log.jsonl``
(one record per band x provider) and ``solver/`` (each band's raw solver log).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cost_models.cloud import GIB, sla_cost, sla_terms
from cost_models.pricing import Catalog
from cost_models.robust import noisy_mix
from solver.backends import Backend
from solver.frontier import (
    DEFAULT_BANDS,
    PRESETS,
    Frontier,
    Point,
    baselines,
    cheapest,
    neighbours,
    solve_frontier,
)
from solver.rundir import SOLUTION_VERSION, write_run
from solver.tables import Tables, build_tables, check_workers
from specs.errors import BudgetTooLow, InputError, check_range
from specs.io import check_output_file, clean
from specs.schema import MAX_BUDGET_USD, Spec
from specs.vocab import SLA_FEATURES, Provider


@dataclass
class SolveRun:
    """Everything a solve produced (what the CLI prints)."""

    spec: Spec
    frontier: Frontier
    answer: Point
    solution: dict[str, Any]
    out_dir: Path
    tables: Tables
    timings: dict[str, float] = field(default_factory=dict)


def solution_dict(spec: Spec, pt: Point, backend: str, method: str, budget: float) -> dict[str, Any]:
    """The contract's solution.json body for one frontier point."""
    assert pt.chosen is not None and pt.exact is not None
    ex, ch = pt.exact, pt.chosen
    r = pt.result
    x = ex.throughput
    return {
        "version": SOLUTION_VERSION,
        "spec": spec.name,
        "spec_source": spec.source,
        "spec_raw": spec.raw,
        "budget": budget,
        "provider": ch.provider,
        "pricing": spec.pricing,
        "vms": [{"type": n["vm_type"], "count": n["count"]} for n in ex.per_node],
        "storage": [{"vm_type": n["vm_type"], **n["storage"]} for n in ex.per_node],
        "slas": list(spec.slas),
        "designs": [{k: v for k, v in n.items() if k != "storage"} for n in ex.per_node],
        "monthly_cost": {"compute": ch.compute, "storage": ch.storage, "sla": ch.sla, "total": ch.monthly_cost},
        "predicted": {
            "latency_s": (1.0 / x) if x > 0 else None,
            "throughput_ops": x,
            "io_per_op": ex.io_per_op,
            "monthly_capacity_ops": x * 730 * 3600,
            "operations_per_month": spec.workload.operations_per_month,
        },
        "certificate": {
            "mip_gap": None if r is None or not math.isfinite(r.gap) else r.gap,
            "approx_error": pt.approx_error,
            "backend": backend,
            "method": method,
            "status": pt.status,
            "objective": None if r is None else r.objective,
            "best_bound": None if r is None else r.bound,
            "nodes": None if r is None else r.nodes,
            "wall_s": None if r is None else r.seconds,
            "scaling_error": None if r is None else r.scaling_error,
        },
    }


def optional_slas(spec: Spec, catalog: Catalog, pt: Point) -> dict[str, float | None]:
    """What adding each SLA the spec does not require would cost this configuration."""
    if pt.chosen is None:
        return {}
    ch = pt.chosen
    nodes = sum(k for _, k in ch.nodes)
    base = ch.compute + ch.storage
    data_gib = spec.workload.data_bytes / GIB
    out: dict[str, float | None] = {}
    for f in SLA_FEATURES:
        if f in spec.slas:
            continue
        t = sla_terms(catalog, ch.provider, (f,))
        if t.unavailable:
            out[f] = None
        elif nodes < t.min_nodes:
            out[f] = None
        else:
            out[f] = sla_cost(t, nodes, data_gib, base)
    return out


def robustness_report(
    spec: Spec,
    ospec: Spec,
    rho: float,
    catalog: Catalog,
    backend: Backend,
    answer: Point,
    budget: float,
    providers: tuple[str, ...],
    workers: int | None,
) -> dict[str, Any]:
    """Nominal vs robust choice at the budget, and what robustness costs at the expected workload."""
    import numpy as np

    from solver.frontier import reevaluate

    tables = build_tables(spec, catalog, providers, workers=workers)
    fr = solve_frontier(
        spec,
        catalog,
        tables,
        backend,
        budgets=np.array([budget]),
        providers=tuple(p for p in providers if p in tables.contexts),
    )
    nominal = fr.best[0]
    if nominal.chosen is None or answer.chosen is None:
        return {"nominal": None}
    robust_at_expected = reevaluate(spec, answer.chosen.nodes).throughput
    nominal_at_expected = nominal.throughput
    nominal_worst = reevaluate(ospec, nominal.chosen.nodes, rho).throughput
    robust_worst = answer.throughput

    def summary(pt: Point) -> dict[str, Any]:
        return {
            "provider": pt.chosen.provider if pt.chosen else None,
            "vms": [{"type": n["vm_type"], "count": n["count"]} for n in (pt.exact.per_node if pt.exact else [])],
            "classes": sorted({n["class"] for n in (pt.exact.per_node if pt.exact else [])}),
            "monthly_cost": pt.cost,
        }

    return {
        "noise": spec.noise,
        "kl_radius": rho if rho > 0 else None,
        "nominal_choice": summary(nominal),
        "robust_choice": summary(answer),
        "expected_workload": {"nominal_choice_ops": nominal_at_expected, "robust_choice_ops": robust_at_expected},
        "perturbed_workload": {"nominal_choice_ops": nominal_worst, "robust_choice_ops": robust_worst},
        "cost_of_robustness": 1.0 - robust_at_expected / nominal_at_expected if nominal_at_expected > 0 else None,
        "gain_under_perturbation": robust_worst / nominal_worst - 1.0 if nominal_worst > 0 else None,
    }


def parse_providers(text: str | None, spec: Spec) -> tuple[Provider, ...] | None:
    """``--providers aws,gcp``: a non-empty subset of the spec's providers (None: all of them)."""
    if text is None:
        return None
    names = [p.strip() for p in text.split(",")]
    if not all(names):
        raise InputError(f"--providers {text!r}: expected a comma-separated list such as aws,gcp")
    bad = [p for p in names if p not in spec.providers]
    if bad:
        raise InputError(f"--providers: {', '.join(bad)} not in the spec's providers ({', '.join(spec.providers)})")
    if len(set(names)) != len(names):
        raise InputError(f"--providers {text!r}: a provider is named twice")
    return tuple(Provider(p) for p in names)


#: Most budget bands a frontier may have (each is one MIP solve per provider, up to the
#: 30 s time limit each; 1000 bands are already 25x the default).
MAX_BANDS = 1000


def check_options(
    spec: Spec,
    *,
    budget: float | None,
    bands: int,
    providers: tuple[str, ...] | None = None,
    workers: int | None = None,
) -> None:
    """The solve's options, checked before any work."""
    if providers is not None:
        bad = [p for p in providers if p not in spec.providers]
        if bad:
            raise InputError(f"--providers: {', '.join(bad)} not in the spec's providers ({', '.join(spec.providers)})")
    if budget is not None:
        check_range("--budget", budget, 0.0, MAX_BUDGET_USD, lo_open=True)
    check_range("--bands", bands, 2, MAX_BANDS, integer=True)
    check_workers(workers)


def run_solve(
    spec: Spec,
    catalog: Catalog,
    backend: Backend,
    *,
    method: str = "mip",
    bands: int = DEFAULT_BANDS,
    budget: float | None = None,
    providers: tuple[str, ...] | None = None,
    out_dir: Path,
    workers: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    time_limit: float = 30.0,
) -> SolveRun:
    """Solve the frontier, pick the answer for the budget, write the files."""
    check_options(spec, budget=budget, bands=bands, providers=providers, workers=workers)
    provs = spec.providers if providers is None else providers
    b0 = budget if budget is not None else spec.budget_usd
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if progress:
        progress("tables", 0, 1)
    # Robustness (issue 6, paper Sec. 5 / ENDURE): the search optimizes the noisy
    # mix, and the KL worst case around it when kl_radius is set.
    rho = 0.0 if spec.kl_radius is None else float(spec.kl_radius)
    robust = spec.noise > 0 or rho > 0
    ospec = (
        replace(spec, workload=replace(spec.workload, operations=noisy_mix(spec.workload.operations, spec.noise)))
        if spec.noise > 0
        else spec
    )
    tables = build_tables(ospec, catalog, provs, workers=workers, presets=PRESETS, rho=rho)
    timings["tables_s"] = time.perf_counter() - t0
    if not any(tables.contexts.values()):
        raise BudgetTooLow(b0, None, "no VM of the chosen providers can hold a shard of the data")
    total = bands_total = (bands + 1) * len(provs)
    done = 0

    def tick(_p: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress("bands", done, bands_total)

    t1 = time.perf_counter()
    fr = solve_frontier(
        ospec,
        catalog,
        tables,
        backend,
        method=method,
        bands=bands,
        budget=b0,
        providers=tuple(p for p in provs if p in tables.contexts),
        out_dir=out_dir,
        progress=tick,
        time_limit=time_limit,
        rho=rho,
    )
    timings["frontier_s"] = time.perf_counter() - t1
    del total
    fr.baselines = baselines(ospec, catalog, tables, fr.budgets)
    idx = int(abs(fr.budgets - b0).argmin())
    answer = fr.best[idx]
    lowest = cheapest(ospec, catalog, tables, backend, rho=rho) if method == "mip" else None
    if answer.chosen is None:
        cheapest_cost = lowest.cost if lowest else None
        if lowest is None:
            unavailable = {p: sla_terms(catalog, p, spec.slas).unavailable for p in provs}
            why = "; ".join(f"{p} cannot price SLA {', '.join(u)}" for p, u in unavailable.items() if u)
            raise BudgetTooLow(b0, None, why or "no feasible configuration")
        raise BudgetTooLow(b0, cheapest_cost)
    solution = solution_dict(spec, answer, fr.backend, method, b0)
    target = 0.0 if spec.min_throughput is None else spec.min_throughput
    if spec.max_latency_s is not None:
        target = max(target, 1.0 / spec.max_latency_s)
    solution["target"] = {
        "min_throughput": target if target > 0 else None,
        "met": answer.throughput >= target * (1 - 1e-9),
    }
    if target > 0 and not solution["target"]["met"]:
        meets = cheapest(ospec, catalog, tables, backend, min_throughput=target, rho=rho)
        solution["target"]["fastest_within_budget"] = {"throughput_ops": answer.throughput, "monthly_cost": answer.cost}
        if meets is not None and meets.chosen is not None:
            solution["target"]["cheapest_meeting_target"] = solution_dict(spec, meets, fr.backend, method, meets.cost)
        else:
            solution["target"]["cheapest_meeting_target"] = None
    solution["cheapest_possible_usd"] = lowest.cost if lowest else None
    solution["neighbours"] = neighbours(fr.best, b0)
    solution["optional_slas_usd"] = optional_slas(spec, catalog, answer)
    solution["frontier_check"] = {
        "monotone": fr.monotone,
        "repaired_bands": fr.repaired,
        "bands": len(fr.budgets),
        "providers": list(fr.points),
    }
    solution["providers_at_budget"] = {
        p: {"throughput_ops": pts[idx].throughput, "monthly_cost": pts[idx].cost if pts[idx].chosen else None}
        for p, pts in fr.points.items()
    }
    if robust:
        t2 = time.perf_counter()
        solution["robustness"] = robustness_report(spec, ospec, rho, catalog, backend, answer, b0, provs, workers)
        timings["nominal_s"] = time.perf_counter() - t2
    solution["objective"] = (
        (f"robust: noise {spec.noise:g}" + (f", KL radius {rho:g}" if rho else "")) if robust else ("nominal")
    )
    solution["search"] = {
        "contexts": {p: len(c) for p, c in tables.contexts.items()},
        "designs_per_vm": tables.grid_size,
        "timings_s": timings,
    }
    write_run(out_dir, fr, clean(solution))
    return SolveRun(spec, fr, answer, clean(solution), out_dir, tables, timings)


#: File types `--write-model` can write (Pyomo's writers, by suffix).
MODEL_SUFFIXES = (".lp", ".mps")


def check_model_path(path: Path) -> None:
    """Refuse a ``--write-model`` path before any solving: its type and its directory."""
    if path.suffix not in MODEL_SUFFIXES:
        raise InputError(f"--write-model {path}: the file must end in {' or '.join(MODEL_SUFFIXES)}")
    check_output_file(path, "--write-model")


def write_model(run: SolveRun, catalog: Catalog, path: Path) -> Path:
    """The MIP at the answer's budget and provider, as .lp or .mps (for any solver a user owns)."""
    from solver.backends import PyomoBackend
    from solver.model import build_mip

    provider = run.solution["provider"]
    ctx = run.tables.contexts.get(provider, [])
    m, _ = build_mip(run.spec, catalog, ctx, run.solution["budget"], providers=[provider])
    return PyomoBackend().write(m, path)
