"""Off a terminal, long commands print plain progress lines (issue 46, item 8): done/total, rate, ETA,
at least every LINE_INTERVAL_S seconds, even while nothing reports."""

from __future__ import annotations

import io
import time

from report.progress import LINE_INTERVAL_S, LineProgress, counting_bar, progress_bar


def test_off_a_terminal_the_bars_are_lines() -> None:
    # pytest captures stderr: not a terminal
    assert isinstance(progress_bar(), LineProgress)
    assert isinstance(counting_bar("solves"), LineProgress)
    assert LINE_INTERVAL_S <= 10.0


def test_lines_carry_done_total_rate_and_eta() -> None:
    now = [0.0]
    out = io.StringIO()
    p = LineProgress("solves", interval=10.0, stream=out, clock=lambda: now[0])
    t = p.add_task("sweeping", total=100)
    now[0] = 5.0
    p.update(t, completed=10)  # within the interval: no line
    now[0] = 20.0
    p.update(t, completed=40)
    now[0] = 40.0
    p.update(t, completed=100)
    lines = out.getvalue().splitlines()
    assert "40/100 solves" in lines[0] and "2.00 solves/s" in lines[0] and "ETA 0:00:30" in lines[0]
    assert "100/100 solves" in lines[1] and "elapsed 0:00:40" in lines[1]
    assert len(lines) == 2


def test_a_short_command_prints_no_line() -> None:
    """Done within the interval: nothing (an early `error:` line stays the only line)."""
    now = [0.0]
    out = io.StringIO()
    p = LineProgress(interval=10.0, stream=out, clock=lambda: now[0])
    t = p.add_task("building design tables", total=1)
    now[0] = 3.0
    p.update(t, description="solving budget bands", completed=1, total=1)
    assert out.getvalue() == ""


def test_a_silent_step_is_still_announced() -> None:
    """A step that reports nothing (an engine build) still gets a line every interval."""
    out = io.StringIO()
    with LineProgress(interval=0.2, stream=out) as p:
        p.add_task("building the engine", total=None)
        time.sleep(0.9)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("building the engine") for line in lines)
