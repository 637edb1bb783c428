"""Issue 47's figures, before and after, in one session (BENCHMARKS.md section 21). Prints figures; not a test.

    flock /work/wt/measure.lock .venv/bin/python -m bench.certified [--against COMMIT] [--repeat 3]

Two temporary `git worktree`s, of HEAD and of ``--against`` (default: where this branch left main,
``git merge-base HEAD main``), run with the same interpreter and one temporary cache directory
(``COSINE_CACHE_DIR``; the two commits' files have different keys). Each figure is a whole
`cosine` process of each commit (``python -c "from cli.main import app; app()" ...``):

1. ycsb_a at its budget: the answer, what it spends, what binds; `cosine evaluate` of the answer's
   design on 190 r5d.large; ycsb_a at $1,000 (and 9 r5d.large evaluated);
2. each provider's rows: the azure bands that are infeasible, azure solved alone at $20,000, GCP's
   rows from $12,000 up;
3. `cosine whatif --budget` 3,000 and 1,000 on the saved run, against `cosine solve --budget`;
4. the oracle on a GCP-only ycsb_a with two classes and ``max_cluster_size: 4``: contexts, and
   what `--method exhaustive` does (old: refuses), and its band times against the threshold's;
5. the cheapest configuration meeting the need (new only: the old solve has no such answer);
6. timings: `cosine whatif --budget` whole processes (new re-solving, new ``--saved``, old), a
   re-solving what-if inside one warm process of HEAD, and warm `cosine solve` of both commits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from cli.main import app; app()"]


def _run(
    cwd: Path, args: list[str], env: dict[str, str], check: bool = True
) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    res = subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if check and res.returncode != 0:
        raise SystemExit(f"{cwd}: {' '.join(args)} failed ({res.returncode}): {res.stderr[-600:]}")
    return wall, res


def _vms(sol: dict[str, Any]) -> str:
    return " + ".join(f"{v['count']} x {v['type']}" for v in sol["vms"])


def _answer(sol: dict[str, Any]) -> str:
    tot = sol["monthly_cost"]["total"]
    return f"{sol['provider']} {_vms(sol)}: {sol['predicted']['throughput_ops']:,.0f} ops/s for ${tot:,.2f}"


def _rows(run: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.ParquetFile(run / "frontier.parquet").read().to_pylist()


#: Run in the new commit's worktree: re-solving what-ifs inside one process (imports and caches warm).
_IN_PROCESS = """
import json, statistics, sys, time
from pathlib import Path
t0 = time.perf_counter()
from solver.whatif import whatif
imports = time.perf_counter() - t0
run, repeat = Path(sys.argv[1]), int(sys.argv[2])
whatif(run, 3000.0, None)  # the first: reads the tables
out = {}
for b in (3000.0, 1000.0, 4321.0):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        whatif(run, b, None)
        ts.append(time.perf_counter() - t)
    out[str(b)] = statistics.median(ts)
print(json.dumps({"imports": imports, **out}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", help="the older commit (default: git merge-base HEAD main)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    git = ["git", "-C", str(REPO)]
    against = args.against or subprocess.check_output([*git, "merge-base", "HEAD", "main"], text=True).strip()
    against = subprocess.check_output([*git, "rev-parse", "--short", against], text=True).strip()
    head = subprocess.check_output([*git, "rev-parse", "--short", "HEAD"], text=True).strip()
    scratch = Path(tempfile.mkdtemp(prefix="certified_"))
    old, new = scratch / "old", scratch / "new"
    for where, commit in ((old, against), (new, head)):
        subprocess.run([*git, "worktree", "add", "--detach", "--quiet", str(where), commit], check=True)
    env = {**os.environ, "COSINE_CACHE_DIR": str(scratch / "cache")}
    spec = str((REPO / "specs/ycsb_a.yaml").resolve())
    try:
        print(f"new {head}; old {against}; load {os.getloadavg()[0]:.2f}")
        runs: dict[str, Path] = {}
        sols: dict[str, dict[str, Any]] = {}
        print("\n1. ycsb_a at its budget ($20,000), `cosine solve specs/ycsb_a.yaml`:")
        for tag, cwd in (("old", old), ("new", new)):
            runs[tag] = scratch / f"run-{tag}"
            _, res = _run(cwd, ["solve", spec, "--out", str(runs[tag]), "--json"], env)
            sols[tag] = sol = json.loads(res.stdout)
            b = sol["binding"]
            print(
                f"  {tag}: {_answer(sol)}; spends {b['budget_used']:.1%}; binding {b['resource']}: {b['detail'][:160]}"
            )
            cert = sol["certificate"]
            print(
                f"       certificate: mip_gap {cert['mip_gap']}, approx_error {cert['approx_error']:.3g}, "
                f"grid_gap {cert.get('grid_gap', 'absent')}"
            )
        design = "T=2,K=1,Z=1,buffer=1GiB,bloom_bits=1,block=4096,threads=2"
        for n in (156, 190):
            _, res = _run(new, ["evaluate", spec, "--design", design, "--vm", f"aws:r5d.large[x{n}]", "--json"], env)
            ev = json.loads(res.stdout)
            print(
                f"  `cosine evaluate ... --vm aws:r5d.large[x{n}]`: {ev['throughput_ops']:,.0f} ops/s "
                f"for ${ev['monthly_cost']['total']:,.2f}"
            )
        for tag, cwd in (("old", old), ("new", new)):
            _, res = _run(cwd, ["solve", spec, "--budget", "1000", "--out", str(scratch / f"k1-{tag}"), "--json"], env)
            print(f"  {tag} --budget 1000: {_answer(json.loads(res.stdout))}")

        print("\n2. each provider's rows (frontier.parquet of the runs above):")
        for tag in ("old", "new"):
            rows = _rows(runs[tag])
            az = [r for r in rows if r["provider"] == "azure"]
            feas = sum(r["monthly_cost"] is not None for r in az)
            print(f"  {tag}: azure feasible in {feas} of {len(az)} bands ({len(az) - feas} infeasible)")
            gcp = [
                r for r in rows if r["provider"] == "gcp" and r["budget"] >= 12_000 and r["monthly_cost"] is not None
            ]
            for r in gcp[:: max(1, len(gcp) // 5)]:
                conf = json.loads(r["configuration"]) if r["configuration"] else {}
                vms = " + ".join(f"{v['count']} x {v['type']}" for v in conf.get("vms", []))
                print(
                    f"       gcp at ${r['budget']:,.0f}: {vms}, {r['throughput_ops']:,.0f} ops/s "
                    f"for ${r['monthly_cost']:,.2f}"
                )
        for tag, cwd in (("old", old), ("new", new)):
            _, res = _run(
                cwd,
                [
                    "solve",
                    spec,
                    "--providers",
                    "azure",
                    "--budget",
                    "20000",
                    "--out",
                    str(scratch / f"az-{tag}"),
                    "--json",
                ],
                env,
                check=False,
            )
            out = _answer(json.loads(res.stdout)) if res.returncode == 0 else res.stderr.strip()[-200:]
            print(f"  {tag} azure alone at $20,000: {out}")
            _, res = _run(
                cwd,
                [
                    "solve",
                    spec,
                    "--providers",
                    "gcp",
                    "--budget",
                    "20000",
                    "--out",
                    str(scratch / f"gc-{tag}"),
                    "--json",
                ],
                env,
            )
            print(f"  {tag} gcp alone at $20,000: {_answer(json.loads(res.stdout))}")

        print("\n3. `cosine whatif RUN --budget B` against `cosine solve --budget B`:")
        for budget in ("3000", "1000"):
            for tag, cwd in (("old", old), ("new", new)):
                _, res = _run(cwd, ["whatif", str(runs[tag]), "--budget", budget, "--json"], env)
                a = json.loads(res.stdout)["answer"]
                vms = " + ".join(f"{v['count']} x {v['type']}" for v in a["configuration"]["vms"])
                _, sres = _run(
                    cwd, ["solve", spec, "--budget", budget, "--out", str(scratch / f"s{budget}-{tag}"), "--json"], env
                )
                s = json.loads(sres.stdout)
                same = abs(s["monthly_cost"]["total"] - a["monthly_cost"]) < 1e-6 and _vms(s) == vms
                print(
                    f"  {tag} whatif {budget}: {a['provider']} {vms}, {a['throughput_ops']:,.0f} ops/s for "
                    f"${a['monthly_cost']:,.2f} ({a['monthly_cost'] / float(budget):.0%} of it); "
                    f"solve --budget {budget}: {_answer(s)}; equal: {same}"
                )

        print("\n4. the oracle: GCP-only ycsb_a, classes [lsm, btree], max_cluster_size 4, no robustness:")
        raw = yaml.safe_load((REPO / "specs/ycsb_a.yaml").read_text())
        raw["name"] = "ycsb_a_gcp4"
        raw["providers"] = ["gcp"]
        raw["design"]["classes"] = ["lsm", "btree"]
        raw["design"]["max_cluster_size"] = 4
        raw.pop("robustness", None)
        small = scratch / "ycsb_a_gcp4.yaml"
        small.write_text(yaml.safe_dump(raw))
        for tag, cwd in (("old", old), ("new", new)):
            for method in ("exhaustive", "threshold"):
                wall, res = _run(
                    cwd,
                    [
                        "solve",
                        str(small),
                        "--method",
                        method,
                        "--bands",
                        "2",
                        "--budget",
                        "2000",
                        "--out",
                        str(scratch / f"o-{tag}-{method}"),
                        "--json",
                    ],
                    env,
                    check=False,
                )
                if res.returncode:
                    print(f"  {tag} --method {method}: exit {res.returncode}: {res.stderr.strip()[-220:]}")
                    continue
                sol = json.loads(res.stdout)
                print(
                    f"  {tag} --method {method}: {sol['search']['contexts']} contexts; {_answer(sol)}; "
                    f"whole process {wall:.1f} s (frontier {sol['search']['timings_s']['frontier_s']:.1f} s, 3 bands)"
                )

        print("\n5. the second answer (new): the cheapest configuration meeting the need")
        na = sols["new"].get("cheapest_meeting_need")
        if na:
            c = na["configuration"]
            print(f"  need {na['need']['throughput_ops']:,.0f} ops/s ({na['need']['rule']})")
            print(
                f"  {c['provider']} {_vms(c)}: {c['predicted']['throughput_ops']:,.0f} ops/s "
                f"for ${c['monthly_cost']['total']:,.2f}"
            )
        for tag, cwd in (("old", old), ("new", new)):
            _, res = _run(cwd, ["whatif", str(runs[tag]), "--throughput", "197869", "--json"], env)
            a = json.loads(res.stdout)["answer"]
            print(
                f"  {tag} whatif --throughput 197869: {a['provider']} {a['throughput_ops']:,.0f} ops/s "
                f"for ${a['monthly_cost']:,.2f}"
            )

        print(f"\n6. timings (median of {args.repeat}; load {os.getloadavg()[0]:.2f}):")
        cases = [
            ("new whatif --budget 3000 (re-solve)", new, ["whatif", str(runs["new"]), "--budget", "3000", "--json"]),
            (
                "new whatif --budget 3000 --saved",
                new,
                ["whatif", str(runs["new"]), "--budget", "3000", "--saved", "--json"],
            ),
            ("old whatif --budget 3000", old, ["whatif", str(runs["old"]), "--budget", "3000", "--json"]),
            ("new warm solve", new, ["solve", spec, "--budget", "10000", "--out", str(scratch / "w-new"), "--json"]),
            ("old warm solve", old, ["solve", spec, "--budget", "10000", "--out", str(scratch / "w-old"), "--json"]),
        ]
        walls: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        frontier: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        for _ in range(args.repeat):
            for name, cwd, cmd in cases:
                wall, res = _run(cwd, cmd, env)
                walls[name].append(wall)
                if "solve" in name:
                    frontier[name].append(json.loads(res.stdout)["search"]["timings_s"]["frontier_s"])
        for name, _, _ in cases:
            extra = f"; frontier {statistics.median(frontier[name]):.2f} s" if frontier[name] else ""
            print(f"  {name:<40} {statistics.median(walls[name]):6.2f} s (min {min(walls[name]):.2f}){extra}")
        res = subprocess.run(
            [sys.executable, "-c", _IN_PROCESS, str(runs["new"]), str(args.repeat)],
            cwd=new,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        t = json.loads(res.stdout)
        print(f"  in one process of new (imports {t['imports']:.2f} s, tables read once), re-solving whatif --budget:")
        for b in ("3000.0", "1000.0", "4321.0"):
            print(f"    {b}: {t[b]:.3f} s")
        print(f"load after: {os.getloadavg()[0]:.2f}")
    finally:
        for where in (old, new):
            subprocess.run([*git, "worktree", "remove", "--force", str(where)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
