"""Cold and warm `cosine solve` against an older commit's (issue 15 section 1). Prints figures; not a test.

    flock /work/wt/measure.lock .venv/bin/python -m bench.solve_speed [--spec specs/ycsb_a.yaml]
        [--repeat 3] [--against COMMIT]

Whole processes (`python -c "from cli.main import app; app()" solve SPEC --json`), run in two
temporary `git worktree`s, of HEAD (so edits made meanwhile are not measured) and of
``--against`` (default: where this branch left main, ``git merge-base HEAD main``), with the
same interpreter, interleaved so both see the same machine load; median (and min, max) of
``--repeat`` runs each:

* cold: ``--no-cache`` (every table built, every answer re-evaluated), both commits;
* warm: with the caches filled beforehand by one untimed solve of each commit, at another
  budget (``--budget`` of half the spec's) and with one provider fewer (``--providers``): what
  a what-if changes. The caches are a temporary directory (``COSINE_CACHE_DIR``); the two
  commits' files have different keys (the code is part of the key).
* `cosine whatif --budget` (half the spec's) on each commit's own saved run: the what-if that reads
  the frontier and never re-solves, a whole process each;
* in-process warm: the same two what-ifs as repeated `run_solve` calls inside one Python
  process of HEAD (imports done, caches filled), so the process start-up and imports, which
  every whole-process figure includes, are shown apart; and the bare interpreter's start.

Each run's own split (``search.timings_s`` of its solution.json: tables, frontier) is printed
too, and the cold and warm answers are checked equal to the old commit's at the same budget
(the bill and the exact throughput, relative 1e-9).
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

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from cli.main import app; app()", "solve"]


def _solve(cwd: Path, spec: str, out: Path, extra: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """Wall time and solution.json of one fresh `cosine solve` process run in ``cwd``."""
    t0 = time.perf_counter()
    res = subprocess.run([*CLI, spec, "--json", "--out", str(out), *extra], cwd=cwd, env=env, capture_output=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{cwd}: solve {' '.join(extra)} failed: {res.stderr.decode()[-400:]}")
    return wall, json.loads(res.stdout)


def _whatif(cwd: Path, run: Path, budget: str, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """Wall time and JSON answer of one fresh `cosine whatif --budget` process run in ``cwd``."""
    args = [sys.executable, "-c", "from cli.main import app; app()", "whatif", str(run), "--budget", budget, "--json"]
    t0 = time.perf_counter()
    res = subprocess.run(args, cwd=cwd, env=env, capture_output=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{cwd}: whatif failed: {res.stderr.decode()[-400:]}")
    return wall, json.loads(res.stdout)


def _key(sol: dict[str, Any]) -> tuple[float, float]:
    return sol["monthly_cost"]["total"], sol["predicted"]["throughput_ops"]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(abs(x - y) <= 1e-9 * max(abs(y), 1.0) for x, y in zip(_key(a), _key(b), strict=True))


def _summary(name: str, walls: list[float], splits: list[dict[str, float]]) -> None:
    t = statistics.median(walls)
    tab = statistics.median(s.get("tables_s", float("nan")) for s in splits)
    fro = statistics.median(s.get("frontier_s", float("nan")) for s in splits)
    print(
        f"  {name:<34} median {t:7.2f} s  (min {min(walls):.2f}, max {max(walls):.2f}; "
        f"in-process: tables {tab:.2f} s, frontier {fro:.2f} s)"
    )


#: Run in the new commit's worktree: warm `run_solve` what-ifs inside one process, as JSON.
_IN_PROCESS = """
import json, statistics, sys, time
from pathlib import Path
t0 = time.perf_counter()
from cost_models.pricing.catalog import load_catalog
from solver.backends import get_backend
from solver.solve import run_solve
from solver.table_cache import TableCache
from specs.schema import load_spec
imports = time.perf_counter() - t0
spec_path, out, budget, providers, repeat = sys.argv[1:6]
spec = load_spec(Path(spec_path))
cat = load_catalog(spec.pricing)
be = get_backend("highs")
def solve(**kw):
    t = time.perf_counter()
    run_solve(spec, cat, be, out_dir=Path(out), cache=TableCache(), **kw)
    return time.perf_counter() - t
first = solve()
times = {"budget": [], "providers": []}
for _ in range(int(repeat)):
    times["budget"].append(solve(budget=float(budget)))
    times["providers"].append(solve(providers=tuple(providers.split(","))))
print(json.dumps({"imports": imports, "first": first, **{k: statistics.median(v) for k, v in times.items()}}))
"""


def _in_process(cwd: Path, spec: str, budget: str, providers: str, env: dict[str, str], repeat: int) -> None:
    """Warm what-ifs inside one process of ``cwd`` (:data:`_IN_PROCESS`), and the bare interpreter's start."""
    out = Path(tempfile.mkdtemp(prefix="solve_speed_in_"))
    try:
        args = [sys.executable, "-c", _IN_PROCESS, spec, str(out), budget, providers, str(repeat)]
        res = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=True)
        t = json.loads(res.stdout)
        bare = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare.append(time.perf_counter() - t0)
        print(f"in one process of new (median of {repeat}; imports and caches already loaded):")
        print(f"  warm run_solve, --budget {budget}:      {t['budget']:.3f} s")
        print(f"  warm run_solve, --providers {providers}: {t['providers']:.3f} s")
        print(f"  (that process's imports: {t['imports']:.2f} s; its first, warm, solve: {t['first']:.2f} s;")
        print(f"   a bare `python -c pass`: {statistics.median(bare):.3f} s)")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="specs/ycsb_a.yaml")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", help="the older commit (default: git merge-base HEAD main)")
    args = ap.parse_args()
    git = ["git", "-C", str(REPO)]
    against = args.against or subprocess.check_output([*git, "merge-base", "HEAD", "main"], text=True).strip()
    against = subprocess.check_output([*git, "rev-parse", "--short", against], text=True).strip()
    head = subprocess.check_output([*git, "rev-parse", "--short", "HEAD"], text=True).strip()
    scratch = Path(tempfile.mkdtemp(prefix="solve_speed_"))
    old, new = scratch / "old", scratch / "new"
    for where, commit in ((old, against), (new, head)):
        subprocess.run([*git, "worktree", "add", "--detach", "--quiet", str(where), commit], check=True)
        # the packages' bytecode, as `make setup` compiles it for an installed tree (where
        # PYTHONDONTWRITEBYTECODE is set, as on these machines, a fresh worktree never gets any,
        # and until stop 65 every timed process of both commits compiled ~70 modules: ~0.06 s of
        # a `cosine whatif`)
        packages = sorted(d.name for d in where.iterdir() if (d / "__init__.py").is_file())
        subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], cwd=where, check=True)
    try:
        from specs.schema import load_spec

        spec = load_spec(REPO / args.spec)
        budget = f"{spec.budget_usd / 2:g}"
        providers = ",".join(spec.providers[:-1]) or spec.providers[0]
        env = {**os.environ, "COSINE_CACHE_DIR": str(scratch / "cache")}
        spec_path = str((REPO / args.spec).resolve())
        print(f"spec {spec.name}; new {head}; old {against}")
        print(f"load before: {os.getloadavg()[0]:.2f}")
        for tag, cwd in (("old", old), ("new", new)):  # fills each commit's caches for the warm runs
            _solve(cwd, spec_path, scratch / f"fill-{tag}", [], env)
        runs: dict[str, tuple[list[float], list[dict[str, float]]]] = {}
        answers: dict[str, dict[str, Any]] = {}
        cases = [
            ("old cold (--no-cache)", old, ["--no-cache"]),
            ("new cold (--no-cache)", new, ["--no-cache"]),
            ("old warm, --budget", old, ["--budget", budget]),
            ("new warm, --budget", new, ["--budget", budget]),
            ("old warm, --providers", old, ["--providers", providers]),
            ("new warm, --providers", new, ["--providers", providers]),
        ]
        for i in range(args.repeat):
            for name, cwd, extra in cases:
                wall, sol = _solve(cwd, spec_path, scratch / f"run{i}", extra, env)
                walls, splits = runs.setdefault(name, ([], []))
                walls.append(wall)
                splits.append(sol["search"]["timings_s"])
                answers[name] = sol
        print(f"whole `cosine solve` process, wall time, {args.repeat} runs each, interleaved:")
        for name, _, _ in cases:
            _summary(name, *runs[name])
        med = {name: statistics.median(walls) for name, (walls, _) in runs.items()}
        for what in ("cold (--no-cache)", "warm, --budget", "warm, --providers"):
            print(f"  {what}: new is {med['old ' + what] / med['new ' + what]:.2f}x faster than old")
        agree = all(_same(answers[f"new {w}"], answers[f"old {w}"]) for w in ("cold (--no-cache)", "warm, --budget"))
        print(f"  answers equal to the old commit's (bill, exact throughput): {agree}")
        asked: dict[str, tuple[list[float], list[dict[str, Any]]]] = {"old": ([], []), "new": ([], [])}
        for _ in range(args.repeat):
            for tag, cwd in (("old", old), ("new", new)):
                wall, ans = _whatif(cwd, scratch / f"fill-{tag}", budget, env)
                asked[tag][0].append(wall)
                asked[tag][1].append(ans["answer"])
        w_old, w_new = (statistics.median(asked[t][0]) for t in ("old", "new"))
        print(f"`cosine whatif --budget {budget}` on each commit's saved run, whole process, median of {args.repeat}:")
        lo_old, lo_new = (min(asked[t][0]) for t in ("old", "new"))
        print(f"  old {w_old:.2f} s (min {lo_old:.2f}), new {w_new:.2f} s (min {lo_new:.2f}):")
        print(f"  new is {w_old / w_new:.2f}x faster; answers equal: {asked['old'][1] == asked['new'][1]}")
        _in_process(new, spec_path, budget, providers, env, args.repeat)
        print(f"load after: {os.getloadavg()[0]:.2f}")
    finally:
        for where in (old, new):
            subprocess.run([*git, "worktree", "remove", "--force", str(where)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
