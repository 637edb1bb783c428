"""The served node's model (issue 48): bytes on the wire, scan fan-out, the VM's network bound, the
serving CPU table and its fit, the M/M/c latency model, and the solver's use of them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cost_models.cpu import Demands, throughput
from cost_models.latency import LatencyTerms, Operating, erlang_c, latency_at, throughput_within
from cost_models.network import WireLoad, command, network_cap, served_mix, wire
from cost_models.pricing.catalog import GBIT_BYTES, VmType, load_catalog
from cost_models.serving import (
    GROUP_COMMIT_INTERVAL_S,
    KIND_TERMS,
    SIGNED_TERMS,
    ServingTableError,
    check_table,
    load_serving,
    per_cluster_op,
)
from measure.resp import encode
from measure.server import RUNTIME_THREAD
from specs.vocab import Operation, ReplyWait, ServingDriver


def test_request_bytes_are_those_the_resp_client_sends() -> None:
    """The model's request framing is the byte count of measure/resp.py's encoder for the same command."""
    key, value = b"k" * 24, b"v" * 1000
    assert command(3, 24) == len(encode("GET", key))
    assert command(3, 24, 1000) == len(encode("SET", key, value))
    assert command(5, 24, 2) == len(encode("RANGE", key, 50))
    w = wire(24, 1000, 50)
    assert w.reply[Operation.GET] == len(b"$1000\r\n") + 1000 + 2
    # a RANGE of 50 entries answers a flat array of 100 bulk strings
    assert w.reply[Operation.RANGE] == len(b"*100\r\n") + 50 * (len(b"$24\r\n") + 24 + 2 + len(b"$1000\r\n") + 1002)
    assert w.requests[Operation.RMW] == 2


def test_framing_is_shared_by_a_pipelined_batch() -> None:
    w = wire(16, 64, 1)
    one = w.framed(Operation.GET, 1)
    deep = w.framed(Operation.GET, 16)
    assert one[0] - deep[0] > 50, "a batch of 16 small requests shares one segment's headers"
    assert deep[1] < one[1]


def test_every_scan_reaches_every_shard() -> None:
    """deploy/scatter.py sends each RANGE to all k shards: a node serves 1/k of the point operations
    and every scan, 1 + (k - 1) x scan share operations per (cluster operation / k)."""
    mix, scale = served_mix({"get": 0.95, "range": 0.05}, 10)
    assert scale == pytest.approx(1 + 9 * 0.05)
    assert mix["range"] == pytest.approx(0.5 / 1.45)
    same, one = served_mix({"get": 0.95, "range": 0.05}, 1)
    assert one == 1.0 and same["range"] == pytest.approx(0.05)


def test_demands_per_cluster_operation_divide_the_throughput() -> None:
    """per_cluster_op multiplies every per-operation demand by the fan-out scale: the throughput on the
    result is the throughput on the node's mix over the scale (stall term included)."""
    d = Demands(
        serial=np.array([2e-6]),
        parallel=np.array([5e-6]),
        wait=np.array([0.0]),
        background=np.array([1e-6]),
        io=np.array([0.3]),
        io_bytes=np.array([1200.0]),
        stall_rate=np.array([[1e-4]]),
        stall_seconds=np.array([[2e-3]]),
        stall_slack=np.array([500.0]),
    )
    x = throughput(d, 50_000.0, 2)
    for s in (1.0, 1.7, 12.0):
        assert throughput(per_cluster_op(d, s), 50_000.0, 2) == pytest.approx(x / s, rel=1e-9)


def test_the_catalog_carries_each_vm_s_network() -> None:
    cat = load_catalog("ondemand")
    r5 = next(v for v in cat.vms["aws"] if v.name == "r5d.large")
    assert r5.network_bytes_per_s == pytest.approx(0.75 * GBIT_BYTES)
    assert r5.network_burst_bytes_per_s == pytest.approx(10 * GBIT_BYTES)
    assert r5.network_ingress_limited and r5.rtt_s > 0
    for p, vms in cat.vms.items():
        for v in vms:
            assert math.isfinite(v.network_bytes_per_s), f"{p}:{v.name} has no network figure"


def test_network_bound_and_burst_duty_cycle() -> None:
    """ycsb_c's 1 KB gets on an r5d.large: the baseline carries ~0.75 Gbit/s of replies; a node at its
    peak a tenth of the time may use min(burst, baseline / 0.1)."""
    vm = VmType("aws", "r5d.large", 2, 16, 0.144, 0.75 * GBIT_BYTES, 10 * GBIT_BYTES, True, 2.6e-4)
    load = WireLoad(inbound=200.0, outbound=1100.0)
    base = network_cap(load, vm.network_bytes_per_s, vm.network_burst_bytes_per_s, True)
    assert base == pytest.approx(0.75e9 / 8 / 1100)
    assert network_cap(load, vm.network_bytes_per_s, vm.network_burst_bytes_per_s, True, 0.1) == pytest.approx(
        7.5e9 / 8 / 1100
    )
    assert network_cap(load, vm.network_bytes_per_s, vm.network_burst_bytes_per_s, True, 0.01) == pytest.approx(
        10e9 / 8 / 1100
    )
    writes = WireLoad(inbound=1100.0, outbound=5.0)
    assert network_cap(writes, 1e9, 1e9, ingress_limited=True) == pytest.approx(1e9 / 1100)
    assert network_cap(writes, 1e9, 1e9, ingress_limited=False) == pytest.approx(1e9 / 5)


def test_mm1_quantiles_are_exponential() -> None:
    """c = 1: the response time of M/M/1 is exponential with rate mu - lambda."""
    t = LatencyTerms(0.0, 0.0, 0.0)
    for lam in (0.1, 0.5, 0.9):
        for q in (0.5, 0.99):
            got = latency_at(np.array([lam]), np.array([1.0]), 1, 1, t, q)[0]
            assert got == pytest.approx(-math.log(1 - q) / (1 - lam), rel=1e-6)


def test_mmc_quantiles_against_a_simulation() -> None:
    """M/M/3 at 80 % and a uniform commit wait: the closed-form quantiles against a FCFS simulation."""
    rng = np.random.default_rng(7)
    c, mu, lam, n = 3, 1.0, 2.4, 200_000
    arrivals = np.cumsum(rng.exponential(1 / lam, n))
    service = rng.exponential(1 / mu, n)
    free = np.zeros(c)
    resp = np.empty(n)
    for i in range(n):
        k = int(np.argmin(free))
        start = max(arrivals[i], free[k])
        free[k] = start + service[i]
        resp[i] = free[k] - arrivals[i]
    resp = resp[n // 10 :]
    window = 2.0
    with_commit = resp + rng.uniform(0, window, resp.size)
    for q in (0.5, 0.99):
        plain = latency_at(np.array([lam]), np.array([c * mu]), c, 1, LatencyTerms(0.0, 0.0, 0.0), q)[0]
        assert plain == pytest.approx(np.quantile(resp, q), rel=0.05)
        commit = latency_at(np.array([lam]), np.array([c * mu]), c, 1, LatencyTerms(0.0, 1.0, window), q)[0]
        assert commit == pytest.approx(np.quantile(with_commit, q), rel=0.05)


def _closed_loop_simulation(c: int, service: float, clients: int, think: float, n: int) -> tuple[float, np.ndarray]:
    """A FCFS simulation of ``clients`` each thinking Exp(``think``), then served Exp(``service``)
    on one of ``c`` cores: (batches per second, each batch's wait and service)."""
    import heapq

    rng = np.random.default_rng(11)
    ready = sorted(rng.exponential(think, clients))  # when each client's next batch arrives
    free = [0.0] * c
    resp = []
    t_end = 0.0
    while len(resp) < n:
        arrive = heapq.heappop(ready)
        k = int(np.argmin(free))
        done = max(arrive, free[k]) + rng.exponential(service)
        free[k] = done
        resp.append(done - arrive)
        t_end = max(t_end, done)
        heapq.heappush(ready, done + rng.exponential(think))
    keep = np.array(resp[n // 10 :])
    return n / t_end, keep


@pytest.mark.parametrize(("c", "clients", "think"), [(1, 50, 1.5), (1, 8, 5.0), (2, 20, 4.0)])
def test_the_closed_loop_against_a_simulation(c: int, clients: int, think: float) -> None:
    """The bench's finite-source queue (cost_models.latency.ClosedLoop): its sojourn's mean is
    Little's (C / X - think), and its throughput and quantiles are a FCFS simulation's."""
    from cost_models.latency import ClosedLoop, Route

    loop = ClosedLoop(c, 1.0, clients, think)
    x = loop.throughput()
    ts = np.linspace(0.0, 3.0 * clients + 60.0, 6001)
    mean = np.trapezoid([1.0 - loop.sojourn_cdf(float(t)) for t in ts], ts)
    assert mean == pytest.approx(clients / x - think, rel=1e-6)
    x_sim, resp = _closed_loop_simulation(c, 1.0, clients, think, 60_000)
    assert x == pytest.approx(x_sim, rel=0.03)
    for q in (0.5, 0.99):
        assert loop.quantile(q, [(1.0, Route(0.0))]) == pytest.approx(np.quantile(resp, q), rel=0.05)
    # a route's fixed seconds add to its quantile
    assert loop.quantile(0.5, [(1.0, Route(2.0))]) == pytest.approx(loop.quantile(0.5, [(1.0, Route(0.0))]) + 2.0)


def test_nodes_latencies_at_once_are_each_node_s_alone() -> None:
    """solver.exact re-evaluates every node of a solve in one latency_at (cores and terms stacked
    over the nodes): each node's quantile is exactly the one it gets alone."""
    rng = np.random.default_rng(7)
    n = 64
    cap = 10 ** rng.uniform(3, 7, n)
    lam = cap * rng.uniform(0, 0.999, n)
    cores = rng.choice([2.0, 8.0, 32.0, 96.0], n)
    terms = [
        LatencyTerms(float(r), float(w), float(x))
        for r, w, x in zip(
            rng.uniform(5e-5, 5e-4, n), rng.choice([0.0, 0.3, 1.0], n), rng.choice([0.0, 1e-3], n), strict=True
        )
    ]
    for pipeline in (1, 16):
        for q in (0.5, 0.99):
            together = latency_at(lam, cap, cores, pipeline, LatencyTerms.stacked(terms), q)
            for i in range(n):
                alone = latency_at(lam[i : i + 1], cap[i : i + 1], float(cores[i]), pipeline, terms[i], q)[0]
                assert together[i] == alone


def test_erlang_c_is_the_probability_of_waiting() -> None:
    # M/M/2 at a = 1: C = (1/2 * 2) / (1 + 1 + 1) = 1/3
    assert erlang_c(np.array([2.0]), np.array([1.0]))[0] == pytest.approx(1 / 3)


def test_a_latency_bound_holds_a_node_below_its_capacity() -> None:
    terms = LatencyTerms(100e-6, 0.0, 0.0)
    cap = np.array([100_000.0, 200_000.0])
    x = throughput_within(cap, 2, 1, terms, 500e-6)
    assert np.all(x < cap) and np.all(x > 0)
    p99 = latency_at(x, cap, 2, 1, terms, 0.99)
    assert np.all(p99 <= 500e-6 * (1 + 1e-6))
    assert np.all(latency_at(x * 1.01, cap, 2, 1, terms, 0.99) > 500e-6), "it is the highest such throughput"
    # a bound below an idle node's round trip and service: no throughput meets it
    assert throughput_within(cap, 2, 1, terms, 50e-6)[0] == 0.0
    op = Operating(x, cap, 2, 1)
    assert np.all(op.queue().rho < 1)


@pytest.mark.parametrize("bound", [1e308, float(np.finfo(float).max)])
def test_a_huge_latency_bound_is_no_bound_and_warns_nothing(bound: float) -> None:
    """performance.max_latency_s: 1e308 is a valid spec: its CCDF's exponents overflow to -inf (the
    tail's e^{-rate t} is 0 there), which printed numpy's RuntimeWarning on stderr."""
    import warnings

    cap = np.array([100_000.0, 200_000.0])
    for terms in (LatencyTerms(100e-6, 0.0, 0.0), LatencyTerms(100e-6, 0.5, 1e-3)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            x = throughput_within(cap, 2, 1, terms, bound, bound)
        assert np.array_equal(x, throughput_within(cap, 2, 1, terms, 1e300, 1e300))
        assert np.all(x > 0.999 * cap)


def test_the_serving_table_is_checked() -> None:
    t = load_serving()
    floor = float(t.raw["write_engine_seconds"])
    for kind in ("read", "scan", "write"):
        assert t.batch_seconds(kind) > 0 and t.byte_seconds(kind) > 0
        if "request_seconds" not in KIND_TERMS[kind]:
            assert t.request_seconds(kind) == 0.0
        elif (kind, "request_seconds") in SIGNED_TERMS:
            assert t.request_seconds(kind) > -floor  # a write still costs CPU at any depth
        else:
            assert t.request_seconds(kind) > 0
    bad = json.loads(json.dumps(dict(t.raw)))
    bad["kinds"]["write"]["batch_seconds"] = 0.0
    with pytest.raises(ServingTableError, match="write.batch_seconds"):
        check_table(bad, "serving.yaml")
    bad = json.loads(json.dumps(dict(t.raw)))
    bad["kinds"]["write"]["request_seconds"] = -floor
    with pytest.raises(ServingTableError, match="write.request_seconds must be a number above"):
        check_table(bad, "serving.yaml")


def _points(req: dict[str, float], engine: dict[str, float], batch: float = 8e-6) -> list[Any]:
    """Serving points of an exact model: per kind ``req`` per request, ``batch`` per batch, 1 ns a
    byte beyond the engine's ``engine`` per request, at 3 depths and 2 sizes."""
    from measure.served_calibration import ServingPoint

    return [
        ServingPoint(
            kind, kind, p, 64, 0, 1000, 1.0, 1000 * (engine[kind] + req[kind] + batch / p + 1e-9 * b), engine[kind], b
        )
        for kind in ("read", "scan", "write")
        for p in (1, 4, 16)
        for b in (100.0, 5000.0)
    ]


def test_a_serving_fit_at_a_bound_is_refused() -> None:
    from measure.calibrate import CalibrationError
    from measure.served_calibration import ServingPoint, fit

    pts = []
    for kind in ("read", "scan", "write"):
        for p in (1, 4, 16):
            for b in (100.0, 5000.0):
                # the per-batch CPU grows with depth: a fit wants a negative c_batch
                pts.append(ServingPoint(kind, kind, p, 64, 0, 1000, 1.0, 1000 * (1e-6 * p + 1e-9 * b), 0.0, b))
    with pytest.raises(CalibrationError, match="batch_seconds"):
        fit(pts)
    engine = {"read": 0.2e-6, "scan": 2e-6, "write": 0.65e-6}
    # a get and a scan have no per-request term (cost_models.serving.KIND_TERMS); a write's is signed:
    # its batch is one write group, the engine's table charges a group to each write
    f = fit(_points({"read": 0.0, "scan": 0.0, "write": -0.4e-6}, engine))
    assert f["kinds"]["read"]["batch_seconds"] == pytest.approx(8e-6, rel=1e-3)
    assert f["kinds"]["write"]["request_seconds"] == pytest.approx(-0.4e-6, rel=1e-3)
    assert f["write_engine_seconds"] == pytest.approx(0.65e-6)
    assert f["fit_accuracy"] == pytest.approx(1.0)
    # a write credited more than the engine's whole CPU per write would cost nothing at depth
    with pytest.raises(CalibrationError, match="write.request_seconds"):
        fit(_points({"read": 0.0, "scan": 0.0, "write": -0.7e-6}, engine))


def test_the_server_s_cpu_is_read_to_the_nanosecond() -> None:
    """measure.server's CPU reading sums each thread's schedstat, not /proc's 10 ms ticks: a child
    whose two threads spun ~85 ms reads what the child's own clock says, within 2 ms."""
    import subprocess
    import sys

    from measure.server import Server

    child = (
        "import sys, threading, time\n"
        "def spin(s):\n"
        "    t = time.thread_time()\n"
        "    while time.thread_time() - t < s: pass\n"
        "th = threading.Thread(target=lambda: (spin(0.0437), time.sleep(60)), daemon=True); th.start()\n"
        "spin(0.0413); time.sleep(0.2)\n"
        "print(time.process_time(), flush=True); sys.stdin.readline()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        own = float(proc.stdout.readline())
        srv = Server(proc.pid, 0, Path("/dev/null"), proc)  # type: ignore[arg-type]
        read = srv.cpu_seconds()
        assert own >= 0.085
        assert read == pytest.approx(own, abs=2e-3)
        proc.stdin.write("\n")
        proc.stdin.flush()
    finally:
        proc.wait(10)


@pytest.mark.parametrize("driver", list(ServingDriver))
def test_each_serving_driver_measures_the_server_s_cpu(driver: ServingDriver, tmp_path: Path) -> None:
    """`cosine calibrate serving`'s drivers, on a real cosine-server: after the store is filled, a
    point of GETs and one of RANGEs at depth 16 run without an error reply and count the server's
    CPU."""
    from measure.engine import TEMPLATE, build
    from measure.served_calibration import SCAN_BUFFER_BYTES, Driver, store_server
    from measure.server import core_split

    server_cores, client_cores = core_split()
    client = Driver(driver, client_cores, tmp_path)
    with store_server(build(TEMPLATE, "cosine-server"), tmp_path, "t", 256, SCAN_BUFFER_BYTES, server_cores) as srv:
        client.fill(srv, 256)
        for kind, entries, n in (("read", 0, 40_000), ("scan", 16, 10_000)):
            wall, cpu = client.point(srv, kind, 256, entries, n, 16)
            assert wall > 0 and cpu > 0, (kind, wall, cpu)
        assert srv.alive()


def test_the_group_commit_interval_is_the_rendered_one() -> None:
    from render.config import engine_sections

    src = Path(__file__).resolve().parent.parent / "render" / "config.py"
    assert '"group_commit_interval_us": 1000' in src.read_text()
    assert GROUP_COMMIT_INTERVAL_S == pytest.approx(1000e-6)
    assert callable(engine_sections)


SERVED_SPEC = """
name: served-tiny
workload:
  entries: 2000
  key_bytes: 16
  value_bytes: 100
  operations: {get: 0.9, update: 0.05, range: 0.05}
  scan_length: 5
  distribution:
    get: {kind: zipfian, theta: 0.99}
    put: {kind: uniform}
budget: {monthly_usd: 800}
"""


def test_served_bench_prints_predicted_beside_measured(tmp_path: Path) -> None:
    """`cosine bench --served --json` on the template's engine: cosine-server and the RESP driver run,
    every operation is answered without an error, and the report carries the model's throughput,
    server CPU and p50/p99 per operation beside the measured ones."""
    from typer.testing import CliRunner

    from cli.main import app
    from measure.engine import TEMPLATE

    spec = tmp_path / "served.yaml"
    spec.write_text(SERVED_SPEC)
    res = CliRunner().invoke(
        app,
        [
            "bench",
            str(spec),
            "--engine",
            str(TEMPLATE),
            "--served",
            "--records",
            "2000",
            "--ops",
            "3000",
            "--pipeline",
            "4",
            "--clients",
            "8",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output + res.stderr
    doc = json.loads(res.stdout)
    m, p = doc["measured"], doc["predicted"]
    assert m["run"]["operations"] == 3000 and m["run"]["errors"] == 0 and m["run"]["misses"] == 0
    assert set(m["per_op"]) == {"get", "update", "range"} == set(p["per_op"])
    assert m["run"]["throughput_ops"] > 0 and p["throughput_ops"] > 0 and p["capacity_ops"] >= p["throughput_ops"]
    assert m["server"]["cpu_us_per_op"] > 0 and p["server_cpu_us_per_op"] > 0
    # the server's CPU by thread: the runtime's workers serve the requests, the parts add up to it
    by = m["server"]["cpu_us_per_op_by_thread"]
    assert by[RUNTIME_THREAD] > 0
    assert sum(by.values()) == pytest.approx(m["server"]["cpu_us_per_op"], rel=0.02)
    assert 0 <= p["background_cpu_us_per_op"] <= p["server_cpu_us_per_op"]
    assert m["server"]["device"] == {}  # the template's engine.toml has no volume
    # the rig's client side: the driver's CPU counted, no proxy on one node
    assert m["client"]["driver_cpu_seconds"] > 0 and m["client"]["proxy_cpu_seconds"] == 0
    assert m["client"]["busy_share"] > 0
    for op in p["per_op"].values():
        assert 0 < op["p50_us"] <= op["p99_us"]
    assert p["wire_bytes_per_op"] > 100
    # the prediction's engine state is the servers' own (INFO keyspace): every loaded record in it
    start = m["engine_state"]["start"]
    assert start["buffered"] + sum(lv["entries"] for lv in start["levels"]) >= 2000
    # how the replies waited, counted by the server (INFO server) and simulated: the template's
    # WAL is `none` (engine.toml), so no batch waits for a sync; at depth 4 most point batches are
    # pipelined (a turn's scans go on their own connection, and one alone is a single reply)
    for doc_ in (m, p):
        waits = doc_["replies"]["waits"]
        assert set(waits) == {k.value for k in ReplyWait}
        assert waits["durable"]["batches"] == 0 and not any(doc_["replies"]["syncs_per_1000_batches"].values())
        assert waits["pipelined"]["batches"] > waits["single"]["batches"] > 0
        assert waits["pipelined"]["mean_us"] > 0


def test_served_options_are_refused_before_any_work(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    spec = tmp_path / "served.yaml"
    spec.write_text(SERVED_SPEC)
    for flag, value in (("--pipeline", "0"), ("--clients", "0"), ("--nodes", "99")):
        res = CliRunner().invoke(app, ["bench", str(spec), "--engine", str(tmp_path), "--served", flag, value])
        assert res.exit_code == 2, res.output
        assert flag in res.output + res.stderr
    # an engine whose keys are shorter than the spec's
    from measure.engine import TEMPLATE

    spec.write_text(SERVED_SPEC.replace("key_bytes: 16", "key_bytes: 40"))
    res = CliRunner().invoke(app, ["bench", str(spec), "--engine", str(TEMPLATE), "--served"])
    assert res.exit_code == 2 and "key" in res.output + res.stderr


def test_the_solution_respects_each_vm_s_network_and_reports_latency(solved) -> None:  # type: ignore[no-untyped-def]
    """Every node of a solved answer runs at most at its VM's network bound and carries its served
    figures; the in-process engine's throughput is kept beside it."""
    _, run, _ = solved
    sol = json.loads((run / "solution.json").read_text())
    for d in sol["designs"]:
        assert d["network_ops"] is not None and d["node_throughput_ops"] <= d["network_ops"] * (1 + 1e-9)
        assert d["wire_bytes_per_op"] > 0
        assert d["engine_throughput_ops"] >= d["node_throughput_ops"] * (1 - 1e-9)
        assert 0 < d["latency_p50_s"] <= d["latency_p99_s"]
    assert sol["predicted"]["latency_p99_s"] >= sol["predicted"]["latency_p50_s"] > 0


def _solve_tiny(tmp_path: Path, name: str, performance: str, *, bands: int) -> dict[str, Any]:
    """`cosine solve` of the tiny spec named ``name`` with its ``performance:`` replaced; its
    solution.json."""
    from typer.testing import CliRunner

    from cli.main import app
    from tests.conftest import TINY_SPEC

    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        TINY_SPEC.replace("name: tiny", f"name: {name}").replace(
            "performance: {min_throughput: 1000}", f"performance: {performance}"
        )
    )
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["solve", str(spec), "--out", str(out), "--bands", str(bands), "--json"])
    assert res.exit_code == 0, res.output + res.stderr
    doc: dict[str, Any] = json.loads((out / "solution.json").read_text())
    return doc


def test_a_latency_bound_is_a_constraint_not_a_throughput_floor(tmp_path: Path) -> None:
    """performance.max_latency_s bounds every node's predicted p99 at the answer's operating point;
    it is no longer turned into a throughput target of 1 / max_latency_s (Eq. 3)."""
    sol = _solve_tiny(tmp_path, "lat", "{max_latency_s: 0.002, max_latency_p50_s: 0.001}", bands=6)
    assert sol["target"]["min_throughput"] is None, "no throughput floor of 1 / max_latency_s"
    assert sol["target"]["max_latency_s"] == 0.002
    for d in sol["designs"]:
        assert d["latency_p99_s"] <= 0.002 and d["latency_p50_s"] <= 0.001


def _refused_tiny(tmp_path: Path, performance: str) -> str:
    """`cosine solve` of the tiny spec with ``performance:`` replaced, refused: its one line on stderr."""
    from typer.testing import CliRunner

    from cli.main import app
    from tests.conftest import TINY_SPEC

    spec = tmp_path / "lat.yaml"
    spec.write_text(TINY_SPEC.replace("performance: {min_throughput: 1000}", f"performance: {performance}"))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["solve", str(spec), "--out", str(out), "--bands", "4", "--json"])
    assert res.exit_code == 2, res.output + res.stderr
    errors = [ln for ln in res.stderr.splitlines() if not ln.startswith("building design tables")]
    assert res.stdout == "" and len(errors) == 1 and errors[0].startswith("error: "), res.stderr
    assert not out.exists()
    return errors[0]


@pytest.mark.parametrize("field", ["max_latency_s", "max_latency_p50_s"])
@pytest.mark.parametrize("bound", ["0.00001", "1e-300", "0.00026"])
def test_a_latency_bound_within_the_round_trip_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, bound: str
) -> None:
    """A request takes at least its round trip (aws 260 us in the catalog): a bound at or below the
    providers' smallest is exit 2 naming it and the floor, before the tables (it built them for a
    minute, then exit 3 blamed the data's size)."""
    import solver.solve as ss

    def no_tables(*_a: object, **_k: object) -> None:
        raise AssertionError("built the tables of a bound no node can meet")

    monkeypatch.setattr(ss, "plan_tables", no_tables)
    err = _refused_tiny(tmp_path, f"{{{field}: {bound}}}")
    assert f"performance.{field} must be above 0.00026 s, the smallest round trip" in err, err
    assert "aws 260 us" in err


def test_a_latency_bound_no_node_meets_is_named_not_the_data(tmp_path: Path) -> None:
    """Above the round trip, but below what the tiny spec's writes wait for a group commit (half its
    requests, up to 1 ms): no column, and the message names the bound, not the data's size."""
    err = _refused_tiny(tmp_path, "{max_latency_s: 0.0005}")
    assert "performance.max_latency_s (0.0005 s): no configuration of the chosen providers meets it" in err, err
    assert "hold a shard" not in err


def test_a_node_the_demand_saturates_has_no_finite_latency(tmp_path: Path) -> None:
    """A throughput target beyond what the budget's cluster serves runs its nodes
    saturated: utilization 1 and no latency (the queue has no bound), not the finite 1e14 ms an
    M/M/c gives at a utilization a rounding below 1."""
    sol = _solve_tiny(tmp_path, "busy", "{min_throughput: 1.0e9}", bands=4)
    assert sol["designs"]
    for d in sol["designs"]:
        assert d["utilization"] == 1.0 and d["latency_p50_s"] is None and d["latency_p99_s"] is None
    assert sol["predicted"]["latency_p99_s"] is None


def test_saturation_is_judged_on_the_node_s_own_throughput() -> None:
    """A demand at or past the node's throughput (its caps', a rounding below its CPU figure when no
    cap binds) is saturation: utilization 1 and no finite latency."""
    from types import SimpleNamespace

    from solver.exact import demand_ops, node_latencies, operating_point
    from specs.schema import parse_spec
    from tests.conftest import TINY_SPEC

    spec = parse_spec(TINY_SPEC)
    d = demand_ops(spec)
    assert d is not None
    f = SimpleNamespace(x=d * (1 - 1e-15), x_cpu=d, sm=object())
    assert operating_point(spec, f, 1.0) == 1.0  # type: ignore[arg-type]
    assert node_latencies(spec, [(2.0, 1e-4, f, 1.0)]) == [(math.inf, math.inf)]  # type: ignore[list-item]
    half = SimpleNamespace(x=2 * d, x_cpu=4 * d, sm=None)
    assert operating_point(spec, half, 1.0) == pytest.approx(0.25)  # type: ignore[arg-type]


def test_the_envelope_guard_checks_the_served_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A served node predicted above what cosine-server was measured to serve per core over RESP is
    outside the envelope, though the engine in process was measured faster (issue 48.1). The shipped
    calibration's best points (depth 64, 64-byte values, a memtable) now serve more per core than the
    in-process envelope (a batch of SETs is one write group; docs/journal/s43-s51.md §31), so the
    server here is one measured 4x slower: the shipped table's points at 4x their CPU."""
    from dataclasses import dataclass

    import yaml

    import cost_models.serving as serving
    from cost_models.envelope import bound, check_nodes
    from cost_models.serving import served_envelope
    from specs.vocab import DesignClass

    slow = dict(load_serving().raw)
    slow["points"] = [{**pt, "server_cpu_seconds": 4 * pt["server_cpu_seconds"]} for pt in slow["points"]]
    (tmp_path / "serving.yaml").write_text(yaml.safe_dump(slow))
    monkeypatch.setattr(serving, "SERVING_TABLE", tmp_path / "serving.yaml")

    @dataclass
    class Node:
        vm_type: str
        design_class: DesignClass
        threads: int
        node_throughput_ops: float

    mix = {"get": 0.5, "update": 0.5}
    served = served_envelope(mix)
    assert served is not None
    in_process = bound("lsm", mix).per_core_ops
    assert in_process is not None and in_process > served * 1.05
    between = (served + in_process) / 2
    chk = check_nodes([Node("n1-highmem-2", DesignClass.LSM, 2, 2 * between)], mix)
    assert not chk.inside
    assert chk.nodes[0].calibration_workload is not None and "RESP" in chk.nodes[0].calibration_workload
    ok = check_nodes([Node("n1-highmem-2", DesignClass.LSM, 2, 2 * served * 0.9)], mix)
    assert ok.inside


def test_a_duty_cycle_lets_a_node_burst_and_says_so(tmp_path: Path) -> None:
    """ycsb_c-like 1 KB gets on AWS only: at the baseline every node stays within it; with
    performance.network_duty_cycle 0.1 a node may run past it on burst credits, and says so."""
    from typer.testing import CliRunner

    from cli.main import app

    spec = """
name: burst
workload:
  entries: 2000000
  key_bytes: 24
  value_bytes: 1000
  operations: {get: 1.0}
  distribution: {get: {kind: zipfian, theta: 0.99}, put: {kind: uniform}}
budget: {monthly_usd: 400}
performance: {network_duty_cycle: DUTY}
providers: [aws]
design: {max_cluster_size: 4}
"""
    sols = {}
    for duty in ("1.0", "0.1"):
        p = tmp_path / f"burst-{duty}.yaml"
        p.write_text(spec.replace("DUTY", duty))
        out = tmp_path / f"out-{duty}"
        res = CliRunner().invoke(app, ["solve", str(p), "--out", str(out), "--bands", "6", "--json"])
        assert res.exit_code == 0, res.output + res.stderr
        sols[duty] = json.loads((out / "solution.json").read_text())
    cat = load_catalog("ondemand")
    for d in sols["1.0"]["designs"]:
        vm = next(v for v in cat.vms["aws"] if v.name == d["vm_type"])
        assert d["burst_duty_cycle"] is None
        assert d["node_throughput_ops"] * d["wire_bytes_per_op"] <= vm.network_bytes_per_s * 1.5
    assert sols["0.1"]["predicted"]["throughput_ops"] >= sols["1.0"]["predicted"]["throughput_ops"]
    assert any(d["burst_duty_cycle"] == 0.1 for d in sols["0.1"]["designs"])


def test_a_calibration_point_is_its_median_pass() -> None:
    """`cosine calibrate serving --repeat N`: each point is the pass of median server CPU per request
    (a measured run), the CLI's default is the module's, and passes of two plans are refused."""
    import inspect

    from cli.calibrate import serving as serving_command
    from measure.served_calibration import REPEATS, ServingPoint, median_points

    def pt(kind: str, p: int, cpu: float) -> ServingPoint:
        return ServingPoint(kind, kind, p, 64, 0, 1000, 1.0, cpu, 0.0, 100.0)

    passes = [[pt("read", 1, c), pt("write", 16, 3 * c)] for c in (0.009, 0.007, 0.008)]
    med = median_points(passes)
    assert [m.server_cpu_seconds for m in med] == [0.008, 0.024]
    even = median_points(passes[:2])
    assert [m.server_cpu_seconds for m in even] == [0.007, 0.021]  # the lower middle, not a mean
    with pytest.raises(ValueError, match="not the same plan"):
        median_points([[pt("read", 1, 0.01)], [pt("read", 4, 0.01)]])
    assert inspect.signature(serving_command).parameters["repeat"].default == REPEATS


def test_a_write_costs_the_table_s_terms_whatever_the_batch_s_share_of_sets() -> None:
    """A batch of mixed requests is one write group per run of SETs (cosine-server's set_run); since
    the server writes its log once per sync, a group costs it no system call, and a write's terms
    are the table's at any share of SETs in its batch (cost_models.serving.op_serving_seconds): at
    depth 1 and 16 alike, a GET's the same in any mix."""
    from cost_models.serving import Serving, op_serving_seconds, served
    from cost_models.symbolic import compiled

    t = load_serving()
    assert t.request_seconds("write") < 0  # the credit of a batch's shared group (SIGNED_TERMS)
    w = wire(16, 1000, 10.0)
    c = compiled()["serving_seconds"]
    for depth in (1, 16):
        a, b = w.framed(Operation.UPDATE, depth)
        want = float(
            c(t.request_seconds("write"), t.batch_seconds("write"), float(depth), t.byte_seconds("write"), a + b)
        )
        assert op_serving_seconds(t, w, Operation.UPDATE, depth) == pytest.approx(want, rel=1e-12)
        # a node's serving CPU is the mix's average of its operations' own
        per = {op: op_serving_seconds(t, w, Operation(op), depth) for op in ("get", "update")}
        for mix in ({"get": 0.5, "update": 0.5}, {"get": 0.95, "update": 0.05}):
            sm = served(mix, 16, 1000, 10.0, Serving(depth, 1.0, t))
            assert sm.serving_seconds == pytest.approx(sum(v * per[op] for op, v in mix.items()), rel=1e-9)


def test_an_rmw_writes_in_a_batch_of_its_own_after_its_read() -> None:
    """An rmw's write depends on its read: the driver sends the batch's rmw writes once the batch
    is answered, so the model charges its read in the batch at depth p and its write the table's own
    terms at the rmw writes' depth, 1 + (p - 1) x the rmw share; the batch's write share counts the
    inserts' and updates' SETs only."""
    from cost_models.serving import op_serving_seconds, rmw_share, write_request_share
    from cost_models.symbolic import compiled

    t = load_serving()
    w = wire(16, 1000, 10.0)
    mix = {"get": 0.5, "rmw": 0.5}
    assert write_request_share(mix) == 0.0 and rmw_share(mix) == 0.5
    assert write_request_share({"get": 0.5, "update": 0.25, "rmw": 0.25}) == pytest.approx(0.25)
    c = compiled()["serving_seconds"]
    a, b = w.framed(Operation.RMW, 16)
    per_byte = (a + b) / 2
    rq, rb = t.request_seconds("read"), t.batch_seconds("read")
    wq, wb = t.request_seconds("write"), t.batch_seconds("write")
    want = float(c(rq, rb, 16.0, t.byte_seconds("read"), per_byte)) + float(
        c(wq, wb, 1.0 + 15 * 0.5, t.byte_seconds("write"), per_byte)
    )
    assert op_serving_seconds(t, w, Operation.RMW, 16, 0.5) == pytest.approx(want, rel=1e-12)
    # at depth 1 both requests are batches of one, whatever the mix
    one = [op_serving_seconds(t, w, Operation.RMW, 1, s) for s in (0.05, 0.5, 1.0)]
    assert one == pytest.approx([one[0]] * 3, rel=1e-12)


def test_a_long_closed_queue_keeps_its_quantiles() -> None:
    """1,000 clients saturating one core: a batch finds ~999 ahead, its sojourn Erlang(~1,000): the
    quantiles are the Erlang's (its e^-x underflowed past x ~ 745: the p99 came out below the mean)."""
    from cost_models.latency import ClosedLoop, Route

    loop = ClosedLoop(1, 1.0, 1000, 1.0)
    assert loop.quantile(0.5, [(1.0, Route(0.0))]) == pytest.approx(999.0, rel=2e-3)
    assert loop.quantile(0.99, [(1.0, Route(0.0))]) == pytest.approx(1000.0 + 2.326 * 1000.0**0.5, rel=5e-3)


def test_the_server_s_cpu_and_volume_per_operation_between_two_readings() -> None:
    """measure.served's per-operation splits: each thread name's CPU seconds and each volume
    counter between two readings, summed over the servers; a counter a server lacks is left out."""
    from measure.served import device_stats, thread_split

    before = [{"tokio-rt-worker": 1.0, "cosine-worker": 0.5}, {"tokio-rt-worker": 2.0}]
    after = [{"tokio-rt-worker": 1.4, "cosine-worker": 0.6, "cosine-durable": 0.01}, {"tokio-rt-worker": 2.2}]
    split = thread_split(before, after, 100_000)
    assert split == pytest.approx({"cosine-durable": 0.1, "cosine-worker": 1.0, "tokio-rt-worker": 6.0})
    dev0 = [{"device_ios": 10.0, "device_sleeps": 1.0}, {"device_ios": 5.0, "device_sleeps": 0.0}]
    dev1 = [{"device_ios": 30.0, "device_sleeps": 5.0}, {"device_ios": 25.0, "device_sleeps": 2.0}]
    assert device_stats(dev0, dev1, 10) == pytest.approx({"ios_per_op": 4.0, "sleeps_per_op": 0.6})
    assert device_stats([{}], [{}], 10) == {}


def test_a_calibration_scan_point_is_bounded_by_its_bytes_not_below_its_turns() -> None:
    """`cosine calibrate serving` measures RANGEs of YCSB E's 50 entries too (its 51 KiB replies were
    past the 16-entry points): a point's requests move at most SCAN_BYTES_PER_POINT of replies, yet
    every connection still runs MIN_TURNS pipelines; short scans keep their counts."""
    from measure.served_calibration import (
        CONNECTIONS,
        KEY_BYTES,
        MIN_TURNS,
        REQUESTS,
        SCAN_BYTES_PER_POINT,
        SCAN_COUNTS,
        requests,
    )

    assert 50 in SCAN_COUNTS
    assert requests("scan", 1, 64, 1) == REQUESTS["scan"]
    big = requests("scan", 4, 4096, 50)
    assert big * 50 * (KEY_BYTES + 4096) <= SCAN_BYTES_PER_POINT
    assert requests("scan", 64, 4096, 50) == MIN_TURNS * CONNECTIONS * 64
