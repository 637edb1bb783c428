"""`cosine solve`: tables -> frontier -> the answer for the spec's budget -> files.

Files written to the run directory (a contract other tools read):
``solution.json``, ``frontier.parquet`` (one row per band x provider),
``baselines.parquet`` (the presets on the same hardware), ``solver.log.jsonl``
(one record per band x provider) and ``solver/`` (each band's raw solver log).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cost_models import cpu_count
from cost_models.cloud import sla_cost, sla_terms
from cost_models.envelope import check_nodes
from cost_models.pricing.catalog import HOURS_PER_MONTH, Catalog
from cost_models.replication import logical_data_gib
from cost_models.robust import is_robust, perturbed_workload
from solver.backends import Backend
from solver.frontier import (
    DEFAULT_BANDS,
    Frontier,
    Point,
    baselines,
    cheapest,
    neighbours,
    solve_frontier,
)
from solver.reeval_cache import ReevalCache
from solver.rundir import (
    SOLUTION_VERSION,
    Bill,
    Binding,
    Certificate,
    Choice,
    Configuration,
    FrontierCheck,
    NodeDesign,
    NodeStorage,
    Prediction,
    ProviderAtBudget,
    Robustness,
    ScanLength,
    Search,
    Solution,
    Target,
    TargetMiss,
    VmCount,
    write_run,
)
from solver.table_cache import TableCache
from solver.tables.build import build_tables, check_workers
from solver.tables.context import Tables
from specs.errors import BudgetTooLow, InputError, check_range
from specs.io import check_output_file
from specs.schema import DEFAULT_SCAN_LENGTH, MAX_BUDGET_USD, Spec
from specs.vocab import (
    PRESETS,
    SLA_FEATURES,
    BindingResource,
    Method,
    Objective,
    Operation,
    PriceSet,
    Provider,
    SlaFeature,
)


@dataclass
class SolveRun:
    """Everything a solve produced (what the CLI prints)."""

    spec: Spec
    frontier: Frontier
    answer: Point
    solution: Solution
    out_dir: Path
    tables: Tables
    timings: dict[str, float] = field(default_factory=dict)


def _node_designs(pt: Point) -> tuple[list[NodeDesign], list[NodeStorage]]:
    """The point's node groups as solution.json's ``designs`` and ``storage`` (checked as a reader would)."""
    assert pt.exact is not None
    return [g.design for g in pt.exact.per_node], [g.storage for g in pt.exact.per_node]


def configuration(spec: Spec, pt: Point, backend: str, method: Method, budget: float) -> Configuration:
    """The contract's :class:`~solver.rundir.Configuration` of one frontier point."""
    assert pt.chosen is not None and pt.exact is not None
    ex, ch = pt.exact, pt.chosen
    r = pt.result
    x = ex.throughput
    designs, storage = _node_designs(pt)
    return Configuration(
        version=SOLUTION_VERSION,
        spec=spec.name,
        spec_source=spec.source,
        spec_raw=spec.raw,
        budget=budget,
        provider=Provider(ch.provider),
        pricing=PriceSet(spec.pricing),
        vms=[VmCount(d.vm_type, d.count) for d in designs],
        storage=storage,
        slas=[SlaFeature(f) for f in spec.slas],
        designs=designs,
        monthly_cost=Bill(compute=ch.compute, storage=ch.storage, sla=ch.sla, total=ch.monthly_cost),
        predicted=Prediction(
            latency_s=(1.0 / x) if x > 0 else None,
            latency_p50_s=_worst([g.design.latency_p50_s for g in ex.per_node]),
            latency_p99_s=_worst([g.design.latency_p99_s for g in ex.per_node]),
            throughput_ops=x,
            perturbed_throughput_ops=ex.perturbed if is_robust(spec) else None,
            io_per_op={Operation(op): v for op, v in ex.io_per_op.items()},
            monthly_capacity_ops=x * HOURS_PER_MONTH * 3600,
            operations_per_month=spec.workload.operations_per_month,
        ),
        certificate=Certificate(
            mip_gap=None if r is None or not math.isfinite(r.gap) else r.gap,
            approx_error=pt.approx_error if math.isfinite(pt.approx_error) else None,
            backend=backend,
            method=method,
            status=pt.status,
            objective=None if r is None or not math.isfinite(r.objective) else r.objective,
            best_bound=None if r is None or not math.isfinite(r.bound) else r.bound,
            nodes=None if r is None else r.nodes,
            wall_s=None if r is None else r.seconds,
            scaling_error=None if r is None else r.scaling_error,
        ),
    )


def _worst(values: list[float | None]) -> float | None:
    """The largest of some nodes' latencies (None when a node has none: at or past its capacity)."""
    return None if not values or any(v is None for v in values) else max(v for v in values if v is not None)


def optional_slas(spec: Spec, catalog: Catalog, pt: Point) -> dict[SlaFeature, float | None]:
    """What adding each SLA the spec does not require would cost this configuration."""
    if pt.chosen is None:
        return {}
    ch = pt.chosen
    nodes = sum(k for _, k in ch.nodes)
    base = ch.compute + ch.storage
    out: dict[SlaFeature, float | None] = {}
    for f in SLA_FEATURES:
        if f in spec.slas:
            continue
        t = dataclasses.replace(sla_terms(catalog, ch.provider, (f,)), data_gib=logical_data_gib(spec))
        if t.unavailable:
            out[f] = None
        elif nodes < t.min_nodes:
            out[f] = None
        else:
            out[f] = sla_cost(t, nodes, base)
    return out


def _choice(pt: Point) -> Choice:
    per_node = pt.exact.per_node if pt.exact else []
    return Choice(
        provider=Provider(pt.chosen.provider) if pt.chosen else None,
        vms=[VmCount(g.design.vm_type, g.design.count) for g in per_node],
        classes=sorted({g.design.design_class for g in per_node}),
        monthly_cost=pt.cost if pt.chosen else None,
        expected_ops=pt.throughput,
        perturbed_ops=pt.perturbed,
    )


def robustness_report(spec: Spec, fr: Frontier, idx: int) -> Robustness:
    """The robust rule at the budget's band: the chosen (robust) configuration,
    the nominal one (best expected throughput, no robustness) and the best on the
    perturbed workload, each measured on both workloads (exact model)."""
    nominal = fr.best_of(fr.nominal)[idx]
    robust = fr.best[idx]
    best_p = fr.best_perturbed()[idx]
    pw = perturbed_workload(spec)
    added = {
        Operation(op): v for op, v in pw.operations.items() if spec.workload.operations.get(op, 0.0) == 0.0 and v > 0
    }
    return Robustness(
        met_floor_ops=robust.floor_ops,
        chosen_at_budget=float(fr.budgets[robust.chosen_band]) if robust.chosen_band is not None else None,
        rule="maximize the expected workload's throughput subject to perturbed throughput >= "
        "(1 - tolerance) x the best perturbed throughput at this budget",
        noise=spec.noise,
        kl_radius=spec.kl_radius or None,
        tolerance=spec.tolerance,
        perturbed_mix={Operation(op): v for op, v in pw.operations.items()},
        added_operations=added,
        scan_length=ScanLength(
            entries=pw.scan_length,
            source="spec" if spec.workload.scan_length_given else "default",
            note=None
            if spec.workload.scan_length_given
            else f"the spec names no range length: range scans get {DEFAULT_SCAN_LENGTH:g} entries "
            "(YCSB E's mean; set workload.scan_length to change it)",
        ),
        robust_choice=_choice(robust),
        nominal_choice=_choice(nominal),
        best_perturbed_choice=_choice(best_p),
        cost_of_robustness=1.0 - robust.throughput / nominal.throughput if nominal.throughput > 0 else None,
        gain_under_perturbation=robust.perturbed / nominal.perturbed - 1.0 if nominal.perturbed > 0 else None,
        robust_carried_bands=fr.robust_carried,
    )


def binding(spec: Spec, fr: Frontier, idx: int, answer: Point, budget: float) -> Binding:
    """What stops the answer from being faster, in words: the budget (a dearer
    configuration on the frontier is faster), else the cluster cap (every node
    the cap allows is used), else the nodes' IOPS (every node is bound by its
    device at the most IOPS its VM can drive); plus the answer's capacity against
    the workload's own operations per month."""
    assert answer.chosen is not None and answer.exact is not None
    top = max((p for p in fr.best if p.chosen), key=lambda p: (p.throughput, -p.cost))
    nodes = answer.nodes
    device_bound = all(g.design.device_bound for g in answer.exact.per_node)
    network_bound = all(g.design.network_bound for g in answer.exact.per_node)
    opm = spec.workload.operations_per_month
    capacity = answer.throughput * HOURS_PER_MONTH * 3600
    if answer.carried and answer.objective == Objective.ROBUST:
        res, detail = (
            BindingResource.ROBUST_RULE,
            f"the robust rule: the answer spends {answer.cost / budget:.1%} of {_usd(budget)}; every "
            f"configuration that costs more and is faster on the expected workload is more than "
            f"{spec.tolerance:.0%} below the best perturbed throughput at its price",
        )
    elif top.throughput > answer.throughput * (1 + 1e-6):
        up = min(
            (p for p in fr.best if p.chosen and p.throughput > answer.throughput * (1 + 1e-6)), key=lambda p: p.cost
        )
        res, detail = (
            BindingResource.BUDGET,
            f"the budget: the answer spends {answer.cost / budget:.1%} of {_usd(budget)}; "
            f"{_usd(up.cost - answer.cost)} more a month buys "
            f"{up.throughput / answer.throughput - 1:.1%} more throughput",
        )
    elif nodes >= fr.max_cluster:
        res, detail = (
            BindingResource.CLUSTER_CAP,
            f"the cluster cap: all {fr.max_cluster:,} nodes it allows are used"
            + (" (design.max_cluster_size)" if spec.design.max_cluster_size else " (derived from data and budget)")
            + (
                "; each node is bound by its device's IOPS"
                if device_bound
                else "; each node is bound by its VM's network"
                if network_bound
                else "; each node is bound by its CPU"
            ),
        )
    elif network_bound:
        res, detail = (
            BindingResource.NETWORK,
            "the network: every node runs at its VM's baseline bandwidth (bytes on the wire per operation x "
            "throughput), and no larger cluster is in the search space",
        )
    elif device_bound:
        res, detail = (
            BindingResource.NODE_IOPS,
            "per-node IOPS: every node is bound by its device at the most IOPS its VM drives, "
            "and no larger cluster is in the search space",
        )
    else:
        res, detail = (
            BindingResource.NONE,
            "nothing in the search space: this is the fastest configuration at any budget",
        )
    if opm:
        if capacity < opm:
            detail += (
                f"; the workload's own {opm:.3g} operations a month exceed the capacity "
                f"({capacity / opm:.0%} of them can be served)"
            )
            if res == BindingResource.NONE:
                res = BindingResource.OPERATIONS_PER_MONTH
        else:
            detail += f"; capacity is {capacity / opm:,.1f}x the workload's {opm:.3g} operations a month"
    return Binding(
        resource=res,
        detail=detail,
        budget_used=answer.cost / budget,
        nodes=nodes,
        cluster_cap=fr.max_cluster,
        device_bound_nodes=sum(g.design.count for g in answer.exact.per_node if g.design.device_bound),
        capacity_per_month=capacity,
        operations_per_month=opm,
    )


def _usd(x: float) -> str:
    return f"${x:,.0f}"


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


def check_cluster_room(spec: Spec, catalog: Catalog, providers: tuple[str, ...]) -> None:
    """A spec whose SLAs need more VMs than any cluster of it may have is refused before any work: a
    node holds at least one entry, so ``workload.entries`` (or ``design.max_cluster_size``) caps the
    nodes, and ``availability`` needs at least two."""
    from solver.space import cluster_cap

    cap = cluster_cap(spec, catalog, providers)
    need = {p: sla_terms(catalog, p, spec.slas).min_nodes for p in providers}
    if all(n > cap for n in need.values()):
        why = (
            f"design.max_cluster_size is {cap}"
            if spec.design.max_cluster_size
            else f"workload.entries is {spec.workload.entries:,} and a node holds at least one entry"
        )
        raise InputError(
            f"slas: {', '.join(spec.slas)} need at least {min(need.values())} VMs, but {why}: "
            f"no cluster of this spec can have more than {cap}"
        )


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
    method: Method = Method.THRESHOLD,
    bands: int = DEFAULT_BANDS,
    budget: float | None = None,
    providers: tuple[str, ...] | None = None,
    out_dir: Path,
    workers: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    time_limit: float = 30.0,
    cache: TableCache | None = None,
) -> SolveRun:
    """Solve the frontier, pick the answer for the budget, write the files. With a
    ``cache`` the design tables are read from it when they are there (solver.table_cache)."""
    check_options(spec, budget=budget, bands=bands, providers=providers, workers=workers)
    provs = spec.providers if providers is None else providers
    check_cluster_room(spec, catalog, provs)
    b0 = budget if budget is not None else spec.budget_usd
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if progress:
        progress("tables", 0, 1)
    tables = build_tables(spec, catalog, provs, workers=workers, presets=PRESETS, cache=cache)
    timings["tables_s"] = time.perf_counter() - t0
    if not any(tables.contexts.values()):
        raise BudgetTooLow(b0, None, "no VM of the chosen providers can hold a shard of the data")
    robust = is_robust(spec)
    bands_total = (bands + 1) * len(provs) * (3 if robust else 1)
    done = 0

    def tick(_p: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress("bands", done, bands_total)

    t1 = time.perf_counter()
    reevals = ReevalCache(cache.directory, notes=cache.notes) if cache is not None else None
    fr = solve_frontier(
        spec,
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
        reevals=reevals,
        workers=workers if workers is not None else cpu_count(),
    )
    timings["frontier_s"] = time.perf_counter() - t1
    fr.baselines = baselines(spec, catalog, tables, fr.budgets)
    idx = int(abs(fr.budgets - b0).argmin())
    answer = fr.best[idx]
    lowest = cheapest(spec, catalog, tables, backend, exact=fr.exact) if method != Method.EXHAUSTIVE else None
    if answer.chosen is None:
        cheapest_cost = lowest.cost if lowest else None
        if lowest is None:
            unavailable = {p: sla_terms(catalog, p, spec.slas).unavailable for p in provs}
            why = "; ".join(f"{p} cannot price SLA {', '.join(u)}" for p, u in unavailable.items() if u)
            raise BudgetTooLow(b0, None, why or "no feasible configuration")
        raise BudgetTooLow(b0, cheapest_cost)
    core = configuration(spec, answer, fr.backend, method, b0)
    target = 0.0 if spec.min_throughput is None else spec.min_throughput
    met = answer.throughput >= target * (1 - 1e-9)
    tgt = Target(
        min_throughput=target if target > 0 else None,
        met=met,
        max_latency_s=spec.max_latency_s,
        max_latency_p50_s=spec.max_latency_p50_s,
    )
    if target > 0 and not met:
        meets = cheapest(spec, catalog, tables, backend, min_throughput=target, exact=fr.exact)
        tgt.fastest_within_budget = TargetMiss(throughput_ops=answer.throughput, monthly_cost=answer.cost)
        if meets is not None and meets.chosen is not None:
            tgt.cheapest_meeting_target = configuration(spec, meets, fr.backend, method, meets.cost)
    robust_text = (
        f"robust: noise {spec.noise:g}"
        + (f", KL radius {spec.kl_radius:g}" if spec.kl_radius else "")
        + f", tolerance {spec.tolerance:g}"
    )
    # The guard: is every chosen node's prediction inside what the engine was measured to do?
    core.certificate.envelope = check_nodes(core.designs, spec.workload.operations)
    solution = Solution(
        **{f.name: getattr(core, f.name) for f in dataclasses.fields(Configuration)},
        target=tgt,
        cheapest_possible_usd=lowest.cost if lowest else None,
        neighbours=neighbours(fr.best, b0),
        optional_slas_usd=optional_slas(spec, catalog, answer),
        frontier_check=FrontierCheck(
            monotone=fr.monotone,
            repaired_bands=fr.repaired,
            robust_carried=fr.robust_carried,
            bands=len(fr.budgets),
            providers=[Provider(p) for p in fr.points],
        ),
        binding=binding(spec, fr, idx, answer, b0),
        providers_at_budget={
            Provider(p): ProviderAtBudget(
                throughput_ops=pts[idx].throughput, monthly_cost=pts[idx].cost if pts[idx].chosen else None
            )
            for p, pts in fr.points.items()
        },
        robustness=robustness_report(spec, fr, idx) if robust else None,
        objective=robust_text if robust else "nominal",
        search=Search(
            max_cluster=fr.max_cluster,
            max_cluster_source="spec" if spec.design.max_cluster_size else "derived from data and budget",
            contexts={Provider(p): len(c) for p, c in tables.contexts.items()},
            designs_per_vm=tables.grid_size,
            timings_s=timings,
        ),
    )
    if reevals is not None:
        reevals.save(spec)  # the re-evaluations of the cheapest clusters found after the frontier
    write_run(out_dir, fr, solution, spec.workload.operations)
    return SolveRun(spec, fr, answer, solution, out_dir, tables, timings)


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
    from solver.model import X_SCALE, build_mip, columns_for, latency_target_kops
    from specs.vocab import Objective

    provider = run.solution.provider
    objective, floor = Objective.EXPECTED, 0.0
    if run.answer.objective == Objective.ROBUST and run.answer.floor_ops is not None:
        objective, floor = Objective.ROBUST, run.answer.floor_ops * X_SCALE
    ctx = columns_for(
        run.tables.contexts.get(provider, []),
        run.spec.workload.entries,
        objective,
        floor,
        latency_target_kops(run.spec),
    )
    m, _ = build_mip(run.spec, catalog, ctx, run.solution.budget, run.tables.max_cluster, providers=[provider])
    return PyomoBackend().write(m, path)
