"""The Cosine cost model written once, in sympy, and compiled to numpy.

Every formula of the I/O and CPU models lives here as a sympy expression; the
rest of ``cost_models`` only composes the compiled functions over levels,
partitions and designs (products over levels, sums over partitions). Nothing
is written a second time by hand.

Notation follows the Cosine technical report (seeds/001, Sections 1-2) and the
paper's Table 2 (seeds/000); where this model departs from them the docstring of
the expression says why (see also docs/model.md).
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------- symbols


def _symbols() -> SimpleNamespace:
    """The model's symbols (sympy is imported only when deriving)."""
    import sympy as sp

    W = sp.Symbol("W", positive=True)  # puts in a window (a run's "age" in puts)
    U = sp.Symbol("U", positive=True)  # keys in a partition (its universe)
    P = sp.Symbol("p", nonnegative=True)  # probability a put/get targets the partition
    IOTA = sp.Symbol("iota", nonnegative=True)  # fraction of puts that insert new keys
    NKEYS = sp.Symbol("N", positive=True)  # keys on the node
    R = sp.Symbol("R", positive=True)  # distinct entries (a run, a level, a buffer)
    V = sp.Symbol("V", positive=True)
    M = sp.Symbol("M", positive=True)
    BITS = sp.Symbol("b", nonnegative=True)  # Bloom filter bits per key
    FPR = sp.Symbol("f", positive=True)
    X = sp.Symbol("x", nonnegative=True)  # per-run miss probability 1 - alpha
    GEOM = sp.Function("geom")  # (1 - (1-alpha)^n) / alpha, implemented stably below
    GEOM1 = sp.Function("geom1")  # sum_{r<=n} r (1-alpha)^(r-1), implemented stably below
    AFIT = sp.Symbol("A", real=True)  # survival's linear part at a level's start
    BFIT = sp.Symbol("Bl", real=True)  # its decrease per run
    NRUNS = sp.Symbol("n", positive=True, integer=True)  # runs in a level
    RUN = sp.Symbol("r", positive=True, integer=True)
    ALPHA = sp.Symbol("alpha", nonnegative=True)
    BLK = sp.Symbol("B", positive=True)  # entries per block
    SEL = sp.Symbol("s", nonnegative=True)  # range selectivity (fraction of keys)
    INCOMING = sp.Symbol("I", nonnegative=True)  # entries merged into a level
    EXISTING = sp.Symbol("E_x", nonnegative=True)  # entries already in the target run
    LEVELED = sp.Symbol("lev", nonnegative=True)  # 1 if the merge rewrites the target run
    QPUTS = sp.Symbol("Q", positive=True)  # puts needed to fill the source
    READS_SRC = sp.Symbol("src", nonnegative=True)  # 1 if the source lives on disk
    GARBAGE = sp.Symbol("g", positive=True)  # dead fraction that triggers log GC
    OVERWRITE = sp.Symbol("u", nonnegative=True)  # fraction of appends that kill a version
    PHI = sp.Symbol("phi", nonnegative=True)
    ETA = sp.Symbol("eta", positive=True)
    IO = sp.Symbol("io", nonnegative=True)
    IOPS = sp.Symbol("IOPS", positive=True)
    LAMBDA = sp.Symbol("mu", positive=True)
    NENT = sp.Symbol("n_i", positive=True)
    LAM = sp.Symbol("lambda", positive=True)  # dual variable of the KL constraint
    ETA_D = sp.Symbol("eta_d", real=True)  # dual variable of sum w^ = 1
    RHO = sp.Symbol("rho", nonnegative=True)  # KL radius
    WI = sp.Symbol("w_i", nonnegative=True)
    CI = sp.Symbol("c_i", real=True)
    SUMEXP = sp.Symbol("Sigma", positive=True)  # sum_i w_i exp(c_i / lambda)
    NBLK = sp.Symbol("n_b", positive=True)  # blocks in a log
    MKEYS = sp.Symbol("m", nonnegative=True)  # keys a range selects
    ENTRY = sp.Symbol("E", positive=True)  # bytes per entry
    PAGE = sp.Symbol("P_wal", positive=True)  # bytes per WAL page write
    FCHILD = sp.Symbol("F_c", nonnegative=True)  # a range filter's false-positive rate one height down
    PCHILD = sp.Symbol("P_c", nonnegative=True)  # its expected probes one height down
    HAS = sp.Symbol("has", nonnegative=True)  # 1 if the height keeps a filter
    COLDIDX = sp.Symbol("cold", nonnegative=True)  # 1 at a cold level (an index block before the data)
    FGREADS = sp.Symbol("fg", nonnegative=True)  # blocks an operation reads itself
    MERGED = sp.Symbol("mg", nonnegative=True)  # merge blocks (read + written) per operation
    TDEC = sp.Symbol("t_dec", nonnegative=True)  # seconds to verify and decompress one block
    TENC = sp.Symbol("t_enc", nonnegative=True)  # seconds to compress and checksum one block
    SER = sp.Symbol("S", nonnegative=True)  # serial cpu seconds per operation (one at a time)
    PAR = sp.Symbol("P", nonnegative=True)  # parallel cpu seconds per operation (on any core)
    WAIT = sp.Symbol("D", nonnegative=True)  # device wait per operation (no core held)
    BGCPU = sp.Symbol("G", nonnegative=True)  # background (flush/merge) cpu seconds per operation
    NTH = sp.Symbol("n_t", positive=True)  # client threads (operations in flight)
    XOPS = sp.Symbol("X", positive=True)  # throughput, operations per second
    XFREE = sp.Symbol("X_0", positive=True)  # throughput the CPU bounds allow when no write stalls
    STALLRATE = sp.Symbol("w_s", nonnegative=True)  # merge cascades (of one kind) per operation
    STALLSEC = sp.Symbol("c_s", nonnegative=True)  # background seconds one such cascade runs
    SLACKOPS = sp.Symbol("s_f", nonnegative=True)  # operations the frozen and active buffers absorb
    STALLTIME = sp.Symbol("T_s", nonnegative=True)  # seconds per operation the writers stall
    REQSEC = sp.Symbol("c_req", nonnegative=True)  # server CPU per request beyond the engine's (parse, reply)
    BATCHSEC = sp.Symbol("c_batch", nonnegative=True)  # server CPU per pipelined batch (syscalls, wake-ups)
    PIPE = sp.Symbol("p_depth", positive=True)  # requests a client pipelines in one batch
    BYTESEC = sp.Symbol("c_byte", nonnegative=True)  # server CPU per byte on the wire
    WIREBYTES = sp.Symbol("w_bytes", positive=True)  # bytes on the wire per operation
    NETBW = sp.Symbol("BW", positive=True)  # a VM's network bandwidth, bytes per second
    BURSTBW = sp.Symbol("BW_b", positive=True)  # its burst bandwidth
    DUTY = sp.Symbol("d_cycle", positive=True)  # share of the time a node runs at its peak rate
    SHARDS = sp.Symbol("k_shards", positive=True)  # shards a scan is sent to
    SCANSHARE = sp.Symbol("theta_s", nonnegative=True)  # the scans' share of the operations
    return SimpleNamespace(**{k: v for k, v in locals().items() if k != "sp"})


# ----------------------------------------------------------------------------- expressions


def _expressions() -> dict[str, Any]:
    import sympy as sp

    y = _symbols()
    e: dict[str, Any] = {}

    # -- Workload windows (replaces the report's coupon-collector Q_i and alpha^i).
    # A run holding R distinct entries was filled by the last W puts, where W
    # solves distinct(W) = R. New keys (inserts, fraction iota) are always
    # distinct; updates hit partition j with probability p_j, uniformly among
    # its U_j keys, so its expected distinct keys after W puts is
    # U_j (1 - exp(-W (1-iota) p_j / U_j)). For one uniform partition this
    # inverts to W = U log(U / (U - R)), the report's f(V, M) = V log(V/(V-M+1)).
    e["distinct_new"] = y.IOTA * y.W
    e["distinct_part"] = y.U * (1 - sp.exp(-y.W * (1 - y.IOTA) * y.P / y.U))
    e["coupon_collector"] = y.V * sp.log(y.V / (y.V - y.M + 1))
    # Probability that a given key of the partition has a version in a run
    # filled by a window of W puts: updated during the window, or one of the
    # inserted keys (inserts are uniform over the key space, like the report's
    # regular-key alpha = R (1 - p) / U_2).
    e["alpha_window"] = 1 - (1 - sp.Min(1, y.IOTA * y.W / y.NKEYS)) * sp.exp(-y.W * (1 - y.IOTA) * y.P / y.U)

    # -- Bloom filters.
    e["bloom_fpr"] = sp.exp(-y.BITS * sp.log(2) ** 2)
    e["bloom_bits"] = sp.solve(sp.Eq(y.FPR, sp.exp(-y.BITS * sp.log(2) ** 2)), y.BITS)[0]
    # Monkey allocation (Dayan et al. 2017, cited by the paper for per-level
    # bits): minimise sum_i r_i p_i subject to sum_i n_i bits(p_i) = M_BF. The
    # stationarity condition of the Lagrangian gives p_i = mu n_i / r_i.
    lag = y.NRUNS * y.FPR + y.LAMBDA * y.NENT * sp.log(2) ** -2 * (-sp.log(y.FPR))
    e["monkey_fpr"] = sp.solve(sp.diff(lag, y.FPR), y.FPR)[0]

    # -- Lookups (report Sec. 1 and 2.1, "first hit" form). A lookup walks the
    # buffer and then the runs newest first and stops at the key's newest
    # version. Looking back over the last T puts, the key's newest version is
    # still ahead with probability G(T) = 1 - alpha_window(T) (survival). A run
    # is probed for nothing (a Bloom false positive, or a cold run's data block)
    # when the key is still ahead after it, and reached (its on-disk index read)
    # when the key is still ahead before it. Within a level of n runs of W puts
    # each, starting T0 puts back, G at the r-th run boundary is
    # e^{-rate (T0 + r W)} (A - B r) with A = 1 - iota T0 / N, B = iota W / N:
    # the runs' sum is sum_r (A - B r) x^r with x = e^{-rate W}, closed by sympy
    # (arithmetico-geometric series) and evaluated through stable helpers
    # geom(alpha, n) = sum_{r<n} x^r and geom1(alpha, n) = sum_{r<=n} r x^{r-1}.
    # (The report multiplies per-run miss probabilities as if independent; for a
    # key that lives in exactly one place — a loaded store — that undercounts
    # the disk hits: docs/model.md.)
    e["survival"] = 1 - e["alpha_window"]
    x = 1 - y.ALPHA
    geo = sp.summation(y.X**y.RUN, (y.RUN, 1, y.NRUNS)).subs(y.X, x)
    ageo = sp.summation(y.RUN * y.X**y.RUN, (y.RUN, 1, y.NRUNS)).subs(y.X, x)
    closed0 = x * y.GEOM(y.ALPHA, y.NRUNS)
    closed1 = x * y.GEOM1(y.ALPHA, y.NRUNS)
    helper1 = (1 - (y.NRUNS + 1) * x**y.NRUNS + y.NRUNS * x ** (y.NRUNS + 1)) / y.ALPHA**2
    for sym, ref, helper in ((closed0, geo, (1 - x**y.NRUNS) / y.ALPHA), (closed1, ageo, helper1)):
        probe = {y.ALPHA: sp.Rational(1, 3), y.NRUNS: 4}
        lhs = sp.simplify(ref.subs(probe))
        rhs = sp.simplify(
            sym.subs({y.GEOM(y.ALPHA, y.NRUNS): (1 - x**y.NRUNS) / y.ALPHA, y.GEOM1(y.ALPHA, y.NRUNS): helper}).subs(
                probe
            )
        )
        if sp.simplify(lhs - rhs) != 0:
            raise RuntimeError("closed form of a run sum does not match sympy's summation")
    e["run_sum"] = y.AFIT * closed0 - y.BFIT * closed1

    # -- Range filters (Rosetta, Luo et al. SIGMOD 2020; docs/model.md "Range filters").
    # An empty dyadic interval of height h is reported non-empty when the height-h
    # filter passes its prefix (probability f_h, 1 without a filter) and then, by
    # doubting, one of its two halves is reported non-empty one height down; the
    # halves are empty too, and the filters' answers independent.
    e["doubt_fpr"] = y.FPR * (1 - (1 - y.FCHILD) ** 2)
    # Probes: the height's own (when it keeps a filter) and, when it passes, both halves'.
    e["doubt_probes"] = y.HAS + 2 * y.FPR * y.PCHILD
    # An empty range reaches a run's file: with a range filter (rate f) the seek
    # reads the block holding the range's start and, when the range starts past
    # that block's last key (1/B of the time), the next one; a cold level first
    # reads an index block.
    e["empty_range_run"] = y.FPR * (y.COLDIDX + 1 + 1 / y.BLK)

    # -- Compression (docs/model.md "Compression"): CPU per operation of verifying
    # and decompressing the blocks it reads itself, and of the merges it causes,
    # half of whose blocks are read (decompressed) and half written (compressed).
    e["codec_cpu"] = y.FGREADS * y.TDEC + y.MERGED * (y.TDEC + y.TENC) / 2

    # -- Range scans: a run contributes the blocks its share of the range spans
    # (expected 1 + (m-1)/B for m contiguous entries, bounded by 1 + m/B).
    e["range_run"] = 1 + y.SEL * y.R / y.BLK
    # A hash log is unsorted, but each flush appends the buffer sorted: a
    # range's m keys sit in random flush chunks of the log's n_b chunks, the few
    # keys of one chunk in one block, and the engine reads each block once.
    e["distinct_blocks"] = y.NBLK * (1 - (1 - 1 / y.NBLK) ** y.MKEYS)

    # -- Writes, amortized per put. A merge into a level reads the incoming
    # runs (when they are on disk) and, if the level keeps one run, the
    # existing run too; it writes everything it read. Paper Table 2 counts
    # only (R^{i-1} K + R^i) / B, the read side; we count both because both
    # consume the device's iops (docs/model.md).
    e["merge_cost"] = ((y.READS_SRC * y.INCOMING + y.INCOMING) / y.BLK + y.LEVELED * 2 * y.EXISTING / y.BLK) / y.QPUTS
    # Log-structured hash table: appends cost 1/B per entry; a GC pass at dead
    # fraction g reads the log (N/(1-g)) and writes the live N, and happens
    # every N g / ((1-g) u) appends, so it adds u (2-g) / (g B) per append.
    e["log_append"] = (1 + y.OVERWRITE * (2 - y.GARBAGE) / y.GARBAGE) / y.BLK
    # The write-ahead log: every put is appended once, in page-sized writes
    # (group commit), whatever the layout; the paper leaves the WAL out, which
    # would make a design whose buffer holds the data write for free.
    e["wal_append"] = y.ENTRY / y.PAGE

    # -- cpu (paper Eq. 2, 3): Amdahl's speed-up g(phi, eta) of a program whose
    # parallel fraction is phi.
    e["amdahl"] = 1 / (1 - y.PHI * (1 - 1 / y.ETA))
    # Per operation of a mix (docs/model.md, "CPU and throughput"): S seconds
    # run one at a time (the write path's critical section: WAL append and
    # memtable insert under one lock), P seconds run on any core (the rest of
    # the cpu, and copying/checking the blocks read), D seconds wait for the
    # device without holding a core, and G seconds of flush/merge cpu run on
    # the engine's background thread. Eq. 2 with S/(S+P) as the serial
    # fraction on eta_f cores gives 1/X = S + P/eta_f; the rest of an operation
    # is bounded by the n threads' own cycle (each runs one operation, P + D,
    # at a time) or by the cores the background thread leaves,
    # eta_f = eta - X G:
    #   1/X = S + max((P + D)/n, P/(eta - X G)).
    # Threads-bound:
    e["throughput_threads"] = 1 / (y.SER + (y.PAR + y.WAIT) / y.NTH)
    # Cores-bound: 1/X = S + P/(eta - X G), a quadratic in X whose smaller root
    # is the one with eta - X G > 0. Written without the cancellation of the
    # textbook form (and defined at S = 0 or G = 0, where it reduces to
    # eta / (P + G) and to Eq. 2 respectively).
    b = y.ETA * y.SER + y.BGCPU + y.PAR
    x_share = 2 * y.ETA / (b + sp.sqrt(b**2 - 4 * y.SER * y.BGCPU * y.ETA))
    fixed_point = (1 / y.XOPS - y.SER - y.PAR / (y.ETA - y.XOPS * y.BGCPU)).subs(y.XOPS, x_share)
    probe = {y.SER: sp.Rational(3, 10), y.PAR: sp.Rational(7, 5), y.BGCPU: sp.Rational(2, 5), y.ETA: 3}
    if abs(float(fixed_point.subs(probe))) > 1e-12:
        raise RuntimeError("the shared-core throughput does not solve its fixed point")
    e["throughput_shared_cores"] = x_share
    e["throughput_io"] = y.IOPS / y.IO
    # Write stalls (docs/model.md, "Write stalls"): the engine's one background worker runs
    # a flush only after the merges it waits for (a cascade into levels 1..i, deepest
    # first), and writers stall once the frozen buffers and the active one are full. A
    # cascade starts when a buffer freezes; meanwhile the clients run at the throughput X_0
    # the CPU bounds allow and do s_f operations before the buffers are full, so a cascade
    # of c_s seconds arriving w_s times per operation stops them for
    # max(0, c_s - s_f / X_0) seconds each time; summed over the cascades (T_s):
    e["stall_seconds"] = y.STALLRATE * sp.Max(0, y.STALLSEC - y.SLACKOPS / y.XFREE)
    #   1/X = 1/X_0 + T_s.
    e["throughput_stalled"] = 1 / (1 / y.XFREE + y.STALLTIME)

    # -- The served node (docs/model.md, "The served node"; issue 48). A request reaching
    # cosine-server costs, beyond the engine's CPU, c_req (parsing it, encoding its reply), a
    # share of its pipelined batch's c_batch (the read and write system calls, the task wake-ups:
    # one per batch of p requests) and c_byte per byte on the wire:
    e["serving_seconds"] = y.REQSEC + y.BATCHSEC / y.PIPE + y.BYTESEC * y.WIREBYTES
    # The VM's network carries w bytes per operation: at most BW / w operations per second.
    e["throughput_network"] = y.NETBW / y.WIREBYTES
    # Burst credits (AWS: instances of 16 vCPUs or fewer): a node that runs at its peak a share d
    # of the time and idles otherwise averages d x peak, which the credits hold at the baseline;
    # its peak bandwidth is then min(burst, baseline / d) (d = 1: the baseline).
    e["burst_bandwidth"] = sp.Min(y.BURSTBW, y.NETBW / y.DUTY)
    # Scans as deployed (deploy/scatter.py): every scan goes to all k shards, each returns its own
    # first `count` entries, so per operation of the cluster a node serves its 1/k share of the
    # point operations and every scan: the node's work per (cluster operation / k) is that of a
    # mix whose scans weigh k times theirs, 1 + (k - 1) theta_s operations in all.
    e["fanout_scale"] = 1 + (y.SHARDS - 1) * y.SCANSHARE

    # -- Robustness (ENDURE): the worst expected cost over the KL ball
    # {w^ : KL(w^ || w) <= rho} equals min over lambda > 0, eta of the convex dual
    # eta + rho lambda + lambda sum_i w_i phi*((c_i - eta)/lambda), phi*(s) = e^s - 1.
    # One term of the sum, and the eta that zeroes the dual's derivative in eta
    # (so the dual becomes a 1-D problem in lambda).
    e["kl_dual_term"] = y.LAM * y.WI * (sp.exp((y.CI - y.ETA_D) / y.LAM) - 1)
    e["kl_dual_head"] = y.ETA_D + y.RHO * y.LAM
    eta_star = sp.solve(sp.diff(y.ETA_D + y.LAM * (y.SUMEXP * sp.exp(-y.ETA_D / y.LAM) - 1), y.ETA_D), y.ETA_D)[0]
    e["kl_dual_eta"] = sp.simplify(eta_star)
    return e


@dataclass(frozen=True)
class Compiled:
    """A compiled expression: the sympy source and its numpy function."""

    name: str
    expr: Any  # the sympy expression; None in the compiled model (no sympy at run time)
    args: tuple[Any, ...]
    fn: Callable[..., Any]

    def __call__(self, *a: Any) -> Any:
        return self.fn(*a)


_ARGS: dict[str, tuple[str, ...]] = {
    "distinct_new": ("W", "IOTA"),
    "distinct_part": ("W", "U", "P", "IOTA"),
    "coupon_collector": ("V", "M"),
    "alpha_window": ("W", "U", "P", "IOTA", "NKEYS"),
    "bloom_fpr": ("BITS",),
    "bloom_bits": ("FPR",),
    "monkey_fpr": ("LAMBDA", "NENT", "NRUNS"),
    "survival": ("W", "U", "P", "IOTA", "NKEYS"),
    "run_sum": ("AFIT", "BFIT", "ALPHA", "NRUNS"),
    "doubt_fpr": ("FPR", "FCHILD"),
    "doubt_probes": ("HAS", "FPR", "PCHILD"),
    "empty_range_run": ("FPR", "COLDIDX", "BLK"),
    "codec_cpu": ("FGREADS", "MERGED", "TDEC", "TENC"),
    "range_run": ("SEL", "R", "BLK"),
    "distinct_blocks": ("NBLK", "MKEYS"),
    "merge_cost": ("READS_SRC", "INCOMING", "LEVELED", "EXISTING", "BLK", "QPUTS"),
    "log_append": ("OVERWRITE", "GARBAGE", "BLK"),
    "wal_append": ("ENTRY", "PAGE"),
    "amdahl": ("PHI", "ETA"),
    "throughput_threads": ("SER", "PAR", "WAIT", "NTH"),
    "throughput_shared_cores": ("SER", "PAR", "BGCPU", "ETA"),
    "throughput_io": ("IOPS", "IO"),
    "stall_seconds": ("XFREE", "STALLRATE", "STALLSEC", "SLACKOPS"),
    "throughput_stalled": ("XFREE", "STALLTIME"),
    "serving_seconds": ("REQSEC", "BATCHSEC", "PIPE", "BYTESEC", "WIREBYTES"),
    "throughput_network": ("NETBW", "WIREBYTES"),
    "burst_bandwidth": ("BURSTBW", "NETBW", "DUTY"),
    "fanout_scale": ("SHARDS", "SCANSHARE"),
    "kl_dual_term": ("LAM", "WI", "CI", "ETA_D"),
    "kl_dual_head": ("ETA_D", "RHO", "LAM"),
    "kl_dual_eta": ("LAM", "SUMEXP"),
}


def _geom1(alpha: Any, n: Any) -> Any:
    """sum_{r=1}^{n} r (1-alpha)^(r-1) without cancellation (n(n+1)/2 at alpha = 0).

    Each element takes one of three forms (the series for small or no alpha, min(n, 1) for
    alpha >= 1, else the closed form), and each form is computed only on its own elements: the
    design tables' run sums are mostly of runs every key has left (alpha = 1). Elementwise, so
    the values are those of computing every form everywhere and picking (tests/test_formulas.py)."""
    a, nn = np.broadcast_arrays(np.asarray(alpha, dtype=float), np.asarray(n, dtype=float))
    series_at = (a * np.maximum(nn, 1.0) < 1e-4) | (a <= 0)
    ones_at = ~series_at & (a >= 1.0)
    closed_at = ~(series_at | ones_at)
    out = np.empty(a.shape)
    # series in alpha: sum r (1 - (r-1) a + ...) = n(n+1)/2 - a (n-1)n(n+1)/3
    s_a, s_n = a[series_at], nn[series_at]
    out[series_at] = s_n * (s_n + 1) / 2 - s_a * (s_n - 1) * s_n * (s_n + 1) / 3
    out[ones_at] = np.minimum(nn[ones_at], 1.0)
    safe, c_n = np.minimum(a[closed_at], 1.0), nn[closed_at]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        xn = np.exp(c_n * np.log1p(-np.minimum(safe, 1.0 - 1e-300)))
        out[closed_at] = (1 - (c_n + 1) * xn + c_n * xn * (1 - safe)) / (safe * safe)
    return out


def _geom(alpha: Any, n: Any) -> Any:
    """(1 - (1-alpha)^n) / alpha without cancellation; n when alpha = 0.

    The closed form is computed only where 0 < alpha < 1 and n > 0: without runs it is
    -expm1(0) / alpha = -0.0, and at alpha >= 1 (log1p(-1) = -inf) it is 1 / alpha, which are
    written directly (bit for bit the closed form's values: tests/test_formulas.py)."""
    a, nn = np.broadcast_arrays(np.asarray(alpha, dtype=float), np.asarray(n, dtype=float))
    pos, some, full = a > 0, nn > 0, a >= 1.0
    out = np.array(nn, dtype=float)  # alpha <= 0: n
    none_at = pos & ~some
    out[none_at] = -0.0 / a[none_at]
    full_at = pos & some & full
    out[full_at] = 1.0 / a[full_at]
    part_at = pos & some & ~full
    p_a, p_n = a[part_at], nn[part_at]
    with np.errstate(divide="ignore", invalid="ignore"):  # n = inf: expm1(-inf) = -1
        out[part_at] = -np.expm1(p_n * np.log1p(-np.minimum(p_a, 1.0))) / p_a
    return out


#: The generated module: every expression's numpy function, as sympy.lambdify prints it.
GENERATED = Path(__file__).resolve().parent / "symbolic_compiled.py"
_HEADER = """# ruff: noqa
# GENERATED by `python -m cost_models.symbolic` from the sympy expressions of
# cost_models/symbolic.py (sympy.lambdify). Do not edit: regenerate it after changing an
# expression; tests/test_formulas.py fails while this file and the expressions disagree.
\"\"\"The Cosine cost model compiled to numpy: one function per expression of cost_models.symbolic.\"\"\"
"""
#: Functions the printed code may call that sympy does not know (closed forms of run sums).
_MODULES = {"geom": _geom, "geom1": _geom1}
#: Where the generated module imports what the printed code calls, numpy's functions aside.
_IMPORTS = {
    "reduce": "from functools import reduce",
    "geom": "from cost_models.symbolic import _geom as geom",
    "geom1": "from cost_models.symbolic import _geom1 as geom1",
}


def _derive_all() -> dict[str, Compiled]:
    import sympy as sp

    exprs = _expressions()
    y = _symbols()
    out: dict[str, Compiled] = {}
    for name, arg_names in _ARGS.items():
        expr = exprs[name]
        args = tuple(getattr(y, a) for a in arg_names)
        missing = expr.free_symbols - set(args)
        if missing:  # a guard against an expression silently losing an argument
            raise RuntimeError(f"{name}: symbols {missing} are not arguments")
        # Parameters keep the symbols' names, except those Python cannot take (``lambda``),
        # named after _ARGS instead of a sympy dummy: the printed source is then reproducible.
        params = tuple(sp.Symbol(_param(str(a), k)) for a, k in zip(args, arg_names, strict=True))
        body = expr.xreplace(dict(zip(args, params, strict=True)))
        fn = sp.lambdify(params, body, modules=[_MODULES, "numpy"])
        out[name] = Compiled(name, expr, args, fn)
    return out


def _param(name: str, fallback: str) -> str:
    return name if name.isidentifier() and not keyword.iskeyword(name) else fallback


def generate_source() -> str:
    """The text of :data:`GENERATED`: the lambdified source of every expression, named after it."""
    import inspect

    funcs = derived()
    used: set[str] = set()
    bodies = []
    for name, c in funcs.items():
        src = inspect.getsource(c.fn).replace("def _lambdifygenerated(", f"def {name}(", 1)
        bodies.append(src.rstrip() + "\n")
        used |= set(c.fn.__code__.co_names)
    own = sorted(used & set(_IMPORTS))
    from_numpy = sorted(n for n in used - set(_IMPORTS) if hasattr(np, n))
    unknown = sorted(used - set(_IMPORTS) - set(from_numpy))
    if unknown:
        raise RuntimeError(f"the printed model calls {unknown}, which neither numpy nor _IMPORTS provides")
    head = [_IMPORTS[n] for n in own if n == "reduce"]
    head += ["", f"from numpy import {', '.join(from_numpy)}", ""]
    head += [_IMPORTS[n] for n in own if n != "reduce"]
    return _HEADER + "\n" + "\n".join(head).strip("\n") + "\n\n\n" + "\n\n".join(bodies)


#: The same expressions printed for scalars (Python's math), each compiled by numba: the building
#: blocks of the fused kernels of cost_models.kernels (one pass per design row, no temporaries).
GENERATED_SCALAR = Path(__file__).resolve().parent / "symbolic_scalar.py"
_SCALAR_HEADER = """# ruff: noqa
# GENERATED by `python -m cost_models.symbolic` from the sympy expressions of
# cost_models/symbolic.py (sympy.lambdify with Python's math, one scalar function each). Do not
# edit: regenerate it after changing an expression; tests/test_formulas.py fails while this file
# and the expressions disagree. Imported only by cost_models.kernels (numba is loaded with it).
\"\"\"The Cosine cost model compiled by numba: one scalar function per expression of cost_models.symbolic.\"\"\"
"""
#: numba's options for every generated and kernel function: its cache beside the package, and
#: numpy's semantics for a division by zero (inf or nan, as the numpy model gives, no exception).
NJIT_OPTIONS = 'cache=True, error_model="numpy"'


def generate_scalar_source() -> str:
    """The text of :data:`GENERATED_SCALAR`: every expression lambdified with Python's ``math``
    (``min``/``max`` for sympy's Min/Max, the scalar run-sum helpers of cost_models.scalar_helpers
    for geom/geom1), each decorated with numba's ``njit``."""
    import inspect

    import sympy as sp

    used: set[str] = set()
    bodies = []
    for name, c in derived().items():
        params = tuple(sp.Symbol(_param(str(a), k)) for a, k in zip(c.args, _ARGS[name], strict=True))
        body = c.expr.xreplace(dict(zip(c.args, params, strict=True)))
        fn = sp.lambdify(params, body, modules=[{"geom": _geom, "geom1": _geom1}, "math"])
        src = inspect.getsource(fn).replace("def _lambdifygenerated(", f"def {name}(", 1)
        bodies.append(f"@njit({NJIT_OPTIONS})\n" + src.rstrip() + "\n")
        used |= set(fn.__code__.co_names)
    import math

    own = sorted(used & {"geom", "geom1"})
    from_math = sorted(n for n in used - {"geom", "geom1", "min", "max"} if hasattr(math, n))
    unknown = sorted(used - {"geom", "geom1", "min", "max"} - set(from_math))
    if unknown:
        raise RuntimeError(f"the printed model calls {unknown}, which neither math nor the helpers provide")
    head = [f"from math import {', '.join(from_math)}", "", "from numba import njit", ""]
    head += [f"from cost_models.scalar_helpers import {', '.join(own)}"] if own else []
    return _SCALAR_HEADER + "\n" + "\n".join(head).strip("\n") + "\n\n\n" + "\n\n".join(bodies)


@lru_cache(maxsize=1)
def compiled() -> dict[str, Compiled]:
    """The compiled model: the numpy function of every expression.

    They come from the module :data:`GENERATED`, part of the package and written by
    ``python -m cost_models.symbolic``: no code is ever loaded from a cache and sympy is
    not imported at run time; a test checks that regenerating gives the same text.
    """
    from cost_models import symbolic_compiled as gen

    return {name: Compiled(name, None, _ARGS[name], getattr(gen, name)) for name in _ARGS}


@lru_cache(maxsize=1)
def derived() -> dict[str, Compiled]:
    """Freshly derived expressions and functions (no cache)."""
    return _derive_all()


def expression(name: str) -> Any:
    """The sympy expression behind a compiled function (for docs and tests)."""
    return derived()[name].expr


if __name__ == "__main__":  # python -m cost_models.symbolic: regenerate the compiled model
    from specs.io import write_text

    print(f"wrote {write_text(GENERATED, generate_source())}")
    print(f"wrote {write_text(GENERATED_SCALAR, generate_scalar_source())}")
