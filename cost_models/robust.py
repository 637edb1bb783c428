"""Robust designs under workload uncertainty.

Two ways a spec can ask for robustness (``robustness:``):

* ``noise: nu`` — the Cosine paper's (Sec. 5 "Robustness"): design for a
  workload with noise added, by changing the proportions of the operations and
  adding the missing ones: w' = (1 - nu) w + nu u with u uniform over the six
  operation types (so every operation gets at least nu/6).
* ``kl_radius: rho`` — ENDURE's: minimize the worst expected per-operation cost
  over the KL neighbourhood {w^ : KL(w^ || w) <= rho}. The inner maximum is
  solved exactly through its convex dual (symbolic ``kl_dual_*``):
  max = min_{lambda > 0} lambda (rho + log sum_i w_i e^{c_i / lambda})
  (eta eliminated in closed form), a 1-D convex problem solved per design.

The per-operation cost c_i of a design on a node is the time one operation of
type i takes at the node's full parallelism, 1 / X(pure op i): the mix's cost
is then sum_i w^_i c_i (resources add up per operation).

Either way robustness does not replace the objective: the search maximizes the
expected workload's throughput among configurations whose perturbed throughput
(:func:`perturbed_throughput`) is within ``robustness.tolerance`` of the best
perturbed throughput at that budget (solver.model, docs/solver.md).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cost_models.cpu import Demands, NodeShape, ShapeTerms, node_demands, node_throughput, throughput
from cost_models.io_model import IOCost
from cost_models.phi import PhiTable
from cost_models.replication import amplification, as_node_mix, logical_operations
from cost_models.symbolic import compiled
from specs.schema import Spec, Workload
from specs.vocab import NOISE_OPERATIONS, OPERATIONS

#: Bisection steps on log(lambda) for the KL dual: the bracket is e^(+-40) times
#: the cost spread; 60 halvings of 80 leave 7e-17 in log lambda.
KL_ITERATIONS = 60


def noisy_mix(mix: dict[str, float], noise: float) -> dict[str, float]:
    """The paper's noise: (1 - noise) w + noise u over its six operation types
    (an empty-range share of the spec is kept, scaled by 1 - noise)."""
    if noise <= 0:
        return dict(mix)
    u = noise / len(NOISE_OPERATIONS)
    return {op: (1 - noise) * mix.get(op, 0.0) + (u if op in NOISE_OPERATIONS else 0.0) for op in OPERATIONS}


def kl_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL(p || q) along the last axis (0 log 0 = 0; inf if p puts mass where q has none)."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(p > 0, p * np.log(p / q), 0.0)
    return t.sum(axis=-1)


def _dual_value(c: np.ndarray, w: np.ndarray, rho: float, lam: np.ndarray) -> np.ndarray:
    """The dual objective at lambda with the optimal eta (compiled expressions)."""
    k = compiled()
    scale = np.max(np.where(w > 0, c, -np.inf), axis=-1)  # shift for exp stability
    sumexp = (w * np.exp((c - scale[:, None]) / lam[:, None])).sum(axis=-1)
    eta = k["kl_dual_eta"](lam, sumexp) + scale
    terms = k["kl_dual_term"](lam[:, None], w, c, eta[:, None]).sum(axis=-1)
    return k["kl_dual_head"](eta, rho, lam) + terms


def kl_worst_case(c: np.ndarray, w: np.ndarray, rho: float) -> np.ndarray:
    """max over {w^ : KL(w^||w) <= rho} of w^ . c, for each row of ``c``.

    Parameters
    ----------
    c : (n, m) per-operation costs of n designs.
    w : (m,) the expected workload (a distribution).
    rho : KL radius (>= 0).

    Returns
    -------
    (n,) worst-case expected cost; equals w . c at rho = 0 and tends to the
    largest c_i on the support of w as rho grows.
    """
    c = np.atleast_2d(np.asarray(c, dtype=float))
    w = np.asarray(w, dtype=float)
    w = w / w.sum()
    nominal = c @ w
    if rho <= 0:
        return nominal
    support = w > 0
    top = np.max(np.where(support, c, -np.inf), axis=1)
    spread = np.maximum(top - np.min(np.where(support, c, np.inf), axis=1), 1e-300)
    ws = np.where(support, w, 0.0)
    # The dual is convex in lambda. Its derivative (a search aid only; the value
    # below is the compiled dual) is rho + log S' + (top - cbar)/lambda with
    # S' = sum w e^{(c-top)/lambda} and cbar the e^{c/lambda}-weighted mean cost.
    lo = np.log(spread) - 40.0
    hi = np.log(spread) + 40.0
    for _ in range(KL_ITERATIONS):
        mid = (lo + hi) / 2
        lam = np.exp(mid)[:, None]
        e = ws * np.exp(np.where(support, (c - top[:, None]) / lam, -np.inf))
        s_ = e.sum(axis=1)
        cbar = (e * np.where(support, c, 0.0)).sum(axis=1) / s_
        grad = rho + np.log(s_) + (top - cbar) / lam[:, 0]
        lo = np.where(grad < 0, mid, lo)
        hi = np.where(grad < 0, hi, mid)
    best = _dual_value(np.where(support, c, 0.0), ws, rho, np.exp((lo + hi) / 2))
    # the maximum is attained within [nominal, top]; clip rounding outside it
    return np.clip(best, nominal, top)


def per_op_costs(
    phi: PhiTable, io: IOCost, shape: NodeShape, iops: float | np.ndarray, threads: float, scan_length: float
) -> np.ndarray:
    """(n, 6) seconds per operation of each type at full parallelism: 1 / X(pure op)."""
    cols = []
    for op in OPERATIONS:
        x = node_throughput(phi, io, iops, shape, {op: 1.0}, threads, scan_length)
        cols.append(np.where(x > 0, 1.0 / np.maximum(x, 1e-300), np.inf))
    return np.stack(cols, axis=-1)


def mix_vector(mix: dict[str, float]) -> np.ndarray:
    w = np.array([mix.get(op, 0.0) for op in OPERATIONS], dtype=float)
    return w / w.sum()


def is_robust(spec: Spec) -> bool:
    """Whether the spec asks for robustness (noise or a KL radius)."""
    return spec.noise > 0 or bool(spec.kl_radius)


def perturbed_workload(spec: Spec) -> Workload:
    """The workload the perturbed throughput is measured on: the noisy mix
    (the spec's own mix without noise); scans the noise adds have the spec's
    scan length (or schema.DEFAULT_SCAN_LENGTH, which `cosine solve` prints). On a replicated
    node's spec (cost_models.replication.node_spec) the workload's own mix is perturbed, then
    mapped to node operations."""
    wl = spec.workload
    if spec.noise <= 0:
        return wl
    hit = _PERTURBED.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    mix, _ = as_node_mix(spec, noisy_mix(logical_operations(spec), spec.noise))
    out = replace(wl, operations=mix)
    if len(_PERTURBED) >= _PERTURBED_MAX:
        _PERTURBED.clear()
    _PERTURBED[id(spec)] = (spec, out)  # the spec is kept: its id is not reused while it is here
    return out


#: :func:`perturbed_workload`'s answers in this process, by the (frozen) spec's identity: the design
#: tables ask for a spec's about 12,000 times a solve (every VM type's caps), 23 us each.
_PERTURBED: dict[int, tuple[Spec, Workload]] = {}
_PERTURBED_MAX = 64


def perturbed_amplification(spec: Spec) -> float:
    """Node operations per operation of the perturbed workload (cost_models.replication): the
    noise moves the mix's writes, so a replicated node's operations per operation move too."""
    if spec.noise <= 0:
        return amplification(spec)
    return as_node_mix(spec, noisy_mix(logical_operations(spec), spec.noise))[1]


def perturbed_demands(
    phi: PhiTable,
    io: IOCost,
    shape: NodeShape,
    spec: Spec,
    extra_cpu: float | np.ndarray = 0.0,
    terms: ShapeTerms | None = None,
) -> Demands | None:
    """The noisy mix's demands (cost_models.cpu.node_demands) of designs whose I/O per operation
    under it is ``io``: what :func:`perturbed_throughput` needs whatever the volume; None with a KL
    radius, whose worst case prices every operation on the volume one by one. ``terms``:
    ``cost_models.cpu.shape_terms`` of ``shape`` at the noisy mix's scan length, when the caller
    has them."""
    if spec.kl_radius is not None and float(spec.kl_radius) > 0:
        return None
    pw = perturbed_workload(spec)
    return node_demands(phi, io, shape, pw.operations, pw.scan_length, extra_cpu=extra_cpu, terms=terms)


def perturbed_throughput(
    phi: PhiTable,
    io: IOCost,
    shape: NodeShape,
    iops: float | np.ndarray,
    threads: float,
    spec: Spec,
    extra_cpu: float | np.ndarray = 0.0,
) -> np.ndarray:
    """Node throughput under the perturbed workload of designs whose I/O per
    operation (``io``: under :func:`perturbed_workload`) is given:
    the noisy mix's, or with a KL radius the worst case over the KL ball around it.
    ``extra_cpu`` (codec seconds per operation of the noisy mix) enters the noisy mix's
    throughput; the KL bound prices operations one by one without it."""
    d = perturbed_demands(phi, io, shape, spec, extra_cpu)
    if d is not None:
        return throughput(d, iops, threads)
    pw = perturbed_workload(spec)
    rho = float(spec.kl_radius or 0.0)
    c = per_op_costs(phi, io, shape, iops, threads, pw.scan_length)
    return 1.0 / np.maximum(kl_worst_case(c, mix_vector(pw.operations), rho), 1e-300)
