"""Start-up cost of the command line (issue 14 section 3: the compiled model is a generated module,
not code read back from a cache). Prints figures; not a test.

    .venv/bin/python -m bench.startup [--repeat 12] [--against DIR]

For this checkout (and, with ``--against``, another checkout of the repository run with the same
interpreter, e.g. ``git archive <commit> | tar -x -C DIR``), the median and minimum wall time of
fresh processes, interleaved so both see the same machine load:

* ``cosine --help``;
* the solve path's imports plus the compiled cost model, with the user cache as it is ("warm")
  and with an empty cache directory ("cold": an older checkout derives the model with sympy then).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOLVE_PATH = "import solver.solve, solver.backends; from cost_models.symbolic import compiled; compiled()"


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall time of one fresh process (run in ``cwd``: ``python -c`` imports from there first)."""
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=12)
    ap.add_argument("--against", type=Path, help="another checkout to compare with")
    a = ap.parse_args()
    roots = {"this checkout": REPO}
    if a.against is not None:
        roots[f"{a.against}"] = a.against.resolve()
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(a.repeat):
            for label, root in roots.items():
                env = {**os.environ, "PYTHONPATH": str(root)}
                cold = {**env, "XDG_CACHE_HOME": tempfile.mkdtemp(dir=scratch)}
                for what, cmd, e in (
                    ("cosine --help", [sys.executable, "-m", "cli", "--help"], env),
                    ("solve imports + model (warm cache)", [sys.executable, "-c", SOLVE_PATH], env),
                    ("solve imports + model (empty cache)", [sys.executable, "-c", SOLVE_PATH], cold),
                ):
                    times.setdefault((label, what), []).append(_run(cmd, e, root))
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {a.repeat} runs each, interleaved")
    for (label, what), xs in times.items():
        print(f"{label:>28s}  {what:38s} median {statistics.median(xs) * 1e3:6.0f} ms   min {min(xs) * 1e3:6.0f} ms")


if __name__ == "__main__":
    main()
