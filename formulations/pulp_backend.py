"""Running a readable PuLP model (placement, AlloX, Gavel's LP) on an engine of
:mod:`hetsched.formulations.mip` (HiGHS through highspy, CBC from cbcbox, SCIP), under a budget.

The model is read into arrays once (:func:`hetsched.formulations.mip.pulp_io.from_pulp`),
solved, and the values are written back into the PuLP variables, so the caller reads
``varValue`` as with PuLP's own solvers. Status and bound come from the engine's API,
never from a log; a solver that fails is reported as such, never solved a second time.
"""

from __future__ import annotations

import logging

import pulp

from hetsched.core.log_levels import solve_log_level
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import SolverResult, call_word
from hetsched.formulations.mip import ENGINES, MipSettings
from hetsched.formulations.mip.pulp_io import solve_pulp

log = logging.getLogger(__name__)

BACKENDS = ENGINES


def run(problem: pulp.LpProblem, backend: str, budget: Budget | None = None,
        settings: MipSettings | None = None, warm_start: bool = False) -> SolverResult:
    """Solve ``problem`` on ``backend`` within ``budget``; variable values are left in it.
    With ``warm_start``, the variables' initial values (``setInitialValue``) are the start.
    Objective and bound are in PuLP's sense (a maximisation's bound is an upper bound)."""
    result = solve_pulp(problem, backend, budget or Budget.unlimited(), settings,
                        warm_start=warm_start)
    sign = -1.0 if problem.sense == pulp.LpMaximize else 1.0
    objective = None if result.objective is None else sign * result.objective
    bound = None if result.bound is None else sign * result.bound
    log.log(solve_log_level(), "%s: %s objective %s bound %s in %.3f s",
            backend, call_word(result.outcome), objective, bound, result.wall_s)
    return SolverResult(result.outcome, objective, bound, wall_s=result.wall_s,
                        hit_limit=result.hit_limit, detail=dict(result.detail))
