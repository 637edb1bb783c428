"""The discretized search space: engine-design ladders and shard sizes.

Knob ladders (paper Sec. 5, "Storage Engine Design Space"): T from a ladder
within the spec's ``design.size_ratio``; K in {1, 2, 4, T-1} and Z in {1, T-1}
(leveling, light/heavy tiering, Dostoevsky's lazy leveling); Bloom bits per key
over the hot levels from a ladder (Monkey allocation across levels); the
buffer M_B by memory hopping along a geometric ladder whose ratio is
1 + 10 * epsilon (epsilon = 0.1, the paper's default, gives x2 steps: 16 MiB,
32 MiB, ...) up to (1 - epsilon) of the VM's memory; block sizes from the spec;
and the log-structured hash-table family (buffer only). Threads eta are set to
the VM's vCPUs: the Amdahl speed-up is increasing in eta for every phi >= 0,
so fewer threads never help in the model.

Shard sizes: the tables evaluate a node holding N / k entries for k in :data:`SHARD_DIVISORS`
(every homogeneous cluster of up to 6 nodes and a ladder to 100), then k grows
by :data:`SHARD_STEP` up to the cluster cap; a replicated plan's k counts replica groups
(:func:`node_counts`: RF x k nodes). These are breakpoints, not node counts: a column
tabled at N / k serves any count from k up (its nodes then hold fewer keys, at least its rate:
solver.bottleneck), and solver.grid checks the answer's own nodes at every count exactly
(docs/solver.md).

Cluster cap: the spec's ``design.max_cluster_size`` when it sets one; else
:func:`cluster_cap` derives it from the data and the budget: as many of the
cheapest VM as the top of the budget range buys (no more nodes can ever be
afforded), at least :data:`MIN_DEFAULT_CLUSTER_CAP`, and no more than one node
per entry.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from cost_models import compression, range_filter
from cost_models.design import Design, DesignBatch
from cost_models.network import SCANS
from cost_models.pricing.catalog import Catalog
from cost_models.replication import replica_nodes
from cost_models.robust import perturbed_workload
from specs.errors import InputError
from specs.schema import Spec
from specs.vocab import WorkloadKind

#: The buffer ladder's top as a multiple of the shard's data where no workload overwrites keys
#: (Grid.buffers ``overwrites`` False): a buffer of new keys flushes at E_B distinct keys, so one past
#: twice the data holds it all and buys nothing more. Under overwrites there is no such top (stop 63):
#: the engine's put limit flushes a buffer that holds every key every buffer_put_limit x E_B puts
#: (cost_models.layout.flush_window), so a larger one flushes less. ycsb_a's answer took a 256 GiB
#: buffer, 5x its shard (5.94 M ops/s at stop 63); with the top at 2x it took a tiered T 64 design at 3.75 M, at
#: 4x 5.06 M, at 16x the fig. 5 test's RocksDB preset (a 1 GB buffer on ~60 MB shards) was outside
#: the grid. Its tables took 5.9 s at 4x, 7.0 at 16x, 10.8 without a top (one run each).
MAX_BUFFER_DATA_RATIO = 2.0

T_LADDER = (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64)
BITS_LADDER = (0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 14.0)
MIN_BUFFER_BYTES = 16 * 2**20
SHARD_DIVISORS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 24, 30, 40, 50, 60, 80, 100)
#: Most designs one VM's table may enumerate: 8x the default grid (24,864 at 864 GiB), about
#: three minutes of tables on 2 cores; the grid grows with design.memory_step, size_ratio and
#: block_bytes, and this bounds their product.
MAX_DESIGNS_PER_VM = 200_000
#: Growth of the node count k between shard sizes beyond the last divisor. A column serves
#: every count from its k up at its tabled rate (a lower bound: its nodes hold fewer keys); the
#: exact re-evaluation measures what that costs (approximation error) and solver.grid checks the
#: answer's nodes at every count (grid gap).
SHARD_STEP = 1.25
#: The least default cluster cap (issue 13: clusters of any size).
MIN_DEFAULT_CLUSTER_CAP = 1000


@dataclass(frozen=True)
class Grid:
    """The design ladders for one spec."""

    T: tuple[int, ...]
    bits: tuple[float, ...]
    blocks: tuple[int, ...]
    buffer_ratio: float
    epsilon: float
    max_runs: int
    classes: tuple[str, ...]
    #: range-filter bits per key over the hot levels (cost_models.range_filter.BITS_LADDER when
    #: the workload has empty ranges; else none: a range filter only costs memory)
    range_bits: tuple[float, ...] = (0.0,)
    #: (hot, cold) codec pairs (cost_models.compression.searched)
    codecs: tuple[tuple[str, str], ...] = (("none", "none"),)

    def K(self, T: int) -> list[int]:
        return sorted({k for k in (1, 2, 4, T - 1) if 1 <= k <= min(T - 1, self.max_runs)} or {1})

    def Z(self, T: int) -> list[int]:
        return sorted({z for z in (1, T - 1) if 1 <= z <= min(T - 1, self.max_runs)} or {1})

    def buffers(self, memory_bytes: float, data_bytes: float = math.inf, overwrites: bool = True) -> list[float]:
        """The buffer ladder of a node with ``memory_bytes`` holding ``data_bytes`` of data.

        It starts at 16 MiB, or lower on a small node (epsilon of its memory) or for a small
        shard (the shard's data: one buffer then holds it all), and stops at (1 - epsilon) of
        the memory, or (``overwrites`` False: no workload overwrites keys) at
        :data:`MAX_BUFFER_DATA_RATIO` times the data.
        """
        top = self.buffer_top(memory_bytes, data_bytes, overwrites)
        out, b = [], float(min(MIN_BUFFER_BYTES, self.epsilon * memory_bytes, data_bytes))
        while b <= top:
            out.append(b)
            b *= self.buffer_ratio
        return out

    def buffer_top(self, memory_bytes: float, data_bytes: float, overwrites: bool) -> float:
        """The largest buffer :meth:`buffers` offers: (1 - epsilon) of the memory, and without
        ``overwrites`` at most :data:`MAX_BUFFER_DATA_RATIO` times the data."""
        top = (1 - self.epsilon) * memory_bytes
        return top if overwrites else min(top, MAX_BUFFER_DATA_RATIO * data_bytes)

    def layouts(self, max_buffer_memory: float, data_bytes: float = math.inf, overwrites: bool = True) -> DesignBatch:
        """Every (T, K, Z, block, buffer) with bits = 0, plus the LSH family: :func:`_one_buffer`'s
        layouts at each buffer of :meth:`buffers` (smallest first)."""
        bufs = self.buffers(max_buffer_memory, data_bytes, overwrites)
        one = _one_buffer(self)
        if not bufs or one.size == 0:
            return DesignBatch.of([])
        batch = one.take(np.tile(np.arange(one.size), len(bufs)))
        batch.buffer_bytes = np.repeat(np.array(bufs, dtype=float), one.size)
        return batch

    def node_designs(self, memory_bytes: float, data_bytes: float, overwrites: bool = True) -> DesignBatch:
        """Every design of the grid for one node: each layout with a buffer that fits
        (:meth:`buffers`: at most (1 - epsilon) of the memory, and without ``overwrites`` no more
        than twice the data) and every Bloom-filter budget (none for the hash log)."""
        lays = self.layouts(memory_bytes, data_bytes, overwrites)
        bits = np.array(self.bits)
        per = np.where(lays.lsh, 1, bits.size)
        batch = lays.take(np.repeat(np.arange(lays.size), per))
        batch.bloom_bits = np.concatenate([np.zeros(1) if lsh else bits for lsh in lays.lsh]) if lays.size else bits[:0]
        return batch

    def size(self, memory_bytes: float, data_bytes: float = math.inf) -> int:
        """Designs per VM of this memory (for reports, and the bound :data:`MAX_DESIGNS_PER_VM`)."""
        per_buffer = sum(len(self.K(T)) * len(self.Z(T)) for T in self.T) * len(self.bits) * len(self.range_bits) + 1
        # codec pairs are not counted: they rescore a design (tables.with_codecs), they need no I/O model
        return per_buffer * len(self.buffers(memory_bytes, data_bytes)) * len(self.blocks)

    def check_size(self, memory_bytes: float) -> None:
        """Refuse a design space too large to search (before any table is built)."""
        n = self.size(memory_bytes)
        if n > MAX_DESIGNS_PER_VM:
            raise InputError(
                f"design: {n:,} designs per VM of {memory_bytes / 2**30:,.0f} GiB, at most {MAX_DESIGNS_PER_VM:,} "
                f"({len(self.buffers(memory_bytes))} buffer sizes at memory_step {self.epsilon:g}, "
                f"{len(self.blocks)} block sizes, size ratios {self.T[0]}..{self.T[-1]}); "
                "raise design.memory_step or narrow design.size_ratio or design.block_bytes"
            )


@lru_cache(maxsize=16)
def _one_buffer(grid: Grid) -> DesignBatch:
    """The layouts of one buffer (its size left at the default; :meth:`Grid.layouts` sets it):
    per block size every (T, K, Z) with bits = 0, then the hash log. Cached: every shard size's
    layouts repeat them (callers take copies)."""
    ds: list[Design] = []
    lsm_like = any(c in grid.classes for c in ("lsm", "btree", "hybrid"))
    for blk in grid.blocks:
        if lsm_like:
            for T in grid.T:
                for K in grid.K(T):
                    for Z in grid.Z(T):
                        ds.append(Design(T=T, K=K, Z=Z, bloom_bits=0.0, block_bytes=blk))
        if "lsh" in grid.classes:
            ds.append(Design(bloom_bits=0.0, block_bytes=blk, lsh=True))
    return DesignBatch.of(ds)


def grid_for(spec: Spec) -> Grid:
    lo, hi = spec.design.size_ratio
    ts = tuple(t for t in T_LADDER if lo <= t <= hi) or tuple(sorted({lo, hi}))
    bits: tuple[float, ...] = BITS_LADDER
    if set(spec.design.classes) <= {"btree", "lsh"}:
        bits = (0.0,)
    elif "btree" not in spec.design.classes and "lsh" not in spec.design.classes:
        bits = tuple(b for b in BITS_LADDER if b > 0)
    eps = spec.design.memory_step
    return Grid(
        T=ts,
        bits=bits,
        blocks=spec.design.block_bytes,
        buffer_ratio=1.0 + 10.0 * eps,
        epsilon=eps,
        max_runs=spec.design.max_runs,
        classes=spec.design.classes,
        range_bits=range_filter.BITS_LADDER if spec.workload.operations.get("empty_range", 0.0) > 0 else (0.0,),
        codecs=compression.searched(spec.workload.compressibility),
    )


def ladder() -> Iterator[int]:
    """The breakpoints without a cap: :data:`SHARD_DIVISORS`, then steps of :data:`SHARD_STEP`."""
    yield from SHARD_DIVISORS
    k = float(SHARD_DIVISORS[-1])
    while True:
        k *= SHARD_STEP
        yield round(k)


def shard_counts(max_cluster: int) -> list[int]:
    """Node counts k whose shard N/k the tables evaluate (ascending, ending at the cap)."""
    ks = list(itertools.takewhile(lambda k: k < max_cluster, ladder()))
    ks.append(max_cluster)
    return sorted(set(ks))


def node_counts(spec: Spec, max_cluster: int) -> list[int]:
    """The node counts a spec's tables evaluate, ``spec`` a node view: RF x each count of replica
    groups on the ladder (:func:`shard_counts` of the groups the cap holds), so a group count's shard
    is one key share, N / g, whatever the replication factor, and the plans' node views evaluate
    the same shard sizes (solver.tables.build.plan_groups shares them). Stop 60 rounded each node
    count of the ladder up to whole groups, which made a third plan's sizes its own (25 of ycsb_a's
    59 shard jobs)."""
    rf = replica_nodes(spec)
    groups = min(max_cluster, int(spec.workload.entries)) // rf
    return [rf * g for g in shard_counts(groups)] if groups >= 1 else []


def fanout_nodes(spec: Spec, entries: float) -> int:
    """The nodes a cluster's scans are tabled to reach for a column whose nodes hold ``entries``
    keys (``spec`` a node view: its entries count every replica): the replica groups below the
    next breakpoint after the column's own group count g = N / (RF x entries), times RF (one group
    at least). A column is tabled at N / k keys and credited for clusters of up to this count
    (:func:`reach`): its nodes then hold no more keys, and their scans reach no more shards, than
    tabled. Every count m of whole groups keeps a column: the last breakpoint g <= m / RF reaches
    m, as m / RF is below the next one (the count at the next breakpoint is that column's own,
    priced exactly). Independent of the cluster cap, so the table cache's rows hold."""
    rf = replica_nodes(spec)
    g = max(1, round(spec.workload.entries / max(float(entries), 1.0) / rf))
    after = next(n for n in ladder() if n > g)
    return rf * (after - 1)


def has_scans(spec: Spec, workloads: WorkloadKind) -> bool:
    """Whether a node of ``spec`` serves scans on the ``workloads``: the expected one, or the
    perturbed one a noise radius prices served (a KL radius prices its worst case on the engine,
    one node's, without a fan-out), or either (``BOTH``)."""
    expected = any(spec.workload.operations.get(op, 0.0) > 0 for op in SCANS)
    perturbed = (
        spec.noise > 0
        and not spec.kl_radius
        and any(perturbed_workload(spec).operations.get(op, 0.0) > 0 for op in SCANS)
    )
    if workloads == WorkloadKind.EXPECTED:
        return expected
    if workloads == WorkloadKind.PERTURBED:
        return perturbed
    return expected or perturbed


def reach(spec: Spec, entries: float, workloads: WorkloadKind = WorkloadKind.BOTH) -> float:
    """The most nodes of a cluster in which a column's nodes (holding ``entries`` keys) serve at
    least their tabled rate on the ``workloads`` a solve values: its :func:`fanout_nodes` when
    they scan (a larger cluster sends each scan to more shards), else any count (inf)."""
    return float(fanout_nodes(spec, entries)) if has_scans(spec, workloads) else math.inf


def reaches(spec: Spec, entries: Iterable[float], workloads: WorkloadKind, unit: int = 1) -> list[float]:
    """:func:`reach` of each of ``entries`` in units of ``unit`` nodes (a table's columns): whether
    the workloads scan is asked once, each distinct count's fan-out once."""
    if not has_scans(spec, workloads):
        return [math.inf for _ in entries]
    fan: dict[float, float] = {}
    out = []
    for e in entries:
        if e not in fan:
            fan[e] = fanout_nodes(spec, e) / unit
        out.append(fan[e])
    return out


def cluster_cap(spec: Spec, catalog: Catalog, providers: tuple[str, ...] | list[str] | None = None) -> int:
    """The most nodes a cluster may have: the spec's ``max_cluster_size``, or
    derived from the budget (how many of the cheapest VM the top of the budget
    range buys) and the data (one entry per node at most), at least
    :data:`MIN_DEFAULT_CLUSTER_CAP`."""
    if spec.design.max_cluster_size is not None:
        return int(spec.design.max_cluster_size)
    provs = providers or spec.providers
    prices = [vm.usd_per_month for p in provs for vm in catalog.vms.get(p, [])]
    affordable = int(spec.budget_range[1] // min(prices)) if prices else MIN_DEFAULT_CLUSTER_CAP
    return int(min(spec.workload.entries, max(MIN_DEFAULT_CLUSTER_CAP, affordable)))
