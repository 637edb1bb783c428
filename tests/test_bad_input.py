"""Bad input of every kind, on every command: exit 2, exactly one line on stderr naming what is
wrong, no traceback, and nothing done first (issue 14, section 2).

One row per (command, class of input defect). The classes:

* ``nonfinite``  NaN or infinity in a numeric flag or knob
* ``range``      a number outside its documented range (0 workers, 100,000 threads...)
* ``malformed``  a list, a knob string or a choice that does not parse (repeated or unknown knobs)
* ``size``       work without bound: a grid, a sweep, a sample count or a trace past its bound
* ``output``     an output that cannot be written (under a regular file, a missing directory)
* ``missing``    an input file or directory that is not there
* ``corrupt``    an input file that is truncated or not the format it claims
* ``tampered``   a well-formed file with a wrong version, schema or values, or files that disagree

Rows marked ``SUB`` run as a real ``cosine`` process (all at once, in parallel); the rest run
in-process through CliRunner, some with the pricing catalog's paths redirected.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from tests.conftest import TINY_SPEC

REPO = Path(__file__).resolve().parent.parent
COSINE = Path(sys.executable).parent / "cosine"
runner = CliRunner()


@dataclass(frozen=True)
class Row:
    command: str
    kind: str
    args: tuple[str, ...]  # with {placeholders} filled from the `files` fixture
    word: str  # the message names this
    sub: bool = False  # run as a real process
    patch: str = ""  # CliRunner only: redirect a pricing path ("parquet" or "sources")

    @property
    def id(self) -> str:
        return f"{self.command}-{self.kind}-{self.word}".replace(" ", "_")


SUB = True
TRACE = str(REPO / "specs" / "traces" / "mgrast.csv")
ENGINE = str(REPO / "engine-template")
SWEEP = ("sweep", "{spec}", "--budgets")

ROWS = [
    # evaluate
    Row("evaluate", "nonfinite", ("evaluate", "{spec}", "--design", "T=8,bloom_bits=nan"), "bloom_bits", SUB),
    Row("evaluate", "range", ("evaluate", "{spec}", "--design", "T=8,block=1e30"), "design block"),
    Row("evaluate", "range", ("evaluate", "{spec}", "--design", "T=8,buffer=1e400"), "not a finite size"),
    Row("evaluate", "range", ("evaluate", "{spec}", "--vm", "aws:r5d.large[x0]"), "count"),
    Row("evaluate", "malformed", ("evaluate", "{spec}", "--design", "T=8,T=9"), "given twice"),
    Row("evaluate", "malformed", ("evaluate", "{spec}", "--design", "T=8,lsh=maybe"), "lsh"),
    Row("evaluate", "malformed", ("evaluate", "{spec}", "--design", "T=8,Q=1"), "unknown design knob"),
    Row("evaluate", "malformed", ("evaluate", "{spec}", "--model", "typical"), "--model"),
    Row("evaluate", "missing", ("evaluate", "{dir}/nope.yaml"), "no such file"),
    Row("evaluate", "corrupt", ("evaluate", "{spec}"), "not a readable parquet", patch="parquet"),
    Row("evaluate", "tampered", ("evaluate", "{spec}"), "not a pricing catalog", patch="foreign"),
    Row("evaluate", "tampered", ("evaluate", "{spec}"), "memory_gib", patch="values"),
    # solve
    Row("solve", "nonfinite", ("solve", "{spec}", "--budget", "nan", "--out", "{dir}/o"), "--budget"),
    Row("solve", "range", ("solve", "{spec}", "--workers", "0", "--out", "{dir}/o"), "--workers", SUB),
    Row("solve", "range", ("solve", "{spec}", "--bands", "100000", "--out", "{dir}/o"), "--bands"),
    Row("solve", "malformed", ("solve", "{spec}", "--providers", ",", "--out", "{dir}/o"), "--providers"),
    Row("solve", "malformed", ("solve", "{spec}", "--backend", "gurobi"), "--backend"),
    Row("solve", "size", ("solve", "{big_grid}", "--out", "{dir}/o"), "designs per VM"),
    Row("solve", "output", ("solve", "{spec}", "--out", "{file}/sub"), "is a file", SUB),
    Row("solve", "output", ("solve", "{spec}", "--out", "{dir}/o", "--write-model", "{dir}/no/m.lp"), "--write-model"),
    Row("solve", "missing", ("solve", "{dir}/nope.yaml"), "no such file"),
    Row("solve", "corrupt", ("solve", "{spec}", "--out", "{dir}/o"), "not a readable parquet", patch="parquet"),
    # audit
    Row("audit", "nonfinite", ("audit", "{run}", "--max-gap", "nan"), "--max-gap"),
    Row("audit", "range", ("audit", "{run}", "--max-approx-error", "5"), "--max-approx-error"),
    Row("audit", "missing", ("audit", "{dir}/nope"), "not a run directory"),
    Row("audit", "corrupt", ("audit", "{truncated_run}"), "truncated"),
    Row("audit", "corrupt", ("audit", "{empty_log_run}"), "log is empty"),
    Row("audit", "tampered", ("audit", "{edited_solution_run}"), "not a point of frontier.parquet", SUB),
    Row("audit", "tampered", ("audit", "{unbalanced_bill_run}"), "the lines add up to", SUB),
    Row("audit", "tampered", ("audit", "{foreign_frontier_run}"), "no cosine row type"),
    Row("audit", "tampered", ("audit", "{swapped_frontier_run}"), "holds BaselineRow rows"),
    Row("audit", "tampered", ("audit", "{unsealed_frontier_run}"), "no content hash"),
    Row("audit", "tampered", ("audit", "{old_log_run}"), "solver log version"),
    Row("audit", "tampered", ("audit", "{other_log_run}"), "different bands"),
    # whatif
    Row("whatif", "nonfinite", ("whatif", "{run}", "--budget", "nan"), "--budget", SUB),
    Row("whatif", "nonfinite", ("whatif", "{run}", "--throughput", "inf"), "--throughput"),
    Row("whatif", "malformed", ("whatif", "{run}", "--budget", "5", "--throughput", "5"), "exactly one"),
    Row("whatif", "tampered", ("whatif", "{traversal_run}", "--budget", "800"), "vm_type"),
    Row("whatif", "malformed", ("whatif", "{run}", "--budget", "800", "--providers", "aws,AWS"), "named twice"),
    Row("whatif", "tampered", ("whatif", "{nan_design_run}", "--budget", "800"), "designs[0].T"),
    Row("whatif", "tampered", ("whatif", "{unsealed_run}", "--budget", "800"), "content hash does not match"),
    # report
    Row("report", "missing", ("report", "{dir}/nope"), "not a run directory", SUB),
    Row("report", "output", ("report", "{run}", "--out", "{file}/r.html"), "does not exist"),
    Row("report", "corrupt", ("report", "{truncated_run}"), "truncated"),
    Row("report", "tampered", ("report", "{nan_design_run}"), "designs[0].T"),
    Row("report", "tampered", ("report", "{unsealed_run}"), "content hash does not match"),
    # sweep
    Row("sweep", "size", (*SWEEP, "1:100:100000000", "--out", "{dir}/s.parquet"), "N", SUB),
    Row("sweep", "nonfinite", (*SWEEP, "1:nan:3", "--out", "{dir}/s.parquet"), "HI"),
    Row("sweep", "range", (*SWEEP, "1:9:3", "--out", "{dir}/s.parquet", "--workers", "0"), "--workers"),
    Row("sweep", "malformed", (*SWEEP, "1:9", "--out", "{dir}/s.parquet"), "LO:HI:N"),
    Row(
        "sweep",
        "range",
        ("sweep", "{fast_latency_spec}", "--budgets", "1:9:3", "--out", "{dir}/s.parquet"),
        "round trip",
    ),
    Row("sweep", "output", (*SWEEP, "1:9:3", "--out", "{file}/s.parquet"), "does not exist"),
    Row("sweep", "tampered", (*SWEEP, "1:9:3", "--out", "{run}/frontier.parquet"), "FrontierRow"),
    # render
    Row("render", "tampered", ("render", "{traversal_run}", "--out", "{dir}/e1"), "vm_type", SUB),
    Row("render", "tampered", ("render", "{nan_design_run}", "--out", "{dir}/e2"), "designs[0].T"),
    Row("render", "tampered", ("render", "{version_run}", "--out", "{dir}/e3"), "version"),
    Row("render", "tampered", ("render", "{unsealed_run}", "--out", "{dir}/e5"), "content hash does not match"),
    Row("render", "tampered", ("render", "{older_run}", "--out", "{dir}/e6"), "version 2, this cosine reads 3"),
    Row("render", "corrupt", ("render", "{dir}/half.json", "--out", "{dir}/e4"), "not valid JSON"),
    Row("render", "output", ("render", "--preset", "rocksdb", "--out", "{file}"), "not a directory"),
    Row("render", "malformed", ("render", "{run}", "--preset", "rocksdb"), "not both"),
    Row("render", "malformed", ("render", "--preset", "leveldb"), "--preset"),
    # bench
    Row("bench", "range", ("bench", "{spec}", "--engine", ENGINE, "--threads", "100000"), "--threads", SUB),
    Row("bench", "range", ("bench", "{spec}", "--engine", ENGINE, "--records", "0"), "--records"),
    Row("bench", "malformed", ("bench", "{spec}", "--engine", ENGINE, "--ops", "nan"), "--ops"),
    Row("bench", "missing", ("bench", "{spec}", "--engine", "{dir}/nope"), "no such directory"),
    Row("bench", "tampered", ("bench", "{spec}", "--engine", "{bad_render}"), "entries_per_node"),
    # validate
    Row("validate", "nonfinite", ("validate", "io", "--min-accuracy", "nan"), "--min-accuracy", SUB),
    Row("validate", "range", ("validate", "io", "--records", "0"), "--records"),
    Row("validate", "output", ("validate", "io", "--quick", "--out", "{file}"), "not a directory"),
    # calibrate
    Row("calibrate", "output", ("calibrate", "phi", "--quick", "--out", "{file}/x"), "is a file", SUB),
    Row(
        "calibrate",
        "missing",
        ("calibrate", "phi", "--samples", "{dir}/nope.parquet", "--out", "{dir}/c"),
        "no such file",
    ),
    Row(
        "calibrate",
        "tampered",
        ("calibrate", "phi", "--samples", "{run}/frontier.parquet", "--out", "{dir}/c"),
        "Sample",
    ),
    # robust-eval
    Row("robust-eval", "nonfinite", ("robust-eval", "--rho", "inf"), "--rho", SUB),
    Row("robust-eval", "range", ("robust-eval", "--seed", "-1"), "--seed"),
    Row("robust-eval", "range", ("robust-eval", "--samples", "0"), "--samples"),
    Row("robust-eval", "size", ("robust-eval", "--samples", "1000000", "--rho", "0,1,2,3"), "rows"),
    Row("robust-eval", "size", ("robust-eval", "--rho", ",".join(str(i) for i in range(17))), "radii"),
    Row("robust-eval", "output", ("robust-eval", "--out", "{file}"), "not a directory"),
    # plan
    Row("plan", "range", ("plan", TRACE, "--rf", "0"), "--rf", SUB),
    Row("plan", "range", ("plan", TRACE, "--rf", "1", "--cl", "2"), "--cl"),
    Row("plan", "range", ("plan", TRACE, "--lookahead", "0"), "--lookahead"),
    Row("plan", "range", ("plan", TRACE, "--spec", "{fast_latency_spec}"), "smallest round trip"),
    Row("plan", "missing", ("plan", "{dir}/nope.csv"), "no such file"),
    Row("plan", "nonfinite", ("plan", "{nan_trace}"), "finite"),
    Row("plan", "size", ("plan", "{long_trace}"), "steps"),
    Row("plan", "malformed", ("plan", TRACE, "--start", "later"), "--start"),
    # pricing
    Row("pricing-build", "nonfinite", ("pricing", "build"), "not finite", patch="sources"),
    Row("pricing-build", "corrupt", ("pricing", "build"), "no column", patch="sources-columns"),
    Row("pricing-build", "output", ("pricing", "build"), "does not exist", patch="out"),
    Row("pricing-show", "malformed", ("pricing", "show", "--set", "nope"), "--set", SUB),
    # issue 46, items 4-6 and 8: found by hostile probes of 18f96a3, each accepted or refused late then
    Row("solve", "output", ("solve", "{spec}", "--out", "/proc/cosine-probe"), "cannot create"),
    Row("solve", "output", ("solve", "{long_name_spec}"), "longer than the 255"),
    Row("solve", "malformed", ("solve", "{bad_sla_spec}"), "did you mean 'migration'?"),
    Row("solve", "range", ("solve", "{one_entry_spec}", "--out", "{dir}/one"), "need at least 2 VMs"),
    Row("render", "output", ("render", "{run}", "--out", "/proc/cosine-probe"), "cannot create"),
    Row("report", "output", ("report", "{run}", "--out", "/proc/cosine-probe.html"), "cannot write"),
    Row("whatif", "range", ("whatif", "{run}", "--throughput", "1e300"), "--throughput"),
    Row("robust-eval", "range", ("robust-eval", "--rho", "4..0"), "LO must not exceed HI"),
    Row("robust-eval", "malformed", ("robust-eval", "--rho", "1,1"), "a radius is named twice"),
    Row("robust-eval", "malformed", ("robust-eval", "--rho", "1,"), "comma list"),
    Row("robust-eval", "range", ("robust-eval", "--rho", "0..1e300"), "--rho"),
    Row("plan", "range", ("plan", "{huge_load_trace}"), "load_ops"),
    Row("plan", "range", ("plan", "{far_time_trace}"), "time_s"),
    Row("pricing-build", "malformed", ("pricing", "build"), "priced twice", patch="duplicate"),
    Row("deploy", "output", ("deploy", "{run}", "--local", "--out", "{file}/x"), "is a file", SUB),
    Row(
        "deploy",
        "range",
        ("deploy", "{run}", "--local", "--replicas", "1", "--out", "{dir}/dep", "--port", "{busy_port}"),
        "in use",
    ),
    Row("pricing-show", "corrupt", ("pricing", "show"), "not a readable parquet", patch="parquet"),
]


def test_every_command_and_class_is_covered():
    commands = {r.command for r in ROWS}
    assert commands == {
        "evaluate", "solve", "audit", "whatif", "report", "sweep", "render", "bench", "validate",
        "calibrate", "robust-eval", "plan", "pricing-build", "pricing-show", "deploy",
    }  # fmt: skip
    assert {r.kind for r in ROWS} == {
        "nonfinite", "range", "malformed", "size", "output", "missing", "corrupt", "tampered"
    }  # fmt: skip
    # one real process per command; `pricing build` reads only the repository's own files, which
    # its rows redirect in-process
    assert commands - {"pricing-build"} == {r.command for r in ROWS if r.sub}


# ----------------------------------------------------------------------------- the files the rows use


def _copy_run(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in ("solution.json", "frontier.parquet", "baselines.parquet", "solver.log.jsonl"):
        (dst / f).write_bytes((src / f).read_bytes())
    return dst


def _edit_solution(run: Path, edit: Callable[[dict[str, Any]], None], *, reseal: bool = True) -> Path:
    """``run`` with its solution.json edited; resealed (its content hash made the edit's, as a tool
    that rewrites the file would), so the checks behind the seal see the edit, unless ``reseal`` is off."""
    from solver.rundir import sealed

    sol = json.loads((run / "solution.json").read_text())
    edit(sol)
    if reseal:
        with contextlib.suppress(ValueError):  # (a NaN has no canonical JSON: refused before the seal)
            sol = sealed(sol)
    (run / "solution.json").write_text(json.dumps(sol))
    return run


@pytest.fixture(scope="module")
def files(solved, tmp_path_factory) -> dict[str, str]:
    import pyarrow.parquet as pq

    spec, run, _ = solved
    d = tmp_path_factory.mktemp("bad")
    f: dict[str, Path] = {"dir": d, "spec": spec, "run": run}
    f["file"] = d / "a-file"
    f["file"].write_text("not a directory")
    big = d / "big.yaml"
    grid = "size_ratio: [2, 64]\n  memory_step: 0.01\n  block_bytes: [4096, 8192, 32768]"
    big.write_text(TINY_SPEC.replace("size_ratio: [4, 10]", grid))
    f["big_grid"] = big
    f["truncated_run"] = _copy_run(run, d / "truncated")
    data = (run / "frontier.parquet").read_bytes()
    (f["truncated_run"] / "frontier.parquet").write_bytes(data[: len(data) // 2])
    f["empty_log_run"] = _copy_run(run, d / "empty-log")
    (f["empty_log_run"] / "solver.log.jsonl").write_text("")
    f["edited_solution_run"] = _edit_solution(  # a bill whose lines still add up, but half of the point's
        _copy_run(run, d / "edited"),
        lambda s: s["monthly_cost"].update({k: v / 2 for k, v in s["monthly_cost"].items()}),
    )
    f["unbalanced_bill_run"] = _edit_solution(
        _copy_run(run, d / "unbalanced"), lambda s: s["monthly_cost"].__setitem__("total", 1.0)
    )
    f["foreign_frontier_run"] = _copy_run(run, d / "foreign")
    table = pq.ParquetFile(run / "frontier.parquet").read()
    pq.write_table(table.replace_schema_metadata(None), f["foreign_frontier_run"] / "frontier.parquet")
    f["unsealed_frontier_run"] = _copy_run(run, d / "unsealed-frontier")  # its rows, without their hash
    meta = {k: v for k, v in (table.schema.metadata or {}).items() if k != b"cosine.sha256"}
    pq.write_table(table.replace_schema_metadata(meta), f["unsealed_frontier_run"] / "frontier.parquet")
    f["swapped_frontier_run"] = _copy_run(run, d / "swapped")
    (f["swapped_frontier_run"] / "frontier.parquet").write_bytes((run / "baselines.parquet").read_bytes())
    f["old_log_run"] = _copy_run(run, d / "old-log")
    lines = [json.loads(x) for x in (run / "solver.log.jsonl").read_text().splitlines()]
    (f["old_log_run"] / "solver.log.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "version"} | {"version": 0}) + "\n" for r in lines)
    )
    f["other_log_run"] = _copy_run(run, d / "other-log")
    (f["other_log_run"] / "solver.log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines[:-1]))
    f["traversal_run"] = _edit_solution(
        _copy_run(run, d / "traversal"), lambda s: s["designs"][0].__setitem__("vm_type", "../../../x")
    )
    f["nan_design_run"] = _edit_solution(
        _copy_run(run, d / "nan-design"), lambda s: s["designs"][0].__setitem__("T", float("nan"))
    )
    f["version_run"] = _edit_solution(_copy_run(run, d / "version"), lambda s: s.__setitem__("version", 99))

    def fewer_vms(s: dict[str, Any]) -> None:  # a VM count edited by hand, the bill left as it was
        s["vms"][0]["count"] = s["designs"][0]["count"] = max(1, s["designs"][0]["count"] - 1)

    f["unsealed_run"] = _edit_solution(_copy_run(run, d / "unsealed"), fewer_vms, reseal=False)
    f["older_run"] = _edit_solution(  # an older cosine's solution.json: version 2, no seal
        _copy_run(run, d / "older"),
        lambda s: (s.pop("sha256"), s.__setitem__("version", 2)),  # type: ignore[func-returns-value]
        reseal=False,
    )
    (d / "half.json").write_text((run / "solution.json").read_text()[:100])
    f["bad_render"] = d / "render"
    f["bad_render"].mkdir()
    (f["bad_render"] / "engine.toml").write_text((REPO / "engine-template" / "engine.toml").read_text())
    (f["bad_render"] / "render.json").write_text(
        '{"source": "x", "class": "lsm", "entries_per_node": -1, "key_bytes": 16, "value_bytes": 100}'
    )
    header = "time_s,get,empty_get,range,insert,update,rmw,load_ops\n"
    f["nan_trace"] = d / "nan.csv"
    f["nan_trace"].write_text(header + "0,1,0,0,0,0,0,100\n60,1,0,0,0,0,0,nan\n")
    f["long_trace"] = d / "long.csv"
    f["long_trace"].write_text(header + "".join(f"{60 * i},1,0,0,0,0,0,100\n" for i in range(100_001)))
    f["huge_load_trace"] = d / "huge-load.csv"
    f["huge_load_trace"].write_text(header + "0,1,0,0,0,0,0,100\n60,1,0,0,0,0,0,1e300\n")
    f["far_time_trace"] = d / "far-time.csv"
    f["far_time_trace"].write_text(header + "0,1,0,0,0,0,0,100\n1e300,1,0,0,0,0,0,100\n")
    f["long_name_spec"] = d / "long-name.yaml"
    f["long_name_spec"].write_text(TINY_SPEC.replace("name: tiny", "name: " + "n" * 300))
    f["fast_latency_spec"] = d / "fast-latency.yaml"  # a p99 bound under every VM's round trip
    f["fast_latency_spec"].write_text(
        TINY_SPEC.replace(
            "performance: {min_throughput: 1000}", "performance: {min_throughput: 1000, max_latency_s: 1e-5}"
        )
    )
    f["bad_sla_spec"] = d / "bad-sla.yaml"
    f["bad_sla_spec"].write_text(TINY_SPEC.replace("slas: [backup, availability]", "slas: [backup, migraton]"))
    f["one_entry_spec"] = d / "one-entry.yaml"
    f["one_entry_spec"].write_text(
        TINY_SPEC.replace("entries: 2000000", "entries: 1").replace("  max_cluster_size: 4\n", "")
    )
    f["busy_port"] = str(_BUSY.getsockname()[1])
    return {k: str(v) for k, v in f.items()}


#: A loopback port held by this module (a deployment asked to use it is refused).
_BUSY = socket.socket()
_BUSY.bind(("127.0.0.1", 0))
_BUSY.listen()


def _args(row: Row, files: dict[str, str]) -> list[str]:
    return [a.format(**files) for a in row.args]


def _patch_parquet(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Point the catalog's reader and builder at another pricing.parquet."""
    from cost_models.pricing import build, catalog

    monkeypatch.setattr(catalog, "PRICING_PARQUET", path)
    monkeypatch.setattr(build, "PRICING_PARQUET", path)


def _pricing_patch(row: Row, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    from cost_models.pricing import build, catalog, rows

    d = Path(files["dir"]) / f"pricing-{row.patch}"
    d.mkdir(exist_ok=True)
    real = rows.PRICING_PARQUET
    if row.patch == "parquet":
        bad = d / "pricing.parquet"
        bad.write_bytes(real.read_bytes()[:2000])
        _patch_parquet(monkeypatch, bad)
    elif row.patch == "foreign":
        bad = d / "pricing.parquet"
        pq.write_table(pq.ParquetFile(real).read().replace_schema_metadata(None), bad)
        _patch_parquet(monkeypatch, bad)
    elif row.patch == "values":
        table = pq.ParquetFile(real).read()
        mem = table.column("memory_gib").to_pylist()
        i = mem.index(next(m for m in mem if m is not None))
        mem[i] = -16.0
        table = table.set_column(table.schema.get_field_index("memory_gib"), "memory_gib", [mem])
        bad = d / "pricing.parquet"
        pq.write_table(table, bad)
        _patch_parquet(monkeypatch, bad)
    elif row.patch == "duplicate":
        for f in rows.PRICING_SOURCE_DIR.glob("*.csv"):
            (d / f.name).write_text(f.read_text())
        vms = (d / "vms.csv").read_text().splitlines()
        (d / "vms.csv").write_text("\n".join([*vms, vms[1]]) + "\n")
        monkeypatch.setattr(build, "PRICING_SOURCE_DIR", d)
        _patch_parquet(monkeypatch, d / "pricing.parquet")
    elif row.patch.startswith("sources"):
        for f in rows.PRICING_SOURCE_DIR.glob("*.csv"):
            (d / f.name).write_text(f.read_text())
        vms = (d / "vms.csv").read_text().splitlines()
        if row.patch == "sources":
            cells = vms[1].split(",")
            cells[4] = "nan"  # memory_gib
            vms[1] = ",".join(cells)
        else:
            vms[0] = vms[0].replace("memory_gib", "memory")
        (d / "vms.csv").write_text("\n".join(vms) + "\n")
        monkeypatch.setattr(build, "PRICING_SOURCE_DIR", d)
        _patch_parquet(monkeypatch, d / "pricing.parquet")
    elif row.patch == "out":
        _patch_parquet(monkeypatch, d / "missing-dir" / "pricing.parquet")
    catalog.clear_cache()


def _assert_refused(code: int, stderr: str, word: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert code == 2, stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert word in lines[0], stderr


@pytest.fixture(scope="module")
def processes(files) -> dict[str, tuple[int, str, str]]:
    """Every SUB row as a real `cosine` process, started together: (exit code, stdout, stderr)."""
    env = {**os.environ, "COLUMNS": "200"}
    procs = {
        r.id: subprocess.Popen(
            [str(COSINE), *_args(r, files)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for r in ROWS
        if r.sub
    }
    out = {}
    for k, p in procs.items():
        stdout, stderr = p.communicate(timeout=120)
        out[k] = (p.returncode, stdout, stderr)
    return out


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_is_one_line_and_exit_2(row, files, processes, monkeypatch):
    if row.sub:
        code, stdout, stderr = processes[row.id]
        assert stdout == "", stdout  # refused before anything was printed (or done)
    else:
        if row.patch:
            _pricing_patch(row, files, monkeypatch)
        res = runner.invoke(app, _args(row, files))
        code, stderr = res.exit_code, res.stderr
    _assert_refused(code, stderr, row.word)


def test_nothing_was_written_by_refused_commands(files, processes):
    d = Path(files["dir"])
    for name in ("o", "e1", "e2", "e3", "e4", "c", "s.parquet"):
        assert not (d / name).exists(), name
    assert not list(d.glob(".*.tmp")) and Path(files["file"]).read_text() == "not a directory"


def test_whatif_below_the_cheapest_saved_point_exits_3(solved):
    _, run, _ = solved
    res = runner.invoke(app, ["whatif", str(run), "--budget", "1"])
    assert res.exit_code == 3, res.stderr
    assert "below the cheapest" in res.stderr and len(res.stderr.splitlines()) == 1


def test_a_design_the_engine_refuses_is_bad_input(engine_binary):
    """An engine.toml the engine's own validation refuses is exit 2, not an engine failure."""
    from measure.engine import TEMPLATE, run, workload_json
    from specs.errors import InputError
    from specs.schema import parse_spec

    text = (TEMPLATE / "engine.toml").read_text()
    bad = "\n".join("block_entries = 0" if ln.startswith("block_entries") else ln for ln in text.splitlines())
    with pytest.raises(InputError, match=r"layout.block_entries \(B\) must be in 1..=65536, got 0"):
        run(TEMPLATE, bad, workload_json(parse_spec(TINY_SPEC), 100, 100, 1))


@pytest.mark.parametrize(
    ("line", "field"), [('size_ratio = "x"', "size_ratio"), ('bloom_bits_per_key = ["a"]', "bloom_bits_per_key")]
)
def test_a_number_field_with_text_is_one_line_naming_it(engine_binary, line, field):
    """A TOML parse error (several lines from the engine: where, the source line, a caret) is one line
    naming the field and what was expected (it was an internal error, exit 1, saying "data did not
    match any variant of untagged enum Num")."""
    from measure.engine import TEMPLATE, run, workload_json
    from specs.errors import InputError
    from specs.schema import parse_spec

    text = (TEMPLATE / "engine.toml").read_text()
    bad = "\n".join(line if ln.startswith(field + " ") else ln for ln in text.splitlines())
    with pytest.raises(InputError) as err:
        run(TEMPLATE, bad, workload_json(parse_spec(TINY_SPEC), 100, 100, 1))
    msg = str(err.value)
    assert "\n" not in msg and field in msg and "expected a number" in msg, msg


def test_a_peer_that_is_not_built_names_its_set_up(monkeypatch, files):
    """`cosine bench --peer rocksdb` before bench/engine_peers_setup.sh: one line naming the script."""
    import measure.bench as mb

    monkeypatch.setattr(mb, "PEERS_BINARY", Path(files["dir"]) / "no-peers")
    res = runner.invoke(app, ["bench", files["spec"], "--engine", ENGINE, "--peer", "rocksdb"])
    _assert_refused(res.exit_code, res.stderr, "bench/engine_peers_setup.sh")


# ----------------------------------------------------------------------------- outputs that would lose data
#
# Found by an audit: each of these exited 0 and replaced a file it should not have (or, refused,
# left a file behind). Every refusal is one line, exit 2, with every file as it was.


def _snapshot(d: Path) -> dict[str, bytes | None]:
    """Every entry under ``d`` (hidden ones too) and a file's bytes (None for a directory)."""
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


@pytest.fixture
def run_copy(solved, tmp_path) -> Path:
    """A copy of the session's solved run, with a band log under solver/, that a test may lose."""
    run = _copy_run(solved[1], tmp_path / "run")
    (run / "solver").mkdir()
    (run / "solver" / "band00_aws.log").write_text("a band's log\n")
    return run


@pytest.mark.parametrize(
    "out", ["solution.json", "frontier.parquet", "baselines.parquet", "solver.log.jsonl", "solver/x.html"]
)
def test_report_refuses_to_overwrite_a_file_of_its_run(run_copy, tmp_path, out):
    """`cosine report RUN --out RUN/solution.json` replaced the run's solution.json with HTML (exit 0)."""
    (tmp_path / "alias").symlink_to(run_copy)  # the same files by another name
    before = _snapshot(run_copy)
    for given in (run_copy / out, tmp_path / "alias" / out, run_copy / "solver" / ".." / out):
        res = runner.invoke(app, ["report", str(run_copy), "--out", str(given)])
        _assert_refused(res.exit_code, res.stderr, f"--out {given}: is ")
        assert "which this command reads; refusing to overwrite it" in res.stderr
    assert _snapshot(run_copy) == before


def test_report_refuses_to_overwrite_the_runs_plot(run_copy, tmp_path):
    """`cosine report RUN --out RUN/frontier.png` replaced the plot `cosine solve --plot` wrote with
    HTML (a file of the run the report does not read)."""
    (run_copy / "frontier.png").write_bytes(b"\x89PNG the plot")
    before = _snapshot(run_copy)
    res = runner.invoke(app, ["report", str(run_copy), "--out", str(run_copy / "solver" / ".." / "frontier.png")])
    _assert_refused(res.exit_code, res.stderr, "is the run's plot (`cosine solve --plot` wrote it)")
    assert _snapshot(run_copy) == before


@pytest.mark.parametrize("command", ["solve", "robust-eval"])
def test_a_run_does_not_write_into_a_directory_that_is_not_its_own(files, tmp_path, command):
    """`cosine solve SPEC --out DIR` (and robust-eval) wrote over a same-named file of any non-empty
    directory: a user's, a render workspace's, another command's run."""
    args = {"solve": ["solve", files["spec"]], "robust-eval": ["robust-eval", "--samples", "100", "--rho", "0,1"]}
    user = tmp_path / "user"
    user.mkdir()
    for name in ("solution.json", "tunings.parquet", "notes.txt"):
        (user / name).write_text("keep\n")
    workspace = tmp_path / "workspace"
    assert runner.invoke(app, ["render", "--preset", "rocksdb", "--out", str(workspace)]).exit_code == 0
    (workspace / "solution.json").write_text("the workspace's\n")
    other = Path(files["run"]) if command == "robust-eval" else tmp_path / "eval"
    if command == "solve":  # a robust-eval run's directory
        other.mkdir()
        (other / "robust_eval.parquet").write_text("keep\n")
    for d in (user, workspace, other):
        before = _snapshot(d)
        res = runner.invoke(app, [*args[command], "--out", str(d)])
        _assert_refused(res.exit_code, res.stderr, f"--out {d}: not empty and not a previous `cosine {command}` run")
        assert _snapshot(d) == before, d


def test_a_previous_run_is_recognised_by_its_files(solved, tmp_path):
    """The one rule (specs.io.check_run_dir): a finished run's files, or an interrupted run's band
    logs beside nothing but a run's names, and never a render workspace."""
    from solver.solve import RUN_FILES
    from specs.io import is_previous_run

    assert is_previous_run(solved[1], RUN_FILES)
    stopped = tmp_path / "stopped"  # a first solve stopped after its first bands (a write killed half-way)
    (stopped / "solver" / "rf1").mkdir(parents=True)
    (stopped / "solution.json").write_text("{}")
    (stopped / ".frontier.parquet.123.tmp").write_bytes(b"")
    assert is_previous_run(stopped, RUN_FILES)
    (stopped / "notes.txt").write_text("mine\n")
    assert not is_previous_run(stopped, RUN_FILES)
    mixed = _copy_run(solved[1], tmp_path / "mixed")
    assert is_previous_run(mixed, RUN_FILES)
    (mixed / "Cargo.toml").write_text("[workspace]\n")
    assert not is_previous_run(mixed, RUN_FILES)
    # a user's directory holding files of a run's names, not a run's: its frontier holds no cosine rows
    named = tmp_path / "named"
    named.mkdir()
    (named / "solver.log.jsonl").write_text("my log\n")
    (named / "frontier.parquet").write_bytes(b"my data")
    assert not is_previous_run(named, RUN_FILES)
    (named / "frontier.parquet").write_bytes((solved[1] / "baselines.parquet").read_bytes())  # another row type
    assert not is_previous_run(named, RUN_FILES)


@pytest.mark.parametrize(
    "args",
    [
        ["solve", "{spec}"],
        ["robust-eval", "--samples", "100", "--rho", "0,1"],
        ["report", "{run}"],
        ["sweep", "{spec}", "--budgets", "1:9:3", "--workers", "1"],
        ["render", "--preset", "rocksdb"],
    ],
    ids=lambda a: a[0],
)
def test_an_empty_out_is_refused(files, tmp_path, monkeypatch, args):
    """`--out ""` is pathlib's ".": `cosine solve` and robust-eval wrote their whole run into the
    current directory (exit 0). Run here: the commands a regression would not make start servers
    or measure for minutes; the next test holds every other --out to the same parser."""
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, [*(a.format(**files) for a in args), "--out", ""])
    _assert_refused(res.exit_code, res.stderr, "'--out': an empty path")
    assert not list(tmp_path.iterdir())


def test_every_out_refuses_an_empty_path():
    """Every command's --out is parsed by cli.common.output_path (an empty path: exit 2)."""
    import typer.main

    from cli.common import output_path

    def commands(c: Any, name: str = "cosine") -> Any:
        if hasattr(c, "commands"):
            for sub, cmd in c.commands.items():
                yield from commands(cmd, f"{name} {sub}")
        else:
            yield name, c

    outs = {n: p for n, c in commands(typer.main.get_command(app)) for p in c.params if "--out" in p.opts}
    assert len(outs) >= 11, sorted(outs)  # solve, report, sweep, render, deploy, robust-eval, calibrate x3, validate x2
    for name, param in outs.items():
        assert getattr(param.type, "func", None) is output_path, name


def test_a_refused_sweep_leaves_no_lock_file(files, run_copy):
    """A sweep refusing its --out (not a sweep file) left `.frontier.parquet.lock` beside it; a lock
    file that was there before stays (the lock is the flock, not the file)."""
    sweep = ["sweep", files["spec"], "--budgets", "1:9:3", "--out"]
    before = _snapshot(run_copy)
    for _ in range(2):
        res = runner.invoke(app, [*sweep, str(run_copy / "frontier.parquet")])
        _assert_refused(res.exit_code, res.stderr, "holds FrontierRow rows")
        assert _snapshot(run_copy) == before
    (run_copy / ".baselines.parquet.lock").write_text("an earlier sweep's\n")
    before = _snapshot(run_copy)
    res = runner.invoke(app, [*sweep, str(run_copy / "baselines.parquet")])
    _assert_refused(res.exit_code, res.stderr, "holds BaselineRow rows")
    after = _snapshot(run_copy)  # the lock file names its last holder, this refused sweep
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if "lock" not in k} == {k: v for k, v in before.items() if "lock" not in k}
