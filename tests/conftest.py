"""Fixtures shared by the test files: the CLI runner, one small solved run, the built engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app

#: A small two-provider spec that solves in about a second.
TINY_SPEC = """
name: tiny
workload:
  entries: 2000000
  key_bytes: 16
  value_bytes: 100
  operations: {get: 0.5, update: 0.5}
  distribution:
    get: {kind: zipfian, theta: 0.99}
    put: {kind: zipfian, theta: 0.99}
  operations_per_month: 1.0e9
budget: {monthly_usd: 800, range: [10, 5000]}
performance: {min_throughput: 1000}
providers: [aws, gcp]
slas: [backup, availability]
design:
  size_ratio: [4, 10]
  max_cluster_size: 4
"""


@pytest.fixture(scope="session", autouse=True)
def table_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's table cache (solver.table_cache), never the user's: the first solve of a
    spec in a session builds its tables cold, later ones read them back. Subprocesses inherit it."""
    import os

    d = tmp_path_factory.mktemp("table_cache")
    os.environ["COSINE_CACHE_DIR"] = str(d)
    return d


@pytest.fixture(scope="session")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="session")
def solved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """(spec path, run directory, solution.json) of `cosine solve` on :data:`TINY_SPEC` (8 bands, with --plot)."""
    d = tmp_path_factory.mktemp("run")
    spec = d / "tiny.yaml"
    spec.write_text(TINY_SPEC)
    out = d / "out"
    res = CliRunner().invoke(app, ["solve", str(spec), "--out", str(out), "--bands", "8", "--json", "--plot"])
    assert res.exit_code == 0, res.output + res.stderr
    return spec, out, json.loads(res.stdout)


@pytest.fixture(scope="session")
def engine_binary() -> Path:
    """The template engine's cosine-bench, built once (release)."""
    from measure.engine import TEMPLATE, build

    return build(TEMPLATE)


@pytest.fixture(scope="session")
def sim_binary() -> Path:
    """The template's I/O-free compaction simulator, cosine-sim (the engine's own strategy on key lists)."""
    from measure.engine import TEMPLATE, build

    return build(TEMPLATE, "cosine-sim")
