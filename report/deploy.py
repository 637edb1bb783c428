"""What `cosine deploy` prints: the started cluster, its status, what --down stopped."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from deploy.cluster import DeployState, Health
from deploy.raft import Routing
from report.format import gib, si
from specs.vocab import DeploymentStatus, WalSync


def _header(con: Console, st: DeployState) -> None:
    con.print(
        f"[bold]{st.spec}[/] on {st.provider}: {st.shards} of the {st.recommended_nodes} recommended nodes on "
        f"this machine, memory x{st.scale:.4g} ({st.scale_reason}), wal_sync = {st.wal_sync}"
    )
    if st.proxy is not None:
        con.print(
            f"proxy (nutcracker, ketama, auto_eject_hosts {'on' if st.auto_eject else 'off'}): "
            f"127.0.0.1:{st.proxy.port}; shards: " + ", ".join(f"127.0.0.1:{n.port}" for n in st.nodes)
        )
    else:
        con.print(
            f"{st.shards} shards x {st.replicas} replicas, each shard a Raft group; Redis Cluster protocol "
            f"(redis-cli -c, redis-benchmark --cluster, JedisCluster), {st.consistency} reads; "
            f"seeds: " + ", ".join(f"127.0.0.1:{n.port}" for n in st.nodes)
        )
    con.print(
        f"the solution predicts {si(st.predicted_cloud_ops)} ops/s for {st.recommended_nodes} cloud nodes, "
        f"{si(st.predicted_scaled_ops)} ops/s for {st.shards} of them"
    )
    con.print("scans: one key per command is routed; RANGE goes to every shard (scatter-gather)")
    if st.wal_sync == WalSync.NONE:
        con.print("[yellow]note:[/] wal_sync = none: a SET is acknowledged before it is durable; a crash can lose it")


def print_up(st: DeployState) -> None:
    con = Console()
    _header(con, st)
    t = Table(title=f"started ({st.deploy_dir})")
    bus = ("bus",) if st.proxy is None else ()
    for c in ("node", "design", "VM type", "port", "pid", "memory", *bus):
        t.add_column(c, justify="right")
    for n in st.nodes:
        extra = (str(n.bus_port),) if bus else ()
        t.add_row(n.name, n.design_class, n.vm_type, str(n.port), str(n.pid), gib(n.memory_bytes), *extra)
    con.print(t)
    con.print(f"stop with: cosine deploy {st.run_dir} --down --out {st.deploy_dir}")


def print_status(st: DeployState, rows: list[dict[str, Any]], h: Health) -> None:
    con = Console()
    _header(con, st)
    problems = [f"{', '.join(h.down)} down"] if h.down else []
    problems += [f"shard {s} has no leader" for s in h.leaderless] if h.status != DeploymentStatus.STOPPED else []
    title = f"{st.deploy_dir}: {h.status}" + (f" ({'; '.join(problems)})" if problems else "")
    t = Table(title=f"[red]{title}[/]" if problems else title)
    replicated = st.routing == Routing.CLUSTER
    cols = ("process", *(("shard", "role") if replicated else ()), "port", "pid", "up", "PING")
    cols += ("cmds", "blk rd", "blk wr", "flushes", "merges", "WAL syncs")
    raft = ("raft_term", "raft_applied_index") if replicated else ()
    for c in (*cols, *raft):
        t.add_column(c.removeprefix("raft_"), justify="right")
    for r in rows:
        i = r.get("info", {})
        role = r.get("role", "")
        t.add_row(
            r["name"],
            *(
                (
                    str(r["shard"]),
                    f"[bold]{role}[/]" if role == "leader" else f"[red]{role}[/]" if role == "down" else role,
                )
                if replicated
                else ()
            ),
            str(r["port"]),
            str(r["pid"]),
            "yes" if r["alive"] else "[red]no[/]",
            "yes" if r["answers"] else "[red]no[/]",
            *(
                i.get(k, "")
                for k in (
                    "total_commands_processed",
                    "block_reads",
                    "block_writes",
                    "flushes",
                    "merges",
                    "wal_syncs",
                    *raft,
                )
            ),
        )
    con.print(t)
    for v in h.shards:
        up = f"{len(v.answering)} of {len(v.replicas)} replicas answer"
        if v.leader is not None:
            con.print(f"shard {v.shard}: leader {v.leader} (term {v.term}), {up}")
        else:
            con.print(f"[red]shard {v.shard}: no leader[/] (no writes until a majority elects one), {up}")


def print_down(done: list[tuple[str, str]]) -> None:
    con = Console()
    for name, what in done:
        con.print(f"{name}: {what}")
