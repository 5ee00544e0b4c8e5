"""The AlloX matching as a MILP built as arrays (what the ``highs``, ``cbc`` and ``scip``
back-ends solve; the readable PuLP model of :mod:`hetsched.formulations.allox.milp` stays
as the tests' reference).

Columns: ``assign[j, (c, k)]`` in {0, 1} for every job j, class c it can run on, and level
``k = 1 .. levels_c``, with cost ``f_c + k p_jc`` (s). Rows, one family each:

- ``sum_s assign_js = 1`` for every job j (every job takes one slot);
- ``sum_j assign_j(c,k) <= m_c`` for every slot (c, k) (a level of a class holds at most
  one job per machine).

Every column has one 1 in a job row and one in a slot row: the incidence matrix of a
bipartite graph, totally unimodular, so the LP relaxation's optimum is integral.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetsched.formulations.allox.problem import MatchingProblem
from hetsched.formulations.mip.model import INF, Index, MatrixBuilder, MatrixModel, Vector


@dataclass(frozen=True, eq=False)
class AlloxArrays:
    """The model and, for each column, its job, class and level."""

    model: MatrixModel
    job: Index
    machine_class: Index
    level: Index

    @classmethod
    def of(cls, problem: MatchingProblem, *, relax: bool = False) -> AlloxArrays:
        """The assignment model of ``problem`` (binary columns, or [0, 1] if ``relax``)."""
        keys = sorted(problem.processing)
        run_job = np.array([j for j, _ in keys], dtype=np.int64)
        run_class = np.array([c for _, c in keys], dtype=np.int64)
        duration = np.array([problem.processing[key].duration for key in keys], dtype=np.float64)
        levels = np.array([c.levels for c in problem.classes], dtype=np.int64)
        per_run = levels[run_class] if len(keys) else np.zeros(0, dtype=np.int64)
        # one column per (run, level): each run repeated levels_c times, levels 1 .. levels_c
        column_run = np.repeat(np.arange(len(keys), dtype=np.int64), per_run)
        first = np.cumsum(per_run) - per_run
        level = np.arange(len(column_run), dtype=np.int64) - np.repeat(first, per_run) + 1
        job, machine_class = run_job[column_run], run_class[column_run]
        free_at = np.array([c.free_at for c in problem.classes], dtype=np.float64)
        builder = MatrixBuilder()
        columns = builder.add_columns(len(job), 0.0, 1.0) if relax else \
            builder.add_binaries(len(job))
        _one_slot_per_job(builder, columns, job, len(problem.jobs))
        _slot_capacity(builder, columns, machine_class, level, problem)
        cost = free_at[machine_class] + level * duration[column_run]
        return cls(builder.build(cost), job, machine_class, level)

    def start(self, matching: dict[int, tuple[int, int]]) -> Vector:
        """The column values of ``matching`` (job -> (class, level)): a MIP start."""
        chosen = [matching.get(int(j)) == (int(c), int(k))
                  for j, c, k in zip(self.job, self.machine_class, self.level, strict=True)]
        return np.asarray(chosen, dtype=np.float64)

    def matching(self, values: Vector) -> dict[int, tuple[int, int]]:
        """The matching of column values (a column above 1/2 is taken)."""
        taken = np.flatnonzero(values > 0.5)
        return {int(self.job[i]): (int(self.machine_class[i]), int(self.level[i]))
                for i in taken}


def _one_slot_per_job(builder: MatrixBuilder, columns: Index, job: Index, jobs: int) -> None:
    """sum_s assign_js = 1 for every job j."""
    builder.add_rows(job, columns, np.ones(len(columns)), 1.0, 1.0, count=jobs)


def _slot_capacity(builder: MatrixBuilder, columns: Index, machine_class: Index, level: Index,
                   problem: MatchingProblem) -> None:
    """sum_j assign_j(c,k) <= m_c for every slot (c, k)."""
    levels = np.array([c.levels for c in problem.classes], dtype=np.int64)
    first_slot = np.cumsum(levels) - levels
    capacity = np.repeat(np.array([float(len(c.machines)) for c in problem.classes]), levels)
    builder.add_rows(first_slot[machine_class] + level - 1, columns, np.ones(len(columns)),
                     -INF, capacity, count=int(levels.sum()))
