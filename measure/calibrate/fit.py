"""Every term of the CPU model from the samples (the package docstring says how each is fitted).
Nothing is clamped: a fit that wants a value at or past a bound raises CalibrationError."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_models import cpu_count
from cost_models.cpu import REFERENCE_BLOCK_BYTES, curve_at, search_slope
from cost_models.phi import FLAT_SEARCHES, INDEX_WALKS, LOOKUP_SLOPES
from measure.calibrate import CalibrationError
from measure.calibrate.plan import BLIND_WRITES, BUFFER_GET, BUFFERED, CACHED, CLASS_DESIGNS, LOADED, SMALL_MEMTABLE
from measure.calibrate.samples import Sample, cached_points
from measure.grid import KEY, VALUE
from specs.vocab import OPERATIONS, DesignClass, Operation


def _positive_lstsq(A: np.ndarray, y: np.ndarray, names: list[str], what: str) -> dict[str, float]:
    """Least squares of relative residuals (each run weighs by 1 / its measured value: run-to-run
    noise is multiplicative); every coefficient must come out positive (nothing is clamped)."""
    if A.shape[0] < A.shape[1]:
        raise CalibrationError(f"{what}: {A.shape[0]} runs cannot identify {A.shape[1]} terms")
    w = 1.0 / np.maximum(np.abs(y), 1e-300)
    sol, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
    bad = [f"{n} = {v:.3g}" for n, v in zip(names, sol, strict=True) if not (math.isfinite(v) and v > 0)]
    if bad:
        raise CalibrationError(
            f"{what}: the least-squares fit wants {', '.join(bad)} (must be positive); the runs do not "
            "identify it — re-run on a quiet machine or with more operations"
        )
    return {n: float(v) for n, v in zip(names, sol, strict=True)}


#: How far past 1 a measured phi is still 1. A thread's busy share is its CPU time over its wall time
#: less its run-queue delay, clocks read apart; single 2-thread cached runs of perfectly parallel
#: reads (a hash log's range and empty range) measured busy shares of 0.984-1.019 (calibrate-27d,
#: docs/journal/s22-s30.md §24.2). Past it a speed-up is super-linear and the fit is refused.
PHI_NOISE = 0.02


def fit_phi(samples: list[Sample], cores: int) -> dict[tuple[str, str], float]:
    """phi per (class, operation) from the cached runs at n threads (1 < n <= cores): Eq. 2 on the
    driver threads' busy share, averaged over sizes and scan lengths (Algorithm 1's aggregate).

    Each of n threads is on a CPU a share u_n = X_n c_n / n of the time no other program held it
    (X_n: the throughput over that time; c_n: CPU seconds per operation; of each run, then the
    median of the repeated runs of a point: the host's slow mode changes X_n and c_n of a run
    together, so a product of medians taken over different runs is not any run's share). In Eq. 2's
    program a thread waits for the others' serial sections, so u_n = 1 / (1 + (1 - phi)(n - 1)):
    phi = 1 - (1/u_n - 1)/(n - 1), at most 1 by construction
    (within PHI_NOISE past 1 it is 1; further, refused).
    The speed-up X_n / X_1 that Algorithm 1 uses also counts a change of the CPU an operation costs
    at n threads, which on this sandbox's VM measured the host: a 2-thread run either gets two cores
    or shares one without the guest seeing it (no steal time), at 1.8x the CPU per operation, and
    two threads scanning the same data warm each other's caches (docs/journal/s17-s21.md §20.3).
    """
    vals: dict[tuple[str, str], list[float]] = {}
    for (cls, op, _n, _scan, th), reps in cached_points(samples).items():
        if not 1 < th <= cores:
            continue
        busy = float(np.median([r.free_throughput * r.fg_cpu / th for r in reps]))
        vals.setdefault((cls, op), []).append(1.0 - (1.0 / busy - 1.0) / (th - 1))
    out = {}
    for key, v in sorted(vals.items()):
        phi = float(np.mean(v))
        if 1.0 < phi <= 1.0 + PHI_NOISE:
            phi = 1.0  # perfectly parallel, within what the busy share can tell
        if not 0.0 < phi <= 1.0:
            cls, op = key
            raise CalibrationError(
                f"phi of {cls} {op} is {phi:.3f} (per size and scan length {', '.join(f'{x:.3f}' for x in v)}): "
                "outside (0, 1] (more threads ran "
                + ("slower" if phi <= 0 else "faster than linearly")
                + "); Eq. 2 cannot describe it — re-run on a quiet machine"
            )
        out[key] = phi
    return out


def fit_concurrent_cpu(samples: list[Sample], cores: int) -> dict[tuple[str, str], float]:
    """CPU per operation of a thread among others over a thread alone, per (class, operation): the
    cached runs' driver CPU per operation at the most threads measured (at most ``cores``) over one
    thread's, medians of the repeated runs of a point, averaged over sizes and scan lengths as phi is.

    fit_phi measures the parallel fraction on the busy share of those runs, whose CPU per operation
    is the many-thread one; Eq. 2 with phi and one thread's CPU would predict a speed-up of n where
    the runs measured n u_n c_1 / c_n (docs/journal/s22-s30.md §24.2). Held at the threads measured: a larger
    machine's cost of sharing data between more cores is not measured here.
    """
    runs = cached_points(samples)
    top = max((p[-1] for p in runs if 1 < p[-1] <= cores), default=None)
    vals: dict[tuple[str, str], list[float]] = {}
    for (cls, op, n, scan, th), reps in runs.items():
        one = runs.get((cls, op, n, scan, 1))
        if th != top or not one:
            continue
        cpu = float(np.median([r.fg_cpu for r in reps])) / float(np.median([r.fg_cpu for r in one]))
        vals.setdefault((cls, op), []).append(cpu)
    out = {}
    for key, v in sorted(vals.items()):
        r = float(np.mean(v))
        if not (math.isfinite(r) and r > 0.0):
            raise CalibrationError(f"CPU per operation of {key[0]} {key[1]} at {top} threads over 1 is {r!r}")
        out[key] = r
    return out


@dataclass(frozen=True)
class MemtableFit:
    """How a memtable's descents grow past the size that fits the CPU's caches: a search's and an
    insert's seconds per doubling, each past its own base (the smallest memtable its runs measured:
    below it the cost is flat, in the operation's cached CPU)."""

    search_slope: float
    search_base: float
    insert_slope: float
    insert_base: float


def fit_memtable(samples: list[Sample]) -> tuple[float, float]:
    """(seconds per doubling of the memtable past its base size, the base size in entries), from
    the buffered gets (one skip-list descent each) at the design's memtable and at all the data:
    b = (c_large - c_small) / log2(E_large / E_small) per class and size, averaged. A memtable
    no larger than the base one fits the CPU's caches: its descent is in the gets' cached CPU."""
    rows = [s for s in samples if s.kind == BUFFERED and s.threads == 1]
    slopes, bases = [], []
    for cls in sorted({s.cls for s in rows}):
        # per size one run at the design's memtable and one at all the data: the k-th smallest
        # memtable pairs with the k-th of the larger half
        runs = sorted((s for s in rows if s.cls == cls), key=lambda s: s.memtable_entries)
        half = len(runs) // 2
        for small, large in zip(runs[:half], runs[half:], strict=False):
            if large.memtable_entries > small.memtable_entries:
                slopes.append(
                    (large.fg_cpu - small.fg_cpu) / math.log2(large.memtable_entries / small.memtable_entries)
                )
                bases.append(small.memtable_entries)
    b = _mean_slope(slopes, "memtable CPU", "buffered-get runs", "gets answered by a larger memtable")
    return b, float(np.exp(np.mean(np.log(bases))))


def _mean_slope(slopes: list[float], term: str, runs: str, which: str) -> float:
    """The mean of per-pair slopes (seconds per doubling of the memtable); a fit that wants it at
    or below 0 stops the calibration."""
    if not slopes:
        raise CalibrationError(f"{term}: no {runs} at two memtable sizes")
    b = float(np.mean(slopes))
    if not (math.isfinite(b) and b > 0):
        raise CalibrationError(
            f"{term}: {which} were not slower (slope {b:.3g} s per doubling, must be positive) — "
            "re-run on a quiet machine"
        )
    return b


def fit_memtable_insert(samples: list[Sample], search: tuple[float, float]) -> MemtableFit:
    """The memtable terms: ``search`` (fit_memtable's slope and base) and an insert's seconds per
    doubling of the memtable from the cached blind-write runs at two memtables (CACHED,
    SMALL_MEMTABLE; same class, operation and data size; BLIND_WRITES): the CPU difference over
    log2 of the memtables' ratio, averaged. A write's descent grows less than a search's: charging
    writes the search slope took ~0.55 us out of a cached hash-log update at a 23 k-entry memtable
    that a write into the design's 1.6 k-entry memtable still pays. Its base is the small runs'
    memtable (their geometric mean): writes are flat below it (every class measured 0.49-0.57 us
    per write into 650-, 2,600- and 12,000-entry memtables, docs/journal/s17-s21.md §21), and a slope taken
    past it and extrapolated down to the search's base charged half of that."""
    slope_s, base_s = search
    runs: dict[tuple[str, str, int, str], list[Sample]] = {}
    for s in samples:
        if s.kind in (CACHED, SMALL_MEMTABLE) and s.threads == 1 and s.workload in BLIND_WRITES:
            runs.setdefault((s.cls, s.workload, s.records, s.kind), []).append(s)
    slopes, bases = [], []
    for (cls, op, n, kind), small in runs.items():
        large = runs.get((cls, op, n, CACHED))
        if kind != SMALL_MEMTABLE or not large:
            continue
        lo = float(np.mean([s.memtable_entries for s in small]))
        hi = float(np.mean([s.memtable_entries for s in large]))
        if not hi > lo:
            continue
        grown = float(np.mean([s.fg_cpu for s in large]) - np.mean([s.fg_cpu for s in small]))
        slopes.append(grown / math.log2(hi / lo))
        bases.append(lo)
    b = _mean_slope(slopes, "memtable insert CPU", "cached write runs", "writes into a larger memtable")
    return MemtableFit(slope_s, base_s, b, float(np.exp(np.mean(np.log(bases)))))


def memtable_cpu(s: Sample, memtable: MemtableFit) -> float:
    """The memtable descents' CPU in one operation of a run beyond a base-size memtable's."""
    from cost_models.cpu import MEMTABLE_DESCENTS

    mix = s.ops_mix
    total = sum(mix.values()) or 1.0
    searches = sum(w * MEMTABLE_DESCENTS[Operation(op)][0] for op, w in mix.items()) / total
    inserts = sum(w * MEMTABLE_DESCENTS[Operation(op)][1] for op, w in mix.items()) / total
    e = s.memtable_entries
    return searches * memtable.search_slope * math.log2(
        max(e, memtable.search_base) / memtable.search_base
    ) + inserts * memtable.insert_slope * math.log2(max(e, memtable.insert_base) / memtable.insert_base)


def fit_lookup(samples: list[Sample], memtable: MemtableFit) -> dict[str, Any]:
    """How the lookups' CPU grows with the data: per class and measured search (get, empty get;
    cost_models.cpu.LOOKUP_SLOPES), least squares over the cached single-thread runs at every size
    of c = a + b log2(keys / reference), the reference the smallest size. b (seconds per doubling)
    and a must come out positive: a fit that wants a lookup no slower on more data stops."""
    rows = [s for s in samples if s.kind == CACHED and s.threads == 1 and s.workload in LOOKUP_SLOPES]
    sizes = sorted({s.records for s in rows})
    if len(sizes) < 2:
        raise CalibrationError("lookup CPU: cached lookups at two data sizes are needed (one was measured)")
    ref = float(sizes[0])
    per: dict[str, dict[str, float]] = {}
    at_ref: dict[tuple[str, str], float] = {}
    for cls in CLASS_DESIGNS:
        per[cls] = {}
        for op in LOOKUP_SLOPES:
            mine = [s for s in rows if s.cls == cls and s.workload == op]
            y = np.array([s.fg_cpu - memtable_cpu(s, memtable) for s in mine])
            if (cls, op) in FLAT_SEARCHES:  # no slope to learn: one CPU at every size
                at_ref[(cls, str(op))] = _positive_lstsq(
                    np.ones((len(mine), 1)), y, ["at_reference"], f"{cls} {op} CPU"
                )["at_reference"]
                continue
            A = np.array([[1.0, math.log2(s.records / ref)] for s in mine]).reshape(-1, 2)
            f = _positive_lstsq(
                A, y, ["at_reference", "per_doubling"], f"{cls} {op} CPU (a + b log2(keys / {ref:,.0f}))"
            )
            per[cls][str(op)] = f["per_doubling"]
            at_ref[(cls, str(op))] = f["at_reference"]
    return {"per_doubling": per, "reference_keys": ref, "at_reference": at_ref}


def run_doublings(s: Sample, lookup: dict[str, Any]) -> float:
    """Doublings of a run's keys past the lookup fit's reference size (0 below it): the fit's
    counterpart of cost_models.cpu.doublings, before any table holds the reference."""
    ref = float(lookup["reference_keys"])
    return math.log2(max(s.records, ref) / ref)


def lookup_cpu(s: Sample, lookup: dict[str, Any]) -> float:
    """The searches' CPU in one operation of a run beyond what they cost at the reference size."""
    from cost_models.cpu import LOOKUP_OF

    mix = s.ops_mix
    total = sum(mix.values()) or 1.0
    doublings = run_doublings(s, lookup)
    slope = lookup["per_doubling"][s.cls]
    return (
        sum(
            w / total * search_slope(slope, s.cls, LOOKUP_OF[Operation(op)]) for op, w in mix.items() if op in LOOKUP_OF
        )
        * doublings
    )


def buffered_walk(cpu: dict[tuple[str, str], float], lookup: dict[str, Any], s: Sample) -> float:
    """CPU a lookup of run ``s`` skips when the buffer answers it: the get's walk of the levels at
    the run's size (its cached CPU and growth, :func:`lookup_cpu`) less a buffered get's. The
    model charges a lookup the buffer answers as a buffered get (cost_models.cpu.demands) by the
    same difference."""
    slope = search_slope(lookup["per_doubling"][s.cls], s.cls, Operation.GET)
    return cpu[(s.cls, Operation.GET)] + slope * run_doublings(s, lookup) - cpu[(s.cls, BUFFER_GET)]


#: Cached runs whose lookups a memtable can answer (their own writes filled it): an rmw reads the
#: key it writes, so in a cached rmw run of 200,000 operations the memtable answers 57 % of the
#: reads at 100,000 keys and 21 % at 400,000 (docs/journal/s31-s42.md §33.1).
SELF_BUFFERED = (Operation.RMW,)


def fit_cpu(
    samples: list[Sample],
    memtable: MemtableFit,
    lookup: dict[str, Any],
    walks: dict[tuple[str, str], float] | None = None,
) -> dict[tuple[str, str], float]:
    """Cached single-thread CPU seconds per (class, operation) at the reference size with an empty
    memtable: the memtable descents (fit_memtable, fit_memtable_insert) and the searches' growth
    with the data (fit_lookup) taken out, averaged over the sizes and memtables (ranges: see
    fit_range). An operation of :data:`SELF_BUFFERED` is the CPU of one that walks the levels: its
    runs' lookups the memtable answered get the walk they skipped added back
    (:func:`buffered_walk`, from the get and buffered get of these samples, or of ``walks`` — a
    table's — when the samples hold only the one operation)."""
    vals: dict[tuple[str, str], list[float]] = {}

    def own(s: Sample) -> float:
        grown = lookup_cpu(s, lookup) if s.kind != BUFFERED else 0.0
        return s.fg_cpu - memtable_cpu(s, memtable) - grown

    runs = [s for s in samples if s.kind in (CACHED, BUFFERED, SMALL_MEMTABLE) and s.threads == 1]
    for s in runs:
        if s.workload != Operation.RANGE and s.workload not in SELF_BUFFERED:
            vals.setdefault((s.cls, s.workload), []).append(own(s))
    out = {k: float(np.mean(v)) for k, v in vals.items()}
    known = {**(walks or {}), **out}
    for s in runs:
        if s.workload in SELF_BUFFERED:
            if s.get_buffered > 0 and not {(s.cls, Operation.GET), (s.cls, BUFFER_GET)} <= known.keys():
                raise CalibrationError(
                    f"{s.cls} {s.workload}: no get and buffered-get CPU to add its buffered reads back"
                )
            walk = buffered_walk(known, lookup, s) if s.get_buffered > 0 else 0.0
            vals.setdefault((s.cls, s.workload), []).append(own(s) + s.get_buffered * walk)
    out = {k: float(np.mean(v)) for k, v in vals.items()}
    bad = [f"{c} {o} {v:.3g} s" for (c, o), v in out.items() if not v > 0]
    if bad:
        raise CalibrationError(
            f"CPU per operation without the memtable's descents is not positive for {', '.join(bad)}: the "
            "memtable slope is larger than the runs support — re-run on a quiet machine"
        )
    return out


def fit_range(samples: list[Sample], lookup: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Range CPU per class: a + scan length x r on a tree; on the hash log a per-scan part at
    each size (its whole-index walk) + scan length x r, the per-scan part then divided by the
    keys and averaged over the sizes (per_key). The seek's growth with the data (fit_lookup) is
    taken out first."""
    out = {}
    for cls in CLASS_DESIGNS:
        rows = [
            s for s in samples if s.kind == CACHED and s.threads == 1 and s.workload == Operation.RANGE and s.cls == cls
        ]
        sizes = sorted({s.records for s in rows}) if cls == DesignClass.LSH else [0]
        A = np.zeros((len(rows), len(sizes) + 1))
        for i, s in enumerate(rows):
            A[i, sizes.index(s.records) if cls == DesignClass.LSH else 0] = 1.0
            A[i, -1] = float(s.scan_length)
        y = np.array([s.fg_cpu - lookup_cpu(s, lookup) for s in rows])
        names = [f"per_scan_{n}" for n in sizes] + ["per_entry"]
        f = _positive_lstsq(A, y, names, f"{cls} range CPU (per scan + scan length x per entry)")
        if cls == DesignClass.LSH:
            out[cls] = {"per_key": float(np.mean([f[f"per_scan_{n}"] / n for n in sizes])), "per_entry": f["per_entry"]}
        else:
            out[cls] = {"per_scan": f["per_scan_0"], "per_entry": f["per_entry"]}
    return out


def cached_cpu(
    cpu: dict[tuple[str, str], float], rng: dict[str, dict[str, float]], lookup: dict[str, Any], s: Sample
) -> float:
    """The cached CPU seconds of one operation of a run's mix (the fit so far) at the run's data
    size, its lookups the buffer answered charged as such."""
    t = lookup_cpu(s, lookup)
    cls = s.cls
    walk = buffered_walk(cpu, lookup, s)
    for op, w in s.ops_mix.items():
        if op == Operation.RANGE:
            r = rng[cls]
            base = r["per_key"] * s.records if cls == DesignClass.LSH else r["per_scan"]
            t += w * (base + s.scan_length * r["per_entry"])
        else:
            t += w * cpu[(cls, op)]
            if op in (Operation.GET, Operation.RMW):
                t -= w * s.get_buffered * walk
    return t


def fit_block_read(
    samples: list[Sample],
    cpu: dict,
    rng: dict[str, dict[str, float]],
    memtable: MemtableFit,
    lookup: dict[str, Any],
) -> dict[str, Any]:
    """CPU of a block read: t_class s(bytes) + k bytes d(N). Per class the time of a 4 KiB block
    (what reading a block involves differs: a hot run's data block, a cold run's index and data
    blocks, a log block found through the hash index); one curve s of how it changes with the
    block's bytes, s(4 KiB) = 1, measured on the LSM design at every block size it ran
    (:data:`BLOCK_SIZE_STEPS`; cost_models.cpu.block_read_shape interpolates it); one time k per
    byte per doubling d(N) of the data past the reference size (cost_models.cpu.read_block_seconds:
    a large block's copy from a larger page cache misses more).

    One least squares, linear: a term per LSM block size (the LSM's block time there), one per
    other class and block size, and k, over the loaded single-thread runs (single operations and
    mixes) that read blocks; a hash log's ranges are left out: their CPU is the walk over the whole
    index (milliseconds), beside which their blocks are below the noise. The curve is the LSM's
    terms over their value at 4 KiB (interpolated), each other class's time at 4 KiB its term over
    the curve at its block size (averaged over its sizes, weighed by runs)."""
    rows = [
        s
        for s in samples
        if s.kind == LOADED
        and s.threads == 1
        and s.fg_blocks > 0
        and not (s.cls == DesignClass.LSH and Operation.RANGE in s.ops_mix)
    ]
    lsm = str(DesignClass.LSM)
    runs = Counter((s.cls, s.block_bytes) for s in rows)  # runs per (class, block size): a term each
    terms = sorted(runs)
    column = {t: i for i, t in enumerate(terms)}
    knots = [b for c, b in terms if c == lsm]
    if len(knots) < 2:
        raise CalibrationError(
            f"block-read CPU: the LSM design read blocks of {len(knots)} size(s); the curve over the block's "
            "bytes needs two or more (measure.calibrate.plan.BLOCK_SIZE_STEPS)"
        )
    y = np.array([s.fg_cpu - cached_cpu(cpu, rng, lookup, s) - memtable_cpu(s, memtable) for s in rows])
    A = np.zeros((len(rows), len(terms) + 1))
    for k, s in enumerate(rows):
        A[k, column[(s.cls, s.block_bytes)]] = s.fg_blocks
        A[k, -1] = s.fg_blocks * s.block_bytes * run_doublings(s, lookup)
    names = [f"block_read_seconds_{c}_{b:.0f}B" for c, b in terms]
    growth = "block_read_seconds_per_byte_doubling"
    f = _positive_lstsq(A, y, [*names, growth], "block-read CPU (blocks x t(class, block bytes) + k bytes doublings)")
    at = {t: f[n] for t, n in zip(terms, names, strict=True)}
    lsm_times = np.array([at[(lsm, b)] for b in knots])
    ratio = lsm_times / float(curve_at(REFERENCE_BLOCK_BYTES, knots, lsm_times))
    per_class: dict[str, float] = {}
    for c in CLASS_DESIGNS:
        mine = [(b, runs[(c, b)]) for cc, b in terms if cc == c]
        if not mine:
            raise CalibrationError(f"block-read CPU: no loaded single-thread run of {c} read a block")
        per_class[c] = sum(n * at[(c, b)] / float(curve_at(b, knots, ratio)) for b, n in mine) / sum(n for _, n in mine)
    return {
        "per_class": per_class,
        "shape": {"block_bytes": [float(b) for b in knots], "ratio": [float(r) for r in ratio]},
        "per_byte_doubling": f[growth],
        # the growth is held at the largest size that measured it (cost_models.cpu.block_read_doublings)
        "growth_max_keys": float(max(s.records for s in rows)),
    }


def fit_background(samples: list[Sample]) -> dict[str, float]:
    """Background CPU per flush/merge block, fixed and per byte, and on the hash log per entry of
    the block (its flush inserts each entry into the hash index, its GC looks each up), from
    every loaded run that wrote."""
    rows = [s for s in samples if s.kind == LOADED and s.bg_blocks > 0]
    A = np.array(
        [
            [
                s.bg_blocks,
                s.bg_blocks * s.block_bytes,
                s.bg_blocks * s.block_bytes / (KEY + VALUE) * (s.cls == DesignClass.LSH),
            ]
            for s in rows
        ]
    ).reshape(-1, 3)
    y = np.array([s.bg_cpu for s in rows])
    return _positive_lstsq(
        A,
        y,
        ["background_block_seconds", "background_block_seconds_per_byte", "hash_index_entry_seconds"],
        "background CPU (merge blocks x (t + bytes x t_byte + hash-log entries x t_index))",
    )


def envelope(samples: list[Sample], cores: int) -> list[dict[str, Any]]:
    """Per (class, workload): the highest throughput per core the engine was measured to reach
    (over the time its threads had a CPU: ``Sample.free_throughput``). The buffered runs (all the
    data in a small buffer) calibrate a CPU term; they are no workload a node runs."""
    best: dict[tuple[str, str, str], Sample] = {}

    def per_core(s: Sample) -> float:
        return s.free_throughput / min(s.threads, cores)

    for s in samples:
        if s.kind in (BUFFERED, SMALL_MEMTABLE):
            continue
        key = (s.cls, s.workload, s.mix)
        if key not in best or per_core(s) > per_core(best[key]):
            best[key] = s
    return [
        {  # plain strings: a measured sample's class and kind are StrEnums, which yaml.safe_dump refuses
            "class": str(cls),
            "workload": str(w),
            "mix": json.loads(mix),
            "per_core_ops": round(per_core(s), 1),
            "threads": s.threads,
            "records": s.records,
            "kind": str(s.kind),
        }
        for (cls, w, mix), s in sorted(best.items())
    ]


def fit(samples: list[Sample], cores: int | None = None) -> dict[str, Any]:
    """Every term of the CPU model from the samples (module docstring); raises CalibrationError at a bound."""
    cores = cpu_count() if cores is None else cores
    memtable = fit_memtable_insert(samples, fit_memtable(samples))
    lookup = fit_lookup(samples, memtable)
    rng = fit_range(samples, lookup)
    cpu = fit_cpu(samples, memtable, lookup)
    for cls in CLASS_DESIGNS:
        for op in OPERATIONS:
            if op != Operation.RANGE and (cls, op) not in cpu:
                raise CalibrationError(f"no cached single-thread run of {cls} {op}")
        if (cls, BUFFER_GET) not in cpu:
            raise CalibrationError(f"no buffered-get run of {cls}")
        if cls != DesignClass.LSH:
            cpu[(cls, Operation.RANGE)] = rng[cls]["per_scan"]
    drop_index_walks(cpu)
    phi = fit_phi(samples, cores)
    concurrent = fit_concurrent_cpu(samples, cores)
    missing = [f"{c} {o}" for c in CLASS_DESIGNS for o in OPERATIONS if (c, o) not in phi or (c, o) not in concurrent]
    if missing:
        raise CalibrationError(f"no speed-up measured for {', '.join(missing)} (the machine has {cores} core)")
    return {
        "cpu": cpu,
        "phi": phi,
        "concurrent_cpu": concurrent,
        "range": rng,
        "memtable": memtable,
        "lookup": lookup,
        "block_read": fit_block_read(samples, cpu, rng, memtable, lookup),
        "background": fit_background(samples),
        "envelope": envelope(samples, cores),
    }


def drop_index_walks(cpu: dict[tuple[str, str], float]) -> None:
    """A hash log's empty range walks its whole index as its range does: the model charges that
    walk from hash_scan_per_key_seconds (fit_range), so the table holds no per-operation CPU for it."""
    for op in INDEX_WALKS:
        if op != Operation.RANGE:
            cpu.pop((DesignClass.LSH, op), None)
