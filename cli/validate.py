"""`cosine validate`: the model against the engine, as I/O per operation or as a ranking of designs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common import OUT_PATH, bar_callback, cli_errors
from specs.errors import ExitCode, InputError

app = typer.Typer(
    help="The model against the Rust engine: I/O per operation, or the ranking of designs.", no_args_is_help=True
)

Records = Annotated[int | None, typer.Option(help="Records loaded per run (default 1e6; quick 5e4).")]
Ops = Annotated[int | None, typer.Option(help="Operations per run (writes run 3x longer).")]


@app.command("io")
def io(
    out: Annotated[Path, typer.Option(**OUT_PATH, help="Directory for validation.parquet and validation.png.")] = Path(
        "runs/validate"
    ),
    quick: Annotated[bool, typer.Option("--quick", help="A reduced grid (a few minutes).")] = False,
    records: Records = None,
    ops: Ops = None,
    min_accuracy: Annotated[
        float | None, typer.Option(help="Exit 1 if the mean accuracy is below this (0..1).")
    ] = None,
    conservative: Annotated[
        bool,
        typer.Option(
            "--conservative", help="Also calibrate the margin that makes 90% of the cases over-estimate, and its cost."
        ),
    ] = False,
) -> None:
    """The model's I/O per operation against the engine's counters over a grid of designs x workloads."""
    with cli_errors():
        from measure.validate import check_min_accuracy, run_size
        from measure.validate import validate as run_validation
        from measure.validate import write as write_validation
        from report.measure import print_conservative, print_validation
        from report.plots import plot_validation
        from report.progress import progress_bar
        from report.solve import print_written
        from specs.io import check_output_dir

        n, m = run_size(quick, records, ops)
        check_min_accuracy(min_accuracy)
        check_output_dir(out, "--out")
        with progress_bar() as bar:
            v = run_validation(n, m, quick, progress=bar_callback(bar, bar.add_task("validating", total=1)))
        write_validation(v, out)
        png = plot_validation(v, out)
        s = v.summary()
        print_validation(s, n)
        if conservative:
            print_conservative(v.conservative_summary(), s)
        print_written(f"{out}/validation.parquet, {png.name}")
        if min_accuracy is not None and v.below(min_accuracy):
            typer.echo(f"mean accuracy {s['mean_accuracy']:.1%} is below {min_accuracy:.1%}", err=True)
            raise typer.Exit(ExitCode.FLAGGED)


@app.command("ranking")
def ranking(
    out: Annotated[Path, typer.Option(**OUT_PATH, help="Directory for ranking.parquet.")] = Path("runs/validate"),
    quick: Annotated[bool, typer.Option("--quick", help="Smaller runs (a few minutes).")] = False,
    records: Records = None,
    ops: Ops = None,
    iops: Annotated[
        float | None, typer.Option(help="On an emulated volume of this many IOPS (the engine's device mode).")
    ] = None,
    read_latency_us: Annotated[float, typer.Option(help="The emulated volume's read latency (with --iops).")] = 0.0,
    repeats: Annotated[int, typer.Option(help="Runs per design, interleaved; the median run is reported.")] = 1,
    workloads: Annotated[
        str | None,
        typer.Option(help="Only these YCSB workloads, comma-separated (default: ycsb_a..ycsb_f)."),
    ] = None,
    confirm: Annotated[
        int | None,
        typer.Option(
            help="Run the pick and every design measured above it again this many times each "
            "(the pick rated on runs its selection did not see; 0: none) [default: 3]."
        ),
    ] = None,
) -> None:
    """Rank >= 8 designs per YCSB workload by model and by engine: Spearman's rho and the pick against
    the best measured, confirmed on fresh runs."""
    with cli_errors():
        from measure.ranking import CONFIRM_REPEATS, WORKLOADS, check_options
        from measure.ranking import ranking as run_ranking
        from measure.ranking import summary as ranking_summary
        from measure.ranking import write as write_ranking
        from measure.validate import check_device, run_size
        from report.measure import print_ranking
        from report.progress import progress_bar
        from report.solve import print_written
        from specs.io import check_output_dir

        n, m = run_size(quick, records, ops)
        check_output_dir(out, "--out")
        device = check_device(iops, read_latency_us)
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
                progress=bar_callback(bar, bar.add_task("ranking", total=1)),
                repeats=repeats,
                confirm=confirm_runs,
            )
        p = write_ranking(rows, out)
        print_ranking(ranking_summary(rows), rows)
        print_written(str(p))
