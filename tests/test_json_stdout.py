"""`--json` is exactly one JSON document on stdout, for every command that has it, as a real
process prints it (solver libraries write to file descriptor 1 directly, which CliRunner never sees)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
COSINE = Path(sys.executable).parent / "cosine"
TRACE = "time_s,get,empty_get,range,insert,update,rmw,load_ops\n0,1,0,0,0,0,0,1000\n60,0.5,0,0,0,0.5,0,2000\n"

CASES = {
    "solve-highs": ["solve", "{spec}", "--bands", "2", "--out", "{dir}/highs", "--json"],
    "solve-ortools": ["solve", "{spec}", "--bands", "2", "--out", "{dir}/ortools", "--json", "--backend", "ortools"],
    "solve-pyomo": [
        *("solve", "{spec}", "--bands", "2", "--out", "{dir}/pyomo", "--json", "--backend", "pyomo"),
        *("--plot", "--write-model", "{dir}/m.lp"),
    ],
    "plan": ["plan", "{dir}/trace.csv", "--spec", "{spec}", "--json"],
    "evaluate": ["evaluate", "{spec}", "--json"],
    "whatif": ["whatif", "{run}", "--budget", "800", "--json"],
    "whatif-too-fast": ["whatif", "{run}", "--throughput", "1e12", "--json"],
    "bench": ["bench", "{spec}", "--engine", str(REPO / "engine-template"), "--records", "2000", "--json"],
}


@pytest.fixture(scope="module")
def outputs(solved, engine_binary, tmp_path_factory) -> dict[str, tuple[int, str, str]]:
    """Every case as a real `cosine` process (two at a time): (exit code, stdout, stderr)."""
    spec, run, _ = solved
    d = tmp_path_factory.mktemp("json")
    (d / "trace.csv").write_text(TRACE)
    fill = {"spec": str(spec), "run": str(run), "dir": str(d)}
    out: dict[str, tuple[int, str, str]] = {}
    names = list(CASES)
    for i in range(0, len(names), 2):
        procs = {
            n: subprocess.Popen(
                [str(COSINE), *(a.format(**fill) for a in CASES[n])],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in names[i : i + 2]
        }
        for n, p in procs.items():
            so, se = p.communicate(timeout=300)
            out[n] = (p.returncode, so, se)
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_json_is_one_document_on_stdout(outputs, case):
    code, stdout, stderr = outputs[case]
    assert code == 0, stderr
    doc = json.loads(stdout)  # the whole of stdout: one document, nothing before or after it
    assert isinstance(doc, dict) and doc
    assert "Traceback" not in stderr
