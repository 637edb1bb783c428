"""`cosine calibrate`: learn the CPU model's table on the Rust engine (Algorithm 1), or one part of it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common import OUT_PATH, bar_callback, cli_errors
from specs.errors import ExitCode
from specs.vocab import Operation, ServingDriver

app = typer.Typer(
    help="Learn the CPU model's table (phi, CPU per operation) and the codec table on the Rust engine.",
    no_args_is_help=True,
)

Quick = Annotated[bool, typer.Option("--quick", help="Smaller data sizes (a few minutes).")]
Write = Annotated[bool, typer.Option(help="Rewrite the table under cost_models/data/ with the result.")]
Out = Annotated[Path, typer.Option(**OUT_PATH, help="Directory for the measurements (parquet).")]
Samples = Annotated[
    Path | None,
    typer.Option("--samples", help="Refit a saved calibration.parquet instead of measuring."),
]


@app.command("phi")
def phi(
    quick: Quick = False,
    write: Write = True,
    out: Out = Path("runs/calibrate"),
    samples_from: Samples = None,
) -> None:
    """The whole calibration: phi and the CPU time per operation of every class (Algorithm 1), the
    block-read and background terms, the envelope; refuses any fit at a bound; checks Fig. 4B."""
    with cli_errors():
        from cost_models.phi import PHI_TABLE
        from measure.calibrate.calibration import calibrate as run_calibration
        from measure.calibrate.calibration import write as write_calibration
        from report.measure import print_calibration
        from report.progress import progress_bar
        from report.solve import print_written
        from specs.io import check_output_dir, check_output_file

        check_output_dir(out, "--out")
        if write:
            check_output_file(PHI_TABLE, "--write")
        with progress_bar() as bar:
            cal = run_calibration(
                quick, samples_from, bar_callback(bar, bar.add_task("calibrating", total=1)), write=write, out=out
            )
        files = write_calibration(cal, out)
        print_calibration(cal.result, cal.checks, cal.fig4b, cal.shared_core_runs())
        if write:
            print_written(str(PHI_TABLE))
        print_written(", ".join(str(f) for f in files))


@app.command("operation")
def operation(
    op: Annotated[
        Operation,
        typer.Argument(
            help="The operation whose cached runs are measured (every class, size and thread count): its CPU per "
            "operation and phi are merged into cost_models/data/phi.yaml with every other entry unchanged "
            "(no Fig. 4B). Not range, get or empty_get: those need the whole calibration."
        ),
    ],
    quick: Quick = False,
    write: Write = True,
    out: Out = Path("runs/calibrate"),
    samples_from: Samples = None,
) -> None:
    """One operation's cached runs: its phi and CPU merged into the table."""
    with cli_errors():
        from cost_models.phi import PHI_TABLE
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
                op, quick, samples_from, bar_callback(bar, bar.add_task(f"calibrating {op}", total=1)), write, out
            )
        print_operation_calibration(res)
        if write:
            print_written(str(PHI_TABLE))
        print_written(str(out / "calibration.parquet"))


@app.command("wal")
def wal(quick: Quick = False, write: Write = True) -> None:
    """A write's engine CPU by its entry's bytes and by the WAL policy the model prices (about two
    minutes): update-only cached runs of the LSM and B-tree presets at several value sizes, under
    wal_sync none and group_commit; least squares, refused at a bound; merged into
    cost_models/data/phi.yaml as ``wal`` with every other entry unchanged."""
    with cli_errors():
        from cost_models.phi import PHI_TABLE
        from measure.calibrate.wal import fit, measure, merge, section
        from report.measure import print_wal
        from report.progress import progress_bar
        from report.solve import print_written

        if write:
            from specs.io import check_output_file

            check_output_file(PHI_TABLE, "--write")
        with progress_bar() as bar:
            points = measure(quick, bar_callback(bar, bar.add_task("update runs", total=1)))
        sec = section(points, fit(points), quick)
        print_wal(sec)
        if write:
            print_written(str(merge(sec)))


@app.command("host-speed")
def host_speed(quick: Quick = False, out: Out = Path("runs/calibrate")) -> None:
    """Does the table still describe this host? The calibration's cached get and update runs, measured
    vs tabled CPU per operation (about a minute; writes host_speed.parquet under --out, never the
    table). Exit 1 when the factor is off by more than the 85% accuracy target."""
    with cli_errors():
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
            hs = probe(
                QUICK_PLAN if quick else DEFAULT_PLAN, progress=bar_callback(bar, bar.add_task("probing", total=1))
            )
        cores = core_probe() if cpu_count() >= 2 else None
        out.mkdir(parents=True, exist_ok=True)
        write_records(out / "host_speed.parquet", hs.rows)
        print_host_speed(hs.factor, hs.rows, hs.stale, cores)
        print_written(str(out / "host_speed.parquet"))
        if hs.stale:
            raise typer.Exit(ExitCode.FLAGGED)


@app.command("serving")
def serving(
    quick: Quick = False,
    write: Write = True,
    driver: Annotated[
        ServingDriver,
        typer.Option(
            help="The RESP client: the engine template's (as `cosine validate --served` drives) or redis-tools'."
        ),
    ] = ServingDriver.REDIS_BENCHMARK,
    repeat: Annotated[
        int,
        typer.Option(min=1, max=20, help="Passes of the whole plan; each point is the median of its passes."),
    ] = 3,  # measure.served_calibration.REPEATS (tests/test_served_model.py checks they agree)
) -> None:
    """cosine-server's CPU per request beyond the engine's (issue 48): GET, SET and RANGE at several
    pipeline depths and value sizes from a RESP driver, the server pinned to half the cores and the
    client to the rest; fits seconds per batch and per byte on the wire of each kind and a write's
    signed seconds per request, refuses a fit at a bound, writes cost_models/data/serving.yaml."""
    with cli_errors():
        from measure.calibrate import CalibrationError
        from measure.served_calibration import measure, points_csv, table_doc
        from measure.served_calibration import write as write_table
        from report.measure import print_serving
        from report.progress import progress_bar
        from report.solve import print_written

        if write:
            from cost_models.serving import SERVING_TABLE
            from specs.io import check_output_file

            check_output_file(SERVING_TABLE, "--write")
        with progress_bar() as bar:
            task = bar.add_task(f"{driver} runs", total=1)
            points = measure(quick, bar_callback(bar, task), driver=driver, repeat=repeat)
        try:
            doc = table_doc(points, quick, driver, repeat)
        except CalibrationError:
            print(points_csv(points), end="")  # a refused fit keeps its measurements on the terminal
            raise
        print_serving(doc, points_csv(points))
        if write:
            print_written(str(write_table(doc)))


@app.command("compression")
def compression(quick: Quick = False, write: Write = True) -> None:
    """Each block codec (none, lz4, zstd:1/3/9) on the engine at compressibilities 0.125-1: size factor and
    CPU per byte, written to cost_models/data/compression.yaml."""
    with cli_errors():
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
            tab = run_codecs(quick, bar_callback(bar, bar.add_task("codecs", total=1)))
        print_codecs(tab)
        if write:
            print_written(write_codecs(tab))
