"""Engine designs: the layout knobs of the paper's Table 1, one design or a batch.

A :class:`Design` is what a user writes (``--design T=8,K=3,Z=1,buffer=1GiB,
bloom_bits=10``) or what a preset is; a :class:`DesignBatch` is many designs
as numpy arrays, which is what the models evaluate.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from specs.errors import InputError, check_range
from specs.io import load_yaml, require
from specs.limits import (
    MAX_BLOCK_BYTES,
    MAX_BLOOM_BITS,
    MAX_BUFFER_BYTES,
    MAX_ENTRIES,
    MAX_HASH_INDEX_BYTES,
    MAX_LEVELS,
    MAX_SIZE_RATIO,
    MAX_THREADS,
    MIN_BLOCK_BYTES,
    MIN_SIZE_RATIO,
)
from specs.vocab import BLOOM_ALLOCATIONS, BloomAllocation, DesignClass, Preset

_DATA = Path(__file__).resolve().parent / "data"


def allowed_classes(cls: np.ndarray, classes: tuple[str, ...]) -> np.ndarray:
    """Which of the design-class codes ``cls`` (``DesignClass.code``) are of ``classes`` (a
    spec's ``design.classes``)."""
    return np.isin(cls, [DesignClass(c).code for c in classes])


@lru_cache(maxsize=1)
def model_constants() -> dict[str, float]:
    """Model constants from ``data/model_constants.yaml`` (value only)."""
    raw = load_yaml((_DATA / "model_constants.yaml").read_text())
    return {k: float(v["value"]) for k, v in raw.items()}


class DesignError(InputError):
    """A malformed design string or an impossible knob value."""


#: Spellings of a boolean knob (``lsh=1``, ``all_hot=false``); anything else is an error.
_BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


@dataclass(frozen=True)
class Design:
    """One engine design (the layout primitives of Table 1).

    ``bloom_bits`` is the average Bloom-filter bits per key over the hot levels;
    ``bloom_allocation`` spreads them per level (``monkey``: optimal per-level
    false-positive rates, Dayan et al. 2017; ``uniform``: the same bits per key
    everywhere, as RocksDB). ``lsh`` selects the log-structured hash-table
    layout (T is then N*E/M_B, a single never-compacted level, Table 1).
    ``all_hot`` keeps fence pointers and filters of every level in memory
    whatever it costs (the paper's RocksDB baseline, Sec. 7).
    ``hash_index_bytes`` is the hash index's memory per key of a hash log
    (None: the template's hash log, key + ``hash_index_overhead_bytes``).
    """

    T: int = 10
    K: int = 1
    Z: int = 1
    buffer_bytes: float = 64 * 2**20
    bloom_bits: float = 10.0
    bloom_allocation: BloomAllocation = BloomAllocation.MONKEY
    block_bytes: int = 4096
    lsh: bool = False
    all_hot: bool = False
    threads: int | None = None
    name: str = "custom"
    hash_index_bytes: float | None = None
    #: range-filter bits per key in every hot level (0: none; cost_models.range_filter)
    range_bits: float = 0.0
    #: block codec of the hot levels and of the cold levels (cost_models.compression)
    codec_hot: str = "none"
    codec_cold: str = "none"

    def validate(self) -> Design:
        """Every knob within its range (:data:`MAX_SIZE_RATIO` and friends); NaN and infinities refused."""
        check_range("design buffer (bytes)", self.buffer_bytes, 0, MAX_BUFFER_BYTES, lo_open=True)
        check_range("design block (bytes)", self.block_bytes, MIN_BLOCK_BYTES, MAX_BLOCK_BYTES, integer=True)
        if self.threads is not None:
            check_range("design threads", self.threads, 1, MAX_THREADS, integer=True)
        if self.bloom_allocation not in BLOOM_ALLOCATIONS:
            raise DesignError(
                f"bloom_allocation must be {' or '.join(BLOOM_ALLOCATIONS)}, got {self.bloom_allocation!r}"
            )
        object.__setattr__(self, "bloom_allocation", BloomAllocation(self.bloom_allocation))
        if self.hash_index_bytes is not None:
            check_range("design hash_index_bytes", self.hash_index_bytes, 0.0, MAX_HASH_INDEX_BYTES, lo_open=True)
        check_range("design range_bits", self.range_bits, 0.0, MAX_BLOOM_BITS)
        from cost_models.compression import parse_codec

        object.__setattr__(self, "codec_hot", parse_codec(self.codec_hot))
        object.__setattr__(self, "codec_cold", parse_codec(self.codec_cold))
        if self.lsh:
            return self
        check_range("design T (size ratio)", self.T, MIN_SIZE_RATIO, MAX_SIZE_RATIO, integer=True)
        check_range("design K (runs per hot level)", self.K, 1, max(1, self.T - 1), integer=True)
        check_range("design Z (runs per cold level)", self.Z, 1, max(1, self.T - 1), integer=True)
        check_range("design bloom_bits", self.bloom_bits, 0.0, MAX_BLOOM_BITS)
        return self

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True)
class DesignEntry:
    """A design as an engine runs it: its knobs and the layout the model derives for its keys per
    node (what ``cosine render`` turns into an engine.toml; solution.json's ``designs[i]`` is one
    with its node's VM, count and throughput, :class:`solver.rundir.NodeDesign`)."""

    entries_per_node: float
    design_class: DesignClass = field(metadata={"column": "class"})
    T: int
    K: int
    Z: int
    L: int  # levels
    Y: int  # cold levels (no filters or fence pointers in memory)
    lsh: bool
    block_bytes: int
    buffer_bytes: float
    bloom_bits_per_key: float
    bloom_bits_per_level: list[float]
    bloom_allocation: BloomAllocation
    filter_bytes: float
    fence_bytes: float
    cache_bytes: float
    range_bits_per_key: float
    range_bits_per_height: list[float]
    range_filter_bytes: float
    codec_hot: str
    codec_cold: str
    threads: int = 1  # worker threads

    @property
    def memory_bytes(self) -> float:
        """Memory one node of the design uses: buffer, block cache, filters, fence pointers."""
        return self.buffer_bytes + self.cache_bytes + self.filter_bytes + self.fence_bytes

    def check(self) -> None:
        """Every knob within the engine's range (specs.limits); a solution.json read back is checked so."""
        require(2 <= self.T <= MAX_SIZE_RATIO, f"T {self.T} outside 2..{MAX_SIZE_RATIO}")
        require(1 <= self.K <= max(1, self.T - 1), f"K {self.K} outside 1..T-1")
        require(1 <= self.Z <= max(1, self.T - 1), f"Z {self.Z} outside 1..T-1")
        require(0 <= self.L <= MAX_LEVELS, f"L {self.L} outside 0..{MAX_LEVELS}")
        require(0 <= self.Y <= self.L, f"Y {self.Y} outside 0..L")
        require(0 < self.buffer_bytes <= MAX_BUFFER_BYTES, f"buffer_bytes {self.buffer_bytes} out of range")
        require(MIN_BLOCK_BYTES <= self.block_bytes <= MAX_BLOCK_BYTES, f"block_bytes {self.block_bytes} out of range")
        require(0 <= self.cache_bytes <= MAX_BUFFER_BYTES, f"cache_bytes {self.cache_bytes} out of range")
        require(0 < self.entries_per_node <= MAX_ENTRIES, f"entries_per_node {self.entries_per_node} out of range")
        require(1 <= self.threads <= MAX_THREADS, f"threads {self.threads} outside 1..{MAX_THREADS}")
        require(0 <= self.bloom_bits_per_key <= MAX_BLOOM_BITS, f"bloom_bits_per_key {self.bloom_bits_per_key}")
        require(len(self.bloom_bits_per_level) <= MAX_LEVELS, f"more than {MAX_LEVELS} levels of Bloom bits")
        for j, b in enumerate(self.bloom_bits_per_level):
            require(0 <= b <= MAX_BLOOM_BITS, f"bloom_bits_per_level[{j}] {b} outside 0..{MAX_BLOOM_BITS:g}")
        from cost_models.compression import parse_codec

        for name in ("codec_hot", "codec_cold"):  # as the engine's [compression] takes it (a rendered name)
            value = getattr(self, name)
            try:
                ok = parse_codec(value) == value
            except InputError:
                ok = False
            require(ok, f"{name} {value!r} is not a codec (none, lz4, zstd:LEVEL)")


#: The fields of a :class:`DesignEntry` that are chosen (by the solver or a user), as its JSON names
#: them: the rest are derived from them by the model (levels, memory, filters per level).
DESIGN_KNOBS = (
    "class",
    "T",
    "K",
    "Z",
    "lsh",
    "block_bytes",
    "buffer_bytes",
    "bloom_bits_per_key",
    "bloom_allocation",
    "threads",
)

#: The derived figures a hand-made :class:`DesignEntry` (a test's, a focused engine check's) leaves
#: out: no filters, fences or cache counted, no range filter, no codec, one thread.
HAND_ENTRY_DEFAULTS: dict[str, Any] = {
    "lsh": False,
    "bloom_bits_per_key": 0.0,
    "bloom_allocation": BloomAllocation.MONKEY,
    "filter_bytes": 0.0,
    "fence_bytes": 0.0,
    "cache_bytes": 0.0,
    "range_bits_per_key": 0.0,
    "range_bits_per_height": [],
    "range_filter_bytes": 0.0,
    "codec_hot": "none",
    "codec_cold": "none",
    "threads": 1,
}


def hand_entry(**knobs: Any) -> DesignEntry:
    """A :class:`DesignEntry` from its layout knobs (``design_class``, T, K, Z, L, Y, block and buffer
    bytes, Bloom bits per level, keys per node), the rest from :data:`HAND_ENTRY_DEFAULTS`."""
    return DesignEntry(**{**HAND_ENTRY_DEFAULTS, **knobs})


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?i?[bB]?)\s*$")
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1e3,
    "kb": 1e3,
    "kib": 2**10,
    "m": 1e6,
    "mb": 1e6,
    "mib": 2**20,
    "g": 1e9,
    "gb": 1e9,
    "gib": 2**30,
    "t": 1e12,
    "tb": 1e12,
    "tib": 2**40,
}


def parse_size(text: str) -> float:
    """'1GiB' -> 1073741824.0; '64MB' -> 64e6; '4096' -> 4096.0."""
    m = _SIZE.match(text)
    if not m:
        raise DesignError(f"{text!r} is not a size (e.g. 64MiB, 1GiB, 4096)")
    unit = m.group(2).lower()
    if unit not in _UNITS:
        raise DesignError(f"{text!r}: unknown unit {m.group(2)!r}")
    size = float(m.group(1)) * _UNITS[unit]
    if not math.isfinite(size):
        raise DesignError(f"{text!r} is not a finite size")
    return size


def parse_design(text: str) -> Design:
    """Parse a preset name or ``T=8,K=3,Z=1,buffer=1GiB,bloom_bits=10[,block=4096,threads=4,lsh=1]``."""
    text = text.strip()
    if text in PRESET_DESIGNS:
        return preset(text)
    if not text:
        raise DesignError("empty design")
    kw: dict[str, Any] = {}
    aliases = {
        "buffer": "buffer_bytes",
        "block": "block_bytes",
        "bits": "bloom_bits",
        "bloom": "bloom_bits",
        "alloc": "bloom_allocation",
        "range": "range_bits",
        "hot_codec": "codec_hot",
        "cold_codec": "codec_cold",
    }
    valid = {f.name for f in fields(Design)} - {"name"}
    for part in text.split(","):
        if "=" not in part:
            raise DesignError(f"{part.strip()!r} is not key=value (presets: {', '.join(PRESET_DESIGNS)})")
        k, v = (s.strip() for s in part.split("=", 1))
        key = aliases.get(k, k)
        if key not in valid:
            raise DesignError(
                f"unknown design knob {k!r} "
                "(T, K, Z, buffer, bloom_bits, bloom_allocation, block, threads, lsh, all_hot, hash_index_bytes, "
                "range_bits, codec_hot, codec_cold)"
            )
        if key in kw:
            raise DesignError(f"design knob {k!r} is given twice")
        try:
            if key in ("T", "K", "Z", "threads"):
                kw[key] = int(v)
            elif key in ("buffer_bytes", "block_bytes"):
                size = parse_size(v)
                if key == "block_bytes" and not size.is_integer():
                    raise DesignError(f"{k}={v!r}: a block is a whole number of bytes")
                kw[key] = int(size) if key == "block_bytes" else size
            elif key in ("bloom_bits", "hash_index_bytes", "range_bits"):
                kw[key] = float(v)
            elif key in ("lsh", "all_hot"):
                if v.lower() not in _BOOLEANS:
                    raise DesignError(f"{k}={v!r}: expected one of {', '.join(_BOOLEANS)}")
                kw[key] = _BOOLEANS[v.lower()]
            else:
                kw[key] = v
        except DesignError:
            raise
        except ValueError:
            raise DesignError(f"{k}={v!r} is not a valid value") from None
    return Design(**kw, name="custom").validate()


def preset(name: str) -> Design:
    """The paper's baselines as Table 1 and Sec. 7 initialize them."""
    if name not in PRESET_DESIGNS:
        raise DesignError(f"unknown preset {name!r} (known: {', '.join(PRESET_DESIGNS)})")
    return PRESET_DESIGNS[Preset(name)]


#: FASTER's hash index (paper Sec. 7.2): 64-byte buckets, one per 8 keys, plus 1/2048 overflow.
FASTER_BUCKET_BYTES = 64
FASTER_KEYS_PER_BUCKET = 8
FASTER_OVERFLOW_RATIO = 2048


def _presets() -> dict[Preset, Design]:
    buf = model_constants()["preset_buffer_bytes"]
    return {
        # RocksDB: T=10, K=Z=1, 10 bits/key Bloom filters on every level, fence
        # pointers for every level (no cold levels), 1 GB buffer, 4 KiB blocks.
        Preset.ROCKSDB: Design(
            T=10,
            K=1,
            Z=1,
            buffer_bytes=buf,
            bloom_bits=10.0,
            bloom_allocation=BloomAllocation.UNIFORM,
            block_bytes=4096,
            all_hot=True,
            name="rocksdb",
        ),
        # WiredTiger: B-tree, fanout T=32, no filters, 32 KB leaf pages; the
        # fence-pointer memory decides hot and cold levels.
        Preset.WIREDTIGER: Design(
            T=32, K=1, Z=1, buffer_bytes=buf, bloom_bits=0.0, block_bytes=32768, name="wiredtiger"
        ),
        # FASTER: a log-structured hash table (in-memory hash index over a log)
        # whose index is sized, by default, for 1/8 of the keys: N/8 buckets of
        # 64 bytes, (1 + 1/2048) with overflow buckets (paper Sec. 7 "Baselines"
        # and Sec. 7.2: 10^12/8 * 64 * (1 + 1/2048) bytes for 10^12 keys).
        Preset.FASTER: Design(
            buffer_bytes=buf,
            bloom_bits=0.0,
            lsh=True,
            block_bytes=4096,
            name="faster",
            hash_index_bytes=FASTER_BUCKET_BYTES / FASTER_KEYS_PER_BUCKET * (1 + 1 / FASTER_OVERFLOW_RATIO),
        ),
    }


#: The presets' designs, by name (:class:`specs.vocab.Preset`).
PRESET_DESIGNS: dict[Preset, Design] = _presets()


@dataclass
class DesignBatch:
    """Many designs as arrays (shape ``(n,)`` each)."""

    T: np.ndarray
    K: np.ndarray
    Z: np.ndarray
    buffer_bytes: np.ndarray
    bloom_bits: np.ndarray
    monkey: np.ndarray
    block_bytes: np.ndarray
    lsh: np.ndarray
    all_hot: np.ndarray
    hash_index_bytes: np.ndarray  # NaN: the template's hash log
    range_bits: np.ndarray  # range-filter bits per key (0: none)
    codec_hot: np.ndarray  # codec names (object arrays)
    codec_cold: np.ndarray

    @property
    def size(self) -> int:
        return int(self.T.size)

    @classmethod
    def of(cls, designs: list[Design]) -> DesignBatch:
        return cls(
            T=np.array([d.T for d in designs], dtype=float),
            K=np.array([d.K for d in designs], dtype=float),
            Z=np.array([d.Z for d in designs], dtype=float),
            buffer_bytes=np.array([d.buffer_bytes for d in designs], dtype=float),
            bloom_bits=np.array([d.bloom_bits for d in designs], dtype=float),
            monkey=np.array([d.bloom_allocation == BloomAllocation.MONKEY for d in designs]),
            block_bytes=np.array([d.block_bytes for d in designs], dtype=float),
            lsh=np.array([d.lsh for d in designs]),
            all_hot=np.array([d.all_hot for d in designs]),
            hash_index_bytes=np.array(
                [np.nan if d.hash_index_bytes is None else d.hash_index_bytes for d in designs], dtype=float
            ),
            range_bits=np.array([d.range_bits for d in designs], dtype=float),
            codec_hot=np.array([d.codec_hot for d in designs], dtype=object),
            codec_cold=np.array([d.codec_cold for d in designs], dtype=object),
        )

    def take(self, idx: np.ndarray | slice) -> DesignBatch:
        return DesignBatch(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def design(self, i: int, threads: int | None = None, name: str = "cosine") -> Design:
        return Design(
            T=int(self.T[i]),
            K=int(self.K[i]),
            Z=int(self.Z[i]),
            buffer_bytes=float(self.buffer_bytes[i]),
            bloom_bits=float(self.bloom_bits[i]),
            bloom_allocation=BloomAllocation.MONKEY if self.monkey[i] else BloomAllocation.UNIFORM,
            block_bytes=int(self.block_bytes[i]),
            lsh=bool(self.lsh[i]),
            all_hot=bool(self.all_hot[i]),
            threads=threads,
            name=name,
            hash_index_bytes=None if np.isnan(self.hash_index_bytes[i]) else float(self.hash_index_bytes[i]),
            range_bits=float(self.range_bits[i]),
            codec_hot=str(self.codec_hot[i]),
            codec_cold=str(self.codec_cold[i]),
        )
