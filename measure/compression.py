"""`cosine calibrate compression`: each codec's size ratio and CPU per byte, measured on the engine.

For every codec of :data:`CODECS` and every compressibility of :data:`COMPRESSIBILITIES`
the template engine loads a small store whose values have that compressibility
(cosine-bench ``make_value``: a random fragment of that share of the value,
repeated, as db_bench's ``CompressibleString``) with every level written by the
codec, then serves uniform gets. cosine-bench's codec counters give

* size factor = stored bytes / raw bytes of every block compressed (flushes and merges),
* compress ns per raw byte (load phase), decompress ns per raw byte (run phase;
  every block read is verified, then decompressed).

The table (cost_models/data/compression.yaml) records the machine, date, sizes
and the command; cost_models/compression.py reads it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from cost_models.design import hand_entry
from measure.calibrate.samples import machine
from measure.engine import TEMPLATE, build, run_scratch
from render.config import engine_sections, to_toml
from specs.io import write_text
from specs.vocab import CodecName, DesignClass, WalSync

#: Codecs calibrated: the search's (cost_models.compression.SEARCH_CODECS) and two more zstd levels.
CODECS = ("none", "lz4", "zstd:1", "zstd:3", "zstd:9")
#: Compressibilities measured (the model interpolates between them).
COMPRESSIBILITIES = (0.125, 0.25, 0.5, 0.75, 1.0)
#: The calibration store: 16-byte keys and 1,008-byte values (1 KiB entries), 4 KiB blocks.
KEY_BYTES, VALUE_BYTES, BLOCK_BYTES = 16, 1008, 4096
RECORDS, OPERATIONS = 40_000, 40_000
#: Codec none: cosine-compress ``seal``/``open`` return the block as built (no envelope, no
#: codec time; the block's own checksum is part of every operation's learned CPU).
NONE_ROW = {"size_factor": 1.0, "compress_ns_per_byte": 0.0, "decompress_ns_per_byte": 0.0}
QUICK_RECORDS, QUICK_OPERATIONS = 8_000, 8_000


def config(codec: str) -> str:
    """engine.toml of the calibration store: a leveled LSM whose every level uses ``codec``."""
    d = hand_entry(
        design_class=DesignClass.LSM,
        entries_per_node=RECORDS,
        L=3,
        Y=0,
        T=10,
        K=1,
        Z=1,
        block_bytes=BLOCK_BYTES,
        buffer_bytes=2 * 2**20,
        bloom_bits_per_level=[10.0],
    )
    secs = engine_sections(d, KEY_BYTES, VALUE_BYTES, {"get": 1.0}, "calibrate-compression", wal_sync=WalSync.NONE)
    secs["algorithms"]["threads"] = 1
    secs["compression"] = {"hot": codec, "cold": codec}
    return to_toml(secs)


def workload(compressibility: float, records: int, operations: int) -> dict[str, Any]:
    return {
        "records": records,
        "operations": operations,
        "key_bytes": KEY_BYTES,
        "value_bytes": VALUE_BYTES,
        "mix": {"get": 1.0},
        "scan_length": 1,
        "compressibility": compressibility,
        "distribution": {"get": {"kind": "uniform"}, "put": {"kind": "uniform"}},
        "threads": 1,
        "seed": 7,
    }


def factors(report: dict[str, Any]) -> dict[str, float]:
    """Size factor and ns per raw byte from one cosine-bench report's codec counters."""
    load, run = report["compression"]["load"], report["compression"]["run"]
    if load["compressed_raw_bytes"] <= 0 or run["decompressed_raw_bytes"] <= 0:
        raise RuntimeError("cosine-bench compressed or decompressed no block; the calibration store is too small")
    return {
        "size_factor": round(load["compressed_stored_bytes"] / load["compressed_raw_bytes"], 5),
        "compress_ns_per_byte": round(load["compress_ns"] / load["compressed_raw_bytes"], 5),
        "decompress_ns_per_byte": round(run["decompress_ns"] / run["decompressed_raw_bytes"], 5),
        "blocks_compressed": int(load["blocks_compressed"]),
        "blocks_decompressed": int(run["blocks_decompressed"]),
    }


def calibrate(quick: bool = False, progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Measure every codec at every compressibility; returns the table as written."""
    build(TEMPLATE)
    records, ops = (QUICK_RECORDS, QUICK_OPERATIONS) if quick else (RECORDS, OPERATIONS)
    codecs: dict[str, dict[float, dict[str, float]]] = {}
    total, done = len(CODECS) * len(COMPRESSIBILITIES), 0
    for codec in CODECS:
        for c in COMPRESSIBILITIES:
            if codec == CodecName.NONE:  # seal() stores the block as built: nothing to measure
                codecs.setdefault(codec, {})[c] = dict(NONE_ROW)
                done += 1
                continue
            rep = run_scratch(config(codec), workload(c, records, ops), f"compression-{done}")
            codecs.setdefault(codec, {})[c] = factors(rep)
            done += 1
            if progress:
                progress(done, total, f"{codec} at compressibility {c:g}")
    return {
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "method": (
            f"cosine calibrate compression{' --quick' if quick else ''}: the template engine (leveled LSM, "
            f"{BLOCK_BYTES}-byte blocks, {KEY_BYTES}+{VALUE_BYTES}-byte entries) loads {records:,} records whose "
            f"values have the stated compressibility, every level written by the codec, then serves {ops:,} "
            "uniform gets; size factor = stored / raw bytes of every block compressed, compress ns per raw byte "
            "from the load, decompress ns per raw byte from the gets (cosine-bench codec counters); none: the "
            "block as built, by construction"
        ),
        "codecs": codecs,
    }


def write(tab: dict[str, Any]) -> str:
    """Write the table to cost_models/data/compression.yaml (atomically); returns its path."""
    import yaml

    from cost_models.compression import TABLE, table

    head = (
        "# Codec size factors and CPU per raw byte, measured on the Rust engine.\n"
        "# Written by `cosine calibrate compression` (measure/compression.py); read by cost_models/compression.py.\n"
    )
    write_text(TABLE, head + yaml.safe_dump(tab, sort_keys=False))
    table.cache_clear()
    return str(TABLE)
