"""When a served write is answered: two mechanisms simulated against the served Fig. 4B's depth-1
rows (issue 48.4; journal §41.5). Prints figures; not a test; nothing imports it.

cosine-server answers a batch's writes after a sync that its durability waiter makes when the
runtime's worker is about to park, or at its own tick (docs/deploy.md). Which moments those are
decides how much longer an update waits than a get in a closed loop at saturation; the model
(measure/served.py) gives both classes the same sojourn and a write only the sync itself. This
script simulates one core serving C connections, each with one request outstanding (exponential
service of the row's measured server CPU a request, the row's probed round trip and sync time,
the mix's write share, a 1 ms tick), under two mechanisms:

* ``idle``: the worker parks only when no request is left anywhere (the server's queue empty);
* ``pass``: the worker takes every request that has arrived (one poll of its sockets), serves
  them, and parks at the end of that pass (tokio parks when its run queue is empty, before it
  polls the sockets again, as redis' ``beforeSleep`` runs once per event-loop pass); requests
  that arrive meanwhile wait for the next pass;

and prints each mechanism's get and write p50 beside the row's measured ones (medians of the
repeats; rows whose server was less than 90 % busy are skipped: D's node waits on its volume).

    .venv/bin/python -m bench.write_wait --runs /work/runs/s69/fig4.json [--requests 300000]
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The durability waiter's own tick (the rendered group_commit_interval_us, 1 ms).
TICK_S = 1e-3
#: Replies before the loop is measured (it starts with every connection's first request at once).
WARMUP = 50_000
#: Rows simulated: those whose server was at least this busy (one core serving, as simulated).
BUSY = 0.9


@dataclass(frozen=True)
class Loop:
    """One closed loop: ``clients`` connections, exponential service of mean ``service_s`` on one
    core, ``rtt_s`` round trip, ``write_share`` of the requests writes, ``sync_s`` a sync."""

    clients: int
    service_s: float
    rtt_s: float
    write_share: float
    sync_s: float


def simulate(loop: Loop, passes: bool, requests: int, seed: int = 1) -> tuple[float, float, float]:
    """(throughput, get p50, write p50) of ``loop`` when the worker parks at the end of each pass
    (``passes``) or only when no request is left, simulated for ``requests`` replies."""
    rng = random.Random(seed)
    events: list[tuple[float, int, str, tuple[int, bool, float]]] = []
    seq = 0

    def push(at: float, kind: str, data: tuple[int, bool, float]) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (at, seq, kind, data))

    def draw() -> bool:
        return rng.random() < loop.write_share

    for c in range(loop.clients):
        push(rng.random() * loop.rtt_s, "arrive", (c, draw(), 0.0))
    push(TICK_S, "tick", (0, False, 0.0))
    queue: deque[tuple[int, bool, float]] = deque()  # arrived, not yet taken by a pass
    current: deque[tuple[int, bool, float]] = deque()  # taken by the pass under way
    waiting: list[tuple[int, float]] = []  # writes served, waiting for a sync
    serving: tuple[int, bool, float] | None = None
    lat: dict[bool, list[float]] = {False: [], True: []}
    done, t0, now = 0, 0.0, 0.0

    def sync(at: float) -> None:
        for c, sent in waiting:
            push(at + loop.sync_s + loop.rtt_s / 2, "reply", (c, True, sent))
        waiting.clear()

    def start(at: float) -> None:
        nonlocal serving
        if serving is not None:
            return
        if passes:
            if not current:
                if waiting:  # the pass ended: the worker parks, the waiter syncs
                    sync(at)
                current.extend(queue)
                queue.clear()
            source = current
        else:
            source = queue
        if source:
            serving = source.popleft()
            push(at + rng.expovariate(1.0 / loop.service_s), "done", serving)
        elif not passes and waiting:  # nothing left anywhere: the worker parks
            sync(at)

    while done < requests:
        now, _, kind, data = heapq.heappop(events)
        if kind == "arrive":
            queue.append((data[0], data[1], now))
            start(now)
        elif kind == "done":
            c, write, sent = data
            serving = None
            if write:
                waiting.append((c, sent))
            else:
                push(now + loop.rtt_s / 2, "reply", (c, False, sent))
            start(now)
        elif kind == "tick":
            if waiting:
                sync(now)
            push(now + TICK_S, "tick", data)
        else:  # a reply reaches its client, which sends its next request
            c, write, sent = data
            done += 1
            if done == WARMUP:
                t0 = now
            if done > WARMUP:
                lat[write].append(now - sent + loop.rtt_s / 2)
            push(now + loop.rtt_s / 2, "arrive", (c, draw(), 0.0))
    x = (done - WARMUP) / max(now - t0, 1e-300)
    p50 = [statistics.median(lat[w]) if lat[w] else float("nan") for w in (False, True)]
    return x, p50[0], p50[1]


def _p50(row: dict[str, Any], op: str) -> float:
    """The measured p50 of ``op`` in a row of bench.served_fig4b, in microseconds."""
    return float(row["measured"]["per_op"][op]["latency_us"]["p50"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True, help="a JSON file of bench.served_fig4b --json")
    ap.add_argument("--requests", type=int, default=300_000)
    args = ap.parse_args()
    rows = [r for r in json.loads(args.runs.read_text()) if r["nodes"] == 1 and r["pipeline"] == 1]
    print("| YCSB | write share | server busy | get p50: measured / idle / pass (us) | write p50: the same |")
    print("| --- | ---: | ---: | --- | --- |")
    for x in sorted({r["workload"] for r in rows}):
        runs = [r for r in rows if r["workload"] == x]
        ops = runs[0]["measured"]["per_op"]
        writes = [op for op in ops if op in ("update", "insert")]
        busy = statistics.median(r["measured"]["server"]["busy_share"] for r in runs)
        # one core serving: the rows whose server is busy (a device-bound node, D, waits on its volume)
        if "get" not in ops or not writes or busy < BUSY:
            continue
        counts = {op: v["count"] for op, v in ops.items()}
        share = sum(counts[op] for op in writes) / sum(counts.values())

        def median(f: Callable[[dict[str, Any]], float], runs: list[dict[str, Any]] = runs) -> float:
            return statistics.median(f(r) for r in runs)

        loop = Loop(
            int(runs[0]["measured"]["connections"]),
            median(lambda r: r["measured"]["server"]["cpu_us_per_op"]) * 1e-6,
            median(lambda r: r["predicted"]["rtt_us"]) * 1e-6,
            share,
            median(lambda r: r["predicted"]["sync_us"]) * 1e-6,
        )
        idle = simulate(loop, False, args.requests)
        per_pass = simulate(loop, True, args.requests)
        get = median(lambda r: _p50(r, "get"))
        wrote = statistics.median(statistics.median(_p50(r, o) for o in writes) for r in runs)
        gets = f"{get:,.0f} / {idle[1] * 1e6:,.0f} / {per_pass[1] * 1e6:,.0f}"
        puts = f"{wrote:,.0f} / {idle[2] * 1e6:,.0f} / {per_pass[2] * 1e6:,.0f}"
        print(f"| {x.upper()} | {share:.2f} | {busy:.0%} | {gets} | {puts} |")


if __name__ == "__main__":
    main()
