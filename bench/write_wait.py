"""When a served write is answered: two mechanisms simulated against the served Fig. 4B's depth-1
rows (issue 48.4; journal §41.5). Prints figures; not a test; nothing imports it.

cosine-server answers a batch's writes after a sync that its durability waiter makes when the
runtime's worker is about to park, or at its own tick (docs/deploy.md). Which moments those are
decides how much longer an update waits than a get in a closed loop at saturation (until stop 69
the model, measure/served.py, gave both classes the same sojourn and a write only the sync). This
script simulates one core serving C connections, each with one request outstanding (exponential
service of the row's measured server CPU a request, the row's probed round trip and sync time,
the mix's write share, a 1 ms tick; cost_models.latency.PassLoop, the served prediction's loop),
under two commit points:

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
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cost_models.latency import PassLoop
from specs.vocab import CommitPoint

#: The durability waiter's own tick (the rendered group_commit_interval_us, 1 ms).
TICK_S = 1e-3
#: Rows simulated: those whose server was at least this busy (one core serving, as simulated).
BUSY = 0.9


def _p50(row: dict[str, Any], op: str) -> float:
    """The measured p50 of ``op`` in a row of bench.served_fig4b, in microseconds."""
    return float(row["measured"]["per_op"][op]["latency_us"]["p50"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True, help="a JSON file of bench.served_fig4b --json")
    ap.add_argument("--requests", type=int, default=300_000)
    args = ap.parse_args()
    try:
        doc = json.loads(args.runs.read_text())
        rows = [r for r in doc if r["nodes"] == 1 and r["pipeline"] == 1]
    except (OSError, ValueError, TypeError, KeyError) as e:
        ap.error(f"--runs {args.runs}: not a JSON file of bench.served_fig4b --json ({type(e).__name__}: {e})")
    if args.requests < 1_000:
        ap.error(f"--requests {args.requests}: at least 1,000")
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

        mix = (("get", 1.0 - share), (writes[0], share))
        sims = {
            point: PassLoop(
                1,
                median(lambda r: r["measured"]["server"]["cpu_us_per_op"]) * 1e-6,
                int(runs[0]["measured"]["connections"]),
                1,
                median(lambda r: r["predicted"]["rtt_us"]) * 1e-6,
                median(lambda r: r["predicted"]["sync_us"]) * 1e-6,
                TICK_S,
                mix,
                commit=point,
            ).simulate(args.requests)
            for point in (CommitPoint.IDLE, CommitPoint.PASS)
        }
        get = median(lambda r: _p50(r, "get"))
        wrote = statistics.median(statistics.median(_p50(r, o) for o in writes) for r in runs)
        sim = {p: (v.quantile(0.5, "get") * 1e6, v.quantile(0.5, writes[0]) * 1e6) for p, v in sims.items()}
        gets = f"{get:,.0f} / {sim[CommitPoint.IDLE][0]:,.0f} / {sim[CommitPoint.PASS][0]:,.0f}"
        puts = f"{wrote:,.0f} / {sim[CommitPoint.IDLE][1]:,.0f} / {sim[CommitPoint.PASS][1]:,.0f}"
        print(f"| {x.upper()} | {share:.2f} | {busy:.0%} | {gets} | {puts} |")


if __name__ == "__main__":
    main()
