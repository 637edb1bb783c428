"""The learned table, data/phi.yaml: written whole, one operation merged in, its terms read back."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from cost_models.phi import PHI_SCHEMA, PHI_TABLE, PhiTable
from measure.calibrate.fit import PHI_NOISE, MemtableFit
from measure.calibrate.plan import BUFFER_GET, BUFFERED, CLASS_DESIGNS
from measure.calibrate.samples import Sample, machine, provenance
from specs.io import write_text
from specs.vocab import OPERATIONS, DesignClass

TABLE_HEADER = (
    "# The CPU model's measured terms: per design class and operation the CPU seconds on a cached engine\n"
    "# and phi (Eq. 2); block-read and background CPU; the envelope of measured throughput per core.\n"
    "# Written by `cosine calibrate` (measure/calibrate/); read through cost_models/phi.py.\n"
)


def write_table(result: dict[str, Any], samples: list[Sample], path: Path = PHI_TABLE) -> Path:
    """Rewrite data/phi.yaml with the learned values (and how they were obtained)."""
    classes: dict[str, Any] = {}
    for cls in CLASS_DESIGNS:
        classes[cls] = {
            "range_entry_seconds": float(f"{result['range'][cls]['per_entry']:.4g}"),
            "buffer_get_seconds": float(f"{result['cpu'][(cls, BUFFER_GET)]:.4g}"),
            "block_read_seconds": float(f"{result['block_read']['per_class'][cls]:.4g}"),
            "lookup_seconds_per_doubling": {
                op: float(f"{v:.4g}") for op, v in result["lookup"]["per_doubling"][cls].items()
            },
            "phi": {str(op): round(result["phi"][(cls, op)], 4) for op in OPERATIONS},
            "concurrent_cpu_factor": {str(op): round(result["concurrent_cpu"][(cls, op)], 4) for op in OPERATIONS},
            "cpu_seconds": {
                str(op): float(f"{result['cpu'][(cls, op)]:.4g}") for op in OPERATIONS if (cls, op) in result["cpu"]
            },
        }
    sizes = sorted({s.records for s in samples if s.kind != BUFFERED})
    threads = sorted({s.threads for s in samples})
    terms = result["background"]
    doc = {
        "schema": PHI_SCHEMA,
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "provenance": provenance(),
        "method": (
            f"cosine calibrate (measure/calibrate/): the class presets (rocksdb, wiredtiger, faster, "
            f"hybrid-base) at {sizes} records, threads {threads}. "
            "cpu_seconds: driver-thread CPU per operation on a warm engine whose cache holds the data (no "
            "block reads; writes fill part of an empty buffer, no flush; an rmw's reads that buffer "
            "answered get the level walk they skipped added back); phi: Eq. 2 on those runs' "
            "busy share at 2 threads (throughput x CPU per operation / threads), averaged (1 when "
            f"measured at most {PHI_NOISE} past it); "
            "concurrent_cpu_factor: those runs' CPU per operation at 2 threads over 1 thread's, averaged; "
            "empty_range: its own cached runs (hash log: the index walk of "
            "hash_scan_per_key_seconds, its phi measured); lookups: a_op + b log2(keys / smallest size) by "
            "least squares over the sizes; memtable insert slope: cached blind writes at two memtables, past the "
            "smaller one (writes are flat below it); "
            "range: a + scan length x r (hash log: keys x k + scan "
            "length x r); block_read: least squares of the extra CPU of loaded single-operation and YCSB "
            "A/B/D/F runs against their blocks read, a term per class and block size (the LSM's at each block "
            "size it ran: block_read_shape, its terms over their value at 4 KiB), plus a time per byte per "
            "doubling of the keys (held past the largest size measured); background: least squares of the "
            "background thread's CPU against flush and merge blocks (and, on the hash log, their entries). "
            "No value is clamped."
        ),
        "memtable_seconds_per_doubling": float(f"{result['memtable'].search_slope:.4g}"),
        "memtable_insert_seconds_per_doubling": float(f"{result['memtable'].insert_slope:.4g}"),
        "memtable_base_entries": float(f"{result['memtable'].search_base:.4g}"),
        "memtable_insert_base_entries": float(f"{result['memtable'].insert_base:.4g}"),
        "lookup_reference_keys": float(result["lookup"]["reference_keys"]),
        "block_read_shape": {
            "block_bytes": result["block_read"]["shape"]["block_bytes"],
            "ratio": [float(f"{r:.4g}") for r in result["block_read"]["shape"]["ratio"]],
        },
        "block_read_seconds_per_byte_doubling": float(f"{result['block_read']['per_byte_doubling']:.4g}"),
        "block_read_growth_max_keys": result["block_read"]["growth_max_keys"],
        "background_block_seconds": float(f"{terms['background_block_seconds']:.4g}"),
        "background_block_seconds_per_byte": float(f"{terms['background_block_seconds_per_byte']:.4g}"),
        "hash_scan_per_key_seconds": float(f"{result['range'][DesignClass.LSH]['per_key']:.4g}"),
        "hash_index_entry_seconds": float(f"{terms['hash_index_entry_seconds']:.4g}"),
        "classes": classes,
        "envelope": result["envelope"],
    }
    carried = _wal_of(PHI_TABLE)
    if carried is not None:  # measured by its own command (measure.calibrate.wal), kept as it was
        doc["wal"] = carried
    write_text(path, TABLE_HEADER + yaml.safe_dump(doc, sort_keys=False))
    return path


def _wal_of(path: Path) -> dict[str, Any] | None:
    """The ``wal`` section of the table at ``path`` (None: no readable table, or none in it)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    sec = doc.get("wal") if isinstance(doc, dict) else None
    return sec if isinstance(sec, dict) else None


def table_terms(table: PhiTable) -> tuple[MemtableFit, dict[str, Any]]:
    """The memtable and lookup-growth terms of a written table, as fit_memtable_insert and fit_lookup return them."""
    memtable = MemtableFit(
        float(table["memtable_seconds_per_doubling"]),
        float(table["memtable_base_entries"]),
        float(table["memtable_insert_seconds_per_doubling"]),
        float(table["memtable_insert_base_entries"]),
    )
    lookup = {
        "per_doubling": {c: dict(v["lookup_seconds_per_doubling"]) for c, v in table["classes"].items()},
        "reference_keys": float(table["lookup_reference_keys"]),
    }
    return memtable, lookup


def merge_operation(result: dict[str, Any], samples: list[Sample], path: Path = PHI_TABLE) -> Path:
    """Write one operation's measured CPU and phi into the table at ``path``, every other entry as
    it was; its provenance goes under ``operation_provenance``, and its ``<op>_note`` (a value
    that was not measured) is removed."""
    op = str(result["operation"])
    doc = yaml.safe_load(path.read_text())
    for cls in CLASS_DESIGNS:
        entry = doc["classes"][cls]
        entry["phi"][op] = round(result["phi"][(cls, op)], 4)
        entry.setdefault("concurrent_cpu_factor", {})[op] = round(result["concurrent_cpu"][(cls, op)], 4)
        if (cls, op) in result["cpu"]:
            entry["cpu_seconds"][op] = float(f"{result['cpu'][(cls, op)]:.4g}")
        else:
            entry["cpu_seconds"].pop(op, None)
    sizes = sorted({s.records for s in samples})
    threads = sorted({s.threads for s in samples})
    doc.pop(f"{op}_note", None)
    doc.setdefault("operation_provenance", {})[op] = {
        **provenance(),
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "method": (
            f"cosine calibrate operation {op}: only {op}'s cached runs (the class presets at {sizes} "
            f"records, threads {threads}), fitted as the whole calibration fits them (fit_cpu, fit_phi, "
            "fit_concurrent_cpu) with this table's memtable and lookup terms; merged into the table, every other entry "
            "unchanged (hash log: CPU is the index walk, hash_scan_per_key_seconds)."
        ),
    }
    write_text(path, TABLE_HEADER + yaml.safe_dump(doc, sort_keys=False))
    return path
