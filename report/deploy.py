"""What `cosine deploy` prints: the started cluster, its status, what --down stopped."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from deploy.cluster import DeployState
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


def print_status(st: DeployState, rows: list[dict[str, Any]], state: DeploymentStatus, down: list[str]) -> None:
    con = Console()
    _header(con, st)
    title = f"{st.deploy_dir}: {state}" + (f" ({', '.join(down)} down)" if down else "")
    t = Table(title=f"[red]{title}[/]" if down else title)
    cols = ("process", "port", "pid", "up", "PING", "cmds", "blk rd", "blk wr", "flushes", "merges", "WAL syncs")
    raft = ("raft_state", "raft_term", "raft_applied_index") if st.proxy is None else ()
    for c in (*cols, *raft):
        t.add_column(c.removeprefix("raft_"), justify="right")
    for r in rows:
        i = r.get("info", {})
        t.add_row(
            r["name"],
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


def print_down(done: list[tuple[str, str]]) -> None:
    con = Console()
    for name, what in done:
        con.print(f"{name}: {what}")
