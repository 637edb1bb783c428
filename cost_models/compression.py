"""Block compression as a design knob (technical report Table 1): ``none | lz4 | zstd:LEVEL``
for the hot levels and for the cold levels.

A block keeps B entries; compressed, it occupies ``factor x block`` bytes on the
device, where ``factor`` is the codec's measured size ratio at the workload's
compressibility. So compression changes

* the bytes stored (and billed): the data of each level group times its factor;
* the bytes each block I/O moves (a throughput-limited volume serves smaller
  blocks faster); the I/O count is unchanged;
* the CPU per operation: every block read is verified and decompressed, every
  block a merge writes is compressed (``codec_cpu`` in cost_models/symbolic.py).

Nothing is assumed from a paper: factors and CPU per raw byte are measured on
the engine by ``cosine calibrate compression`` (measure/compression.py) and
kept in ``data/compression.yaml`` with their provenance. Codec "none" still
checksums every block; its CPU is already part of the learned per-operation CPU
(data/phi.yaml), so the model charges a codec only what it costs *beyond* none.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cost_models.symbolic import compiled
from specs.errors import InputError
from specs.io import load_yaml
from specs.vocab import READ_OPERATIONS, WRITE_OPERATIONS, CodecName

TABLE = Path(__file__).resolve().parent / "data" / "compression.yaml"
#: zstd levels the engine accepts (cosine-compress ``ZSTD_MAX_LEVEL``).
ZSTD_MAX_LEVEL = 22
#: The codecs the design search offers per level group. zstd at its default level 3 and
#: lz4 span the CPU/size trade; other zstd levels are accepted in designs and calibrated.
SEARCH_CODECS = ("none", "lz4", "zstd:3")
#: (hot, cold) pairs the search considers: the hot levels hold a small share of the data
#: and are rewritten most often, so a hot codec stronger than the cold one is left out
#: (6 pairs instead of 9; docs/model.md "Compression").
SEARCH_PAIRS: tuple[tuple[str, str], ...] = tuple(
    (h, c) for i, c in enumerate(SEARCH_CODECS) for h in SEARCH_CODECS[: i + 1]
)


class CompressionTableError(InputError):
    """data/compression.yaml is missing a codec or holds an impossible value."""


def parse_codec(text: str) -> str:
    """Normalize ``none``, ``lz4``, ``zstd`` (level 3) or ``zstd:LEVEL`` (1..22); errors name the value."""
    t = str(text).strip().lower()
    if t in (CodecName.NONE, CodecName.LZ4):
        return t
    if t == CodecName.ZSTD:
        return "zstd:3"
    if t.startswith(f"{CodecName.ZSTD}:"):
        lvl = t.split(":", 1)[1]
        if lvl.isdigit() and 1 <= int(lvl) <= ZSTD_MAX_LEVEL:
            return f"zstd:{int(lvl)}"
    raise InputError(f"codec {text!r}: expected none, lz4, zstd or zstd:LEVEL (1..{ZSTD_MAX_LEVEL})")


@lru_cache(maxsize=4)
def table(path: Path = TABLE) -> dict[str, Any]:
    """The measured codec table: ``codecs[name][compressibility] = {size_factor, ...}``."""
    try:
        raw = load_yaml(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CompressionTableError(f"{path.name}: cannot read ({exc})") from None
    codecs = raw.get("codecs") if isinstance(raw, dict) else None
    if not isinstance(codecs, dict) or CodecName.NONE not in codecs:
        raise CompressionTableError(f"{path.name}: no codecs (run `cosine calibrate compression`)")
    for name, rows in codecs.items():
        parse_codec(name)
        for c, row in rows.items():
            if not 0 < float(c) <= 1:
                raise CompressionTableError(f"{path.name}: {name} compressibility {c} outside (0, 1]")
            if not float(row["size_factor"]) > 0:
                raise CompressionTableError(f"{path.name}: {name}[{c}].size_factor must be positive")
            for k in ("compress_ns_per_byte", "decompress_ns_per_byte"):
                if not float(row[k]) >= 0:
                    raise CompressionTableError(f"{path.name}: {name}[{c}].{k} must be non-negative")
    return raw


def _row(codec: str, compressibility: float) -> tuple[float, float, float]:
    """(size factor, compress s/byte, decompress s/byte) at ``compressibility``, interpolated
    linearly between the measured compressibilities (clamped at the ends)."""
    rows = table()["codecs"].get(codec)
    if rows is None:
        raise CompressionTableError(f"{TABLE.name}: codec {codec!r} was not calibrated")
    xs = np.array(sorted(float(c) for c in rows))
    by = {float(c): r for c, r in rows.items()}
    vals = [
        np.interp(compressibility, xs, [float(by[x][k]) for x in xs])
        for k in ("size_factor", "compress_ns_per_byte", "decompress_ns_per_byte")
    ]
    return float(vals[0]), float(vals[1]) * 1e-9, float(vals[2]) * 1e-9


def codec_factors(codec: str, compressibility: float) -> tuple[float, float, float]:
    """(size factor, compress s/byte, decompress s/byte): what the codec adds to a block
    stored as built (codec none: factor 1, no time)."""
    return _row(parse_codec(codec), compressibility)


@dataclass
class CodecEffect:
    """What a (hot, cold) codec pair does to each design (arrays over designs)."""

    size_factor: np.ndarray  # stored / raw bytes over the whole node
    disk_block_bytes: np.ndarray  # bytes one block I/O moves
    cpu_seconds: np.ndarray  # extra CPU seconds per operation of the mix


def effect(
    hot: str | list[str] | np.ndarray,
    cold: str | list[str] | np.ndarray,
    hot_share: np.ndarray,
    block_bytes: np.ndarray,
    read_blocks: np.ndarray,
    merge_blocks: np.ndarray,
    compressibility: float,
) -> CodecEffect:
    """The codec effect of designs whose hot levels hold ``hot_share`` of the data
    (``hot``/``cold``: one codec for every row, or one per row).

    Reads and merge blocks are spread over the level groups like the data (a block
    read or merged is hot with probability ``hot_share``)."""
    fh, eh, dh = _per_row(hot, compressibility)
    fc, ec, dc = _per_row(cold, compressibility)
    s = np.clip(np.asarray(hot_share, dtype=float), 0.0, 1.0)
    factor = s * fh + (1 - s) * fc
    blk = np.asarray(block_bytes, dtype=float)
    t_enc = (s * eh + (1 - s) * ec) * blk
    t_dec = (s * dh + (1 - s) * dc) * blk
    cpu = compiled()["codec_cpu"](np.asarray(read_blocks, float), np.asarray(merge_blocks, float), t_dec, t_enc)
    return CodecEffect(factor, factor * blk, np.asarray(cpu, dtype=float))


def _per_row(codecs: str | list[str] | np.ndarray, compressibility: float) -> tuple[np.ndarray, ...]:
    """(factor, compress s/byte, decompress s/byte) per row, looked up once per distinct codec."""
    if isinstance(codecs, str):
        return tuple(np.array(v) for v in codec_factors(codecs, compressibility))
    names, inverse = np.unique(np.asarray(codecs, dtype=str), return_inverse=True)
    table_ = np.array([codec_factors(str(c), compressibility) for c in names]).reshape(-1, 3)
    rows = table_[inverse.reshape(-1)]
    return rows[:, 0], rows[:, 1], rows[:, 2]


def op_blocks(per_op: dict[str, np.ndarray], mix: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(blocks read by the operations themselves, merge blocks) per operation of ``mix``.

    A read-modify-write reads like a get and writes like a put: its I/O splits
    into the get's blocks and the put's."""
    reads = sum(mix.get(op, 0.0) * per_op[op] for op in READ_OPERATIONS if op != "rmw")
    puts = sum(mix.get(op, 0.0) * per_op[op] for op in WRITE_OPERATIONS if op != "rmw")
    rmw = mix.get("rmw", 0.0)
    reads = reads + rmw * per_op["get"]
    puts = puts + rmw * np.maximum(per_op["rmw"] - per_op["get"], 0.0)
    return np.asarray(reads, dtype=float), np.asarray(puts, dtype=float)


def searched(compressibility: float) -> tuple[tuple[str, str], ...]:
    """Codec pairs the search considers at this compressibility: only (none, none) for
    incompressible data — every codec's measured factor there is >= 1 and it costs CPU,
    so no codec can win (the bound that keeps the solve's tables from growing)."""
    return SEARCH_PAIRS if compressibility < 1.0 else (("none", "none"),)
