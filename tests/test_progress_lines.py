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


def test_a_solves_bands_count_to_their_total(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`cosine solve`'s band count ends at its total, never past it: a robust spec counts four
    objectives per provider and plan (the headline's bands too when it is the robust rule's own:
    it went to 105 % on ycsb_a)."""
    from cost_models.pricing.catalog import load_catalog
    from solver.backends import HighsBackend
    from solver.solve import run_solve
    from specs.schema import parse_spec
    from tests.conftest import TINY_SPEC

    seen: list[tuple[int, int]] = []
    spec = parse_spec(TINY_SPEC + "robustness: {noise: 0.1}\n")
    run_solve(
        spec,
        load_catalog("ondemand"),
        HighsBackend(),
        bands=6,
        out_dir=tmp_path / "run",
        progress=lambda stage, done, total: seen.append((done, total)) if stage == "bands" else None,
    )
    assert seen and all(d <= t for d, t in seen) and seen[-1][0] == seen[-1][1]
