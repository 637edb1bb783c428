"""A module of numba-compiled functions, loaded on demand, with its Python reference kept: the
design tables' kernels (cost_models.kernels) and the frontier's knapsacks (solver.knapsack).

numba is imported by :meth:`Compiled.load` only: until a command calls it, :meth:`Compiled.module`
answers None and the caller runs its reference, so a command that needs none (``cosine whatif``
from a saved run) never imports numba. The machine code is cached by numba itself beside the
package (``__pycache__``, ``cache=True``); nothing is read from the user's cache directory.
``COSINE_KERNELS=numpy`` (or numba missing) keeps every reference; :meth:`Compiled.reference`
does within a block (what the tests compare the compiled code with).
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType


class Compiled:
    """The compiled module ``name`` (imported by :meth:`load`), ``warm`` calling each of its
    functions once on a tiny input (numba loads, or compiles after an install, at a first call)."""

    def __init__(self, name: str, warm: Callable[[ModuleType], None]) -> None:
        self.name = name
        self._warm = warm
        #: Forced off by :meth:`reference`; None: as :meth:`load` left it.
        self.forced: bool | None = None
        #: Whether :meth:`load` ran in this process (or the one it was forked from).
        self.loaded = False
        self._module: ModuleType | None = None
        self._imported = False
        self._warmed = False

    def _import(self) -> ModuleType | None:
        if not self._imported:
            self._imported = True
            if os.environ.get("COSINE_KERNELS", "numba") != "numpy":
                try:
                    self._module = importlib.import_module(self.name)
                except ImportError:  # numba not installed: the reference
                    self._module = None
        return self._module

    def module(self) -> ModuleType | None:
        """The compiled module once :meth:`load` loaded it, or None where the reference is to run."""
        if self.forced is False or not self.loaded:
            return None
        return self._import()

    @contextmanager
    def reference(self) -> Iterator[None]:
        """Within it, the reference runs."""
        before, self.forced = self.forced, False
        try:
            yield
        finally:
            self.forced = before

    def load(self) -> float:
        """Load the compiled code now (before a process pool forks, so that its workers inherit
        it). Returns the seconds it took (0 where the reference runs)."""
        t0 = time.perf_counter()
        k = self._import()
        if k is None or self.forced is False:
            return 0.0
        self.loaded = True
        if not self._warmed:
            self._warm(k)
            self._warmed = True
        return time.perf_counter() - t0
