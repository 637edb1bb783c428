"""What `cosine evaluate`, `solve`, `audit`, `whatif` and `sweep` print."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from report.format import OP_LABELS, gib, money, si
from specs.vocab import Method

if TYPE_CHECKING:
    from solver.rundir import Solution


def print_evaluation(ev: dict[str, Any], mix: dict[str, float], console: Console | None = None) -> None:
    """Print one evaluated configuration (``ConfigEval.as_dict()``)."""
    con = console or Console()
    d = ev["design"]
    head = f"[bold]{d['name']}[/] design ([cyan]{d['class']}[/]) on {ev['count']} x {ev['provider']}:{ev['vm']}"
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
        lay.add_row("range filter (hot levels)", _range_filter(d["range_bits_per_key"], d["range_filter_bytes"]))
    lay.add_row("block / codec hot, cold", f"{d['block_bytes']:,} B / {d['codec_hot']}, {d['codec_cold']}")
    lay.add_row(
        "buffer / filters / " + ("hash index" if d["lsh"] else "fences") + " / cache",
        f"{gib(d['buffer_bytes'])} / {gib(d['filter_bytes'])} / {gib(d['fence_bytes'])} / {gib(d['cache_bytes'])}",
    )
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
    perf.add_row(
        "latency (Eq. 3: time per op = 1/throughput)",
        f"{ev['latency_s']:.3e} s" if ev["latency_s"] != float("inf") else "-",
    )
    if ev["storage"]:
        perf.add_row("storage per node", ev["storage"]["label"])
    mc = ev["monthly_cost"]
    perf.add_row("compute", money(mc["compute"]))
    perf.add_row("storage", money(mc["storage"]))
    perf.add_row("backup", money(mc["backup"]))
    perf.add_row("SLAs", money(mc["sla"]))
    perf.add_row("[bold]total per month[/]", f"[bold]{money(mc['total'])}[/]")
    con.print(perf)


def _served(d: Any) -> str:
    """A node's served figures: throughput (and the engine's in process), bytes on the wire, network."""
    engine = f" (engine in process {si(d.engine_throughput_ops)})" if d.engine_throughput_ops else ""
    wire = f"; {d.wire_bytes_per_op:,.0f} B/op on the wire" if d.wire_bytes_per_op else ""
    if d.network_ops is None:
        net = "; no network figure in the catalog"
    else:
        net = f"; network bound {si(d.network_ops)} ops/s" + (" [yellow](binding)[/]" if d.network_bound else "")
        if d.burst_duty_cycle is not None:
            net += f" [yellow]burst-bound: past the baseline, at a duty cycle of {d.burst_duty_cycle:g}[/]"
    return f"{si(d.node_throughput_ops)} ops/s{engine}{wire}{net}"


def _latency(p50: float | None, p99: float | None, utilization: float | None) -> str:
    if p50 is None or p99 is None:
        return "- (at or past capacity)"
    at = f" at {utilization:.0%} of capacity" if utilization is not None else ""
    return f"{p50 * 1e3:.3f} / {p99 * 1e3:.3f} ms{at}"


def print_solution(sol: Solution, console: Console | None = None) -> None:
    """The solve summary: configuration, designs, bill, certificate, neighbours."""
    con = console or Console()
    mc, pred, cert = sol.monthly_cost, sol.predicted, sol.certificate
    vms = ", ".join(f"{v.count} x {v.type}" for v in sol.vms)
    con.print(
        f"[bold]{sol.spec}[/] at {money(sol.budget)}/month ({sol.pricing} prices): [bold cyan]{sol.provider}[/] {vms}"
    )
    t = Table(title="engine design per VM type", show_header=False)
    for d, st in zip(sol.designs, sol.storage, strict=True):
        layout = "log-structured hash table" if d.lsh else f"T={d.T} K={d.K} Z={d.Z}, L={d.L} levels, Y={d.Y} cold"
        bits = (
            "-"
            if d.lsh
            else (f"{d.bloom_bits_per_key:g} avg (" + ", ".join(f"{b:.1f}" for b in d.bloom_bits_per_level) + ")")
        )
        t.add_row(f"[bold]{d.count} x {d.vm_type}[/]", f"[cyan]{d.design_class}[/]: {layout}")
        t.add_row("  keys per node / threads", f"{si(d.entries_per_node)} / {d.threads}")
        t.add_row("  buffer / fences / cache", f"{gib(d.buffer_bytes)} / {gib(d.fence_bytes)} / {gib(d.cache_bytes)}")
        t.add_row("  Bloom bits per key", bits)
        if not d.lsh:
            t.add_row("  range filter (hot levels)", _range_filter(d.range_bits_per_key, d.range_filter_bytes))
        t.add_row("  block / codec hot, cold", f"{d.block_bytes:,} B / {d.codec_hot}, {d.codec_cold}")
        t.add_row("  storage per node", st.label)
        t.add_row("  served per node (RESP)", _served(d))
        t.add_row("  request latency p50 / p99", _latency(d.latency_p50_s, d.latency_p99_s, d.utilization))
    con.print(t)
    p = Table(title="prediction, bill and certificate", show_header=False)
    rob = sol.robustness
    p.add_row("throughput (expected workload)", f"{si(pred.throughput_ops)} ops/s")
    if rob:
        how = f"noise {rob.noise:g}" + (f", KL radius {rob.kl_radius:g}" if rob.kl_radius else "")
        r, n, b = rob.robust_choice, rob.nominal_choice, rob.best_perturbed_choice
        at = rob.chosen_at_budget
        p.add_row(
            f"robust rule ({how}, tolerance {rob.tolerance:g})",
            f"perturbed {si(r.perturbed_ops)} ops/s; best at this budget {si(b.perturbed_ops)}"
            + (
                f"; chosen at {money(at)}, where it was within {rob.tolerance:.0%} of the best"
                if at
                else f" (>= {1 - rob.tolerance:.0%} of it)"
            ),
        )
        p.add_row(
            f"nominal choice ({'+'.join(n.classes)}, {n.provider})",
            f"expected {si(n.expected_ops)} ops/s, perturbed {si(n.perturbed_ops)} ops/s",
        )
    p.add_row("request latency p50 / p99 (worst node)", _latency(pred.latency_p50_s, pred.latency_p99_s, None))
    p.add_row("Eq. 3's time per operation (1 / throughput)", f"{pred.latency_s:.3e} s" if pred.latency_s else "-")
    p.add_row("I/O per op", ", ".join(f"{k} {v:.3g}" for k, v in pred.io_per_op.items()))
    if pred.operations_per_month:
        p.add_row("monthly capacity / workload", f"{pred.monthly_capacity_ops / pred.operations_per_month:,.2f}x")
    rep = sol.replication
    p.add_row("replication", f"{rep.label}; {rep.amplification:.3g} node operations per operation")
    for line in mc.LINES:
        p.add_row(f"  {line}", money(getattr(mc, line)))
    p.add_row("[bold]total per month[/]", f"[bold]{money(mc.total)}[/]")
    gap, err, grid = cert.mip_gap, cert.approx_error, cert.grid_gap
    how = {
        Method.THRESHOLD: "by the threshold algorithm (exact knapsacks per threshold)",
        Method.MIP: f"by {cert.backend} (whole band MIP)",
        Method.EXHAUSTIVE: "by enumeration",
    }[cert.method]
    p.add_row(
        "certificate",
        f"{cert.status} {how}: MIP gap {'-' if gap is None else f'{gap:.2e}'}, approximation error "
        f"{'-' if err is None else f'{err:.2e}'}, grid gap {'-' if grid is None else f'{grid:.2e}'} "
        "(every other count of these nodes the budget buys, evaluated exactly"
        + ("; this count beat the band model's)" if cert.polished else ")"),
    )
    fc = sol.frontier_check
    if fc is not None:
        p.add_row(
            "frontier",
            f"{fc.bands} bands x {len(fc.providers)} providers; monotone: "
            f"{'yes' if fc.monotone else f'repaired {fc.repaired_bands} bands'}",
        )
    con.print(p)
    print_two_answers(sol, con)
    if sol.binding:
        con.print(f"[bold]binding:[/] {sol.binding.detail}")
    if rob:
        added = ", ".join(f"{k} {v:.1%}" for k, v in rob.added_operations.items())
        sl = rob.scan_length
        if added:
            con.print(
                f"noise adds {added}"
                + (f"; {sl.note}" if sl.note else f"; scans of {sl.entries:g} entries (the spec's)")
            )
    tgt = sol.target
    if tgt is not None and (tgt.max_latency_s or tgt.max_latency_p50_s):
        bounds = ", ".join(
            f"{name} <= {v * 1e3:g} ms" for name, v in (("p99", tgt.max_latency_s), ("p50", tgt.max_latency_p50_s)) if v
        )
        con.print(f"latency bound {bounds}: a constraint on every node's predicted request latency")
    if tgt is not None and tgt.min_throughput:
        if tgt.met:
            con.print(f"target {si(tgt.min_throughput)} ops/s: [green]met[/]")
        else:
            chp = tgt.cheapest_meeting_target
            extra = (
                f"; the cheapest configuration that meets it costs {money(chp.monthly_cost.total)}/month"
                if chp
                else "; no configuration meets it"
            )
            con.print(f"target {si(tgt.min_throughput)} ops/s: [red]not met within the budget[/]{extra}")
    nb = sol.neighbours
    if nb is not None and nb.up is not None:
        u = nb.up
        con.print(f"+{money(u.extra_usd)}/month buys {u.gain:.1%} more throughput ({u.provider})")
    if nb is not None and nb.down is not None:
        dn = nb.down
        con.print(f"-{money(dn.saved_usd)}/month costs {dn.loss:.1%} of the throughput ({dn.provider})")
    if sol.optional_slas_usd:
        con.print(
            "optional SLAs: "
            + ", ".join(
                f"{k} {'+' + money(v) if v is not None else 'not priced'}" for k, v in sol.optional_slas_usd.items()
            )
        )


def print_two_answers(sol: Solution, con: Console) -> None:
    """The solve's two answers side by side: the best at the budget and the cheapest that meets the
    spec's need (performance.min_throughput, operations_per_month at its peak factor)."""
    t = Table(title="two answers")
    for c in ("answer", "provider", "VMs", "per month", "throughput"):
        t.add_column(c)
    vms = ", ".join(f"{v.count} x {v.type}" for v in sol.vms)
    t.add_row(
        f"best within {money(sol.budget)}",
        str(sol.provider),
        vms,
        money(sol.monthly_cost.total),
        f"{si(sol.predicted.throughput_ops)} ops/s",
    )
    na = sol.cheapest_meeting_need
    if na is not None:
        label = f"cheapest meeting the need ({si(na.need.throughput_ops)} ops/s)"
        conf = na.configuration
        if conf is None:
            t.add_row(label, "-", na.note or "none", "-", "-")
        else:
            t.add_row(
                label,
                str(conf.provider),
                ", ".join(f"{v.count} x {v.type}" for v in conf.vms),
                money(conf.monthly_cost.total),
                f"{si(conf.predicted.throughput_ops)} ops/s",
            )
    con.print(t)
    if na is not None:
        con.print(f"need: {na.need.rule}" + (f"; {na.note}" if na.note and na.configuration else ""))


def print_audit(
    rows: list[Any], run_dir: str, max_gap: float, max_approx_error: float, max_grid_gap: float | None = None
) -> int:
    """The audit table (``solver.audit.AuditRow`` each); returns how many bands are flagged."""
    con = Console()
    grid = "" if max_grid_gap is None else f", max grid gap {max_grid_gap:g}"
    t = Table(title=f"audit of {run_dir} (max gap {max_gap:g}, max approximation error {max_approx_error:g}{grid})")
    for c in (
        "band",
        "provider",
        "budget",
        "status",
        "MIP gap",
        "approx error",
        "grid gap",
        "nodes",
        "wall s",
        "flags",
    ):
        t.add_column(c)

    def f(v: object, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for r in rows:
        rec = r.record
        t.add_row(
            str(rec.band),
            rec.provider,
            f"${rec.budget:,.0f}",
            rec.status,
            f(rec.mip_gap, ".1e"),
            f(rec.approx_error, ".1e"),
            f(rec.grid_gap, ".1e"),
            f(rec.nodes, "d"),
            f(rec.wall_s, ".3f"),
            ("[red]" + "; ".join(r.flags) + "[/]") if r.flags else (f"excluded by {rec.rule}" if rec.rule else "ok"),
        )
    con.print(t)
    flagged = sum(bool(r.flags) for r in rows)
    con.print(f"{flagged} of {len(rows)} bands flagged")
    return flagged


def print_whatif(ans: dict[str, Any]) -> None:
    """One line for the answer, one per provider."""
    con = Console()
    a = ans["answer"]
    if a is None:
        con.print(ans["note"])
        return
    cfg = a["configuration"]
    vms = ", ".join(f"{v['count']} x {v['type']}" for v in cfg.get("vms", []))
    where = ans.get("solved") or f"saved band {a['band']}, budget ${a['budget']:,.0f}"
    grid = a.get("grid_gap")
    con.print(
        f"{a['provider']}: {vms} ({a['class']}) -> {a['throughput_ops']:,.0f} ops/s for "
        f"{money(a['monthly_cost'])}/month ({where}" + ("" if grid is None else f"; grid gap {grid:.2e}") + ")"
    )
    for p, v in ans["per_provider"].items():
        if v.get("monthly_cost") is None:
            con.print(f"  {p}: {v.get('status')}" + (f" ({v['rule']})" if v.get("rule") else ""))
        else:
            con.print(f"  {p}: {v['throughput_ops']:,.0f} ops/s for {money(v['monthly_cost'])}/month")


def print_envelope_warning(sol: Solution) -> None:
    """One warning line on stderr when the answer's prediction lies outside the calibrated envelope."""
    import typer

    from cost_models.envelope import describe_outside

    env = sol.certificate.envelope
    if env is not None and not env.inside:
        typer.echo(
            "warning: outside the calibrated envelope (the model extrapolates past every measurement): "
            + "; ".join(describe_outside(env.nodes)),
            err=True,
        )


def print_written(what: str) -> None:
    """The closing 'wrote ...' line of a command."""
    import typer

    typer.echo(f"wrote {what}")


def _range_filter(bits: float, filter_bytes: float) -> str:
    """A design's range filter: bits per key and its memory, or none."""
    return f"{bits:g} bits per key ({gib(filter_bytes)})" if bits > 0 else "none"
