"""What every solver back end shares: the options, the one :class:`Result`,
and the :class:`Backend` base class whose :meth:`Backend.solve` times the
call and builds the certificate; each back end implements only
:meth:`Backend._solve` (translate the declared model, solve, map its status).
"""

from __future__ import annotations

import math
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from solver.model import LinearModel
from specs.vocab import BackendName, SolverStatus


@dataclass(frozen=True)
class SolveOptions:
    """How hard to try: relative MIP gap, seconds, an optional start and log file."""

    gap: float = 1e-4
    time_limit: float = 60.0
    warm_start: np.ndarray | None = None
    log_path: Path | None = None


@dataclass
class Outcome:
    """What a back end's own solve found, before certification."""

    status: SolverStatus
    x: np.ndarray | None = None
    objective: float = math.inf
    bound: float = math.inf
    nodes: int = 0
    scaling_error: float = 0.0  # CP-SAT: max relative coefficient rounding


@dataclass
class Result:
    """One solve's certificate: status, objective, best bound, relative MIP gap, nodes, wall time."""

    status: SolverStatus
    objective: float
    bound: float
    gap: float
    nodes: int
    seconds: float
    x: np.ndarray | None
    backend: str
    scaling_error: float = 0.0

    @classmethod
    def of(cls, out: Outcome, seconds: float, backend: str) -> Result:
        if out.x is None or not out.status.has_solution:
            return cls(out.status, math.inf, math.inf, math.inf, out.nodes, seconds, None, backend, out.scaling_error)
        return cls(
            out.status,
            out.objective,
            out.bound,
            rel_gap(out.objective, out.bound),
            out.nodes,
            seconds,
            out.x,
            backend,
            out.scaling_error,
        )

    @classmethod
    def infeasible(cls, backend: str, nodes: int = 0, seconds: float = 0.0) -> Result:
        """A band known infeasible without a solve (or by enumeration)."""
        return cls(SolverStatus.INFEASIBLE, math.inf, math.inf, math.inf, nodes, seconds, None, backend)


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """File descriptor 1 goes to /dev/null while a solver library runs: stdout belongs to the
    command (``--json`` must be one JSON document), and C++ solvers print there directly."""
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def rel_gap(obj: float, bound: float) -> float:
    """|obj - bound| / max(|obj|, 1e-9): HiGHS's definition, for every back end."""
    if not (math.isfinite(obj) and math.isfinite(bound)):
        return math.inf
    return abs(obj - bound) / max(abs(obj), 1e-9)


class Backend(ABC):
    """A solver the declared model can be handed to."""

    name: ClassVar[BackendName]

    @classmethod
    @abstractmethod
    def is_available(cls) -> bool:
        """Whether the solver package can be used on this machine."""

    def solve(
        self,
        model: LinearModel,
        *,
        gap: float = 1e-4,
        time_limit: float = 60.0,
        warm_start: np.ndarray | None = None,
        log_path: Path | None = None,
    ) -> Result:
        """Solve ``model`` (a minimization) and certify the answer."""
        t0 = time.perf_counter()
        out = self._solve(model, SolveOptions(gap, time_limit, warm_start, log_path))
        return Result.of(out, time.perf_counter() - t0, self.name)

    @abstractmethod
    def _solve(self, model: LinearModel, opts: SolveOptions) -> Outcome:
        """Translate, solve, and map the solver's own status onto :class:`SolverStatus`."""
