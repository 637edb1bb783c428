"""HiGHS through highspy's own API (the default back end)."""

from __future__ import annotations

import numpy as np

from solver.backends.base import Backend, Outcome, SolveOptions, quiet_stdout
from solver.model import LinearModel
from specs.vocab import BackendName, SolverStatus


class HighsBackend(Backend):
    """HiGHS's branch and cut, single-threaded, on the row-wise model."""

    name = BackendName.HIGHS

    @classmethod
    def is_available(cls) -> bool:
        try:
            import highspy  # noqa: F401
        except ImportError:
            return False
        return True

    def _solve(self, model: LinearModel, opts: SolveOptions) -> Outcome:
        import highspy

        with quiet_stdout():  # HiGHS prints its banner on file descriptor 1 when an instance is made
            h = highspy.Highs()
        h.setOptionValue("output_flag", opts.log_path is not None)
        h.setOptionValue("log_to_console", False)
        if opts.log_path is not None:
            h.setOptionValue("log_file", str(opts.log_path))
        h.setOptionValue("mip_rel_gap", opts.gap)
        h.setOptionValue("time_limit", float(opts.time_limit))
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
        if opts.warm_start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = list(opts.warm_start)
            sol.value_valid = True
            h.setSolution(sol)
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        ms = highspy.HighsModelStatus
        has = int(info.primal_solution_status) == int(highspy.SolutionStatus.kSolutionStatusFeasible)
        if status == ms.kOptimal:
            st = SolverStatus.OPTIMAL
        elif status == ms.kInfeasible:
            st = SolverStatus.INFEASIBLE
        elif has:
            st = SolverStatus.FEASIBLE
        else:
            st = SolverStatus.TIMEOUT if status == ms.kTimeLimit else SolverStatus.ERROR
        if not has:
            return Outcome(st, nodes=int(info.mip_node_count))
        return Outcome(
            st,
            np.array(h.getSolution().col_value),
            float(info.objective_function_value),
            float(info.mip_dual_bound),
            int(info.mip_node_count),
        )
