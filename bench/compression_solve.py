"""Issue 17 §1: when does the solver pick compression, and what does it save?

Solves a shipped spec (default ycsb_a) at several value compressibilities
(``workload.compressibility``; 1.0 = incompressible, the shipped default) with
`cosine solve` and prints, per compressibility, the chosen codecs, block size,
cluster, storage and total monthly bill and the predicted throughput.

    .venv/bin/python -m bench.compression_solve [--spec ycsb_a] [--values 1.0,0.5,0.25]
        [--out runs/compression] [--reuse]

Each solve writes its run directory under --out (``SPEC_cC``); --reuse only re-reads
the solution.json of runs already there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from specs.schema import SPEC_DIR


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="ycsb_a")
    ap.add_argument("--values", default="1.0,0.5,0.25")
    ap.add_argument("--out", type=Path, default=Path("runs/compression"))
    ap.add_argument("--reuse", action="store_true")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    raw = yaml.safe_load((SPEC_DIR / f"{a.spec}.yaml").read_text())
    rows = []
    for c in (float(v) for v in a.values.split(",")):
        name = f"{a.spec}_c{c:g}"
        run = a.out / name
        secs = float("nan")
        if not (a.reuse and (run / "solution.json").is_file()):
            spec = a.out / f"{name}.yaml"
            spec.write_text(
                yaml.safe_dump({**raw, "name": name, "workload": {**raw["workload"], "compressibility": c}})
            )
            t0 = time.perf_counter()
            cmd = [
                sys.executable,
                "-c",
                "from cli.main import app; app()",
                "solve",
                str(spec),
                "--out",
                str(run),
                "--json",
            ]
            subprocess.run(cmd, check=True, capture_output=True)
            secs = time.perf_counter() - t0
        sol = json.loads((run / "solution.json").read_text())
        d, st, bill = sol["designs"][0], sol["storage"][0], sol["monthly_cost"]
        rows.append(
            f"| {c:g} | {d['codec_hot']}, {d['codec_cold']} | {d['block_bytes']:,} B | {d['count']} x {d['vm_type']} "
            f"({d['class']} T={d['T']} K={d['K']} Z={d['Z']}) | {st['label']} | ${bill['storage']:,.0f} "
            f"| ${bill['total']:,.0f} | {sol['predicted']['throughput_ops'] / 1e6:,.2f}M | {secs:,.0f} |"
        )
    print(f"{a.spec} at its budget, by value compressibility")
    print(
        "| compressibility | codec hot, cold | block | cluster (design) | volume per node | storage $/mo | total $/mo "
        "| throughput ops/s | solve s |"
    )
    print("|---:|---|---:|---|---|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
