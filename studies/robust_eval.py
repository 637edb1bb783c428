"""`cosine robust-eval`: ENDURE's uncertainty benchmark on the Cosine I/O model.

ENDURE (seeds/003) tunes an LSM-tree — size ratio T, policy (leveling or
tiering), buffer vs filter memory — for a workload (z0, z1, q, w) = (empty
reads, non-empty reads, ranges, writes) and compares a nominal tuning with a
robust one (worst case over the KL ball of radius rho) on randomly drawn
observed workloads, with the normalized delta throughput
Delta = (1/C(w^, Phi_R) - 1/C(w^, Phi_N)) / (1/C(w^, Phi_N)).

Here C is the Cosine model's I/O per operation (sigma_n, sigma_l, sigma_s,
sigma_p) for a node of ENDURE's set-up: 10M unique 1 KiB entries, uniform keys,
a memory budget of 10 bits per key split between buffer and filters (fence
pointers are held in memory as RocksDB does), and short ranges (one block per
run, ENDURE's "1-2 pages per level").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cost_models.design import Design, DesignBatch
from cost_models.distributions import partitions
from cost_models.io_model import io_costs
from cost_models.layout import Layout, derive
from cost_models.robust import kl_divergence, kl_worst_case
from specs.errors import InputError, check_range
from specs.io import RunFiles, write_records
from specs.schema import Distribution
from specs.vocab import BloomAllocation, DistributionKind

ENDURE_ENTRIES = 10_000_000
ENDURE_KEY, ENDURE_VALUE = 16, 1008  # 1 KiB entries
ENDURE_BITS_PER_KEY = 10.0  # memory budget for buffer + filters, per key
ENDURE_BLOCK = 4096

#: The 15 expected workloads of ENDURE's benchmark, over (z0, z1, q, w).
EXPECTED = [
    ("uniform", (0.25, 0.25, 0.25, 0.25)),
    ("unimodal", (0.97, 0.01, 0.01, 0.01)),
    ("unimodal", (0.01, 0.97, 0.01, 0.01)),
    ("unimodal", (0.01, 0.01, 0.97, 0.01)),
    ("unimodal", (0.01, 0.01, 0.01, 0.97)),
    ("bimodal", (0.49, 0.49, 0.01, 0.01)),
    ("bimodal", (0.49, 0.01, 0.49, 0.01)),
    ("bimodal", (0.49, 0.01, 0.01, 0.49)),
    ("bimodal", (0.01, 0.49, 0.49, 0.01)),
    ("bimodal", (0.01, 0.49, 0.01, 0.49)),
    ("bimodal", (0.01, 0.01, 0.49, 0.49)),
    ("trimodal", (0.33, 0.33, 0.33, 0.01)),
    ("trimodal", (0.33, 0.33, 0.01, 0.33)),
    ("trimodal", (0.33, 0.01, 0.33, 0.33)),
    ("trimodal", (0.01, 0.33, 0.33, 0.33)),
]


def design_space(entries: int = ENDURE_ENTRIES) -> list[Design]:
    """ENDURE's Phi = (buffer, filter memory, T, policy) on a fixed memory budget."""
    budget = entries * ENDURE_BITS_PER_KEY / 8
    out = []
    for T in (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50):
        for tiered in (False, True):
            K = T - 1 if tiered else 1
            for frac in np.linspace(0.02, 0.98, 25):
                buf = frac * budget
                bits = (budget - buf) * 8 / entries
                out.append(
                    Design(
                        T=T,
                        K=K,
                        Z=K,
                        buffer_bytes=buf,
                        bloom_bits=bits,
                        bloom_allocation=BloomAllocation.MONKEY,
                        block_bytes=ENDURE_BLOCK,
                        all_hot=True,
                        name=f"T{T}{'t' if tiered else 'l'}",
                    )
                )
    return out


def endure_layout(
    designs: list[Design], entries: int = ENDURE_ENTRIES, key: int = ENDURE_KEY, value: int = ENDURE_VALUE
) -> Layout:
    """Layouts of ENDURE's set-up: fences in memory, the design's own buffer/filter split, no block cache."""
    # memory large enough for fences; ENDURE's cost model sizes the tree by its entries (its writes
    # do not shape the last level: overwrites=False)
    lay = derive(DesignBatch.of(designs), entries, key, value, 1e15, overwrites=False)
    lay.mem_cache[:] = 0.0  # ENDURE has no block cache in its cost model
    return lay


def cost_vectors(
    designs: list[Design], entries: int = ENDURE_ENTRIES, key: int = ENDURE_KEY, value: int = ENDURE_VALUE
) -> np.ndarray:
    """(n, 4) I/O per (empty read, read, range, write) for each design."""
    lay = endure_layout(designs, entries, key, value)
    uni = Distribution(DistributionKind.UNIFORM)
    parts = partitions(uni, uni, entries)
    # writes are unique inserts (ENDURE: "Writes are unique")
    io = io_costs(lay, parts, {"get": 0.5, "insert": 0.5}, scan_length=float(lay.B[0]))
    return np.stack([io.empty_get, io.get, io.range, io.insert], axis=1)


@dataclass
class RobustEval:
    rows: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    tunings: list[dict[str, Any]]


def run(samples: int = 10_000, rhos: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0), seed: int = 7) -> RobustEval:
    """ENDURE's benchmark: for each expected workload and radius, robust vs nominal over sampled observed workloads."""
    check_options(samples, rhos, seed)
    designs = design_space()
    C = cost_vectors(designs)
    rng = np.random.default_rng(seed)
    observed = rng.dirichlet(np.ones(4), size=samples)
    rows: list[dict[str, Any]] = []
    tunings = []
    for e_idx, (kind, w_tuple) in enumerate(EXPECTED):
        w = np.array(w_tuple)
        nominal = int(np.argmin(C @ w))
        obs_rho = kl_divergence(observed, w[None, :])
        c_nom = observed @ C[nominal]
        for rho in rhos:
            robust = int(np.argmin(kl_worst_case(C, w, rho))) if rho > 0 else nominal
            c_rob = observed @ C[robust]
            delta = c_nom / c_rob - 1.0  # = (1/C_R - 1/C_N) / (1/C_N)
            tunings.append(
                {
                    "expected": e_idx,
                    "type": kind,
                    "rho": rho,
                    "nominal": designs[nominal].name,
                    "robust": designs[robust].name,
                    "robust_buffer_mib": designs[robust].buffer_bytes / 2**20,
                    "robust_bits": designs[robust].bloom_bits,
                }
            )
            for s in range(samples):
                rows.append(
                    {
                        "expected": e_idx,
                        "type": kind,
                        "rho_expected": rho,
                        "sample": s,
                        "rho_observed": float(obs_rho[s]),
                        "delta": float(delta[s]),
                    }
                )
    summary = summarize(rows, rhos)
    return RobustEval(rows, summary, tunings)


def summarize(rows: list[dict[str, Any]], rhos: tuple[float, ...]) -> list[dict[str, Any]]:
    import collections

    acc: dict[tuple, list[float]] = collections.defaultdict(list)
    for r in rows:
        acc[(r["type"], r["rho_expected"])].append(r["delta"])
        acc[("all", r["rho_expected"])].append(r["delta"])
    out = []
    for (kind, rho), ds in sorted(acc.items()):
        a = np.array(ds)
        out.append(
            {
                "type": kind,
                "rho_expected": rho,
                "mean_delta": float(a.mean()),
                "median_delta": float(np.median(a)),
                "share_better": float((a > 0).mean()),
                "share_worse": float((a < 0).mean()),
            }
        )
    return out


def buckets(rows: list[dict[str, Any]], edges: tuple[float, ...] = (0, 0.25, 0.5, 1, 2, 4, math.inf)) -> list[dict]:
    """Mean Delta by (expected rho, observed-rho bucket)."""
    import collections

    acc: dict[tuple, list[float]] = collections.defaultdict(list)
    for r in rows:
        b = int(np.searchsorted(edges, r["rho_observed"], side="right") - 1)
        acc[(r["rho_expected"], b)].append(r["delta"])
    return [
        {
            "rho_expected": k[0],
            "observed_from": edges[k[1]],
            "observed_to": edges[k[1] + 1],
            "mean_delta": float(np.mean(v)),
            "count": len(v),
        }
        for k, v in sorted(acc.items())
    ]


#: The expected KL radii ENDURE studies (its slides' rho ladder).
RHO_LADDER = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
#: Largest radius accepted: KL radii past a few nats already allow almost any workload.
MAX_RHO = 16.0
#: Fewest observed workloads that give stable means.
MIN_SAMPLES = 100
#: Most observed workloads.
MAX_SAMPLES = 1_000_000
#: Most radii in one run (each adds a robust tuning per expected workload and its rows).
MAX_RHOS = 16
#: Most result rows (15 expected workloads x radii x samples), each a Python dict until it is
#: written: 5e6 rows is about 2 GiB and a few minutes (the default run has 9e5, 30 s).
MAX_ROWS = 5_000_000
#: Seeds numpy's generator takes: non-negative, and 2^64 - 1 at most.
MAX_SEED = 2**64 - 1


def check_options(samples: int, rhos: tuple[float, ...], seed: int) -> None:
    """``--samples``, the radii and ``--seed``, before any work."""
    check_range("--samples", samples, MIN_SAMPLES, MAX_SAMPLES, integer=True)
    check_range("--seed", seed, 0, MAX_SEED, integer=True)
    rows = len(EXPECTED) * len(rhos) * samples
    if rows > MAX_ROWS:
        raise InputError(
            f"--samples {samples:,} x {len(rhos)} radii x {len(EXPECTED)} workloads = {rows:,} rows, "
            f"at most {MAX_ROWS:,}: fewer samples or radii"
        )


def parse_rhos(text: str) -> tuple[float, ...]:
    """``LO..HI`` (the ladder's radii within) or a comma list; 0 (nominal) is always included."""
    try:
        if ".." in text:
            lo, hi = (float(x) for x in text.split("..", 1))
        else:
            vals = tuple(float(x) for x in text.split(","))  # an empty item ("1,") is not a number
    except ValueError:
        raise InputError(f"--rho {text!r}: expected LO..HI (e.g. 0..4) or a comma list (e.g. 0,0.5,1)") from None
    if ".." in text:
        for v in (lo, hi):
            if not (math.isfinite(v) and 0 <= v <= MAX_RHO):
                raise InputError(f"--rho {text!r}: radii must be numbers from 0 to {MAX_RHO:g}")
        if lo > hi:
            raise InputError(f"--rho {text!r}: LO must not exceed HI")
        vals = tuple(r for r in RHO_LADDER if lo <= r <= hi) or (lo, hi)
    if not vals or any(not (math.isfinite(v) and 0 <= v <= MAX_RHO) for v in vals):
        raise InputError(f"--rho {text!r}: radii must be numbers from 0 to {MAX_RHO:g}")
    if len(set(vals)) != len(vals):
        raise InputError(f"--rho {text!r}: a radius is named twice")
    out = tuple(sorted(set(vals) | {0.0}))
    if len(out) > MAX_RHOS:
        raise InputError(f"--rho {text!r}: {len(out)} radii, at most {MAX_RHOS}")
    return out


#: The files :func:`write` writes (the plots are report.plots'); a previous `cosine robust-eval` run
#: holds the first (specs.io.check_run_dir: --out must be a new or empty directory or such a run).
EVAL_FILE, TUNINGS_FILE = "robust_eval.parquet", "tunings.parquet"
RUN_FILES = RunFiles("`cosine robust-eval`", finished=(EVAL_FILE,), writes=(EVAL_FILE, TUNINGS_FILE))


def write(ev: RobustEval, out: Path) -> list[Path]:
    """robust_eval.parquet (one row per expected workload x radius x sample) and tunings.parquet."""
    out.mkdir(parents=True, exist_ok=True)
    return [write_records(out / EVAL_FILE, ev.rows), write_records(out / TUNINGS_FILE, ev.tunings)]
