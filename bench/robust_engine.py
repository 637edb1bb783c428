"""Robust vs nominal tunings measured on the Rust engine (ENDURE's benchmark, scaled down).

For a few of ENDURE's expected workloads where the robust tuning (rho = 1,
ENDURE's recommended radius) differs from the nominal one, both tunings are
rendered from ENDURE's design space (studies/robust_eval.py) at this machine's
scale, and the engine runs each on the expected workload and on drifted
observed workloads. Reported per case: the KL distance of the observed
workload, the model's Delta (I/O), the measured Delta on block I/O per
operation, and the measured Delta on throughput,
Delta = (1/C(w^, robust) - 1/C(w^, nominal)) / (1/C(w^, nominal)).

    python -m bench.robust_engine [--records 200000] [--ops 100000] [--rho 1.0]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
from pathlib import Path

import numpy as np

from cost_models.robust import kl_divergence, kl_worst_case
from measure.engine import TEMPLATE, build, run, workload_json
from measure.validate import measured
from render.config import engine_sections, local_entry, to_toml
from specs.schema import parse_spec
from specs.vocab import WalSync
from studies.robust_eval import EXPECTED, cost_vectors, design_space, endure_layout

#: ENDURE's operations (z0, z1, q, w) in the spec's names; writes are unique inserts.
OPS = ("empty_get", "get", "range", "insert")
KEY, VALUE = 16, 240
#: observed workloads besides the expected one: ENDURE's uniform one and two draws
DRAWS = 2


def spec_for(w: np.ndarray, scan: int):
    ops = ", ".join(f"{o}: {float(x)!r}" for o, x in zip(OPS, w / w.sum(), strict=True))  # full precision: sums to 1
    return parse_spec(
        f"name: endure\nworkload: {{entries: 1000000, key_bytes: {KEY}, value_bytes: {VALUE}, "
        f"operations: {{{ops}}}, scan_length: {scan}}}\nbudget: {{monthly_usd: 1000}}\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--rho", type=float, default=1.0)
    ap.add_argument("--cases", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    build(TEMPLATE)
    n = a.records
    designs = design_space(n)
    C = cost_vectors(designs, n, KEY, VALUE)
    lay = endure_layout(designs, n, KEY, VALUE)
    scan = int(lay.B[0])  # ENDURE's short ranges: about one block per run
    rng = np.random.default_rng(a.seed)
    root = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; {n:,} records of "
        f"{KEY}+{VALUE} B, {ENDURE_NOTE}; rho = {a.rho}, {a.ops:,} ops per run"
    )
    print(
        f"{'expected':>24} {'observed':>24} {'KL':>5} {'model D':>8} {'io D':>7} {'ops/s D':>8} "
        f"{'nominal ops/s':>13} {'robust ops/s':>12}"
    )
    cases = 0
    for kind, w_expected in EXPECTED:
        w = np.array(w_expected)
        nominal = int(np.argmin(C @ w))
        robust = int(np.argmin(kl_worst_case(C, w, a.rho)))
        if nominal == robust:
            continue
        cases += 1
        if cases > a.cases:
            break
        toml = {}
        for tag, i in (("nominal", nominal), ("robust", robust)):
            entry = local_entry(designs[i], lay, i, threads=1)
            toml[tag] = to_toml(
                engine_sections(
                    entry, KEY, VALUE, dict(zip(OPS, w, strict=True)), f"{tag} {designs[i].name}", wal_sync=WalSync.NONE
                )
            )
        observed: list[np.ndarray] = [w, np.full(4, 0.25), *rng.dirichlet(np.ones(4), size=DRAWS)]
        for obs in observed:
            spec = spec_for(obs, scan)
            ops = a.ops // 5 if obs[2] > 0.5 else a.ops  # scans are slow; fewer suffice
            wl = workload_json(spec, n, ops, 1)
            res = {}
            for tag, text in toml.items():
                db = root / f"cosine-robust-{os.getpid()}-{tag}"
                try:
                    res[tag] = run(TEMPLATE, text, wl, data_dir=db)
                finally:
                    shutil.rmtree(db, ignore_errors=True)
            io = {
                t: sum(float(x) * measured(r).get(o, 0.0) for o, x in zip(OPS, obs / obs.sum(), strict=True))
                for t, r in res.items()
            }
            tput = {t: float(r["run"]["throughput_ops"]) for t, r in res.items()}
            model_d = float(obs @ C[nominal]) / float(obs @ C[robust]) - 1.0
            io_d = io["nominal"] / io["robust"] - 1.0 if io["robust"] > 0 else float("nan")
            x_d = tput["robust"] / tput["nominal"] - 1.0
            kl = float(kl_divergence(obs[None, :], w[None, :])[0])
            print(
                f"{kind + ' ' + fmt(w):>24} {fmt(obs):>24} {kl:5.2f} {model_d:+8.2f} {io_d:+7.2f} {x_d:+8.2f} "
                f"{tput['nominal']:13,.0f} {tput['robust']:12,.0f}",
                flush=True,
            )
        print(
            f"{'':>24} nominal {designs[nominal].name} buffer {designs[nominal].buffer_bytes / 2**20:.1f} MiB, "
            f"{designs[nominal].bloom_bits:.1f} bits/key; robust {designs[robust].name} buffer "
            f"{designs[robust].buffer_bytes / 2**20:.1f} MiB, {designs[robust].bloom_bits:.1f} bits/key"
        )


ENDURE_NOTE = "memory 10 bits/key for buffer + filters (ENDURE's set-up), no block cache"


def fmt(w: np.ndarray) -> str:
    return "(" + ",".join(f"{x:.2f}" for x in w) + ")"


if __name__ == "__main__":
    main()
