"""The cost model of one rendered engine (an ``engine.toml``), exactly as configured.

The search derives hot levels, per-level Bloom bits and the block cache from a
memory size; a rendered engine fixes them. To compare the model with the
engine (``cosine validate``) the model must describe the configuration the
engine runs, so this module maps engine.toml onto the layout (same
``level_shape``/``split_memory``/``io_costs`` as everywhere else, with the
engine's values as overrides) and the contract's workload.json onto a mix and
key partitions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ParamSpec, TypeVar

import numpy as np

from cost_models.cpu import (
    LOCAL_DEVICE,
    Demands,
    DeviceModel,
    NodeShape,
    background_workers,
    demands,
    split_io,
    throughput,
    usable_cores,
)
from cost_models.design import Design, DesignBatch, model_constants
from cost_models.distributions import Partitions, partitions
from cost_models.io_model import (
    IOCost,
    MergeTerms,
    exact_windows,
    insert_fraction,
    io_costs,
    merge_terms,
    overwrites_keys,
    wal_pages,
)
from cost_models.layout import (
    Layout,
    PutStream,
    flush_window,
    index_fanout,
    level_shape,
    partial_levels,
    split_memory,
)
from cost_models.phi import PhiTable, shipped_or
from cost_models.transient import RunMerges, Tree, start_runs, with_deep_merges
from cost_models.windows import ExactWindow
from specs.errors import InputError
from specs.limits import MAX_LEVELS
from specs.schema import DEFAULT_EMPTY_RANGE_WIDTH, Distribution
from specs.vocab import (
    MODELLED_WAL_SYNC,
    OPERATIONS,
    WRITE_OPERATIONS,
    BloomAllocation,
    Compaction,
    DesignClass,
    DistributionKind,
    Operation,
    RunStrategy,
    WalSync,
)

E = TypeVar("E", Compaction, RunStrategy)
P = ParamSpec("P")


def distribution(d: dict[str, Any]) -> Distribution:
    """A workload.json distribution object as a spec Distribution."""
    kind = d.get("kind", DistributionKind.UNIFORM)
    if kind not in set(DistributionKind):
        raise InputError(f"workload.json: unknown distribution kind {kind!r} (valid: {', '.join(DistributionKind)})")
    kw = {k: float(v) for k, v in d.items() if k != "kind"}
    return Distribution(kind=DistributionKind(kind), **kw)


def observed_state(shape: dict[str, Any] | None) -> tuple[float, list[tuple[float, float]]] | None:
    """The engine's reported shape (``load.shape`` of cosine-bench) as the model's observed state."""
    if not shape:
        return None
    levels = sorted(shape.get("levels", []), key=lambda lv: lv["level"])
    return float(shape.get("buffered", 0)), [(float(lv["entries"]), float(lv["runs"])) for lv in levels]


def merge_policy(cfg: dict[str, Any]) -> tuple[np.ndarray | None, float | None, RunStrategy | None]:
    """An engine.toml's own merge policy: which disk levels merge file by file (MAX_LEVELS of
    them), entries per file and the run a partial merge starts from; None where the file leaves
    it to the class (a rendered engine's is its class's, cost_models.layout.CLASS_COMPACTION)."""
    alg = cfg.get("algorithms", {})
    compaction = _algorithm(alg, "compaction", Compaction)
    full = int(alg.get("full_compaction_levels", 0))
    partial = None if compaction is None else partial_levels(compaction, full, MAX_LEVELS)
    files = float(alg["file_entries"]) if "file_entries" in alg else None
    return partial, files, _algorithm(alg, "run_strategy", RunStrategy)


def _algorithm(alg: dict[str, Any], key: str, kind: type[E]) -> E | None:
    """engine.toml ``algorithms.<key>`` as one of ``kind``'s members (None when absent)."""
    if key not in alg:
        return None
    if alg[key] not in set(kind):
        raise InputError(f"engine.toml algorithms.{key}: {alg[key]!r} is not one of {', '.join(kind)}")
    return kind(alg[key])


def engine_layout(
    cfg: dict[str, Any],
    n_keys: float,
    levels: int | None = None,
    observed: tuple[float, list[tuple[float, float]]] | None = None,
    *,
    overwrites: bool,
    puts: PutStream | None = None,
) -> Layout:
    """The layout of a configured engine holding ``n_keys`` entries (optionally in a known state)
    under a workload that overwrites keys or not, with the put stream ``puts``
    (:func:`cost_models.layout.level_shape`; :func:`put_stream` of a workload.json)."""
    lay = cfg["layout"]
    key, value = int(lay["key_bytes"]), int(lay["value_bytes"])
    entry = key + value
    lsh = cfg["design"]["class"] == "lsh"
    bits = [float(b) for b in lay.get("bloom_bits_per_key", [0.0])] or [0.0]
    d = Design(
        T=float(lay["size_ratio"]),  # type: ignore[arg-type]  # an engine's T may be fractional
        K=int(lay["runs_per_hot_level"]),
        Z=int(lay["runs_per_cold_level"]),
        buffer_bytes=float(lay["buffer_bytes"]),
        bloom_bits=float(np.mean(bits)),
        bloom_allocation=BloomAllocation.UNIFORM,
        block_bytes=int(lay["block_entries"]) * entry,
        lsh=lsh,
    )
    batch = DesignBatch.of([d])
    if observed is not None and levels is None:
        levels = max(1, len(observed[1]))
    partial, files, strategy = merge_policy(cfg)
    sh = level_shape(
        batch,
        n_keys,
        key,
        value,
        levels,
        observed=observed,
        partial=partial,
        file_entries=files,
        run_strategy=strategy,
        overwrites=overwrites,
        puts=puts,
    )
    lm = sh.cap.shape[1]
    per_level = np.array([bits[min(i, len(bits) - 1)] for i in range(lm)])[None, :]
    lay_ = split_memory(
        sh,
        batch,
        float("inf"),
        hot_levels=np.array([float(lay.get("hot_levels", lm))]),
        bits_per_level=per_level,
        cache_bytes=np.array([float(lay.get("block_cache_bytes", 0))]),
    )
    rf = [float(b) for b in cfg.get("range_filter", {}).get("bits_per_height", [])]
    if any(b > 0 for b in rf):  # the engine's own allocation, not the model's
        lay_.range_bits = np.array([sum(rf)])
        lay_.range_per_height = tuple(rf)
    return lay_


def workload_partitions(workload: dict[str, Any], n_keys: float) -> Partitions:
    """The key partitions of a workload.json's get and put distributions over ``n_keys`` keys."""
    dist = workload.get("distribution", {})
    return partitions(distribution(dist.get("get", {})), distribution(dist.get("put", {})), n_keys)


def workload_layout(
    cfg: dict[str, Any],
    workload: dict[str, Any],
    n_keys: float,
    observed: tuple[float, list[tuple[float, float]]] | None = None,
) -> Layout:
    """:func:`engine_layout` of a configured engine holding ``n_keys`` entries under a workload.json:
    whether its mix overwrites keys, and its put stream (a run's batches shadow the keys they
    overwrite, more so under skew: cost_models.layout.run_fill)."""
    mix = {k: float(v) for k, v in workload["mix"].items()}
    puts = exact_windows(workload_partitions(workload, n_keys), mix, n_keys)[0]
    return engine_layout(cfg, n_keys, observed=observed, overwrites=overwrites_keys(mix), puts=puts)


def steady_merges(lay: Layout, parts: Partitions, mix: dict[str, float]) -> MergeTerms:
    """io_model.merge_terms of a one-design layout at its own key count, with the mix's put windows."""
    iota = insert_fraction(mix)
    n = float(lay.n_keys)
    return merge_terms(lay, parts, iota, ExactWindow(parts.put, n, iota))


def write_share(mix: dict[str, float]) -> float:
    """Share of a mix's operations that put (insert, update, read-modify-write); 0 for an empty mix."""
    total = sum(mix.values())
    return sum(mix.get(o, 0.0) for o in WRITE_OPERATIONS) / total if total > 0 else 0.0


def deepest_merge_puts(cfg: dict[str, Any], workload: dict[str, Any]) -> float:
    """Puts between two merges into the last level of a configured engine holding the workload.json's
    records (io_model.merge_terms' ``puts_per_merge``; a store of one level: its flushes; the
    deepest level merges reach, when a level above holds every key). Under skewed puts a buffer and
    each run take more puts to fill with distinct keys than they hold (the windows), so the cycle is
    longer than the entries it moves: YCSB A on the hybrid preset at 250,000 records merges into its
    last level every 263,000 puts, where the entries above it (buffer and levels 1-2) are 140,000
    (docs/journal/s22-s30.md §25)."""
    n = float(workload["records"])
    mix = {k: float(v) for k, v in workload["mix"].items()}
    parts = workload_partitions(workload, n)
    lay = workload_layout(cfg, workload, n)
    mt = steady_merges(lay, parts, mix)
    levels = int(lay.L[0])
    # the deepest level merged into: a leveled level above that holds every key never merges
    # down (io_model.merge_terms), and the level below it keeps what the tree deepened with
    cycles = [float(q) for q in mt.puts_per_merge[0, :levels] if math.isfinite(float(q))]
    return cycles[-1] if cycles else float(mt.puts_per_flush[0])


def steady_depth(cfg: dict[str, Any], workload: dict[str, Any]) -> int | None:
    """Levels of a configured engine's steady tree under a workload.json that overwrites keys and
    inserts none (None: a hash log, a mix without writes, or one whose inserts grow the tree).

    Under overwrites a tiered last level keeps its older runs and is pushed down once they pass
    its capacity (layout.last_level_room), so the tree the load builds can be a level shallower
    than the one the workload keeps: the engine deepens it some flushes into the warm-up, and a
    warm-up counted from the load ended just after that on the ranking's YCSB B pick (T 6, Z 5;
    level 1 empty, every lookup in the cold level 2 and its on-disk index: 0.49 blocks per
    operation against the steady state's 0.30, docs/journal/s31-s42.md §37). cosine-bench's
    ``warmup_depth`` first overwrites keys until the tree is this deep, then every key once more."""
    mix = {k: float(v) for k, v in workload["mix"].items()}
    if cfg["design"]["class"] == DesignClass.LSH or not write_share(mix) > 0 or mix.get("insert", 0.0) > 0:
        return None
    lay = workload_layout(cfg, workload, float(workload["records"]))
    return int(lay.L[0])


def run_keys(workload: dict[str, Any]) -> tuple[float, float]:
    """(keys in the store when a workload.json's measured phase begins, keys it inserts): the load's
    records and a warm-up phase's inserts, then the measured operations' inserts."""
    mix = {k: float(v) for k, v in workload["mix"].items()}
    total = sum(mix.values())
    if not total > 0:
        raise InputError("workload.json: the operation mix is empty")
    share = mix.get("insert", 0.0) / total
    n0 = float(workload["records"]) + float(workload.get("warmup_operations", 0)) * share
    return n0, float(workload.get("operations", 0)) * share


def predict(
    cfg: dict[str, Any],
    workload: dict[str, Any],
    n_keys: float | None = None,
    shape: dict[str, Any] | None = None,
    end_shape: dict[str, Any] | None = None,
    frozen: float = 0.0,
    merges: RunMerges | None = None,
) -> IOCost:
    """Expected blocks per operation of a configured engine on a workload.json.

    ``shape`` / ``end_shape``: the engine's state when the measured phase began
    and ended (``load.shape`` and ``stats`` of a cosine-bench report): reads
    are predicted on both and averaged. Writes keep the expected, cycle-average
    occupancy (merges are amortized over a level's fill cycle) at the run's
    mean key count (inserts grow the store). ``frozen``: the frozen buffers a lookup finds on
    average while the run cycles its buffer (:func:`frozen_buffers`; 0, the solver's view: an
    upper bound on the reads). ``merges``: the flushes and the merges into the deepest level the
    run completed, when known (:func:`transient_put`).
    """
    mix = {k: float(v) for k, v in workload["mix"].items()}
    n0, inserted = run_keys(workload)
    total = sum(mix.values())
    n_mean = float(n_keys) if n_keys is not None else n0 + inserted / 2
    scan = float(workload.get("scan_length", 1))

    def io_at(n: float, observed: dict[str, Any] | None) -> IOCost:
        parts = workload_partitions(workload, n)
        width = int(workload.get("empty_range_width", DEFAULT_EMPTY_RANGE_WIDTH))
        lay = workload_layout(cfg, workload, n, observed_state(observed))
        return io_costs(lay, parts, mix, scan, None, width)

    expected = io_at(n_mean, None)
    if shape is None:
        return expected
    puts = float(workload.get("operations", 0)) * write_share(mix)
    put = expected.insert
    if puts > 0:
        parts = workload_partitions(workload, n_mean)
        lay = workload_layout(cfg, workload, n_mean)
        warm = float(workload.get("warmup_operations", 0)) * (mix.get("update", 0.0) + mix.get("rmw", 0.0)) / total
        put = transient_put(
            cfg, lay, parts, mix, shape, puts, fallback=expected.insert, warmup_overwrites=warm, merges=merges
        )
        if puts >= puts_per_flush(lay, parts, mix):
            # the buffer fills and empties during the run: its time average is the steady
            # fill (the layout's own) and the frozen buffers waiting for the worker, not what
            # the two snapshots caught
            steady = float(lay.buffered[0]) + frozen * float(lay.E_B[0])
            shape = {**shape, "buffered": steady}
            end_shape = None if end_shape is None else {**end_shape, "buffered": steady}
    states = [io_at(n0, shape)] + ([io_at(n0 + inserted, end_shape)] if end_shape else [])

    def avg(op: str) -> np.ndarray:
        return sum(getattr(s, op) for s in states) / len(states)

    indexes = [s.index for s in states if s.index is not None]
    index = (
        IOCost(**{op: sum(getattr(i, op) for i in indexes) / len(indexes) for op in OPERATIONS})
        if len(indexes) == len(states)
        else None
    )
    return IOCost(
        get=avg("get"),
        empty_get=avg("empty_get"),
        range=avg("range"),
        insert=put,
        update=put.copy(),
        rmw=avg("get") + put,
        empty_range=avg("empty_range"),
        get_buffered=avg("get_buffered"),
        index=index,
        cascades=expected.cascades,  # the steady state's: a stall is a merge's length, not its count
    )


def run_start_buffered(cfg: dict[str, Any], workload: dict[str, Any]) -> int | None:
    """Entries the buffer should hold when a workload.json's measured phase starts, for the run's
    time average to be the layout's steady buffer (``level_fill`` of it): a run whose puts fill
    less than the buffer (``puts_per_flush``) sees only that part of a fill, and started where
    the last flush left it, it sees the buffer's emptiest part. YCSB D's gets read the latest
    inserts: at 3,000 IOPS the ranking's pick (a 10,000-entry buffer, 2,500 run inserts) started
    with 57 entries, answered 65 % of its gets from the buffer against the model's 77 % and read
    0.31 blocks per operation against 0.23 (docs/journal/s22-s30.md §28). The run adds its puts' share of a
    fill (linear in the puts: exact for inserts, a little short for skewed updates). None when
    the run fills the buffer (it cycles it) or does not write."""
    mix = {k: float(v) for k, v in workload["mix"].items()}
    puts = float(workload.get("operations", 0)) * write_share(mix)
    if not puts > 0:
        return None
    n0, inserted = run_keys(workload)
    n = n0 + inserted / 2
    lay = workload_layout(cfg, workload, n)
    q0, moved = flush_of(lay, workload_partitions(workload, n), mix)
    if not (math.isfinite(q0) and puts < q0):
        return None
    added = moved * puts / q0
    return max(0, round(float(lay.buffered[0]) - added / 2))


def flush_of(lay: Layout, parts: Partitions, mix: dict[str, float]) -> tuple[float, float]:
    """(Q_0, entries a flush moves) of a one-design layout: the puts that fill its buffer with
    distinct keys, or its put limit and the distinct keys of those (layout.flush_window)."""
    win = ExactWindow(parts.put, float(lay.n_keys), insert_fraction(mix))
    q0, moved = flush_window(lay.E_B, win)
    return float(q0[0]), float(moved[0])


def puts_per_flush(lay: Layout, parts: Partitions, mix: dict[str, float]) -> float:
    """Q_0 of a one-design layout (:func:`flush_of`)."""
    return flush_of(lay, parts, mix)[0]


def transient_put(
    cfg: dict[str, Any],
    lay: Layout,
    parts: Partitions,
    mix: dict[str, float],
    shape: dict[str, Any],
    puts: float,
    fallback: np.ndarray,
    warmup_overwrites: float = 0.0,
    merges: RunMerges | None = None,
) -> np.ndarray:
    """Write blocks per put of a run of ``puts`` puts that starts in the observed state.

    The steady-state model amortizes each merge over its level's fill cycle at a fixed size; a
    run of a few cycles pays for the merges that actually happen in it, and a run that inserts
    grows the tree under it. ``cost_models.transient`` replays the engine contract from the
    observed state, one flush (every ``Q_0`` puts) at a time, and prices every merge.
    ``warmup_overwrites``: overwrites the store took before the run (a warm-up phase) on top
    of its load. ``merges``: the flushes and the merges into the deepest level the run completed
    (its report's ``run``, :func:`measure.engine.run_merges`), when known: the replay makes that
    many flushes and is priced with that many deep merges
    (:func:`cost_models.transient.with_deep_merges`). Hash logs have no levels: the
    steady-state cost (``fallback``) is kept.
    """
    if lay.lsh[0]:
        return fallback
    e_b = float(lay.E_B[0])
    q0, moved = flush_of(lay, parts, mix)  # a flush at the put limit moves its puts' distinct keys
    # every level the tree may deepen to (the layout's stop at its mean size's depth)
    partial = merge_policy(cfg)[0]
    lay_cfg = cfg["layout"]
    tree = Tree(
        buffer_entries=e_b,
        size_ratio=float(lay_cfg["size_ratio"]),
        hot_runs=int(lay_cfg["runs_per_hot_level"]),
        cold_runs=int(lay_cfg["runs_per_cold_level"]),
        threshold=float(cfg.get("algorithms", {}).get("merge_threshold", 1.0)),
        partial=[bool(p) for p in (partial if partial is not None else np.full(MAX_LEVELS, lay.partial[0].any()))],
        file_entries=float(lay.file_entries[0]),
        run_strategy=lay.run_strategy,
        block_entries=float(lay.B[0]),
        overwrite_share=1.0 - insert_fraction(mix),
        n_keys=float(lay.n_keys),
    )
    observed = {int(lv["level"]): lv for lv in shape.get("levels", []) if float(lv["entries"]) > 0}
    for i in sorted(observed):  # placeholders first: a run's capacity depends on the depth
        tree.runs(i).append(float(observed[i]["entries"]))
    # a loaded store holds each key once; overwrites before the run (a warm-up) shadow older
    # versions from the top down: every entry on disk but the never-overwritten keys' one
    on_disk = sum(float(lv["entries"]) for lv in observed.values())
    loaded = max(float(lay.n_keys) - float(shape.get("buffered", 0)), 0.0)
    shadowing = max(on_disk - loaded * math.exp(-warmup_overwrites / max(float(lay.n_keys), 1.0)), 0.0)
    for i in sorted(observed):
        lv = observed[i]
        tree.start(i, start_runs(float(lv["entries"]), int(lv["runs"]), tree.run_capacity(i)), shadowing)
        shadowing -= float(lv["entries"])
    flushes = math.floor(float(shape.get("buffered", 0)) / e_b + puts / q0) if q0 > 0 else 0
    if merges is not None and merges.flushes is not None:
        flushes = merges.flushes
    for _ in range(flushes):
        tree.flush(moved)
    blocks = tree.blocks
    if merges is not None:
        # the size of a deep merge, needed only when the run made one the replay did not
        per_merge = 0.0
        if merges.deep > len(tree.deep) and not tree.deep:
            per_merge = deep_merge_blocks(lay, parts, mix, merges.deep_spacing_operations)
        blocks = with_deep_merges(blocks, tree.deep, merges.deep, per_merge)
    return np.array([blocks / puts + wal_pages(lay.entry_bytes)])


def deep_merge_blocks(lay: Layout, parts: Partitions, mix: dict[str, float], spacing_operations: float | None) -> float:
    """Blocks of one merge into the deepest level: the steady model's amortized cost of those
    merges per put times the puts between two of them in the engine (``spacing_operations``
    times the mix's put share), or the model's own per-merge size when the engine's spacing is
    not known. The amortized cost held where the spacing did not (docs/journal/s22-s30.md §26.1, §27.1)."""
    mt = steady_merges(lay, parts, mix)
    last = max(int(lay.L[0]), 1) - 1
    per_merge = float(mt.per_merge[0, last])
    cycle = float(mt.puts_per_merge[0, last])
    share = write_share(mix)
    if spacing_operations is None or not spacing_operations > 0 or not cycle > 0 or not share > 0:
        return per_merge
    return per_merge / cycle * spacing_operations * share


def engine_shape(cfg: dict[str, Any], records: float, state: dict[str, Any] | None = None) -> NodeShape:
    """The CPU model's view of an engine.toml: its class, block size and memtable (the entries
    ``state`` reports, else the expected half of the buffer)."""
    lay = cfg["layout"]
    entry = int(lay["key_bytes"]) + int(lay["value_bytes"])
    buffered = (
        float(state["buffered"])
        if state and "buffered" in state
        else model_constants()["level_fill"] * int(lay["buffer_bytes"]) // entry
    )
    block = float(int(lay["block_entries"]) * entry)
    return NodeShape(
        np.array([DesignClass(cfg["design"]["class"]).code]),
        np.array([block]),
        float(records),
        entry,
        np.array([buffered]),
        index_bytes=np.array([index_block_bytes(cfg, block, records)]),
        wal_sync=WalSync(cfg.get("durability", {}).get("wal_sync", MODELLED_WAL_SYNC)),
    )


def index_block_bytes(cfg: dict[str, Any], block_bytes: float, n_keys: float) -> float:
    """Bytes of one on-disk index block of a configured engine holding ``n_keys``: the fence
    pointers (key + offset + length each, ``model_constants: fence_entry_overhead_bytes`` beyond
    the key) of one index block's share of a file's data blocks (a file holds ``file_entries``,
    or all the keys if fewer). The engine packs about a data block's worth of fences per index
    block, so a file of fewer data blocks than that has one smaller index block (the B-tree
    preset: 233 blocks of 32 KiB per 65,536-entry file, one 6.5 KiB index block)."""
    lay = cfg["layout"]
    fence = int(lay["key_bytes"]) + model_constants()["fence_entry_overhead_bytes"]
    fanout = float(index_fanout(block_bytes, int(lay["key_bytes"])))
    entries = min(float(cfg["algorithms"]["file_entries"]), max(float(n_keys), 1.0))
    blocks = math.ceil(entries / max(int(lay["block_entries"]), 1))
    per_index = blocks / math.ceil(blocks / fanout)
    return float(min(block_bytes, per_index * fence))


def _memtable_state(
    cfg: dict[str, Any], workload: dict[str, Any], shape: dict[str, Any] | None, end_shape: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The memtable of a run: what it started and ended with when no write cycles it (the model's
    expected half of the buffer when writes do)."""
    mix = workload.get("mix", {})
    if shape is None or any(float(mix.get(o, 0.0)) > 0 for o in WRITE_OPERATIONS):
        return None
    end = float((end_shape or shape).get("buffered", shape.get("buffered", 0)))
    return {"buffered": (float(shape.get("buffered", 0)) + end) / 2}


def _io_and_demands(
    cfg: dict[str, Any],
    workload: dict[str, Any],
    device: DeviceModel,
    shape: dict[str, Any] | None,
    end_shape: dict[str, Any] | None,
    frozen: float,
    cpu_scale: float,
    merges: RunMerges | None,
    phi: PhiTable | None,
) -> tuple[IOCost, Demands]:
    """The I/O model's cost and the CPU model's demands of :func:`engine_demands`."""
    io = predict(cfg, workload, shape=shape, end_shape=end_shape, frozen=frozen, merges=merges)
    mix = {k: float(v) for k, v in workload["mix"].items() if float(v) > 0}
    d = demands(
        shipped_or(phi),
        io,
        engine_shape(cfg, float(workload["records"]), _memtable_state(cfg, workload, shape, end_shape)),
        mix,
        float(workload.get("scan_length", 1)),
        device.read_latency_s,
    )
    return io, d.scaled(cpu_scale)


def _blocks(io: IOCost, workload: dict[str, Any]) -> float:
    """Blocks per operation of ``workload``'s mix."""
    return float(io.total({k: float(v) for k, v in workload["mix"].items() if float(v) > 0})[0])


def engine_demands(
    cfg: dict[str, Any],
    workload: dict[str, Any],
    device: DeviceModel = LOCAL_DEVICE,
    shape: dict[str, Any] | None = None,
    end_shape: dict[str, Any] | None = None,
    frozen: float = 0.0,
    cpu_scale: float = 1.0,
    merges: RunMerges | None = None,
    phi: PhiTable | None = None,
) -> tuple[Demands, float]:
    """The CPU model's demands (S, P, D, G, write stalls) per operation of a configured engine running
    a workload.json on ``device``, and its blocks per operation; ``shape``/``end_shape``/``frozen``/
    ``merges`` as in :func:`predict` (None: the model's expected state); ``cpu_scale``: the
    host's CPU seconds relative to the calibration host's (:meth:`Demands.scaled`); ``phi``: the CPU
    model's table (None: the shipped one)."""
    io, d = _io_and_demands(cfg, workload, device, shape, end_shape, frozen, cpu_scale, merges, phi)
    return d, _blocks(io, workload)


@dataclass(frozen=True)
class EngineBreakdown:
    """What :func:`engine_breakdown` predicts for one run: the throughput and what it is made of."""

    #: operations per second
    throughput: float
    #: blocks read and written per operation
    blocks: float
    #: S, P, D, G per operation (one design), with the run's frozen buffers
    demands: Demands
    #: the I/O model's cost, its share of lookups the buffer answers (``get_buffered``) included
    io: IOCost


def engine_breakdown(
    cfg: dict[str, Any],
    workload: dict[str, Any],
    cores: int,
    device: DeviceModel = LOCAL_DEVICE,
    shape: dict[str, Any] | None = None,
    end_shape: dict[str, Any] | None = None,
    cpu_scale: float = 1.0,
    merges: RunMerges | None = None,
    phi: PhiTable | None = None,
) -> EngineBreakdown:
    """:func:`engine_throughput`'s prediction with the demands and I/O cost it came from."""
    f = frozen_buffers(cfg, workload, cores, device, shape, end_shape, cpu_scale, merges, phi)
    io, d = _io_and_demands(cfg, workload, device, shape, end_shape, f, cpu_scale, merges, phi)
    th = int(workload["threads"])
    x = throughput(d, device.iops, th, usable_cores(th, cores), device.bytes_per_s)
    return EngineBreakdown(float(x[0]), _blocks(io, workload), d, io)


def op_seconds(
    cfg: dict[str, Any],
    workload: dict[str, Any],
    breakdown: EngineBreakdown,
    device: DeviceModel = LOCAL_DEVICE,
    shape: dict[str, Any] | None = None,
    end_shape: dict[str, Any] | None = None,
    phi: PhiTable | None = None,
) -> dict[Operation, float]:
    """Seconds a worker spends on one operation of each type (every one of OPERATIONS) on the I/O
    :func:`engine_breakdown` predicted for ``workload`` (``breakdown``): its foreground CPU (the CPU
    model's serial and parallel parts of a mix of it alone: its own CPU and its block reads') and
    its foreground blocks at the device's rate, with the read latency (a worker reading a
    rate-limited volume sleeps for it: cosine_core::io::Device). Flushes and merges are not in it:
    the served latency model spreads the node's capacity over the requests in these proportions
    (measure/served.py)."""
    table = shipped_or(phi)
    st = engine_shape(cfg, float(workload["records"]), _memtable_state(cfg, workload, shape, end_shape))
    fg, _ = split_io(breakdown.io)
    rate = max(1.0 / device.iops, float(np.max(st.block_bytes)) / device.bytes_per_s)
    scan = float(workload.get("scan_length", 1))
    out: dict[Operation, float] = {}
    for i, op in enumerate(OPERATIONS):
        d = demands(table, breakdown.io, st, {op: 1.0}, scan, device.read_latency_s)
        out[op] = float(d.serial[0] + d.parallel[0] + d.wait[0] + float(np.ravel(fg[..., i])[0]) * rate)
    return out


def _pair(breakdown: Callable[P, EngineBreakdown]) -> Callable[P, tuple[float, float]]:
    """``breakdown``'s (throughput, blocks) alone, with its parameters."""

    def pair(*args: P.args, **kwargs: P.kwargs) -> tuple[float, float]:
        b = breakdown(*args, **kwargs)
        return b.throughput, b.blocks

    return pair


#: (operations per second, blocks per operation) the model predicts for a configured engine
#: running a workload.json with its ``threads`` on at most ``cores`` cores and ``device``;
#: ``shape``/``end_shape``/``merges`` as in :func:`predict` (None: the model's expected state), with
#: the frozen buffers the run's own background load leaves (:func:`frozen_buffers`); ``cpu_scale``
#: and ``phi`` as in :func:`engine_demands`. :func:`engine_breakdown` without what the figures are made of.
engine_throughput = _pair(engine_breakdown)


def frozen_buffers(
    cfg: dict[str, Any],
    workload: dict[str, Any],
    cores: int,
    device: DeviceModel = LOCAL_DEVICE,
    shape: dict[str, Any] | None = None,
    end_shape: dict[str, Any] | None = None,
    cpu_scale: float = 1.0,
    merges: RunMerges | None = None,
    phi: PhiTable | None = None,
) -> float:
    """Frozen buffers a lookup finds on average (docs/model.md, "Frozen buffers").

    A full buffer freezes and waits, still answering lookups, until the background worker has
    flushed it; the worker flushes and merges one job at a time. At the throughput the model
    predicts without them, a frozen buffer is there for the worker's busy share of the time, and
    ``model_constants: frozen_buffers`` of them while the writers stall (every slot full).
    """
    d, _ = engine_demands(cfg, workload, device, shape, end_shape, cpu_scale=cpu_scale, merges=merges, phi=phi)
    th = int(workload["threads"])
    args = (device.iops, th, usable_cores(th, cores), device.bytes_per_s)
    x = float(throughput(d, *args)[0])
    unstalled = float(throughput(replace(d, stall_rate=None), *args)[0])
    if not (math.isfinite(x) and x > 0):
        return 0.0
    busy = min(1.0, x * float(d.background[0]) / background_workers())
    stalling = max(0.0, 1.0 - x / unstalled) if unstalled > 0 else 0.0
    slots = float(model_constants()["frozen_buffers"])
    return min(slots, busy + stalling * slots)
