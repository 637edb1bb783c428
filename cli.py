"""`cosine`: the command line (typer only).

Each command parses its options (choices are the Enums of ``specs.vocab``),
makes one call into its stage (``solver``, ``render``, ``measure``,
``studies``, ``cost_models``) and prints through ``report``. Heavy packages
are imported inside commands so that ``cosine --help`` stays instant. Every
error a user can cause is one line on stderr and exit 2 (:func:`cli_errors`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from specs.errors import BudgetTooLow, ExitCode, InputError, Terminated, unwind_on_termination
from specs.vocab import (
    BackendName,
    CatalogKind,
    CostModel,
    EnginePeer,
    Method,
    Operation,
    PlanStart,
    PriceSet,
    Provider,
    WalSync,
)
from specs.vocab import Preset as PresetName


def _interrupted(exc: BaseException) -> ExitCode:
    """Print why the command stopped; the exit code says which signal (130 Ctrl-C, 143 SIGTERM)."""
    if isinstance(exc, Terminated):
        typer.echo(f"terminated ({signal.Signals(exc.signum).name})", err=True)
        return ExitCode.TERMINATED
    typer.echo("interrupted", err=True)
    return ExitCode.INTERRUPTED


class OneLineErrors(TyperGroup):
    """Usage errors (a bad flag, an unknown choice, a missing argument) are one line on stderr and
    exit 2, like every other input error, instead of click's multi-line usage panel."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        standalone_mode = kwargs.pop("standalone_mode", True)
        try:
            rc = super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[misc]
        except typer.Abort as exc:
            rc = _interrupted(exc.__cause__ or exc)
        except Exception as exc:
            # click's usage errors (vendored by typer) carry format_message(); anything else is a bug
            fmt = getattr(exc, "format_message", None)
            if fmt is None:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # `cosine` alone: the help, as --help gives it
                typer.echo(fmt())
                rc = ExitCode.OK
            else:
                typer.echo(f"error: {' '.join(str(fmt()).split())}", err=True)
                rc = ExitCode.INPUT
        if not standalone_mode:
            return rc
        sys.exit(int(rc) if isinstance(rc, int) else ExitCode.OK)


app = typer.Typer(
    cls=OneLineErrors,
    help="Cosine: co-design a key-value storage engine and its cloud deployment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
pricing_app = typer.Typer(help="Inspect and rebuild the pricing catalog.", no_args_is_help=True)
app.add_typer(pricing_app, name="pricing")


@contextmanager
def cli_errors() -> Iterator[None]:
    """Print ``error: ...`` on one line and exit with the right code; no traceback."""
    try:
        yield
    except typer.Exit:
        raise
    except BudgetTooLow as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(ExitCode.BUDGET) from None
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(ExitCode.INPUT) from None
    except KeyboardInterrupt as exc:
        raise typer.Exit(_interrupted(exc)) from None
    except Exception as exc:
        if os.environ.get("COSINE_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        typer.echo(f"internal error: {type(exc).__name__}: {first} (set COSINE_DEBUG=1 for a traceback)", err=True)
        raise typer.Exit(ExitCode.FLAGGED) from None
    finally:
        sys.stdout.flush()


def _echo_json(obj: Any) -> None:
    from specs.io import to_json

    typer.echo(to_json(obj))


def _bar_callback(bar: Any, task: Any) -> Callable[[int, int, str], None]:
    def prog(done: int, total: int, what: str) -> None:
        bar.update(task, description=what, completed=done, total=max(total, 1))

    return prog


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
            _echo_json(out)
        else:
            from report.solve import print_evaluation

            print_evaluation(out, s.workload.operations)


#: ``--no-cache`` of `cosine solve` and `cosine sweep`.
NoCache = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Neither read nor write the table and re-evaluation caches ($COSINE_CACHE_DIR, else the user "
        "cache dir ~/.cache/cosine/tables).",
    ),
]


@app.command()
def solve(
    spec: Annotated[Path, typer.Argument(help="Workload spec (YAML).")],
    budget: Annotated[float | None, typer.Option(help="Monthly budget in USD (default: the spec's).")] = None,
    providers: Annotated[str | None, typer.Option(help="Comma-separated subset of the spec's providers.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/<spec name>/).")] = None,
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
        from cost_models.pricing import load_catalog
        from report.progress import progress_bar
        from solver.backends import get_backend
        from solver.solve import check_model_path, check_options, parse_providers, run_solve
        from solver.table_cache import TableCache
        from specs.io import check_output_dir
        from specs.schema import load_spec

        s = load_spec(spec)
        be = get_backend(backend)
        provs = parse_providers(providers, s)
        check_options(s, budget=budget, bands=bands, providers=provs, workers=workers)
        if write_model is not None:
            check_model_path(write_model)
        run_dir = out if out is not None else Path("runs") / s.name
        check_output_dir(run_dir, "--out")
        cat = load_catalog(s.pricing)
        cache = None if no_cache else TableCache()
        with progress_bar() as bar:
            task = bar.add_task("building design tables", total=1)

            def prog(stage: str, done: int, total: int) -> None:
                what = "building design tables" if stage == "tables" else "solving budget bands"
                bar.update(task, description=what, completed=done, total=max(total, 1))

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
            _echo_json(run.solution)
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
) -> None:
    """Check every band's certificate; exit 1 if any is over the thresholds."""
    with cli_errors():
        from report.solve import print_audit
        from solver.audit import audit as do_audit

        flagged = print_audit(do_audit(run_dir, max_gap, max_approx_error), str(run_dir), max_gap, max_approx_error)
        if flagged:
            raise typer.Exit(ExitCode.FLAGGED)


@app.command()
def whatif(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `cosine solve`.")],
    budget: Annotated[float | None, typer.Option(help="Best configuration within this monthly budget.")] = None,
    throughput: Annotated[float | None, typer.Option(help="Cheapest configuration reaching this ops/s.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Answer instantly from the saved frontier (no re-solve)."""
    with cli_errors():
        from solver.whatif import whatif as do_whatif

        ans = do_whatif(run_dir, budget, throughput)
        if as_json:
            _echo_json(ans)
        else:
            from report.solve import print_whatif

            print_whatif(ans)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `cosine solve`.")],
    out: Annotated[Path | None, typer.Option(help="The HTML file (default RUN_DIR/report.html).")] = None,
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
    out: Annotated[Path, typer.Option(help="Output .parquet (resumed if it exists).")],
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
    out: Annotated[Path, typer.Option(help="Directory for the rendered Rust workspace.")] = Path("engine"),
    preset: Annotated[PresetName | None, typer.Option(help="Render a baseline instead.")] = None,
    wal_sync: Annotated[WalSync, typer.Option(help="The engine's WAL policy.")] = WalSync.GROUP_COMMIT,
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
) -> None:
    """Build (if needed) and run the engine's YCSB-style driver on a spec's workload."""
    with cli_errors():
        from measure.engine import bench_spec
        from report.progress import progress_bar
        from specs.schema import load_spec

        s = load_spec(spec)
        with progress_bar() as bar:
            bar.add_task("building the engine and running the workload", total=None)
            res = bench_spec(s, engine, records=records, operations=ops, threads=threads, engine=peer)
        if as_json:
            _echo_json(
                {
                    **res.report,
                    "scale": res.scale,
                    "notes": res.notes,
                    "workload": res.workload,
                    "model": res.prediction,
                }
            )
        else:
            from report.measure import print_bench

            print_bench(res.report, res.notes, res.prediction)


@app.command()
def validate(
    out: Annotated[Path, typer.Option(help="Directory for validation.parquet and validation.png.")] = Path(
        "runs/validate"
    ),
    quick: Annotated[bool, typer.Option("--quick", help="A reduced grid (a few minutes).")] = False,
    records: Annotated[int | None, typer.Option(help="Records loaded per run (default 1e6; quick 5e4).")] = None,
    ops: Annotated[int | None, typer.Option(help="Operations per run (writes run 3x longer).")] = None,
    min_accuracy: Annotated[
        float | None, typer.Option(help="Exit 1 if the mean accuracy is below this (0..1).")
    ] = None,
    conservative: Annotated[
        bool,
        typer.Option(
            "--conservative", help="Also calibrate the margin that makes 90% of the cases over-estimate, and its cost."
        ),
    ] = False,
    ranking: Annotated[
        bool,
        typer.Option(
            "--ranking", help="Instead: rank >= 8 designs per YCSB workload by model and by engine (Spearman's rho)."
        ),
    ] = False,
    iops: Annotated[
        float | None, typer.Option(help="--ranking on an emulated volume of this many IOPS (the engine's device mode).")
    ] = None,
    read_latency_us: Annotated[float, typer.Option(help="The emulated volume's read latency (with --iops).")] = 0.0,
    repeats: Annotated[
        int, typer.Option(help="--ranking: runs per design, interleaved; the median run is reported.")
    ] = 1,
    workloads: Annotated[
        str | None,
        typer.Option(help="--ranking: only these YCSB workloads, comma-separated (default: ycsb_a..ycsb_f)."),
    ] = None,
    confirm: Annotated[
        int | None,
        typer.Option(
            help="--ranking: run the pick and every design measured above it again this many times each "
            "(the pick rated on runs its selection did not see; 0: none) [default: 3]."
        ),
    ] = None,
) -> None:
    """The model's I/O per operation against the engine's counters over a grid of designs x workloads."""
    with cli_errors():
        from measure.validate import check_device, check_min_accuracy, run_size
        from measure.validate import validate as run_validation
        from measure.validate import write as write_validation
        from report.measure import print_conservative, print_ranking, print_validation
        from report.plots import plot_validation
        from report.progress import progress_bar
        from report.solve import print_written
        from specs.io import check_output_dir

        n, m = run_size(quick, records, ops)
        check_min_accuracy(min_accuracy)
        check_output_dir(out, "--out")
        device = check_device(iops, read_latency_us)
        if repeats != 1 and not ranking:
            raise InputError("--repeats applies only with --ranking")
        if workloads is not None and not ranking:
            raise InputError("--workloads applies only with --ranking")
        if confirm is not None and not ranking:
            raise InputError("--confirm applies only with --ranking")
        if ranking:
            from measure.ranking import CONFIRM_REPEATS, WORKLOADS, check_options
            from measure.ranking import ranking as run_ranking
            from measure.ranking import summary as ranking_summary
            from measure.ranking import write as write_ranking

            chosen = WORKLOADS if workloads is None else tuple(w.strip() for w in workloads.split(",") if w.strip())
            if not chosen:
                raise InputError("--workloads: no workload named")
            confirm_runs = CONFIRM_REPEATS if confirm is None else confirm
            check_options(chosen, repeats, confirm_runs)
            with progress_bar() as bar:
                rows = run_ranking(
                    n,
                    m,
                    device,
                    workloads=chosen,
                    progress=_bar_callback(bar, bar.add_task("ranking", total=1)),
                    repeats=repeats,
                    confirm=confirm_runs,
                )
            p = write_ranking(rows, out)
            print_ranking(ranking_summary(rows), rows)
            print_written(str(p))
            return
        with progress_bar() as bar:
            v = run_validation(n, m, quick, progress=_bar_callback(bar, bar.add_task("validating", total=1)))
        write_validation(v, out)
        png = plot_validation(v, out)
        s = v.summary()
        print_validation(s, n)
        if conservative:
            print_conservative(v.conservative_summary(), s)
        print_written(f"{out}/validation.parquet, {png.name}")
        if min_accuracy is not None and s["mean_accuracy"] < min_accuracy:
            typer.echo(f"mean accuracy {s['mean_accuracy']:.1%} is below {min_accuracy:.1%}", err=True)
            raise typer.Exit(ExitCode.FLAGGED)


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
    compression: Annotated[
        bool,
        typer.Option(
            "--compression",
            help="Only the compression step: each codec's size factor and CPU per byte at several "
            "compressibilities, written to cost_models/data/compression.yaml.",
        ),
    ] = False,
    operation: Annotated[
        Operation | None,
        typer.Option(
            "--operation",
            help="Only this operation's cached runs (every class, size and thread count): its CPU per "
            "operation and phi, merged into cost_models/data/phi.yaml with every other entry unchanged "
            "(no Fig. 4B). Not range, get or empty_get: those need the whole calibration.",
        ),
    ] = None,
    host_speed: Annotated[
        bool,
        typer.Option(
            "--host-speed",
            help="Only probe whether the table still describes this host: the calibration's cached get and "
            "update runs, measured vs tabled CPU per operation (about a minute; writes host_speed.parquet "
            "under --out, never the table). Exit 1 when the factor is off by more than the 85% accuracy target.",
        ),
    ] = False,
) -> None:
    """Learn phi and the CPU time per operation on the Rust engine (Algorithm 1); check Fig. 4B."""
    with cli_errors():
        if host_speed:
            _calibrate_host_speed(quick, out)
            return
        if compression:
            _calibrate_compression(quick, write)
            return
        if operation is not None:
            _calibrate_operation(operation, quick, write, out, samples_from)
            return
        from cost_models.cpu import PHI_TABLE
        from measure.calibrate.calibration import calibrate as run_calibration
        from measure.calibrate.calibration import write as write_calibration
        from report.measure import print_calibration
        from report.progress import progress_bar
        from report.solve import print_written
        from specs.io import check_output_dir

        check_output_dir(out, "--out")
        if write:
            from cost_models.cpu import PHI_TABLE
            from specs.io import check_output_file

            check_output_file(PHI_TABLE, "--write")
        with progress_bar() as bar:
            cal = run_calibration(
                quick, samples_from, _bar_callback(bar, bar.add_task("calibrating", total=1)), write=write, out=out
            )
        files = write_calibration(cal, out)
        again = sum(x.runs_dropped_shared_core for x in cal.samples) + sum(
            int(r["runs_dropped_shared_core"]) for r in cal.fig4b
        )
        kept = sum(x.on_shared_core for x in cal.samples) + sum(int(r["runs_on_shared_core"]) for r in cal.fig4b)
        print_calibration(cal.result, cal.checks, cal.fig4b, (again, kept))
        if write:
            print_written(str(PHI_TABLE))
        print_written(", ".join(str(f) for f in files))


def _calibrate_host_speed(quick: bool, out: Path) -> None:
    """`cosine calibrate --host-speed`: the probe, printed; exit 1 when the table is stale here."""
    from cost_models import cpu_count
    from measure.calibrate.plan import DEFAULT_PLAN, QUICK_PLAN
    from measure.cores import core_probe
    from measure.host_speed import host_speed as probe
    from report.measure import print_host_speed
    from report.progress import progress_bar
    from report.solve import print_written
    from specs.io import check_output_dir, write_records

    check_output_dir(out, "--out")
    with progress_bar() as bar:
        hs = probe(QUICK_PLAN if quick else DEFAULT_PLAN, progress=_bar_callback(bar, bar.add_task("probing", total=1)))
    cores = core_probe() if cpu_count() >= 2 else None
    out.mkdir(parents=True, exist_ok=True)
    write_records(out / "host_speed.parquet", hs.rows)
    print_host_speed(hs.factor, hs.rows, hs.stale, cores)
    print_written(str(out / "host_speed.parquet"))
    if hs.stale:
        raise typer.Exit(ExitCode.FLAGGED)


def _calibrate_operation(op: Operation, quick: bool, write: bool, out: Path, samples_from: Path | None) -> None:
    """`cosine calibrate --operation OP`: measure one operation's cached runs, print, merge into the table."""
    from cost_models.cpu import PHI_TABLE
    from measure.calibrate.operation import calibrate_operation, check_single_operation
    from report.measure import print_operation_calibration
    from report.progress import progress_bar
    from report.solve import print_written
    from specs.io import check_output_dir, check_output_file

    check_single_operation(op)
    check_output_dir(out, "--out")
    if write:
        check_output_file(PHI_TABLE, "--write")
    with progress_bar() as bar:
        _, res = calibrate_operation(
            op, quick, samples_from, _bar_callback(bar, bar.add_task(f"calibrating {op}", total=1)), write, out
        )
    print_operation_calibration(res)
    if write:
        print_written(str(PHI_TABLE))
    print_written(str(out / "calibration.parquet"))


def _calibrate_compression(quick: bool, write: bool) -> None:
    """`cosine calibrate --compression`: measure the codecs on the engine, print and write the table."""
    from measure.compression import calibrate as run_codecs
    from measure.compression import write as write_codecs
    from report.measure import print_codecs
    from report.progress import progress_bar
    from report.solve import print_written

    if write:
        from cost_models.compression import TABLE
        from specs.io import check_output_file

        check_output_file(TABLE, "--write")
    with progress_bar() as bar:
        tab = run_codecs(quick, _bar_callback(bar, bar.add_task("codecs", total=1)))
    print_codecs(tab)
    if write:
        print_written(write_codecs(tab))


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
    out: Annotated[Path | None, typer.Option(help="Deployment directory (default RUN_DIR/deploy).")] = None,
    port: Annotated[int | None, typer.Option(help="The proxy's loopback port (default: a free one).")] = None,
    wal_sync: Annotated[WalSync, typer.Option(help="The engines' WAL policy.")] = WalSync.GROUP_COMMIT,
    as_json: Annotated[bool, typer.Option("--json", help="Print the state as JSON.")] = False,
) -> None:
    """Run RUN_DIR's recommended cluster locally: one cosine-server per node behind twemproxy."""
    with cli_errors():
        from dataclasses import asdict

        from deploy.cluster import deploy_dir_of
        from deploy.cluster import down as stop_cluster
        from deploy.cluster import status as cluster_status
        from deploy.cluster import up as start_cluster
        from report.deploy import print_down, print_status, print_up

        if int(local) + int(status) + int(down) != 1:
            raise InputError("give exactly one of --local (start), --status or --down")
        d = deploy_dir_of(run_dir, out)
        if local:
            st = start_cluster(run_dir, out=out, nodes=nodes, scale=scale, wal_sync=wal_sync, proxy_port=port)
            if as_json:
                _echo_json(asdict(st))
            else:
                print_up(st)
        elif status:
            st, rows = cluster_status(d)
            if as_json:
                _echo_json({"state": asdict(st), "processes": rows})
            else:
                print_status(st, rows)
        else:
            done = stop_cluster(d)
            if as_json:
                _echo_json(dict(done))
            else:
                print_down(done)


# ----------------------------------------------------------------------------- studies


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
        from report.plots import plot_robust_eval
        from report.solve import print_written
        from report.studies import print_robust_eval
        from specs.io import check_output_dir
        from studies.robust_eval import buckets, check_options, parse_rhos, run
        from studies.robust_eval import write as write_eval

        rhos = parse_rhos(rho)
        check_options(samples, rhos, seed)
        check_output_dir(out, "--out")
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
        from cost_models.pricing import load_catalog
        from report.progress import progress_bar
        from specs.schema import load_spec
        from studies.plan.build import DEFAULT_SPEC, report_dict, run_plan

        s = load_spec(DEFAULT_SPEC if spec is None else spec)
        cat = load_catalog(s.pricing)
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
                progress=None if as_json else prog,
            )
        d = report_dict(built, results)
        if as_json:
            _echo_json(d)
        else:
            from report.studies import print_plan

            print_plan(d, trace.name, rf, cl)


# ----------------------------------------------------------------------------- pricing


@pricing_app.command("build")
def pricing_build() -> None:
    """Rebuild pricing.parquet from the CSV sources in pricing/."""
    with cli_errors():
        from cost_models.pricing import PRICING_SOURCE_DIR, build_parquet
        from report.solve import print_written

        path, rows = build_parquet()
        print_written(f"{path} ({rows} rows from {PRICING_SOURCE_DIR}/*.csv)")


@pricing_app.command("show")
def pricing_show(
    provider: Annotated[Provider | None, typer.Option(help="Only this provider.")] = None,
    price_set: Annotated[PriceSet, typer.Option("--set", help="Price set.")] = PriceSet.ONDEMAND,
    kind: Annotated[CatalogKind | None, typer.Option(help="Only this kind of row.")] = None,
) -> None:
    """Print the pricing catalog as a table."""
    with cli_errors():
        from cost_models.pricing import catalog_rows
        from report.pricing import print_catalog

        print_catalog(catalog_rows(price_set, provider), price_set, kind)


def main() -> None:
    """The `cosine` program: the process is ours, so termination signals clean up too."""
    unwind_on_termination()
    app()


if __name__ == "__main__":
    main()
