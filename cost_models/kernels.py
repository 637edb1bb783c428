"""Which evaluator the design tables use: the fused kernels compiled by numba
(cost_models.kernels_numba, built from the generated scalar model cost_models.symbolic_scalar) or
the numpy path, which stays the reference (tests/test_kernels.py checks every column of the
tables built both ways equal to 1e-9 relative).

numba is imported by :func:`load` only, which the design tables call before they compute a shard
(solver.tables.build), and the exact re-evaluation once a threshold frontier has imported numba for
its compiled knapsacks (solver.exact.compiled_evaluator: then loading these costs ~0.02 s; ycsb_a's
1,250 evaluations from a warm table cache took 7.1 s on the numpy path, 1.5 s compiled). Until then
:func:`numba_kernels` answers None and the numpy path runs, so a command that evaluates no node
(``cosine whatif`` on a saved run, a solve whose answers the caches hold) never loads it. Its
compiled code is cached by numba itself beside the package (``__pycache__``, ``cache=True``);
nothing is read from the user's cache directory. ``COSINE_KERNELS=numpy`` (or numba missing) selects the numpy path.
"""

from __future__ import annotations

from types import ModuleType

from cost_models.compiled import Compiled


def _first_calls(k: ModuleType) -> None:
    """Call every kernel once on a tiny input (numba loads or compiles its code on a first call)."""
    import numpy as np

    one, zero = np.ones(1), np.zeros(1)
    k.distinct_keys(one, one, one, 0.5, 10.0)
    k.window(one, one, one, 0.5, 10.0, 1e-12)
    fp = np.zeros((1, 1, 1))
    ints = np.zeros(1, dtype=np.int64)
    args = (one, one, one, np.ones(1, dtype=bool), one, 0.5, 10.0, np.zeros(1, dtype=bool), one, one, one, one)
    k.lookup_terms(fp, fp.copy(), ints, ints, *args)
    k.pareto_rows(np.ones((2, 3)))
    k.pareto_rows_grouped(np.ones((2, 3)), np.zeros(2, dtype=np.int64))
    k.cpu_throughput(one, one, zero, one, zero, zero, np.ones((1, 1)), np.ones((1, 1)), one, True, 2.0, 2.0, 1.0)
    cube = np.ones((1, 1, 1))
    k.level_cache_alpha(np.empty((1, 1, 1)), cube, cube, cube, np.ones((1, 1)), np.ones((1, 1)), one, 1)
    grid, truth = np.ones((1, 1)), np.ones((1, 1), dtype=bool)
    k.split_levels(
        one.copy(), truth.copy(), grid.copy(), one.copy(), truth, grid, grid, grid, one, one, one, one, truth[0], 8.0
    )
    k.split_use(grid.copy(), np.empty((1, 5)), grid.copy(), truth, truth[0], grid, grid, one, one, 8.0, 1.0, one)
    k.scatter_rows_1d(one.copy(), ints, one, ints, one, ints)
    k.scatter_rows_2d(grid.copy(), ints, grid, ints, grid, ints)


#: The design tables' kernels (cost_models.compiled).
COMPILED = Compiled("cost_models.kernels_numba", _first_calls)
#: The compiled kernels' module once :func:`load` loaded it, or None where the numpy path is to run.
numba_kernels = COMPILED.module
#: Within it, the numpy path runs (the reference the kernels are checked against).
reference = COMPILED.reference
#: Load the kernels now, numba and each kernel's machine code: before a process pool forks, so
#: that its workers inherit them. Returns the seconds it took (0 on the numpy path).
load = COMPILED.load
