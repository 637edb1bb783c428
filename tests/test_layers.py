"""The import layers hold (pyproject.toml's [tool.importlinter]: cli > report > deploy | studies >
measure > render > solver > cost_models > specs, no cycles between sibling modules but the generated
sympy module's). `make lint` runs the same check; this runs it with the tests, which CI runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_import_contracts_are_kept() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    res = subprocess.run([str(exe), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "2 kept, 0 broken" in res.stdout
