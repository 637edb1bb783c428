"""How long a three-replica shard is without a leader after its leader is paused, this tree's
cosine-server beside a peer binary in the same run (BENCHMARKS.md §19).

    python -m bench.raft_election [--rounds 20] [--against PATH] [--busy 2] [--writers 4]
        [--fast] [--out runs/raft-election]

Each binary runs one shard of three replicas (``cosine-server --cluster``, deploy.raft's
``cluster.json`` with its default timing: heartbeat 100 ms, election timeout 500-1000 ms, or with
``--fast`` the tests' 50 ms and 300-600 ms; the engine template's engine.toml). Round by round,
alternating the binaries: writers SET keys through the shard's leader (pipelines of 8, so the
followers' logs differ by a few entries at any moment, as under load), the leader is SIGSTOPped,
and the two others are asked (``INFO replication``, every 10 ms) until one leads and the other
follows it: that time, and the elections the two started meanwhile (``raft_elections_started``),
are the round's figures. The old leader is then resumed and the shard settles before the next
round. ``--busy N`` runs N busy loops for the whole run: a loaded host, where replicas' timers fire
late and split votes are likelier (stop 58's CI hang: docs/journal/s43-s51.md §30).

Prints, per binary: rounds, the median / p90 / longest time without a leader, elections per
round, and rounds longer than 3 s (a round that found no leader in ``--give-up`` seconds counts
as that long).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from deploy.raft import Consistency, RaftTiming, cluster_json, majority_leader, replication
from measure.engine import TEMPLATE, build
from measure.resp import Connection
from measure.server import HOST, free_port

#: Keys the writers cycle through.
KEYS = 10_000
#: SETs a writer pipelines.
PIPELINE = 8


@dataclass
class Shard:
    """Three replicas of one binary."""

    name: str
    root: Path
    ports: list[int]
    ids: list[int]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def leader(self, among: list[int] | None = None) -> int | None:
        """The index of the replica that leads and that a majority of three follows (itself
        included), asking only the replicas ``among`` (None: all); None while there is none."""
        views = {i: replication(self.ports[i]) for i in (among if among is not None else range(3))}
        return majority_leader({i: str(rid) for i, rid in enumerate(self.ids)}, views)

    def elections(self, idx: list[int]) -> int:
        total = 0
        for i in idx:
            v = replication(self.ports[i])
            total += int(v.get("raft_elections_started", "0")) if v else 0
        return total

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()


def start_shard(name: str, binary: Path, root: Path, timing: RaftTiming) -> Shard:
    root.mkdir(parents=True, exist_ok=True)
    ports = [free_port() for _ in range(3)]
    buses = [free_port() for _ in range(3)]
    ids = [1, 2, 3]
    topo = cluster_json({0: list(zip(ids, ports, buses, strict=True))}, Consistency.STRONG, timing)
    (root / "cluster.json").write_text(json.dumps(topo))
    (root / "engine.toml").write_text((TEMPLATE / "engine.toml").read_text())
    shard = Shard(name, root, ports, ids)
    for i in range(3):
        cmd = [str(binary), "--config", str(root / "engine.toml"), "--dir", str(root / f"node-{ids[i]}")]
        cmd += ["--cluster", str(root / "cluster.json"), "--node-id", str(ids[i])]
        with open(root / f"node-{ids[i]}.log", "ab") as log:
            shard.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log))
    return shard


def wait_leader(shard: Shard, among: list[int] | None, give_up: float) -> tuple[int | None, float]:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < give_up:
        lead = shard.leader(among)
        if lead is not None:
            return lead, time.perf_counter() - t0
        time.sleep(0.01)
    return None, give_up


def writer(shard: Shard, lead: list[int], stop: threading.Event, seed: int) -> None:
    """SETs through the replica ``lead[0]`` says leads; errors (a paused or deposed leader) are retried."""
    conn: Connection | None = None
    at = -1
    n = seed
    while not stop.is_set():
        try:
            if conn is None or at != lead[0]:
                if conn is not None:
                    conn.close()
                at = lead[0]
                conn = Connection(HOST, shard.ports[at], timeout=0.5)
            conn.pipeline([(b"SET", f"k{(n + j) % KEYS:08d}", f"v{n + j}") for j in range(PIPELINE)])
            n += PIPELINE
        except (OSError, ConnectionError):
            conn = None
            time.sleep(0.05)


def round_(shard: Shard, writers: int, give_up: float) -> tuple[float, int]:
    """One pause of the leader: (seconds without a leader, elections the others started)."""
    lead, _ = wait_leader(shard, None, 30.0)
    if lead is None:
        raise RuntimeError(f"{shard.name}: no leader to pause")
    holder = [lead]
    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(shard, holder, stop, 1000 * w)) for w in range(writers)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    others = [i for i in range(3) if i != lead]
    e0 = shard.elections(others)
    shard.procs[lead].send_signal(signal.SIGSTOP)
    new, took = wait_leader(shard, others, give_up)
    e1 = shard.elections(others)
    if new is not None:
        holder[0] = new
    shard.procs[lead].send_signal(signal.SIGCONT)
    stop.set()
    for t in threads:
        t.join()
    # the resumed replica learns the new term and follows
    wait_leader(shard, None, 30.0)
    time.sleep(0.5)
    return took, e1 - e0


def summary(name: str, took: list[float], elections: list[int]) -> str:
    ms = sorted(t * 1000 for t in took)
    p90 = ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))]
    return (
        f"| {name} | {len(ms)} | {statistics.median(ms):,.0f} | {p90:,.0f} | {ms[-1]:,.0f} | "
        f"{statistics.mean(elections):.1f} | {sum(1 for t in ms if t > 3000)} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--against", type=Path, help="a peer cosine-server binary (e.g. an earlier commit's)")
    ap.add_argument("--busy", type=int, default=0, help="busy loops beside the run (a loaded host)")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument(
        "--fast", action="store_true", help="the tests' timing: heartbeat 50 ms, election timeout 300-600 ms"
    )
    ap.add_argument("--give-up", type=float, default=30.0, help="seconds a round waits for a new leader")
    ap.add_argument("--out", type=Path, default=Path("runs/raft-election"))
    a = ap.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if a.rounds < 1 or a.writers < 0 or a.busy < 0 or a.give_up <= 0:
        print("raft_election: --rounds >= 1, --writers and --busy >= 0, --give-up > 0", file=sys.stderr)
        return 2
    if a.against is not None and not os.access(a.against, os.X_OK):
        print(f"raft_election: --against {a.against}: not an executable", file=sys.stderr)
        return 2
    binaries = {"this tree": build(TEMPLATE, "cosine-server")}
    if a.against is not None:
        binaries[f"peer ({a.against})"] = a.against
    root = a.out / f"run-{int(time.time())}"
    timing = RaftTiming(heartbeat_ms=50, election_min_ms=300, election_max_ms=600) if a.fast else RaftTiming()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    shards: list[Shard] = []
    results: dict[str, tuple[list[float], list[int]]] = {n: ([], []) for n in binaries}
    try:
        for i, (name, b) in enumerate(binaries.items()):
            shards.append(start_shard(name, b, root / f"shard-{i}", timing))
        for s in shards:
            if wait_leader(s, None, 30.0)[0] is None:
                raise RuntimeError(f"{s.name}: no leader after start; logs in {s.root}")
        for r in range(a.rounds):
            for s in shards:
                took, el = round_(s, a.writers, a.give_up)
                results[s.name][0].append(took)
                results[s.name][1].append(el)
                print(
                    f"round {r + 1}/{a.rounds} {s.name}: {took * 1000:,.0f} ms without a leader, {el} elections",
                    flush=True,
                )
    finally:
        for s in shards:
            s.stop()
        for p in busy:
            p.kill()
            p.wait()
    print()
    print(
        f"Leader paused, {a.writers} writers, {a.busy} busy loops, {a.rounds} rounds each, interleaved; heartbeat "
        f"{timing.heartbeat_ms} ms, election timeout {timing.election_min_ms}-{timing.election_max_ms} ms"
    )
    print("| binary | rounds | median ms | p90 ms | longest ms | elections / round | rounds > 3 s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, (gaps, elections) in results.items():
        print(summary(name, gaps, elections))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
