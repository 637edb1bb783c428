"""OR-Tools CP-SAT. CP-SAT needs integer coefficients: every row and the
objective are scaled by 10^k (k chosen per row so that its largest
coefficient has :data:`DIGITS` significant digits) and rounded; the largest
relative rounding error is reported as ``scaling_error``. Continuous variables
are made integer in units of 10^-3 (the throughput X, in kops/s, is then
resolved to 1 op/s)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from solver.backends.base import Backend, Outcome, SolveOptions, quiet_stdout
from solver.model import LinearModel
from specs.vocab import BackendName, SolverStatus

#: Units of a continuous variable per 1 (resolution 1e-3).
CONT_UNITS = 1000
#: Significant digits kept per coefficient row.
DIGITS = 9
#: Bound for variables without one (CP-SAT's domains are finite).
UNBOUNDED = 10**12
#: CP-SAT search workers (this project's machines have 2 cores).
WORKERS = 2


def scale_row(coeffs: np.ndarray, mode: str = "nearest") -> tuple[float, np.ndarray, float]:
    """Scale a row to integers. ``up`` (for >= rows) and ``down`` (for <=
    rows) round so that every point feasible for the exact row stays
    feasible (all variables are >= 0): CP-SAT solves a slight relaxation,
    and the solution is checked against the exact model afterwards."""
    big = float(np.max(np.abs(coeffs))) if coeffs.size else 1.0
    if big == 0:
        return 1.0, np.zeros_like(coeffs, dtype=np.int64), 0.0
    k = DIGITS - 1 - math.floor(math.log10(big))
    f = 10.0**k
    rnd = {"up": np.ceil, "down": np.floor}.get(mode, np.rint)
    ints = rnd(coeffs * f).astype(np.int64)
    err = float(np.max(np.abs(ints / f - coeffs) / np.maximum(np.abs(coeffs), 1e-300), initial=0.0))
    return f, ints, err


class OrtoolsBackend(Backend):
    """CP-SAT on the integer-scaled model, in a worker process of its own."""

    name = BackendName.ORTOOLS
    _pool: Any = None  # one spawned worker process, reused for every solve

    @classmethod
    def is_available(cls) -> bool:
        import importlib.util

        return importlib.util.find_spec("ortools") is not None

    def _solve(self, model: LinearModel, opts: SolveOptions) -> Outcome:
        # OR-Tools bundles its own HiGHS, whose symbols clash with highspy's in
        # one process (an ImportError either way round), so CP-SAT runs in a
        # separate, spawned interpreter that never imports highspy.
        import multiprocessing as mp

        if OrtoolsBackend._pool is None:
            OrtoolsBackend._pool = mp.get_context("spawn").Pool(1)
        out: Outcome = OrtoolsBackend._pool.apply(_cpsat_solve, (model, opts))
        return out


def _cpsat_solve(model: LinearModel, opts: SolveOptions) -> Outcome:
    """CP-SAT on the scaled model (runs in the OR-Tools worker process)."""
    from ortools.sat.python import cp_model

    lb, ub, integer = model.bounds()
    unit = np.where(integer, 1.0, float(CONT_UNITS))
    cp = cp_model.CpModel()
    xs = []
    for j in range(model.n_vars):
        lo_j = -UNBOUNDED if math.isinf(lb[j]) else int(math.floor(lb[j] * unit[j]))
        hi_j = UNBOUNDED if math.isinf(ub[j]) else int(math.ceil(ub[j] * unit[j]))
        xs.append(cp.new_int_var(lo_j, hi_j, f"x{j}"))
    indptr, indices, data, lo, hi = model.csr()
    worst = 0.0
    for r in range(model.n_cons):
        sl = slice(indptr[r], indptr[r + 1])
        idx = indices[sl]
        coef = data[sl] / unit[idx]  # coefficients per integer unit
        mode = "up" if math.isinf(hi[r]) else "down" if math.isinf(lo[r]) else "nearest"
        f, ints, err = scale_row(coef, mode)
        worst = max(worst, err)
        expr = sum(int(a) * xs[int(j)] for a, j in zip(ints, idx, strict=True) if a != 0)
        if not math.isinf(lo[r]):
            cp.add(expr >= int(math.ceil(lo[r] * f - 1e-9)))
        if not math.isinf(hi[r]):
            cp.add(expr <= int(math.floor(hi[r] * f + 1e-9)))
    nz = np.flatnonzero(model.cost)
    f_obj, obj_ints, err = scale_row(model.cost[nz] / unit[nz])
    worst = max(worst, err)
    cp.minimize(sum(int(a) * xs[int(j)] for a, j in zip(obj_ints, nz, strict=True)))
    if opts.warm_start is not None:
        for j in range(model.n_vars):
            cp.add_hint(xs[j], int(round(opts.warm_start[j] * unit[j])))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(opts.time_limit)
    solver.parameters.relative_gap_limit = opts.gap
    solver.parameters.num_workers = WORKERS
    lines: list[str] = []
    if opts.log_path is not None:
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False  # the log goes to the callback only: stdout is the command's
        solver.log_callback = lines.append
    with quiet_stdout():
        st = solver.solve(cp)
    if opts.log_path is not None:
        opts.log_path.write_text("\n".join(lines) + "\n")
    status = {
        cp_model.OPTIMAL: SolverStatus.OPTIMAL,
        cp_model.FEASIBLE: SolverStatus.FEASIBLE,
        cp_model.INFEASIBLE: SolverStatus.INFEASIBLE,
    }.get(st, SolverStatus.ERROR)
    if not status.has_solution:
        return Outcome(status, scaling_error=worst)
    return Outcome(
        status,
        np.array([solver.value(v) for v in xs], dtype=float) / unit,
        solver.ObjectiveValue() / f_obj,
        solver.BestObjectiveBound() / f_obj,
        int(solver.NumBranches()),
        worst,
    )
