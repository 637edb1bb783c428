"""The served Fig. 4B (issue 48.5; BENCHMARKS.md §20): each YCSB workload's answer served over RESP,
predicted beside measured, at pipeline 1 and 16, on one node and on a cluster behind nutcracker.

For each X of ``--workloads``: the run directory ``RUNS/ycsb_X`` (``cosine solve specs/ycsb_X.yaml
--out RUNS/ycsb_X``), its design rendered (``cosine render``) into ``RUNS/ycsb_X/ws``, then
``measure.served.bench_served`` (what ``cosine bench --served`` runs) at each depth and node count.
Prints one markdown row per run; ``--json FILE`` keeps every report.

``python -m bench.served_fig4b --runs /tmp/served-runs [--workloads abcdef] [--nodes 1,2] [--ops-scale X]
[--repeat N]`` (``--repeat``: each row N times and their median accuracy: the host's slow episodes
moved YCSB E's from 35 % to 76 % between runs at stop 57)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from deploy.twemproxy import config_yaml
from measure.served import bench_served
from specs.schema import load_spec

#: Operations per run: the scans of E are ~50 entries from every shard, so fewer of them.
OPERATIONS = {"e": 20_000}
DEFAULT_OPERATIONS = 100_000


def row(x: str, nodes: int, depth: int, r: dict[str, Any], acc: dict[str, float]) -> str:
    m, p = r["measured"], r["predicted"]
    srv = m.get("server", {})
    parts = []
    for op, v in m["per_op"].items():
        if op in p["per_op"]:
            q, lat = p["per_op"][op], v["latency_us"]
            parts.append(f"{op} {q['p50_us']:,.0f}/{lat['p50']:,.0f} ({q['p99_us']:,.0f}/{lat['p99']:,.0f})")
    cpu = f"{p['server_cpu_us_per_op']:.2f} / {srv.get('cpu_us_per_op', float('nan')):.2f}"
    client = m.get("client", {})
    return (
        f"| {x.upper()} | {nodes} | {depth} | {p['throughput_ops']:,.0f} | {m['run']['throughput_ops']:,.0f} | "
        f"{acc.get('throughput', 0.0):.1%} | {cpu} ({srv.get('busy_share', 0.0):.0%}) | "
        f"{client.get('busy_share', 0.0):.0%} | {'; '.join(parts)} |"
    )


def _counts(ap: argparse.ArgumentParser, flag: str, text: str) -> list[int]:
    """A comma-separated list of positive integers (``--nodes``, ``--depths``), or a usage error."""
    try:
        out = [int(v) for v in text.split(",")]
    except ValueError:
        ap.error(f"{flag} {text!r}: comma-separated positive integers")
    if not out or min(out) < 1:
        ap.error(f"{flag} {text!r}: comma-separated positive integers")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, required=True)
    ap.add_argument("--workloads", default="abcdef")
    ap.add_argument("--nodes", default="1,2")
    ap.add_argument("--depths", default="1,16")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument(
        "--ops-scale",
        type=float,
        default=1.0,
        help="measured operations x this (default 100,000, E 20,000): a run at depth 16 lasts ~0.3 s",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each row (each a fresh server and load), printed each, then their median accuracy",
    )
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if not a.workloads or any(x not in "abcdef" for x in a.workloads):
        ap.error(f"--workloads {a.workloads!r}: letters of abcdef (the YCSB workloads), no separators")
    if not a.runs.is_dir() and a.runs.exists():
        ap.error(f"--runs {a.runs}: not a directory")
    nodes_list = _counts(ap, "--nodes", a.nodes)
    depths = _counts(ap, "--depths", a.depths)
    if not 0 < a.ops_scale <= 100:
        ap.error(f"--ops-scale {a.ops_scale}: must be in (0, 100]")
    if not 1 <= a.repeat <= 20:
        ap.error(f"--repeat {a.repeat}: must be 1 to 20")
    print(
        "| YCSB | nodes | pipeline | predicted ops/s | measured ops/s | accuracy | server CPU us/op pred / meas "
        "(busy) | client cores busy (driver + nutcracker) | p50 us pred/meas (p99 pred/meas) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    out: list[dict[str, Any]] = []
    for x in a.workloads:
        spec_path = Path(f"specs/ycsb_{x}.yaml")
        run = a.runs / f"ycsb_{x}"
        if not (run / "solution.json").is_file():
            subprocess.run([sys.executable, "-m", "cli", "solve", str(spec_path), "--out", str(run)], check=True)
        ws = run / "ws"
        if not (ws / "engine.toml").is_file():
            subprocess.run([sys.executable, "-m", "cli", "render", str(run), "--out", str(ws)], check=True)
        spec = load_spec(spec_path)
        for nodes in nodes_list:
            for depth in depths:
                accs: list[float] = []
                for _ in range(a.repeat):
                    res = bench_served(
                        spec,
                        ws,
                        records=a.records,
                        operations=int(OPERATIONS.get(x, DEFAULT_OPERATIONS) * a.ops_scale),
                        pipeline=depth,
                        nodes=nodes,
                        proxy_config=lambda port, shards: config_yaml(port, shards),
                    )
                    acc = res.accuracy()
                    accs.append(acc.get("throughput", 0.0))
                    print(row(x, nodes, depth, res.as_json(), acc), flush=True)
                    out.append({"workload": x, "nodes": nodes, "pipeline": depth, **res.as_json(), "accuracy": acc})
                if a.repeat > 1:
                    print(
                        f"| {x.upper()} | {nodes} | {depth} | median of {a.repeat} | | {statistics.median(accs):.1%} "
                        f"(min {min(accs):.1%}, max {max(accs):.1%}) | | | |",
                        flush=True,
                    )
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
