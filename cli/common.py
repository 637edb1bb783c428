"""What every command shares: one-line errors with their exit codes, JSON output, progress callbacks."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from specs.errors import BudgetTooLow, ExitCode, InputError, Terminated


def interrupted(exc: BaseException) -> ExitCode:
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
            rc = interrupted(exc.__cause__ or exc)
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
        raise typer.Exit(interrupted(exc)) from None
    except Exception as exc:
        if os.environ.get("COSINE_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        typer.echo(f"internal error: {type(exc).__name__}: {first} (set COSINE_DEBUG=1 for a traceback)", err=True)
        # not FLAGGED: `cosine audit`'s 1 means a band is over its thresholds, and a crash is not that
        raise typer.Exit(ExitCode.INTERNAL) from None
    finally:
        sys.stdout.flush()


def output_path(value: str | Path) -> Path:
    """The ``parser`` of every ``--out`` option: an empty (or blank) path is refused, exit 2, since
    pathlib reads "" as ".", the current directory, and the command would write there."""
    if isinstance(value, str) and not value.strip():
        raise typer.BadParameter("an empty path; give a file or directory name ('.' for the current directory)")
    return Path(value)


#: The keywords of every ``--out`` option (:func:`output_path`; help shows PATH as for any path).
OUT_PATH: dict[str, Any] = {"parser": output_path, "metavar": "PATH"}


def echo_json(obj: Any) -> None:
    """One JSON document on stdout (a typed record, or plain JSON values)."""
    from specs.io import to_json, to_record

    typer.echo(to_json(to_record(obj)))


def bar_callback(bar: Any, task: Any) -> Callable[[int, int, str], None]:
    def prog(done: int, total: int, what: str) -> None:
        bar.update(task, description=what, completed=done, total=max(total, 1))

    return prog
