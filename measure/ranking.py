"""`cosine validate ranking`: does the model order designs as the engine does?

For each YCSB workload A-F at one memory budget (a quarter of the data, as
the validation grid), at least eight designs are predicted by the model and
measured on the engine in one session: the paper's three presets, Cosine's
pick for this node (``measure.local.best_design``), neighbours of the pick
(one knob moved: size ratio, buffer, Bloom bits, block size) and two hybrids.
Per workload: Spearman's rho between predicted and measured throughput, and
the measured throughput of the pick relative to the best measured design.

The best of n designs' medians is the largest of n noisy figures, higher on
average than that design's throughput (the winner's curse): the pick measured
against it is rated low by the noise alone, and the more so the closer its rivals.
So the pick and every design whose median beat it are run again, ``confirm``
times each, interleaved, and the pick is also rated on those fresh runs
(``pick_vs_best_confirmed``), whose selection did not see them.
The prediction is the model's own (the expected state, as the solver sees a
design); the one given the state each run started in is reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from cost_models import cpu_count
from cost_models.cpu import LOCAL_DEVICE, DeviceModel
from cost_models.design import Design, DesignBatch, DesignEntry
from cost_models.engine_model import engine_throughput, run_keys
from cost_models.evaluate import evaluate_designs
from cost_models.phi import PhiTable
from measure.calibrate.samples import free_throughput
from measure.cores import on_two_cores
from measure.cycle import buffered_warmup, covering_ops, steady_warmup
from measure.engine import (
    TEMPLATE,
    as_ran,
    build,
    run_merges,
    run_scratch,
    scan_capped_ops,
    short_of_depth,
    workload_json,
)
from measure.grid import KEY, MEMORY_SHARE, VALUE, designs, shipped_spec
from measure.local import best_design
from measure.validate import blocks_per_op
from render.config import device_section, engine_sections, local_entry, to_toml
from specs.errors import InputError, check_range
from specs.io import write_records
from specs.schema import Spec
from specs.vocab import PRESETS, WalSync

#: The YCSB workloads of the check.
WORKLOADS = ("ycsb_a", "ycsb_b", "ycsb_c", "ycsb_d", "ycsb_e", "ycsb_f")
#: The grid's hybrids added to every workload's set.
HYBRIDS = ("hybrid-base", "hybrid-hot=1")
#: Targets of issue 12: Spearman's rho per workload, and the pick against the best measured.
TARGET_RHO = 0.8
TARGET_PICK = 0.95
#: Most repeats of every design (--repeats): the median of 3 is what issue 12 asks for.
MAX_REPEATS = 9
#: Confirmation runs of the pick and its measured rivals (--confirm), by default: a median of 3, as the ranking's.
CONFIRM_REPEATS = 3


def neighbours(d: Design) -> list[tuple[str, Design]]:
    """The pick with one knob moved (size ratio, buffer, Bloom bits, block size), valid designs only."""
    out: list[tuple[str, Design]] = []
    moves: list[tuple[str, dict[str, Any]]] = [
        ("buffer x4", {"buffer_bytes": d.buffer_bytes * 4}),
        ("buffer /4", {"buffer_bytes": d.buffer_bytes / 4}),
        ("block x4", {"block_bytes": d.block_bytes * 4}),
        ("block /4", {"block_bytes": max(256, d.block_bytes // 4)}),
    ]
    if not d.lsh:
        moves += [
            ("T x2", {"T": d.T * 2, "K": min(d.K, d.T * 2 - 1), "Z": min(d.Z, d.T * 2 - 1)}),
            ("T /2", {"T": max(2, d.T // 2), "K": min(d.K, max(1, d.T // 2 - 1)), "Z": min(d.Z, max(1, d.T // 2 - 1))}),
            ("bits +6", {"bloom_bits": min(32.0, d.bloom_bits + 6)}),
            ("bits -6" if d.bloom_bits >= 6 else "no filters", {"bloom_bits": max(0.0, d.bloom_bits - 6)}),
        ]
    for name, change in moves:
        nd = replace(d, **change, name=f"pick {name}")
        # the same design under another name is no neighbour (a B-tree without filters has no "no filters")
        if replace(nd, name=d.name) != d and nd not in [x for _, x in out]:
            out.append((name, nd.validate()))
    return out


#: The name of Cosine's pick among a workload's designs.
PICK = "cosine pick"
#: Most rounds of choosing the pick for the store its own run grows to (:func:`design_sets`).
PICK_ROUNDS = 3


def design_sets(
    records: int,
    memory: float,
    threads: int,
    device: DeviceModel,
    plan: RunPlan | None = None,
    phi: PhiTable | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per workload: design name -> engine.toml sections. ``plan``: how each design will be run;
    the pick is then chosen for the most keys its run holds (its warm-up's and its own inserts
    grow the store: :func:`measure.local.best_design`'s ``grown_keys``), which depend on the
    pick's plan: chosen again until they stay (at most :data:`PICK_ROUNDS` times). ``phi``: the CPU
    model's table the designs are chosen with (None: the shipped one)."""
    grid = designs(records, quick=False, optima=False)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for w in WORKLOADS:
        spec = shipped_spec(w)
        wl = spec.workload
        grown = float(records)
        for _ in range(PICK_ROUNDS):
            pick, entry = best_design(spec, records, memory, threads, device, grown_keys=grown, phi=phi)
            if plan is None:
                break
            secs = _sections(entry, wl.key_bytes, wl.value_bytes, wl.operations, PICK, threads)
            n0, inserted = run_keys(plan.workload(spec, secs)[1])
            if n0 + inserted == grown:
                break
            grown = n0 + inserted
        sets: dict[str, dict[str, Any]] = {str(p): grid[p] for p in PRESETS}
        sets[PICK] = _sections(entry, wl.key_bytes, wl.value_bytes, wl.operations, PICK, threads)
        cand = neighbours(pick)
        ne = evaluate_designs(DesignBatch.of([d for _, d in cand]), wl, records, memory, phi=phi)
        for i, (name, d) in enumerate(cand):
            if not ne.layout.feasible[i]:
                continue
            e = local_entry(d, ne.layout, i, threads)
            sets[f"pick {name}"] = _sections(e, wl.key_bytes, wl.value_bytes, wl.operations, f"pick {name}", threads)
        for h in HYBRIDS:
            sets[h] = grid[h]
        out[w] = sets
    return out


#: Inserts the warm-up of an insert workload's design makes (one without scans), as a share of
#: ``records``: the same for every design of the workload (:meth:`RunPlan.workload`), and enough to pass the latest
#: keys through every level above the last. Each design's own merge cycles (and the search for
#: its deep merges) grew YCSB D's stores from 50,000 keys to 74,000-153,000 by design, the
#: pick's to 123,000 and the best measured's to 74,000 (docs/journal/s22-s30.md §28).
INSERT_WARMUP_SHARE = 1.0


@dataclass(frozen=True)
class RunPlan:
    """How the ranking runs a design: ``records`` loaded, ``operations`` measured (stretched to
    cover a merge cycle and last long enough: :func:`measure.cycle.covering_ops`; a hash
    log's scans capped), ``threads`` clients on ``cores`` and ``device``, and with ``warmup`` a
    steady-state warm-up first (:func:`measure.cycle.steady_warmup`; for a workload that
    inserts and does not scan (YCSB D), a warm-up of :data:`INSERT_WARMUP_SHARE` of the records in
    inserts for every design, so that designs are compared at one store size)."""

    records: int
    operations: int
    threads: int
    cores: int
    device: DeviceModel
    warmup: bool
    cpu_scale: float
    phi: PhiTable | None = None  # the CPU model's table (None: the shipped one)

    def workload(self, spec: Spec, secs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(engine.toml sections with the plan's threads and device, workload.json) of a design."""
        secs = {**secs, "algorithms": {**secs["algorithms"], "threads": self.threads}}
        secs["device"] = device_section(self.device)
        base = workload_json(spec, self.records, self.operations, self.threads)
        x, _ = engine_throughput(secs, base, self.cores, self.device, cpu_scale=self.cpu_scale, phi=self.phi)
        ops = covering_ops(self.operations, secs, base, self.device, x)
        if secs["design"]["class"] == "lsh":  # a hash log's scan walks every key
            ops = scan_capped_ops(ops, self.records, spec.workload.operations.get("range", 0.0))
        wl = workload_json(spec, self.records, ops, self.threads)
        if self.warmup:
            mix = {k: float(v) for k, v in wl["mix"].items()}
            inserts = mix.get("insert", 0.0) / max(sum(mix.values()), 1e-300)  # per operation
            if inserts > 0 and not mix.get("range", 0.0) > 0:
                # every design of an insert workload warms up by the same inserts, unaligned, so
                # all start at the same store size (and the run's buffer at the model's mean); not
                # with scans (YCSB E): a million unthrottled scans of the hash log, each walking
                # every key, ran for over 20 minutes
                ops = math.ceil(INSERT_WARMUP_SHARE * self.records / inserts)
                wl.update(buffered_warmup(secs, wl, ops, aligned=False))
            else:
                wl.update(steady_warmup(secs, wl))
        return secs, wl


def _sections(
    entry: DesignEntry, key: int, value: int, mix: dict[str, float], name: str, threads: int
) -> dict[str, dict[str, Any]]:
    secs = engine_sections(entry, key, value, mix, name, wal_sync=WalSync.NONE)
    secs["algorithms"]["threads"] = threads
    return secs


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""

    def ranks(x: list[float]) -> np.ndarray:
        v = np.asarray(x, dtype=float)
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for val in np.unique(v):  # ties share their mean rank
            m = v == val
            r[m] = r[m].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def check_options(workloads: tuple[str, ...], repeats: int, confirm: int = CONFIRM_REPEATS) -> None:
    """The ranking's workloads, repeats and confirmation runs, checked before any run."""
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise InputError(f"--workloads: unknown {', '.join(unknown)} (valid: {', '.join(WORKLOADS)})")
    check_range("--repeats", repeats, 1, MAX_REPEATS, integer=True)
    check_range("--confirm", confirm, 0, MAX_REPEATS, integer=True)


def rivals(medians: dict[str, float], pick: str) -> list[str]:
    """The designs whose median measured throughput beat the pick's, fastest first: the ones the
    confirmation runs again beside the pick."""
    return sorted((n for n, x in medians.items() if n != pick and x > medians[pick]), key=lambda n: -medians[n])


def confirmation_order(names: list[str], repeat: int) -> list[str]:
    """The confirmation's run order in its ``repeat``-th round: forward, then backward (ABBA), so
    that a host drifting over the rounds slows every design alike."""
    return list(names) if repeat % 2 == 0 else list(reversed(names))


@dataclass(frozen=True)
class _Run:
    """One measured run of a design: its throughput, the model's given the state it started in,
    blocks and free throughput per operation, the workload as it ran, and how the host ran it."""

    ops: float
    predicted_given_state: float
    blocks_per_op: float
    free_ops: float
    ran: dict[str, Any]
    lost: int  # runs dropped for a shared core before this one (measure.cores.on_two_cores)
    on_one: bool  # kept on one core's two hardware threads after the last attempt
    shallow: bool  # its warm-up did not reach the model's steady depth (short_of_depth)


def _run_design(
    secs: dict[str, Any],
    wl: dict[str, Any],
    tag: str,
    threads: int,
    cores: int,
    device: DeviceModel,
    cpu_scale: float,
) -> _Run:
    """Run one design once on a scratch store, run again while the host shared a core."""
    one = partial(run_scratch, to_toml(secs), wl, tag)
    rep, lost, on_one = on_two_cores(one, threads)
    ran = as_ran(wl, rep)
    x_state, _ = engine_throughput(
        secs,
        ran,
        cores,
        device,
        rep["load"]["shape"],
        rep.get("stats"),
        cpu_scale=cpu_scale,
        merges=run_merges(rep),
    )
    return _Run(
        float(rep["run"]["throughput_ops"]),
        x_state,
        blocks_per_op(rep),
        free_throughput(rep),
        ran,
        lost,
        bool(on_one),
        bool(short_of_depth(rep)),
    )


@dataclass
class _Counter:
    """The ranking's progress: runs done of the total, the workload being run, and where to say so."""

    done: int
    total: int
    workload: str
    progress: Callable[[int, int, str], None] | None


def _run_schedule(
    schedule: list[str],
    plans: dict[str, tuple[dict[str, Any], dict[str, Any]]],
    run_args: tuple[int, int, DeviceModel, float],
    counted: _Counter,
) -> list[tuple[str, _Run]]:
    """Run the designs named in ``schedule`` in its order (:func:`_run_design`), counting each."""
    out = []
    for name in schedule:
        secs, wl = plans[name]
        out.append((name, _run_design(secs, wl, f"ranking-{counted.done}", *run_args)))
        counted.done += 1
        if counted.progress:
            counted.progress(counted.done, counted.total, f"{counted.workload}: {name}")
    return out


def ranking(
    records: int,
    operations: int,
    device: DeviceModel = LOCAL_DEVICE,
    workloads: tuple[str, ...] = WORKLOADS,
    progress: Callable[[int, int, str], None] | None = None,
    repeats: int = 1,
    warmup: bool = True,
    cpu_scale: float = 1.0,
    confirm: int = 0,
) -> list[dict[str, Any]]:
    """One row per (workload, design): predicted and measured throughput; with ``repeats`` > 1 the
    designs of a workload are run that many times, interleaved (design 1..n, then again), and the
    row holds the median run (and the spread between the slowest and the fastest run). ``warmup``:
    each run first lets the workload's writes pass through the buffer and the upper levels
    (:func:`measure.cycle.steady_warmup`, unmeasured), so it starts in the steady state the
    model predicts rather than in the state the load left. ``cpu_scale``: the model's CPU seconds
    scaled to this host (:func:`measure.host_speed.host_speed`); a uniform scale leaves rho as it is
    but moves the CPU-bound designs against the I/O-bound ones. With more than one client thread
    every run is probed before and after (:func:`measure.cores.core_probe`), and a run the host
    ran on one core's two hardware threads is run again (:func:`measure.cores.on_two_cores`; the
    row counts them). ``confirm`` > 0: the pick and its :func:`rivals` are then run again that
    many times each (:func:`confirmation_order`); their rows hold the median of those runs
    (``confirm_measured_ops``, NaN on the others)."""
    check_options(workloads, repeats, confirm)
    build(TEMPLATE)
    cores = cpu_count()
    threads = cores
    memory = MEMORY_SHARE * records * (KEY + VALUE)
    plan = RunPlan(records, operations, threads, cores, device, warmup, cpu_scale)
    run_args = (threads, cores, device, cpu_scale)
    sets = design_sets(records, memory, threads, device, plan)
    counted = _Counter(0, repeats * sum(len(sets[w]) for w in workloads), "", progress)
    rows: list[dict[str, Any]] = []
    for w in workloads:
        spec = shipped_spec(w)
        runs: dict[str, list[_Run]] = {name: [] for name in sets[w]}
        plans = {name: plan.workload(spec, secs) for name, secs in sets[w].items()}
        counted.workload = w
        for name, r in _run_schedule([n for _ in range(repeats) for n in plans], plans, run_args, counted):
            runs[name].append(r)
        medians = {name: _median([r.ops for r in rs]) for name, rs in runs.items()}
        again = [PICK, *rivals(medians, PICK)] if confirm and PICK in medians else []
        confirmed: dict[str, list[_Run]] = {name: [] for name in plans}
        if len(again) > 1:
            counted.total += confirm * len(again)
            order = [n for i in range(confirm) for n in confirmation_order(again, i)]
            for name, r in _run_schedule(order, plans, run_args, counted):
                confirmed[name].append(r)
        for name, (secs, _) in plans.items():
            meas = sorted(runs[name], key=lambda r: r.ops)
            mid = meas[len(meas) // 2]  # the median run (the upper one of an even count)
            ran = mid.ran
            x_model, io_model = engine_throughput(secs, ran, cores, device, cpu_scale=cpu_scale)
            free = sorted(r.free_ops for r in meas)
            rows.append(
                {
                    "workload": w,
                    "design": name,
                    "class": secs["design"]["class"],
                    "predicted_ops": x_model,
                    "predicted_given_state_ops": mid.predicted_given_state,
                    "predicted_blocks_per_op": io_model,
                    "measured_ops": mid.ops,
                    "measured_blocks_per_op": mid.blocks_per_op,
                    # over the time the driver threads held a CPU (a loaded machine's wall clock is not the engine's)
                    "measured_free_ops": free[len(free) // 2],
                    "runs": len(meas),
                    # runs (the confirmation's too) the host ran on one core's two hardware threads
                    # (measure.cores): run again, and those kept as they ran after the last attempt
                    "runs_dropped_shared_core": sum(r.lost for r in runs[name] + confirmed[name]),
                    "runs_on_shared_core": sum(r.on_one for r in runs[name] + confirmed[name]),
                    # runs whose warm-up did not reach the model's steady depth (warmup_depth): they
                    # started a level shallower than the prediction's tree
                    "runs_short_of_depth": sum(r.shallow for r in runs[name] + confirmed[name]),
                    "cpu_scale": cpu_scale,
                    "measured_spread": meas[-1].ops / meas[0].ops if meas[0].ops > 0 else math.inf,
                    # the confirmation's runs of the pick and its rivals (none: NaN)
                    "confirm_measured_ops": _median([r.ops for r in confirmed[name]]),
                    "confirm_runs": len(confirmed[name]),
                    # every run's throughput, in the order run: the ranking's, then the confirmation's
                    "measured_ops_runs": [r.ops for r in runs[name]],
                    "confirm_ops_runs": [r.ops for r in confirmed[name]],
                    "records": records,
                    # the load and the warm-up's inserts (as the engine ran the warm-up: a design's
                    # own cycles, or the common inserts of RunPlan.workload; docs/journal/s22-s30.md §28)
                    "keys_at_start": run_keys(ran)[0],
                    "operations": int(ran["operations"]),
                    "warmup_operations": int(ran.get("warmup_operations", 0)),
                    "threads": threads,
                    "device_iops": device.iops if math.isfinite(device.iops) else None,
                    "device_read_latency_us": device.read_latency_s * 1e6,
                }
            )
    return rows


def _median(xs: list[float]) -> float:
    """The median run (the upper one of an even count), as the ranking's rows report; NaN for none."""
    return sorted(xs)[len(xs) // 2] if xs else math.nan


def confirmed_ratio(rows: list[dict[str, Any]]) -> tuple[float, str]:
    """(the pick over the best of its confirmation's designs, that design) of one workload's rows:
    (1, the pick) when no design's median beat the pick's, NaN when rivals were not confirmed."""
    pick = next(r for r in rows if r["design"] == PICK)
    if not rivals({str(r["design"]): float(r["measured_ops"]) for r in rows}, PICK):
        return 1.0, PICK
    again = [r for r in rows if r.get("confirm_runs", 0) > 0]
    if pick not in again:
        return math.nan, ""
    best = max(again, key=lambda r: r["confirm_measured_ops"])
    return pick["confirm_measured_ops"] / best["confirm_measured_ops"], str(best["design"])


def confirmation_rounds(rows: list[dict[str, Any]], best: str) -> tuple[int, int, float]:
    """(rounds the pick measured below ``best``, rounds, the one-sided sign test's p) on one
    workload's confirmation runs (``confirm_ops_runs``; :func:`confirmed_ratio` names ``best``).

    Every confirmation round runs the pick and each rival once, back to back
    (:func:`confirmation_order`), so round i of the pick and round i of ``best`` ran under the
    same host: the pair's order does not carry the host's drift between rounds. If the two
    designs were equally fast, the pick would come out below in each round with probability 1/2,
    independently; p is the chance of at least that many rounds below (a binomial tail). A
    confirmed ratio under the target whose p is large is a tie within the runs' noise, not a
    pick the engine shows to be slower. (0, 0, 1) when there is nothing to pair: ``best`` is the
    pick, or the rivals were not confirmed."""
    runs = {str(r["design"]): list(r.get("confirm_ops_runs") or []) for r in rows}
    mine, theirs = runs.get(PICK, []), runs.get(best, [])
    n = min(len(mine), len(theirs))
    if best == PICK or n == 0:
        return 0, 0, 1.0
    below = sum(a < b for a, b in zip(mine[:n], theirs[:n], strict=True))
    return below, n, sum(math.comb(n, k) for k in range(below, n + 1)) / 2.0**n


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload: Spearman's rho (model and model given the start state), the pick vs the best,
    and the pick vs the best on the confirmation's fresh runs (:func:`confirmed_ratio`)."""
    out = []
    for w in dict.fromkeys(r["workload"] for r in rows):
        rs = [r for r in rows if r["workload"] == w]
        meas = [r["measured_ops"] for r in rs]
        free = [r["measured_free_ops"] for r in rs]
        best = max(rs, key=lambda r: r["measured_ops"])
        pick = next(r for r in rs if r["design"] == PICK)
        confirmed, confirmed_best = confirmed_ratio(rs)
        below, rounds, p = confirmation_rounds(rs, confirmed_best)
        out.append(
            {
                "workload": w,
                "designs": len(rs),
                "spearman_rho": spearman([r["predicted_ops"] for r in rs], meas),
                "spearman_rho_given_state": spearman([r["predicted_given_state_ops"] for r in rs], meas),
                "pick_vs_best": pick["measured_ops"] / best["measured_ops"],
                "spearman_rho_free": spearman([r["predicted_ops"] for r in rs], free),
                "pick_vs_best_free": pick["measured_free_ops"] / max(free),
                "best_design": best["design"],
                "pick_vs_best_confirmed": confirmed,
                "confirmed_best_design": confirmed_best,
                # the confirmation's rounds in which the pick ran below that design, and the sign
                # test's p of so many (confirmation_rounds: large p = a tie within the noise)
                "confirm_rounds_pick_below": below,
                "confirm_rounds": rounds,
                "confirm_sign_p": p,
                "pick_class": pick["class"],
            }
        )
    return out


def write(rows: list[dict[str, Any]], out: Path, name: str = "ranking.parquet") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    return write_records(out / name, rows)
