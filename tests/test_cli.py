"""The CLI through typer's CliRunner: every command answers, input errors exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
runner = CliRunner()


def test_help_lists_commands():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("evaluate", "pricing", "calibrate", "validate"):
        assert cmd in res.output


def test_help_is_instant():
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cli", "--help"], cwd=REPO, check=True, capture_output=True)
    assert time.perf_counter() - t0 < 3.0
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli", "--help"], cwd=REPO, capture_output=True, text=True
    ).stderr
    for heavy in ("sympy", "highspy", "pyomo", "ortools", "pyarrow"):
        assert f" {heavy}\n" not in out and f" {heavy}." not in out, f"{heavy} imported by --help"


@pytest.mark.parametrize("preset", ["rocksdb", "wiredtiger", "faster"])
@pytest.mark.parametrize("spec", ["ycsb_a", "ycsb_b", "ycsb_c", "ycsb_d", "ycsb_e", "ycsb_f"])
def test_evaluate_presets_json(spec, preset):
    res = runner.invoke(
        app, ["evaluate", str(SPECS / f"{spec}.yaml"), "--design", preset, "--vm", "aws:r5d.2xlarge[x4]", "--json"]
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["design"]["name"] == preset
    assert set(d["io_per_op"]) == {"get", "empty_get", "range", "insert", "update", "rmw", "empty_range"}
    assert d["monthly_cost"]["total"] == pytest.approx(
        d["monthly_cost"]["compute"]
        + d["monthly_cost"]["storage"]
        + d["monthly_cost"]["backup"]
        + d["monthly_cost"]["sla"],
        abs=0.02,
    )
    assert d["monthly_cost"]["compute"] == pytest.approx(4 * 0.576 * 730, rel=1e-6)  # on-demand r5d.2xlarge
    if d["feasible"]:
        assert d["throughput_ops"] > 0 and d["latency_s"] > 0


def test_evaluate_custom_design_text():
    res = runner.invoke(
        app,
        [
            "evaluate",
            str(SPECS / "ycsb_a.yaml"),
            "--design",
            "T=8,K=3,Z=1,buffer=1GiB,bloom_bits=10",
            "--vm",
            "gcp:n1-highmem-8[x2]",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "expected block I/O per operation" in res.output and "total per month" in res.output


@pytest.mark.parametrize(
    "args,words",
    [
        (["--design", "T=1,K=1,Z=1,buffer=1GiB"], ["design T", "got 1"]),
        (["--design", "Q=3"], ["unknown design knob"]),
        (["--design", "T=8,buffer=lots"], ["size"]),
        (["--vm", "ibm:x1"], ["unknown provider"]),
        (["--vm", "aws:r5d.huge"], ["unknown VM"]),
        (["--vm", "aws r5d.large"], ["PROVIDER:TYPE"]),
        (["--vm", "aws:r5d.large[x0]"], ["between 1 and"]),
    ],
)
def test_evaluate_bad_flags(args, words):
    res = runner.invoke(app, ["evaluate", str(SPECS / "ycsb_a.yaml"), *args])
    assert res.exit_code == 2, res.output
    assert res.stderr.count("\n") == 1
    for w in words:
        assert w in res.stderr


def test_pricing_show_and_filters():
    res = runner.invoke(app, ["pricing", "show", "--provider", "aws", "--set", "ondemand"])
    assert res.exit_code == 0 and "r5d." in res.output and "gp3" in res.output
    res = runner.invoke(app, ["pricing", "show", "--set", "nope"])
    assert res.exit_code == 2
    res = runner.invoke(app, ["pricing", "show", "--kind", "sla"])
    assert res.exit_code == 0 and "availability" in res.output


def test_an_internal_error_is_one_line_and_its_own_exit_code(capsys) -> None:
    """A bug (an unexpected exception) is one line on stderr and exit 70, not 1: `cosine audit`'s 1
    says a band is over its thresholds, and a crash must not read as that verdict (nor as bad input)."""
    import typer

    from cli.common import cli_errors
    from specs.errors import ExitCode

    with pytest.raises(typer.Exit) as exc, cli_errors():
        raise RuntimeError("a bug\nwith a second line")
    assert exc.value.exit_code == ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert err.strip() == "internal error: RuntimeError: a bug (set COSINE_DEBUG=1 for a traceback)"
