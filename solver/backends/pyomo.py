"""Pyomo, solved with SolverFactory('highs'); can also write .lp / .mps files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from solver.backends.base import Backend, Outcome, SolveOptions
from solver.model import LinearModel
from specs.vocab import BackendName, SolverStatus


class PyomoBackend(Backend):
    """The declared model as a Pyomo ConcreteModel."""

    name = BackendName.PYOMO

    @classmethod
    def is_available(cls) -> bool:
        try:
            import pyomo.environ  # noqa: F401
            from pyomo.contrib.solver.common.factory import SolverFactory
        except ImportError:
            return False
        try:
            return bool(SolverFactory("highs").available())
        except Exception:
            return False

    @staticmethod
    def to_pyomo(model: LinearModel) -> Any:
        import pyomo.environ as pyo

        lb, ub, integer = model.bounds()
        pm = pyo.ConcreteModel(name="cosine")
        pm.I = pyo.RangeSet(0, model.n_vars - 1)

        def dom(_m: Any, j: int) -> Any:
            return pyo.Integers if integer[j] else pyo.Reals

        def bnd(_m: Any, j: int) -> tuple[float | None, float | None]:
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
        self.to_pyomo(model).write(str(path), io_options={"symbolic_solver_labels": False})
        return path

    def _solve(self, model: LinearModel, opts: SolveOptions) -> Outcome:
        import pyomo.environ as pyo
        from pyomo.contrib.solver.common.factory import SolverFactory
        from pyomo.contrib.solver.common.results import TerminationCondition as TC

        pm = self.to_pyomo(model)
        if opts.warm_start is not None:
            for j in range(model.n_vars):
                pm.x[j].set_value(float(opts.warm_start[j]), skip_validation=True)
        options: dict[str, Any] = {"output_flag": opts.log_path is not None, "log_to_console": False}
        if opts.log_path is not None:
            options["log_file"] = str(opts.log_path)
        res = SolverFactory("highs").solve(
            pm,
            rel_gap=opts.gap,
            time_limit=opts.time_limit,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            solver_options=options,
        )
        tc = res.termination_condition
        if res.incumbent_objective is None:
            infeasible = tc in (TC.provenInfeasible, TC.locallyInfeasible, TC.infeasibleOrUnbounded)
            timeout = tc == TC.maxTimeLimit
            return Outcome(
                SolverStatus.INFEASIBLE if infeasible else SolverStatus.TIMEOUT if timeout else SolverStatus.ERROR
            )
        res.solution_loader.load_vars()
        x = np.array([pyo.value(pm.x[j]) if pm.x[j].value is not None else 0.0 for j in range(model.n_vars)])
        obj = float(res.incumbent_objective)
        bound = float(res.objective_bound) if res.objective_bound is not None else obj
        status = SolverStatus.OPTIMAL if tc == TC.convergenceCriteriaSatisfied else SolverStatus.FEASIBLE
        return Outcome(status, x, obj, bound)
