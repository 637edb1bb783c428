"""Reconfiguration plans over a predicted workload trace, solved exactly.

SOPHIA (Mahgoub et al., USENIX ATC 2019, seeds/004) decides *when* to switch a
cluster to *which* configuration by a cost-benefit analysis over a lookahead
window (Sec. 4.3, Eq. 5-6) and searches the plans with a genetic algorithm
(Sec. 4.4). Here the same objective is solved exactly by dynamic programming
over (step, configuration). This module is pure: it knows capacities, loads and
switch times, not the cost model (``studies/plan/build.py`` builds a problem
from a trace and a spec).

Accounting (docs/plan.md gives the derivation):

* Time is cut into steps ``[edges[t], edges[t+1])`` with offered load
  ``load[t]`` ops/s; configuration ``c`` serves ``min(capacity[t, c], load[t])``
  ops/s during step ``t``.
* A switch starts at a step boundary and is atomic (SOPHIA Sec. 4.2: all
  servers of round i are reconfigured before round i+1 begins). It takes the
  old cluster's ``N_s`` nodes offline ``R = N_s - CL * ceil(N_s / RF)`` at a
  time (Sec. 4.5), in ``ceil(N_s / R)`` rounds of ``offline_s[a, b]`` seconds
  each. During round ``j`` with ``r_j`` nodes offline and ``D_j`` nodes already
  done, the cluster serves ``min((N_s - D_j - r_j)/N_s * cap_old
  + D_j/N_s * cap_new, load)``: every online node contributes its share of its
  own configuration's cluster capacity (SOPHIA Sec. 4.2: H_i = H_sys / N_s).
  If ``R <= 0`` (RF = CL) no switch keeps CL replicas online: none is allowed.
* The switch may span several steps; it ends inside some step ``u`` and the new
  configuration serves the rest of ``u``; the next decision is at ``u + 1``.
  A switch still running at the end of the horizon is counted up to the end.
* Naive reconfiguration (the baseline) restarts all nodes at once: one round,
  nothing served for ``offline_s[a, b]`` seconds.

Every plan's total is recomputed by :func:`simulate`, an event replay written
independently of the DP's vectorized transition tables; the certificate
reports both numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specs.errors import InputError

#: Relative tolerance under which a switch is not preferred to staying (ties
#: keep the running configuration, so the plan never switches for nothing).
TIE_RTOL = 1e-12


@dataclass(frozen=True)
class ConfigInfo:
    """What the planner needs to know about one configuration (besides capacity).

    Parameters
    ----------
    name : str
        Short label for tables.
    nodes : int
        Cluster size ``N_s``.
    vm : str
        Hardware label (provider, VM types and counts); a switch between
        different labels moves the data to new machines.
    design_class : str
        Layout class (lsm, btree, lsh, hybrid); a change rewrites the data.
    shard_bytes : float
        Data bytes per node (what a rewrite or a migration moves).
    """

    name: str
    nodes: int
    vm: str
    design_class: str
    shard_bytes: float


@dataclass(frozen=True)
class ReconfigCosts:
    """Per-node reconfiguration times and rates (``cost_models/data/reconfiguration.yaml``)."""

    restart_s: float  # SOPHIA steps 1-4: drain, shutdown, new configuration file, restart
    sync_s: float  # step 5: rejoin and replay the writes missed while down
    rewrite_bytes_per_s: float  # rewriting a shard in place in a new layout (read + write on the node's volume)
    migrate_bytes_per_s: float  # streaming a shard to a new machine (network, then the new volume)


def offline_seconds(a: ConfigInfo, b: ConfigInfo, costs: ReconfigCosts) -> float:
    """Seconds one node is offline when switching from ``a`` to ``b``.

    Restart + sync always; plus moving the shard to a new machine if the
    hardware changes (it is written in the new layout as it arrives, so no
    separate rewrite), else a rewrite in place if the layout class changes.
    Other knob changes (size ratio, buffer, filters) take effect with a restart
    and later compactions.
    """
    if a == b:
        return 0.0
    secs = costs.restart_s + costs.sync_s
    if a.vm != b.vm or a.nodes != b.nodes:
        secs += b.shard_bytes / costs.migrate_bytes_per_s
    elif a.design_class != b.design_class:
        secs += b.shard_bytes / costs.rewrite_bytes_per_s
    return secs


def switch_matrix(configs: list[ConfigInfo], costs: ReconfigCosts) -> np.ndarray:
    """``offline_s[a, b]`` for every pair of configurations (zero diagonal)."""
    n = len(configs)
    out = np.zeros((n, n))
    for i, a in enumerate(configs):
        for j, b in enumerate(configs):
            if i != j:
                out[i, j] = offline_seconds(a, b, costs)
    return out


def rounds(nodes: int, rf: int, cl: int) -> tuple[int, int]:
    """SOPHIA Sec. 4.5: ``(R, rounds)`` with ``R = N_s - CL * ceil(N_s / RF)``.

    Returns ``(R, 0)`` when ``R <= 0``: no node can go offline without losing
    CL replicas of some key, so a rolling reconfiguration is impossible.
    """
    r = nodes - cl * math.ceil(nodes / rf)
    if r <= 0:
        return r, 0
    return r, math.ceil(nodes / r)


def phases(nodes: int, rf: int, cl: int, seconds: float, all_at_once: bool = False) -> list[tuple[float, float, float]]:
    """The switch as ``(duration_s, old_fraction, new_fraction)`` phases.

    ``old_fraction`` of the old configuration's capacity and ``new_fraction``
    of the new one's are online during the phase. Empty when impossible.
    """
    if all_at_once:
        return [(seconds, 0.0, 0.0)]
    r, k = rounds(nodes, rf, cl)
    out = []
    done = 0
    for _ in range(k):
        off = min(r, nodes - done)
        out.append((seconds, (nodes - done - off) / nodes, done / nodes))
        done += off
    return out


@dataclass
class PlanProblem:
    """A trace of predicted workloads and the configurations that may serve it.

    Parameters
    ----------
    edges : ndarray, shape (T + 1,)
        Step boundaries in seconds, strictly increasing.
    load : ndarray, shape (T,)
        Offered load per step, ops/s (``inf``: saturating clients).
    capacity : ndarray, shape (T, C)
        Cluster throughput of configuration ``c`` under step ``t``'s workload, ops/s.
    configs : list of ConfigInfo
        One per column of ``capacity``.
    offline_s : ndarray, shape (C, C)
        Per-node offline seconds of a switch (:func:`switch_matrix`).
    rf, cl : int
        Replication factor and consistency level (1 <= CL <= RF).
    initial : int or None
        Configuration running at the start; ``None`` lets the plan choose it
        (the cluster is deployed for the horizon, as Static-Opt and
        Theoretical Best assume).
    default : int
        The Default baseline's configuration.
    """

    edges: np.ndarray
    load: np.ndarray
    capacity: np.ndarray
    configs: list[ConfigInfo]
    offline_s: np.ndarray
    rf: int = 3
    cl: int = 1
    initial: int | None = None
    default: int = 0

    def __post_init__(self) -> None:
        self.edges = np.asarray(self.edges, dtype=float)
        self.load = np.asarray(self.load, dtype=float)
        self.capacity = np.asarray(self.capacity, dtype=float)
        self.offline_s = np.asarray(self.offline_s, dtype=float)
        self.validate()

    @property
    def steps(self) -> int:
        return int(self.load.size)

    @property
    def n_configs(self) -> int:
        return int(self.capacity.shape[1]) if self.capacity.ndim == 2 else 0

    @property
    def durations(self) -> np.ndarray:
        return np.diff(self.edges)

    def validate(self) -> None:
        """Raise :class:`InputError` naming the first inconsistency."""
        T = self.load.size
        if T < 1:
            raise InputError("plan: the trace has no steps")
        if self.edges.shape != (T + 1,):
            raise InputError(f"plan: {self.edges.size} step edges for {T} steps (need {T + 1})")
        if not np.all(np.isfinite(self.edges)) or np.any(np.diff(self.edges) <= 0):
            raise InputError("plan: step times must be finite and strictly increasing")
        if np.any(np.isnan(self.load)) or np.any(self.load < 0):
            raise InputError("plan: the load must be non-negative")
        if self.capacity.ndim != 2 or self.capacity.shape[0] != T or self.capacity.shape[1] < 1:
            raise InputError(f"plan: capacity must be steps x configurations, got shape {self.capacity.shape}")
        if not np.all(np.isfinite(self.capacity)) or np.any(self.capacity < 0):
            raise InputError("plan: capacities must be finite and non-negative")
        C = self.capacity.shape[1]
        if len(self.configs) != C:
            raise InputError(f"plan: {len(self.configs)} configurations for {C} capacity columns")
        if self.offline_s.shape != (C, C) or np.any(self.offline_s < 0) or not np.all(np.isfinite(self.offline_s)):
            raise InputError("plan: switch times must be a finite non-negative configurations x configurations matrix")
        if not 1 <= self.cl <= self.rf:
            raise InputError(f"plan: need 1 <= CL <= RF, got RF={self.rf}, CL={self.cl}")
        if any(c.nodes < 1 for c in self.configs):
            raise InputError("plan: every configuration needs at least one node")
        if self.initial is not None and not 0 <= self.initial < C:
            raise InputError(f"plan: initial configuration {self.initial} out of range 0..{C - 1}")
        if not 0 <= self.default < C:
            raise InputError(f"plan: default configuration {self.default} out of range 0..{C - 1}")

    def window(self, lo: int, hi: int, initial: int | None) -> PlanProblem:
        """The sub-problem of steps ``lo..hi-1`` starting in ``initial``."""
        return PlanProblem(
            self.edges[lo : hi + 1],
            self.load[lo:hi],
            self.capacity[lo:hi],
            self.configs,
            self.offline_s,
            self.rf,
            self.cl,
            initial,
            self.default,
        )

    def served_rate(self) -> np.ndarray:
        """``min(capacity, load)`` per step and configuration, ops/s."""
        return np.minimum(self.capacity, self.load[:, None])


@dataclass(frozen=True)
class Switch:
    """One reconfiguration of a plan."""

    step: int
    source: int
    target: int
    start_s: float
    end_s: float
    rounds: int
    offline_s_per_node: float
    all_at_once: bool = False


@dataclass
class PlanResult:
    """A plan (or baseline) and what it serves.

    ``config`` is the configuration serving (or being switched to) at each step;
    ``served`` the ops served per step (from :func:`simulate`).
    """

    name: str
    total_ops: float
    initial: int
    switches: list[Switch]
    config: np.ndarray
    served: np.ndarray
    note: str = ""
    certificate: dict[str, Any] = field(default_factory=dict)

    def as_dict(self, problem: PlanProblem) -> dict[str, Any]:
        names = [c.name for c in problem.configs]
        return {
            "name": self.name,
            "total_ops": self.total_ops,
            "initial": names[self.initial],
            "switches": [
                {
                    "step": s.step,
                    "start_s": s.start_s,
                    "end_s": s.end_s,
                    "from": names[s.source],
                    "to": names[s.target],
                    "rounds": s.rounds,
                    "offline_s_per_node": s.offline_s_per_node,
                    "all_at_once": s.all_at_once,
                }
                for s in self.switches
            ],
            "note": self.note,
            "certificate": self.certificate,
        }


# ----------------------------------------------------------------------------- replay (the reference semantics)


def _switch(problem: PlanProblem, step: int, a: int, b: int, start: float, all_at_once: bool) -> Switch:
    n = problem.configs[a].nodes
    secs = float(problem.offline_s[a, b])
    ph = phases(n, problem.rf, problem.cl, secs, all_at_once)
    if not ph:
        raise InputError(
            f"plan: switching {problem.configs[a].name} -> {problem.configs[b].name} at step {step} is impossible: "
            f"RF={problem.rf}, CL={problem.cl} leave no node free to reconfigure"
        )
    return Switch(step, a, b, start, start + sum(p[0] for p in ph), len(ph), secs, all_at_once)


def simulate(problem: PlanProblem, initial: int, moves: list[tuple[int, int]], all_at_once: bool = False) -> PlanResult:
    """Replay a plan: ``moves`` = ``[(step, target), ...]`` in step order.

    A move starts at the beginning of its step and must not start while the
    previous switch is still running (raises :class:`InputError`). Returns the
    served ops per step by integrating ``min(capacity, load)`` over the
    piecewise-constant segments of the timeline.
    """
    edges, T = problem.edges, problem.steps
    end = edges[-1]
    # segments: (start, stop, old_cfg, old_frac, new_cfg, new_frac)
    segs: list[tuple[float, float, int, float, int, float]] = []
    switches: list[Switch] = []
    cur, t_now = initial, edges[0]
    for step, target in moves:
        if not 0 <= step < T:
            raise InputError(f"plan: move at step {step} outside 0..{T - 1}")
        start = edges[step]
        if start < t_now - 1e-9 * max(1.0, abs(t_now)):
            raise InputError(f"plan: move at step {step} starts before the previous switch ends")
        if target == cur:
            continue
        segs.append((t_now, start, cur, 1.0, cur, 0.0))
        sw = _switch(problem, step, cur, target, start, all_at_once)
        switches.append(sw)
        t = start
        for dur, fo, fn in phases(
            problem.configs[cur].nodes, problem.rf, problem.cl, sw.offline_s_per_node, all_at_once
        ):
            segs.append((t, t + dur, cur, fo, target, fn))
            t += dur
        cur, t_now = target, t
    segs.append((t_now, max(end, t_now), cur, 1.0, cur, 0.0))
    served = np.zeros(T)
    config = np.zeros(T, dtype=int)
    for s0, s1, a, fa, b, fb in segs:
        s0, s1 = max(s0, edges[0]), min(s1, end)
        if s1 <= s0:
            continue
        u0 = int(np.searchsorted(edges, s0, side="right")) - 1
        u1 = int(np.searchsorted(edges, s1, side="left"))
        for u in range(max(u0, 0), min(u1, T)):
            lo, hi = max(s0, edges[u]), min(s1, edges[u + 1])
            if hi > lo:
                rate = min(fa * problem.capacity[u, a] + fb * problem.capacity[u, b], problem.load[u])
                served[u] += rate * (hi - lo)
    # The configuration serving (or being switched to) at each step's start.
    cur = initial
    it = iter(switches)
    nxt = next(it, None)
    for u in range(T):
        while nxt is not None and nxt.start_s <= edges[u]:
            cur = nxt.target
            nxt = next(it, None)
        config[u] = cur
    return PlanResult("", float(served.sum()), initial, switches, config, served)


# ----------------------------------------------------------------------------- the exact DP


@dataclass
class Transitions:
    """Vectorized switch outcomes: starting a switch a -> b at step t serves
    ``gain[t, a, b]`` ops until the end of the step in which it completes, and
    the next decision is at step ``nxt[t, a, b]`` (``T``: horizon reached).
    The diagonal is staying one step."""

    gain: np.ndarray
    nxt: np.ndarray


def transitions(problem: PlanProblem) -> Transitions:
    """Build the DP's transition tables (exact piecewise-linear integration)."""
    T, C = problem.steps, problem.n_configs
    edges = problem.edges
    rate = problem.served_rate()  # (T, C)
    gain = np.full((T, C, C), -np.inf)
    nxt = np.full((T, C, C), T, dtype=np.int64)
    idx = np.arange(T)
    dur = problem.durations
    gain[idx[:, None], np.arange(C)[None, :], np.arange(C)[None, :]] = rate * dur[:, None]
    nxt[idx[:, None], np.arange(C)[None, :], np.arange(C)[None, :]] = idx[:, None] + 1
    end = edges[-1]
    starts = edges[:-1][:, None]  # (T, 1)
    cols = np.arange(C)[None, :]
    for a in range(C):
        tau = problem.offline_s[a]  # (C,) per target
        ph = phases(problem.configs[a].nodes, problem.rf, problem.cl, 1.0)
        if not ph:
            continue  # RF = CL: no switch away from a
        total = np.zeros((T, C))
        t0 = np.broadcast_to(starts, (T, C)).copy()
        for _, fo, fn in ph:
            t1 = t0 + tau[None, :]
            r = np.minimum(fo * problem.capacity[:, a][:, None] + fn * problem.capacity, problem.load[:, None])
            total += _integral(edges, r, t1) - _integral(edges, r, t0)
            t0 = t1
        # t0 is now the end of the switch; the new configuration serves the rest of that step.
        done = t0 < end
        u = np.clip(np.searchsorted(edges[1:], np.minimum(t0, end), side="left"), 0, T - 1)
        u = np.maximum(u, idx[:, None])
        tail = np.where(done, rate[u, cols] * (edges[u + 1] - np.minimum(t0, end)), 0.0)
        total += tail
        g = gain[:, a, :]
        n = nxt[:, a, :]
        mask = cols != a
        g[:, mask[0]] = total[:, mask[0]]
        n[:, mask[0]] = np.where(done, u + 1, T)[:, mask[0]]
    return Transitions(gain, nxt)


def _integral(edges: np.ndarray, rate: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``\\int_{edges[0]}^{x} rate[:, col]`` for each ``x[i, col]`` (rate is per step)."""
    T = rate.shape[0]
    dur = np.diff(edges)
    cum = np.vstack([np.zeros((1, rate.shape[1])), np.cumsum(rate * dur[:, None], axis=0)])
    xc = np.clip(x, edges[0], edges[-1])
    u = np.clip(np.searchsorted(edges, xc, side="right") - 1, 0, T - 1)
    cols = np.arange(rate.shape[1])[None, :]
    return cum[u, cols] + rate[u, cols] * (xc - edges[u])


@dataclass
class DPSolution:
    value: np.ndarray  # (T + 1, C): best ops from step t in configuration c
    choice: np.ndarray  # (T, C): next configuration (== c: stay)
    trans: Transitions
    seconds: float


def solve_dp(problem: PlanProblem, trans: Transitions | None = None) -> DPSolution:
    """Backward induction over (step, configuration); exact over all plans."""
    t0 = time.perf_counter()
    tr = trans or transitions(problem)
    T, C = problem.steps, problem.n_configs
    V = np.zeros((T + 1, C))
    choice = np.zeros((T, C), dtype=np.int64)
    cols = np.arange(C)[None, :]
    diag = np.arange(C)
    for t in range(T - 1, -1, -1):
        cand = tr.gain[t] + V[tr.nxt[t], cols]  # (C, C): from a (row) to b (column)
        best = cand.argmax(axis=1)
        top = cand[diag, best]
        stay = cand[diag, diag] >= top - TIE_RTOL * np.abs(top)
        choice[t] = np.where(stay, diag, best)
        V[t] = np.where(stay, cand[diag, diag], top)
    return DPSolution(V, choice, tr, time.perf_counter() - t0)


def _start(problem: PlanProblem, values: np.ndarray) -> int:
    """The initial configuration: given, or the best (ties: the default, then the lowest index)."""
    if problem.initial is not None:
        return problem.initial
    top = values.max()
    if values[problem.default] >= top - TIE_RTOL * abs(top):
        return problem.default
    return int(values.argmax())


def _path(sol: DPSolution, start: int, lo: int = 0) -> list[tuple[int, int]]:
    """The DP's moves from (step 0, ``start``), shifted by ``lo`` steps."""
    T = sol.choice.shape[0]
    moves = []
    t, c = 0, start
    while t < T:
        b = int(sol.choice[t, c])
        if b == c:
            t += 1
        else:
            moves.append((t + lo, b))
            t = int(sol.trans.nxt[t, c, b])
            c = b
    return moves


def optimal_plan(problem: PlanProblem) -> PlanResult:
    """The exact optimum over the whole horizon, replayed and certified."""
    sol = solve_dp(problem)
    c0 = _start(problem, sol.value[0])
    res = simulate(problem, c0, _path(sol, c0))
    res.name = "optimal"
    dp_val = float(sol.value[0, c0])
    res.certificate = {
        "method": "exact dynamic programming over (step, configuration)",
        "optimal": True,
        "dp_value": dp_val,
        "replayed_value": res.total_ops,
        "replay_rel_diff": abs(dp_val - res.total_ops) / max(abs(dp_val), 1.0),
        "states": problem.steps * problem.n_configs,
        "transitions": problem.steps * problem.n_configs**2,
        "wall_s": sol.seconds,
    }
    return res


def receding_plan(problem: PlanProblem, lookahead: int) -> PlanResult:
    """SOPHIA's operation: plan ``lookahead`` steps exactly, execute, re-plan.

    Each window is solved by the DP with the window's end as horizon; its moves
    are executed; a switch running past the window's end completes and the
    next window starts at the first step boundary after it.
    """
    if lookahead < 1:
        raise InputError(f"--lookahead must be at least 1 step, got {lookahead}")
    t0 = time.perf_counter()
    T = problem.steps
    moves: list[tuple[int, int]] = []
    w, c, init = 0, problem.initial, problem.initial
    windows = 0
    while w < T:
        hi = min(T, w + lookahead)
        sub = problem.window(w, hi, c)
        sol = solve_dp(sub)
        c = _start(sub, sol.value[0])
        init = c if init is None else init
        windows += 1
        nxt_w = hi
        for step, b in _path(sol, c, w):
            moves.append((step, b))
            sw = _switch(problem, step, c, b, float(problem.edges[step]), False)
            # the first step boundary at or after the switch's end
            nxt_w = max(hi, int(np.searchsorted(problem.edges, sw.end_s, side="left")))
            c = b
        w = nxt_w
    assert init is not None
    res = simulate(problem, init, moves)
    res.name = f"lookahead {lookahead}"
    res.certificate = {
        "method": f"receding horizon: exact DP per window of {lookahead} steps, re-planned at each window's end",
        "optimal": lookahead >= T,
        "windows": windows,
        "wall_s": time.perf_counter() - t0,
    }
    return res


# ----------------------------------------------------------------------------- SOPHIA's baselines (Sec. 6)


def default_plan(problem: PlanProblem) -> PlanResult:
    """Default: the default configuration all along, never switching."""
    res = simulate(problem, problem.default, [])
    res.name = "default"
    return res


def static_plan(problem: PlanProblem) -> PlanResult:
    """Static-Opt: the best single configuration with hindsight (running from the start, no switch)."""
    totals = (problem.served_rate() * problem.durations[:, None]).sum(axis=0)
    res = simulate(problem, int(totals.argmax()), [])
    res.name = "static optimized"
    return res


def naive_plan(problem: PlanProblem) -> PlanResult:
    """Naive: whenever the capacity-maximizing configuration changes, switch to
    it by restarting all nodes at once (nothing is served meanwhile)."""
    T, edges = problem.steps, problem.edges
    cap = problem.capacity
    cur = problem.initial if problem.initial is not None else int(cap[0].argmax())
    init, moves, t = cur, [], 0
    while t < T:
        target = int(cap[t].argmax())
        if cap[t, cur] >= cap[t, target]:  # ties keep the running configuration
            t += 1
            continue
        moves.append((t, target))
        end = edges[t] + problem.offline_s[cur, target]
        t = max(t + 1, int(np.searchsorted(edges, end, side="left")))
        cur = target
    res = simulate(problem, init, moves, all_at_once=True)
    res.name = "naive"
    return res


def best_plan(problem: PlanProblem) -> PlanResult:
    """Theoretical Best: the per-step optimum with free switches (an upper bound on every plan)."""
    rate = problem.served_rate()
    best = rate.argmax(axis=1)
    served = rate[np.arange(problem.steps), best] * problem.durations
    changes = int(np.count_nonzero(np.diff(best)))
    return PlanResult(
        "theoretical best",
        float(served.sum()),
        int(best[0]),
        [],
        best,
        served,
        note=f"{changes} free switches",
    )


def plan_report(problem: PlanProblem, lookahead: int | None = None) -> dict[str, PlanResult]:
    """The four baselines, the SOPHIA-style plan and the full-horizon optimum.

    Parameters
    ----------
    problem : PlanProblem
    lookahead : int, optional
        Window of the receding-horizon plan in steps; ``None`` plans the whole
        horizon at once (the plan is then the optimum).

    Returns
    -------
    dict
        ``default``, ``static``, ``naive``, ``best`` (theoretical), ``plan``
        and ``optimal``, each a :class:`PlanResult`; the plan's certificate
        holds the optimum, the upper bound and the gaps.
    """
    out = {
        "default": default_plan(problem),
        "static": static_plan(problem),
        "naive": naive_plan(problem),
        "best": best_plan(problem),
    }
    opt = optimal_plan(problem)
    plan = opt if lookahead is None or lookahead >= problem.steps else receding_plan(problem, lookahead)
    bound = out["best"].total_ops
    cert: dict[str, Any] = {
        "plan": plan.certificate if plan is not opt else {"method": "the full-horizon optimum", "optimal": True},
        "optimum": opt.certificate,
        "lookahead_steps": lookahead if lookahead is not None else problem.steps,
        "plan_ops": plan.total_ops,
        "optimum_ops": opt.total_ops,
        "plan_vs_optimum": plan.total_ops / opt.total_ops - 1 if opt.total_ops > 0 else 0.0,
        "upper_bound_ops": bound,
        "upper_bound": "theoretical best (per-step optimum, free switches)",
        "optimum_vs_bound": opt.total_ops / bound - 1 if bound > 0 else 0.0,
        "rf": problem.rf,
        "cl": problem.cl,
    }
    r, k = rounds(max(c.nodes for c in problem.configs), problem.rf, problem.cl)
    if k == 0:
        cert["note"] = (
            f"RF={problem.rf}, CL={problem.cl}: R = N_s - CL*ceil(N_s/RF) = {r} <= 0, so no node may go offline "
            "without losing availability; the plan never switches (SOPHIA-AGGRESSIVE would)"
        )
    out["plan"] = plan
    out["optimal"] = opt
    out["plan"].certificate = cert if plan is not opt else {**cert}
    return out
