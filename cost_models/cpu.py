"""Concurrency-aware CPU model (paper Sec. 4, Eq. 2-3, with the terms of docs/model.md).

The learned table (:class:`cost_models.phi.PhiTable`, every function here takes it) holds,
per design class and operation, the CPU seconds of one operation on a warm,
fully cached engine and its parallel fraction phi (Eq. 2, Algorithm 1); and,
for the whole engine, the CPU seconds of one block read (a fixed part and a
part per byte), of one flush/merge block on the background thread, of one
scanned entry and of the hash log's whole-index scan per key.

From them and the I/O model, a mix's operation splits into (docs/model.md):

* S, serial seconds: sum_o theta_o (1 - phi_o) c_o — what runs one at a time
  (for writes, the WAL append and memtable insert under the write lock);
* P, parallel seconds: sum_o theta_o (phi_o c_o + f_o t_read(block));
* D, device wait: sum_o theta_o f_o L (the volume's read latency; no core held);
* G, background seconds: sum_o theta_o b_o t_merge(block), on the engine's
  background thread;

with f_o the blocks the operation reads and b_o the flush/merge/WAL blocks
it causes. The node's throughput is Eq. 2 on those terms, with the cores the
background thread takes away (``throughput_shared_cores``), capped by the
background thread itself (X G <= workers) and by the device (IOPS, MiB/s).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np

from cost_models.io_model import IOCost, wal_pages
from cost_models.kernels import numba_kernels
from cost_models.phi import FLAT_SEARCHES, INDEX_WALKS, PhiTable
from cost_models.symbolic import compiled
from specs.vocab import DESIGN_CLASSES, MODELLED_WAL_SYNC, OPERATIONS, WRITE_OPERATIONS, DesignClass, Operation, WalSync


def _per_class(phi: PhiTable, key: str) -> np.ndarray:
    """(classes, operations) array of a per-class entry of the table."""
    table = phi["classes"]
    return np.array([[float(table[c][key].get(op, 0.0)) for op in OPERATIONS] for c in DESIGN_CLASSES])


def memtable_seconds(
    phi: PhiTable,
    entries: float | np.ndarray,
    per_doubling: str = "memtable_seconds_per_doubling",
    base: str = "memtable_base_entries",
) -> np.ndarray:
    """CPU of one descent of a memtable of ``entries`` beyond one of the ``base`` size (which fits
    the CPU's caches; its descent is part of every operation's cached CPU): the table's seconds
    per doubling (``per_doubling``: a search's, or an insert's, each past its own base),
    log2(entries / base) times."""
    t = phi
    b = float(t[base])
    e = np.maximum(np.asarray(entries, dtype=float), b)
    return float(t[per_doubling]) * np.log2(e / b)


#: Memtable descents of each operation whose CPU grows with the memtable, (searches, inserts): a
#: lookup searches it, a write inserts into it. A search and an insert grow differently with the
#: memtable (measured apart: ``memtable_seconds_per_doubling``,
#: ``memtable_insert_seconds_per_doubling``). An rmw searches for its key and then inserts it: the
#: insert descends the path the search just walked, in the CPU's caches, so only the search's
#: growth is paid — cached rmw runs at two memtables (``bench/rmw_cost.py``, three sessions, 24
#: points) differ by 0.08 us at 100,000 keys and 0.40 at 400,000 on average, where a search's
#: growth is 0.19 and 0.26 and a search's and an insert's 0.38 and 0.53 (docs/journal/s31-s42.md §33.7).
MEMTABLE_DESCENTS = {
    Operation.GET: (1.0, 0.0),
    Operation.EMPTY_GET: (1.0, 0.0),
    Operation.RANGE: (1.0, 0.0),
    Operation.INSERT: (0.0, 1.0),
    Operation.UPDATE: (0.0, 1.0),
    Operation.RMW: (1.0, 0.0),
    Operation.EMPTY_RANGE: (1.0, 0.0),
}
#: The table's seconds per doubling and base size of a search and of an insert, in
#: MEMTABLE_DESCENTS' order.
MEMTABLE_SLOPES = (
    ("memtable_seconds_per_doubling", "memtable_base_entries"),
    ("memtable_insert_seconds_per_doubling", "memtable_insert_base_entries"),
)


def memtable_descents_seconds(phi: PhiTable, entries: float | np.ndarray, op: str) -> np.ndarray:
    """CPU the memtable descents of one ``op`` cost beyond a base-size memtable's."""
    out = np.zeros(np.shape(entries))
    for n, (slope, base) in zip(MEMTABLE_DESCENTS[Operation(op)], MEMTABLE_SLOPES, strict=True):
        out = out + n * memtable_seconds(phi, entries, slope, base)
    return out


def search_slope(slopes: dict[str, float], cls: str, search: str) -> float:
    """Seconds per doubling of the keys of ``cls``'s ``search`` (0 for FLAT_SEARCHES)."""
    if (DesignClass(cls), Operation(search)) in FLAT_SEARCHES:
        return 0.0
    return float(slopes[search])


#: Which search each operation makes of the node's data structure (levels, fence pointers,
#: filters, block cache, hash index): a range seeks as a get does, an rmw reads as a get; a
#: write reaches only the memtable (none).
LOOKUP_OF = {
    Operation.EMPTY_RANGE: Operation.GET,
    Operation.GET: Operation.GET,
    Operation.EMPTY_GET: Operation.EMPTY_GET,
    Operation.RANGE: Operation.GET,
    Operation.RMW: Operation.GET,
}


def doublings(phi: PhiTable, n_keys: float | np.ndarray) -> np.ndarray:
    """log2(keys / the reference size of the lookups' CPU), 0 below it (the smallest calibrated size)."""
    ref = float(phi["lookup_reference_keys"])
    return np.asarray(np.log2(np.maximum(np.asarray(n_keys, dtype=float), ref) / ref), dtype=float)


def lookup_seconds(phi: PhiTable, cls: np.ndarray, n_keys: float | np.ndarray) -> np.ndarray:
    """(designs, operations) CPU the operations' searches cost beyond what they cost at the
    reference size: the class's seconds per doubling of the keys (for a get; for a search that
    finds nothing), log2(keys / reference) times. A larger structure misses the CPU's caches on
    more of its steps (one more fence-pointer or index step per doubling, each a likely miss once
    the structure outgrows the caches); below the reference size the CPU measured there holds."""
    t = phi["classes"]
    slope = np.array(
        [
            [
                search_slope(t[name]["lookup_seconds_per_doubling"], name, LOOKUP_OF[op]) if op in LOOKUP_OF else 0.0
                for op in OPERATIONS
            ]
            for name in DESIGN_CLASSES
        ]
    )
    code = np.asarray(cls, dtype=int)
    return slope[code] * np.broadcast_to(doublings(phi, n_keys), code.shape)[:, None]


def wal_seconds(phi: PhiTable, entry_bytes: float, policy: WalSync = MODELLED_WAL_SYNC) -> tuple[float, float]:
    """(foreground, background) CPU seconds of a write beyond the table's write CPU, one WAL group
    per write (phi.yaml ``wal``, `cosine calibrate wal`): its entry's copies and allocation past
    the table's reference entry (below 0 for smaller entries), and under a syncing ``policy`` the
    group's WAL write on the writer's thread and its sync on the engine's sync thread, which the
    table's writes (measured under ``wal_sync = "none"``) lack. Only ``group_commit`` is measured:
    ``every_write`` (a sync per write, ~60 us on tmpfs at stop 61) is charged as it, a lower bound."""
    w = phi["wal"]
    fg = float(w["seconds_per_byte"]) * (float(entry_bytes) - float(w["reference_entry_bytes"]))
    if policy == WalSync.NONE:
        return fg, 0.0
    return fg + float(w["group_seconds"]), float(w["group_background_seconds"])


def op_cpu_seconds(
    phi: PhiTable,
    cls: np.ndarray,
    n_keys: float | np.ndarray,
    scan_length: float,
    entry_bytes: float,
    wal_sync: WalSync = MODELLED_WAL_SYNC,
) -> np.ndarray:
    """(designs, operations) CPU seconds of each operation on a warm cached engine with an empty memtable.

    A lookup's CPU grows with the keys on the node (:func:`lookup_seconds`). A
    range adds its entries; a hash log's range scans its whole index (it has
    no order): its CPU is keys on the node x hash_scan_per_key_seconds (the
    table has no per-scan constant for it). A write (insert, update, an rmw's write) adds its
    entry's bytes and its WAL group's foreground CPU (:func:`wal_seconds`).
    """
    t = phi
    code = np.asarray(cls, dtype=int)
    c = _per_class(phi, "cpu_seconds")[code]
    c = c + lookup_seconds(phi, code, n_keys)
    c[:, _WRITES] += wal_seconds(phi, entry_bytes, wal_sync)[0]
    r = OPERATIONS.index(Operation.RANGE)
    per_entry = np.array([float(t["classes"][name]["range_entry_seconds"]) for name in DESIGN_CLASSES])
    c[:, r] += scan_length * per_entry[code]
    lsh = np.asarray(cls, dtype=int) == DesignClass.LSH.code
    keys = np.broadcast_to(np.asarray(n_keys, dtype=float), lsh.shape)
    for op in INDEX_WALKS:
        c[:, OPERATIONS.index(op)] += np.where(lsh, keys * float(t["hash_scan_per_key_seconds"]), 0.0)
    return c


def op_phi(phi: PhiTable, cls: np.ndarray) -> np.ndarray:
    """(designs, operations) parallel fraction of each operation's CPU (Eq. 2)."""
    return _per_class(phi, "phi")[np.asarray(cls, dtype=int)]


def op_concurrency(phi: PhiTable, cls: np.ndarray) -> np.ndarray:
    """(designs, operations) CPU per operation of a thread among others over a thread alone: the
    calibration's cached runs at 2 threads over 1 (``concurrent_cpu_factor``; shared data moving
    between the cores' caches). phi was measured on the 2-thread CPU (measure.calibrate.fit.fit_phi), so
    Eq. 2 holds for more than one thread with it (docs/model.md, "CPU and throughput")."""
    return _per_class(phi, "concurrent_cpu_factor")[np.asarray(cls, dtype=int)]


def block_time(block_bytes: float | np.ndarray, fixed: float, per_byte: float) -> np.ndarray:
    """Seconds for one block: a fixed part plus a part per byte of the block."""
    return fixed + per_byte * np.asarray(block_bytes, dtype=float)


#: The block size each class's block-read CPU is given at (phi.yaml ``block_read_seconds``).
REFERENCE_BLOCK_BYTES = 4096.0


def block_read_doublings(phi: PhiTable, n_keys: float | np.ndarray) -> np.ndarray:
    """Doublings of the data past the lookups' reference size that make a block's bytes dearer to
    copy (:func:`read_block_seconds`), held at the largest size the calibration measured
    (``block_read_growth_max_keys``): a copy that already misses the caches at that size is not
    extrapolated to slow further."""
    ref = float(phi["lookup_reference_keys"])
    top = math.log2(max(float(phi["block_read_growth_max_keys"]), ref) / ref)
    return np.minimum(doublings(phi, n_keys), top)


#: Whether the block-read curve continues its last segment's power law above its largest block
#: size (True: :func:`block_read_shape`'s measurement) rather than holding its value there.
EXTEND_UP = True


def block_read_shape(phi: PhiTable, block_bytes: float | np.ndarray) -> np.ndarray:
    """A block read's CPU at ``block_bytes`` over its CPU at 4 KiB: the ratios the calibration
    measured at the LSM design's block sizes (phi.yaml ``block_read_shape``: a calibration runs
    232 B to 32 KiB, measure.calibrate.plan.BLOCK_SIZE_STEPS; the written table's, refitted from
    calibrate-38, has 1, 4 and 16 KiB), a power law between each two (linear in log-log), held at
    the first below it and continued by the last two's power law above the last where it grows
    (:data:`EXTEND_UP`; held where the last two measured flat or lower, as on stop 60's host).
    Measured, not a law: a block has a fixed part (the cache shard's lookup, the read call, the
    decoder's set-up: 232 B and 464 B blocks cost alike) and a part that grows with its bytes (1 to
    16 KiB: about x1.5 per doubling). Past 16 KiB it keeps growing: a B-tree's 32 KiB blocks cost
    x1.43 (gets) and x1.57 (50-entry scans) its 16 KiB blocks' CPU on the Intel host of stop 57
    (docs/journal/s43-s51.md §27), the kernel's copy of the block and its zeroed buffer growing with
    its bytes; held at 16 KiB the model charged YCSB E's 32 KiB B-tree 0.55x the CPU the engine
    spent. (An LSM's gets at 32 KiB measured flat on the AMD host of §36.1.)"""
    shape = phi["block_read_shape"]
    return curve_at(block_bytes, shape["block_bytes"], shape["ratio"], extend_up=EXTEND_UP)


def curve_at(
    x: float | np.ndarray,
    knots: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    *,
    extend_up: bool = False,
) -> np.ndarray:
    """A measured curve through (``knots``, ``values``) at ``x``: linear in log-log between two
    knots (a power law), held at the end values past them; with ``extend_up`` the last two
    knots' power law continues above the last one when it grows (held when it does not)."""
    log_x = np.log2(np.asarray(x, dtype=float))
    lk, lv = np.log2(np.asarray(knots, dtype=float)), np.log2(np.asarray(values, dtype=float))
    out = np.interp(log_x, lk, lv)
    if extend_up and lk.size >= 2:
        # a growth continued, never a decline: a larger block does not cost less than the largest
        # measured (stop 60's calibration, AMD host: 32 KiB 2.182x a 4 KiB block, 16 KiB 2.201x)
        slope = max((lv[-1] - lv[-2]) / (lk[-1] - lk[-2]), 0.0)
        out = np.where(log_x > lk[-1], lv[-1] + slope * (log_x - lk[-1]), out)
    return np.asarray(np.exp2(out))


def read_block_seconds(
    phi: PhiTable, block_bytes: float | np.ndarray, cls: np.ndarray, n_keys: float | np.ndarray
) -> np.ndarray:
    """CPU to read one block of ``block_bytes`` on a design of class ``cls`` holding ``n_keys``: the
    class's time for a 4 KiB block times the measured curve of the block's bytes
    (:func:`block_read_shape`), plus a time per byte per doubling of the data
    (:func:`block_read_doublings`): the copy of a large block from a larger page cache misses more
    (measured: 32 KiB B-tree and 16 KiB LSM blocks 30 ps per byte per doubling dearer from 100,000
    to 400,000 keys, 1-4 KiB blocks within noise; docs/journal/s22-s30.md §23.2)."""
    t = phi
    at_4k = np.array([float(t["classes"][name]["block_read_seconds"]) for name in DESIGN_CLASSES])
    bb = np.asarray(block_bytes, dtype=float)
    grown = float(t["block_read_seconds_per_byte_doubling"]) * bb * block_read_doublings(phi, n_keys)
    return at_4k[np.asarray(cls, dtype=int)] * block_read_shape(phi, bb) + grown


def merge_block_seconds(
    phi: PhiTable, block_bytes: float | np.ndarray, cls: np.ndarray, entry_bytes: float
) -> np.ndarray:
    """Background-thread CPU per block a flush or merge moves (reading, merging, writing its
    entries); on a hash log each of the block's entries also updates the hash index (a flush
    inserts it, a GC looks it up and moves it): ``hash_index_entry_seconds`` per entry."""
    t = phi
    bb = np.asarray(block_bytes, dtype=float)
    lsh = np.asarray(cls, dtype=int) == DesignClass.LSH.code
    index = np.where(lsh, bb / entry_bytes * float(t["hash_index_entry_seconds"]), 0.0)
    return block_time(bb, float(t["background_block_seconds"]), float(t["background_block_seconds_per_byte"])) + index


def workload_phi(phi_table: PhiTable, cls: np.ndarray, mix: dict[str, float]) -> np.ndarray:
    """phi of a mix on each design's class: the parallel share of its cached CPU time.

    Weighted by time (each operation's CPU seconds), not by count as the
    paper's getPhiForWorkload does: a serial second weighs the same whichever
    operation spends it.
    """
    w = np.array([mix.get(op, 0.0) for op in OPERATIONS])
    c = _per_class(phi_table, "cpu_seconds")[np.asarray(cls, dtype=int)]
    phi = op_phi(phi_table, cls)
    return (c * phi) @ w / np.maximum(c @ w, 1e-300)


@dataclass(frozen=True)
class DeviceModel:
    """A node's storage as the CPU model sees it: its rates and its read latency."""

    iops: float = math.inf
    bytes_per_s: float = math.inf
    read_latency_s: float = 0.0


#: This machine's own device (tmpfs or a local disk): no rate limit, no added latency.
LOCAL_DEVICE = DeviceModel()


@dataclass
class NodeShape:
    """What the CPU model needs of a batch of designs on a node besides their I/O."""

    cls: np.ndarray  # class code per design (paper Algorithm 3)
    block_bytes: np.ndarray  # bytes per data block per design
    n_keys: float  # keys on the node
    entry_bytes: float  # key + value bytes
    buffered: np.ndarray  # expected entries in the memtable per design
    #: bytes of one on-disk index block per design (None: a data block's, the paper's every I/O is a block)
    index_bytes: np.ndarray | None = None
    #: the engine's WAL policy (:func:`wal_seconds`): the one the solver prices, or a configured engine's
    wal_sync: WalSync = MODELLED_WAL_SYNC

    @classmethod
    def of(cls, lay: Any) -> NodeShape:
        """The shape of a derived :class:`cost_models.layout.Layout`."""
        return cls(
            np.asarray(lay.cls),
            np.asarray(lay.B * lay.entry_bytes, dtype=float),
            float(lay.n_keys),
            float(lay.entry_bytes),
            np.asarray(lay.buffered, dtype=float),
        )

    def take(self, idx: np.ndarray) -> NodeShape:
        idx_bytes = None if self.index_bytes is None else self.index_bytes[idx]
        return NodeShape(
            self.cls[idx],
            self.block_bytes[idx],
            self.n_keys,
            self.entry_bytes,
            self.buffered[idx],
            idx_bytes,
            self.wal_sync,
        )


@dataclass
class Demands:
    """Seconds per operation of a mix (arrays over designs): docs/model.md's S, P, D, G."""

    serial: np.ndarray
    parallel: np.ndarray
    wait: np.ndarray
    background: np.ndarray
    io: np.ndarray
    io_bytes: np.ndarray
    #: write stalls (docs/model.md): merge cascades per operation and their background seconds,
    #: (designs, levels); and the operations the buffers absorb while one runs. None: no cascades.
    stall_rate: np.ndarray | None = None
    stall_seconds: np.ndarray | None = None
    stall_slack: np.ndarray | None = None
    #: the serial and parallel seconds an operation adds when more than one client thread runs
    #: (:func:`op_concurrency`); None: none
    serial_concurrent: np.ndarray | None = None
    parallel_concurrent: np.ndarray | None = None

    def at_threads(self, threads: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(S, P) with ``threads`` client threads: a thread among others pays the concurrent seconds."""
        if self.serial_concurrent is None or self.parallel_concurrent is None:
            return self.serial, self.parallel
        many = np.asarray(threads, dtype=float) >= 2
        return (
            self.serial + np.where(many, self.serial_concurrent, 0.0),
            self.parallel + np.where(many, self.parallel_concurrent, 0.0),
        )

    def scaled(self, factor: float) -> Demands:
        """These demands on a host whose CPU takes ``factor`` times the calibration host's seconds per
        operation (measure.host_speed.host_speed): every CPU second scales (S, P, G and the stalls'
        background seconds); the device's latency, I/Os and bytes do not."""
        if factor == 1.0:
            return self
        return replace(
            self,
            serial=self.serial * factor,
            parallel=self.parallel * factor,
            background=self.background * factor,
            stall_seconds=None if self.stall_seconds is None else self.stall_seconds * factor,
            serial_concurrent=None if self.serial_concurrent is None else self.serial_concurrent * factor,
            parallel_concurrent=None if self.parallel_concurrent is None else self.parallel_concurrent * factor,
        )

    def take(self, idx: np.ndarray) -> Demands:
        """The demands of the designs ``idx``."""
        opt = [
            None if v is None else v[idx]
            for v in (
                self.stall_rate,
                self.stall_seconds,
                self.stall_slack,
                self.serial_concurrent,
                self.parallel_concurrent,
            )
        ]
        return Demands(
            self.serial[idx],
            self.parallel[idx],
            self.wait[idx],
            self.background[idx],
            self.io[idx],
            self.io_bytes[idx],
            *opt,
        )


def split_io(io: IOCost) -> tuple[np.ndarray, np.ndarray]:
    """(designs, operations) blocks each operation reads itself, and flush/merge/WAL blocks it causes.

    Reads are foreground; a put's blocks are the background's; an rmw reads
    like a get and writes like a put (``io_model``: rmw = sigma_l + sigma_p).
    """
    per = {op: np.asarray(v, dtype=float) for op, v in io.per_op().items()}
    fg = np.stack([per[op] if op not in WRITE_OPERATIONS else 0.0 * per[op] for op in OPERATIONS], axis=-1)
    fg[..., OPERATIONS.index(Operation.RMW)] = np.minimum(per[Operation.GET], per[Operation.RMW])
    return fg, np.stack([per[op] for op in OPERATIONS], axis=-1) - fg


#: Which of OPERATIONS are puts (a WAL append and a memtable insert each).
_WRITES = np.array([op in WRITE_OPERATIONS for op in OPERATIONS])


@dataclass
class ShapeTerms:
    """What :func:`demands` needs of a :class:`NodeShape` alone, for one scan length (no I/O, no
    mix): the same for every mix on those designs (a robust spec's expected and noisy ones)."""

    cpu: np.ndarray  # (designs, operations): op_cpu_seconds
    descents: np.ndarray  # (designs, operations): memtable_descents_seconds
    phi: np.ndarray  # (designs, operations): op_phi
    block_bytes: np.ndarray  # (designs,)
    t_read: np.ndarray  # (designs, 1): read_block_seconds
    t_merge: np.ndarray  # (designs, 1): merge_block_seconds
    concurrency: np.ndarray  # (designs, operations): op_concurrency


def shape_terms(phi: PhiTable, shape: NodeShape, scan_length: float) -> ShapeTerms:
    """The :class:`ShapeTerms` of ``shape``'s designs."""
    # every operation descends the memtable: its CPU grows with the memtable
    entries = np.broadcast_to(shape.buffered, np.shape(shape.cls))
    bb = np.broadcast_to(np.asarray(shape.block_bytes, dtype=float), np.shape(shape.cls))
    return ShapeTerms(
        cpu=op_cpu_seconds(phi, shape.cls, shape.n_keys, scan_length, shape.entry_bytes, shape.wal_sync),
        descents=np.stack([memtable_descents_seconds(phi, entries, op) for op in OPERATIONS], axis=-1),
        phi=op_phi(phi, shape.cls),
        block_bytes=bb,
        t_read=read_block_seconds(phi, bb, shape.cls, shape.n_keys)[:, None],
        t_merge=merge_block_seconds(phi, bb, shape.cls, shape.entry_bytes)[:, None],
        concurrency=op_concurrency(phi, shape.cls),
    )


def demands(
    table: PhiTable,
    io: IOCost,
    shape: NodeShape,
    mix: dict[str, float],
    scan_length: float,
    read_latency_s: float = 0.0,
    terms: ShapeTerms | None = None,
) -> Demands:
    """S, P, D, G (and device I/Os and bytes) per operation of ``mix`` on each design.
    ``terms``: ``shape_terms(shape, scan_length)``, when the caller shares them between mixes."""
    w = np.array([mix.get(op, 0.0) for op in OPERATIONS], dtype=float)
    w = w / max(w.sum(), 1e-300)
    st = shape_terms(table, shape, scan_length) if terms is None else terms
    c = st.cpu.copy()
    if io.get_buffered is not None:
        # a lookup the buffer answers walks no level: it costs the buffered get's CPU
        t = table["classes"]
        buf = np.array([float(t[name]["buffer_get_seconds"]) for name in DESIGN_CLASSES])[
            np.asarray(shape.cls, dtype=int)
        ]
        g = OPERATIONS.index(Operation.GET)
        walk = np.maximum(c[:, g] - buf, 0.0) * np.asarray(io.get_buffered, dtype=float)
        for op in (Operation.GET, Operation.RMW):
            c[:, OPERATIONS.index(op)] -= walk
    c = c + st.descents
    phi = st.phi
    fg, bg = split_io(io)
    bb, t_read, t_merge = st.block_bytes, st.t_read, st.t_merge
    io_op = (fg + bg) @ w
    # bytes the volume moves: a block's bytes per I/O, an index block's own where they are split out
    io_bytes = io_op * bb
    if io.index is not None and shape.index_bytes is not None:
        idx = np.stack([np.asarray(v, dtype=float) for v in io.index.per_op().values()], axis=-1) @ w
        io_bytes = io_bytes - idx * (bb - np.broadcast_to(np.asarray(shape.index_bytes, dtype=float), bb.shape))
    # the WAL pages of a put are the writer's own append (in its cpu_seconds), not the background's
    wal = wal_pages(shape.entry_bytes)
    puts = _WRITES.astype(float)
    merged = np.maximum(bg - wal * puts, 0.0)
    # a thread among others: an operation meets the others' operations of its own kind (a write the
    # others' writes, a read their reads) as often as the mix has them; the calibration's cached runs
    # (one operation type) met them every time
    kind_share = np.where(_WRITES, w[_WRITES].sum(), w[~_WRITES].sum())
    extra = c * (st.concurrency - 1.0) * kind_share
    put_share = float(puts @ w)
    d = Demands(
        serial=((1 - phi) * c) @ w,
        parallel=(phi * c + fg * t_read) @ w,
        wait=(fg @ w) * read_latency_s,
        # the merges' blocks, and each write's WAL group synced by the engine's sync thread
        background=(merged * t_merge) @ w + put_share * wal_seconds(table, shape.entry_bytes, shape.wal_sync)[1],
        io=io_op,
        io_bytes=io_bytes,
        serial_concurrent=((1 - phi) * extra) @ w,
        parallel_concurrent=(phi * extra) @ w,
    )
    if io.cascades is not None and put_share > 0:
        cas = io.cascades
        d.stall_rate = np.asarray(cas.rate, dtype=float) * put_share
        d.stall_seconds = np.asarray(cas.blocks, dtype=float) * t_merge
        # a put share near 0 makes the slack overflow to inf: the buffers absorb every put (no stall),
        # the limit stalled() takes
        with np.errstate(over="ignore"):
            d.stall_slack = np.asarray(cas.slack_puts, dtype=float) / put_share
    return d


def stalled(x: np.ndarray, d: Demands) -> np.ndarray:
    """Throughput ``x`` (what the CPU bounds allow) less the write stalls of ``d``:
    1/X = 1/x + sum over cascades of rate * max(0, seconds - slack / x) (docs/model.md,
    "Write stalls")."""
    if d.stall_rate is None or d.stall_seconds is None or d.stall_slack is None:
        return x
    c = compiled()
    xe = np.asarray(x, dtype=float)[..., None]
    # slack / x overflows only where x is ~0: max(0, seconds - inf) = 0 is then the limit
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        per = c["stall_seconds"](xe, d.stall_rate, d.stall_seconds, d.stall_slack[..., None])
        # (``per`` is the expression's own array: its NaNs are replaced in place)
        t = np.where(np.isfinite(xe[..., 0]), np.nan_to_num(per, copy=False, nan=0.0).sum(axis=-1), 0.0)
        out = c["throughput_stalled"](x, t)
    return np.asarray(np.where(np.isfinite(x), out, x), dtype=float)


def background_workers() -> float:
    """Background threads of the engine template (one worker flushes and merges)."""
    from cost_models.design import model_constants

    return model_constants()["background_threads"]


def usable_cores(threads: float, cores: float) -> float:
    """Cores a node's work can occupy: its ``threads`` clients and the background thread(s), on at
    most the machine's ``cores`` (one client thread on two cores leaves the background thread a core
    of its own; it does not share the client's)."""
    return float(min(cores, threads + background_workers()))


def throughput(
    d: Demands,
    iops: float | np.ndarray,
    threads: float | np.ndarray,
    cores: float | np.ndarray | None = None,
    bytes_per_s: float | np.ndarray = math.inf,
) -> np.ndarray:
    """Operations per second of one node (docs/model.md, "CPU and throughput")."""
    return device_capped(cpu_throughput(d, threads, cores), d, iops, bytes_per_s)


def cpu_throughput(d: Demands, threads: float | np.ndarray, cores: float | np.ndarray | None = None) -> np.ndarray:
    """What :func:`throughput` is before the device's caps: the client threads' and the shared
    cores' bounds, the write stalls and the background thread's cap. It does not depend on the
    volume, so one serves every volume of a node (:func:`device_capped`)."""
    k = numba_kernels()
    if k is not None and np.ndim(threads) == 0 and (cores is None or np.ndim(cores) == 0) and np.ndim(d.serial) == 1:
        return _cpu_throughput_kernel(k, d, float(threads), float(threads if cores is None else cores))
    c = compiled()
    n = np.asarray(threads, dtype=float)
    eta = n if cores is None else np.asarray(cores, dtype=float)
    serial, parallel = d.at_threads(n)
    x = np.minimum(
        c["throughput_threads"](serial, parallel, d.wait, n),
        c["throughput_shared_cores"](serial, parallel, d.background, eta),
    )
    x = stalled(np.asarray(x, dtype=float), d)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.minimum(x, np.where(d.background > 0, background_workers() / d.background, np.inf))


def _cpu_throughput_kernel(k: ModuleType, d: Demands, threads: float, cores: float) -> np.ndarray:
    """:func:`cpu_throughput` of 1-D demands on scalar threads and cores, by the fused kernel
    (cost_models.kernels_numba.cpu_throughput; the numpy path above is its reference)."""
    f64 = np.ascontiguousarray
    n = d.serial.size
    vec = [f64(np.broadcast_to(np.asarray(v, dtype=float), (n,))) for v in (d.serial, d.parallel, d.wait, d.background)]
    zeros = np.zeros(n)
    conc = [
        zeros if v is None else f64(np.broadcast_to(np.asarray(v, dtype=float), (n,)))
        for v in (d.serial_concurrent, d.parallel_concurrent)
    ]
    stalls = d.stall_rate is not None and d.stall_seconds is not None and d.stall_slack is not None
    if stalls:
        r = np.asarray(d.stall_rate, dtype=float)
        rate = f64(np.broadcast_to(r, (n, r.shape[-1])))
        secs = f64(np.broadcast_to(np.asarray(d.stall_seconds, dtype=float), rate.shape))
        slack = f64(np.broadcast_to(np.asarray(d.stall_slack, dtype=float), (n,)))
    else:
        rate = secs = np.zeros((n, 0))
        slack = zeros
    out = k.cpu_throughput(*vec, *conc, rate, secs, slack, stalls, threads, cores, float(background_workers()))
    return np.asarray(out, dtype=float)


def device_capped(
    x: np.ndarray, d: Demands, iops: float | np.ndarray, bytes_per_s: float | np.ndarray = math.inf
) -> np.ndarray:
    """:func:`cpu_throughput` ``x`` capped by a volume's I/Os per second and bytes per second."""
    c = compiled()
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.minimum(x, np.where(d.io > 0, c["throughput_io"](iops, np.where(d.io > 0, d.io, 1.0)), np.inf))
        x = np.minimum(x, np.where(d.io_bytes > 0, bytes_per_s / np.where(d.io_bytes > 0, d.io_bytes, 1.0), np.inf))
    return np.asarray(x, dtype=float)


def node_throughput(
    phi: PhiTable,
    io: IOCost,
    iops: float | np.ndarray,
    shape: NodeShape,
    mix: dict[str, float],
    threads: float | np.ndarray,
    scan_length: float,
    *,
    cores: float | np.ndarray | None = None,
    read_latency_s: float = 0.0,
    bytes_per_s: float | np.ndarray = math.inf,
    extra_cpu: float | np.ndarray = 0.0,
) -> np.ndarray:
    """Operations per second one node sustains: the CPU model over the I/O model, capped by the device.

    ``threads`` client threads run on ``cores`` cores (default: as many as
    threads, the solver's eta = vCPUs); ``iops`` and ``bytes_per_s`` are the
    volume's rates (inf: the local device), ``read_latency_s`` its service
    time per foreground read (0: the paper's model, where the device's rate
    is reachable). ``extra_cpu``: single-thread seconds per operation a design adds to the
    class's measured CPU (block compression, cost_models.compression), on any core (P).
    """
    d = node_demands(phi, io, shape, mix, scan_length, read_latency_s, extra_cpu)
    return throughput(d, iops, threads, cores, bytes_per_s)


def node_demands(
    phi: PhiTable,
    io: IOCost,
    shape: NodeShape,
    mix: dict[str, float],
    scan_length: float,
    read_latency_s: float = 0.0,
    extra_cpu: float | np.ndarray = 0.0,
    terms: ShapeTerms | None = None,
) -> Demands:
    """:func:`demands` with ``extra_cpu`` (see :func:`node_throughput`) on the parallel part: what a
    node's throughput needs of its designs whatever its volume and threads (:func:`throughput`
    then broadcasts these arrays over many volumes' IOPS at once); ``terms`` as :func:`demands`'."""
    d = demands(phi, io, shape, mix, scan_length, read_latency_s, terms)
    d.parallel = d.parallel + np.asarray(extra_cpu, dtype=float)
    return d


def envelope_rows(phi: PhiTable) -> list[dict[str, Any]]:
    """The calibrated envelope: per class and calibration workload, the highest per-core throughput measured."""
    return list(phi.get("envelope", []))
