"""Replicated shards (issue 51): throughput at RF 1 and 3, and four faults under YCSB A.
Prints the tables recorded in BENCHMARKS.md §19.

    python -m bench.raft_faults [--parts rf,faults] [--records 50000] [--ops 50000]
        [--threads 8] [--nodes 2] [--faults leader-kill,follower-stop,restart-all,disk-full]
        [--out runs/raft-faults]

* **rf**: ycsb_a's answer (``cosine solve specs/ycsb_a.yaml``) deployed on ``--nodes`` shards
  three ways: RF 1 through nutcracker (today's deployment), RF 1 with cluster routing (each
  shard a one-replica Raft group: what consensus itself costs) and RF 3 (three replicas per
  shard). Each runs YCSB A (load, then run; JedisCluster for the cluster-routed ones) and
  redis-benchmark (``-t set,get -c 50 -d 100 -r 100000``, pipeline 1 and 16; ``--cluster``
  for the cluster-routed ones).
* **faults**: RF 3, eventual reads allowed (so every replica can be read on its own for the
  audit; YCSB and the writer read through leaders). For each fault, a fresh YCSB A run of
  ``--fault-run`` seconds with a 1-s status line, beside it deploy/faults.py's writer (pipelines
  of 16 SETs over ``--ledger-keys`` keys, every acknowledgement recorded), a reader of keys
  that exist (a nil answer is a false "not found") and a prober (a SET to each shard every
  20 ms: the longest gap between its acknowledgements is the unavailability window). At
  ``--fault-at`` seconds:

  - **leader-kill**: SIGKILL the leader of shard 0, restart it 10 s later;
  - **follower-stop**: SIGSTOP a follower of shard 0 for 10 s, then SIGCONT;
  - **restart-all**: SIGKILL every replica at once, start them all again;
  - **disk-full**: a follower of shard 0 runs on a small tmpfs (mounted under its directory
    before the run); a filler file takes the free space; its next log append fails and it stops
    (exit 1); 10 s later the filler goes and it is restarted (needs root for mount).

  After each: the replicas catch up, every acknowledged write is read back through the leaders
  (lost = none of its acknowledged-or-later values) and from every replica itself; YCSB's
  ``READ Return=NOT_FOUND`` and the reader's nils are the false "not found" (YCSB A reads only
  loaded records, never deleted). Throughput before / during / after is YCSB's per-second rate
  over the 8 s before the fault, the fault (until it is healed, or for restart-all until every
  shard has a leader again) and from 5 s after the heal to the end.

Only processes this script started are signalled, by the pid in the deployment's state.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.ycsb_bench import BINDING, JAR, YCSB_DIR, build_binding, parse_ycsb, sh, solve
from cost_models import REPO_ROOT
from deploy import cluster, raft
from deploy.faults import AckLedger, Prober, Reader, audit_cluster, audit_replicas, random_keys
from deploy.plan import data_scale
from deploy.rcluster import ClusterClient
from solver.rundir import SOLUTION, read_solution

COSINE = [sys.executable, "-m", "cli"]
FAULTS = ("leader-kill", "follower-stop", "restart-all", "disk-full")
STATUS = re.compile(r"(\d+) sec: (\d+) operations; ([\d.]+) current ops/sec")


def deploy(
    run: Path, out: Path, nodes: int, records: int, replicas: int, routing: str, wal_sync: str, eventual: bool = False
) -> Any:
    sol = read_solution(run / SOLUTION)
    scale = min(1.0, data_scale(sol.designs, records, nodes))
    if out.exists():
        shutil.rmtree(out)
    cmd = [*COSINE, "deploy", str(run), "--local", "--nodes", str(nodes), "--scale", f"{scale:.6g}"]
    cmd += ["--replicas", str(replicas), "--routing", routing, "--out", str(out), "--wal-sync", wal_sync]
    if eventual:
        cmd += ["--consistency", "eventual"]
    sh(cmd)
    return cluster.read_state(out)


def undeploy(st: Any) -> None:
    sh([*COSINE, "deploy", st.run_dir, "--down", "--out", st.deploy_dir])
    shutil.rmtree(st.deploy_dir, ignore_errors=True)


def props_of(st: Any) -> dict[str, str]:
    if st.proxy is not None:
        shards = ",".join(f"127.0.0.1:{p}" for p in st.shard_ports())
        return {"cosine.host": f"127.0.0.1:{st.proxy.port}", "cosine.shards": shards}
    return {"cosine.cluster": "true", "cosine.host": ",".join(f"{h}:{p}" for h, p in st.seeds())}


def ycsb(phase: str, props: dict[str, str], threads: int, status: bool = False, timeout: float = 3600) -> Any:
    """One YCSB phase of workload A; its summary, and with ``status`` its per-second rates."""
    cp = f"{JAR}:{YCSB_DIR / 'target' / 'lib'}/*"
    cmd = ["java", "-cp", cp, "site.ycsb.Client", "-load" if phase == "load" else "-t", "-db", BINDING]
    cmd += ["-P", str(YCSB_DIR / "workloads" / "workloada"), "-threads", str(threads)]
    cmd += ["-p", "hdrhistogram.percentiles=50,99"]
    if status:
        cmd += ["-s", "-p", "status.interval=1"]
    for k, v in props.items():
        cmd += ["-p", f"{k}={v}"]
    res = sh(cmd, timeout=timeout)
    out = parse_ycsb(res.stdout)
    if status:
        out["timeline"] = [(int(m[1]), float(m[3])) for m in STATUS.finditer(res.stderr)]
    return out


def redis_benchmark(st: Any, pipeline: int, n: int) -> dict[str, dict[str, float]]:
    port = st.proxy.port if st.proxy is not None else st.nodes[0].port
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set,get", "-n", str(n), "-c", "50"]
    cmd += ["-P", str(pipeline), "-d", "100", "-r", "100000", "--csv"]
    if st.proxy is None:
        cmd.append("--cluster")
    res = sh(cmd, timeout=900)
    out = {}
    for line in res.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] in ("SET", "GET"):
            out[cells[0]] = {"rps": float(cells[1]), "p50_ms": float(cells[4]), "p99_ms": float(cells[6])}
    return out


def part_rf(a: argparse.Namespace, save: Callable[[dict[str, Any]], None]) -> None:
    build_binding()
    run = solve("a", a.out)
    sizes = {"recordcount": str(a.records), "operationcount": str(a.ops)}
    targets = [
        ("RF 1, nutcracker", 1, "proxy", a.wal_sync),
        ("RF 1, cluster", 1, "cluster", a.wal_sync),
        ("RF 3", 3, "cluster", a.wal_sync),
    ]
    if a.wal_sync != "every_write":
        targets.append(("RF 3, every_write", 3, "cluster", "every_write"))
    for name, replicas, routing, wal in targets:
        print(f"rf: {name}", file=sys.stderr, flush=True)
        st = deploy(run, a.out / "data" / f"rf-{replicas}-{routing}", a.nodes, a.records, replicas, routing, wal)
        try:
            props = {**sizes, **props_of(st)}
            load = ycsb("load", props, a.threads)
            res = ycsb("run", props, a.threads)
            rb = {p: redis_benchmark(st, p, a.bench_requests) for p in (1, 16)}
        finally:
            undeploy(st)
        save(
            {
                "target": name,
                "replicas": replicas,
                "routing": routing,
                "wal_sync": wal,
                "load": load,
                "ycsb": res,
                "redis_benchmark": rb,
            }
        )


def mean_rate(timeline: list[tuple[int, float]], lo: float, hi: float) -> float | None:
    xs = [r for t, r in timeline if lo < t <= hi]
    return statistics.fmean(xs) if xs else None


class Tmpfs:
    """A tmpfs of ``size`` bytes mounted at ``at`` (holding what was there), unmounted by :meth:`close`."""

    def __init__(self, at: Path, size: int) -> None:
        self.at = at
        aside = at.with_name(at.name + ".aside")
        at.rename(aside)
        at.mkdir()
        sh(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(at)])
        sh(["cp", "-a", f"{aside}/.", str(at)])
        shutil.rmtree(aside)

    def fill(self) -> Path:
        """A filler file that takes every free byte."""
        f = self.at / "filler"
        with open(f, "wb") as fh:
            try:
                while True:
                    fh.write(b"\0" * (1 << 20))
                    fh.flush()
            except OSError:
                pass
        return f

    def close(self) -> None:
        """Copies what the tmpfs holds back to the disk under the same path, and unmounts it."""
        aside = self.at.with_name(self.at.name + ".aside")
        aside.mkdir()
        sh(["cp", "-a", f"{self.at}/.", str(aside)])
        sh(["umount", str(self.at)])
        sh(["cp", "-a", f"{aside}/.", str(self.at)])
        shutil.rmtree(aside)


def catch_up(st: Any, timeout: float = 60) -> dict[int, str | None] | None:
    """Waits until every replica has applied what its shard's leader has; None once they have,
    else (after ``timeout``) every replica's applied index."""
    deadline = time.monotonic() + timeout
    while True:
        lead = raft.wait_leaders(st, timeout)
        idx = {i: (raft.replication(n.port) or {}).get("raft_applied_index") for i, n in enumerate(st.nodes)}
        if all(idx[i] == idx[lead[n.shard]] for i, n in enumerate(st.nodes)):
            return None
        if time.monotonic() > deadline:
            return idx
        time.sleep(0.2)


def caught_up(st: Any) -> None:
    """:func:`catch_up`, an error if they do not."""
    idx = catch_up(st)
    if idx is not None:
        raise RuntimeError(f"replicas did not catch up: {idx}")


def one_fault(a: argparse.Namespace, st: Any, fault: str, readable: list[bytes]) -> dict[str, Any]:
    seeds = st.seeds()
    slots = raft.slot_ranges(st.shards)
    leaders = raft.wait_leaders(st)
    members = st.members(0)
    leader = leaders[0]
    follower = next(i for i in members if i != leader)
    mount = None
    if fault == "disk-full":
        # the follower's directory on a tmpfs: twice what it holds now plus 64 MiB (once the filler
        # goes, a snapshot it may need to catch up is a second copy of the engine beside the first)
        cluster.stop_node(st, follower)
        used = int(sh(["du", "-sb", st.nodes[follower].dir]).stdout.split()[0])
        mount = Tmpfs(Path(st.nodes[follower].dir), 2 * used + (64 << 20))
        cluster.start_node(st, follower)
        caught_up(st)
    props = {"recordcount": str(a.records), "operationcount": str(10**9), **props_of(st)}
    props["maxexecutiontime"] = str(a.fault_run)
    result: dict[str, Any] = {}
    yt = threading.Thread(target=lambda: result.update(ycsb("run", props, a.threads, status=True)))
    ledger = AckLedger(0, seeds=seeds)
    reader = Reader(seeds, readable)
    prober = Prober(seeds, slots, interval=0.02)
    rt = threading.Thread(target=reader.run, args=(a.fault_run - 2,))
    pt = threading.Thread(target=prober.run)
    start = time.monotonic()
    yt.start()
    rt.start()
    pt.start()
    # keys of its own for each fault, many: most writes go to a key not written before, so a write
    # lost with a replica is not hidden by a later one
    keys = [b"%s:%07d" % (fault.encode(), i) for i in range(a.ledger_keys)]
    pick = random_keys(keys, FAULTS.index(fault))
    ledger.run(a.fault_at, pick)
    t_fault = time.monotonic()
    victim = {"leader-kill": leader, "follower-stop": follower, "disk-full": follower}.get(fault)
    election_s: float | None = None
    if fault == "leader-kill":
        cluster.kill_node(st, leader)
        while (raft.leaders(st).get(0)) in (None, leader):
            ledger.run(0.05, pick)
        election_s = time.monotonic() - t_fault
        ledger.run(max(0.0, 10 - (time.monotonic() - t_fault)), pick)
        cluster.start_node(st, leader)
    elif fault == "follower-stop":
        cluster.signal_node(st, follower, signal.SIGSTOP)
        ledger.run(10, pick)
        cluster.signal_node(st, follower, signal.SIGCONT)
    elif fault == "restart-all":
        cluster.kill_all(st)
        for i in range(len(st.nodes)):
            cluster.start_node(st, i)
        raft.wait_leaders(st)
        election_s = time.monotonic() - t_fault
    elif fault == "disk-full":
        assert mount is not None
        filler = mount.fill()
        died = None
        while time.monotonic() - t_fault < 10:
            ledger.run(0.2, pick)
            if died is None and not cluster.alive(st.nodes[follower].pid, cluster.SERVER):
                died = time.monotonic() - t_fault
        result["follower_stopped_after_s"] = died
        result["follower_log_tail"] = Path(st.nodes[follower].log).read_text(errors="replace").splitlines()[-2:]
        filler.unlink()
        if not cluster.alive(st.nodes[follower].pid, cluster.SERVER):
            cluster.start_node(st, follower)
    t_heal = time.monotonic()
    try:
        ledger.run(max(0.0, a.fault_run - (time.monotonic() - start) - 1), pick)
        yt.join()
        rt.join()
        prober.stop()
        pt.join()
        behind = catch_up(st)
        if behind is not None:
            result["behind"] = behind
            result["logs"] = {n.name: Path(n.log).read_text(errors="replace").splitlines()[-3:] for n in st.nodes}
        au = audit_cluster(ledger, seeds)
        per_replica = audit_replicas(ledger, [(n.shard, n.port) for n in st.nodes], slots)
    finally:
        if mount is not None:
            cluster.stop_node(st, follower)
            mount.close()
    if mount is not None:
        cluster.start_node(st, follower)
        caught_up(st)
    shards_hit = list(range(st.shards)) if fault == "restart-all" else [0]
    y = result
    tl = y.get("timeline", [])
    rel = lambda t: t - start  # noqa: E731
    heal_at = rel(t_heal) if fault != "restart-all" else rel(t_fault) + (election_s or 0)
    rd = y.get("ops", {}).get("READ", {})
    up = y.get("ops", {}).get("UPDATE", {})
    return {
        "fault": fault,
        "victim": st.nodes[victim].name if victim is not None else "all",
        "acked_writes": len(ledger.acked),
        "writer_sets": ledger.ops,
        "writer_not_acked": au.errors,
        "lost": len(au.lost),
        "lost_on_replicas": {str(p): len(m) for p, m in per_replica.items()},
        "ycsb_read_not_found": rd.get("not_found", 0),
        "ycsb_read_errors": rd.get("errors", 0),
        "ycsb_update_errors": up.get("errors", 0),
        "ycsb_reads": rd.get("count", 0),
        "reader_not_found": reader.not_found,
        "reader_ok": reader.ok,
        "reader_errors": reader.errors,
        "election_s": election_s,
        # the faulted shard's (restart-all: the longest of every shard's)
        "unavailable_s": max(prober.window(s, t_fault, max(t_heal, t_fault + (election_s or 0))) for s in shards_hit),
        "unavailable_other_shards_s": max(
            (prober.window(s, t_fault, t_heal) for s in range(st.shards) if s not in shards_hit), default=None
        ),
        "before_ops": mean_rate(tl, rel(t_fault) - 8, rel(t_fault)),
        "during_ops": mean_rate(tl, rel(t_fault), heal_at),
        "after_ops": mean_rate(tl, heal_at + 5, a.fault_run),
        "ycsb_throughput": y.get("throughput"),
        "timeline": tl,
        **{k: v for k, v in y.items() if k.startswith("follower_") or k in ("behind", "logs")},
    }


def part_faults(a: argparse.Namespace, save: Callable[[dict[str, Any]], None]) -> None:
    build_binding()
    run = solve("a", a.out)
    st = deploy(run, a.out / "data" / "faults", a.nodes, a.records, 3, "cluster", a.wal_sync, eventual=True)
    try:
        ycsb("load", {"recordcount": str(a.records), **props_of(st)}, a.threads)
        # keys that exist, for the reader (no one writes or deletes them afterwards)
        readable = [b"exists:%06d" % i for i in range(a.reader_keys)]
        with ClusterClient(st.seeds()) as c:
            for i in range(0, len(readable), 1000):
                part = readable[i : i + 1000]
                assert c.pipeline([("SET", k, b"init") for k in part]) == ["OK"] * len(part)
        for fault in a.faults:
            print(f"fault: {fault}", file=sys.stderr, flush=True)
            row = one_fault(a, st, fault, readable)
            print(json.dumps({k: v for k, v in row.items() if k != "timeline"}), file=sys.stderr, flush=True)
            save(row)
    finally:
        undeploy(st)


def fmt(x: float | None, d: int = 0) -> str:
    return "" if x is None else f"{x:,.{d}f}"


def lat(y: dict[str, Any], op: str) -> str:
    o = y["ops"].get(op, {})
    return f"{o['p50_us'] / 1000:.2f} / {o['p99_us'] / 1000:.2f}" if "p50_us" in o else ""


def cell(rb: dict[Any, Any], p: int, c: str) -> str:
    x = rb.get(p, rb.get(str(p), {})).get(c)
    return f"{x['rps']:,.0f} ({x['p50_ms']:.2f}/{x['p99_ms']:.2f})" if x else ""


def ratios(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Throughput of deployment ``a`` over ``b``: YCSB A (run, load) and redis-benchmark's SET and GET."""

    def rb(r: dict[str, Any], p: int, c: str) -> float:
        return float(r["redis_benchmark"].get(p, r["redis_benchmark"].get(str(p), {})).get(c, {}).get("rps", 0.0))

    out = [f"YCSB A {a['ycsb']['throughput'] / b['ycsb']['throughput']:.2f}"]
    out.append(f"YCSB load (inserts) {a['load']['throughput'] / b['load']['throughput']:.2f}")
    for p in (1, 16):
        for c in ("SET", "GET"):
            if rb(b, p, c) > 0:
                out.append(f"{c} P{p} {rb(a, p, c) / rb(b, p, c):.2f}")
    return ", ".join(out)


def print_tables(rf: list[dict[str, Any]], faults: list[dict[str, Any]]) -> None:
    if rf:
        print(
            "\n| deployment | YCSB A ops/s | read p50 / p99 (ms) | update p50 / p99 (ms) | load ops/s |"
            " SET P1 ops/s (p50/p99 ms) | GET P1 | SET P16 | GET P16 |"
        )
        print("|---|---:|---|---|---:|---|---|---|---|")
        for r in rf:
            y, rb = r["ycsb"], r["redis_benchmark"]
            print(
                f"| {r['target']} | {y['throughput']:,.0f} | {lat(y, 'READ')} | {lat(y, 'UPDATE')} | "
                f"{r['load']['throughput']:,.0f} | {cell(rb, 1, 'SET')} | {cell(rb, 1, 'GET')} | "
                f"{cell(rb, 16, 'SET')} | {cell(rb, 16, 'GET')} |"
            )
        by = {r["target"]: r for r in rf}
        for base in ("RF 1, cluster", "RF 1, nutcracker"):
            for other in [t for t in by if t.startswith("RF 3")]:
                if base in by:
                    print(f"\n{other} / {base} (same run): " + ratios(by[other], by[base]))
    if faults:
        print(
            "\n| fault | acknowledged writes lost | false not found (YCSB / reader) | election (s) |"
            " unavailable (s) | ops/s before / during / after | errors (YCSB read, update) |"
        )
        print("|---|---:|---|---:|---:|---|---|")
        for f in faults:
            print(
                f"| {f['fault']} ({f['victim']}) | {f['lost']} of {f['acked_writes']:,} "
                f"(replicas: {sum(f['lost_on_replicas'].values())}) | {f['ycsb_read_not_found']} / "
                f"{f['reader_not_found']} | {fmt(f['election_s'], 2)} | {fmt(f['unavailable_s'], 2)} | "
                f"{fmt(f['before_ops'])} / {fmt(f['during_ops'])} / {fmt(f['after_ops'])} | "
                f"{f['ycsb_read_errors']}, {f['ycsb_update_errors']} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="rf,faults")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--ops", type=int, default=50_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--bench-requests", type=int, default=100_000)
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--fault-run", type=int, default=40, help="seconds of each fault's YCSB run")
    ap.add_argument("--fault-at", type=float, default=12.0, help="seconds into the run the fault starts")
    ap.add_argument("--ledger-keys", type=int, default=1_000_000, help="the writer's key space, per fault")
    ap.add_argument("--reader-keys", type=int, default=20_000)
    ap.add_argument("--wal-sync", default="group_commit", help="the design's WAL policy (the Raft log's)")
    ap.add_argument("--out", type=Path, default=Path("runs/raft-faults"))
    a = ap.parse_args()
    a.faults = [f for f in a.faults.split(",") if f]
    bad = [f for f in a.faults if f not in FAULTS]
    if bad:
        raise SystemExit(f"unknown faults {bad}; choose from {', '.join(FAULTS)}")
    if "disk-full" in a.faults and os.geteuid() != 0:
        raise SystemExit("the disk-full fault mounts a tmpfs: run as root, or leave it out of --faults")
    parts = set(a.parts.split(","))
    a.out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT)
    print(
        f"commit {commit.stdout.strip()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; records {a.records:,}, "
        f"ops {a.ops:,}, YCSB threads {a.threads}, shards {a.nodes}"
    )
    results: dict[str, list[dict[str, Any]]] = {"rf": [], "faults": []}
    path = a.out / f"results-{'-'.join(sorted(parts))}.json"

    def save(part: str, row: dict[str, Any]) -> None:
        results[part].append(row)
        path.write_text(json.dumps(results, indent=2))

    if "rf" in parts:
        part_rf(a, lambda row: save("rf", row))
    if "faults" in parts:
        part_faults(a, lambda row: save("faults", row))
    print_tables(results["rf"], results["faults"])


if __name__ == "__main__":
    main()
