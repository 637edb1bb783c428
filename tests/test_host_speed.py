"""The host-speed scale: a host whose CPU takes f times the calibration host's seconds runs a
CPU-bound engine f times slower and an I/O-bound one as fast (cost_models.cpu.Demands.scaled,
measure.host_speed.host_speed)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from cost_models.cpu import DeviceModel, demands, throughput
from cost_models.engine_model import engine_demands, engine_throughput
from cost_models.phi import load_phi
from measure.calibrate.plan import QUICK_PLAN
from measure.engine import workload_json
from measure.grid import designs, mix_spec
from measure.host_speed import host_speed
from specs.errors import InputError

MIX = {"get": 0.5, "update": 0.5}


def _case(records: int = 20_000) -> tuple[dict, dict]:
    secs = designs(records, quick=True, optima=False)["rocksdb"]
    return secs, workload_json(mix_spec(MIX), records, 10_000, 1)


@pytest.mark.parametrize("factor", [0.5, 1.0, 1.55, 3.0])
def test_scaled_demands_scale_every_cpu_second_and_nothing_else(factor: float) -> None:
    secs, wl = _case()
    d, _ = engine_demands(secs, wl)
    s, _ = engine_demands(secs, wl, cpu_scale=factor)
    for name in ("serial", "parallel", "background"):
        np.testing.assert_allclose(getattr(s, name), getattr(d, name) * factor, rtol=1e-12)
    for name in ("wait", "io", "io_bytes"):
        np.testing.assert_array_equal(getattr(s, name), getattr(d, name))
    if d.stall_seconds is not None:
        assert s.stall_seconds is not None
        np.testing.assert_allclose(s.stall_seconds, d.stall_seconds * factor, rtol=1e-12)
        np.testing.assert_array_equal(s.stall_rate, d.stall_rate)
        np.testing.assert_array_equal(s.stall_slack, d.stall_slack)


@pytest.mark.parametrize("factor", [0.5, 1.55, 3.0])
def test_a_cpu_bound_node_runs_factor_times_slower(factor: float) -> None:
    """Every CPU bound of the model (Eq. 2 on threads, the shared cores, the background worker)
    is homogeneous of degree -1 in the CPU seconds; the write stalls too (their slack is in
    operations, their time in background seconds), so the throughput scales by exactly 1/f
    when the device does not bind; scaling the demands directly (no frozen-buffer feedback)."""
    secs, wl = _case()
    d, _ = engine_demands(secs, wl)
    x = throughput(d, math.inf, 1, 2)
    xs = throughput(d.scaled(factor), math.inf, 1, 2)
    np.testing.assert_allclose(xs, x / factor, rtol=1e-9)


def test_an_io_bound_node_does_not_care() -> None:
    """On a volume far slower than the CPU the device bound decides, whatever the host's speed."""
    secs, wl = _case()
    dev = DeviceModel(iops=200.0)
    x, _ = engine_throughput(secs, wl, 2, dev)
    assert engine_throughput(secs, wl, 2, dev, cpu_scale=2.0)[0] == pytest.approx(x, rel=1e-12)


def test_scale_one_is_the_identity() -> None:
    secs, wl = _case()
    d, _ = engine_demands(secs, wl)
    assert d.scaled(1.0) is d
    assert engine_throughput(secs, wl, 2, cpu_scale=1.0) == engine_throughput(secs, wl, 2)


def test_demands_scaled_on_a_batch() -> None:
    """The scale is elementwise over a batch of designs (the solver's arrays)."""
    from cost_models.cpu import NodeShape
    from cost_models.io_model import IOCost
    from specs.vocab import OPERATIONS

    io = IOCost.of({str(op): np.array([0.5, 1.0, 2.0]) if op in MIX else np.zeros(3) for op in OPERATIONS})
    shape = NodeShape(np.array([0, 1, 2]), np.full(3, 4096.0), 1e5, 1024.0, np.full(3, 100.0))
    d = demands(load_phi(), io, shape, MIX, 1.0)
    np.testing.assert_allclose(d.scaled(2.0).serial, 2 * d.serial)
    np.testing.assert_allclose(throughput(d.scaled(2.0), math.inf, 4, 4), throughput(d, math.inf, 4, 4) / 2)


def test_host_speed_probe_compares_with_the_table(engine_binary) -> None:
    """The probe runs the calibration's cached get and update runs on every class and reports a
    positive factor, the median of its runs' measured / tabled CPU per operation."""
    plan = replace(QUICK_PLAN, sizes=(5_000,), read_ops=5_000, write_ops=5_000)
    hs = host_speed(plan, repeats=1)
    assert len(hs.rows) == 2 * 4
    ratios = sorted(r["ratio"] for r in hs.rows)
    assert hs.factor == pytest.approx((ratios[3] + ratios[4]) / 2)
    for r in hs.rows:
        assert r["measured_us"] > 0 and r["tabled_us"] > 0
        assert r["ratio"] == pytest.approx(r["measured_us"] / r["tabled_us"])
    with pytest.raises(InputError, match="repeats"):
        host_speed(plan, repeats=0)


@pytest.mark.parametrize("factor, stale", [(1.0, False), (0.86, False), (1.17, False), (0.8, True), (1.633, True)])
def test_a_host_off_by_more_than_the_accuracy_target_is_stale(factor: float, stale: bool) -> None:
    from measure.host_speed import HostSpeed

    assert HostSpeed(factor, []).stale is stale


def test_calibrate_host_speed_checks_its_out_dir_first(tmp_path) -> None:
    """A bad --out is a one-line error and exit 2, before any engine run."""
    from typer.testing import CliRunner

    from cli.main import app

    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = CliRunner().invoke(app, ["calibrate", "host-speed", "--out", str(blocker)])
    assert res.exit_code == 2, res.output
    assert "--out" in res.output and "Traceback" not in res.output
