"""The errors every stage raises, and the exit code each one means.

Every error a user can cause (a spec field, a flag, a file, a run directory)
is an :class:`InputError` or a subclass of it, so the command line maps all of
them to exit 2 with one line; :class:`BudgetTooLow` is exit 3.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes shared by every command."""

    OK = 0
    FLAGGED = 1  # a check failed, e.g. `cosine audit` found a band over its thresholds
    INPUT = 2  # malformed spec, unknown provider, negative budget, corrupt file...
    BUDGET = 3  # the budget is below the cheapest possible configuration
    INTERRUPTED = 130


class InputError(ValueError):
    """Bad user input: a spec field, a flag, a file or a run directory."""


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
