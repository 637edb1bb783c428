"""cost_models.latency.RuntimeLoop: the bench's closed loop served by cosine-server's tokio runtime,
the served prediction's latency model (measure/served.py; journal §42)."""

from __future__ import annotations

import numpy as np
import pytest

from cost_models.latency import ClosedLoop, Route, RuntimeLoop, Visit
from specs.vocab import ReplyWait, SyncBy

#: A depth-1 request of 8 us, 2 of them the reply's write; A's mix.
A_MIX = (("get", 0.5), ("update", 0.5))
A_COSTS = (("get", (Visit(6e-6, 2e-6),)), ("update", (Visit(6e-6, 2e-6),)))


def loop(**kw: object) -> RuntimeLoop:
    """One core, 50 clients at depth 1, YCSB A, a 14 us round trip, a 2 us sync, a 1 ms tick."""
    args: dict[str, object] = {
        "cores": 1,
        "clients": 50,
        "pipeline": 1,
        "rtt_s": 14e-6,
        "sync_s": 2e-6,
        "tick_s": 1e-3,
        "mix": A_MIX,
        "costs": A_COSTS,
    }
    args.update(kw)
    return RuntimeLoop(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(("c", "clients", "rtt"), [(1, 50, 1.5), (1, 8, 5.0), (2, 20, 4.0)])
def test_without_writes_at_depth_one_it_is_the_closed_queue(c: int, clients: int, rtt: float) -> None:
    """No write to sync and one request a batch: a reply is written as soon as its request ran, so
    the loop's throughput is the finite-source queue's (ClosedLoop, analytic) and its quantiles
    too, within what the runtime's order (not first come first served: the LIFO slot takes the
    last task woken, the sockets are polled between tasks) moves them."""
    sim = RuntimeLoop(c, clients, 1, rtt, 0.0, 0.0, (("get", 1.0),), (("get", (Visit(1.0),)),)).simulate(60_000)
    closed = ClosedLoop(c, 1.0, clients, rtt)
    assert sim.throughput == pytest.approx(closed.throughput(), rel=0.01)
    assert sim.quantile(0.5, "get") == pytest.approx(closed.quantile(0.5, [(1.0, Route(rtt))]), rel=0.05)
    assert sim.quantile(0.99, "get") == pytest.approx(closed.quantile(0.99, [(1.0, Route(rtt))]), rel=0.08)
    assert not sim.waits[ReplyWait.DURABLE] and not sim.waits[ReplyWait.PIPELINED]


def test_a_write_waits_for_a_sync_and_little_s_law_holds() -> None:
    """A write's reply waits for a sync (a worker about to park, or the waiter's tick), so it is
    answered later than a get; without a sync (``wal_sync = none``) the two wait alike; the mean
    latency is C / X (the time outside is in it)."""
    synced = loop().simulate(100_000)
    get, put = synced.quantile(0.5, "get"), synced.quantile(0.5, "update")
    assert put > 1.25 * get
    assert np.mean(synced.waits[ReplyWait.DURABLE]) > 10 * np.mean(synced.waits[ReplyWait.SINGLE])
    mean = np.mean([x for v in synced.latencies.values() for x in v])
    assert mean * synced.throughput == pytest.approx(50, rel=0.03)
    unsynced = loop(durable=False).simulate(100_000)
    assert unsynced.quantile(0.5, "update") == pytest.approx(unsynced.quantile(0.5, "get"), rel=0.05)
    assert not unsynced.waits[ReplyWait.DURABLE] and not any(unsynced.syncs.values())


def test_an_idle_worker_syncs_and_a_busy_one_leaves_it_to_the_tick() -> None:
    """Few clients leave the worker idle between requests: its park hook makes nearly every sync.
    Many clients pipelining keep it busy: the waiter's tick makes most of them, and a write's reply
    waits longer."""
    light = loop(clients=2).simulate(20_000)
    assert light.syncs[SyncBy.IDLE] > 20 * max(light.syncs[SyncBy.TICK], 1)
    busy = loop(pipeline=16, mix=(("get", 0.95), ("update", 0.05))).simulate(100_000)
    assert busy.syncs[SyncBy.TICK] > busy.syncs[SyncBy.IDLE]
    assert np.mean(busy.waits[ReplyWait.DURABLE]) > 2 * np.mean(light.waits[ReplyWait.DURABLE])


def test_a_pipelined_reply_waits_for_the_next_poll_of_the_sockets() -> None:
    """A batch of several replies and nothing to sync is written after its worker next polls its
    driver (the reply writer yields): at depth 16 its reply waits for other batches to run; a single
    reply is written at once."""
    deep = loop(pipeline=16, mix=(("get", 1.0),), costs=(("get", (Visit(1e-6, 0.5e-6),)),)).simulate(100_000)
    waits = deep.waits[ReplyWait.PIPELINED]
    assert waits and np.mean(waits) > 16 * 1.5e-6
    assert not deep.waits[ReplyWait.SINGLE]


def test_scans_go_on_a_connection_of_their_own() -> None:
    """YCSB E at depth 16: a turn's inserts and its scans are two batches on two connections. The
    inserts' batch runs in microseconds and is answered at the next sync, the scans' (~0.7 ms) once
    written after a poll: an insert is answered at half the scans' p50 or less. On one connection an
    insert waits for the scans of its batch to run (answered at the tick after them, still before
    the scans of batches without an insert, which wait for a poll): nearer the scans' p50."""
    mix = (("range", 0.95), ("insert", 0.05))
    costs = (("range", (Visit(40e-6, 5e-6),)), ("insert", (Visit(4e-6, 1e-6),)))
    apart = loop(pipeline=16, mix=mix, costs=costs).simulate(50_000)
    assert apart.quantile(0.5, "insert") < 0.55 * apart.quantile(0.5, "range")
    together = loop(pipeline=16, mix=mix, costs=costs, scans_apart=False).simulate(50_000)
    assert together.quantile(0.5, "insert") > 0.7 * together.quantile(0.5, "range")


def test_an_rmw_is_two_visits_each_at_its_own_cost() -> None:
    """An rmw's write goes once its read is answered, in a batch of its own that waits for a sync:
    at least two round trips, longer than a get of the same loop; each visit costs its own seconds
    (a dear write makes the rmw slower, the gets beside it hardly)."""
    mix = (("get", 0.5), ("rmw", 0.5))

    def costs(write_s: float) -> tuple[tuple[str, tuple[Visit, ...]], ...]:
        return (("get", (Visit(4e-6, 1e-6),)), ("rmw", (Visit(4e-6, 1e-6), Visit(write_s, 1e-6))))

    cheap = loop(mix=mix, costs=costs(2e-6)).simulate(50_000)
    assert min(cheap.latencies["rmw"]) >= 2 * 14e-6
    assert cheap.quantile(0.5, "rmw") > 1.5 * cheap.quantile(0.5, "get")
    dear = loop(mix=mix, costs=costs(20e-6)).simulate(50_000)
    assert dear.throughput < 0.8 * cheap.throughput
    assert dear.quantile(0.5, "rmw") > 1.2 * cheap.quantile(0.5, "rmw")
