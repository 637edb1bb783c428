"""engine.toml for one design: the contract of docs/engine-contract.md.

Algorithm 3 of the paper maps the layout to the algorithmic primitives; the
thread count is where Eq. 2's speed-up stops improving by more than 1%.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cost_models.cpu import DeviceModel
from cost_models.design import Design, DesignBatch, DesignEntry, model_constants, preset
from cost_models.evaluate import design_entry
from cost_models.layout import CLASS_COMPACTION, Layout, derive
from cost_models.phi import PhiTable
from specs.errors import InputError
from specs.vocab import MODELLED_WAL_SYNC, Compaction, DesignClass, DeviceKind, FilePicking, WalRecovery, WalSync

if TYPE_CHECKING:
    from solver.rundir import NodeStorage

#: Speed-up gain below which another thread is not worth it (Algorithm 3: "the
#: point where Equation 2 converges").
THREAD_GAIN = 0.01
#: Entries per SST file: the engine's unit of partial compaction (a 64 Ki-entry
#: file is 6.5 MiB at 100-byte entries); the model's ``file_entries`` (its index blocks are per file).
FILE_ENTRIES = int(model_constants()["file_entries"])
#: The buffer's put limit (in E_B) the model prices its flushes with (layout.flush_window).
BUFFER_PUT_LIMIT = float(model_constants()["buffer_put_limit"])
#: Burst of an emulated volume's token bucket, in seconds of its IOPS: enough to
#: absorb a sleeping thread's timer jitter (50-150 us on a busy VM) so the
#: bucket keeps the volume's rate; a gp3-like volume has no burst of its own.
DEVICE_BURST_SECONDS = 0.005
#: MiB/s written for a volume whose catalog entry gives no throughput limit: the
#: engine then never waits for bytes, as the cost model assumes (IOPS only).
UNLIMITED_MIB_S = 1e6


def threads_from_phi(cls: str, mix: dict[str, float], vcpu: int, table: PhiTable | None = None) -> int:
    """Smallest eta whose Amdahl speed-up is within THREAD_GAIN of all cores' (phi of the mix's CPU
    time, from ``table``; None: the shipped one)."""
    import numpy as np

    from cost_models.cpu import workload_phi
    from cost_models.phi import shipped_or
    from cost_models.symbolic import compiled

    phi = float(workload_phi(shipped_or(table), np.array([DesignClass(cls).code]), mix)[0])
    g = compiled()["amdahl"]
    full = float(g(phi, float(vcpu)))
    for eta in range(1, vcpu + 1):
        if float(g(phi, float(eta))) >= full * (1 - THREAD_GAIN):
            return eta
    return vcpu


#: Paper Algorithm 3 + Table 1, per layout class: the file a partial merge moves. The compaction
#: and the run it starts from are the model's (cost_models.layout.CLASS_COMPACTION: a B-tree
#: merges file by file, an LSM and a hybrid whole levels). A B-tree moves its densest file, as
#: the model prices it: picking the first file drains the low end of the key space and its
#: files then span sparse and dense ranges at once (7x the merge blocks, cosine-sim;
#: tests/test_partial_compaction.py). The hash log garbage-collects its oldest flushed segment.
FILE_PICKING: dict[DesignClass, FilePicking] = {
    DesignClass.LSM: FilePicking.DENSE_FP,
    DesignClass.BTREE: FilePicking.DENSE_FP,
    DesignClass.HYBRID: FilePicking.DENSE_FP,
    DesignClass.LSH: FilePicking.OLDEST_FLUSHED,
}


def algorithms(cls: str, levels: int) -> dict[str, Any]:
    """The algorithmic primitives of a layout class (engine.toml's ``[algorithms]``)."""
    from cost_models.design import model_constants

    if cls not in FILE_PICKING:
        raise InputError(f"unknown design class {cls!r}")
    c = DesignClass(cls)
    compaction, run_strategy = CLASS_COMPACTION[c]
    file_picking = FILE_PICKING[c]
    # levels compacted fully (read by the engine under "hybrid" compaction only)
    full = max(1, levels) if compaction == Compaction.FULL else 0
    # the hash log collects a segment once this share of it is live
    threshold = 1.0 - model_constants()["lsh_gc_dead_fraction"] if c == DesignClass.LSH else 1.0
    return {
        "compaction": compaction,
        "run_strategy": run_strategy,
        "file_picking": file_picking,
        "merge_threshold": threshold,
        "full_compaction_levels": full,
    }


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(float(v)) if math.isfinite(v) else "0.0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


def to_toml(sections: dict[str, dict[str, Any]], header: str = "") -> str:
    out = [f"# {line}" for line in header.splitlines()] + ([""] if header else [])
    for name, body in sections.items():
        out.append(f"[{name}]")
        out += [f"{k} = {_toml_value(v)}" for k, v in body.items()]
        out.append("")
    return "\n".join(out)


def engine_sections(
    d: DesignEntry,
    key_bytes: int,
    value_bytes: int,
    mix: dict[str, float],
    name: str,
    vcpu: int | None = None,
    wal_sync: WalSync = MODELLED_WAL_SYNC,
    scale: float = 1.0,
    device: DeviceModel | None = None,
) -> dict[str, dict]:
    """engine.toml sections for one design entry (solution.json's ``designs[i]``, a local design's).

    ``scale`` multiplies the memory budgets (buffer, cache) when the engine
    runs a smaller data set than the node the design was made for; ``device``
    is the node's volume (``[device]``; None: the local device).
    """
    entry = key_bytes + value_bytes
    cls = d.design_class
    levels, cold = d.L, d.Y
    bits = [float(b) for b in d.bloom_bits_per_level] or [0.0]
    threads = d.threads
    if vcpu is not None:
        threads = threads_from_phi(cls, mix, vcpu)
    lsh = d.lsh or cls == DesignClass.LSH
    T = float(d.T)
    if lsh:  # Table 1: T = N E / M_B, one level that is never compacted (K = Z = T - 1)
        T = max(2.0, math.ceil(d.entries_per_node * entry / max(d.buffer_bytes, 1.0)))
    return {
        "design": {"name": name, "class": cls},
        "layout": {
            "key_bytes": int(key_bytes),
            "value_bytes": int(value_bytes),
            "block_entries": max(1, d.block_bytes // entry),
            "size_ratio": T,
            "runs_per_hot_level": int(T - 1) if lsh else d.K,
            "runs_per_cold_level": int(T - 1) if lsh else d.Z,
            "buffer_bytes": max(entry * 64, int(d.buffer_bytes * scale)),
            "buffer_put_limit": BUFFER_PUT_LIMIT,
            "bloom_bits_per_key": [0.0] if lsh else [round(b, 4) for b in bits],
            "hot_levels": 1 if lsh else max(0, levels - cold),
            "block_cache_bytes": int(max(0.0, d.cache_bytes) * scale),
        },
        "algorithms": {
            "filter_granularity": "file",
            **algorithms(cls, levels),
            "file_entries": FILE_ENTRIES,
            "threads": int(threads),
        },
        "durability": {
            "wal_sync": wal_sync,
            "group_commit_interval_us": 1000,
            # the safe default, written out: only a torn tail is ever dropped at recovery
            "wal_recovery": WalRecovery.TOLERATE_CORRUPTED_TAIL,
        },
        # block codecs of the hot and cold levels (cost_models.compression)
        "compression": {"hot": d.codec_hot, "cold": d.codec_cold},
        # Rosetta-style range filter of the hot levels: bits per prefix at each dyadic height
        # (cost_models.range_filter.allocate; empty: none)
        "range_filter": {"bits_per_height": [] if lsh else [float(b) for b in d.range_bits_per_height]},
        "device": device_section(device or DeviceModel()),
    }


def device_section(dev: DeviceModel) -> dict[str, Any]:
    """engine.toml's ``[device]`` for a volume (the engine's device mode): its IOPS, its MiB/s and
    its read latency (``DeviceModel``; infinite rates: the local device, no section needed)."""
    if not math.isfinite(dev.iops):
        return {"kind": DeviceKind.LOCAL}
    mib = dev.bytes_per_s / 2**20 if math.isfinite(dev.bytes_per_s) else UNLIMITED_MIB_S
    return {
        "kind": DeviceKind.VOLUME,
        "iops": float(dev.iops),
        "throughput_mib_s": float(mib),
        "read_latency_us": float(dev.read_latency_s * 1e6),
        "burst_ios": max(1.0, round(dev.iops * DEVICE_BURST_SECONDS, 1)),
    }


def config_device(cfg: dict[str, Any]) -> DeviceModel:
    """The device an engine.toml's ``[device]`` section describes (absent or ``local``: this machine's)."""
    dev = cfg.get("device") or {}
    if dev.get("kind", DeviceKind.LOCAL) == DeviceKind.LOCAL:
        return DeviceModel()
    mib = float(dev.get("throughput_mib_s", UNLIMITED_MIB_S))
    return DeviceModel(
        iops=float(dev["iops"]),
        bytes_per_s=math.inf if mib >= UNLIMITED_MIB_S else mib * 2**20,
        read_latency_s=float(dev.get("read_latency_us", 0.0)) * 1e-6,
    )


def storage_device(storage: NodeStorage | None) -> DeviceModel:
    """The volume a solution chose for a node (solution.json's ``storage`` entry) as a device.

    The catalog gives a volume's IOPS; a throughput limit when the entry has one
    (``mibps``, MiB/s); the read latency is the model's (0: the volume's rate
    is reachable, paper Eq. 3).
    """
    if storage is None or not storage.iops:
        return DeviceModel()
    mib = storage.mibps
    return DeviceModel(iops=float(storage.iops), bytes_per_s=float(mib) * 2**20 if mib else math.inf)


@dataclass(kw_only=True)
class LocalDesign(DesignEntry):
    """A design entry for this machine (one local node) and the model's throughput for it."""

    predicted_throughput_ops: float = math.nan


def local_entry(d: Design, lay: Layout, i: int, threads: int, throughput: float = math.nan) -> LocalDesign:
    """Row ``i`` of a derived layout as one local node's design, as :func:`engine_sections` takes it."""
    return LocalDesign(**vars(design_entry(d, lay, i, threads=threads)), predicted_throughput_ops=throughput)


def preset_design_entry(name: str, n_keys: float, key_bytes: int, value_bytes: int, memory_bytes: float) -> LocalDesign:
    """A preset as a design entry (layout derived by the model), for one local node."""
    d: Design = preset(name)
    # rendered for gets (engine_sections' mix below); the presets are leveled (Z = 1), so a mix's
    # overwrites would not change their depth (layout.last_level_room)
    lay = derive(DesignBatch.of([d]), n_keys, key_bytes, value_bytes, memory_bytes, overwrites=False)
    return local_entry(d, lay, 0, threads=1)
