"""`cosine solve specs/ycsb_a.yaml --json` is pinned: the whole solution.json
minus wall-clock timings, compared number by number (relative 1e-9).

Run through the installed command in a subprocess, so stdout must be exactly
one JSON document. A change of model, prices or search that moves the answer
on purpose regenerates the file: ``COSINE_UPDATE_GOLDEN=1 pytest tests/test_golden.py``
(and the commit says why the answer moved).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden" / "solve_ycsb_a.json"
#: Fields that measure this machine, not the answer (and solution.json's seal, which covers them).
TIMING_KEYS = ("wall_s", "timings_s", "sha256")


def strip_timings(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: strip_timings(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [strip_timings(v) for v in obj]
    return obj


def differences(got: Any, want: Any, path: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{path}/{k}: missing" for k in want if k not in got]
        out += [f"{path}/{k}: unexpected" for k in got if k not in want]
        for k in want.keys() & got.keys():
            out += differences(got[k], want[k], f"{path}/{k}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: {len(got)} items, expected {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True)) for d in differences(g, w, f"{path}[{i}]")]
    if isinstance(want, float) and isinstance(got, int | float) and not isinstance(got, bool):
        return [] if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12) else [f"{path}: {got!r} != {want!r}"]
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


def test_solve_ycsb_a_json_is_pinned(tmp_path):
    cmd = [sys.executable, "-c", "from cli.main import app; app()", "solve", "specs/ycsb_a.yaml", "--json"]
    res = subprocess.run([*cmd, "--out", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    got = strip_timings(json.loads(res.stdout))  # stdout is one JSON document, nothing else
    if os.environ.get("COSINE_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    diffs = differences(got, want)
    assert not diffs, "the answer moved:\n" + "\n".join(diffs[:40])
