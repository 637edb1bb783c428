"""Put the models together: a design on a VM cluster -> I/O, throughput, bill.

``evaluate_designs`` is the vectorized inner loop (many designs, one node);
``evaluate_config`` is what ``cosine evaluate`` prints for one configuration,
and what the solver's exact re-evaluation calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_models.bill import bill_terms
from cost_models.cloud import (
    GIB,
    StorageChoice,
    compute_cost,
    is_local,
    sla_cost,
    storage_choices,
    usable_bytes,
)
from cost_models.compression import CodecEffect, effect, op_blocks
from cost_models.cpu import DeviceModel, NodeShape, node_throughput
from cost_models.design import Design, DesignBatch, DesignEntry
from cost_models.distributions import Partitions, partitions
from cost_models.io_model import IOCost, Structure, Windows, exact_windows, io_costs, overwrites_keys
from cost_models.layout import Layout, PutStream, derive, uniform_puts
from cost_models.phi import PhiTable, shipped_or
from cost_models.pricing.catalog import Catalog, VmType, load_catalog
from cost_models.range_filter import allocate
from cost_models.replication import backup_usd_per_node, distinct_entries
from cost_models.serving import Serving, served, served_throughput
from cost_models.windows import ExactWindow
from cost_models.worst_case import io_costs as worst_case_io
from specs.schema import DEFAULT_EMPTY_RANGE_WIDTH, Spec, Workload
from specs.vocab import CostModel, DesignClass


@dataclass
class NodeEval:
    """Model outputs for a batch of designs on one node (arrays over designs)."""

    layout: Layout
    io: IOCost
    io_total: np.ndarray
    phi: PhiTable  # the CPU model's table the throughputs are priced with
    codec: CodecEffect | None = None  # block compression (None: every level stores blocks as built)

    def throughput(
        self,
        workload: Workload,
        iops: float | np.ndarray,
        threads: float,
        *,
        cores: float | None = None,
        device: DeviceModel | None = None,
        serving: Serving | None = None,
    ) -> np.ndarray:
        """Node throughput of each design: ``threads`` clients on ``cores`` cores (default: one each);
        ``device`` adds a volume's throughput and read latency to its ``iops``. With ``serving`` the
        node is served (cost_models.serving: the server's CPU per request, the scans' fan-out), its
        throughput in operations of the cluster over its shards; without, the engine in process."""
        dev = device or DeviceModel()
        extra = 0.0 if self.codec is None else self.codec.cpu_seconds
        if serving is not None:
            sm = served(workload.operations, workload.key_bytes, workload.value_bytes, workload.scan_length, serving)
            xs = served_throughput(
                self.phi,
                self.io,
                NodeShape.of(self.layout),
                sm,
                workload.scan_length,
                iops,
                threads,
                cores=cores,
                read_latency_s=dev.read_latency_s,
                bytes_per_s=dev.bytes_per_s,
                extra_cpu=extra,
            )
            return np.where(self.layout.feasible, xs, 0.0)
        x = node_throughput(
            self.phi,
            self.io,
            iops,
            NodeShape.of(self.layout),
            workload.operations,
            threads,
            workload.scan_length,
            cores=cores,
            read_latency_s=dev.read_latency_s,
            bytes_per_s=dev.bytes_per_s,
            extra_cpu=extra,
        )
        return np.where(self.layout.feasible, x, 0.0)

    def disk_gib(self) -> np.ndarray:
        factor = 1.0 if self.codec is None else self.codec.size_factor
        return self.layout.disk_entries * self.layout.entry_bytes / GIB * factor

    def disk_block(self, batch: DesignBatch) -> np.ndarray:
        """Bytes one block I/O moves: the block, times the codec's size factor."""
        return batch.block_bytes if self.codec is None else self.codec.disk_block_bytes


def design_entry(
    d: Design, lay: Layout, i: int, empty_range_width: int = DEFAULT_EMPTY_RANGE_WIDTH, threads: int = 1
) -> DesignEntry:
    """Row ``i`` of a derived layout as a :class:`DesignEntry` run by ``threads`` workers. The range
    filter's bits per height are allocated for empty ranges of ``empty_range_width`` key values."""
    return DesignEntry(
        entries_per_node=float(lay.n_keys),
        design_class=DesignClass(lay.class_name(i)),
        T=d.T,
        K=d.K,
        Z=d.Z,
        L=int(lay.L[i]),
        Y=int(lay.Y[i]),
        lsh=d.lsh,
        block_bytes=d.block_bytes,
        buffer_bytes=d.buffer_bytes,
        bloom_bits_per_key=d.bloom_bits,
        bloom_bits_per_level=[round(float(b), 3) for b, e in zip(lay.bits[i], lay.exists[i], strict=True) if e],
        bloom_allocation=d.bloom_allocation,
        filter_bytes=float(lay.mem_filter[i]),
        fence_bytes=float(lay.mem_fence[i]),
        cache_bytes=float(lay.mem_cache[i]),
        range_bits_per_key=d.range_bits,
        range_bits_per_height=list(allocate(float(d.range_bits), int(empty_range_width))),
        range_filter_bytes=float(lay.mem_range[i]),
        codec_hot=d.codec_hot,
        codec_cold=d.codec_cold,
        threads=threads,
    )


def shape_overwrites(spec: Spec) -> bool:
    """Whether a spec's trees are shaped by overwrites (:func:`cost_models.layout.level_shape`):
    its expected workload sets the engine's steady shape; a perturbed workload (robustness) is
    priced on that shape, as the tables price both workloads on one layout."""
    return overwrites_keys(spec.workload.operations)


def own_puts(parts: Partitions, workload: Workload, n_keys: float) -> ExactWindow:
    """The exact put stream of ``workload`` on a node of ``n_keys`` keys (cost_models.layout.PutStream)."""
    return exact_windows(parts, workload.operations, n_keys)[0]


def tree_puts(
    model: CostModel, parts: Partitions, workload: Workload, n_keys: float, windows: Windows | None = None
) -> PutStream:
    """The put stream that shapes ``workload``'s trees on a node of ``n_keys`` keys under ``model``
    (cost_models.layout.run_fill): its own (the put window of ``windows`` when given, else the
    exact one); under the paper's worst-case model, which sees no key distribution, uniform updates
    (the fewest keys shadowed: the largest runs, the deepest tree)."""
    if model == CostModel.WORST_CASE:
        return uniform_puts(n_keys)
    return windows[0] if windows is not None else own_puts(parts, workload, n_keys)


def workload_partitions(workload: Workload, n_keys: float | None = None) -> Partitions:
    """Key partitions of the whole data set over its ``n_keys`` distinct keys (default: the
    workload's entries); a node's shard keeps the same fractions."""
    keys = workload.entries if n_keys is None else n_keys
    return partitions(workload.get_distribution, workload.put_distribution, keys)


def spec_partitions(spec: Spec) -> Partitions:
    """Key partitions of a spec's data over its distinct keys (cost_models.replication.distinct_entries):
    a replicated node view's RF copies of a key are one key of the distributions, so its partitions
    are those of the spec as written (at the end of its growth horizon)."""
    return workload_partitions(spec.workload, distinct_entries(spec))


def evaluate_designs(
    batch: DesignBatch,
    workload: Workload,
    n_keys: float,
    memory_bytes: float | np.ndarray,
    parts: Partitions | None = None,
    windows: Windows | None = None,
    model: CostModel = CostModel.DISTRIBUTION_AWARE,
    overwrites: bool | None = None,
    shape_puts: PutStream | None = None,
    phi: PhiTable | None = None,
) -> NodeEval:
    """Evaluate every design of ``batch`` on a node holding ``n_keys`` entries and
    ``memory_bytes`` of memory (or each design on its own memory size: an array).

    ``windows`` switches to the interpolated window tables (batch search); the
    default is the exact model (:func:`cost_models.io_model.exact_windows` to share its
    windows with other evaluations). ``model`` picks the I/O model. ``overwrites``: whether the
    tree's shape is the one overwrites keep it in (:func:`cost_models.layout.level_shape`);
    None: whether ``workload`` overwrites. ``shape_puts``: the put stream whose batches shape the
    tree's runs (cost_models.layout.run_fill); None: ``workload``'s own (the put window of
    ``windows`` when given, else the exact one). A perturbed workload is priced on the expected
    workload's shape (:func:`shape_overwrites`, and the expected workload's stream). ``phi``: the
    CPU model's table (None: the shipped one).
    """
    parts = parts or workload_partitions(workload)
    ow = overwrites_keys(workload.operations) if overwrites is None else overwrites
    if shape_puts is None:
        shape_puts = tree_puts(model, parts, workload, n_keys, windows)
    lay = derive(batch, n_keys, workload.key_bytes, workload.value_bytes, memory_bytes, overwrites=ow, puts=shape_puts)
    io = node_io(model, lay, parts, workload, windows)
    return NodeEval(lay, io, io.total(workload.operations), shipped_or(phi), codec_effect(batch, lay, io, workload))


def codec_effect(batch: DesignBatch, lay: Layout, io: IOCost, workload: Workload) -> CodecEffect | None:
    """What the designs' codecs do (cost_models.compression); None when none compresses."""
    if all(h == "none" for h in batch.codec_hot) and all(c == "none" for c in batch.codec_cold):
        return None
    share = np.where(lay.hot, lay.occ, 0.0).sum(axis=1) / np.maximum(lay.occ.sum(axis=1), 1e-300)
    reads, merges = op_blocks(io.per_op(), workload.operations)
    return effect(
        list(batch.codec_hot),
        list(batch.codec_cold),
        share,
        batch.block_bytes,
        reads,
        merges,
        workload.compressibility,
    )


def node_io(
    model: CostModel,
    lay: Layout,
    parts: Partitions,
    workload: Workload,
    windows: Windows | None = None,
    st: Structure | None = None,
) -> IOCost:
    """Per-operation I/O of every design of ``lay`` under ``model`` (the
    distribution-aware model uses ``windows`` and the designs' structure ``st``
    when given, cost_models.io_model.io_costs)."""
    if model == CostModel.WORST_CASE:
        return worst_case_io(lay, parts, workload.operations, workload.scan_length, workload.empty_range_width)
    return io_costs(lay, parts, workload.operations, workload.scan_length, windows, workload.empty_range_width, st)


@dataclass
class ConfigEval:
    """One configuration (design x VM cluster x storage) evaluated by the exact model."""

    provider: str
    vm: str
    count: int
    design: Design
    design_class: str
    levels: int
    cold_levels: int
    bloom_bits_per_level: list[float]
    buffer_bytes: float
    filter_bytes: float
    fence_bytes: float
    cache_bytes: float
    entries_per_node: float
    io_per_op: dict[str, float]
    io_total: float
    node_throughput: float
    throughput_ops: float
    latency_s: float
    storage: StorageChoice | None
    monthly_cost: dict[str, float]
    feasible: bool
    reason: str = ""
    threads: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        st = None
        if self.storage is not None:
            st = {
                "product": self.storage.product,
                "disks": self.storage.disks,
                "gib": round(self.storage.gib, 3),
                "iops": self.storage.iops,
                "mibps": self.storage.mibps if np.isfinite(self.storage.mibps) else None,
                "effective_iops": float(
                    self.storage.effective_iops(self.extra.get("disk_block_bytes", self.design.block_bytes))
                ),
                "usd_month": round(self.storage.usd_month, 4),
                "label": self.storage.label,
            }
        return {
            "provider": self.provider,
            "vm": self.vm,
            "count": self.count,
            "design": {
                "name": self.design.name,
                "class": self.design_class,
                "T": self.design.T,
                "K": self.design.K,
                "Z": self.design.Z,
                "L": self.levels,
                "Y": self.cold_levels,
                "block_bytes": self.design.block_bytes,
                "buffer_bytes": self.buffer_bytes,
                "bloom_bits_per_key": self.design.bloom_bits,
                "bloom_bits_per_level": [round(b, 3) for b in self.bloom_bits_per_level],
                "bloom_allocation": self.design.bloom_allocation,
                "filter_bytes": self.filter_bytes,
                "fence_bytes": self.fence_bytes,
                "cache_bytes": self.cache_bytes,
                "threads": self.threads,
                "lsh": self.design.lsh,
                "range_bits_per_key": self.design.range_bits,
                "range_filter_bytes": float(self.extra.get("range_filter_bytes", 0.0)),
                "codec_hot": self.design.codec_hot,
                "codec_cold": self.design.codec_cold,
            },
            "entries_per_node": self.entries_per_node,
            "io_per_op": {k: round(v, 6) for k, v in self.io_per_op.items()},
            "io_total": self.io_total,
            "node_throughput_ops": self.node_throughput,
            "throughput_ops": self.throughput_ops,
            "latency_s": self.latency_s,
            "storage": st,
            "monthly_cost": {k: round(v, 2) for k, v in self.monthly_cost.items()},
            "feasible": self.feasible,
            "reason": self.reason,
        }


def evaluate_config(
    spec: Spec,
    design: Design,
    vm: VmType,
    count: int,
    storage: StorageChoice | None = None,
    catalog: Catalog | None = None,
    entries_per_node: float | None = None,
    phi: PhiTable | None = None,
) -> ConfigEval:
    """Evaluate ``count`` VMs of type ``vm`` each running ``design`` on an equal shard (``phi``: the
    CPU model's table, None: the shipped one)."""
    catalog = catalog or load_catalog(spec.pricing)
    wl = spec.workload
    n_node = entries_per_node if entries_per_node is not None else wl.entries / count
    memory = usable_bytes(vm.memory_gib, spec.design.memory_headroom)
    threads = vm.vcpu if design.threads is None else design.threads
    batch = DesignBatch.of([design])
    ne = evaluate_designs(batch, wl, n_node, memory, spec_partitions(spec), model=spec.cost_model, phi=phi)
    lay = ne.layout
    need_gib = float(ne.disk_gib()[0])
    disk_block = float(ne.disk_block(batch)[0])
    reasons = []
    if storage is None:
        options = storage_choices(catalog, vm, need_gib, (design.block_bytes,))
        if not options:
            reasons.append(f"no {vm.provider} storage holds {need_gib:,.0f} GiB per node")
        else:
            # The volume that maximizes this node's throughput per dollar of the node.
            best = max(
                options,
                key=lambda s: (
                    float(ne.throughput(wl, s.effective_iops(disk_block), threads)[0])
                    / (vm.usd_per_month + s.usd_month)
                ),
            )
            storage = best
    if storage is not None and storage.gib < need_gib * (1 - 1e-9):
        reasons.append(
            f"the volume ({storage.label}) holds {storage.gib:,.1f} GiB; the design needs {need_gib:,.1f} GiB per node "
            "(its levels full and its largest merge's output beside them)"
        )
        storage_fits = False
    else:
        storage_fits = storage is not None
    iops = float(storage.effective_iops(disk_block)) if storage else 0.0
    x_node = float(ne.throughput(wl, iops, threads)[0]) if storage else 0.0
    feasible = bool(lay.feasible[0]) and storage_fits
    if not lay.feasible[0]:
        used = design.buffer_bytes + lay.mem_filter[0] + lay.mem_fence[0] + lay.mem_range[0]
        reasons.append(
            f"needs {used / GIB:,.1f} GiB of memory per node (buffer + filters + range filters + "
            f"{'hash index' if design.lsh else 'fence pointers'}), the VM has {memory / GIB:,.1f} GiB"
        )
    terms = bill_terms(spec, catalog, vm.provider)
    if terms.unavailable:
        feasible = False
        reasons.append(f"{vm.provider} cannot price SLA {', '.join(terms.unavailable)} (catalog GAP)")
    if count < terms.min_nodes:
        feasible = False
        reasons.append(f"the availability SLA needs at least {terms.min_nodes} VMs")
    compute = compute_cost(vm.usd_per_hour, count)
    stor = (storage.usd_month if storage else 0.0) * count
    local = storage is not None and is_local(catalog, storage)
    backup = backup_usd_per_node(spec, catalog, vm.provider, local, n_node) * count if storage else 0.0
    sla = sla_cost(terms, count, compute + stor + backup)
    tp = x_node * count if feasible else 0.0
    return ConfigEval(
        provider=vm.provider,
        vm=vm.name,
        count=count,
        design=design,
        design_class=lay.class_name(0),
        levels=int(lay.L[0]),
        cold_levels=int(lay.Y[0]),
        bloom_bits_per_level=[float(b) for b, e in zip(lay.bits[0], lay.exists[0], strict=True) if e],
        buffer_bytes=float(design.buffer_bytes),
        filter_bytes=float(lay.mem_filter[0]),
        fence_bytes=float(lay.mem_fence[0]),
        cache_bytes=float(lay.mem_cache[0]),
        entries_per_node=n_node,
        io_per_op={op: float(v[0]) for op, v in ne.io.per_op().items()},
        io_total=float(ne.io_total[0]),
        node_throughput=x_node,
        throughput_ops=tp,
        latency_s=(1.0 / tp) if tp > 0 else float("inf"),
        storage=storage,
        monthly_cost={
            "compute": compute,
            "storage": stor,
            "backup": backup,
            "sla": sla,
            "total": compute + stor + backup + sla,
        },
        feasible=feasible,
        reason="; ".join(reasons),
        threads=threads,
        extra={"disk_block_bytes": disk_block, "range_filter_bytes": float(lay.mem_range[0])},
    )


def evaluate_ref(spec: Spec, design: str, vm: str, model: CostModel | None = None) -> dict[str, Any]:
    """`cosine evaluate`: a design (preset name or knobs) on ``PROVIDER:TYPE[xCOUNT]``, as a JSON-ready
    dict; ``model`` overrides the spec's cost model."""
    from dataclasses import replace

    from cost_models.design import parse_design
    from cost_models.pricing.catalog import parse_vm_ref

    provider, name, count = parse_vm_ref(vm)
    d = parse_design(design)
    if model is not None:
        spec = replace(spec, cost_model=model)
    cat = load_catalog(spec.pricing)
    out = evaluate_config(spec, d, cat.vm(provider, name), count, catalog=cat).as_dict()
    out["spec"] = spec.name
    out["pricing"] = spec.pricing
    out["cost_model"] = spec.cost_model
    return out


__all__ = [
    "ConfigEval",
    "NodeEval",
    "design_entry",
    "evaluate_config",
    "evaluate_ref",
    "evaluate_designs",
    "node_io",
    "workload_partitions",
]
