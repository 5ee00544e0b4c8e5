"""PuLP models in and out of the array form, so that the readable PuLP models (placement,
AlloX, Gavel's LP) run on the engines of :mod:`hetsched.formulations.mip`.

:func:`from_pulp` reads a :class:`pulp.LpProblem` once (one pass over its terms: PuLP
holds one Python object per term anyway) into a :class:`MatrixModel`; a maximisation
is negated, so the model's objective is ``-`` PuLP's. :func:`set_pulp_values` writes a
result's values back into the variables' ``varValue`` (and the problem's status), after
which ``pulp.value(problem.objective)`` is PuLP's objective in PuLP's own sense.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pulp
import scipy.sparse as sp

from hetsched.core.result import Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import SolverResult
from hetsched.formulations.mip.model import INF, MatrixModel, Vector
from hetsched.formulations.mip.result import MipSettings


def from_pulp(problem: pulp.LpProblem) -> tuple[MatrixModel, list[pulp.LpVariable]]:
    """The array form of ``problem`` and its variables in column order (PuLP's order:
    by name). Maximisation problems are negated (cost and offset). Column and row names
    are PuLP's."""
    variables: list[pulp.LpVariable] = list(problem.variables())
    index = {var.name: j for j, var in enumerate(variables)}
    constraints = list(problem.constraints())
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    row_lower = np.full(len(constraints), -INF)
    row_upper = np.full(len(constraints), INF)
    for i, constraint in enumerate(constraints):
        for var, coefficient in constraint.items():
            rows.append(i)
            cols.append(index[var.name])
            values.append(float(coefficient))
        lower, upper = constraint.getLb(), constraint.getUb()
        if lower is not None:
            row_lower[i] = float(lower)
        if upper is not None:
            row_upper[i] = float(upper)
    matrix = sp.csr_matrix((np.asarray(values, dtype=np.float64),
                            (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
                           shape=(len(constraints), len(variables)))
    matrix.sum_duplicates()
    cost = np.zeros(len(variables))
    offset = 0.0
    objective = problem.objective
    if objective is not None:
        for var, coefficient in objective.items():
            cost[index[var.name]] += float(coefficient)
        offset = float(objective.constant)
    if problem.sense == pulp.LpMaximize:
        cost, offset = -cost, -offset
    col_lower = np.array([-INF if v.lowBound is None else float(v.lowBound) for v in variables],
                         dtype=np.float64)
    col_upper = np.array([INF if v.upBound is None else float(v.upBound) for v in variables],
                         dtype=np.float64)
    integer = np.array([v.cat == pulp.LpInteger for v in variables], dtype=np.bool_)
    model = MatrixModel(cost, matrix, row_lower, row_upper, col_lower, col_upper, integer,
                        offset + 0.0, tuple(v.name for v in variables),
                        tuple(str(c.name) for c in constraints))
    return model, variables


def pulp_start(variables: Sequence[pulp.LpVariable]) -> Vector | None:
    """The variables' initial values (``setInitialValue``) as a start vector, ``None``
    unless every variable has one."""
    values = [v.varValue for v in variables]
    if any(value is None or not math.isfinite(value) for value in values):
        return None
    return np.asarray(values, dtype=np.float64)


#: PuLP's (status, solution status) for each outcome.
_PULP_STATUS = {
    Status.OPTIMAL: (pulp.LpStatusOptimal, pulp.LpSolutionOptimal),
    Status.FEASIBLE: (pulp.LpStatusOptimal, pulp.LpSolutionIntegerFeasible),
    Status.INFEASIBLE: (pulp.LpStatusInfeasible, pulp.LpSolutionInfeasible),
    Status.TIME_LIMIT: (pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound),
    Status.ERROR: (pulp.LpStatusUndefined, pulp.LpSolutionNoSolutionFound),
}


def set_pulp_values(variables: Sequence[pulp.LpVariable], values: Vector | None,
                    problem: pulp.LpProblem | None = None,
                    outcome: Status | None = None) -> None:
    """Write ``values`` (column order of :func:`from_pulp`) into the variables'
    ``varValue`` (``None`` everywhere when ``values`` is ``None``); with ``problem`` and
    ``outcome``, also set ``problem.status`` and ``problem.sol_status`` the way PuLP's own
    solvers do (FEASIBLE is PuLP's "Optimal" status with an integer-feasible solution)."""
    if values is not None and len(values) != len(variables):
        raise ValueError(f"{len(values)} values for {len(variables)} variables")
    for j, var in enumerate(variables):
        var.varValue = None if values is None else float(values[j])
    if problem is not None and outcome is not None:
        problem.status, problem.sol_status = _PULP_STATUS[outcome]


def solve_pulp(problem: pulp.LpProblem, engine: str, budget: Budget,
               settings: MipSettings | None = None, *, warm_start: bool = False) -> SolverResult:
    """:func:`from_pulp`, :func:`~hetsched.formulations.mip.solve_mip` and :func:`set_pulp_values`
    in one call: the variables' ``varValue`` and the problem's status are set as PuLP's
    solvers set them. With ``warm_start``, the variables' initial values are the start
    (ignored unless every variable has one). The result is in the model's sense
    (a maximisation's objective and bound negated); ``pulp.value(problem.objective)`` is
    PuLP's."""
    from hetsched.formulations.mip import DEFAULT_SETTINGS, solve_mip

    model, variables = from_pulp(problem)
    start = pulp_start(variables) if warm_start else None
    result = solve_mip(model, engine, budget, settings or DEFAULT_SETTINGS, start)
    set_pulp_values(variables, result.values, problem, result.outcome)
    return result
