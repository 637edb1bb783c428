"""Solver back ends for :class:`~solver.model.LinearModel` (linopy-style: a base
class, each back end implementing only its own ``_solve``). Solver packages
are imported inside the methods so that ``cosine --help`` stays cheap."""

from __future__ import annotations

from solver.backends.base import Backend, Result, SolveOptions, rel_gap
from solver.backends.highs import HighsBackend
from solver.backends.ortools import OrtoolsBackend
from solver.backends.pyomo import PyomoBackend
from specs.errors import InputError
from specs.vocab import BackendName

BACKENDS: dict[BackendName, type[Backend]] = {
    BackendName.HIGHS: HighsBackend,
    BackendName.ORTOOLS: OrtoolsBackend,
    BackendName.PYOMO: PyomoBackend,
}


def get_backend(name: str) -> Backend:
    """The back end named ``name``, if it is installed."""
    if name not in BACKENDS:
        raise InputError(f"--backend: unknown back end {name!r} (valid: {', '.join(BACKENDS)})")
    cls = BACKENDS[BackendName(name)]
    if not cls.is_available():
        raise InputError(f"--backend {name}: not available on this machine")
    return cls()


__all__ = [
    "BACKENDS",
    "Backend",
    "HighsBackend",
    "OrtoolsBackend",
    "PyomoBackend",
    "Result",
    "SolveOptions",
    "get_backend",
    "rel_gap",
]
