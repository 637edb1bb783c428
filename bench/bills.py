"""The bill and the throughput of every shipped spec's answer, before and after replication (issue 49).
Prints figures; not a test.

    flock /work/wt/measure.lock .venv/bin/python -m bench.bills [--against 18f96a3] [--specs specs/ycsb_a.yaml ...]

Whole `cosine solve SPEC --json` processes (``python -m cli``, which both the package and the older
single-module CLI answer to), run in two temporary `git worktree`s, of HEAD and of ``--against``, with
the same interpreter and an empty cache each (``COSINE_CACHE_DIR``). For each spec it prints both
answers' bill line by line (every item of ``monthly_cost``: one copy's compute and storage, the
replicas, cross-zone transfer, backup, the SLAs, support), the predicted throughput, the node count and
the VM types, and on HEAD the replication chosen (RF, zones, consistency). A spec the older commit
cannot read (a field it did not have) or cannot answer is printed as such.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _solve(cwd: Path, spec: Path, out: Path, env: dict[str, str]) -> dict[str, Any] | str:
    """solution.json of one `cosine solve` run in ``cwd``, or the last line of its error."""
    res = subprocess.run(
        [sys.executable, "-m", "cli", "solve", str(spec), "--json", "--out", str(out)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit {res.returncode}"
    answer: dict[str, Any] = json.loads(res.stdout)
    return answer


def _vms(sol: dict[str, Any]) -> str:
    parts = [f"{v['count']}x {v['type']}" for v in sol.get("vms", [])]
    return ", ".join(parts) if parts else "?"


def _line(label: str, sol: dict[str, Any] | str) -> str:
    if isinstance(sol, str):
        return f"  {label:<7} no answer: {sol}"
    bill = sol["monthly_cost"]
    items = "  ".join(f"{k} {v:,.2f}" for k, v in bill.items() if k != "total")
    rep = sol.get("replication")
    placed = f"  {rep['label']}, reads {rep['consistency']}" if rep else "  one copy (no replication)"
    kops = sol["predicted"]["throughput_ops"] / 1e3
    return (
        f"  {label:<7} ${bill['total']:>10,.2f}  {kops:>9,.1f} kops/s  {_vms(sol)} on {sol['provider']}{placed}\n"
        f"  {'':<7} {items}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", default="18f96a3", help="the commit before replication (default 18f96a3)")
    ap.add_argument("--specs", nargs="*", type=Path, default=None, help="default: every specs/*.yaml")
    args = ap.parse_args()
    specs = [p.resolve() for p in (args.specs or sorted((REPO / "specs").glob("*.yaml")))]
    git = ["git", "-C", str(REPO)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
    with tempfile.TemporaryDirectory(prefix="cosine-bills-") as tmp:
        root = Path(tmp)
        trees = {"before": (root / "before", args.against), "after": (root / "after", head.stdout.strip())}
        try:
            for where, commit in trees.values():
                subprocess.run([*git, "worktree", "add", "--detach", "--quiet", str(where), commit], check=True)
            print(f"before: {args.against}   after: {head.stdout.strip()}   (each a cold solve, whole process)")
            for spec in specs:
                print(f"\n{spec.stem}")
                for label, (where, _) in trees.items():
                    env = dict(os.environ, COSINE_CACHE_DIR=str(root / f"cache-{label}"), PYTHONDONTWRITEBYTECODE="1")
                    rel = spec.relative_to(REPO) if spec.is_relative_to(REPO) else spec
                    src = where / rel if (where / rel).exists() else spec
                    print(_line(label, _solve(where, src, root / f"out-{label}-{spec.stem}", env)), flush=True)
        finally:
            for where, _ in trees.values():
                subprocess.run([*git, "worktree", "remove", "--force", str(where)], check=False)


if __name__ == "__main__":
    main()
