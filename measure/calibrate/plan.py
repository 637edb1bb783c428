"""The runs of a calibration: the class designs, the plan of sizes and lengths, and each run's
kind, workload and layout (the package docstring says what each kind measures)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cost_models import cpu_count
from cost_models.cpu import (
    INDEX_WALKS,
)
from measure.grid import KEY, VALUE, designs, mix_spec, shipped_spec
from specs.schema import Spec
from specs.vocab import OPERATIONS, WRITE_OPERATIONS, CalibrationRun, DesignClass, Operation

#: One design per class: the paper's three baselines and the base hybrid (the grid's, ~1% buffer).
CLASS_DESIGNS = {"lsm": "rocksdb", "btree": "wiredtiger", "lsh": "faster", "hybrid": "hybrid-base"}
#: Share of the buffer a cached write run fills: its buffer is sized so the
#: run's writes (which start on an empty buffer) never flush.
BUFFER_RUN_SHARE = 0.8
#: Block cache of a cached run, as a multiple of the data (decoded blocks carry overhead).
CACHED_CACHE_FACTOR = 3.0
#: Scan lengths of the cached range runs: two, far apart, so the per-entry CPU stands out of
#: the per-scan part (a hash log's scan walks its whole index: milliseconds).
SCAN_LENGTHS = (10, 1000)
#: Scan length of the loaded range runs (YCSB-E's mean is 50).
LOADED_SCAN = 20
#: Keys a calibration run's hash-log scans may visit in all (each scan walks the whole index):
#: about a second of CPU on this machine, which times a few hundred scans.
HASH_SCAN_KEYS = 30_000_000
#: The cached write runs of the SMALL_MEMTABLE kind write this share of a cached write run's
#: operations, into a memtable that much smaller: the two identify how an insert's CPU grows
#: with the memtable (memtable_insert_seconds_per_doubling).
SMALL_MEMTABLE_SHARE = 0.125
#: The writes whose runs identify the insert slope: blind writes, an insert each. An rmw inserts
#: the same way (Engine::write) but its run is ~2-3 us of get CPU per operation, whose run-to-run
#: noise (0.1-0.3 us) is the size of the slope's effect over 3 doublings (0.2 us): measured
#: at 1/8 the writes its growth came out -142 to +143 ns per doubling, the blind writes' 58-114.
BLIND_WRITES = (Operation.INSERT, Operation.UPDATE)
#: Memtables of the buffered-get runs: the design's buffer (0.8 of it), and all the data (its size
#: in records, marked 0): two sizes identify the CPU per doubling of the memtable.
BUFFERED_MEMTABLES = (BUFFER_RUN_SHARE, 0.0)
#: Block sizes (multiples of the class design's) of extra loaded get runs on the LSM design, run
#: every round: with its own they are the block sizes (232 B to 32 KiB, 2 to 256 entries) of the
#: measured curve of a block read's CPU over its bytes (fit_block_read).
BLOCK_SIZE_STEPS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 2.0, 4.0, 8.0)
#: Mixed workloads of the calibration (YCSB A, B, D, F).
MIXED = ("ycsb_a", "ycsb_b", "ycsb_d", "ycsb_f")


def calibration_designs(records: int) -> dict[str, dict[str, Any]]:
    """The class designs (engine.toml sections), as the validation grid has them."""
    grid = designs(records, quick=True, optima=False)
    return {cls: grid[name] for cls, name in CLASS_DESIGNS.items()}


@dataclass(frozen=True)
class Plan:
    """Data sizes and run lengths of a calibration."""

    sizes: tuple[int, ...]
    #: operations of a cached read run, a cached write run, and a loaded run
    read_ops: int
    write_ops: int
    ops: int
    #: Fig. 4B: records (a size the calibration does not use), operations, runs per point
    fig4b_records: int
    fig4b_ops: int
    repeats: int = 3
    #: runs of each cached (class, operation, size, threads) point: phi is Eq. 2 on the medians
    phi_repeats: int = 1


#: The full calibration, and --quick.
DEFAULT_PLAN = Plan((100_000, 400_000), 1_000_000, 200_000, 200_000, 250_000, 200_000, phi_repeats=3)
QUICK_PLAN = Plan((100_000, 400_000), 300_000, 50_000, 50_000, 250_000, 50_000, phi_repeats=3)


def thread_counts() -> tuple[int, ...]:
    """1 .. the machine's cores (at least 2: one speed-up per run identifies phi)."""
    return tuple(range(1, max(2, cpu_count()) + 1))


CACHED, LOADED, BUFFERED = CalibrationRun.CACHED, CalibrationRun.LOADED, CalibrationRun.BUFFERED
SMALL_MEMTABLE = CalibrationRun.SMALL_MEMTABLE
#: The operation name of the buffered runs.
BUFFER_GET = "buffer_get"


#: One calibration run: (kind, class, workload, spec, records, threads, factor).
Run = tuple[CalibrationRun, str, str, Spec, int, int, float]


def calibration_runs(plan: Plan) -> list[Run]:
    """(kind, class, workload, spec, records, threads, factor) of every calibration run; the
    factor scales the block size of a loaded run, and sets the memtable of a buffered one.

    The ``plan.phi_repeats`` runs of a cached point are not back to back: the runs come in
    rounds, each round every cached point once and then its share of the other runs. The host's
    slow phases last minutes (docs/journal/s31-s42.md §33.4: the same point 10-25 % apart 15 minutes later),
    so back-to-back repeats fell into one phase together and a point's median carried that
    phase into its term; spread over the session, every point's repeats see the same phases,
    and the terms keep their ratios (which the rankings depend on) however the host drifts."""
    repeated: list[Run] = []
    once: list[Run] = []
    threads = thread_counts()
    for n in plan.sizes:
        for cls in CLASS_DESIGNS:
            for op in OPERATIONS:
                scans = SCAN_LENGTHS if op == Operation.RANGE else (LOADED_SCAN,)
                for scan in scans:
                    spec = mix_spec({op: 1.0}, scan=scan, name=str(op))
                    for th in threads:
                        repeated.append((CACHED, cls, str(op), spec, n, th, 1.0))
                    if op in BLIND_WRITES:
                        repeated.append((SMALL_MEMTABLE, cls, str(op), spec, n, 1, 1.0))
            for share in BUFFERED_MEMTABLES:
                spec = mix_spec({Operation.GET: 1.0}, name=BUFFER_GET)
                once.append((BUFFERED, cls, BUFFER_GET, spec, n, 1, share))
            for op in OPERATIONS:
                spec = mix_spec({op: 1.0}, scan=LOADED_SCAN, name=str(op))
                once.append((LOADED, cls, str(op), spec, n, 1, 1.0))
            for w in MIXED:
                for th in threads:
                    once.append((LOADED, cls, w, shipped_spec(w), n, th, 1.0))
            if cls == DesignClass.LSM:
                for f in BLOCK_SIZE_STEPS:
                    repeated.append((LOADED, cls, str(Operation.GET), mix_spec({Operation.GET: 1.0}), n, 1, f))
    rounds = plan.phi_repeats
    return [run for r in range(rounds) for run in (*repeated, *once[r::rounds])]


def buffer_entries(secs: dict[str, Any]) -> int:
    lay = secs["layout"]
    return int(lay["buffer_bytes"]) // (int(lay["key_bytes"]) + int(lay["value_bytes"]))


def run_config(spec: Spec, cls: str, records: int, plan: Plan, kind: str, secs: dict[str, Any]) -> tuple[int, dict]:
    """Operations of a run and the layout changes it runs with."""
    mix = spec.workload.operations
    writes = sum(mix.get(o, 0.0) for o in WRITE_OPERATIONS)
    entry = KEY + VALUE
    if kind in (LOADED, BUFFERED):
        ops, layout = (plan.ops if kind == LOADED else plan.read_ops), {}
    elif writes > 0:
        # the buffer starts empty after the warm-up and holds every write of the run
        ops = plan.write_ops if kind == CACHED else int(plan.write_ops * SMALL_MEMTABLE_SHARE)
        buffer = max(int(secs["layout"]["buffer_bytes"]), int(ops * writes / BUFFER_RUN_SHARE) * entry)
        layout = {"buffer_bytes": buffer, "block_cache_bytes": int(CACHED_CACHE_FACTOR * records * entry)}
    else:
        ops = plan.read_ops
        layout = {"block_cache_bytes": int(CACHED_CACHE_FACTOR * records * entry)}
    if mix.get(Operation.RANGE, 0.0) > 0:
        # about as many entries as a point run has operations
        ops = max(1000, ops // max(10, int(spec.workload.scan_length)))
    walks = sum(mix.get(o, 0.0) for o in INDEX_WALKS)
    if cls == DesignClass.LSH and walks > 0:
        ops = min(ops, max(100, int(HASH_SCAN_KEYS / (records * walks))))
    return ops, layout
