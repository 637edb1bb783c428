"""The scaled set-up every engine measurement shares: record shape, memory
budget, the grid of designs (the paper's baselines, Cosine's optimum per YCSB
workload, and hybrids varying one primitive at a time, Sec. 7.1) and the
workloads (YCSB A-F, uniform and zipfian get/put, single operations).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from cost_models.design import hand_entry
from cost_models.range_filter import allocate
from render.config import engine_sections, preset_design_entry
from specs.schema import DEFAULT_EMPTY_RANGE_WIDTH, SPEC_DIR, Spec, load_spec, parse_spec
from specs.vocab import OPERATIONS, PRESETS, Compaction, DesignClass, FilePicking, Operation, RunStrategy, WalSync

#: Record shape of every measurement: YCSB-like 16-byte keys and 100-byte values.
KEY, VALUE = 16, 100
#: The paper's baselines get a 1 GB buffer for 100 GB of data (Sec. 7): about 1%
#: here — 1.3%, because at exactly 1% with T = 10 the data fills level 2 to its
#: capacity and (before the engine's last level took overwrites, docs/engine-contract.md)
#: the first writes pushed the whole level down; kept so earlier figures stay comparable.
PRESET_BUFFER_SHARE = 0.013
#: Memory for filters, fences and cache: a quarter of the data, so it does not fit.
MEMORY_SHARE = 0.25


def mix_spec(
    mix: dict[str, float], get: str = "{kind: uniform}", put: str = "{kind: uniform}", scan: int = 20, name: str = "w"
) -> Spec:
    ops = ", ".join(f"{k}: {v}" for k, v in mix.items())
    return parse_spec(
        f"name: {name}\nworkload: {{entries: 1000000, key_bytes: {KEY}, value_bytes: {VALUE}, "
        f"operations: {{{ops}}}, scan_length: {scan}, distribution: {{get: {get}, put: {put}}}}}\n"
        "budget: {monthly_usd: 1000}\n"
    )


def shipped_spec(name: str) -> Spec:
    """A shipped spec (``specs/NAME.yaml``) with this set-up's record shape."""
    s = load_spec(SPEC_DIR / f"{name}.yaml")
    return replace(s, workload=replace(s.workload, key_bytes=KEY, value_bytes=VALUE))


def workloads(quick: bool) -> dict[str, Spec]:
    """YCSB A-F, uniform and zipfian gets/puts, the single-operation workloads."""
    out: dict[str, Spec] = {}
    ycsb = "acef" if quick else "abcdef"
    for c in ycsb:
        out[f"ycsb_{c}"] = shipped_spec(f"ycsb_{c}")
    z = "{kind: zipfian, theta: 0.99}"
    get_put: dict[str, float] = {Operation.GET: 0.5, Operation.UPDATE: 0.5}
    out["uniform_get_put"] = mix_spec(get_put)
    if not quick:
        out["zipfian_get_put"] = mix_spec(get_put, z, z)
    singles = (Operation.EMPTY_GET, Operation.INSERT, Operation.EMPTY_RANGE) if quick else OPERATIONS
    for op in singles:
        out[f"only_{op}"] = mix_spec({op: 1.0})
    return out


def _cls(bits: list[float], hot: int, levels: int, lsh: bool) -> DesignClass:
    """Algorithm 3 on an engine configuration: filters -> LSM or hybrid, else hash log or B-tree."""
    if lsh:
        return DesignClass.LSH
    if any(b > 0 for b in bits):
        return DesignClass.HYBRID if hot < levels else DesignClass.LSM
    return DesignClass.BTREE


def designs(records: int, quick: bool, optima: bool = True) -> dict[str, dict[str, Any]]:
    """Engine configurations (engine.toml sections) of the grid (``optima``: with Cosine's
    choice for each YCSB workload, which needs the learned CPU table)."""
    data = records * (KEY + VALUE)
    memory = MEMORY_SHARE * data
    out: dict[str, dict[str, Any]] = {}
    for preset in PRESETS:
        d = replace(preset_design_entry(preset, records, KEY, VALUE, memory), buffer_bytes=PRESET_BUFFER_SHARE * data)
        out[preset] = engine_sections(d, KEY, VALUE, {"get": 1.0}, preset, wal_sync=WalSync.NONE)
    # Cosine's optimum for each YCSB workload on this node's memory (the model's own choice)
    from measure.local import local_engine_toml

    for c in ("a", "e") if quick and optima else "abcdef" if optima else "":
        s = shipped_spec(f"ycsb_{c}")
        secs, _ = local_engine_toml(s, records, memory, 1, name=f"cosine-ycsb_{c}", wal_sync=WalSync.NONE)
        out[f"cosine-ycsb_{c}"] = secs
    # Hybrids: a base design, then one primitive at a time (paper Sec. 7.1 step 2)
    base = {
        "T": 6,
        "K": 3,
        "Z": 1,
        "buffer": PRESET_BUFFER_SHARE * data,
        "bits": 8.0,
        "hot": 2,
        "B": 8,
        "cache": 0.0,
        "compaction": "hybrid",
        "codec": "none",
        "range_bits": 0.0,
    }
    variants: list[tuple[str, dict[str, Any]]] = [("hybrid-base", {})]
    steps: dict[str, tuple[Any, ...]] = {
        "T": (3, 4, 8, 10, 16),
        "K": (1, 2, 5),
        "Z": (2, 3),
        "buffer": (0.25, 0.5, 2.0, 4.0),
        "bits": (0.0, 2.0, 5.0, 12.0, 16.0),
        "hot": (0, 1, 4),
        "B": (2, 4, 16, 32),
        "cache": (0.05, 0.2),
        "compaction": (Compaction.FULL, Compaction.PARTIAL),
        # issue 17: every level's blocks compressed; a range filter in the hot levels
        "codec": ("lz4", "zstd:3"),
        "range_bits": (8.0, 16.0),
    }
    if quick:
        steps = {"T": (3, 10), "bits": (0.0, 16.0), "hot": (0, 4), "K": (1,), "codec": ("lz4",), "range_bits": (16.0,)}
    for knob, vals in steps.items():
        for v in vals:
            variants.append((f"hybrid-{knob}={v}", {knob: v}))
    for name, change in variants:
        p = {**base, **change}
        if "buffer" in change:
            p["buffer"] = base["buffer"] * change["buffer"]
        if "cache" in change:
            p["cache"] = change["cache"] * data
        levels = 1 + int(math.log(max(records / max(p["buffer"] / (KEY + VALUE), 1.0), 1.0), p["T"]))
        bits = [float(p["bits"])] * max(levels, 1)
        cls = _cls(bits, int(p["hot"]), levels, False)
        secs = {
            "design": {"name": name, "class": cls},
            "layout": {
                "key_bytes": KEY,
                "value_bytes": VALUE,
                "block_entries": int(p["B"]),
                "size_ratio": float(p["T"]),
                "runs_per_hot_level": int(min(p["K"], p["T"] - 1)),
                "runs_per_cold_level": int(min(p["Z"], p["T"] - 1)),
                "buffer_bytes": int(p["buffer"]),
                "bloom_bits_per_key": bits,
                "hot_levels": int(p["hot"]),
                "block_cache_bytes": int(p["cache"]),
            },
            "algorithms": {
                "filter_granularity": "file",
                "compaction": p["compaction"],
                "run_strategy": RunStrategy.FULLEST,
                "file_picking": FilePicking.DENSE_FP,
                "merge_threshold": 1.0,
                "full_compaction_levels": 1,
                "file_entries": 65536,
                "threads": 1,
            },
            "durability": {"wal_sync": WalSync.NONE, "group_commit_interval_us": 1000},
            "compression": {"hot": p["codec"], "cold": p["codec"]},
            "range_filter": {"bits_per_height": list(allocate(float(p["range_bits"]), DEFAULT_EMPTY_RANGE_WIDTH))},
        }
        out[name] = secs
    return out


def small_lsm(name: str, op: str, **entry: Any) -> dict[str, dict[str, Any]]:
    """engine.toml sections of a small two-level leveled LSM (16 + 240-byte entries, one
    thread, no WAL sync) for focused engine checks (range filters, codecs); ``entry``
    overrides fields of the design entry (render.config.engine_sections)."""
    d = hand_entry(
        **{
            "design_class": DesignClass.LSM,
            "entries_per_node": 1 << 16,  # the tests' stores are smaller; only a hash log reads it
            "L": 2,
            "Y": 0,
            "T": 4,
            "K": 1,
            "Z": 1,
            "block_bytes": 4096,
            "buffer_bytes": 1 << 18,
            "bloom_bits_per_level": [10.0],
            **entry,
        }
    )
    secs = engine_sections(d, 16, 240, {op: 1.0}, name, wal_sync=WalSync.NONE)
    secs["algorithms"]["threads"] = 1
    return secs


def small_workload(op: str, records: int, operations: int, **extra: Any) -> dict[str, Any]:
    """workload.json of one operation type on :func:`small_lsm`'s record shape (uniform keys,
    one thread); ``extra`` adds fields (``empty_range_width``, ``compressibility``, ``seed``)."""
    wl: dict[str, Any] = {
        "records": records,
        "operations": operations,
        "key_bytes": 16,
        "value_bytes": 240,
        "mix": {op: 1.0},
        "scan_length": 1,
        "distribution": {"get": {"kind": "uniform"}, "put": {"kind": "uniform"}},
        "threads": 1,
        "seed": 11,
    }
    return {**wl, **extra}
