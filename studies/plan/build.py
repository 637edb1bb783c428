"""Build a :class:`studies.plan.dp.PlanProblem` from a workload trace and a spec.

1. Read the trace (CSV or parquet: ``time_s``, the six operation fractions,
   ``load_ops``) and quantize each step's mix to multiples of ``quantum`` (the
   largest-remainder rounding keeps the sum at 1), giving a few distinct
   workloads.
2. Candidate configurations: the solver's certified optimum (design x VMs x
   storage, ``build_tables`` + ``solve_frontier`` at the spec's budget) for each
   distinct workload, on one provider (a plan does not move data between
   clouds); or configurations given explicitly (``configs=``). Plus the Default
   baseline: the RocksDB preset on the cluster of the first step's candidate.
3. ``capacity[t, c]`` = the cost model's exact cluster throughput of
   configuration c under step t's (quantized) mix.
4. Switch times from ``cost_models/data/reconfiguration.yaml`` (sources inside).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models import REPO_ROOT
from cost_models.cloud import GIB
from cost_models.design import Design, preset
from cost_models.evaluate import evaluate_config
from cost_models.phi import PhiTable
from cost_models.pricing.catalog import Catalog, VmType
from specs.errors import InputError, check_range
from specs.schema import Spec
from specs.vocab import PAPER_OPERATIONS, PROVIDERS
from studies.plan.dp import ConfigInfo, PlanProblem, PlanResult, ReconfigCosts, plan_report, switch_matrix
from studies.plan.trace import QUANTUM, Trace, load_trace, quantize

RECONFIG_FILE = REPO_ROOT / "cost_models" / "data" / "reconfiguration.yaml"
#: The spec `cosine plan` uses unless given one: SOPHIA's set-up (data size, budget, providers).
DEFAULT_SPEC = REPO_ROOT / "specs" / "traces" / "sophia.yaml"
#: Candidates are solved for a coarser grid of mixes (each a full MIP solve, seconds each);
#: SOPHIA likewise caches the static tuner's optimum for a subset of workloads (Sec. 4.2).
CANDIDATE_QUANTUM = 0.25
MIB = float(2**20)
BITS_PER_BYTE = 8.0
#: Largest replication factor: more replicas than the largest cluster a spec allows
#: (design.max_cluster_size <= 1000) cannot be placed.
MAX_REPLICATION = 1000
#: Most (step, from, to) cells of the plan's DP tables (a float and an int each: 16 bytes,
#: so 2e7 cells are 320 MB); steps x (candidates + 1)^2, checked before any candidate is solved.
MAX_DP_CELLS = 20_000_000


def load_costs(path: Path = RECONFIG_FILE) -> tuple[ReconfigCosts, dict[str, dict[str, Any]]]:
    """Reconfiguration times and rates, and the file's entries (values with their sources)."""
    try:
        raw = yaml.safe_load(path.read_text())
        v = {k: float(raw[k]["value"]) for k in ("restart_s", "sync_s", "volume_mib_s", "network_gbit_s")}
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: unreadable reconfiguration data ({type(exc).__name__}: {exc})") from None
    if any(x < 0 for x in v.values()) or v["volume_mib_s"] <= 0 or v["network_gbit_s"] <= 0:
        raise InputError(f"{path}: times must be non-negative and rates positive")
    volume = v["volume_mib_s"] * MIB
    costs = ReconfigCosts(
        restart_s=v["restart_s"],
        sync_s=v["sync_s"],
        rewrite_bytes_per_s=volume / 2,  # the shard is read and written on the same volume
        migrate_bytes_per_s=min(volume, v["network_gbit_s"] * 1e9 / BITS_PER_BYTE),
    )
    return costs, raw


# ----------------------------------------------------------------------------- candidate configurations


@dataclass
class Candidate:
    """One configuration the plan may run: what it is and how to evaluate it."""

    info: ConfigInfo
    origin: str
    monthly_cost: float
    description: dict[str, Any]
    capacity: Callable[[Spec], float]


def with_mix(spec: Spec, mix: np.ndarray) -> Spec:
    """``spec`` with its operation mix replaced."""
    ops: dict[str, float] = {op: float(x) for op, x in zip(PAPER_OPERATIONS, mix, strict=True)}
    return replace(spec, workload=replace(spec.workload, operations=ops))


def _solver_candidate(spec: Spec, catalog: Catalog, provider: str, backend: str) -> Candidate | None:
    """The solver's optimum for ``spec`` at its budget on one provider (None if nothing fits)."""
    from cost_models.replication import node_spec
    from solver.backends import get_backend
    from solver.exact import reevaluate
    from solver.replicas import plan_tables, solve_plans

    runs = [r for r in plan_tables(spec, catalog, (provider,)) if r.tables.contexts.get(provider)]
    if not runs:
        return None
    fr = solve_plans(spec, catalog, runs, get_backend(backend), budgets=np.array([spec.budget_usd])).merged
    pt = fr.best[0]
    if pt.chosen is None or pt.exact is None or pt.plan is None:
        return None
    nodes, plan = pt.chosen.nodes, pt.plan
    # what identifies the configuration (not what it achieves on this workload)
    per = [g.identity() for g in pt.exact.per_node]
    count = sum(n["count"] for n in per)
    info = ConfigInfo(
        name=" + ".join(f"{_design_text(n)} on {n['count']}x{n['vm_type']}" for n in per),
        nodes=count,
        vm=f"{provider}: " + " + ".join(f"{n['count']}x{n['vm_type']} ({n['storage']['label']})" for n in per),
        design_class=pt.dominant_class(),
        shard_bytes=max(g.design.entries_per_node for g in pt.exact.per_node) * spec.workload.entry_bytes,
    )
    desc = {"provider": provider, "vms": [{"type": n["vm_type"], "count": n["count"]} for n in per], "designs": per}
    # a drifted mix is the workload's: its replicated nodes serve it through the plan (node_spec)
    return Candidate(info, "", pt.cost, desc, lambda s: reevaluate(node_spec(s, plan)[0], nodes).throughput)


def _design_text(n: dict[str, Any]) -> str:
    if n["lsh"]:
        return f"lsh M={n['buffer_bytes'] / GIB:.3g}G"
    knobs = f"T={n['T']} K={n['K']} Z={n['Z']} M={n['buffer_bytes'] / GIB:.3g}G B={n['block_bytes'] // 1024}K"
    return f"{n['class']} {knobs} bits={n['bloom_bits_per_key']:g}"


def _fixed_candidate(
    spec: Spec, catalog: Catalog, name: str, design: Design, vm: VmType, count: int, phi: PhiTable | None = None
) -> Candidate:
    """A given design on ``count`` VMs of ``vm``; the volume is chosen once for ``spec``'s mix."""
    ev = evaluate_config(spec, design, vm, count, catalog=catalog, phi=phi)
    if ev.storage is None:
        raise InputError(f"configuration {name}: {ev.reason or 'no volume fits'}")
    storage = ev.storage
    info = ConfigInfo(
        name=f"{name} {ev.design_class} on {count}x{vm.name}",
        nodes=count,
        vm=f"{vm.provider}: {count}x{vm.name} ({storage.label})",
        design_class=ev.design_class,
        shard_bytes=ev.entries_per_node * spec.workload.entry_bytes,
    )
    desc = {"provider": vm.provider, "vms": [{"type": vm.name, "count": count}], "design": design.as_dict()}
    return Candidate(
        info,
        "",
        ev.monthly_cost["total"],
        desc,
        lambda s: evaluate_config(s, design, vm, count, storage=storage, catalog=catalog, phi=phi).throughput_ops,
    )


# ----------------------------------------------------------------------------- the problem


@dataclass
class BuiltPlan:
    """A plan problem with everything needed to explain it."""

    problem: PlanProblem
    trace: Trace
    spec: Spec
    candidates: list[Candidate]
    workloads: np.ndarray  # (W, 6) distinct quantized mixes
    step_workload: np.ndarray  # (T,) index into workloads
    quantum: float
    candidate_quantum: float
    provider: str
    costs: ReconfigCosts
    cost_sources: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def quantization_error(self) -> float:
        """Largest L1 distance between a step's mix and its quantized workload."""
        return float(np.abs(self.trace.mixes - self.workloads[self.step_workload]).sum(axis=1).max())


def build_plan_problem(
    trace: Trace,
    spec: Spec,
    catalog: Catalog,
    *,
    rf: int = 3,
    cl: int = 1,
    quantum: float = QUANTUM,
    candidate_quantum: float = CANDIDATE_QUANTUM,
    provider: str | None = None,
    backend: str = "highs",
    configs: list[tuple[str, Design, VmType, int]] | None = None,
    start: str = "free",
    load_scale: float = 1.0,
    costs_file: Path = RECONFIG_FILE,
    progress: Callable[[str, int, int], None] | None = None,
    phi: PhiTable | None = None,
) -> BuiltPlan:
    """Turn a trace and a base spec into a :class:`PlanProblem`.

    Parameters
    ----------
    trace : Trace
    spec : Spec
        Data size, key/value sizes, distributions, budget and providers.
    catalog : Catalog
    rf, cl : int
        Replication factor and consistency level (SOPHIA Sec. 4.5).
    quantum : float
        Mix quantization step (a divisor of 1) for the capacities.
    candidate_quantum : float
        Coarser step (a divisor of 1) of the mixes whose optimum becomes a candidate.
    provider : str, optional
        The provider whose configurations are candidates (default: the spec's first).
    backend : str
        MIP back end for the per-workload optimum.
    configs : list of (name, Design, VmType, count), optional
        Explicit candidates instead of the solver's optima.
    start : {"free", "default"}
        ``free``: the plan chooses the configuration at time 0 (as Static-Opt
        and Theoretical Best do); ``default``: the cluster runs the default then.
    load_scale : float
        Multiplies the trace's load.
    costs_file : Path
        Reconfiguration times (YAML with sources).
    progress : callable, optional
        ``progress(stage, done, total)``.
    phi : PhiTable, optional
        The CPU model's table the given ``configs`` and the default are priced with (None: the
        shipped one; the solver's own candidates always use the shipped one).

    Returns
    -------
    BuiltPlan
    """
    t0 = time.perf_counter()
    check_range("--rf", rf, 1, MAX_REPLICATION, integer=True)
    check_range("--cl", cl, 1, rf, integer=True)
    if start not in ("free", "default"):
        raise InputError(f"--start must be free or default, got {start!r}")
    if not math.isfinite(load_scale) or load_scale <= 0:
        raise InputError(f"--load-scale must be a positive number, got {load_scale}")
    prov = provider or spec.providers[0]
    if prov not in PROVIDERS:
        raise InputError(f"--provider: unknown provider {prov!r} (valid: {', '.join(PROVIDERS)})")
    if prov not in spec.providers:
        raise InputError(f"--provider: {prov} is not among the spec's providers ({', '.join(spec.providers)})")
    costs, sources = load_costs(costs_file)
    qm = quantize(trace.mixes, quantum)
    workloads, step_w = np.unique(qm, axis=0, return_inverse=True)
    step_w = step_w.ravel()
    specs = [with_mix(spec, workloads[w]) for w in range(len(workloads))]
    # candidate mixes in order of first appearance in the trace
    cand_mixes = list(dict.fromkeys(tuple(m) for m in quantize(trace.mixes, candidate_quantum).tolist()))
    n_configs = 1 + (len(configs) if configs else len(cand_mixes))
    cells = trace.steps * n_configs**2
    if cells > MAX_DP_CELLS:
        raise InputError(
            f"plan: {trace.steps:,} steps x {n_configs} configurations^2 = {cells:,} DP cells, at most "
            f"{MAX_DP_CELLS:,}: a shorter trace, or fewer distinct workloads in it"
        )
    timings: dict[str, float] = {}
    cands: list[Candidate] = []
    seen: dict[str, int] = {}
    if configs:
        first = specs[int(step_w[0])]
        for name, design, vm, count in configs:
            given = _fixed_candidate(first, catalog, name, design, vm, count, phi)
            given.origin = "given"
            cands.append(given)
    else:
        for k, m in enumerate(cand_mixes):
            if progress:
                progress("candidates", k, len(cand_mixes))
            mix_arr = np.array(m)
            c = _solver_candidate(with_mix(spec, mix_arr), catalog, prov, backend)
            if c is None:
                continue
            key = json.dumps(c.description, sort_keys=True, default=str)
            mix_txt = _mix_text(mix_arr)
            if key in seen:
                cands[seen[key]].origin += f"; {mix_txt}"
                continue
            c.origin = f"optimum for {mix_txt}"
            seen[key] = len(cands)
            cands.append(c)
        if progress:
            progress("candidates", len(cand_mixes), len(cand_mixes))
        if not cands:
            raise InputError(f"no configuration of {prov} fits the spec's budget ${spec.budget_usd:,.2f}/month")
    timings["candidates_s"] = time.perf_counter() - t0
    # Default: the RocksDB preset on the first step's candidate's cluster.
    base = cands[0]
    vm = catalog.vm(base.description["provider"], base.description["vms"][0]["type"])
    default = _fixed_candidate(
        specs[int(step_w[0])], catalog, "default (rocksdb)", preset("rocksdb"), vm, base.info.nodes, phi
    )
    default.origin = "RocksDB preset on the first candidate's cluster"
    cands = [default, *cands]
    t1 = time.perf_counter()
    cap_w = np.zeros((len(workloads), len(cands)))
    for i, s in enumerate(specs):
        for j, c in enumerate(cands):
            cap_w[i, j] = c.capacity(s)
    timings["capacity_s"] = time.perf_counter() - t1
    infos = _unique_names([c.info for c in cands])
    problem = PlanProblem(
        edges=trace.edges,
        load=trace.load * load_scale,
        capacity=cap_w[step_w],
        configs=infos,
        offline_s=switch_matrix(infos, costs),
        rf=rf,
        cl=cl,
        initial=0 if start == "default" else None,
        default=0,
    )
    timings["build_s"] = time.perf_counter() - t0
    return BuiltPlan(
        problem, trace, spec, cands, workloads, step_w, quantum, candidate_quantum, prov, costs, sources, timings
    )


def _unique_names(infos: list[ConfigInfo]) -> list[ConfigInfo]:
    """Prefix each name with its index (c0 is the default)."""
    return [replace(c, name=f"c{i} {c.name}") for i, c in enumerate(infos)]


def _mix_text(m: np.ndarray) -> str:
    return " ".join(f"{op} {x:.0%}" for op, x in zip(PAPER_OPERATIONS, m, strict=True) if x > 0)


# ----------------------------------------------------------------------------- one call for the CLI


def run_plan(
    trace_path: str | Path,
    spec: Spec,
    catalog: Catalog,
    *,
    lookahead: int | None = None,
    **kwargs: Any,
) -> tuple[BuiltPlan, dict[str, PlanResult]]:
    """Load a trace, build the problem, plan it and run the baselines.

    ``kwargs`` go to :func:`build_plan_problem`. Returns the built problem and
    :func:`studies.plan.dp.plan_report`'s results.
    """
    if lookahead is not None:
        check_range("--lookahead", lookahead, 1, integer=True)
    built = build_plan_problem(load_trace(trace_path), spec, catalog, **kwargs)
    t0 = time.perf_counter()
    results = plan_report(built.problem, lookahead)
    built.timings["plan_s"] = time.perf_counter() - t0
    return built, results


#: Order and labels of the results table (SOPHIA Sec. 6's baselines, then the plans).
RESULT_ROWS = (
    ("default", "Default"),
    ("static", "Static-Opt"),
    ("naive", "Naive"),
    ("best", "Theoretical best"),
    ("plan", "Plan (SOPHIA-style)"),
    ("optimal", "Optimum (full horizon)"),
)


def report_dict(built: BuiltPlan, results: dict[str, PlanResult]) -> dict[str, Any]:
    """Everything ``cosine plan --json`` prints (JSON-safe)."""
    from specs.io import clean

    p = built.problem
    ref = results["default"].total_ops
    opt = results["optimal"].total_ops
    rows = []
    for key, label in RESULT_ROWS:
        r = results[key]
        d = r.as_dict(p)
        d.update(
            {
                "key": key,
                "label": label,
                "vs_default": r.total_ops / ref - 1 if ref > 0 else None,
                "vs_optimum": r.total_ops / opt - 1 if opt > 0 else None,
                "n_switches": len(r.switches) if key != "best" else int(np.count_nonzero(np.diff(r.config))),
            }
        )
        rows.append(d)
    return clean(
        {
            "trace": built.trace.source,
            "spec": built.spec.name,
            "spec_source": built.spec.source,
            "provider": built.provider,
            "steps": p.steps,
            "step_s": float(np.median(p.durations)),
            "horizon_s": float(p.edges[-1] - p.edges[0]),
            "rf": p.rf,
            "cl": p.cl,
            "start": "default" if p.initial == 0 else "free",
            "quantum": built.quantum,
            "candidate_quantum": built.candidate_quantum,
            "quantization_error_l1": built.quantization_error,
            "workloads": [
                {
                    "mix": dict(zip(PAPER_OPERATIONS, m.tolist(), strict=True)),
                    "steps": int((built.step_workload == i).sum()),
                }
                for i, m in enumerate(built.workloads)
            ],
            "configurations": [
                {
                    "name": c.info.name,
                    "nodes": c.info.nodes,
                    "hardware": c.info.vm,
                    "class": c.info.design_class,
                    "shard_gib": c.info.shard_bytes / GIB,
                    "monthly_cost": c.monthly_cost,
                    "origin": c.origin,
                    **c.description,
                }
                for c in built.candidates
            ],
            "switch_seconds_per_node": p.offline_s.tolist(),
            "results": rows,
            "certificate": results["plan"].certificate,
            "reconfiguration": {
                "restart_s": built.costs.restart_s,
                "sync_s": built.costs.sync_s,
                "rewrite_mib_s": built.costs.rewrite_bytes_per_s / MIB,
                "migrate_mib_s": built.costs.migrate_bytes_per_s / MIB,
                "sources": {k: v.get("source", "") for k, v in built.cost_sources.items() if isinstance(v, dict)},
            },
            "timings_s": built.timings,
        }
    )
