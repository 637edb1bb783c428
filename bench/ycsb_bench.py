"""Real clients against the deployed answer: YCSB A-F, redis-benchmark, and a shard
killed under load. Prints the tables recorded in BENCHMARKS.md.

    python -m bench.ycsb_bench [--parts ycsb,redis-benchmark,faults] [--records 100000]
        [--ops 100000] [--threads 8] [--nodes 2] [--workloads abcdef] [--out runs/ycsb-bench]

* **ycsb**: builds bench/ycsb with ``mvn -q package``, then for each workload X solves
  specs/ycsb_X.yaml (once; reused) and runs YCSB's own workload file X (load, then run)
  against (1) the cluster ``cosine deploy`` starts (N nodes of the recommended design,
  memory scaled to the records loaded), through twemproxy, scans scatter-gathered over
  the shards; (2) one cosine-server with the same design; (3) redis-server with AOF
  ``everysec`` and (4) with persistence off (scans through a sorted-set index, as YCSB's
  Redis binding does). The model's column is the solution's predicted throughput for as
  many of its cloud nodes as run here (per-node prediction x nodes).
* **redis-benchmark**: GET and SET, pipeline 1 and 16, 50 connections, 100-byte values,
  against one cosine-server (ycsb_a's design) and redis-server (AOF everysec, and off).
* **engine**: the one-node design driven in-process by cosine-bench with the spec's mix
  (no network, no protocol): what the engine itself sustains here, beside the model.
* **faults**: a 3-node ycsb_a cluster under a YCSB workload-A run; node-1 is SIGKILLed,
  restarted, and a writer beside YCSB accounts for every acknowledged write
  (deploy/faults.py): errors per shard, writes shadowed by the ejection, writes lost.

Everything runs on loopback; data goes under --out (removed after each run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cost_models import REPO_ROOT
from deploy import cluster, twemproxy
from deploy.faults import AckLedger, audit, owners, random_keys
from deploy.plan import data_scale, plan_cluster
from deploy.twemproxy import SERVER_RETRY_TIMEOUT_MS
from measure.resp import Connection, ping
from solver.rundir import SOLUTION, read_solution

YCSB_DIR = REPO_ROOT / "bench" / "ycsb"
JAR = YCSB_DIR / "target" / "cosine-ycsb-0.1.0.jar"
BINDING = "site.ycsb.db.cosine.CosineClient"
COSINE = [sys.executable, "-m", "cli"]
#: YCSB's operation names, in report order.
YCSB_OPS = ("READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE")
REDIS_MODES = {
    "redis-aof": ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""],
    "redis-none": ["--appendonly", "no", "--save", ""],
}


def sh(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed ({res.returncode}): {(res.stderr or res.stdout)[-800:]}")
    return res


def build_binding() -> None:
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise SystemExit("bench/ycsb needs maven and a JDK (apt-get install maven default-jdk-headless)")
    sh(["mvn", "-q", "-B", "package"], cwd=YCSB_DIR)


def solve(workload: str, out: Path) -> Path:
    run = out / "solve" / f"ycsb_{workload}"
    if not (run / "solution.json").is_file():
        sh([*COSINE, "solve", str(REPO_ROOT / "specs" / f"ycsb_{workload}.yaml"), "--out", str(run), "--json"])
    return run


def deploy(run: Path, out: Path, nodes: int, records: int) -> cluster.DeployState:
    sol = read_solution(run / SOLUTION)
    scale = min(1.0, data_scale(sol.designs, records, nodes))
    if out.exists():
        shutil.rmtree(out)
    # today's deployment: one server per shard behind nutcracker, whatever the answer's replication factor
    cmd = [*COSINE, "deploy", str(run), "--local", "--nodes", str(nodes), "--scale", f"{scale:.6g}", "--replicas", "1"]
    sh([*cmd, "--out", str(out)])
    return cluster.read_state(out)


def undeploy(st: cluster.DeployState) -> None:
    sh([*COSINE, "deploy", st.run_dir, "--down", "--out", st.deploy_dir])
    shutil.rmtree(st.deploy_dir, ignore_errors=True)


class Redis:
    """redis-server on a free loopback port, data in ``dir``."""

    def __init__(self, mode: str, dir: Path) -> None:
        if shutil.which("redis-server") is None:
            raise SystemExit("redis-server is not installed: apt-get install redis-server (`make setup` as root)")
        shutil.rmtree(dir, ignore_errors=True)
        dir.mkdir(parents=True)
        self.dir, self.port = dir, cluster.free_port()
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(dir)]
        self.proc = subprocess.Popen([*cmd, *REDIS_MODES[mode]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not ping("127.0.0.1", self.port):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"redis-server ({mode}) did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


def ycsb(phase: str, workload: str, props: dict[str, str], threads: int, timeout: float = 1800) -> dict[str, Any]:
    """One YCSB phase (``load`` or ``run``); its summary parsed."""
    cp = f"{JAR}:{YCSB_DIR / 'target' / 'lib'}/*"
    cmd = ["java", "-cp", cp, "site.ycsb.Client", "-load" if phase == "load" else "-t", "-db", BINDING]
    cmd += ["-P", str(YCSB_DIR / "workloads" / f"workload{workload}"), "-threads", str(threads)]
    cmd += ["-p", "hdrhistogram.percentiles=50,99"]
    for k, v in props.items():
        cmd += ["-p", f"{k}={v}"]
    res = sh(cmd, timeout=timeout)
    return parse_ycsb(res.stdout)


def parse_ycsb(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"ops": {}}
    for line in text.splitlines():
        m = re.match(r"\[([A-Z-]+)\], ([^,]+), (.+)$", line.strip())
        if not m:
            continue
        sec, name, val = m.groups()
        if sec == "OVERALL" and name.startswith("Throughput"):
            out["throughput"] = float(val)
        elif sec in YCSB_OPS:
            op = out["ops"].setdefault(sec, {"ok": 0, "errors": 0, "not_found": 0})
            if name == "Operations":
                op["count"] = int(val)
            elif name.startswith("50thPercentile"):
                op["p50_us"] = float(val)
            elif name.startswith("99thPercentile"):
                op["p99_us"] = float(val)
            elif name == "Return=OK":
                op["ok"] = int(val)
            elif name == "Return=ERROR":
                op["errors"] = int(val)
            elif name == "Return=NOT_FOUND":
                op["not_found"] = int(val)
    return out


def cosine_props(st: cluster.DeployState, through_proxy: bool) -> dict[str, str]:
    shards = ",".join(f"127.0.0.1:{p}" for p in st.shard_ports())
    host = f"127.0.0.1:{st.proxy_port}" if through_proxy else f"127.0.0.1:{st.nodes[0].port}"
    return {"cosine.host": host, "cosine.shards": shards, "cosine.scan": "range"}


def part_ycsb(a: argparse.Namespace) -> list[dict[str, Any]]:
    build_binding()
    rows = []
    sizes = {"recordcount": str(a.records), "operationcount": str(a.ops)}
    for w in a.workloads:
        run = solve(w, a.out)
        for target in ("cluster", "single", "redis-aof", "redis-none"):
            print(f"ycsb {w} on {target}", file=sys.stderr, flush=True)
            predicted: float | None = None
            if target in ("cluster", "single"):
                n = a.nodes if target == "cluster" else 1
                st = deploy(run, a.out / "data" / target, n, a.records)
                props = {**sizes, **cosine_props(st, through_proxy=target == "cluster")}
                predicted = st.predicted_scaled_ops
                try:
                    ycsb("load", w, props, a.threads)
                    res = ycsb("run", w, props, a.threads)
                finally:
                    undeploy(st)
            else:
                r = Redis(target, a.out / "data" / target)
                props = {**sizes, "cosine.host": f"127.0.0.1:{r.port}", "cosine.scan": "zset"}
                try:
                    ycsb("load", w, props, a.threads)
                    res = ycsb("run", w, props, a.threads)
                finally:
                    r.stop()
            rows.append({"workload": w.upper(), "target": target, "predicted_ops": predicted, **res})
    return rows


def part_engine(a: argparse.Namespace) -> list[dict[str, Any]]:
    """The same one-node design driven in-process by cosine-bench (no network): the engine's own rate."""
    from measure.engine import TEMPLATE, workload_json
    from measure.engine import run as run_engine
    from specs.schema import load_spec

    rows = []
    for w in a.workloads:
        run = solve(w, a.out)
        sol = read_solution(run / SOLUTION)
        plan = plan_cluster(run, nodes=1, scale=min(1.0, data_scale(sol.designs, a.records, 1)))
        wl = workload_json(load_spec(REPO_ROOT / "specs" / f"ycsb_{w}.yaml"), a.records, a.ops, a.threads)
        db = a.out / "data" / f"engine-{w}"
        shutil.rmtree(db, ignore_errors=True)
        try:
            rep = run_engine(TEMPLATE, plan.nodes[0].engine_toml, wl, data_dir=db)
        finally:
            shutil.rmtree(db, ignore_errors=True)
        lat = rep["run"]["latency_us"]
        rows.append(
            {
                "workload": w.upper(),
                "throughput": rep["run"]["throughput_ops"],
                "p50_us": lat["p50"],
                "p99_us": lat["p99"],
                "predicted_node_ops": plan.predicted_node_ops,
            }
        )
    return rows


def redis_benchmark(port: int, pipeline: int, n: int) -> dict[str, dict[str, float]]:
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set,get", "-n", str(n), "-c", "50"]
    cmd += ["-P", str(pipeline), "-d", "100", "-r", "100000", "--csv"]
    res = sh(cmd, timeout=900)
    out = {}
    for line in res.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] in ("SET", "GET"):
            out[cells[0]] = {"rps": float(cells[1]), "p50_ms": float(cells[4]), "p99_ms": float(cells[6])}
    return out


def part_redis_benchmark(a: argparse.Namespace) -> list[dict[str, Any]]:
    if shutil.which("redis-benchmark") is None:
        raise SystemExit("redis-benchmark is not installed: apt-get install redis-tools (`make setup` as root)")
    rows = []
    run = solve("a", a.out)
    st = deploy(run, a.out / "data" / "rb-cosine", 1, a.records)
    try:
        for p in (1, 16):
            rows.append(
                {
                    "server": f"cosine-server ({st.wal_sync})",
                    "pipeline": p,
                    **redis_benchmark(st.nodes[0].port, p, a.bench_requests),
                }
            )
    finally:
        undeploy(st)
    for mode in REDIS_MODES:
        r = Redis(mode, a.out / "data" / f"rb-{mode}")
        try:
            for p in (1, 16):
                rows.append({"server": mode, "pipeline": p, **redis_benchmark(r.port, p, a.bench_requests)})
        finally:
            r.stop()
    return rows


def part_faults(a: argparse.Namespace) -> dict[str, Any]:
    """YCSB workload A on a 3-node ycsb_a cluster; node-1 SIGKILLed and restarted mid-run."""
    build_binding()
    run = solve("a", a.out)
    st = deploy(run, a.out / "data" / "faults", 3, a.records)
    try:
        props = {"recordcount": str(a.records), "operationcount": str(10**9), **cosine_props(st, True)}
        ycsb("load", "a", props, a.threads)
        keys = [b"fault:%06d" % i for i in range(5000)]
        with Connection("127.0.0.1", st.proxy_port) as c:
            assert c.pipeline([("SET", k, b"init") for k in keys]) == ["OK"] * len(keys)
        owner = owners(st.shard_ports(), keys)
        ledger = AckLedger(st.proxy_port)
        ledger.acked = dict.fromkeys(keys, b"init")
        result: dict[str, Any] = {}
        run_s = 30
        t = threading.Thread(
            target=lambda: result.update(ycsb("run", "a", {**props, "maxexecutiontime": str(run_s)}, a.threads))
        )
        t.start()
        pick = random_keys(keys, 7)
        ledger.run(6, pick)
        before = ledger.ops
        cluster.kill_node(st, 1)
        ledger.run(8, pick)
        cluster.start_node(st, 1)
        ledger.run(SERVER_RETRY_TIMEOUT_MS / 1000 + 4, pick)
        t.join()
        au = audit(ledger, st.shard_ports(), owner, killed=1)
        assert st.proxy is not None
        pool = twemproxy.stats(st.proxy.stats_port)[twemproxy.POOL]
        proxy = {"server_ejects": pool["server_ejects"], "client_err": pool["client_err"]}
        proxy |= {f"{n}_server_err": pool[n]["server_err"] for n in ("node-0", "node-1", "node-2")}
    finally:
        undeploy(st)
    return {
        "ycsb": result,
        "writer_ops": ledger.ops,
        "writer_ops_before_kill": before,
        "writer_errors": au.errors,
        "errors_on_other_shards": len(au.errors_on_other_shards),
        "keys_of_killed_shard": sum(1 for k in keys if owner[k] == 1),
        "acked_keys": len(ledger.acked),
        "on_owner": au.on_owner,
        "shadowed": len(au.shadowed),
        "lost": len(au.lost),
        "proxy": proxy,
    }


def fmt_op(op: dict[str, Any]) -> str:
    if "p50_us" not in op:
        return ""
    err = f", {op['errors']} err" if op.get("errors") else ""
    return f"{op['p50_us'] / 1000:.2f} / {op['p99_us'] / 1000:.2f}{err}"


def print_tables(
    ycsb_rows: list[dict[str, Any]],
    rb_rows: list[dict[str, Any]],
    faults: dict[str, Any] | None,
    engine_rows: list[dict[str, Any]],
) -> None:
    if engine_rows:
        print("\n| workload | engine in-process (ops/s) | p50 / p99 (us) | model, one node (ops/s) |")
        print("|---|---|---|---|")
        for r in engine_rows:
            print(
                f"| {r['workload']} | {r['throughput']:,.0f} | {r['p50_us']:.1f} / {r['p99_us']:.1f} | "
                f"{r['predicted_node_ops']:,.0f} |"
            )
    if ycsb_rows:
        print(
            "| workload | target | throughput (ops/s) | model (ops/s) | "
            + " | ".join(f"{o.lower()} p50 / p99 (ms)" for o in YCSB_OPS)
            + " |"
        )
        print("|" + "---|" * (4 + len(YCSB_OPS)))
        for r in ycsb_rows:
            pred = f"{r['predicted_ops']:,.0f}" if r["predicted_ops"] else "-"
            ops = " | ".join(fmt_op(r["ops"].get(o, {})) for o in YCSB_OPS)
            print(f"| {r['workload']} | {r['target']} | {r.get('throughput', 0):,.0f} | {pred} | {ops} |")
    if rb_rows:
        print("\n| server | pipeline | SET ops/s | SET p50 / p99 (ms) | GET ops/s | GET p50 / p99 (ms) |")
        print("|---|---|---|---|---|---|")
        for r in rb_rows:
            s, g = r["SET"], r["GET"]
            print(
                f"| {r['server']} | {r['pipeline']} | {s['rps']:,.0f} | {s['p50_ms']:.3f} / {s['p99_ms']:.3f} | "
                f"{g['rps']:,.0f} | {g['p50_ms']:.3f} / {g['p99_ms']:.3f} |"
            )
    if faults:
        y = faults["ycsb"]
        yerr = {o: v.get("errors", 0) for o, v in y.get("ops", {}).items()}
        yok = {o: v.get("ok", 0) for o, v in y.get("ops", {}).items()}
        print("\nfaults: " + json.dumps({k: v for k, v in faults.items() if k != "ycsb"}))
        print(f"faults: YCSB workload A during the kill: ok {yok}, errors {yerr}, {y.get('throughput', 0):,.0f} ops/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="ycsb,engine,redis-benchmark,faults")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--workloads", default="abcdef")
    ap.add_argument("--bench-requests", type=int, default=200_000)
    ap.add_argument("--out", type=Path, default=Path("runs/ycsb-bench"))
    a = ap.parse_args()
    a.workloads = list(a.workloads)
    parts = set(a.parts.split(","))
    a.out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT)
    print(
        f"commit {commit.stdout.strip()}, {os.cpu_count()} CPUs; records {a.records:,}, ops {a.ops:,}, "
        f"YCSB threads {a.threads}, cluster nodes {a.nodes}"
    )
    ycsb_rows = part_ycsb(a) if "ycsb" in parts else []
    rb_rows = part_redis_benchmark(a) if "redis-benchmark" in parts else []
    faults = part_faults(a) if "faults" in parts else None
    engine_rows = part_engine(a) if "engine" in parts else []
    results = {"ycsb": ycsb_rows, "engine": engine_rows, "redis_benchmark": rb_rows, "faults": faults}
    (a.out / f"results-{'-'.join(sorted(parts))}.json").write_text(json.dumps(results, indent=2))
    print_tables(ycsb_rows, rb_rows, faults, engine_rows)


if __name__ == "__main__":
    main()
