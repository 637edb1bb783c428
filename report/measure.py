"""What `cosine bench`, `validate` and `calibrate` print."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from cost_models.phi import LOOKUP_SLOPES
from measure.server import MERGE_THREAD, RUNTIME_THREAD
from specs.vocab import DESIGN_CLASSES, OPERATIONS, WRITE_OPERATIONS

if TYPE_CHECKING:
    from measure.cores import CoreProbe


def print_bench(report: dict[str, Any], notes: list[str], prediction: dict[str, Any] | None = None) -> None:
    """Throughput, latency percentiles and block I/O per operation of one engine run, and beside
    them what the model predicts for the same scaled configuration."""
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
    if prediction is not None:
        m = Table(title="the model for the same scaled configuration (from the state the run started in)")
        for c in ("", "measured", "model", "accuracy"):
            m.add_column(c, justify="right")
        m.add_row(
            "throughput ops/s",
            f"{run['throughput_ops']:,.0f}",
            f"{prediction['throughput_ops']:,.0f}",
            f"{prediction['throughput_accuracy']:.1%}",
        )
        m.add_row(
            "blocks per operation",
            f"{prediction['measured_blocks_per_op']:.4f}",
            f"{prediction['blocks_per_op']:.4f}",
            f"{prediction['blocks_accuracy']:.1%}",
        )
        for label, key, fmt in (
            ("client CPU us / op", "fg_cpu_us", "{:.3f}"),
            ("background CPU us / op", "bg_cpu_us", "{:.3f}"),
            ("lookups the buffer answered", "buffered_share", "{:.1%}"),
        ):
            model, measured = prediction.get(key), prediction.get(f"measured_{key}")
            if model is not None and measured is not None:
                m.add_row(label, fmt.format(measured), fmt.format(model), "")
        con.print(m)


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


def print_conservative(c: dict[str, Any], plain: dict[str, Any]) -> None:
    """What `--conservative`'s margin buys (the share over-estimated) and costs (accuracy)."""
    con = Console()
    t = Table(title=f"--conservative: every prediction x {c['margin']:.3f} (>= {c['target_share']:.0%} over-estimate)")
    for col in ("", "as modelled", "with the margin"):
        t.add_column(col, justify="right")
    t.add_row("mean accuracy", f"{plain['mean_accuracy']:.1%}", f"{c['mean_accuracy']:.1%}")
    t.add_row("conservative (model >= engine)", f"{plain['conservative_share']:.0%}", f"{c['conservative_share']:.0%}")
    for k, v in c["by_class"].items():
        t.add_row(f"class {k}", f"{plain['by_class'][k]:.1%}", f"{v:.1%}")
    con.print(t)


def print_ranking(summary: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """Per workload: the designs by measured throughput with the model's prediction, rho and the pick."""
    con = Console()
    for s in summary:
        t = Table(
            title=f"{s['workload']}: Spearman rho {s['spearman_rho']:.2f} (given the start state "
            f"{s['spearman_rho_given_state']:.2f}; on free throughput {s['spearman_rho_free']:.2f}); "
            f"Cosine's pick {s['pick_vs_best']:.2f}x the best measured ({s['pick_vs_best_free']:.2f}x free; "
            f"{s['pick_vs_best_confirmed']:.2f}x on the confirmation's runs"
            + (
                f", below {s['confirmed_best_design']} in {s['confirm_rounds_pick_below']} of "
                f"{s['confirm_rounds']} rounds, sign test p {s['confirm_sign_p']:.2f})"
                if s.get("confirm_rounds")
                else ")"
            )
        )
        cols = ("design", "class", "predicted ops/s", "measured ops/s", "free ops/s", "runs spread", "confirmed ops/s")
        for c in (*cols, "blocks/op model", "blocks/op engine"):
            t.add_column(c, justify="right")
        for r in sorted((r for r in rows if r["workload"] == s["workload"]), key=lambda r: -r["measured_ops"]):
            t.add_row(
                r["design"],
                r["class"],
                f"{r['predicted_ops']:,.0f}",
                f"{r['measured_ops']:,.0f}",
                f"{r['measured_free_ops']:,.0f}",
                f"{r['measured_spread']:.2f}x",
                f"{r['confirm_measured_ops']:,.0f}" if r["confirm_runs"] else "",
                f"{r['predicted_blocks_per_op']:.3f}",
                f"{r['measured_blocks_per_op']:.3f}",
            )
        con.print(t)
        mine = [r for r in rows if r["workload"] == s["workload"]]
        again = sum(int(r["runs_dropped_shared_core"]) for r in mine)
        kept = sum(int(r["runs_on_shared_core"]) for r in mine)
        if again or kept:
            con.print(
                f"{s['workload']}: {again} run(s) run again, the host had put both client threads on one "
                f"core (measure.cores); {kept} kept so after the last attempt"
            )
        for r in mine:
            if int(r.get("runs_short_of_depth", 0)):
                con.print(
                    f"{s['workload']}: {r['design']}: {r['runs_short_of_depth']} of {r['runs']} run(s) started "
                    "a level shallower than the model's steady tree (the warm-up did not reach its depth)"
                )


def print_operation_calibration(res: dict[str, Any]) -> None:
    """One operation's measured CPU per operation and phi per class (`cosine calibrate operation`)."""
    op = res["operation"]
    t = Table(title=f"{op}: measured CPU microseconds per operation (cached engine) and phi (Eq. 2)")
    t.add_column("class")
    t.add_column("cpu us", justify="right")
    t.add_column("phi", justify="right")
    t.add_column("x2t", justify="right")
    for cls in DESIGN_CLASSES:
        cpu = res["cpu"].get((cls, op))
        t.add_row(
            cls,
            "keys x k" if cpu is None else f"{1e6 * cpu:.3f}",
            f"{res['phi'][(cls, op)]:.4f}",
            f"{res['concurrent_cpu'][(cls, op)]:.3f}",
        )
    Console().print(t)


def print_host_speed(factor: float, rows: list[dict[str, Any]], stale: bool, cores: CoreProbe | None = None) -> None:
    """The host-speed probe (`cosine calibrate host-speed`): this host's CPU per operation
    against the phi table's, run by run, and the factor; ``cores``: whether two client threads
    had a core each just now (measure.cores), on a machine of two or more cores."""
    con = Console()
    if cores is not None:
        mode = (
            "[yellow]one core's two hardware threads[/] (a two-thread run now measures another machine)"
            if cores.shared
            else "a core each"
        )
        con.print(
            f"two client threads: {cores.two * 1e6:.3f} us per cached get against one thread's "
            f"{cores.one * 1e6:.3f} (x{cores.ratio:.2f}): {mode}"
        )
    t = Table(title="host-speed probe: cached runs, driver CPU microseconds per operation, this host vs the table")
    for name in ("class", "operation", "records", "measured us", "table us", "ratio", "run-queue share"):
        t.add_column(name, justify="left" if name in ("class", "operation") else "right")
    for r in rows:
        t.add_row(
            r["class"],
            r["operation"],
            f"{r['records']:,}",
            f"{r['measured_us']:.3f}",
            f"{r['tabled_us']:.3f}",
            f"{r['ratio']:.2f}",
            f"{r['runqueue_share']:.0%}",
        )
    con.print(t)
    ratios = [float(r["ratio"]) for r in rows]
    con.print(f"factor (median ratio) {factor:.3f}, runs {min(ratios):.2f}-{max(ratios):.2f}")
    if stale:
        con.print(
            "[yellow]warning:[/] this host's CPU is not the table's: every CPU-bound prediction is off by "
            "about this factor; run `cosine calibrate phi` on this host"
        )


def print_calibration(
    res: dict[str, Any], checks: list[dict[str, Any]], fig4b: list[dict[str, Any]], shared_core: tuple[int, int]
) -> None:
    """The learned CPU table, the block and background terms, the checks and Fig. 4B; ``shared_core``:
    the runs (calibration and Fig. 4B) run again because the host gave two threads one core, and
    those kept so after the last attempt (measure.cores)."""
    con = Console()
    again, kept = shared_core
    if again or kept:
        con.print(
            f"{again} run(s) run again: the host had put both client threads on one core (measure.cores); "
            f"{kept} kept so after the last attempt"
        )
    t = Table(
        title="measured CPU microseconds per operation (cached engine), phi (Eq. 2) and the CPU per operation "
        "at 2 threads over 1 (x2t)"
    )
    t.add_column("class / op")
    for op in OPERATIONS:
        t.add_column(op, justify="right")
    for cls in DESIGN_CLASSES:
        t.add_row(f"{cls} phi", *[f"{res['phi'].get((cls, op), float('nan')):.2f}" for op in OPERATIONS])
        t.add_row(f"{cls} x2t", *[f"{res['concurrent_cpu'].get((cls, op), float('nan')):.2f}" for op in OPERATIONS])
        t.add_row(
            f"{cls} cpu us",
            *[f"{1e6 * res['cpu'][(cls, op)]:.2f}" if (cls, op) in res["cpu"] else "keys x k" for op in OPERATIONS],
        )
    con.print(t)
    br, bg, mt = res["block_read"], res["background"], res["memtable"]
    con.print(
        "block read: "
        + ", ".join(f"{c} {1e6 * v:.2f} us" for c, v in br["per_class"].items())
        + " at 4 KiB, x "
        + ", ".join(
            f"{r:.2f} at {b:,.0f} B" for b, r in zip(br["shape"]["block_bytes"], br["shape"]["ratio"], strict=True)
        )
        + f", + {1e12 * br['per_byte_doubling']:.1f} ps per byte "
        f"per doubling of the keys (up to {br['growth_max_keys']:,.0f}); "
        f"background per merge block: {1e6 * bg['background_block_seconds']:.2f} us + "
        f"{1e9 * bg['background_block_seconds_per_byte']:.3f} ns/byte + "
        f"{1e9 * bg['hash_index_entry_seconds']:.0f} ns per hash-log entry; memtable per doubling "
        f"{1e9 * mt.search_slope:.0f} ns a search past {mt.search_base:,.0f} entries, "
        f"{1e9 * mt.insert_slope:.0f} ns an insert past {mt.insert_base:,.0f}; range per entry "
        + ", ".join(f"{c} {1e9 * r['per_entry']:.0f} ns" for c, r in res["range"].items())
        + f"; hash-log scan {1e9 * res['range']['lsh']['per_key']:.1f} ns per key"
    )
    lk = res["lookup"]
    con.print(
        f"lookup growth per doubling of the keys past {lk['reference_keys']:,.0f}: "
        + ", ".join(
            f"{c} " + " / ".join(f"{op} {1e9 * v[op]:.0f} ns" if op in v else f"{op} flat" for op in LOOKUP_SLOPES)
            for c, v in lk["per_doubling"].items()
        )
    )
    if checks:
        c = Table(title="model vs engine on the calibration's loaded runs (measured blocks)")
        for col in ("group", "runs", "mean accuracy", "min accuracy"):
            c.add_column(col, justify="right")
        groups: dict[str, list[float]] = {}
        for r in checks:
            groups.setdefault(f"{r['group']}, {r['threads']} thread(s)", []).append(r["accuracy"])
        for g, v in sorted(groups.items()):
            c.add_row(g, str(len(v)), f"{sum(v) / len(v):.1%}", f"{min(v):.1%}")
        con.print(c)
    print_fig4b(fig4b, con)


def print_fig4b(rows: list[dict[str, Any]], con: Console | None = None, title: str = "") -> None:
    """Fig. 4B: model vs engine throughput per class, mixed workload and threads (medians of runs)."""
    con = con or Console()
    f = Table(title=title or "Fig. 4B: model vs engine throughput on mixed workloads (median of runs)")
    for c in ("class", "workload", "threads", "predicted ops/s", "measured ops/s", "accuracy", "run-queue share"):
        f.add_column(c, justify="right")
    for r in rows:
        f.add_row(
            r["class"],
            r["workload"],
            str(r["threads"]),
            f"{r['predicted_ops']:,.0f}",
            f"{r['measured_ops']:,.0f}",
            f"{r['accuracy']:.1%}",
            f"{r['runqueue_share']:.0%}",
        )
    con.print(f)


def print_codecs(tab: dict[str, Any]) -> None:
    """`cosine calibrate compression`: each codec's size factor and CPU per byte per compressibility."""
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


def print_serving(doc: dict[str, Any], points_csv: str) -> None:
    """`cosine calibrate serving`: the fitted serving CPU terms and every measured point."""
    t = Table(title=f"cosine-server CPU per request beyond the engine ({doc['machine']}, {doc['date']})")
    for c in ("kind", "per request (us)", "per batch (us)", "per byte (ns)"):
        t.add_column(c, justify="right")
    for kind, terms in doc["kinds"].items():
        t.add_row(
            kind,
            f"{terms.get('request_seconds', 0.0) * 1e6:.3f}",
            f"{terms['batch_seconds'] * 1e6:.3f}",
            f"{terms['byte_seconds'] * 1e9:.3f}",
        )
    Console().print(t)
    Console().print(f"the fit's mean accuracy over the points: {doc['fit_accuracy']:.1%}")
    Console().print(points_csv, end="")


def print_wal(sec: dict[str, Any]) -> None:
    """`cosine calibrate wal`: each point's CPU per update, and the fitted terms."""
    t = Table(title=f"an update's engine CPU by entry size and WAL policy ({sec['machine']}, {sec['date']})")
    for c in ("preset", "wal_sync", "entry bytes", "foreground (us)", "background (us)", "runs (us)"):
        t.add_column(c, justify="right")
    for p in sec["points"]:
        runs = ", ".join(f"{r * 1e6:.3f}" for r in p["runs"])
        t.add_row(
            p["preset"],
            p["policy"],
            f"{p['entry_bytes']:,}",
            f"{p['foreground_seconds'] * 1e6:.3f}",
            f"{p['background_seconds'] * 1e6:.3f}",
            runs,
        )
    Console().print(t)
    Console().print(
        f"per entry byte {sec['seconds_per_byte'] * 1e9:.3f} ns (past {sec['reference_entry_bytes']} bytes); "
        f"{sec['policy']} per write group: {sec['group_seconds'] * 1e6:.3f} us, the sync thread "
        f"{sec['group_background_seconds'] * 1e6:.3f} us"
    )


def _share(waits: dict[str, Any], kind: str) -> float:
    """``kind``'s share of the batches of a served run's reply waits (measure.served.reply_stats)."""
    total = sum(v["batches"] for v in waits.values())
    return waits[kind]["batches"] / total if total else 0.0


def print_served(res: dict[str, Any], accuracy: dict[str, float]) -> None:
    """`cosine bench --served`: predicted beside measured, throughput and p50/p99 per operation."""
    c, m, p = res["config"], res["measured"], res["predicted"]
    con = Console()
    con.print(
        f"served: {c['nodes']} node(s), {c['clients']} connections x pipeline {c['pipeline']}, "
        f"{c['records']:,} records, {c['operations']:,} operations"
    )
    t = Table(title="predicted beside measured (this machine's core split)")
    for col in ("", "predicted", "measured", "accuracy"):
        t.add_column(col, justify="right")
    t.add_row(
        "throughput (ops/s)",
        f"{p['throughput_ops']:,.0f}",
        f"{m['run']['throughput_ops']:,.0f}",
        f"{accuracy.get('throughput', 0.0):.1%}",
    )
    srv = m.get("server")
    if srv:
        t.add_row(
            "server CPU per operation (us)",
            f"{p['server_cpu_us_per_op']:,.2f}",
            f"{srv['cpu_us_per_op']:,.2f} (busy {srv['busy_share']:.0%})",
            f"{accuracy.get('server_cpu', 0.0):.1%}",
        )
        by = srv.get("cpu_us_per_op_by_thread", {})
        if by:
            bg = by.get(MERGE_THREAD, 0.0)
            t.add_row(
                "  of which the merge thread's (us)",
                f"{p.get('background_cpu_us_per_op', float('nan')):,.2f}",
                f"{bg:,.2f} (requests' threads {by.get(RUNTIME_THREAD, 0.0):,.2f})",
                "",
            )
        dev = srv.get("device", {})
        if dev:
            t.add_row(
                "volume I/Os / sleeps per operation",
                "(sleeps not modelled)",
                f"{dev.get('ios_per_op', 0.0):,.2f} / {dev.get('sleeps_per_op', 0.0):,.2f}",
                "",
            )
    cl = m.get("client")
    if cl:
        t.add_row(
            "client cores busy (driver + nutcracker)",
            "(not modelled)",
            f"{cl['busy_share']:.0%} (nutcracker {cl['proxy_cpu_us_per_op']:,.2f} us/op)",
            "",
        )
    for op, mo in m["per_op"].items():
        po = p["per_op"].get(op, {})
        t.add_row(
            f"{op} p50 / p99 (us)",
            f"{po.get('p50_us', float('nan')):,.0f} / {po.get('p99_us', float('nan')):,.0f}",
            f"{mo['latency_us']['p50']:,.0f} / {mo['latency_us']['p99']:,.0f}",
            f"{accuracy.get(op + '_p50', 0.0):.1%}",
        )
    pr, mr = p.get("replies", {}).get("waits", {}), m.get("replies", {}).get("waits", {})
    for kind, mw in mr.items():
        pw = pr.get(kind, {})
        if mw["batches"] or pw.get("batches"):
            t.add_row(
                f"{kind} replies' wait (us; share of batches)",
                f"{pw.get('mean_us', 0.0):,.0f} ({_share(pr, kind):.0%})",
                f"{mw['mean_us']:,.0f} ({_share(mr, kind):.0%})",
                "",
            )
    con.print(t)
    con.print(
        f"model: capacity {p['capacity_ops']:,.0f} ops/s at full use (the engine in process "
        f"{p['engine_in_process_ops']:,.0f}), {p['serving_us_per_op']:.2f} us of serving CPU and "
        f"{p['wire_bytes_per_op']:,.0f} bytes on the wire per operation, utilization {p['utilization']:.0%}; "
        f"probed round trip {p['rtt_us']:.0f} us, sync {p['sync_us']:.0f} us"
    )
    for n in res["notes"]:
        con.print(n)
