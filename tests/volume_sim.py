"""A discrete-event simulation of client threads on a provisioned volume, written independently
of the cost model (it uses none of cost_models).

The volume is the engine's device mode (cosine-core ``Device``): a generic cell-rate algorithm
(GCRA) token bucket at ``iops`` I/Os and ``bytes_per_s`` bytes per second with a burst tolerance
of ``burst_ios`` I/Os, which every I/O pays, and a ``latency`` every foreground read waits after
its token. Each of ``threads`` clients loops over operations: ``cpu`` seconds on its own core,
then ``reads`` dependent block reads one after another (the index block before the data block:
each waits its token, then the latency). Each operation also leaves ``writes`` block writes
(flushes, merges, WAL pages) to one background writer, which pays the bucket but no latency
(write-back); a client that finds more than ``STALL_IOS`` writes queued waits for the writer
(the engine's write stall). tests/test_device_model.py compares the model's closed form with it.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

#: Queued background writes beyond which a client waits (the engine stalls writers when its
#: background thread falls behind).
STALL_IOS = 64.0


@dataclass(frozen=True)
class Volume:
    iops: float
    bytes_per_s: float
    latency: float
    burst_ios: float


@dataclass(frozen=True)
class Clients:
    threads: int
    cpu: float
    reads: int
    writes: float
    block_bytes: float


class Bucket:
    """GCRA: a request of n I/Os and b bytes costs max(n / iops, b / bytes_per_s) seconds of the
    bucket; it may start at max(now, tat) - tau and moves tat on by its cost."""

    def __init__(self, v: Volume) -> None:
        self.v = v
        self.tat = 0.0
        self.tau = v.burst_ios / v.iops

    def reserve(self, now: float, n: float, nbytes: float) -> float:
        """The time the request may start."""
        start = max(self.tat, now)
        self.tat = start + max(n / self.v.iops, nbytes / self.v.bytes_per_s)
        return max(start - self.tau, now)


def simulate(v: Volume, c: Clients, ops: int = 20000) -> float:
    """Operations per second the clients complete (after a 10% warm-up)."""
    bucket = Bucket(v)
    # events: (time, seq, actor, reads left in its operation); actor -1 is the background writer
    events: list[tuple[float, int, int, int]] = []
    seq = 0

    def at(t: float, actor: int, left: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, actor, left))

    for i in range(c.threads):
        at(i * 1e-9, i, -1)  # -1: about to start an operation (its CPU)
    backlog = 0.0  # write I/Os queued for the background writer
    writer_busy = False
    stalled: list[int] = []
    done = 0
    t_start = t_end = 0.0
    while done < ops:
        now, _, actor, left = heapq.heappop(events)
        if actor < 0:  # the background writer finished its write; take the next one
            backlog -= 1.0
            writer_busy = False
            while stalled and backlog <= STALL_IOS:
                at(now, stalled.pop(), -1)
        elif left < 0:  # start an operation: its CPU, then its first read
            at(now + c.cpu, actor, c.reads)
        elif left > 0:  # a read: token, then latency
            start = bucket.reserve(now, 1.0, c.block_bytes)
            at(start + v.latency, actor, left - 1)
        else:  # the operation is complete
            done += 1
            if done == ops // 10:
                t_start = now
            t_end = now
            backlog += c.writes
            if backlog > STALL_IOS:
                stalled.append(actor)
            else:
                at(now, actor, -1)
        if not writer_busy and backlog >= 1.0:
            writer_busy = True
            start = bucket.reserve(now, 1.0, c.block_bytes)
            at(start, -1, 0)
    return (ops - ops // 10) / (t_end - t_start) if t_end > t_start else math.inf
