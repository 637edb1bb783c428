"""`cosine`: the command-line front end (typer). Commands parse options and call
into ``cost_models``/``solver``; no model logic lives here. Heavy packages are
imported inside commands so that ``cosine --help`` stays instant."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer

from solver.errors import InputError, cli_errors

app = typer.Typer(
    help="Cosine: co-design a key-value storage engine and its cloud deployment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
pricing_app = typer.Typer(help="Inspect and rebuild the pricing catalog.", no_args_is_help=True)
app.add_typer(pricing_app, name="pricing")

_VM = re.compile(r"^(?P<prov>[a-z]+):(?P<name>[^\[\]]+?)(?:\[x(?P<count>\d+)\])?$")


def _parse_vm(text: str) -> tuple[str, str, int]:
    m = _VM.match(text.strip())
    if not m:
        raise InputError(f"--vm {text!r}: expected PROVIDER:TYPE[xCOUNT], e.g. aws:r5d.xlarge[x3]")
    count = int(m.group("count") or 1)
    if count < 1:
        raise InputError(f"--vm {text!r}: the count must be at least 1")
    return m.group("prov"), m.group("name").strip(), count


@app.command()
def evaluate(
    spec: Annotated[Path, typer.Argument(help="Workload spec (YAML).")],
    design: Annotated[
        str, typer.Option(help="rocksdb | wiredtiger | faster | T=8,K=3,Z=1,buffer=1GiB,bloom_bits=10")
    ] = "rocksdb",
    vm: Annotated[str, typer.Option(help="PROVIDER:TYPE[xCOUNT], e.g. aws:r5d.xlarge[x3]")] = "aws:r5d.xlarge[x3]",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Predict I/O per operation, latency, throughput and the monthly bill of one design on given VMs."""
    with cli_errors(str(spec)):
        from cost_models.design import parse_design
        from cost_models.evaluate import evaluate_config
        from cost_models.pricing import PROVIDERS, load_catalog
        from specs.schema import load_spec

        s = load_spec(spec)
        provider, name, count = _parse_vm(vm)
        if provider not in PROVIDERS:
            raise InputError(f"--vm: unknown provider {provider!r} (valid: {', '.join(PROVIDERS)})")
        cat = load_catalog(s.pricing)
        ev = evaluate_config(s, parse_design(design), cat.vm(provider, name), count, catalog=cat)
        out = ev.as_dict()
        out["spec"] = s.name
        out["pricing"] = s.pricing
        if as_json:
            typer.echo(json.dumps(out, indent=2, default=float))
        else:
            from solver.report import print_evaluation

            print_evaluation(out, s.workload.operations)


def _progress_bar():  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(), transient=True
    )


@app.command()
def solve(
    spec: Annotated[Path, typer.Argument(help="Workload spec (YAML).")],
    budget: Annotated[float | None, typer.Option(help="Monthly budget in USD (default: the spec's).")] = None,
    providers: Annotated[str | None, typer.Option(help="Comma-separated subset of the spec's providers.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/<spec name>/).")] = None,
    backend: Annotated[str, typer.Option(help="highs | ortools | pyomo")] = "highs",
    method: Annotated[str, typer.Option(help="mip | exhaustive")] = "mip",
    bands: Annotated[int, typer.Option(help="Budget bands of the frontier (>= 2).")] = 40,
    workers: Annotated[int | None, typer.Option(help="Processes for the design tables (default: CPUs).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print solution.json to stdout.")] = False,
    plot: Annotated[bool, typer.Option("--plot", help="Also write frontier.png.")] = False,
    write_model: Annotated[
        Path | None, typer.Option(help="Write the MIP at the budget as .lp or .mps (pyomo).")
    ] = None,
) -> None:
    """Search designs x VMs x storage x SLAs x providers: the certified optimum and its Pareto frontier."""
    with cli_errors(str(spec)):
        from cost_models.pricing import load_catalog
        from solver.backends import get_backend
        from solver.run import run_solve
        from specs.schema import load_spec

        s = load_spec(spec)
        if method not in ("mip", "exhaustive"):
            raise InputError(f"--method: must be mip or exhaustive, got {method!r}")
        be = get_backend(backend)
        provs = tuple(p.strip() for p in providers.split(",") if p.strip()) if providers else None
        run_dir = out or Path("runs") / s.name
        cat = load_catalog(s.pricing)
        with _progress_bar() as bar:
            task = bar.add_task("building design tables", total=1)

            def prog(stage: str, done: int, total: int) -> None:
                if stage == "tables":
                    bar.update(task, description="building design tables", completed=0, total=1)
                else:
                    bar.update(task, description="solving budget bands", completed=done, total=total)

            run = run_solve(
                s,
                cat,
                be,
                method=method,
                bands=bands,
                budget=budget,
                providers=provs,
                out_dir=run_dir,
                workers=workers,
                progress=None if as_json else prog,
            )
        if plot:
            from solver.plot import plot_frontier

            plot_frontier(run_dir)
        if write_model is not None:
            from solver.backends import PyomoBackend
            from solver.model import build_mip

            ctx = run.tables.contexts.get(run.solution["provider"], [])
            m, _ = build_mip(s, cat, ctx, run.solution["budget"], providers=[run.solution["provider"]])
            if write_model.suffix not in (".lp", ".mps"):
                raise InputError("--write-model: the file must end in .lp or .mps")
            PyomoBackend().write(m, write_model)
        if as_json:
            from solver.frontier import to_json

            typer.echo(to_json(run.solution))
        else:
            from solver.report import print_solution

            print_solution(run.solution)
            typer.echo(
                f"wrote {run_dir}/solution.json, frontier.parquet, solver.log.jsonl, solver/"
                + (", frontier.png" if plot else "")
            )


@app.command()
def audit(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `cosine solve`.")],
    max_gap: Annotated[float, typer.Option(help="Largest acceptable MIP gap.")] = 0.001,
    max_approx_error: Annotated[float, typer.Option(help="Largest acceptable approximation error.")] = 0.01,
) -> None:
    """Check every band's certificate; exit 1 if any is over the thresholds."""
    with cli_errors(str(run_dir)):
        from rich.console import Console
        from rich.table import Table

        from solver.audit import audit as do_audit

        rows = do_audit(run_dir, max_gap, max_approx_error)
        t = Table(title=f"audit of {run_dir} (max gap {max_gap:g}, max approximation error {max_approx_error:g})")
        for c in ("band", "provider", "budget", "status", "MIP gap", "approx error", "nodes", "wall s", "flags"):
            t.add_column(c)
        flagged = 0
        for r in rows:
            rec = r.record
            flagged += bool(r.flags)

            def f(v: object, fmt: str) -> str:
                return "-" if v is None else format(v, fmt)

            t.add_row(
                str(rec["band"]),
                rec["provider"],
                f"${rec['budget']:,.0f}",
                rec["status"],
                f(rec.get("mip_gap"), ".1e"),
                f(rec.get("approx_error"), ".1e"),
                f(rec.get("nodes"), "d"),
                f(rec.get("wall_s"), ".3f"),
                ("[red]" + "; ".join(r.flags) + "[/]") if r.flags else "ok",
            )
        Console().print(t)
        typer.echo(f"{flagged} of {len(rows)} bands flagged")
        if flagged:
            raise typer.Exit(1)


@app.command()
def whatif(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `cosine solve`.")],
    budget: Annotated[float | None, typer.Option(help="Best configuration within this monthly budget.")] = None,
    throughput: Annotated[float | None, typer.Option(help="Cheapest configuration reaching this ops/s.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Answer instantly from the saved frontier (no re-solve)."""
    with cli_errors(str(run_dir)):
        from solver.audit import whatif as do_whatif
        from solver.frontier import to_json

        ans = do_whatif(run_dir, budget, throughput)
        if as_json:
            typer.echo(to_json(ans))
            return
        a = ans["answer"]
        if a is None:
            typer.echo(ans["note"])
            return
        cfg = a["configuration"]
        vms = ", ".join(f"{v['count']} x {v['type']}" for v in cfg.get("vms", []))
        typer.echo(
            f"{a['provider']}: {vms} ({a['class']}) -> {a['throughput_ops']:,.0f} ops/s for "
            f"${a['monthly_cost']:,.2f}/month (saved band {a['band']}, budget ${a['budget']:,.0f})"
        )
        for p, v in ans["per_provider"].items():
            typer.echo(f"  {p}: {v['throughput_ops']:,.0f} ops/s for ${v['monthly_cost']:,.2f}/month")


@app.command()
def sweep(
    specs: Annotated[list[Path], typer.Argument(help="One or more specs.")],
    budgets: Annotated[str, typer.Option(help="LO:HI:N geometric budget grid.")],
    out: Annotated[Path, typer.Option(help="Output .parquet (resumed if it exists).")],
    workers: Annotated[int, typer.Option(help="Parallel processes.")] = 1,
    backend: Annotated[str, typer.Option(help="highs | ortools | pyomo")] = "highs",
) -> None:
    """Batch-solve specs x budgets in parallel: one row per (spec, budget, provider), resumable."""
    with cli_errors():
        from solver.backends import get_backend
        from solver.sweep import parse_budgets
        from solver.sweep import sweep as do_sweep

        if workers < 1:
            raise InputError("--workers must be at least 1")
        get_backend(backend)
        grid = parse_budgets(budgets)
        with _progress_bar() as bar:
            task = bar.add_task("sweeping", total=1)

            def prog(done: int, total: int) -> None:
                bar.update(task, completed=done, total=max(total, 1))

            res = do_sweep(list(specs), grid, out, workers=workers, backend=backend, progress=prog)
        typer.echo(f"{out}: {res['rows']} rows ({res['new']} new, {res['skipped']} already there)")


@app.command()
def render(
    solution: Annotated[Path | None, typer.Argument(help="RUN_DIR/solution.json written by `cosine solve`.")] = None,
    out: Annotated[Path, typer.Option(help="Directory for the rendered Rust workspace.")] = Path("engine"),
    preset: Annotated[str | None, typer.Option(help="Render a baseline instead: rocksdb | wiredtiger | faster")] = None,
    wal_sync: Annotated[str, typer.Option(help="every_write | group_commit | none")] = "group_commit",
) -> None:
    """Render a solution's engine design (or a preset) as a Rust engine workspace."""
    with cli_errors():
        from solver.render import render_preset, render_solution

        if wal_sync not in ("every_write", "group_commit", "none"):
            raise InputError(f"--wal-sync: must be every_write, group_commit or none, got {wal_sync!r}")
        if (solution is None) == (preset is None):
            raise InputError("give a solution.json or --preset, not both")
        if solution is not None:
            path = solution / "solution.json" if solution.is_dir() else solution
            files = render_solution(path, out, wal_sync=wal_sync)
        else:
            files = [render_preset(preset or "", out, wal_sync=wal_sync)]
        typer.echo(f"rendered {out}: " + ", ".join(str(f.relative_to(out)) for f in files))
        typer.echo(f"next: (cd {out} && cargo build --release && cargo test --release)")


@app.command()
def bench(
    spec: Annotated[Path, typer.Argument(help="Workload spec (YAML): the operation mix and distributions to run.")],
    engine: Annotated[Path, typer.Option(help="A workspace written by `cosine render`.")],
    records: Annotated[int | None, typer.Option(help="Records to load (default: min(spec, 1,000,000)).")] = None,
    ops: Annotated[int | None, typer.Option(help="Operations to run (default: = records).")] = None,
    threads: Annotated[
        int | None, typer.Option(help="Worker threads (default: the design's, capped at the CPUs).")
    ] = None,
    peer: Annotated[
        str, typer.Option(help="cosine | rocksdb | fjall (peers need bench/engine_peers_setup.sh)")
    ] = "cosine",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Build (if needed) and run the engine's YCSB-style driver on a spec's workload."""
    with cli_errors(str(spec)):
        from bench.engine import bench_spec, build
        from specs.schema import load_spec

        s = load_spec(spec)
        if peer not in ("cosine", "rocksdb", "fjall"):
            raise InputError(f"--peer: must be cosine, rocksdb or fjall, got {peer!r}")
        if not engine.is_dir():
            raise InputError(f"--engine {engine}: no such directory (run `cosine render` first)")
        with _progress_bar() as bar:
            task = bar.add_task("building the engine (cargo build --release)", total=None)
            if not as_json:
                build(engine)
            bar.update(task, description="loading records and running the workload")
            res = bench_spec(s, engine, records=records, operations=ops, threads=threads, engine=peer)
        if as_json:
            from solver.frontier import to_json

            typer.echo(to_json({**res.report, "scale": res.scale, "notes": res.notes, "workload": res.workload}))
            return
        from rich.console import Console
        from rich.table import Table

        r = res.report
        con = Console()
        for n in res.notes:
            con.print(f"[yellow]note:[/] {n}")
        run_ = r["run"]
        lat = run_["latency_us"]
        con.print(
            f"[bold]{r['design']}[/] ({r['class']}): {run_['throughput_ops']:,.0f} ops/s with {r['threads']} "
            f"threads; latency p50 {lat['p50']:.1f} us, p99 {lat['p99']:.1f} us, p99.9 {lat['p999']:.1f} us; "
            f"load {r['load']['throughput_ops']:,.0f} records/s"
        )
        t = Table(title="blocks per operation (storage I/O, buffer and cache hits excluded)")
        for c in ("operation", "count", "blocks read / op", "blocks written / op"):
            t.add_column(c, justify="right")
        for op, v in r["per_op"].items():
            if v["count"]:
                t.add_row(
                    op,
                    f"{v['count']:,}",
                    f"{v['blocks_read'] / v['count']:.4f}",
                    f"{v['blocks_written'] / v['count']:.4f}",
                )
        bg = r.get("background", {})
        puts = sum(v["count"] for k, v in r["per_op"].items() if k in ("insert", "update", "rmw"))
        if puts:
            io = (
                bg.get("flush_blocks_written", 0)
                + bg.get("compaction_blocks_read", 0)
                + bg.get("compaction_blocks_written", 0)
            )
            t.add_row("flush+compaction per write", f"{puts:,}", "", f"{io / puts:.4f}")
        con.print(t)


def _parse_rhos(text: str) -> tuple[float, ...]:
    ladder = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
    try:
        if ".." in text:
            lo, hi = (float(x) for x in text.split("..", 1))
            vals = tuple(r for r in ladder if lo <= r <= hi) or (lo, hi)
        else:
            vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"--rho {text!r}: expected LO..HI (e.g. 0..4) or a comma list (e.g. 0,0.5,1)") from None
    if not vals or any(v < 0 or v != v for v in vals):
        raise InputError(f"--rho {text!r}: radii must be non-negative numbers")
    return tuple(sorted(set(vals) | {0.0}))


@app.command("robust-eval")
def robust_eval(
    samples: Annotated[int, typer.Option(help="Observed workloads drawn from the simplex.")] = 10_000,
    rho: Annotated[str, typer.Option(help="Expected KL radii: LO..HI or a comma list.")] = "0..4",
    out: Annotated[Path, typer.Option(help="Directory for robust_eval.parquet and the plots.")] = Path(
        "runs/robust-eval"
    ),
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 7,
) -> None:
    """ENDURE's uncertainty benchmark on the Cosine model: robust vs nominal tuning."""
    with cli_errors():
        import pyarrow as pa
        import pyarrow.parquet as pq
        from rich.console import Console
        from rich.table import Table

        from solver.robust_eval import buckets, plots, run

        if samples < 100:
            raise InputError("--samples must be at least 100")
        ev = run(samples=samples, rhos=_parse_rhos(rho), seed=seed)
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(ev.rows), out / "robust_eval.parquet")
        pq.write_table(pa.Table.from_pylist(ev.tunings), out / "tunings.parquet")
        pngs = plots(ev, out)
        con = Console()
        t = Table(title=f"normalized delta throughput, robust vs nominal ({samples:,} observed workloads)")
        for c in ("workload type", "expected rho", "mean delta", "median delta", "robust better", "robust worse"):
            t.add_column(c, justify="right")
        for r in ev.summary:
            if r["rho_expected"] > 0:
                t.add_row(
                    r["type"],
                    f"{r['rho_expected']:g}",
                    f"{r['mean_delta']:+.3f}",
                    f"{r['median_delta']:+.3f}",
                    f"{r['share_better']:.0%}",
                    f"{r['share_worse']:.0%}",
                )
        con.print(t)
        b = Table(title="mean delta by observed drift KL(observed || expected)")
        b.add_column("expected rho")
        edges = sorted({(x["observed_from"], x["observed_to"]) for x in buckets(ev.rows)})
        for lo, hi in edges:
            b.add_column(f"{lo:g}-{hi:g}", justify="right")
        for r in sorted({x["rho_expected"] for x in ev.rows}):
            if r == 0:
                continue
            vals = {
                (x["observed_from"], x["observed_to"]): x["mean_delta"]
                for x in buckets(ev.rows)
                if x["rho_expected"] == r
            }
            b.add_row(f"{r:g}", *[f"{vals.get(e, float('nan')):+.3f}" for e in edges])
        con.print(b)
        typer.echo(f"wrote {out}/robust_eval.parquet, tunings.parquet, " + ", ".join(p.name for p in pngs))


@app.command()
def plan(
    trace: Annotated[
        Path, typer.Argument(help="Predicted workloads: CSV or parquet (time_s, op fractions, load_ops).")
    ],
    spec: Annotated[Path, typer.Option(help="Data size, budget and providers.")] = Path("specs/traces/sophia.yaml"),
    lookahead: Annotated[
        int | None, typer.Option(help="Re-plan every H steps (SOPHIA's T_L); default the whole trace.")
    ] = None,
    rf: Annotated[int, typer.Option(help="Replication factor.")] = 3,
    cl: Annotated[int, typer.Option(help="Consistency level.")] = 1,
    provider: Annotated[str | None, typer.Option(help="Provider (default: the spec's first).")] = None,
    start: Annotated[
        str, typer.Option(help="free | default: the plan may or may not choose its first configuration.")
    ] = "free",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """When to reconfigure, and to what, for a time-varying workload (SOPHIA), against its baselines."""
    with cli_errors(str(trace)):
        import warnings

        from cost_models.pricing import load_catalog
        from solver.frontier import to_json
        from solver.plan_build import report_dict, run_plan
        from specs.schema import load_spec

        if rf < 1 or cl < 1:
            raise InputError("--rf and --cl must be at least 1")
        if cl > rf:
            raise InputError(f"--cl {cl} cannot exceed --rf {rf}")
        if start not in ("free", "default"):
            raise InputError(f"--start: must be free or default, got {start!r}")
        s = load_spec(spec)
        cat = load_catalog(s.pricing)
        with warnings.catch_warnings(), _progress_bar() as bar:
            warnings.simplefilter("ignore", RuntimeWarning)
            task = bar.add_task("building candidate configurations", total=None)

            def prog(stage: str, done: int, total: int) -> None:
                bar.update(task, description=stage, completed=done, total=max(total, 1))

            built, results = run_plan(
                trace,
                s,
                cat,
                lookahead=lookahead,
                rf=rf,
                cl=cl,
                provider=provider,
                start=start,
                progress=None if as_json else prog,
            )
        d = report_dict(built, results)
        if as_json:
            typer.echo(to_json(d))
            return
        from rich.console import Console
        from rich.table import Table

        con = Console()
        t = Table(title=f"{trace.name}: operations served over the horizon (RF={rf}, CL={cl})")
        for c in ("strategy", "total ops", "vs default", "vs optimum", "switches"):
            t.add_column(c, justify="right")
        for r in d["results"]:
            t.add_row(
                r["label"],
                f"{r['total_ops']:,.3g}",
                f"{r['vs_default']:+.1%}" if r["vs_default"] is not None else "-",
                f"{r['vs_optimum']:+.1%}" if r["vs_optimum"] is not None else "-",
                str(r["n_switches"]),
            )
        con.print(t)
        cfg = Table(title="candidate configurations")
        for c in ("name", "nodes", "hardware", "class", "origin"):
            cfg.add_column(c)
        for c in d["configurations"]:
            cfg.add_row(str(c["name"]), str(c["nodes"]), str(c["hardware"]), str(c["class"]), str(c["origin"]))
        con.print(cfg)
        plan_row = next(r for r in d["results"] if r["key"] == "plan")
        for sw in plan_row.get("switches", [])[:20]:
            con.print(f"  switch at step {sw['step']} (t={sw['start_s']:,.0f} s): {sw['from']} -> {sw['to']}")
        con.print(f"certificate: {d['certificate']}")


@app.command()
def validate(
    out: Annotated[Path, typer.Option(help="Directory for validation.parquet and validation.png.")] = Path(
        "runs/validate"
    ),
    quick: Annotated[bool, typer.Option("--quick", help="A reduced grid (a few minutes).")] = False,
    records: Annotated[int | None, typer.Option(help="Records loaded per run (default 1e6; quick 5e4).")] = None,
    ops: Annotated[int | None, typer.Option(help="Operations per run (writes run 3x longer).")] = None,
    min_accuracy: Annotated[float | None, typer.Option(help="Exit 1 if the mean accuracy is below this.")] = None,
) -> None:
    """The model's I/O per operation against the engine's counters over a grid of designs x workloads."""
    with cli_errors():
        import pyarrow as pa
        import pyarrow.parquet as pq
        from rich.console import Console
        from rich.table import Table

        from bench.validate import plot
        from bench.validate import validate as run_validation

        n = records or (50_000 if quick else 1_000_000)
        m = ops or (50_000 if quick else 200_000)
        if n < 1000 or m < 100:
            raise InputError("--records must be at least 1000 and --ops at least 100")
        with _progress_bar() as bar:
            task = bar.add_task("validating", total=1)

            def prog(done: int, total: int, what: str) -> None:
                bar.update(task, description=what, completed=done, total=total)

            v = run_validation(n, m, quick, progress=prog)
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(v.rows), out / "validation.parquet")
        png = plot(v, out)
        s = v.summary()
        con = Console()
        t = Table(title=f"model vs engine: {s['cases']} cases, {n:,} records")
        t.add_column("group")
        t.add_column("mean accuracy", justify="right")
        t.add_row("[bold]all[/]", f"[bold]{s['mean_accuracy']:.1%}[/]")
        for k, v_ in s["by_class"].items():
            t.add_row(f"class {k}", f"{v_:.1%}")
        for k, v_ in s["by_op"].items():
            t.add_row(f"op {k}", f"{v_:.1%}")
        t.add_row("conservative (model >= engine)", f"{s['conservative_share']:.0%}")
        con.print(t)
        typer.echo(f"wrote {out}/validation.parquet, {png.name}")
        if min_accuracy is not None and s["mean_accuracy"] < min_accuracy:
            typer.echo(f"mean accuracy {s['mean_accuracy']:.1%} is below {min_accuracy:.1%}", err=True)
            raise typer.Exit(1)


@app.command()
def calibrate(
    quick: Annotated[bool, typer.Option("--quick", help="Smaller data sizes (a few minutes).")] = False,
    write: Annotated[bool, typer.Option(help="Rewrite cost_models/data/phi.yaml with the result.")] = True,
    out: Annotated[Path, typer.Option(help="Directory for calibration.parquet and fig4b.parquet.")] = Path(
        "runs/calibrate"
    ),
    samples_from: Annotated[
        Path | None,
        typer.Option("--samples", help="Refit a saved calibration.parquet instead of measuring (Fig. 4B still runs)."),
    ] = None,
) -> None:
    """Learn phi and the CPU time per operation on the Rust engine (Algorithm 1); check Fig. 4B."""
    with cli_errors():
        import os
        from dataclasses import asdict

        import pyarrow as pa
        import pyarrow.parquet as pq
        from rich.console import Console
        from rich.table import Table

        from bench.calibrate import Sample, fig4b, fit, measure, write_table

        sizes: tuple[int, ...] = (20_000, 80_000) if quick else (100_000, 500_000)
        ops = 30_000 if quick else 200_000
        threads = tuple(range(1, max(2, os.cpu_count() or 1) + 1))
        with _progress_bar() as bar:
            task = bar.add_task("calibrating", total=1)

            def prog(done: int, total: int, what: str) -> None:
                bar.update(task, description=what, completed=done, total=total)

            if samples_from is not None:
                if not samples_from.is_file():
                    raise InputError(f"--samples: {samples_from} does not exist")
                try:
                    samples = [Sample(**r) for r in pq.read_table(samples_from).to_pylist()]
                except (pa.ArrowInvalid, TypeError) as exc:
                    raise InputError(f"--samples {samples_from}: not a calibration.parquet ({exc})") from exc
                sizes = tuple(sorted({s.records for s in samples}))
            else:
                samples = measure(sizes, ops, threads, progress=prog)
            res = fit(samples)
            bar.update(task, description="Fig. 4B: mixed workload across threads")
            rows = fig4b(tuple(sorted({1, 2, 4} | set(threads))), sizes[-1], ops, res)
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist([asdict(x) for x in samples]), out / "calibration.parquet")
        pq.write_table(pa.Table.from_pylist(rows), out / "fig4b.parquet")
        con = Console()
        t = Table(title="learned phi (Eq. 2) and CPU microseconds per operation")
        t.add_column("class / op")
        for op in ("get", "empty_get", "range", "insert", "update", "rmw"):
            t.add_column(op, justify="right")
        for cls in ("lsm", "btree", "lsh", "hybrid"):
            t.add_row(
                f"{cls} phi",
                *[
                    f"{res['phi'].get((cls, op), float('nan')):.2f}"
                    for op in ("get", "empty_get", "range", "insert", "update", "rmw")
                ],
            )
            t.add_row(
                f"{cls} cpu us",
                *[
                    f"{1e6 * res['cpu'].get((cls, op), float('nan')):.2f}"
                    for op in ("get", "empty_get", "range", "insert", "update", "rmw")
                ],
            )
        con.print(t)
        con.print(
            f"per-block time on this machine: {1e6 * res['t_block']:.2f} us + {1e9 * res['t_block_byte']:.3f} ns/byte "
            f"read, {1e6 * res['t_bg']:.2f} us merged"
        )
        f = Table(title="Fig. 4B: 25% lookups/inserts/updates/rmws, model vs engine throughput")
        for c in ("class", "threads", "predicted ops/s", "measured ops/s", "accuracy", "p99 us"):
            f.add_column(c, justify="right")
        for r in rows:
            f.add_row(
                r["class"],
                str(r["threads"]),
                f"{r['predicted_ops']:,.0f}",
                f"{r['measured_ops']:,.0f}",
                f"{r['accuracy']:.1%}",
                f"{r['p99_us']:.1f}",
            )
        con.print(f)
        if write:
            p = write_table(res, samples)
            typer.echo(f"wrote {p}")
        typer.echo(f"wrote {out}/calibration.parquet, fig4b.parquet")


@pricing_app.command("build")
def pricing_build() -> None:
    """Rebuild pricing.parquet from the CSV sources in pricing/."""
    with cli_errors():
        from cost_models.pricing import PRICING_SOURCE_DIR, build_parquet

        path, rows = build_parquet()
        typer.echo(f"wrote {path} ({rows} rows from {PRICING_SOURCE_DIR}/*.csv)")


@pricing_app.command("show")
def pricing_show(
    provider: Annotated[str | None, typer.Option(help="aws | gcp | azure")] = None,
    price_set: Annotated[str, typer.Option("--set", help="paper2021 | ondemand | committed1y | spot")] = "paper2021",
    kind: Annotated[str | None, typer.Option(help="vm | storage | sla")] = None,
) -> None:
    """Print the pricing catalog as a table."""
    with cli_errors():
        from rich.console import Console
        from rich.table import Table

        from cost_models.pricing import PRICE_SETS, PROVIDERS, catalog_rows, price_summary

        if price_set not in PRICE_SETS:
            raise InputError(f"--set: unknown price set {price_set!r} (valid: {', '.join(PRICE_SETS)})")
        if provider is not None and provider not in PROVIDERS:
            raise InputError(f"--provider: unknown provider {provider!r} (valid: {', '.join(PROVIDERS)})")
        if kind is not None and kind not in ("vm", "storage", "sla"):
            raise InputError(f"--kind: must be vm, storage or sla, got {kind!r}")
        rows = catalog_rows(price_set, provider)
        con = Console()
        for k in ("vm", "storage", "sla"):
            if kind and k != kind:
                continue
            sel = [r for r in rows if r["kind"] == k]
            if not sel:
                continue
            t = Table(title=f"{k} prices ({price_set})")
            for c in ("provider", "name", "figures", "price", "as of"):
                t.add_column(c, overflow="fold")
            for r in sel:
                figures, price = price_summary(r)
                t.add_row(
                    r["provider"],
                    r["name"] if k != "sla" else f"{r['feature']}: {r['name']}",
                    figures,
                    price,
                    r["as_of"] or "",
                )
            con.print(t)


if __name__ == "__main__":
    app()
