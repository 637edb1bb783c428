"""A killed run leaves nothing behind: SIGTERM and Ctrl-C to a real `cosine validate io --quick` in
the middle of an engine run remove its scratch data directory, its temporary files and its
engine process (issue 14, section 3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

COSINE = Path(sys.executable).parent / "cosine"


def _engine_processes(marker: str) -> list[int]:
    """Processes whose command line mentions ``marker`` (the scratch directory)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker in (p / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(p.name))
            except OSError:
                continue
    return pids


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    "sig,code,message",
    [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")],
    ids=["SIGTERM", "SIGINT"],
)
def test_killed_validate_leaves_nothing(engine_binary, tmp_path, sig, code, message):
    scratch, tmp = tmp_path / "scratch", tmp_path / "tmp"
    scratch.mkdir()
    tmp.mkdir()
    env = {**os.environ, "COSINE_VALIDATE_DIR": str(scratch), "TMPDIR": str(tmp)}
    p = subprocess.Popen(
        [str(COSINE), "validate", "io", "--quick", "--out", str(tmp_path / "out")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a test run started in the background (`make test &`) inherits SIGINT ignored, and so would
        # `cosine` (Python keeps an inherited SIG_IGN, as a background job should): give it Ctrl-C back
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 120
    while not any(scratch.iterdir()) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()
    assert any(scratch.iterdir()), "no engine run started within 120 s"
    time.sleep(0.3)  # the engine is loading records into its data directory
    assert _engine_processes(str(scratch)), "the engine is not running"
    p.send_signal(sig)
    _, stderr = p.communicate(timeout=60)
    assert p.returncode == code, stderr
    assert stderr.strip().splitlines()[-1] == message and "Traceback" not in stderr
    assert list(scratch.iterdir()) == [] and list(tmp.iterdir()) == []
    assert _engine_processes(str(scratch)) == []
    assert not (tmp_path / "out" / "validation.parquet").exists()


def test_terminated_benchmark_leaves_nothing(engine_binary, tmp_path):
    """A benchmark script (`python -m bench.<name>`) unwinds on SIGTERM too (bench/__init__.py): its
    engine run's data directory and process are gone. Before, the interpreter died on the spot and
    left both (a cosine-bench process and a /dev/shm directory per killed benchmark)."""
    scratch, tmp = tmp_path / "scratch", tmp_path / "tmp"
    scratch.mkdir()
    tmp.mkdir()
    env = {**os.environ, "COSINE_VALIDATE_DIR": str(scratch), "TMPDIR": str(tmp)}
    p = subprocess.Popen(
        [sys.executable, "-m", "bench.write_stalls", "--ops", "50000000", "--case", "lsm:ycsb_a"],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not any(scratch.iterdir()) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()
    time.sleep(0.3)
    assert _engine_processes(str(scratch)), "the engine is not running"
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    assert p.returncode != 0
    assert list(scratch.iterdir()) == [] and list(tmp.iterdir()) == []
    assert _engine_processes(str(scratch)) == []
