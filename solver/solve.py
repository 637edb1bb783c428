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
from cost_models.bill import bill_terms, itemize
from cost_models.cloud import sla_cost, sla_terms
from cost_models.envelope import check_nodes
from cost_models.pricing.catalog import HOURS_PER_MONTH, Catalog
from cost_models.replication import horizon_days, logical_data_gib, replica_nodes, replication_gib_month
from cost_models.robust import is_robust, perturbed_workload
from solver.backends import Backend
from solver.frontier import (
    DEFAULT_BANDS,
    Frontier,
    Point,
    neighbours,
)
from solver.replicas import (
    PlanFrontiers,
    PlanTables,
    baselines_of_plans,
    cheapest_of_plans,
    plan_tables,
    solve_plans,
)
from solver.rundir import (
    BASELINES,
    FRONTIER,
    LOG,
    LOG_DIR,
    SOLUTION,
    SOLUTION_VERSION,
    Bill,
    Binding,
    Certificate,
    Choice,
    Configuration,
    FrontierCheck,
    FrontierRow,
    Need,
    NeedAnswer,
    NodeDesign,
    NodeStorage,
    Prediction,
    ProviderAtBudget,
    Replication,
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
from solver.tables.build import check_workers
from specs.errors import BudgetTooLow, InputError, check_range
from specs.io import RunFiles, check_output_file
from specs.schema import DEFAULT_SCAN_LENGTH, MAX_BUDGET_USD, Spec, parse_providers_flag
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
    plans: PlanFrontiers
    timings: dict[str, float] = field(default_factory=dict)


def _node_designs(pt: Point) -> tuple[list[NodeDesign], list[NodeStorage]]:
    """The point's node groups as solution.json's ``designs`` and ``storage`` (checked as a reader would)."""
    assert pt.exact is not None
    return [g.design for g in pt.exact.per_node], [g.storage for g in pt.exact.per_node]


def bill(node: Spec, catalog: Catalog, pt: Point) -> Bill:
    """The point's bill line by line (cost_models.bill), ``node`` the spec its nodes serve."""
    assert pt.chosen is not None
    ch = pt.chosen
    terms = bill_terms(node, catalog, ch.provider)
    backup = sum(c.storage.backup_usd_month * k for c, k in ch.nodes)
    lines = itemize(terms, replica_nodes(node), pt.nodes, ch.compute, ch.storage, backup)
    return Bill(**vars(lines))


def replication(spec: Spec, node: Spec, catalog: Catalog) -> Replication:
    """How a configuration of ``node`` (cost_models.replication.node_spec of ``spec``) keeps its data."""
    view = node.node_view
    assert view is not None, "a solve's nodes serve a replication plan's node view"
    plan = view.plan
    return Replication(
        factor=plan.rf,
        zones=plan.zones,
        consistency=plan.consistency,
        read_replicas=plan.read_replicas,
        amplification=view.amplification,
        clients_across_zones=spec.replication.clients_across_zones,
        cross_zone_gib_month=replication_gib_month(node, plan),
        horizon_days=horizon_days(spec),
        data_gib=logical_data_gib(node),
        label=plan.label,
    )


def configuration(
    spec: Spec, pf: PlanFrontiers, catalog: Catalog, pt: Point, backend: str, method: Method, budget: float
) -> Configuration:
    """The contract's :class:`~solver.rundir.Configuration` of one point of ``pf``'s plans."""
    assert pt.chosen is not None and pt.exact is not None and pt.plan is not None
    ex, ch = pt.exact, pt.chosen
    node = pf.node_spec(pt.plan)
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
        monthly_cost=bill(node, catalog, pt),
        replication=replication(spec, node, catalog),
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
            grid_gap=pt.grid_gap if math.isfinite(pt.grid_gap) else None,
            grid_bound_ops=pt.grid_bound if math.isfinite(pt.grid_bound) else None,
            polished=pt.polished,
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


def next_node_usd(spec: Spec, catalog: Catalog, answer: Point) -> float:
    """What one more unit of the answer's cheapest group adds to its bill (SLA terms included): a
    node, or a replicated spec's replica group of RF nodes (solver.bottleneck.ColumnTable.unit)."""
    assert answer.chosen is not None
    ch = answer.chosen
    terms = bill_terms(spec, catalog, ch.provider)
    nodes = sum(k for _, k in ch.nodes)
    spend = ch.compute + ch.storage
    now = sla_cost(terms, nodes, spend)
    c = min((c for c, _ in ch.nodes), key=lambda c: c.cost_month)
    unit = replica_nodes(spec)
    return c.cost_month * unit + sla_cost(terms, nodes + unit, spend + c.cost_month * unit) - now


def binding(spec: Spec, catalog: Catalog, fr: Frontier, idx: int, answer: Point, budget: float) -> Binding:
    """What stops the answer from being faster, in words: the robust rule (a faster configuration
    within the budget is not within the tolerance of the best perturbed one), the cluster cap
    (every node it allows is used), the engine's layout (more nodes of the answer's design would
    each hold fewer keys in a slower layout: solver.grid), else the budget (the answer leaves less
    than one more node's price unspent, and a dearer configuration on the frontier is faster), else
    the nodes' IOPS; plus what it leaves unspent against one more node's price, and the answer's
    capacity against the workload's own operations per month."""
    assert answer.chosen is not None and answer.exact is not None
    top = max((p for p in fr.best if p.chosen), key=lambda p: (p.throughput, -p.cost))
    nodes = answer.nodes
    device_bound = all(g.design.device_bound for g in answer.exact.per_node)
    network_bound = all(g.design.network_bound for g in answer.exact.per_node)
    opm = spec.workload.operations_per_month
    capacity = answer.throughput * HOURS_PER_MONTH * 3600
    unspent = budget - answer.cost
    one_more = next_node_usd(spec, catalog, answer)
    left = f"it leaves {_usd(unspent)} of {_usd(budget)} unspent ({answer.cost / budget:.1%} spent)"
    if answer.carried and answer.objective == Objective.ROBUST:
        res, detail = (
            BindingResource.ROBUST_RULE,
            f"the robust rule: {left}; every configuration that costs more and is faster on the expected "
            f"workload is more than {spec.tolerance:.0%} below the best perturbed throughput at its price",
        )
    elif answer.polished and unspent >= one_more:
        res, detail = (
            BindingResource.ENGINE_LAYOUT,
            f"the engine's layout: {left}, more than one more node ({_usd(one_more)}); with more nodes of this "
            "design each would hold fewer keys in a tree of fewer levels, which this workload runs slower "
            "(the certificate's count check evaluated every such count)",
        )
    elif nodes >= fr.max_cluster and (unspent >= one_more or top.throughput <= answer.throughput * (1 + 1e-6)):
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
            )
            + f"; {left}",
        )
    elif top.throughput > answer.throughput * (1 + 1e-6):
        up = min(
            (p for p in fr.best if p.chosen and p.throughput > answer.throughput * (1 + 1e-6)), key=lambda p: p.cost
        )
        at_cap = f"; all {fr.max_cluster:,} nodes the cluster cap allows are used" if nodes >= fr.max_cluster else ""
        res, detail = (
            BindingResource.BUDGET,
            f"the budget: {left}, less than one more node ({_usd(one_more)}){at_cap}; {_usd(up.cost - answer.cost)} "
            f"more a month buys {up.throughput / answer.throughput - 1:.1%} more throughput",
        )
    elif network_bound:
        res, detail = (
            BindingResource.NETWORK,
            "the network: every node runs at its VM's baseline bandwidth (bytes on the wire per operation x "
            f"throughput), and no larger cluster is in the search space; {left}",
        )
    elif device_bound:
        res, detail = (
            BindingResource.NODE_IOPS,
            "per-node IOPS: every node is bound by its device at the most IOPS its VM drives, "
            f"and no larger cluster is in the search space; {left}",
        )
    else:
        res, detail = (
            BindingResource.NONE,
            f"nothing in the search space: this is the fastest configuration at any budget; {left}",
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
        unspent_usd=unspent,
        next_node_usd=one_more,
    )


def excluded_by(fr: Frontier, provider: str, idx: int) -> str | None:
    """Why the headline does not consider ``provider``'s own answer at band ``idx``: its rows meet
    its own robust floor, the headline the best provider's (None: it does not exclude it)."""
    own, head = fr.points[provider][idx], fr.headline.get(provider, fr.points[provider])[idx]
    if own.chosen is None or (head.chosen is not None and head.chosen.nodes == own.chosen.nodes):
        return None
    best = max(fr.perturbed, key=lambda p: fr.perturbed[p][idx].perturbed_kops_or_zero)
    if head.chosen is None:
        return (
            f"the robust rule: no {provider} configuration within the budget is within the tolerance "
            f"of {best}'s perturbed throughput"
        )
    return f"the robust rule: under {best}'s perturbed throughput the headline takes another {provider} configuration"


def need_of(spec: Spec) -> Need | None:
    """The rate the spec asks for (solution.json ``cheapest_meeting_need.need``): the larger of
    ``performance.min_throughput`` and ``operations_per_month``'s average rate times
    ``performance.peak_factor``, of those it states; None when it states neither."""
    opm = spec.workload.operations_per_month
    avg = opm / (HOURS_PER_MONTH * 3600) if opm else None
    peak_src = "spec" if "peak_factor" in ((spec.raw.get("performance") or {}) if spec.raw else {}) else "default"
    parts = []
    if spec.min_throughput:
        parts.append((spec.min_throughput, f"performance.min_throughput {spec.min_throughput:,.0f} ops/s"))
    if avg:
        parts.append(
            (
                avg * spec.peak_factor,
                f"operations_per_month {opm:.3g} = {avg:,.0f} ops/s on average x peak factor {spec.peak_factor:g}"
                + (
                    " (performance.peak_factor)"
                    if peak_src == "spec"
                    else " (the default; performance.peak_factor sets it)"
                ),
            )
        )
    if not parts:
        return None
    rate, why = max(parts)
    rule = why if len(parts) == 1 else f"{why}, the larger of the two stated needs"
    return Need(
        throughput_ops=rate,
        min_throughput_ops=spec.min_throughput,
        operations_per_month=opm,
        average_ops=avg,
        peak_factor=spec.peak_factor,
        peak_factor_source=peak_src,
        rule=rule,
    )


#: Searches for the cheapest configuration whose exact throughput reaches a target (each a
#: cheapest_reaching pass over the tables: tens of milliseconds).
CHEAPEST_RETRIES = 16


def _cheapest_meeting(
    catalog: Catalog, runs: list[PlanTables], backend: Backend, target: float, pf: PlanFrontiers
) -> Point | None:
    """The cheapest configuration the tables say reaches ``target`` whose exact re-evaluation reaches
    it too: where the exact model values the tables' pick below the target (a mixed cluster the
    tables over-value), the search asks again for just more than the tables' value of that pick, so
    the next one up the tables' order, at most :data:`CHEAPEST_RETRIES` times; ``None`` if none is
    found. (It used to return the tables' pick, reported as meeting a target its own prediction
    missed: 1.86M ops/s for 3.0M.)"""
    ask = target
    for _ in range(CHEAPEST_RETRIES):
        meets = cheapest_of_plans(catalog, runs, backend, min_throughput=ask, frontiers=pf)
        if meets is None or meets.chosen is None:
            return None
        if meets.throughput >= target * (1 - 1e-9):
            return meets
        ask = max(ask, meets.chosen.throughput_kops * 1e3) * (1 + 1e-6)
    return None


def _usd(x: float) -> str:
    return f"${x:,.0f}"


def parse_providers(text: str | None, spec: Spec) -> tuple[Provider, ...] | None:
    """``--providers aws,gcp``: a non-empty subset of the spec's providers (None: all of them)."""
    return None if text is None else parse_providers_flag(text, spec.providers, "the spec's providers")


def check_cluster_room(spec: Spec, catalog: Catalog, providers: tuple[str, ...]) -> None:
    """A spec whose SLAs need more VMs than any cluster of it may have is refused before any work: a
    node holds at least one entry, so ``workload.entries`` (or ``design.max_cluster_size``) caps the
    nodes, and ``availability`` needs at least two. So is a latency bound no node can meet
    (:func:`check_latency_floor`)."""
    from solver.space import cluster_cap

    check_latency_floor(spec, catalog, providers)
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


def latency_bounds(spec: Spec) -> list[tuple[str, float]]:
    """The spec's request latency bounds, each with its field: (``performance.max_latency_s``, the
    p99's), (``performance.max_latency_p50_s``, the p50's)."""
    named = (
        ("performance.max_latency_s", spec.max_latency_s),
        ("performance.max_latency_p50_s", spec.max_latency_p50_s),
    )
    return [(name, bound) for name, bound in named if bound is not None]


def check_latency_floor(spec: Spec, catalog: Catalog, providers: tuple[str, ...]) -> None:
    """A latency bound at or below the smallest round trip of the providers' VMs is refused before any
    work: a request's latency is its round trip plus its batch's wait and service (and a write's
    group-commit wait; cost_models.latency), so no node of any design can meet it, and the tables
    would be built (a minute) only to hold no column (the run then blamed the data's size)."""
    rtts = {p: min(vm.rtt_s for vm in catalog.vms[p]) for p in providers if catalog.vms.get(p)}
    if not rtts:
        return
    floor = min(rtts.values())
    for name, bound in latency_bounds(spec):
        if bound <= floor:
            at = ", ".join(f"{p} {rtt * 1e6:,.0f} us" for p, rtt in rtts.items())
            raise InputError(
                f"{name} must be above {floor:.6g} s, the smallest round trip of the providers' VMs "
                f"({at}; a request's latency is at least its round trip), got {bound:.6g}"
            )


def nothing_feasible(
    spec: Spec,
    catalog: Catalog,
    providers: tuple[str, ...],
    budget: float,
    workers: int | None,
    cache: TableCache | None,
) -> Exception:
    """Why no design table has a column: the data (no VM of the providers holds a shard of it at any
    cluster size: BudgetTooLow, at any budget), or the spec's latency bounds (above the round trip,
    :func:`check_latency_floor`, but the tables without them have columns: every node that holds a
    shard misses them, InputError naming them). Builds the tables without the bounds (cached), so
    it costs a table build, and only a spec with a latency bound pays it."""
    data = BudgetTooLow(budget, None, "no VM of the chosen providers can hold a shard of the data")
    bounds = latency_bounds(spec)
    if not bounds:
        return data
    free = dataclasses.replace(spec, max_latency_s=None, max_latency_p50_s=None)
    if not any(
        any(r.tables.contexts.values()) for r in plan_tables(free, catalog, providers, workers=workers, cache=cache)
    ):
        return data
    named = " and ".join(f"{name} ({bound:.6g} s)" for name, bound in bounds)
    it = "them" if len(bounds) > 1 else "it"
    return InputError(
        f"{named}: no configuration of the chosen providers meets {it}, though without {it} the data fits: "
        f"on every VM and design even an idle node's round trip, service and group-commit wait take longer"
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
    runs = plan_tables(spec, catalog, provs, workers=workers, presets=PRESETS, cache=cache)
    timings["tables_s"] = time.perf_counter() - t0
    if progress:
        progress("tables", 1, 1)
    if not any(any(r.tables.contexts.values()) for r in runs):
        raise nothing_feasible(spec, catalog, provs, b0, workers, cache)
    robust = is_robust(spec)
    # per provider: the nominal bands, and with robustness the perturbed, the robust rule's and the
    # headline's (the robust rule under the best provider's floor; counted when it is not solved)
    bands_total = (bands + 1) * sum(len(r.providers) for r in runs) * (4 if robust else 1)
    done = 0

    def tick(_p: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress("bands", done, bands_total)

    t1 = time.perf_counter()
    pf = solve_plans(
        spec,
        catalog,
        runs,
        backend,
        method=method,
        bands=bands,
        budget=b0,
        out_dir=out_dir,
        progress=tick,
        time_limit=time_limit,
        cache=cache,
        workers=workers if workers is not None else cpu_count(),
    )
    fr = pf.merged
    timings["frontier_s"] = time.perf_counter() - t1
    fr.baselines = baselines_of_plans(catalog, runs, fr.budgets)
    idx = int(abs(fr.budgets - b0).argmin())
    answer = fr.best[idx]
    lowest = cheapest_of_plans(catalog, runs, backend, frontiers=pf) if method != Method.EXHAUSTIVE else None
    if answer.chosen is None:
        cheapest_cost = lowest.cost if lowest else None
        if lowest is None:
            unavailable = {p: sla_terms(catalog, p, spec.slas).unavailable for p in provs}
            why = "; ".join(f"{p} cannot price SLA {', '.join(u)}" for p, u in unavailable.items() if u)
            raise BudgetTooLow(b0, None, why or "no feasible configuration")
        raise BudgetTooLow(b0, cheapest_cost)
    core = configuration(spec, pf, catalog, answer, fr.backend, method, b0)
    target = 0.0 if spec.min_throughput is None else spec.min_throughput
    met = answer.throughput >= target * (1 - 1e-9)
    tgt = Target(
        min_throughput=target if target > 0 else None,
        met=met,
        max_latency_s=spec.max_latency_s,
        max_latency_p50_s=spec.max_latency_p50_s,
    )
    if target > 0 and not met:
        meets = _cheapest_meeting(catalog, runs, backend, target, pf)
        tgt.fastest_within_budget = TargetMiss(throughput_ops=answer.throughput, monthly_cost=answer.cost)
        if meets is not None and meets.chosen is not None:
            tgt.cheapest_meeting_target = configuration(spec, pf, catalog, meets, fr.backend, method, meets.cost)
    need = need_of(spec)
    need_answer = None
    if need is not None:
        meets_need = cheapest_of_plans(catalog, runs, backend, min_throughput=need.throughput_ops, frontiers=pf)
        if meets_need is not None and meets_need.chosen is not None:
            conf = configuration(spec, pf, catalog, meets_need, fr.backend, method, meets_need.cost)
            note = None
            if meets_need.throughput < need.throughput_ops * (1 - 1e-9):
                note = (
                    f"the tables value it at {meets_need.chosen.throughput_kops / 1e-3:,.0f} ops/s; the exact model "
                    f"{meets_need.throughput:,.0f}, below the need by its approximation error"
                )
            need_answer = NeedAnswer(need=need, configuration=conf, note=note)
        else:
            need_answer = NeedAnswer(need=need, note=f"no configuration reaches {need.throughput_ops:,.0f} ops/s")
    robust_text = (
        f"robust: noise {spec.noise:g}"
        + (f", KL radius {spec.kl_radius:g}" if spec.kl_radius else "")
        + f", tolerance {spec.tolerance:g}"
    )
    # The guard: is every chosen node's prediction inside what the engine was measured to do?
    node = pf.node_spec(answer.plan) if answer.plan is not None else spec
    core.certificate.envelope = check_nodes(core.designs, node.workload.operations)
    solution = Solution(
        **{f.name: getattr(core, f.name) for f in dataclasses.fields(Configuration)},
        target=tgt,
        cheapest_possible_usd=lowest.cost if lowest else None,
        neighbours=neighbours(fr.best, b0),
        optional_slas_usd=optional_slas(node, catalog, answer),
        frontier_check=FrontierCheck(
            monotone=fr.monotone,
            repaired_bands=fr.repaired,
            robust_carried=fr.robust_carried,
            bands=len(fr.budgets),
            providers=[Provider(p) for p in fr.points],
        ),
        binding=binding(node, catalog, fr, idx, answer, b0),
        providers_at_budget={
            Provider(p): ProviderAtBudget(
                throughput_ops=pts[idx].throughput,
                monthly_cost=pts[idx].cost if pts[idx].chosen else None,
                excluded_by=excluded_by(fr, p, idx),
            )
            for p, pts in fr.points.items()
        },
        robustness=robustness_report(spec, fr, idx) if robust else None,
        cheapest_meeting_need=need_answer,
        objective=robust_text if robust else "nominal",
        search=Search(
            max_cluster=fr.max_cluster,
            max_cluster_source="spec" if spec.design.max_cluster_size else "derived from data and budget",
            contexts={
                Provider(p): sum(len(r.tables.contexts.get(p, [])) for r in runs)
                for p in sorted({p for r in runs for p in r.tables.contexts})
            },
            designs_per_vm=runs[0].tables.grid_size,
            timings_s=timings,
            band_count=bands,
        ),
    )
    pf.save()  # the cheapest clusters found after the frontier: their searches and re-evaluations
    write_run(out_dir, fr, solution, spec.workload.operations)
    return SolveRun(spec, fr, answer, solution, out_dir, pf, timings)


#: A `cosine solve` run directory's files (specs.io.check_run_dir: --out must be a new or empty
#: directory or such a run): every finished run holds the log and the frontier; an interrupted one
#: leaves the bands' log directory (made before any file) and some of write_run's files.
RUN_FILES = RunFiles(
    "`cosine solve`",
    finished=(LOG, FRONTIER),
    writes=(LOG_DIR, SOLUTION, FRONTIER, BASELINES, LOG),
    started=LOG_DIR,
    rows=((FRONTIER, FrontierRow.__name__),),
)


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
    assert run.answer.plan is not None
    plan = run.plans.tables_of(run.answer.plan)  # the answer's replication plan: its node view and tables
    ctx = columns_for(plan.tables.contexts.get(provider, []), objective, max_node_cost=run.solution.budget)
    m, _ = build_mip(
        plan.spec,
        catalog,
        ctx,
        run.solution.budget,
        plan.tables.max_cluster,
        providers=[provider],
        objective=objective,
        floor_kops=floor,
        target_kops=latency_target_kops(plan.spec),
    )
    return PyomoBackend().write(m, path)
