"""How the served replies waited: the runtime's schedule simulated beside cosine-server's own
counters (issue 48.4; journal §42). Prints figures; not a test; nothing imports it.

cosine-server counts, per batch, the time from the end of its execution to the end of its reply's
write, by how the reply waited (``INFO server``'s ``reply_wait_durable``: a batch that wrote waits
for a sync; ``_pipelined``: several replies, the writer yields once; ``_single``), and the syncs
that answered writes, by who made them (``durable_syncs_idle``: a worker about to park;
``_tick``: the waiter's thread). `cosine bench --served --json` reads them around the measured
phase (``measured.replies``) and reports what the served latency model's simulation of the same
loop gives (``predicted.replies``; cost_models.latency.RuntimeLoop). This script prints both for
every row of a bench.served_fig4b --json file, with the p50s.

With ``--runs DIR`` (the bench's runs: DIR/ycsb_<x>/ws), each row is predicted again with the
requests' seconds scaled to the server CPU the row measured: the runtime's schedule judged apart
from the CPU model's error (rows whose server was less than 90 % busy are skipped then: D's node
waits on its volume, its CPU says nothing of its service time).

    .venv/bin/python -m bench.reply_wait --json /work/runs/s70/fig4.json [--runs /work/runs/s70/fig4]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from measure.served import WARMUP_SHARE, predict, served_config, workload_json
from specs.errors import InputError
from specs.schema import load_spec
from specs.vocab import ReplyWait, SyncBy

#: Rows re-predicted at the measured CPU: those whose server was at least this busy.
BUSY = 0.9


def replies(r: dict[str, Any]) -> str:
    """``r``'s reply waits (mean us per kind that occurred) and syncs per 1,000 batches."""
    waits = ", ".join(f"{k} {v['mean_us']:,.0f}" for k, v in r["waits"].items() if v["batches"])
    syncs = " / ".join(f"{r['syncs_per_1000_batches'][k.value]:.1f}" for k in SyncBy)
    return f"{waits or '-'}; syncs {syncs}"


def p50s(pred: dict[str, Any], meas: dict[str, Any]) -> str:
    """Each operation's p50, predicted / measured (us)."""
    out = []
    for op, m in meas["per_op"].items():
        if op in pred["per_op"]:
            out.append(f"{op} {pred['per_op'][op]['p50_us']:,.0f} / {m['latency_us']['p50']:,.0f}")
    return "; ".join(out)


def at_measured_cpu(row: dict[str, Any], runs: Path) -> dict[str, Any] | None:
    """``row`` predicted again with the simulation's requests at the CPU it measured (None: its
    server was not busy enough for its CPU to be its service time)."""
    m, p, cfg = row["measured"], row["predicted"], row["config"]
    if m["server"]["busy_share"] < BUSY or not p["server_cpu_us_per_op"] > 0:
        return None
    x = row["workload"]
    spec = load_spec(Path(f"specs/ycsb_{x}.yaml"))
    ws = runs / f"ycsb_{x}" / "ws"
    nodes, n = int(cfg["nodes"]), int(cfg["records"])
    cores_per_node = len(cfg["server_cores"]) / nodes
    threads = max(1, math.ceil(cores_per_node))
    config = served_config(ws, (ws / "engine.toml").read_text(), n, nodes, threads)
    wl = workload_json(spec, n, int(cfg["operations"]), threads)
    wl["warmup_operations"] = int(int(cfg["operations"]) * WARMUP_SHARE)
    state = m["engine_state"]
    return predict(
        spec,
        config,
        wl,
        nodes,
        cores_per_node,
        int(cfg["pipeline"]),
        int(cfg["clients"]),
        p["rtt_us"] * 1e-6,
        p["sync_us"] * 1e-6,
        state["start"],
        state["end"],
        service_scale=m["server"]["cpu_us_per_op"] / p["server_cpu_us_per_op"],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, required=True, help="a JSON file of bench.served_fig4b --json")
    ap.add_argument("--runs", type=Path, help="the bench's runs directory: predict again at the measured CPU")
    args = ap.parse_args()
    try:
        rows = json.loads(args.json.read_text())
        keep = [r for r in rows if "replies" in r["measured"] and "replies" in r["predicted"]]
    except (OSError, ValueError, TypeError, KeyError) as e:
        ap.error(f"--json {args.json}: not a JSON file of bench.served_fig4b --json ({type(e).__name__}: {e})")
    if not keep:
        ap.error(f"--json {args.json}: no row has reply counters (a server older than INFO's reply_wait_*)")
    if args.runs is not None and not args.runs.is_dir():
        ap.error(f"--runs {args.runs}: not a directory")
    kinds = ", ".join(k.value for k in ReplyWait)
    print(
        f"| YCSB | nodes | depth | reply wait us ({kinds}); syncs per 1,000 batches (idle / tick): "
        "predicted | measured | p50 us predicted / measured |"
        + (" at the measured CPU: replies | p50 |" if args.runs else "")
    )
    print("| --- | ---: | ---: | --- | --- | --- |" + (" --- | --- |" if args.runs else ""))
    for r in keep:
        cfg = r["config"]
        line = (
            f"| {r['workload'].upper()} | {cfg['nodes']} | {cfg['pipeline']} | {replies(r['predicted']['replies'])} | "
            f"{replies(r['measured']['replies'])} | {p50s(r['predicted'], r['measured'])} |"
        )
        if args.runs is not None:
            try:
                again = at_measured_cpu(r, args.runs)
            except (OSError, InputError) as e:
                ap.error(f"--runs {args.runs}: {e}")
            line += (
                f" {replies(again['replies'])} | {p50s(again, r['measured'])} |" if again is not None else " - | - |"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
