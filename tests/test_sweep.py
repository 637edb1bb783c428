"""`cosine sweep` on dask.distributed: real clusters of worker processes on loopback.

The embedded local cluster gives the serial loop's rows; a rerun solves only
what the file lacks, also after an interrupted client; a worker SIGKILLed
mid-task loses nothing (Dask reruns its task elsewhere); `--scheduler` runs on
a separately started `dask scheduler` + `dask worker`. No process outlives the
module (checked at the end).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
from typer.testing import CliRunner

from cli.main import app
from solver.rundir import SweepRow
from solver.sweep import sweep
from solver.sweepfile import row_key
from specs.io import read_rows

#: A spec that solves in about a second: two providers, clusters of at most 2 VMs, one block size.
MICRO_SPEC = """
name: {name}
workload:
  entries: {entries}
  key_bytes: 16
  value_bytes: 100
  operations: {{get: 0.5, update: 0.5}}
  operations_per_month: 1.0e9
budget: {{monthly_usd: 800, range: [10, 5000]}}
providers: [aws, gcp]
design:
  size_ratio: [4, 6]
  block_bytes: [4096]
  max_cluster_size: 2
"""
BUDGETS = np.geomspace(100.0, 2000.0, 2)
PROVIDERS = 2
WAIT_S = 120.0  # the longest any cluster start or sweep here may take on a loaded 2-core machine


def _children() -> set[int]:
    """This process's descendants, less multiprocessing's resource tracker (one per interpreter, started at
    the first spawned process and ended with the interpreter: Python's, not a cluster's)."""
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    return {p.pid for p in psutil.Process().children(recursive=True)} - {tracker}


@pytest.fixture(scope="module", autouse=True)
def no_process_left() -> Iterator[None]:
    """Every process this module starts (cluster workers, nannies, dask CLIs) is gone when it ends."""
    before = _children()
    yield
    deadline = time.monotonic() + 30
    while (left := _children() - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes left behind: {[psutil.Process(p).cmdline() for p in left if psutil.pid_exists(p)]}"


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("sweep_specs")
    paths = []
    for i, entries in enumerate((1_000_000, 2_000_000, 3_000_000, 4_000_000)):
        p = d / f"s{i}.yaml"
        p.write_text(MICRO_SPEC.format(name=f"s{i}", entries=entries))
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def serial(specs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> list[SweepRow]:
    """The serial loop's rows (workers=1: no Dask), the reference every cluster sweep must match."""
    out = tmp_path_factory.mktemp("serial") / "serial.parquet"
    res = sweep(specs, BUDGETS, out, workers=1)
    assert res == {"rows": len(specs) * len(BUDGETS) * PROVIDERS, "new": res["rows"], "skipped": 0}
    return read_rows(out, SweepRow, "sweep file")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A LocalCluster of 2 worker processes on loopback, shared by the tests that need to reach its workers."""
    import logging

    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.CRITICAL,
    ) as c:
        yield c.scheduler_address


def _rows(out: Path) -> list[SweepRow]:
    return read_rows(out, SweepRow, "sweep file")


def _listening(pids: set[int]) -> set[str]:
    ips = set()
    for pid in pids:
        for conn in psutil.Process(pid).net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                ips.add(conn.laddr.ip)
    return ips


def test_local_cluster_gives_the_serial_rows(specs, serial, tmp_path):
    out = tmp_path / "sweep.parquet"
    seen: dict[str, object] = {}
    before = _children()

    def progress(done: int, total: int) -> None:
        if done and "workers" not in seen:  # the embedded cluster, while it runs
            kids = _children() - before
            seen["workers"] = sum("spawn_main" in " ".join(psutil.Process(p).cmdline()) for p in kids)
            seen["listening"] = _listening(kids | {os.getpid()})
        seen["last"] = (done, total)

    res = sweep(specs, BUDGETS, out, workers=2, progress=progress)
    n = len(specs) * len(BUDGETS) * PROVIDERS
    assert res == {"rows": n, "new": n, "skipped": 0}
    assert seen["last"] == (n, n)
    assert seen["workers"] == 2
    assert seen["listening"] == {"127.0.0.1"}, "the embedded cluster listens on loopback only (no dashboard)"
    assert _rows(out) == serial
    assert not (tmp_path / ".sweep.parquet.parts").exists()


def test_resume_solves_only_what_the_file_lacks(specs, serial, cluster, tmp_path):
    out = tmp_path / "sweep.parquet"
    totals: list[int] = []

    def stop_after_first(done: int, total: int) -> None:
        totals.append(total)
        if done:
            raise KeyboardInterrupt  # the client is interrupted once a first task is in

    with pytest.raises(KeyboardInterrupt):
        sweep(specs[:3], BUDGETS, out, scheduler=cluster, progress=stop_after_first)
    kept = _rows(out)
    per_spec = len(BUDGETS) * PROVIDERS
    assert len(kept) == per_spec, "the finished task's rows are in the file"
    assert totals[0] == 3 * per_spec

    totals.clear()
    res = sweep(specs[:3], BUDGETS, out, scheduler=cluster, progress=lambda d, t: totals.append(t))
    assert totals[0] == 2 * per_spec, "only the two unfinished specs are solved"
    assert res == {"rows": 3 * per_spec, "new": 2 * per_spec, "skipped": per_spec}

    totals.clear()
    res = sweep(specs, BUDGETS, out, scheduler=cluster, progress=lambda d, t: totals.append(t))
    assert totals[0] == per_spec and res == {"rows": 4 * per_spec, "new": per_spec, "skipped": 3 * per_spec}
    assert _rows(out) == serial
    assert all(r in _rows(out) for r in kept)

    totals.clear()
    res = sweep(specs, BUDGETS, out, scheduler=cluster, progress=lambda d, t: totals.append(t))
    assert totals == [0] and res["new"] == 0 and _rows(out) == serial


def test_a_worker_killed_mid_sweep_loses_nothing(specs, serial, cluster, tmp_path):
    from distributed import Client

    out = tmp_path / "sweep.parquet"
    note = tmp_path / "killed.json"
    first_done = threading.Event()
    result: dict[str, object] = {}

    def run() -> None:
        try:
            # no cache: every task builds its tables, long enough to be caught mid-run
            prog = lambda d, t: d and first_done.set()  # noqa: E731
            result["res"] = sweep(specs, BUDGETS, out, scheduler=cluster, progress=prog, cache=False)
        except BaseException as exc:  # handed to the test thread below
            result["error"] = exc

    def die_if_executing(dask_worker: object) -> bool:
        """Run on a worker's event loop: SIGKILL this worker process if it is executing a task. The loop cannot
        report the task finished in between, so the task is lost mid-run for certain."""
        keys = [ts.key for ts in dask_worker.state.executing]  # type: ignore[attr-defined]
        if keys:
            note.write_text(json.dumps({"pid": os.getpid(), "keys": keys}))
            os.kill(os.getpid(), signal.SIGKILL)
        return False

    with Client(cluster, set_as_default=False) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        t = threading.Thread(target=run)
        t.start()
        assert first_done.wait(WAIT_S), "no task finished"
        written = _rows(out)
        assert written, "a finished task's rows are in the file"
        deadline = time.monotonic() + WAIT_S
        while not note.exists() and time.monotonic() < deadline:
            for w in client.scheduler_info()["workers"]:  # one worker at a time: only one dies
                if not note.exists():
                    client.run(die_if_executing, workers=[w], on_error="return")
            time.sleep(0.02)
        killed = json.loads(note.read_text())
        t.join(WAIT_S)
        assert not t.is_alive(), "the sweep did not finish after a worker died"
        assert "error" not in result, result.get("error")
        assert not psutil.pid_exists(killed["pid"]) or psutil.Process(killed["pid"]).status() == psutil.STATUS_ZOMBIE
        log = client.run_on_scheduler(lambda dask_scheduler: [t[:3] for t in dask_scheduler.transition_log])
        for key in killed["keys"]:
            moves = [(a, b) for k, a, b in log if k == key]
            assert ("processing", "released") in moves, (key, moves)  # taken off the dead worker...
            rerun = moves[moves.index(("processing", "released")) :]
            assert ("processing", "memory") in rerun, (key, moves)  # ... and run to the end elsewhere
        client.wait_for_workers(2, timeout=WAIT_S)  # the nanny restarts the killed worker
    rows = _rows(out)
    keys = [row_key(r.spec, r.budget, r.provider) for r in rows]
    assert len(keys) == len(set(keys)) == len(specs) * len(BUDGETS) * PROVIDERS, "every row exactly once"
    assert rows == serial
    assert all(r in rows for r in written), "rows written before the kill are kept"


def test_a_sweep_reuses_the_caches_and_no_cache_leaves_them_alone(specs, serial, tmp_path, monkeypatch):
    import solver.exact
    import solver.frontier

    monkeypatch.setenv("COSINE_CACHE_DIR", str(tmp_path / "cache"))
    first = sweep(specs[:1], BUDGETS, tmp_path / "none.parquet", workers=1, cache=False)
    assert not (tmp_path / "cache").exists()
    sweep(specs[:1], BUDGETS, tmp_path / "fill.parquet", workers=1)
    names = {f.name.split("-")[0] for f in (tmp_path / "cache").iterdir()}  # a file per replication plan
    assert names == {"aws", "gcp", "reeval", "bands"}

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a warm sweep recomputed what the caches hold")

    monkeypatch.setattr("solver.tables.build.shard_job", refuse)
    monkeypatch.setattr("solver.band_cache.best_within", refuse)
    monkeypatch.setattr(solver.frontier, "reevaluate", refuse)
    monkeypatch.setattr(solver.exact, "reevaluate_many", refuse)
    warm = sweep(specs[:1], BUDGETS, tmp_path / "warm.parquet", workers=1)
    assert warm == first
    want = [r for r in serial if r.spec == "s0"]
    assert _rows(tmp_path / "warm.parquet") == _rows(tmp_path / "none.parquet") == want


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "dask", *args], stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a process and its group (a `dask worker` runs a nanny and a worker process under it)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            proc.poll()
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
    raise AssertionError(f"process group {proc.pid} survived SIGKILL")


@pytest.fixture()
def dask_cli_cluster(tmp_path: Path) -> Iterator[str]:
    """`dask scheduler` and `dask worker` as separate processes on loopback, random free ports."""
    from distributed import Client

    info = tmp_path / "scheduler.json"
    procs = [
        _start(
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(info)],
            tmp_path / "scheduler.log",
        )
    ]
    try:
        deadline = time.monotonic() + WAIT_S
        while not info.exists() and time.monotonic() < deadline:
            assert procs[0].poll() is None, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        worker = ["worker", address, "--host", "127.0.0.1", "--nworkers", "1", "--nthreads", "1", "--no-dashboard"]
        procs.append(_start(worker, tmp_path / "worker.log"))
        with Client(address, set_as_default=False, timeout=WAIT_S) as client:
            client.wait_for_workers(1, timeout=WAIT_S)
        yield address
    finally:
        for p in reversed(procs):
            _stop(p)


def test_scheduler_option_runs_on_an_existing_cluster(specs, serial, dask_cli_cluster, tmp_path):
    out = tmp_path / "sweep.parquet"
    args = ["sweep", *map(str, specs), "--budgets", "100:2000:2", "--out", str(out), "--scheduler", dask_cli_cluster]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output + res.stderr
    n = len(specs) * len(BUDGETS) * PROVIDERS
    assert f"{n} rows ({n} new, 0 already there)" in res.output
    assert _rows(out) == serial


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--workers", "0"], "--workers must be a whole number from 1 to 256, got 0"),
        (["--scheduler", "127.0.0.1:8786"], "expected tcp://HOST:PORT"),
        (["--scheduler", "tcp://127.0.0.1"], "expected tcp://HOST:PORT"),
        (["--scheduler", "tcp://127.0.0.1:8786/x"], "expected tcp://HOST:PORT"),
        (["--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"], "--workers sizes the local cluster"),
        (["--scheduler", "tcp://127.0.0.1:{closed}"], "cannot connect (Connection refused)"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2_before_any_work(specs, tmp_path, flags, message):
    import socket

    out = tmp_path / "sweep.parquet"
    t0 = time.monotonic()
    with socket.socket() as closed:  # bound, never listening: a connection to it is refused
        closed.bind(("127.0.0.1", 0))
        flags = [f.format(closed=closed.getsockname()[1]) for f in flags]
        res = CliRunner().invoke(app, ["sweep", str(specs[0]), "--budgets", "100:2000:2", "--out", str(out), *flags])
    assert res.exit_code == 2, res.output + res.stderr
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not out.exists() and time.monotonic() - t0 < 10


def test_specs_with_one_name_are_refused(specs, tmp_path):
    twin = tmp_path / "twin.yaml"
    twin.write_text(specs[0].read_text())
    res = CliRunner().invoke(
        app, ["sweep", str(specs[0]), str(twin), "--budgets", "100:2000:2", "--out", str(tmp_path / "o.parquet")]
    )
    assert res.exit_code == 2 and "spec name 's0'" in res.stderr, res.stderr


def _row(spec: str, budget: float, provider: str) -> SweepRow:
    return SweepRow(budget, provider, "optimal", budget / 2, 1e5, 1e-5, "lsm", spec=spec, spec_path=f"{spec}.yaml")


def test_the_journal_survives_a_crash_at_any_point(tmp_path):
    """A crash after a merge wrote FILE.parquet but before it deleted the parts, and one in the middle of
    writing a part: reopening keeps every row once, drops the half-written part, and finishing leaves the
    file sorted and no journal."""
    from solver.sweepfile import SweepFile
    from specs.io import write_rows

    out = tmp_path / "sweep.parquet"
    first = [_row("b", 10.0, "aws"), _row("a", 20.0, "gcp")]
    second = [_row("a", 10.0, "aws"), *first]  # a part written before the crash; its first rows already merged
    write_rows(out, first, SweepRow, sealed=True)
    parts = tmp_path / ".sweep.parquet.parts"
    parts.mkdir()
    write_rows(parts / "0.parquet", second, SweepRow, sealed=True)
    (parts / ".1.parquet.123.tmp").write_bytes(b"PAR1 cut short")
    write_rows(parts / "2.parquet", [_row("c", 10.0, "aws")], SweepRow)  # no content hash: refused, removed

    with SweepFile(out) as f:
        assert f.done() == {("a", 10.0, "aws"), ("a", 20.0, "gcp"), ("b", 10.0, "aws")} and f.on_disk == 3
        assert len(f.notes) == 1 and "2.parquet: no content hash" in f.notes[0]
        assert f.add([_row("a", 10.0, "aws"), _row("b", 20.0, "gcp")]) == 1  # a row already there is not added
        f.finish()
    got = [(r.spec, r.provider, r.budget) for r in _rows(out)]
    assert got == [("a", "aws", 10.0), ("a", "gcp", 20.0), ("b", "aws", 10.0), ("b", "gcp", 20.0)]
    assert not parts.exists()
