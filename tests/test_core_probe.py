"""measure.cores: a run the host gave one core for two threads is run again, and the probe that
tells it is the engine's own (cached gets at one and two threads)."""

from __future__ import annotations

import pytest

from measure.cores import ATTEMPTS, SHARED_CORE_RATIO, CoreProbe, core_probe, on_two_cores


@pytest.mark.parametrize(
    ("one", "two", "shared"),
    [(0.53e-6, 0.65e-6, False), (0.53e-6, 0.73e-6, False), (0.53e-6, 1.33e-6, True), (0.53e-6, 1.40e-6, True)],
)
def test_the_probes_of_both_modes_are_told_apart(one: float, two: float, shared: bool) -> None:
    """The docs/journal/s31-s42.md §34.4 probes: 1.2-1.4 on two cores, 2.5-2.6 on one core's two hardware threads."""
    assert CoreProbe(one, two).shared is shared
    assert CoreProbe(1.0, SHARED_CORE_RATIO).shared is False


def _script(modes: list[tuple[bool, bool]]) -> tuple[list[int], list[float], object, object, object]:
    """A run, a probe and a wait: each run's probes (before, after) say ``modes`` in turn."""
    runs: list[int] = []
    waits: list[float] = []
    it = iter(m for pair in modes for m in pair)

    def run() -> int:
        runs.append(len(runs))
        return len(runs)

    def probe() -> CoreProbe:
        return CoreProbe(1.0, 2.5 if next(it) else 1.2)

    return runs, waits, run, probe, waits.append


@pytest.mark.parametrize(
    ("modes", "kept", "dropped", "shared"),
    [
        ([(False, False)], 1, 0, False),
        ([(False, True), (False, False)], 2, 1, False),
        # the mode ended during the run: only the probe before it saw it
        ([(True, False), (False, False)], 2, 1, False),
        ([(True, False), (False, True), (False, False)], 3, 2, False),
        ([(True, True)] * ATTEMPTS, ATTEMPTS, ATTEMPTS - 1, True),
        ([(False, True)] * (ATTEMPTS - 1) + [(True, False)], ATTEMPTS, ATTEMPTS - 1, True),
    ],
)
def test_a_run_on_a_shared_core_is_run_again(
    modes: list[tuple[bool, bool]], kept: int, dropped: int, shared: bool
) -> None:
    runs, waits, run, probe, wait = _script(modes)
    out = on_two_cores(run, 2, probe, wait=wait)  # type: ignore[arg-type]
    assert out == (kept, dropped, shared)
    assert len(runs) == kept and len(waits) == dropped


def test_a_one_thread_run_is_not_probed() -> None:
    runs, waits, run, probe, wait = _script([])
    assert on_two_cores(run, 1, probe, wait=wait) == (1, 0, False)  # type: ignore[arg-type]


def test_the_probe_runs_the_engine(engine_binary) -> None:
    p = core_probe()
    assert 0 < p.one < 1e-4 and 0 < p.two < 1e-4
    assert p.ratio > 0


def test_a_two_thread_calibration_run_is_probed_and_its_sample_says_so(engine_binary) -> None:
    """measure.calibrate.samples.measure runs a two-thread run through on_two_cores; the sample keeps the count."""
    from dataclasses import replace

    from measure.calibrate.plan import CACHED, QUICK_PLAN
    from measure.calibrate.samples import measure
    from measure.grid import mix_spec
    from specs.vocab import Operation

    plan = replace(QUICK_PLAN, sizes=(5_000,), read_ops=5_000, write_ops=5_000)
    spec = mix_spec({Operation.GET: 1.0}, name="get")
    (two,) = measure(plan, runs=[(CACHED, "lsm", "get", spec, 5_000, 2, 1.0)])
    assert two.threads == 2 and 0 <= two.runs_dropped_shared_core < ATTEMPTS
    assert isinstance(two.on_shared_core, bool)


@pytest.mark.parametrize(("two", "says"), [(0.65e-6, "a core each"), (1.33e-6, "one core's two hardware threads")])
def test_the_host_speed_report_says_whether_two_threads_had_a_core_each(capsys, two: float, says: str) -> None:
    from report.measure import print_host_speed

    rows = [{"class": "lsm", "operation": "get", "records": 1, "measured_us": 1.0, "tabled_us": 1.0, "ratio": 1.0}]
    rows[0]["runqueue_share"] = 0.0
    print_host_speed(1.0, rows, False, CoreProbe(0.53e-6, two))
    out = capsys.readouterr().out
    assert says in out and f"x{two / 0.53e-6:.2f}" in out
