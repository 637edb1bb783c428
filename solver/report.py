"""Rich rendering of evaluations, solutions and audits (presentation only)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

OP_LABELS = {
    "get": "get (single-result lookup)",
    "empty_get": "empty get (no-result lookup)",
    "range": "range scan",
    "insert": "insert",
    "update": "blind update",
    "rmw": "read-modify-write",
}


def money(x: float) -> str:
    return f"${x:,.2f}"


def si(x: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:,.2f}{unit}"
    return f"{x:,.2f}"


def gib(x: float) -> str:
    return f"{x / 2**30:,.2f} GiB"


def print_evaluation(ev: dict[str, Any], mix: dict[str, float], console: Console | None = None) -> None:
    """Print one evaluated configuration (``ConfigEval.as_dict()``)."""
    con = console or Console()
    d = ev["design"]
    head = (f"[bold]{d['name']}[/] design ([cyan]{d['class']}[/]) on "
            f"{ev['count']} x {ev['provider']}:{ev['vm']}")
    con.print(head)
    if not ev["feasible"]:
        con.print(f"[red]infeasible:[/] {ev['reason']}")
    lay = Table(title="layout per node", show_header=False)
    lay.add_row("entries per node", si(ev["entries_per_node"]))
    if d["lsh"]:
        lay.add_row("layout", "log-structured hash table (one log, in-memory hash index)")
    else:
        lay.add_row("size ratio T / runs K (hot) / Z (cold)", f"{d['T']} / {d['K']} / {d['Z']}")
        lay.add_row("levels L / cold levels Y", f"{d['L']} / {d['Y']}")
        bits = ", ".join(f"{b:.1f}" for b in d["bloom_bits_per_level"]) or "none"
        lay.add_row("Bloom bits per key, per level", bits)
    lay.add_row("block", f"{d['block_bytes']:,} B")
    lay.add_row("buffer / filters / " + ("hash index" if d["lsh"] else "fences") + " / cache",
                f"{gib(d['buffer_bytes'])} / {gib(d['filter_bytes'])} / {gib(d['fence_bytes'])} / {gib(d['cache_bytes'])}")
    lay.add_row("threads", str(d["threads"]))
    con.print(lay)
    io = Table(title="expected block I/O per operation")
    io.add_column("operation")
    io.add_column("share", justify="right")
    io.add_column("I/O per op", justify="right")
    for op, v in ev["io_per_op"].items():
        io.add_row(OP_LABELS[op], f"{mix.get(op, 0.0):.0%}", f"{v:,.4f}")
    io.add_row("[bold]workload (Eq. 1)[/]", "100%", f"[bold]{ev['io_total']:,.4f}[/]")
    con.print(io)
    perf = Table(title="performance and monthly bill", show_header=False)
    perf.add_row("throughput (cluster)", f"{si(ev['throughput_ops'])} ops/s")
    perf.add_row("latency (Eq. 3: time per op = 1/throughput)",
                 f"{ev['latency_s']:.3e} s" if ev["latency_s"] != float("inf") else "-")
    if ev["storage"]:
        perf.add_row("storage per node", ev["storage"]["label"])
    mc = ev["monthly_cost"]
    perf.add_row("compute", money(mc["compute"]))
    perf.add_row("storage", money(mc["storage"]))
    perf.add_row("SLAs", money(mc["sla"]))
    perf.add_row("[bold]total per month[/]", f"[bold]{money(mc['total'])}[/]")
    con.print(perf)
