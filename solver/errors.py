"""Turning bad input into one line and an exit code, for every command."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: Exit codes shared by every command.
EXIT_FLAGGED = 1  # e.g. `cosine audit` found a band over its thresholds
EXIT_INPUT = 2  # malformed spec, unknown provider, negative budget, corrupt file...
EXIT_BUDGET = 3  # the budget is below the cheapest possible configuration


class InputError(ValueError):
    """Bad user input that is not a spec field (a flag, a file, a run directory)."""


class BudgetTooLow(RuntimeError):
    """No configuration fits the budget; carries the cheapest possible cost."""

    def __init__(self, budget: float, cheapest: float | None, detail: str = "") -> None:
        self.budget = budget
        self.cheapest = cheapest
        if cheapest is None:
            msg = f"no configuration is feasible at any budget{': ' + detail if detail else ''}"
        else:
            msg = (
                f"budget ${budget:,.2f}/month is below the cheapest possible configuration "
                f"(${cheapest:,.2f}/month){': ' + detail if detail else ''}"
            )
        super().__init__(msg)


def _input_error_types() -> tuple[type[BaseException], ...]:
    from cost_models.cpu import PhiTableError
    from cost_models.design import DesignError
    from cost_models.pricing import CatalogError
    from specs.schema import SpecError

    return (SpecError, DesignError, CatalogError, InputError, PhiTableError)


@contextmanager
def cli_errors(source: str = "") -> Iterator[None]:
    """Print ``error: ...`` on one line and exit with the right code; no traceback."""
    import typer

    try:
        yield
    except typer.Exit:
        raise
    except BudgetTooLow as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_BUDGET) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:
        if isinstance(exc, _input_error_types()):
            prefix = f"{source}: " if source else ""
            typer.echo(f"error: {prefix}{exc}", err=True)
            raise typer.Exit(EXIT_INPUT) from None
        if os.environ.get("COSINE_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        typer.echo(f"internal error: {type(exc).__name__}: {first} (set COSINE_DEBUG=1 for a traceback)", err=True)
        raise typer.Exit(1) from None
    finally:
        sys.stdout.flush()
