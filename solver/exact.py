"""Exact re-evaluation: a chosen cluster evaluated with the exact model, and its approximation error.

The design tables (solver.tables) interpolate windows over breakpoints and evaluate each shard
size N/k once; the band MIPs choose from them. Every chosen cluster is evaluated again here
with the exact windows (cost_models.windows.ExactWindow: bisection), the real keys per node and
each node's I/Os per second at its design's block size; the relative difference of the MIP's
throughput and this one is the answer's approximation error, certified beside its gap
(solver.frontier). A solve re-evaluates each cluster once (:class:`Reevaluations`), in worker
processes when there are many, and reads back those a ``store`` (solver.reeval_cache) holds.
"""

from __future__ import annotations

import math
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from cost_models import kernels
from cost_models.cloud import usable_bytes
from cost_models.cpu import NodeShape
from cost_models.design import DesignBatch
from cost_models.distributions import Partitions
from cost_models.evaluate import NodeEval, design_entry, evaluate_designs, shape_overwrites, spec_partitions
from cost_models.io_model import exact_windows
from cost_models.latency import P50, P99, LatencyTerms, latency_at
from cost_models.pricing.catalog import HOURS_PER_MONTH
from cost_models.replication import amplification, workload_io_per_op
from cost_models.robust import is_robust, perturbed_amplification, perturbed_throughput, perturbed_workload
from cost_models.serving import (
    DEFAULT_UTILIZATION,
    NodeCaps,
    ServedMix,
    latency_terms,
    node_caps,
    served_throughput,
    spec_served,
    spec_serving,
)
from solver.model import (
    X_SCALE,
    Chosen,
)
from solver.reeval_cache import CachedReevaluation, ReevalCache
from solver.rundir import NodeDesign, NodeGroup, NodeStorage
from solver.tables.context import Context
from specs.io import from_record, to_record
from specs.schema import Spec
from specs.vocab import OPERATIONS


@dataclass
class Exact:
    """A configuration re-evaluated with the exact model."""

    throughput: float  # expected workload, operations of the workload per second
    per_node: list[NodeGroup]
    io_per_op: dict[str, float]  # per operation of the workload, every replica's I/O
    perturbed: float = 0.0  # perturbed workload (= throughput without robustness)

    @classmethod
    def of_cached(cls, row: CachedReevaluation) -> Exact:
        """A re-evaluation read back from the cache (solver.reeval_cache stores plain rows)."""
        per_node = from_record(list[NodeGroup], row.per_node, "a cached re-evaluation's per_node")
        return cls(row.throughput, per_node, row.io_per_op, row.perturbed)

    def cached(self) -> CachedReevaluation:
        """This re-evaluation as the cache's row."""
        return CachedReevaluation(self.throughput, self.perturbed, self.io_per_op, to_record(self.per_node))


class Certifiable(Protocol):
    """What :meth:`Reevaluations.certify` sets on a point (solver.frontier.Point): its cluster's
    re-evaluation and approximation error (a protocol, so that this module does not import
    solver.frontier, which imports it)."""

    chosen: Chosen | None
    exact: Exact | None
    approx_error: float


def reevaluate(spec: Spec, nodes: list[tuple[Context, int]], parts: Partitions | None = None) -> Exact:
    """Exact throughput of a cluster, expected and perturbed: real shard sizes,
    exact windows, each node's I/Os per second at its design's block size.
    ``parts``: the workload's key partitions, when the caller has them."""
    return reevaluate_many(spec, [nodes], parts)[0]


@dataclass
class _NodeFigures:
    """One node's exact evaluation (:func:`_evaluate_nodes`)."""

    ne: NodeEval
    threads: int
    iops: float
    x: float  # node ops/s, expected workload (served: operations of the cluster over its shards)
    xp: float  # and perturbed (= x without robustness)
    sm: ServedMix | None = None  # the node's served mix
    caps: NodeCaps | None = None  # its network and latency bounds
    x_cpu: float = 0.0  # its served capacity before them (CPU, device)
    x_engine: float = 0.0  # the engine in process (no server, no network)


def demand_ops(spec: Spec) -> float | None:
    """The cluster's demanded node operations per second: performance.min_throughput, else the
    workload's operations a month spread evenly, times A (a replicated node's spec serves A node
    operations per operation of the workload); None when the spec states neither."""
    a = amplification(spec)
    if spec.min_throughput is not None:
        return float(spec.min_throughput) * a
    opm = spec.workload.operations_per_month
    return float(opm) / (HOURS_PER_MONTH * 3600) * a if opm else None


def operating_point(spec: Spec, f: _NodeFigures, share: float) -> float:
    """The node's utilization at the answer's operating point: the spec's demand over the cluster
    (its ``share`` of the keys' operations), at most its throughput; without a demand
    :data:`~cost_models.serving.DEFAULT_UTILIZATION` of it. 1 when the demand reaches the node's
    throughput (every cap's: its CPU, network or latency bound): the node is saturated, and its
    queue, hence its latency, has no bound (ycsb_e at 0.29x its demand printed a p50 of 1.9e14 ms
    at a utilization that rounded to 1 - 1e-12)."""
    if f.x_cpu <= 0:
        return 0.0
    d = demand_ops(spec)
    if d is not None and d * share >= f.x:
        return 1.0
    run = f.x * DEFAULT_UTILIZATION if d is None else d * share
    return run / f.x_cpu


def _baseline_ops(vm: Any, sm: ServedMix | None) -> float:
    """The node's throughput its VM's baseline bandwidth carries (no burst; inf: no figure)."""
    if sm is None:
        return math.inf
    from cost_models.network import network_cap

    net = network_cap(sm.load, vm.network_bytes_per_s, vm.network_burst_bytes_per_s, vm.network_ingress_limited)
    return net / sm.scale


def node_latencies(spec: Spec, nodes: list[tuple[float, float, _NodeFigures, float]]) -> list[tuple[float, float]]:
    """(p50, p99) of a request to each node of ``nodes`` (its VM's cores, round trip, figures and
    utilization: cost_models.latency), inf where it has none (no served mix, no capacity, or at
    its capacity). All the nodes' quantiles are found in one bisection (a node's 60 steps over
    arrays of one cost 13 ms: a cold solve re-evaluates hundreds of nodes)."""
    out = [(math.inf, math.inf)] * len(nodes)
    live, cap, util, cores, terms = [], [], [], [], []
    for i, (vcpu, rtt_s, f, u) in enumerate(nodes):
        if f.sm is not None and f.x_cpu > 0 and u < 1:
            live.append(i)
            cap.append(f.x_cpu * f.sm.scale)
            util.append(u)
            cores.append(vcpu)
            terms.append(latency_terms(f.sm, rtt_s))
    if not live:
        return out
    caps = np.array(cap)
    both = [
        latency_at(caps * np.array(util), caps, np.array(cores), spec.pipeline, LatencyTerms.stacked(terms), q)
        for q in (P50, P99)
    ]
    for j, i in enumerate(live):
        out[i] = (float(both[0][j]), float(both[1][j]))
    return out


def reevaluate_many(
    spec: Spec, clusters: list[list[tuple[Context, int]]], parts: Partitions | None = None
) -> list[Exact]:
    """:func:`reevaluate` of each cluster of ``clusters``; the nodes of all of them are evaluated
    together (:func:`_evaluate_nodes`)."""
    N = spec.workload.entries
    parts = spec_partitions(spec) if parts is None else parts
    # keys actually on each node of a context; at least one (a key is not split: in a cluster
    # with more nodes than keys, the nodes that hold one serve its operations)
    sizes = []
    for nodes in clusters:
        cap = sum(c.entries * k for c, k in nodes)
        sizes.append([max(c.entries * N / cap, 1.0) for c, _ in nodes])
    wanted: dict[tuple[int, float, int], Context] = {}
    for nodes, ss in zip(clusters, sizes, strict=True):
        n = sum(int(k) for _, k in nodes)  # every scan reaches all of them (cost_models.network)
        for (c, _), s in zip(nodes, ss, strict=True):
            wanted.setdefault((id(c), s, n), c)
    figs = _evaluate_nodes(spec, wanted, parts)
    # a replicated node's node operations per operation of the workload (cost_models.replication)
    a, a_p = amplification(spec), perturbed_amplification(spec)
    # every cluster's nodes' operating points, and their latencies in one go
    points = [
        (c, figs[(id(c), s, sum(int(k) for _, k in nodes))], s)
        for nodes, ss in zip(clusters, sizes, strict=True)
        for (c, _), s in zip(nodes, ss, strict=True)
    ]
    utils = [operating_point(spec, f, s / N) for _, f, s in points]
    lats = iter(
        node_latencies(spec, [(float(c.vm.vcpu), c.vm.rtt_s, f, u) for (c, f, _), u in zip(points, utils, strict=True)])
    )
    util_of = iter(utils)
    out = []
    for nodes, ss in zip(clusters, sizes, strict=True):
        held = sum(s * k for (_, k), s in zip(nodes, ss, strict=True))  # = N unless nodes outnumber keys
        n_nodes = sum(int(k) for _, k in nodes)
        xs, ps, per_node = [], [], []
        io: dict[str, float] = dict.fromkeys(OPERATIONS, 0.0)
        for (c, k), s in zip(nodes, ss, strict=True):
            util, (p50, p99) = next(util_of), next(lats)
            f = figs[(id(c), s, n_nodes)]
            ne, x, xp, iops = f.ne, f.x, f.xp, f.iops
            xs.append(N * x / s / a if x > 0 else 0.0)
            ps.append(N * xp / s / a_p if xp > 0 else 0.0)
            share = s * k / held  # the share of the operations this context's nodes serve
            for op, v in ne.io.per_op().items():
                io[op] += share * float(v[0])
            entry = design_entry(c.design, ne.layout, 0, spec.workload.empty_range_width, threads=f.threads)
            net = None if f.caps is None or not math.isfinite(f.caps.network_ops) else f.caps.network_ops
            base = _baseline_ops(c.vm, f.sm)
            per_node.append(
                NodeGroup(
                    NodeDesign(
                        **vars(entry),
                        vm_type=c.vm.name,
                        count=int(k),
                        node_throughput_ops=x,
                        node_perturbed_ops=xp,
                        device_bound=bool(x >= iops / max(float(ne.io_total[0]), 1e-300) * (1 - 1e-9)),
                        engine_throughput_ops=f.x_engine,
                        wire_bytes_per_op=None if f.sm is None else f.sm.wire_bytes_per_op,
                        network_ops=net,
                        network_bound=bool(net is not None and x > 0 and x >= net * (1 - 1e-9)),
                        burst_duty_cycle=spec.network_duty_cycle if x > base * (1 + 1e-9) else None,
                        utilization=util,
                        latency_p50_s=p50 if math.isfinite(p50) else None,
                        latency_p99_s=p99 if math.isfinite(p99) else None,
                    ),
                    NodeStorage(
                        vm_type=c.vm.name,
                        product=c.storage.product,
                        disks=int(c.storage.disks),
                        gib=float(c.storage.gib),
                        iops=float(c.storage.iops),
                        mibps=float(c.storage.mibps) if math.isfinite(c.storage.mibps) else None,
                        effective_iops=float(iops),
                        usd_month=float(c.storage.usd_month),
                        label=c.storage.label,
                    ),
                )
            )
        out.append(Exact(min(xs) if xs else 0.0, per_node, workload_io_per_op(spec, io), min(ps) if ps else 0.0))
    return out


#: Nodes a process evaluates on the numpy path before :func:`compiled_evaluator` loads the kernels
#: where numba is imported already (their cached code loads in ~0.02-0.06 s; a node evaluates in
#: ~5 ms on the numpy path, ~1.2 ms compiled): a what-if that evaluates a few does not pay the load.
COMPILE_AFTER_NODES = 16
#: The same where numba is not imported yet (its import is ~0.17 s more: ~45 nodes' saving).
COMPILE_AFTER_NODES_IMPORTING = 64
_EVALUATED = [0]


def compiled_evaluator(nodes: int) -> None:
    """Count ``nodes`` about to be evaluated, and load the design evaluator's kernels
    (cost_models.kernels) once :data:`COMPILE_AFTER_NODES` are where numba is imported already (by
    a frontier's knapsacks, solver.knapsack), or :data:`COMPILE_AFTER_NODES_IMPORTING` where it is
    not: with the tables read from the cache nothing else loads them, and ycsb_a's 1,250
    evaluations took 7.1 s on the numpy path against 1.5 s compiled. A solve whose answers all come
    from the caches evaluates nothing and loads nothing."""
    _EVALUATED[0] += nodes
    imported = "numba" in sys.modules
    if _EVALUATED[0] >= (COMPILE_AFTER_NODES if imported else COMPILE_AFTER_NODES_IMPORTING):
        kernels.load()


def _evaluate_nodes(
    spec: Spec, nodes: dict[tuple[int, float, int], Context], parts: Partitions
) -> dict[tuple[int, float, int], _NodeFigures]:
    """The exact evaluation of each node (a column holding ``s`` keys, keyed by (id, s)), alone:
    the exact windows of a node of s keys (s >= 1: the layout's own key count), the gets' shared
    by the two workloads. The nodes of one size share them, and first evaluate their designs
    together once (each on its VM's memory), for the windows only: that solves the counts they
    ask for in a few bisections instead of a few per node (cost_models.windows.ExactWindow: a
    count's window does not depend on what it is solved with). Each node's figures are then
    those of its design evaluated alone (the batch's are not used: its matrix products over the
    key partitions may round otherwise than a single design's)."""
    compiled_evaluator(len(nodes))
    wl = spec.workload
    robust = is_robust(spec)
    pw = perturbed_workload(spec)
    shaped = shape_overwrites(spec)  # the perturbed workload runs on the expected one's shape (and puts)
    by_size: dict[float, list[tuple[tuple[int, float, int], Context]]] = {}
    for key, c in nodes.items():
        by_size.setdefault(key[1], []).append((key, c))
    out: dict[tuple[int, float, int], _NodeFigures] = {}
    for s, group in by_size.items():
        mem = usable_bytes(np.array([c.vm.memory_gib for _, c in group]), spec.design.memory_headroom)
        wins = exact_windows(parts, wl.operations, s)
        if len(group) > 1:
            evaluate_designs(DesignBatch.of([c.design for _, c in group]), wl, s, mem, parts, wins, spec.cost_model)
        for i, (key, c) in enumerate(group):
            batch = DesignBatch.of([c.design])
            ne = evaluate_designs(batch, wl, s, float(mem[i]), parts, wins, model=spec.cost_model)
            threads = c.vm.vcpu if c.design.threads is None else c.design.threads
            iops = float(c.storage.effective_iops(ne.disk_block(batch)[0]))
            shards = float(key[2])
            sm = spec_served(spec, wl, shards)
            x_engine = float(ne.throughput(wl, iops, threads)[0])
            # the scans reach the cluster's shards: one replica of each (nodes / RF)
            x_cpu = float(ne.throughput(wl, iops, threads, serving=spec_serving(spec, shards))[0])
            caps = node_caps(
                np.array([x_cpu]),
                sm,
                c.vm.vcpu,
                spec.pipeline,
                c.vm,
                spec.max_latency_s,
                spec.max_latency_p50_s,
                spec.network_duty_cycle,
            )
            x = float(caps.apply(np.array([x_cpu]))[0])
            out[key] = _NodeFigures(ne, threads, iops, x, x, sm, caps, x_cpu, x_engine)
        rows = [i for i, (key, _) in enumerate(group) if out[key].x > 0] if robust else []
        if not rows:
            continue
        pw_wins = exact_windows(parts, pw.operations, s, wins[1])
        if pw is not wl and len(rows) > 1:
            sub = DesignBatch.of([group[i][1].design for i in rows])
            evaluate_designs(
                sub, pw, s, mem[rows], parts, pw_wins, spec.cost_model, overwrites=shaped, shape_puts=wins[0]
            )
        for i in rows:
            key, c = group[i]
            f = out[key]
            batch = DesignBatch.of([c.design])
            pe = (
                f.ne
                if pw is wl
                else evaluate_designs(
                    batch, pw, s, float(mem[i]), parts, pw_wins, spec.cost_model, overwrites=shaped, shape_puts=wins[0]
                )
            )
            if spec.kl_radius:
                # the KL bound prices operations one by one on the engine (not served: docs/model.md)
                f.xp = float(perturbed_throughput(pe.phi, pe.io, NodeShape.of(pe.layout), f.iops, f.threads, spec)[0])
                continue
            smp = spec_served(spec, pw, float(key[2]))
            xp_cpu = served_throughput(pe.phi, pe.io, NodeShape.of(pe.layout), smp, pw.scan_length, f.iops, f.threads)
            capp = node_caps(
                xp_cpu,
                smp,
                c.vm.vcpu,
                spec.pipeline,
                c.vm,
                spec.max_latency_s,
                spec.max_latency_p50_s,
                spec.network_duty_cycle,
            )
            f.xp = float(capp.apply(xp_cpu)[0])
    return out


@dataclass(frozen=True)
class NodeRate:
    """One node's exact figures at a key count (:meth:`Reevaluations.node_rate`)."""

    x: float  # operations of the workload per second (a node operation is 1 / A of one), expected
    xp: float  # ops/s, perturbed workload (= x without robustness)
    levels: int  # L
    cold_levels: int  # Y

    @property
    def layout(self) -> tuple[int, int]:
        return self.levels, self.cold_levels


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b if b > 0 else (0.0 if a == b else math.inf)


#: Fewest clusters per worker process worth starting one for (:meth:`Reevaluations.resolve`: a
#: cluster's re-evaluation takes about 10 ms, a process a few tens of ms to start).
REEVALS_PER_WORKER = 4
#: A cluster's key in :class:`Reevaluations` (its columns by identity, with their counts).
ClusterKey = tuple[tuple[int, int], ...]


def _reevaluate_job(args: tuple[Spec, list[list[tuple[Context, int]]], Partitions]) -> list[Exact]:
    """:func:`reevaluate_many` of some clusters, in a worker process (:meth:`Reevaluations.resolve`)."""
    return reevaluate_many(*args)


@dataclass
class Reevaluations:
    """The exact re-evaluations of one solve: each cluster once (bands and
    objectives often choose the same one); with a ``store`` (solver.reeval_cache)
    a cluster an earlier solve re-evaluated is read back instead, and the new ones
    are added to it.

    A cluster may also be :meth:`defer`-red: no band's choice depends on another band's
    re-evaluation (the MIPs see only the tables), so :func:`solve_frontier` asks for every
    chosen cluster first and :meth:`resolve`-s them all at once, in up to ``workers``
    processes (each cluster by the same :func:`reevaluate`, so with the same result)."""

    spec: Spec
    done: dict[ClusterKey, Exact] = field(default_factory=dict)
    parts: Partitions | None = None
    store: ReevalCache | None = None
    workers: int = 1
    pending: dict[ClusterKey, list[tuple[Context, int]]] = field(default_factory=dict)
    nodes: dict[tuple[int, float, int], NodeRate] = field(default_factory=dict)  # :meth:`node_rate`'s

    def node_rate(self, c: Context, keys: float) -> NodeRate:
        """One node of column ``c`` holding ``keys`` entries (at least one), exactly: its expected
        and perturbed throughput (ops/s) and its layout (levels L, cold levels Y). Memoized."""
        s = max(float(keys), 1.0)
        # of a cluster of such nodes: every scan reaches all of them (cost_models.network)
        key = (id(c), s, max(1, round(self.spec.workload.entries / s)))
        if key not in self.nodes:
            row = self.store.get_node(c, s) if self.store is not None else None
            if row is not None:
                self.nodes[key] = NodeRate(row[0], row[1], int(row[2]), int(row[3]))
                return self.nodes[key]
            if self.parts is None:
                self.parts = spec_partitions(self.spec)
            f = _evaluate_nodes(self.spec, {key: c}, self.parts)[key]
            lay = f.ne.layout
            # in operations of the workload, as the cluster throughputs it is compared with
            # (a replicated node serves A node operations per operation: cost_models.replication)
            x, xp = f.x / amplification(self.spec), f.xp / perturbed_amplification(self.spec)
            self.nodes[key] = rate = NodeRate(x, xp, int(lay.L[0]), int(lay.Y[0]))
            if self.store is not None:
                self.store.put_node(c, s, [rate.x, rate.xp, float(rate.levels), float(rate.cold_levels)])
        return self.nodes[key]

    @staticmethod
    def key(nodes: list[tuple[Context, int]]) -> ClusterKey:
        return tuple((id(c), k) for c, k in nodes)

    def __call__(self, nodes: list[tuple[Context, int]]) -> Exact:
        self.defer(nodes)
        self.resolve()
        return self.done[self.key(nodes)]

    def defer(self, nodes: list[tuple[Context, int]]) -> None:
        """Ask for a cluster's re-evaluation, made by the next :meth:`resolve` (a cluster already
        re-evaluated, or in the ``store``, is not evaluated again)."""
        key = self.key(nodes)
        if key in self.done or key in self.pending:
            return
        row = self.store.get(nodes) if self.store is not None else None
        if row is not None:
            self.done[key] = Exact.of_cached(row)
        else:
            self.pending[key] = nodes

    def resolve(self) -> None:
        """Re-evaluate every deferred cluster (in asking order; in parallel with ``workers`` > 1)."""
        if not self.pending:
            return
        if self.parts is None:
            self.parts = spec_partitions(self.spec)
        clusters = list(self.pending.values())
        workers = min(self.workers, len(clusters) // REEVALS_PER_WORKER)
        if workers > 1:
            compiled_evaluator(sum(len(c) for c in clusters))  # before the workers fork
            # one share of the clusters per worker, clusters of one node size together (their
            # nodes are evaluated in one batch)
            order = sorted(range(len(clusters)), key=lambda j: min(c.entries for c, _ in clusters[j]))
            shares = [[int(j) for j in part] for part in np.array_split(np.array(order), workers)]
            jobs = [(self.spec, [clusters[j] for j in share], self.parts) for share in shares]
            with ProcessPoolExecutor(max_workers=workers) as ex:
                done = {
                    j: e
                    for share, es in zip(shares, ex.map(_reevaluate_job, jobs), strict=True)
                    for j, e in zip(share, es, strict=True)
                }
            results = [done[j] for j in range(len(clusters))]
        else:
            results = reevaluate_many(self.spec, clusters, self.parts)
        for (key, nodes), res in zip(self.pending.items(), results, strict=True):
            self.done[key] = res
            if self.store is not None:
                self.store.put(nodes, res.cached())
        self.pending = {}

    def certify(self, pt: Certifiable) -> None:
        """Set a point's re-evaluation (and approximation error) from :attr:`done` once its
        cluster is resolved (:func:`_certify` with ``defer``)."""
        if pt.chosen is not None and pt.exact is None:
            pt.exact = self.done[self.key(pt.chosen.nodes)]
            pt.approx_error = approx_error_of(self.spec, pt.chosen, pt.exact)


def approx_error_of(spec: Spec, chosen: Chosen, ex: Exact) -> float:
    """The relative difference of the MIP's throughput and the exact one: the worse of the
    expected and (with robustness) the perturbed throughput's."""
    err = _rel(chosen.throughput_kops / X_SCALE, ex.throughput)
    if is_robust(spec):
        err = max(err, _rel(chosen.perturbed_kops / X_SCALE, ex.perturbed))
    return err
