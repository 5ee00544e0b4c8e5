"""The AlloX matching as a PuLP model: ``assign[j, (c, k)]`` in {0, 1} (or [0, 1]).

Constraints: every job takes one slot (sum_s assign_js = 1); slot (c, k) holds at
most m_c jobs (sum_j assign_js <= m_c). Each column has one 1 in a job row and one
in a slot row: the incidence matrix of a bipartite graph, totally unimodular, so
the LP relaxation has an integral optimum equal to the matching's.
"""

from __future__ import annotations

from collections import defaultdict

import pulp

from hetsched.formulations.allox.problem import MatchingProblem
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import SolverResult
from hetsched.formulations.mip import MipSettings
from hetsched.formulations.pulp_backend import run


class AlloxMilp:
    """The assignment model of a :class:`MatchingProblem`."""

    def __init__(self, problem: MatchingProblem, *, relax: bool = False) -> None:
        self.problem = problem
        self.lp = pulp.LpProblem("allox", pulp.LpMinimize)
        self.assign: dict[tuple[int, tuple[int, int]], pulp.LpVariable] = {}
        category = "Continuous" if relax else "Binary"
        for slot in problem.slots():
            for job in range(len(problem.jobs)):
                if problem.cost(job, slot) is not None:
                    c, k = slot
                    self.assign[job, slot] = self.lp.add_variable(f"a_{job}_{c}_{k}", 0, 1,
                                                                  category)
        self._one_slot_per_job()
        self._slot_capacity()
        self.lp.setObjective(pulp.lpSum(
            (problem.cost(job, slot) or 0.0) * var for (job, slot), var in self.assign.items()))

    def _one_slot_per_job(self) -> None:
        """sum_s assign_js = 1 for every job j."""
        by_job: dict[int, list[pulp.LpVariable]] = defaultdict(list)
        for (job, _), var in self.assign.items():
            by_job[job].append(var)
        for job in range(len(self.problem.jobs)):
            self.lp += pulp.lpSum(by_job[job]) == 1, f"job_{job}"

    def _slot_capacity(self) -> None:
        """sum_j assign_j(c,k) <= m_c for every slot (c, k)."""
        by_slot: dict[tuple[int, int], list[pulp.LpVariable]] = defaultdict(list)
        for (_, slot), var in self.assign.items():
            by_slot[slot].append(var)
        for slot in self.problem.slots():
            c, k = slot
            self.lp += (pulp.lpSum(by_slot[slot]) <= len(self.problem.classes[c].machines),
                        f"slot_{c}_{k}")

    def set_start(self, matching: dict[int, tuple[int, int]]) -> None:
        """Start the solver from ``matching`` (a MIP start)."""
        for (job, slot), var in self.assign.items():
            var.setInitialValue(int(matching.get(job) == slot))

    def solve(self, backend: str, settings: MipSettings | None = None,
              budget: Budget | None = None,
              start: dict[int, tuple[int, int]] | None = None) -> tuple[
                  dict[int, tuple[int, int]] | None, SolverResult]:
        """Solve within ``budget`` from ``start`` (if given; the engine returns it if it
        finds nothing better); the matching (``None`` without a solution) and the
        statistics."""
        if start is not None:
            self.set_start(start)
        stats = run(self.lp, backend, budget, settings, warm_start=start is not None)
        if stats.objective is None:
            return None, stats
        matching = {}
        for (job, slot), var in self.assign.items():
            if (var.varValue or 0.0) > 0.5:
                matching[job] = slot
        if len(matching) != len(self.problem.jobs):
            return None, stats
        return matching, stats

    def fractional(self) -> list[float]:
        """Variable values strictly between 0 and 1 (after solving): none when integral."""
        return [v.varValue for v in self.assign.values()
                if v.varValue is not None and 1e-7 < v.varValue < 1 - 1e-7]

    def matrix(self) -> tuple[list[str], list[str], list[list[int]]]:
        """The constraint matrix: row names, column names, dense coefficients."""
        columns = [v.name for v in self.assign.values()]
        index = {name: i for i, name in enumerate(columns)}
        rows, dense = [], []
        for constraint in self.lp.constraints():
            row = [0] * len(columns)
            for var, coefficient in constraint.items():
                row[index[var.name]] = int(coefficient)
            rows.append(str(constraint.name))
            dense.append(row)
        return rows, columns, dense
