"""A discrete-event simulation of an engine node, written independently of the cost model.

n client threads each loop over operations: CPU that may run on any core
(``parallel`` seconds), a device wait that holds no core (``wait``), then a
critical section that holds one lock and a core (``serial``); each operation
leaves ``background`` seconds of work to one background thread, which needs a
core too. Cores are handed out first come, first served; a busy background
thread with more than ``stall_ops`` operations of work pending makes writers
wait (the engine's write stall). Service times are deterministic or
exponential. It uses none of cost_models; tests/test_cpu_model.py compares the
model's closed form with it.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    serial: float
    parallel: float
    wait: float
    background: float
    threads: int
    cores: int


def simulate(node: Node, ops: int = 20000, exponential: bool = False, seed: int = 1, stall_ops: int = 50) -> float:
    """Operations per second the simulated node completes (after a 10% warm-up)."""
    rng = random.Random(seed)

    def draw(mean: float) -> float:
        if mean <= 0:
            return 0.0
        return rng.expovariate(1.0 / mean) if exponential else mean

    events: list[tuple[float, int, str, int]] = []  # (time, seq, kind, actor)
    seq = 0

    def at(t: float, kind: str, actor: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, actor))

    free_cores = node.cores
    core_queue: deque[tuple[int, float, str]] = deque()  # (actor, service, then)
    lock_busy = False
    lock_queue: deque[int] = deque()
    stalled: deque[int] = deque()
    backlog = 0.0  # background seconds pending
    bg_running = False
    bg_actor = -1
    done = 0
    t_start = t_end = 0.0
    now = 0.0

    def want_core(actor: int, service: float, then: str) -> None:
        nonlocal free_cores
        if free_cores > 0:
            free_cores -= 1
            at(now + service, then, actor)
        else:
            core_queue.append((actor, service, then))

    def release_core() -> None:
        nonlocal free_cores
        if core_queue:
            actor, service, then = core_queue.popleft()
            at(now + service, then, actor)
        else:
            free_cores += 1

    def start_background() -> None:
        nonlocal bg_running, backlog
        if bg_running or backlog <= 0:
            return
        bg_running = True
        chunk = min(backlog, max(node.background, 1e-12))
        backlog -= chunk
        want_core(bg_actor, chunk, "bg_done")

    for i in range(node.threads):
        want_core(i, draw(node.parallel), "parallel_done")
    while events and done < ops:
        now, _, kind, actor = heapq.heappop(events)
        if kind == "parallel_done":
            release_core()
            at(now + draw(node.wait), "wait_done", actor)
        elif kind == "wait_done":
            if node.background > 0 and backlog > stall_ops * node.background:
                stalled.append(actor)
            elif lock_busy:
                lock_queue.append(actor)
            else:
                lock_busy = True
                want_core(actor, draw(node.serial), "serial_done")
        elif kind == "serial_done":
            release_core()
            backlog += draw(node.background)
            start_background()
            if lock_queue:
                nxt = lock_queue.popleft()
                want_core(nxt, draw(node.serial), "serial_done")
            else:
                lock_busy = False
            done += 1
            if done == ops // 10:
                t_start = now
            t_end = now
            want_core(actor, draw(node.parallel), "parallel_done")
        elif kind == "bg_done":
            release_core()
            bg_running = False
            start_background()
            while stalled and backlog <= stall_ops * node.background:
                at(now, "wait_done", stalled.popleft())
    return (done - ops // 10) / (t_end - t_start)
