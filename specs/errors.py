"""The errors every stage raises, and the exit code each one means.

Every error a user can cause (a spec field, a flag, a file, a run directory)
is an :class:`InputError` or a subclass of it, so the command line maps all of
them to exit 2 with one line; :class:`BudgetTooLow` is exit 3.
"""

from __future__ import annotations

import math
import signal
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """Exit codes shared by every command."""

    OK = 0
    FLAGGED = 1  # a check failed, e.g. `cosine audit` found a band over its thresholds
    INPUT = 2  # malformed spec, unknown provider, negative budget, corrupt file...
    BUDGET = 3  # the budget is below the cheapest possible configuration
    INTERNAL = 70  # a bug: an unexpected exception (sysexits.h EX_SOFTWARE), never a check's verdict
    INTERRUPTED = 130  # 128 + SIGINT
    TERMINATED = 143  # 128 + SIGTERM


class InputError(ValueError):
    """Bad user input: a spec field, a flag, a file or a run directory.

    The message names what is wrong and where: the flag, or the file (and the
    field or row in it).
    """


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP) arrived: unwinds like Ctrl-C, so every ``finally`` and
    context manager cleans up (scratch directories, child processes)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")


#: Signals that end a command the way Ctrl-C does (cleaning up) instead of killing it on the spot.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _terminate(signum: int, _frame: Any) -> None:
    """SIGTERM and SIGHUP unwind like Ctrl-C: every ``finally`` runs (scratch directories are
    removed, child processes killed) instead of the interpreter dying where it stands. Further
    terminating signals and Ctrl-C are ignored from then on, so that nothing interrupts the cleanup."""
    for sig in (*TERMINATING, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    raise Terminated(signum)


def unwind_on_termination() -> None:
    """Install :func:`_terminate` for :data:`TERMINATING` (a program's entry point: the process is its own)."""
    for sig in TERMINATING:
        signal.signal(sig, _terminate)


def _fmt(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:,.6g}"


def check_range(
    name: str, value: Any, lo: float, hi: float = math.inf, *, lo_open: bool = False, integer: bool = False
) -> None:
    """Refuse NaN, infinities and values outside ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``).

    ``name`` is what the user typed (``--bands``, ``design T``); the one-line
    message names it, the range and the value. Every numeric flag and knob goes
    through here, so none can be NaN (a comparison that is always false) or
    infinite (work or sizes without end).
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer:
        ok = float(value).is_integer()
    if ok:
        ok = (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        kind = "a whole number" if integer else "a number"
        if math.isinf(hi):
            rng = f"above {_fmt(lo)}" if lo_open else f"of at least {_fmt(lo)}"
            kind = f"a finite {kind[2:]}"
        elif lo_open:
            rng = f"above {_fmt(lo)} and at most {_fmt(hi)}"
        else:
            rng = f"from {_fmt(lo)} to {_fmt(hi)}"
        raise InputError(f"{name} must be {kind} {rng}, got {value!r}")


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
