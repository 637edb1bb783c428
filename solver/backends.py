"""Thin solver back ends for :class:`~solver.model.LinearModel`.

Each back end translates the declared model, solves it, and returns a
:class:`Result` with the certificate fields (status, objective, best bound,
relative MIP gap, nodes, wall time). Solver packages are imported inside the
methods so that importing this module (and ``cosine --help``) stays cheap.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solver.model import LinearModel


@dataclass
class Result:
    status: str  # optimal | feasible | infeasible | error
    objective: float
    bound: float
    gap: float
    nodes: int
    seconds: float
    x: np.ndarray | None
    backend: str
    scaling_error: float = 0.0  # CP-SAT: max relative coefficient rounding


def rel_gap(obj: float, bound: float) -> float:
    """|obj - bound| / max(|obj|, 1e-9): HiGHS's definition, for every back end."""
    if not (math.isfinite(obj) and math.isfinite(bound)):
        return math.inf
    return abs(obj - bound) / max(abs(obj), 1e-9)


class Backend:
    """A solver the model can be handed to."""

    name = "base"

    @classmethod
    def is_available(cls) -> bool:
        return False

    def supports(self, model: LinearModel) -> bool:  # noqa: ARG002 - every back end takes MILPs
        return True

    def solve(
        self,
        model: LinearModel,
        *,
        gap: float = 1e-4,
        time_limit: float = 60.0,
        warm_start: np.ndarray | None = None,
        log_path: Path | None = None,
    ) -> Result:
        raise NotImplementedError


class HighsBackend(Backend):
    """HiGHS through highspy's own API (the default)."""

    name = "highs"

    @classmethod
    def is_available(cls) -> bool:
        try:
            import highspy  # noqa: F401
        except ImportError:
            return False
        return True

    def solve(
        self,
        model: LinearModel,
        *,
        gap: float = 1e-4,
        time_limit: float = 60.0,
        warm_start: np.ndarray | None = None,
        log_path: Path | None = None,
    ) -> Result:
        import highspy

        t0 = time.perf_counter()
        h = highspy.Highs()
        h.setOptionValue("output_flag", log_path is not None)
        h.setOptionValue("log_to_console", False)
        if log_path is not None:
            h.setOptionValue("log_file", str(log_path))
        h.setOptionValue("mip_rel_gap", gap)
        h.setOptionValue("time_limit", float(time_limit))
        h.setOptionValue("threads", 1)
        lb, ub, integer = model.bounds()
        indptr, indices, data, lo, hi = model.csr()
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_ = model.n_vars
        lp.num_row_ = model.n_cons
        lp.col_cost_ = model.cost
        lp.col_lower_ = np.where(np.isinf(lb), -inf, lb)
        lp.col_upper_ = np.where(np.isinf(ub), inf, ub)
        lp.row_lower_ = np.where(np.isinf(lo), -inf, lo)
        lp.row_upper_ = np.where(np.isinf(hi), inf, hi)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = indptr.astype(np.int32)
        lp.a_matrix_.index_ = indices.astype(np.int32)
        lp.a_matrix_.value_ = data
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous for i in integer]
        h.passModel(lp)
        if warm_start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = list(warm_start)
            sol.value_valid = True
            h.setSolution(sol)
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        ms = highspy.HighsModelStatus
        has = info.primal_solution_status == 2  # kSolutionStatusFeasible
        x = np.array(h.getSolution().col_value) if has else None
        if status == ms.kOptimal:
            st = "optimal"
        elif status == ms.kInfeasible:
            st = "infeasible"
        elif has:
            st = "feasible"
        else:
            st = "error" if status != ms.kTimeLimit else "timeout"
        obj = float(info.objective_function_value) if has else math.inf
        bound = float(info.mip_dual_bound) if has else math.inf
        return Result(
            st,
            obj,
            bound,
            rel_gap(obj, bound) if has else math.inf,
            int(info.mip_node_count),
            time.perf_counter() - t0,
            x,
            self.name,
        )


class OrtoolsBackend(Backend):
    """OR-Tools CP-SAT. CP-SAT needs integer coefficients: every row and the
    objective are scaled by 10^k (k chosen per row so that its largest
    coefficient has 9 significant digits) and rounded; the largest relative
    rounding error is reported as ``scaling_error``. Continuous variables are
    made integer in units of 10^-3 (the throughput X, in kops/s, is then
    resolved to 1 op/s)."""

    name = "ortools"
    #: Units of a continuous variable per 1 (resolution 1e-3).
    CONT_UNITS = 1000
    #: Significant digits kept per coefficient row.
    DIGITS = 9

    _pool: Any = None  # one spawned worker process, reused for every solve

    @classmethod
    def is_available(cls) -> bool:
        import importlib.util

        return importlib.util.find_spec("ortools") is not None

    def solve(
        self,
        model: LinearModel,
        *,
        gap: float = 1e-4,
        time_limit: float = 60.0,
        warm_start: np.ndarray | None = None,
        log_path: Path | None = None,
    ) -> Result:
        # OR-Tools 9.15 bundles its own HiGHS, whose symbols clash with highspy's
        # in one process (an ImportError either way round), so CP-SAT runs in a
        # separate, spawned interpreter that never imports highspy.
        import multiprocessing as mp

        if OrtoolsBackend._pool is None:
            OrtoolsBackend._pool = mp.get_context("spawn").Pool(1)
        return OrtoolsBackend._pool.apply(_cpsat_solve, (model, gap, time_limit, warm_start, log_path))

    @classmethod
    def _scale(cls, coeffs: np.ndarray, mode: str = "nearest") -> tuple[float, np.ndarray, float]:
        """Scale a row to integers. ``up`` (for >= rows) and ``down`` (for <=
        rows) round so that every point feasible for the exact row stays
        feasible (all variables are >= 0): CP-SAT solves a slight relaxation,
        and the solution is checked against the exact model afterwards."""
        big = float(np.max(np.abs(coeffs))) if coeffs.size else 1.0
        if big == 0:
            return 1.0, np.zeros_like(coeffs, dtype=np.int64), 0.0
        k = cls.DIGITS - 1 - math.floor(math.log10(big))
        f = 10.0**k
        rnd = {"up": np.ceil, "down": np.floor}.get(mode, np.rint)
        ints = rnd(coeffs * f).astype(np.int64)
        err = float(np.max(np.abs(ints / f - coeffs) / np.maximum(np.abs(coeffs), 1e-300), initial=0.0))
        return f, ints, err


def _cpsat_solve(
    model: LinearModel, gap: float, time_limit: float, warm_start: np.ndarray | None, log_path: Path | None
) -> Result:
    """CP-SAT on the scaled model (runs in the OR-Tools worker process)."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    lb, ub, integer = model.bounds()
    unit = np.where(integer, 1.0, float(OrtoolsBackend.CONT_UNITS))
    cp = cp_model.CpModel()
    big = 10**12
    xs = []
    for j in range(model.n_vars):
        lo_j = -big if math.isinf(lb[j]) else int(math.floor(lb[j] * unit[j]))
        hi_j = big if math.isinf(ub[j]) else int(math.ceil(ub[j] * unit[j]))
        xs.append(cp.new_int_var(lo_j, hi_j, f"x{j}"))
    indptr, indices, data, lo, hi = model.csr()
    worst = 0.0
    for r in range(model.n_cons):
        sl = slice(indptr[r], indptr[r + 1])
        idx = indices[sl]
        coef = data[sl] / unit[idx]  # coefficients per integer unit
        mode = "up" if math.isinf(hi[r]) else "down" if math.isinf(lo[r]) else "nearest"
        f, ints, err = OrtoolsBackend._scale(coef, mode)
        worst = max(worst, err)
        expr = sum(int(a) * xs[int(j)] for a, j in zip(ints, idx, strict=True) if a != 0)
        if not math.isinf(lo[r]):
            cp.add(expr >= int(math.ceil(lo[r] * f - 1e-9)))
        if not math.isinf(hi[r]):
            cp.add(expr <= int(math.floor(hi[r] * f + 1e-9)))
    nz = np.flatnonzero(model.cost)
    f_obj, obj_ints, err = OrtoolsBackend._scale(model.cost[nz] / unit[nz])
    worst = max(worst, err)
    cp.minimize(sum(int(a) * xs[int(j)] for a, j in zip(obj_ints, nz, strict=True)))
    if warm_start is not None:
        for j in range(model.n_vars):
            cp.add_hint(xs[j], int(round(warm_start[j] * unit[j])))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.relative_gap_limit = gap
    solver.parameters.num_workers = 2
    if log_path is not None:
        solver.parameters.log_search_progress = True
        lines: list[str] = []
        solver.log_callback = lines.append
    st = solver.solve(cp)
    if log_path is not None:
        log_path.write_text("\n".join(lines) + "\n")
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        x = np.array([solver.value(v) for v in xs], dtype=float) / unit
        obj = solver.ObjectiveValue() / f_obj
        bound = solver.BestObjectiveBound() / f_obj
        status = "optimal" if st == cp_model.OPTIMAL else "feasible"
        return Result(
            status,
            obj,
            bound,
            rel_gap(obj, bound),
            int(solver.NumBranches()),
            time.perf_counter() - t0,
            x,
            OrtoolsBackend.name,
            worst,
        )
    status = "infeasible" if st == cp_model.INFEASIBLE else "error"
    return Result(status, math.inf, math.inf, math.inf, 0, time.perf_counter() - t0, None, OrtoolsBackend.name, worst)


class PyomoBackend(Backend):
    """Pyomo, solved with SolverFactory('highs'); can write .lp / .mps files."""

    name = "pyomo"

    @classmethod
    def is_available(cls) -> bool:
        try:
            import pyomo.environ  # noqa: F401
        except ImportError:
            return False
        from pyomo.contrib.solver.common.factory import SolverFactory

        try:
            return bool(SolverFactory("highs").available())
        except Exception:
            return False

    @staticmethod
    def to_pyomo(model: LinearModel):  # type: ignore[no-untyped-def]
        import pyomo.environ as pyo

        lb, ub, integer = model.bounds()
        pm = pyo.ConcreteModel(name="cosine")
        pm.I = pyo.RangeSet(0, model.n_vars - 1)

        def dom(_m, j):  # type: ignore[no-untyped-def]
            return pyo.Integers if integer[j] else pyo.Reals

        def bnd(_m, j):  # type: ignore[no-untyped-def]
            return (None if math.isinf(lb[j]) else float(lb[j]), None if math.isinf(ub[j]) else float(ub[j]))

        pm.x = pyo.Var(pm.I, domain=dom, bounds=bnd)
        indptr, indices, data, lo, hi = model.csr()
        pm.c = pyo.ConstraintList()
        for r in range(model.n_cons):
            sl = slice(indptr[r], indptr[r + 1])
            expr = sum(float(a) * pm.x[int(j)] for a, j in zip(data[sl], indices[sl], strict=True))
            lo_r = None if math.isinf(lo[r]) else float(lo[r])
            hi_r = None if math.isinf(hi[r]) else float(hi[r])
            pm.c.add((lo_r, expr, hi_r))
        nz = np.flatnonzero(model.cost)
        pm.obj = pyo.Objective(expr=sum(float(model.cost[j]) * pm.x[int(j)] for j in nz), sense=pyo.minimize)
        return pm

    def write(self, model: LinearModel, path: Path) -> Path:
        """Write the model as .lp or .mps (by suffix) for any solver a user owns."""
        pm = self.to_pyomo(model)
        pm.write(str(path), io_options={"symbolic_solver_labels": False})
        return path

    def solve(
        self,
        model: LinearModel,
        *,
        gap: float = 1e-4,
        time_limit: float = 60.0,
        warm_start: np.ndarray | None = None,
        log_path: Path | None = None,
    ) -> Result:
        import pyomo.environ as pyo
        from pyomo.contrib.solver.common.factory import SolverFactory

        t0 = time.perf_counter()
        pm = self.to_pyomo(model)
        if warm_start is not None:
            for j in range(model.n_vars):
                pm.x[j].set_value(float(warm_start[j]), skip_validation=True)
        opt = SolverFactory("highs")
        options: dict[str, Any] = {"output_flag": log_path is not None, "log_to_console": False}
        if log_path is not None:
            options["log_file"] = str(log_path)
        res = opt.solve(
            pm,
            rel_gap=gap,
            time_limit=time_limit,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            solver_options=options,
        )
        tc = str(res.termination_condition)
        obj = res.incumbent_objective
        if obj is None:
            status = "infeasible" if "nfeasible" in tc else "error"
            return Result(status, math.inf, math.inf, math.inf, 0, time.perf_counter() - t0, None, self.name)
        res.solution_loader.load_vars()
        x = np.array([pyo.value(pm.x[j]) if pm.x[j].value is not None else 0.0 for j in range(model.n_vars)])
        obj = float(obj)
        bound = float(res.objective_bound) if res.objective_bound is not None else obj
        status = "optimal" if "convergenceCriteriaSatisfied" in tc or "optimal" in tc.lower() else "feasible"
        return Result(status, obj, bound, rel_gap(obj, bound), 0, time.perf_counter() - t0, x, self.name)


BACKENDS: dict[str, type[Backend]] = {"highs": HighsBackend, "ortools": OrtoolsBackend, "pyomo": PyomoBackend}


def get_backend(name: str) -> Backend:
    from solver.errors import InputError

    if name not in BACKENDS:
        raise InputError(f"--backend: unknown back end {name!r} (valid: {', '.join(BACKENDS)})")
    cls = BACKENDS[name]
    if not cls.is_available():
        raise InputError(f"--backend {name}: not available on this machine")
    return cls()
