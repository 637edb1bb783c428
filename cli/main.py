"""`cosine`: the command line (typer only).

Each command parses its options (choices are the Enums of ``specs.vocab``),
makes one call into its stage (``solver``, ``render``, ``measure``,
``studies``, ``deploy``) and prints through ``report``. ``calibrate``,
``validate`` and ``pricing`` are sub-apps (cli/calibrate.py, cli/validate.py,
cli/pricing.py). Heavy packages are imported inside commands so that ``cosine
--help`` stays instant. Every error a user can cause is one line on stderr and
exit 2 (:func:`cli.common.cli_errors`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli import calibrate, pricing, validate
from cli.common import OUT_PATH, OneLineErrors, cli_errors, echo_json
from deploy.raft import Consistency, Routing
from specs.errors import ExitCode, InputError, unwind_on_termination
from specs.vocab import (
    MODELLED_WAL_SYNC,
    BackendName,
    CostModel,
    DeploymentStatus,
    EnginePeer,
    Method,
    PlanStart,
    Provider,
    WalSync,
)
from specs.vocab import Preset as PresetName

app = typer.Typer(
    cls=OneLineErrors,
    help="Cosine: co-design a key-value storage engine and its cloud deployment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(calibrate.app, name="calibrate")
app.add_typer(validate.app, name="validate")
app.add_typer(pricing.app, name="pricing")


# ----------------------------------------------------------------------------- model and search


@app.command()
def evaluate(
    spec: Annotated[Path, typer.Argument(help="Workload spec (YAML).")],
    design: Annotated[
        str, typer.Option(help="rocksdb | wiredtiger | faster | T=8,K=3,Z=1,buffer=1GiB,bloom_bits=10")
    ] = "rocksdb",
    vm: Annotated[str, typer.Option(help="PROVIDER:TYPE[xCOUNT], e.g. aws:r5d.xlarge[x3]")] = "aws:r5d.xlarge[x3]",
    model: Annotated[CostModel | None, typer.Option(help="The I/O model (default: the spec's cost_model).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Predict I/O per operation, latency, throughput and the monthly bill of one design on given VMs."""
    with cli_errors():
        from cost_models.evaluate import evaluate_ref
        from specs.schema import load_spec

        s = load_spec(spec)
        out = evaluate_ref(s, design, vm, model)
        if as_json:
            echo_json(out)
        else:
            from report.solve import print_evaluation

            print_evaluation(out, s.workload.operations)


#: ``--no-cache`` of `cosine solve` and `cosine sweep`.
NoCache = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Neither read nor write the table, re-evaluation and band caches ($COSINE_CACHE_DIR, else the user "
        "cache dir ~/.cache/cosine/tables).",
    ),
]


@app.command()
def solve(
    spec: Annotated[Path, typer.Argument(help="Workload spec (YAML).")],
    budget: Annotated[float | None, typer.Option(help="Monthly budget in USD (default: the spec's).")] = None,
    providers: Annotated[str | None, typer.Option(help="Comma-separated subset of the spec's providers.")] = None,
    out: Annotated[Path | None, typer.Option(**OUT_PATH, help="Run directory (default runs/<spec name>/).")] = None,
    backend: Annotated[BackendName, typer.Option(help="MIP back end.")] = BackendName.HIGHS,
    method: Annotated[
        Method,
        typer.Option(
            help="threshold: each band MIP by its bottleneck (exact, fast); mip: the whole band MIP "
            "by the back end; exhaustive: enumeration (small instances)."
        ),
    ] = Method.THRESHOLD,
    bands: Annotated[int, typer.Option(help="Budget bands of the frontier (>= 2).")] = 40,
    workers: Annotated[int | None, typer.Option(help="Processes for the design tables (default: CPUs).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print solution.json to stdout.")] = False,
    plot: Annotated[bool, typer.Option("--plot", help="Also write frontier.png.")] = False,
    write_model: Annotated[
        Path | None, typer.Option(help="Write the MIP at the budget as .lp or .mps (pyomo).")
    ] = None,
    no_cache: NoCache = False,
) -> None:
    """Search designs x VMs x storage x SLAs x providers: the certified optimum and its Pareto frontier."""
    with cli_errors():
        from cost_models.pricing.catalog import load_catalog
        from report.progress import progress_bar
        from solver.backends import get_backend
        from solver.solve import (
            RUN_FILES,
            check_cluster_room,
            check_model_path,
            check_options,
            parse_providers,
            run_solve,
        )
        from solver.table_cache import TableCache
        from specs.io import check_run_dir
        from specs.schema import load_spec

        s = load_spec(spec)
        be = get_backend(backend)
        provs = parse_providers(providers, s)
        check_options(s, budget=budget, bands=bands, providers=provs, workers=workers)
        if write_model is not None:
            check_model_path(write_model)
        run_dir = out if out is not None else Path("runs") / s.name
        check_run_dir(
            run_dir, "--out" if out is not None else "the default run directory (runs/<spec name>)", RUN_FILES
        )
        cat = load_catalog(s.pricing)
        check_cluster_room(s, cat, provs if provs is not None else s.providers)
        cache = None if no_cache else TableCache()
        with progress_bar() as bar:
            tasks = {"tables": bar.add_task("building design tables", total=1)}

            def prog(stage: str, done: int, total: int) -> None:
                # a task per stage: the bands' rate and ETA count from their own start
                if stage not in tasks:
                    tasks[stage] = bar.add_task("solving budget bands", total=max(total, 1))
                bar.update(tasks[stage], completed=done, total=max(total, 1))

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
                progress=prog,  # on stderr: stdout keeps the JSON
                cache=cache,
            )
        for note in cache.notes if cache is not None else []:
            typer.echo(note, err=True)
        written = ["solution.json", "frontier.parquet", "solver.log.jsonl", "solver/"]
        if plot:
            from report.plots import plot_frontier

            written.append(plot_frontier(run_dir).name)
        if write_model is not None:
            from solver.solve import write_model as write_mip

            written.append(str(write_mip(run, cat, write_model)))
        from report.solve import print_envelope_warning

        if as_json:
            echo_json(run.solution)
        else:
            from report.solve import print_solution, print_written

            print_solution(run.solution)
            print_written(f"{run_dir}/" + ", ".join(written))
        print_envelope_warning(run.solution)


@app.command()
def audit(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `cosine solve`.")],
    max_gap: Annotated[float, typer.Option(help="Largest acceptable MIP gap.")] = 0.001,
    max_approx_error: Annotated[float, typer.Option(help="Largest acceptable approximation error.")] = 0.01,
    max_grid_gap: Annotated[
        float, typer.Option(help="Largest acceptable grid gap (another count of the answer's nodes beating it).")
    ] = 0.01,
) -> None:
    """Check every band's certificate; exit 1 if any is over the thresholds."""
    with cli_errors():
        from report.solve import print_audit
        from solver.audit import audit as do_audit

        rows = do_audit(run_dir, max_gap, max_approx_error, max_grid_gap)
        flagged = print_audit(rows, str(run_dir), max_gap, max_approx_error, max_grid_gap)
        if flagged:
            raise typer.Exit(ExitCode.FLAGGED)


@app.command()
def whatif(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `cosine solve`.")],
    budget: Annotated[float | None, typer.Option(help="Best configuration within this monthly budget.")] = None,
    throughput: Annotated[float | None, typer.Option(help="Cheapest configuration reaching this ops/s.")] = None,
    providers: Annotated[str | None, typer.Option(help="Comma-separated subset of the run's providers.")] = None,
    saved: Annotated[
        bool, typer.Option("--saved", help="Answer from the saved bands (instant, no re-solve) instead of re-solving.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The answer at the asked budget or throughput, re-solved from the cached tables (= `cosine solve --budget`)."""
    with cli_errors():
        from solver.whatif import whatif as do_whatif

        ans = do_whatif(run_dir, budget, throughput, saved=saved, providers=providers)
        if as_json:
            echo_json(ans)
        else:
            from report.solve import print_whatif

            print_whatif(ans)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `cosine solve`.")],
    out: Annotated[Path | None, typer.Option(**OUT_PATH, help="The HTML file (default RUN_DIR/report.html).")] = None,
) -> None:
    """Write the run as one self-contained, offline what-if page (frontier, budget slider, bill, certificate)."""
    with cli_errors():
        from report.html import write_report
        from report.solve import print_written

        print_written(str(write_report(run_dir, out)))


@app.command()
def sweep(
    specs: Annotated[list[Path], typer.Argument(help="One or more specs.")],
    budgets: Annotated[str, typer.Option(help="LO:HI:N geometric budget grid.")],
    out: Annotated[Path, typer.Option(**OUT_PATH, help="Output .parquet (resumed if it exists).")],
    workers: Annotated[
        int | None, typer.Option(help="Local Dask cluster's processes [default: one per core]; 1 = serial, no Dask.")
    ] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="Run on an existing Dask cluster: its scheduler's tcp://HOST:PORT.")
    ] = None,
    backend: Annotated[BackendName, typer.Option(help="MIP back end.")] = BackendName.HIGHS,
    no_cache: NoCache = False,
) -> None:
    """Batch-solve specs x budgets on a Dask cluster: one row per (spec, budget, provider), resumable."""
    with cli_errors():
        from report.progress import counting_bar
        from report.solve import print_written
        from solver.backends import get_backend
        from solver.sweep import parse_budgets
        from solver.sweep import sweep as do_sweep
        from solver.tables.build import check_workers

        check_workers(workers)
        get_backend(backend)
        grid = parse_budgets(budgets)
        notes: list[str] = []  # a refused journal part or cache file, said after the bar
        with counting_bar("solves") as bar:
            task = bar.add_task("sweeping", total=None)

            def prog(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            res = do_sweep(
                list(specs),
                grid,
                out,
                workers=workers,
                scheduler=scheduler,
                backend=backend,
                progress=prog,
                cache=not no_cache,
                notes=notes,
            )
        for note in notes:
            typer.echo(note, err=True)
        print_written(f"{out}: {res['rows']} rows ({res['new']} new, {res['skipped']} already there)")


# ----------------------------------------------------------------------------- the engine


@app.command()
def render(
    solution: Annotated[Path | None, typer.Argument(help="RUN_DIR/solution.json written by `cosine solve`.")] = None,
    out: Annotated[Path, typer.Option(**OUT_PATH, help="Directory for the rendered Rust workspace.")] = Path("engine"),
    preset: Annotated[PresetName | None, typer.Option(help="Render a baseline instead.")] = None,
    wal_sync: Annotated[WalSync, typer.Option(help="The engine's WAL policy.")] = MODELLED_WAL_SYNC,
) -> None:
    """Render a solution's engine design (or a preset) as a Rust engine workspace."""
    with cli_errors():
        from render.workspace import render_preset, render_solution
        from report.solve import print_written

        if (solution is None) == (preset is None):
            raise InputError("give a solution.json or --preset, not both")
        if solution is not None:
            path = solution / "solution.json" if solution.is_dir() else solution
            files = render_solution(path, out, wal_sync=wal_sync)
        else:
            assert preset is not None
            files = [render_preset(preset, out, wal_sync=wal_sync)]
        print_written(f"{out}: " + ", ".join(str(f.relative_to(out)) for f in files))
        print_written(f"next: (cd {out} && cargo build --release && cargo test --release)")


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
        EnginePeer, typer.Option(help="The engine to drive (peers need bench/engine_peers_setup.sh).")
    ] = EnginePeer.COSINE,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    served: Annotated[
        bool,
        typer.Option(
            "--served",
            help="Serve the design with cosine-server (pinned to half the cores) and drive the mix over RESP "
            "from the other half (cosine-resp-bench); predicted beside measured throughput and p50/p99.",
        ),
    ] = False,
    pipeline: Annotated[int, typer.Option(help="--served: requests a connection pipelines.")] = 1,
    clients: Annotated[int, typer.Option(help="--served: client connections.")] = 50,
    nodes: Annotated[int, typer.Option(help="--served: cosine-servers behind nutcracker (1: no proxy).")] = 1,
) -> None:
    """Build (if needed) and run the engine's YCSB-style driver on a spec's workload (in process, or
    --served over RESP)."""
    with cli_errors():
        from measure.bench import bench_spec
        from report.progress import progress_bar
        from specs.schema import load_spec

        s = load_spec(spec)
        if served:
            from deploy.twemproxy import config_yaml
            from measure.served import bench_served

            with progress_bar() as bar:
                bar.add_task("serving the design and driving it over RESP", total=None)
                sres = bench_served(
                    s,
                    engine,
                    records=records,
                    operations=ops,
                    pipeline=pipeline,
                    clients=clients,
                    nodes=nodes,
                    proxy_config=lambda port, shards: config_yaml(port, shards),
                )
            if as_json:
                echo_json(sres.as_json())
            else:
                from report.measure import print_served

                print_served(sres.as_json(), sres.accuracy())
            return
        with progress_bar() as bar:
            bar.add_task("building the engine and running the workload", total=None)
            res = bench_spec(s, engine, records=records, operations=ops, threads=threads, engine=peer)
        if as_json:
            echo_json(res.as_json())
        else:
            from report.measure import print_bench

            print_bench(res.report, res.notes, res.prediction)


@app.command()
def deploy(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `cosine solve`.")],
    local: Annotated[bool, typer.Option("--local", help="Start the cluster on this machine.")] = False,
    status: Annotated[bool, typer.Option("--status", help="Show the running cluster.")] = False,
    down: Annotated[bool, typer.Option("--down", help="Stop the cluster (servers flush and close).")] = False,
    scale: Annotated[
        float | None, typer.Option(help="Memory of each node's design x S, 0 < S <= 1 (default: fit this machine).")
    ] = None,
    nodes: Annotated[
        int | None, typer.Option(help="Nodes to run (default: min(recommended, this machine's cores)).")
    ] = None,
    out: Annotated[Path | None, typer.Option(**OUT_PATH, help="Deployment directory (default RUN_DIR/deploy).")] = None,
    port: Annotated[int | None, typer.Option(help="The proxy's loopback port (default: a free one).")] = None,
    wal_sync: Annotated[WalSync, typer.Option(help="The engines' WAL policy.")] = MODELLED_WAL_SYNC,
    replicas: Annotated[
        int | None,
        typer.Option(help="Replicas per shard, 1..3, each a Raft group (default: the answer's replication factor)."),
    ] = None,
    routing: Annotated[
        Routing | None,
        typer.Option(help="proxy (nutcracker) or cluster (the Redis Cluster protocol); default: proxy iff RF 1."),
    ] = None,
    consistency: Annotated[
        Consistency, typer.Option(help="strong: reads through leaders; eventual: READONLY reads any replica.")
    ] = Consistency.STRONG,
    as_json: Annotated[bool, typer.Option("--json", help="Print the state as JSON.")] = False,
) -> None:
    """Run RUN_DIR's recommended cluster locally: one cosine-server per node behind twemproxy, or per shard
    a Raft group of --replicas cosine-servers that clients reach with the Redis Cluster protocol."""
    with cli_errors():
        from deploy.cluster import deploy_dir_of, health
        from deploy.cluster import down as stop_cluster
        from deploy.cluster import status as cluster_status
        from deploy.cluster import up as start_cluster
        from report.deploy import print_down, print_status, print_up

        if int(local) + int(status) + int(down) != 1:
            raise InputError("give exactly one of --local (start), --status or --down")
        d = deploy_dir_of(run_dir, out)
        if local:
            st = start_cluster(
                run_dir,
                out=out,
                nodes=nodes,
                scale=scale,
                wal_sync=wal_sync,
                proxy_port=port,
                replicas=replicas,
                routing=routing,
                consistency=consistency,
            )
            if as_json:
                echo_json(st)
            else:
                print_up(st)
        elif status:
            st, rows = cluster_status(d)
            h = health(st, rows)
            if as_json:
                echo_json({"state": st, "health": {**vars(h), "leaderless": h.leaderless}, "processes": rows})
            else:
                print_status(st, rows, h)
            if h.status == DeploymentStatus.DEGRADED:
                raise typer.Exit(ExitCode.FLAGGED)
        else:
            done = stop_cluster(d)
            if as_json:
                echo_json(dict(done))
            else:
                print_down(done)


# ----------------------------------------------------------------------------- studies


@app.command("robust-eval")
def robust_eval(
    samples: Annotated[int, typer.Option(help="Observed workloads drawn from the simplex.")] = 10_000,
    rho: Annotated[str, typer.Option(help="Expected KL radii: LO..HI or a comma list.")] = "0..4",
    out: Annotated[Path, typer.Option(**OUT_PATH, help="Directory for robust_eval.parquet and the plots.")] = Path(
        "runs/robust-eval"
    ),
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 7,
) -> None:
    """ENDURE's uncertainty benchmark on the Cosine model: robust vs nominal tuning."""
    with cli_errors():
        from report.plots import plot_robust_eval
        from report.solve import print_written
        from report.studies import print_robust_eval
        from specs.io import check_run_dir
        from studies.robust_eval import RUN_FILES, buckets, check_options, parse_rhos, run
        from studies.robust_eval import write as write_eval

        rhos = parse_rhos(rho)
        check_options(samples, rhos, seed)
        check_run_dir(out, "--out", RUN_FILES)
        ev = run(samples=samples, rhos=rhos, seed=seed)
        files = write_eval(ev, out) + plot_robust_eval(ev, out)
        print_robust_eval(ev.summary, buckets(ev.rows), samples)
        print_written(", ".join(str(f) for f in files))


@app.command()
def plan(
    trace: Annotated[
        Path, typer.Argument(help="Predicted workloads: CSV or parquet (time_s, op fractions, load_ops).")
    ],
    spec: Annotated[
        Path | None, typer.Option(help="Data size, budget and providers (default: specs/traces/sophia.yaml).")
    ] = None,
    lookahead: Annotated[
        int | None, typer.Option(help="Re-plan every H steps (SOPHIA's T_L); default the whole trace.")
    ] = None,
    rf: Annotated[int, typer.Option(help="Replication factor.")] = 3,
    cl: Annotated[int, typer.Option(help="Consistency level.")] = 1,
    provider: Annotated[Provider | None, typer.Option(help="Provider (default: the spec's first).")] = None,
    start: Annotated[PlanStart, typer.Option(help="May the plan choose its first configuration?")] = PlanStart.FREE,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """When to reconfigure, and to what, for a time-varying workload (SOPHIA), against its baselines."""
    with cli_errors():
        from cost_models.pricing.catalog import load_catalog
        from report.progress import progress_bar
        from solver.solve import check_latency_floor
        from specs.schema import load_spec
        from studies.plan.build import DEFAULT_SPEC, report_dict, run_plan

        s = load_spec(DEFAULT_SPEC if spec is None else spec)
        cat = load_catalog(s.pricing)
        check_latency_floor(s, cat, (provider,) if provider is not None else s.providers[:1])
        with progress_bar() as bar:
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
                progress=prog,  # on stderr: stdout keeps the JSON
            )
        d = report_dict(built, results)
        if as_json:
            echo_json(d)
        else:
            from report.studies import print_plan

            print_plan(d, trace.name, rf, cl)


def main() -> None:
    """The `cosine` program: the process is ours, so termination signals clean up too."""
    unwind_on_termination()
    app()


if __name__ == "__main__":
    main()
