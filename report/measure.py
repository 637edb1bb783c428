"""What `cosine bench`, `validate` and `calibrate` print."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from specs.vocab import DESIGN_CLASSES, OPERATIONS, WRITE_OPERATIONS


def print_bench(report: dict[str, Any], notes: list[str]) -> None:
    """Throughput, latency percentiles and block I/O per operation of one engine run."""
    con = Console()
    for n in notes:
        con.print(f"[yellow]note:[/] {n}")
    run = report["run"]
    lat = run["latency_us"]
    con.print(
        f"[bold]{report['design']}[/] ({report['class']}): {run['throughput_ops']:,.0f} ops/s with "
        f"{report['threads']} threads; latency p50 {lat['p50']:.1f} us, p99 {lat['p99']:.1f} us, "
        f"p99.9 {lat['p999']:.1f} us; load {report['load']['throughput_ops']:,.0f} records/s"
    )
    t = Table(title="blocks per operation (storage I/O, buffer and cache hits excluded)")
    for c in ("operation", "count", "blocks read / op", "blocks written / op"):
        t.add_column(c, justify="right")
    for op, v in report["per_op"].items():
        if v["count"]:
            t.add_row(
                op, f"{v['count']:,}", f"{v['blocks_read'] / v['count']:.4f}", f"{v['blocks_written'] / v['count']:.4f}"
            )
    bg = report.get("background", {})
    puts = sum(v["count"] for k, v in report["per_op"].items() if k in WRITE_OPERATIONS)
    if puts:
        io = sum(bg.get(k, 0) for k in ("flush_blocks_written", "compaction_blocks_read", "compaction_blocks_written"))
        t.add_row("flush+compaction per write", f"{puts:,}", "", f"{io / puts:.4f}")
    con.print(t)


def print_validation(summary: dict[str, Any], records: int) -> None:
    """Mean accuracy overall, per class and per operation."""
    con = Console()
    t = Table(title=f"model vs engine: {summary['cases']} cases, {records:,} records")
    t.add_column("group")
    t.add_column("mean accuracy", justify="right")
    t.add_row("[bold]all[/]", f"[bold]{summary['mean_accuracy']:.1%}[/]")
    for k, v in summary["by_class"].items():
        t.add_row(f"class {k}", f"{v:.1%}")
    for k, v in summary["by_op"].items():
        t.add_row(f"op {k}", f"{v:.1%}")
    t.add_row("conservative (model >= engine)", f"{summary['conservative_share']:.0%}")
    con.print(t)


def print_calibration(res: dict[str, Any], fig4b: list[dict[str, Any]]) -> None:
    """The learned phi and CPU table, the per-block times, and Fig. 4B."""
    con = Console()
    t = Table(title="learned phi (Eq. 2) and CPU microseconds per operation")
    t.add_column("class / op")
    for op in OPERATIONS:
        t.add_column(op, justify="right")
    for cls in DESIGN_CLASSES:
        t.add_row(f"{cls} phi", *[f"{res['phi'].get((cls, op), float('nan')):.2f}" for op in OPERATIONS])
        t.add_row(f"{cls} cpu us", *[f"{1e6 * res['cpu'].get((cls, op), float('nan')):.2f}" for op in OPERATIONS])
    con.print(t)
    con.print(
        f"per-block time on this machine: {1e6 * res['t_block']:.2f} us + {1e9 * res['t_block_byte']:.3f} ns/byte "
        f"read, {1e6 * res['t_bg']:.2f} us merged"
    )
    f = Table(title="Fig. 4B: 25% lookups/inserts/updates/rmws, model vs engine throughput")
    for c in ("class", "threads", "predicted ops/s", "measured ops/s", "accuracy", "p99 us"):
        f.add_column(c, justify="right")
    for r in fig4b:
        f.add_row(
            r["class"],
            str(r["threads"]),
            f"{r['predicted_ops']:,.0f}",
            f"{r['measured_ops']:,.0f}",
            f"{r['accuracy']:.1%}",
            f"{r['p99_us']:.1f}",
        )
    con.print(f)


def print_codecs(tab: dict[str, Any]) -> None:
    """`cosine calibrate --compression`: each codec's size factor and CPU per byte per compressibility."""
    t = Table(title=f"codecs measured on the engine ({tab['machine']}, {tab['date']})")
    for c in ("codec", "compressibility", "size factor", "compress ns/byte", "decompress ns/byte"):
        t.add_column(c, justify="right")
    for codec, rows in tab["codecs"].items():
        for c, r in rows.items():
            t.add_row(
                codec,
                f"{float(c):g}",
                f"{r['size_factor']:.3f}",
                f"{r['compress_ns_per_byte']:.3f}",
                f"{r['decompress_ns_per_byte']:.3f}",
            )
    Console().print(t)
