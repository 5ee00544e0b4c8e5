"""Gavel's allocation LP in PuLP, the readable model (CBC and SCIP solve it; on HiGHS the
same LP is built as arrays, :mod:`hetsched.formulations.gavel.matrix`): time fractions
``X[j, k]`` of job j on GPU type k.

Constraints (Gavel, OSDI 2020, section 3): ``0 <= X_jk``, ``X_jk = 0`` where the job cannot
run (no variable), ``sum_k X_jk <= 1`` (a job runs on one type at a time) and
``sum_j s_j X_jk <= C_k`` (a type's GPUs are not over-committed; ``s_j`` is the gang size).

Objectives on ``rho_j(X) = (s_j / w_j) * sum_k T_jk X_jk / E_j`` (throughput relative to the
equal share ``E_j``, :meth:`AllocationProblem.equal_share_throughput`):

- max-min fairness: ``max t`` with ``t <= rho_j`` for every job; then, with ``t`` held at
  its optimum, ``max sum_j rho_j`` (the first step of Gavel's water filling: the second
  stage only spends what the bottleneck job cannot use, instead of leaving it to the LP's
  arbitrary vertex);
- max-sum throughput: ``max sum_j sum_k T_jk X_jk / E_j`` (normalised, see docs/policies.md);
  raw max-sum, Gavel's own: ``max sum_j sum_k T_jk X_jk``.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import pulp

from hetsched.core.result import Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import call_word
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Array, Objective
from hetsched.formulations.pulp_backend import run

log = logging.getLogger(__name__)

#: In the max-min second stage, t may give up this relative amount of its optimum.
MAX_MIN_RELAXATION = 1e-9


class GavelLp:
    """The allocation LP of an :class:`AllocationProblem` for one objective."""

    def __init__(self, problem: AllocationProblem, objective: Objective | str) -> None:
        self.problem = problem
        self.objective = Objective(objective)
        self.lp = pulp.LpProblem("gavel", pulp.LpMinimize)
        self.fraction: dict[tuple[int, int], pulp.LpVariable] = {}
        for j in range(len(problem.job_ids)):
            for k in range(len(problem.gpu_types)):
                if problem.throughput[j, k] > 0:
                    self.fraction[j, k] = self.lp.add_variable(f"x_{j}_{k}", 0, 1,
                                                               "Continuous")
        self._by_job: list[list[tuple[int, pulp.LpVariable]]] = [[] for _ in problem.job_ids]
        self._by_type: list[list[tuple[int, pulp.LpVariable]]] = [[] for _ in problem.gpu_types]
        for (j, k), var in self.fraction.items():
            self._by_job[j].append((k, var))
            self._by_type[k].append((j, var))
        equal = problem.equal_share_throughput()
        #: rho_j as a linear expression of the fractions
        self.rho = [
            pulp.LpAffineExpression([(var, float(problem.scale_factors[j] / problem.weights[j]
                                                 * problem.throughput[j, k] / equal[j]))
                                     for k, var in row])
            for j, row in enumerate(self._by_job)]
        self.floor = self.lp.add_variable("t", 0, None, "Continuous")
        self._one_type_at_a_time()
        self._type_capacity()
        if self.objective is Objective.MAX_MIN:
            self._fair_floor()
            self.lp.setObjective(-1.0 * self.floor)
        else:
            raw = self.objective is Objective.MAX_SUM_RAW
            self.lp.setObjective(pulp.LpAffineExpression(
                [(var, -float(problem.throughput[j, k] / (1.0 if raw else equal[j])))
                 for (j, k), var in self.fraction.items()]))

    def _one_type_at_a_time(self) -> None:
        """sum_k X_jk <= 1 for every job j."""
        for j, row in enumerate(self._by_job):
            self.lp += pulp.LpAffineExpression([(var, 1.0) for _, var in row]) <= 1, f"time_{j}"

    def _type_capacity(self) -> None:
        """sum_j s_j X_jk <= C_k for every GPU type k."""
        for k, column in enumerate(self._by_type):
            if column:
                gpus = pulp.LpAffineExpression([(var, float(self.problem.scale_factors[j]))
                                                for j, var in column])
                self.lp += gpus <= float(self.problem.capacity[k]), f"gpus_{k}"

    def _fair_floor(self) -> None:
        """t <= rho_j(X) for every job j."""
        for j, rho in enumerate(self.rho):
            self.lp += self.floor <= rho, f"floor_{j}"

    def solve(self, backend: str = "highs", budget: Budget | None = None) -> Allocation:
        """Solve within ``budget`` (both stages for max-min; an LP solved to optimality is
        deterministic, so deterministic budgets set no limit); fractions clipped to [0, 1].
        A stage that does not finish leaves no allocation: ``Allocation.ok`` is then
        false, never a half-solved vertex."""
        began = time.perf_counter()
        problem = self.problem
        if not problem.job_ids:
            return Allocation(problem, np.zeros((0, len(problem.gpu_types))), 0.0, True)
        budget = budget or Budget.unlimited()
        stats = run(self.lp, backend, budget)
        optimal = stats.outcome is Status.OPTIMAL
        if stats.objective is None:
            log.warning("gavel LP: %s", call_word(stats.outcome))
            return Allocation(problem, self._values(), math.nan, False,
                              time.perf_counter() - began)
        if self.objective is Objective.MAX_MIN:
            best_floor = float(self.floor.varValue or 0.0)
            self.lp += self.floor >= best_floor * (1 - MAX_MIN_RELAXATION), "floor_held"
            self.lp.setObjective(pulp.LpAffineExpression(
                [(var, -coefficient) for rho in self.rho for var, coefficient in rho.items()]))
            first = self._values()
            second = run(self.lp, backend, budget)
            if second.objective is None:  # keep the first stage's vertex
                log.warning("gavel LP second stage: %s", call_word(second.outcome))
                for (j, k), var in self.fraction.items():
                    var.varValue = float(first[j, k])
            optimal = optimal and second.outcome is Status.OPTIMAL
        fractions = self._values()
        return Allocation(problem, fractions, problem.objective_value(self.objective, fractions),
                          optimal, time.perf_counter() - began)

    def _values(self) -> Array:
        fractions = np.zeros(self.problem.throughput.shape)
        for (j, k), var in self.fraction.items():
            fractions[j, k] = var.varValue or 0.0
        return np.asarray(np.clip(fractions, 0.0, 1.0), dtype=np.float64)


def solve_allocation(problem: AllocationProblem, objective: Objective | str = Objective.MAX_MIN,
                     *, backend: str = "highs", budget: Budget | None = None) -> Allocation:
    """Gavel's optimal time fractions for ``problem`` within ``budget``: on ``highs`` the LP
    built as arrays over job classes (:mod:`hetsched.formulations.gavel.matrix`), on
    ``cbc`` or ``scip`` this readable model (``GavelLp(...).solve("highs")`` solves it
    on HiGHS too: the tests' reference)."""
    if backend == "highs":
        from hetsched.formulations.gavel.matrix import solve_matrix

        return solve_matrix(problem, objective, budget=budget)
    return GavelLp(problem, objective).solve(backend, budget)
