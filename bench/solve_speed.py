"""Cold and warm `cosine solve` against an older commit's (issue 15 section 1). Prints figures; not a test.

    flock /work/wt/measure.lock .venv/bin/python -m bench.solve_speed [--spec specs/ycsb_a.yaml]
        [--repeat 3] [--against COMMIT]

Whole processes (`python -c "from cli import app; app()" solve SPEC --json`), run in two
temporary `git worktree`s, of HEAD (so edits made meanwhile are not measured) and of
``--against`` (default: where this branch left main, ``git merge-base HEAD main``), with the
same interpreter, interleaved so both see the same machine load; median (and min, max) of
``--repeat`` runs each:

* old: the older commit's solve (it has no table cache);
* cold: this checkout with ``--no-cache`` (every table built);
* warm: this checkout with a table cache filled beforehand, at another budget
  (``--budget`` of half the spec's) and with one provider fewer (``--providers``): what a
  what-if changes. The cache is a temporary directory (``COSINE_CACHE_DIR``).

Each run's own split (``search.timings_s`` of its solution.json: tables, frontier) is printed
too, and the cold and warm answers are checked equal to the old commit's at the same budget
(the bill and the exact throughput, relative 1e-9; one more, untimed, old run at the warm budget).
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
CLI = [sys.executable, "-c", "from cli import app; app()", "solve"]


def _solve(cwd: Path, spec: str, out: Path, extra: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """Wall time and solution.json of one fresh `cosine solve` process run in ``cwd``."""
    t0 = time.perf_counter()
    res = subprocess.run([*CLI, spec, "--json", "--out", str(out), *extra], cwd=cwd, env=env, capture_output=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{cwd}: solve {' '.join(extra)} failed: {res.stderr.decode()[-400:]}")
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
    try:
        from specs.schema import load_spec

        spec = load_spec(REPO / args.spec)
        budget = f"{spec.budget_usd / 2:g}"
        providers = ",".join(spec.providers[:-1]) or spec.providers[0]
        env = {**os.environ, "COSINE_CACHE_DIR": str(scratch / "cache")}
        spec_path = str((REPO / args.spec).resolve())
        print(f"spec {spec.name}; new {head}; old {against}")
        print(f"load before: {os.getloadavg()[0]:.2f}")
        _solve(new, spec_path, scratch / "fill", [], env)  # fills the cache for the warm runs
        runs: dict[str, tuple[list[float], list[dict[str, float]]]] = {}
        answers: dict[str, dict[str, Any]] = {}
        cases = [
            ("old", old, []),
            ("cold (--no-cache)", new, ["--no-cache"]),
            ("warm, --budget", new, ["--budget", budget]),
            ("warm, --providers", new, ["--providers", providers]),
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
        _, answers["old, --budget"] = _solve(old, spec_path, scratch / "check", ["--budget", budget], env)
        cold, warm = statistics.median(runs["cold (--no-cache)"][0]), statistics.median(runs["warm, --budget"][0])
        base = statistics.median(runs["old"][0])
        print(f"  cold speed-up over old: {base / cold:.2f}x; warm (--budget) over old: {base / warm:.2f}x")
        agree = _same(answers["cold (--no-cache)"], answers["old"]) and _same(
            answers["warm, --budget"], answers["old, --budget"]
        )
        print(f"  answers equal to the old commit's (bill, exact throughput): {agree}")
        print(f"load after: {os.getloadavg()[0]:.2f}")
    finally:
        for where in (old, new):
            subprocess.run([*git, "worktree", "remove", "--force", str(where)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
