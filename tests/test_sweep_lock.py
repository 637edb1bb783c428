"""One sweep at a time on one --out (issue 46, item 4): a sweep holds an flock on
``.FILE.parquet.lock`` (solver.output_lock) while it runs; a second sweep on the same file exits 2
at once, before any work, naming the holder (PID, host, start time); once the holder ends,
however it ends (SIGKILL included), a sweep runs. Two real sweeps started together never both
report rows the file does not hold (measured before: both said "9 rows (9 new)", the file held
one's)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from solver.output_lock import OutputLock, lock_path
from solver.rundir import SweepRow
from solver.sweepfile import SweepFile
from specs.errors import InputError
from specs.io import read_rows
from tests.test_content_hash import MICRO_SPEC

COSINE = Path(sys.executable).parent / "cosine"
ROOT = Path(__file__).resolve().parent.parent
SWEEP = ["--budgets", "100:2000:2", "--workers", "1"]
#: Holds a sweep file open (its lock taken) until its stdin closes: a sweep in the middle of its run.
HOLDER = """
import sys
from pathlib import Path
from solver.sweepfile import SweepFile
file = SweepFile(Path(sys.argv[1]))
print("locked", flush=True)
sys.stdin.read()
"""
WAIT_S = 60.0


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("lock_specs")
    paths = []
    for i, entries in enumerate((1_000_000, 2_000_000)):
        paths.append(d / f"l{i}.yaml")
        paths[-1].write_text(MICRO_SPEC.format(name=f"l{i}", entries=entries))
    return paths


def _holder(out: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "locked", p.communicate()
    return p


def test_a_second_sweep_exits_2_at_once_naming_the_holder(specs, tmp_path):
    out = tmp_path / "sweep.parquet"
    holder = _holder(out)
    try:
        t0 = time.monotonic()
        res = CliRunner().invoke(app, ["sweep", str(specs[0]), *SWEEP, "--out", str(out)])
        assert res.exit_code == 2, res.output + res.stderr
        (line,) = res.stderr.strip().splitlines()
        assert f"--out {out}: another process is writing it" in line
        assert f"PID {holder.pid} on host {socket.gethostname()}, started 20" in line and " UTC" in line
        assert time.monotonic() - t0 < 10
        assert not out.exists() and not (tmp_path / ".sweep.parquet.parts").exists(), "no work was done"
    finally:
        holder.communicate("")  # the holder ends normally: its lock is released
    assert holder.returncode == 0, holder.stderr
    res = CliRunner().invoke(app, ["sweep", str(specs[0]), *SWEEP, "--out", str(out)])
    assert res.exit_code == 0 and "4 rows (4 new" in res.output, res.output + res.stderr


def test_a_crashed_holder_does_not_block(specs, tmp_path):
    """The holder is SIGKILLed mid-sweep: no cleanup ran, its lock file (naming it) stays; the
    kernel dropped its flock, so the next sweep runs and names itself in the lock file."""
    out = tmp_path / "sweep.parquet"
    holder = _holder(out)
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate()
    assert f'"pid": {holder.pid}' in lock_path(out).read_text()
    res = CliRunner().invoke(app, ["sweep", str(specs[0]), *SWEEP, "--out", str(out)])
    assert res.exit_code == 0 and "4 rows (4 new" in res.output, res.output + res.stderr
    assert lock_path(out).exists()  # left in place: the lock is the flock, not the file


def test_the_lock_is_per_open_file_and_released_on_close(tmp_path):
    """A second lock of one output in the same process is refused too; leaving the first's
    ``with`` block releases it; a lock file that is a symbolic link is refused."""
    out = tmp_path / "sweep.parquet"
    with SweepFile(out):
        with pytest.raises(InputError, match=f"PID {os.getpid()} on host "):
            SweepFile(out)
        with pytest.raises(InputError, match="another process is writing it"):
            OutputLock(out)
    with SweepFile(out) as again:
        again.finish()
    assert read_rows(out, SweepRow, "sweep file") == []
    other = tmp_path / "other.parquet"
    lock_path(other).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="is a symbolic link"):
        SweepFile(other)


def test_two_sweeps_started_together_lose_no_rows(specs, tmp_path):
    """Two real `cosine sweep` processes, one spec each, started together on one --out: each
    either finishes and its rows are all in the file, or exits 2 naming the other's PID, before
    any work."""
    out = tmp_path / "sweep.parquet"
    procs = [
        subprocess.Popen(
            [str(COSINE), "sweep", str(spec), *SWEEP, "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for spec in specs
    ]
    results = [p.communicate(timeout=WAIT_S) for p in procs]
    codes = [p.returncode for p in procs]
    assert set(codes) <= {0, 2} and 0 in codes, results
    rows = read_rows(out, SweepRow, "sweep file")
    for i, (p, (stdout, stderr)) in enumerate(zip(procs, results, strict=True)):
        if p.returncode == 0:
            assert sum(r.spec == f"l{i}" for r in rows) == 4, (stdout, stderr)
        else:
            other = procs[1 - i].pid
            assert f"another process is writing it (PID {other} on host" in stderr, stderr
    assert len(rows) == 4 * codes.count(0)
