"""Running a PuLP model on CBC or HiGHS with one set of settings, and reading back the
outcome, the objective and the best bound (which PuLP itself does not report).

CBC runs as a command; its bound is read from the log ("Lower bound:" or, when it
proves optimality, the objective). HiGHS runs in-process through highspy; its
bound is ``mip_dual_bound``, and a MIP start is passed with ``setSolution``.
"""

from __future__ import annotations

import logging
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import pulp

from formulations.common import Outcome, SolveStats

log = logging.getLogger(__name__)

BACKENDS = ("cbc", "highs")


@dataclass(frozen=True)
class MipSettings:
    """Time limit (s), relative gap, threads, seed, and whether to pass a MIP start."""

    time_limit_s: float | None = None
    gap: float = 0.0
    threads: int = 1
    seed: int = 0
    warm_start: bool = False


class _Highs(pulp.HiGHS):  # type: ignore[misc]
    """PuLP's highspy interface, plus a MIP start and the dual bound."""

    def __init__(self, warm_start: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.warm_start = warm_start
        self.dual_bound: float | None = None
        self.model_status = ""

    def callSolver(self, lp: pulp.LpProblem) -> None:  # noqa: N802 (PuLP's name)
        highs = lp.solverModel
        if self.warm_start:
            variables = lp.variables()
            values = [v.varValue for v in variables]
            if all(value is not None for value in values):
                import highspy

                solution = highspy.HighsSolution()
                solution.col_value = [float(value) for value in values]
                solution.value_valid = True
                highs.setSolution(solution)
        highs.run()
        info = highs.getInfo()
        self.dual_bound = float(info.mip_dual_bound)
        self.model_status = highs.modelStatusToString(highs.getModelStatus())


def run(problem: pulp.LpProblem, backend: str, settings: MipSettings) -> SolveStats:
    """Solve ``problem`` (a minimisation) on ``backend``; variable values are left in it."""
    began = time.perf_counter()
    if backend == "highs":
        solver = _Highs(settings.warm_start, msg=False, gapRel=settings.gap,
                        threads=settings.threads, timeLimit=settings.time_limit_s,
                        random_seed=settings.seed, mip_abs_gap=0.0)
        problem.solve(solver)
        bound = solver.dual_bound
        limit = "time limit" in solver.model_status.lower()
    elif backend == "cbc":
        handle, log_path = tempfile.mkstemp(suffix=".log", prefix="cbc-")
        os.close(handle)
        try:
            solver = pulp.PULP_CBC_CMD(msg=False, gapRel=settings.gap, threads=settings.threads,
                                       timeLimit=settings.time_limit_s, logPath=log_path,
                                       warmStart=settings.warm_start,
                                       options=[f"randomCbcSeed {settings.seed + 1}",
                                                "allowableGap 0"])
            try:
                problem.solve(solver)
            except pulp.PulpSolverError:
                if not settings.warm_start:
                    raise
                # The bundled CBC can crash while reading a MIP start on larger models:
                # solve again without it rather than fail.
                log.warning("cbc failed with a MIP start; solving again without it")
                solver.optionsDict["warmStart"] = False
                problem.solve(solver)
            with open(log_path, encoding="utf-8", errors="replace") as handle_log:
                text = handle_log.read()
        finally:
            os.unlink(log_path)
        bound = _cbc_bound(text)
        limit = "Stopped on time" in text or "stopped on time" in text.lower()
    else:
        raise ValueError(f"unknown MILP back-end {backend}")
    wall = time.perf_counter() - began
    status = problem.status
    solution = problem.sol_status
    objective = pulp.value(problem.objective) if solution in (
        pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) else None
    if solution == pulp.LpSolutionOptimal and status == pulp.LpStatusOptimal and not limit:
        outcome = Outcome.OPTIMAL if settings.gap == 0 else Outcome.FEASIBLE
        bound = objective  # proven: the bound is the objective (within the solver's tolerance)
    elif solution == pulp.LpSolutionIntegerFeasible or (objective is not None):
        outcome = Outcome.FEASIBLE
    elif status == pulp.LpStatusInfeasible:
        outcome = Outcome.INFEASIBLE
    elif limit or status == pulp.LpStatusNotSolved:
        outcome = Outcome.NO_SOLUTION
    else:
        outcome = Outcome.ERROR
    if bound is not None and not math.isfinite(bound):
        bound = None
    if bound is not None and outcome is not Outcome.OPTIMAL:
        # The solvers report the bound without the objective's constant term.
        bound += float(problem.objective.constant)
    log.info("%s: %s objective %s bound %s in %.2f s", backend, outcome, objective, bound, wall)
    return SolveStats(outcome, objective, bound, wall, hit_time_limit=limit)


def _cbc_bound(text: str) -> float | None:
    """The best bound from a CBC log, if it printed one."""
    match = re.findall(r"Lower bound:\s*([-+0-9.eE]+)", text)
    if match:
        return float(match[-1])
    if "Optimal solution found" in text:
        found = re.findall(r"Objective value:\s*([-+0-9.eE]+)", text)
        if found:
            return float(found[-1])
    return None
