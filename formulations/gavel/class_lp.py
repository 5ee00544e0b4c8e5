"""What the LPs of Gavel's other policies share (min total duration, throughput per cost):
columns ``x_ck`` over job classes, the two families of rows every allocation has, and
HiGHS solving one objective after another.

**Classes.** Jobs with the same throughput row, gang size and whatever else a policy's
LP reads of them (steps left, a deadline's rate) are identical to its LP. Each LP here is
symmetric in identical jobs and linear, so averaging an optimal allocation over the
permutations of a class keeps it feasible and optimal for every stage (the argument of
:mod:`hetsched.formulations.gavel.matrix`): ``x_ck`` is the time fraction of *each* job
of class c on type k, and a class of ``n_c`` jobs counts ``n_c`` times in the capacity
rows and in the objectives.

Rows (one method each; ``s`` gang size, ``C`` capacity):

- ``sum_k x_ck <= 1`` for every class c (a job runs on one type at a time);
- ``sum_c n_c s_c x_ck <= C_k`` for every type k (no type is over-committed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.matrix import (
    JobClasses,
    one_type_at_a_time,
    run_highs,
    type_capacity,
)
from hetsched.formulations.gavel.problem import AllocationProblem, Array
from hetsched.formulations.mip.highs import load_model
from hetsched.formulations.mip.model import Index, MatrixBuilder, MatrixModel

#: A later stage may lose this much of an earlier stage's optimum (relative, at least
#: this much absolute): the earlier objective is held, not frozen at its last digit.
HOLD_RELATIVE = 1e-9


@dataclass(frozen=True, eq=False)
class ClassColumns:
    """The columns of an allocation LP over the classes of a problem: one per (class,
    type) pair where the class's throughput is > 0."""

    problem: AllocationProblem
    classes: JobClasses
    #: class x type throughput (steps/s), gang size per class
    throughput: Array
    gang: Array
    #: the class and the type of each column
    cls: Index
    gpu_type: Index

    @classmethod
    def of(cls, problem: AllocationProblem, *extra: Array) -> ClassColumns:
        """Classes of identical (throughput row, gang size, ``extra`` per job)."""
        key = np.column_stack([problem.throughput, problem.scale_factors, *extra])
        if len(problem.job_ids):
            _, first, of_job, size = np.unique(key, axis=0, return_index=True,
                                               return_inverse=True, return_counts=True)
        else:
            first = of_job = size = np.zeros(0, dtype=np.int64)
        first = first.astype(np.int64)
        classes = JobClasses(of_job.reshape(-1).astype(np.int64), first,
                             size.astype(np.float64), tuple(range(len(first))))
        throughput = problem.throughput[first]
        column_class, column_type = np.nonzero(throughput > 0)
        return cls(problem, classes, throughput, problem.scale_factors[first],
                   column_class.astype(np.int64), column_type.astype(np.int64))

    @property
    def num_pairs(self) -> int:
        """Columns ``x_ck``."""
        return len(self.cls)

    @property
    def num_classes(self) -> int:
        """Classes."""
        return len(self.classes.first)

    def per_class(self, per_job: Array) -> Array:
        """A per-job quantity that is equal within a class, per class."""
        return np.asarray(per_job, dtype=np.float64)[self.classes.first]

    def one_type_at_a_time(self, builder: MatrixBuilder) -> None:
        """sum_k x_ck <= 1 for every class c."""
        one_type_at_a_time(builder, self.cls, self.num_classes)

    def type_capacity(self, builder: MatrixBuilder) -> None:
        """sum_c n_c s_c x_ck <= C_k for every type k."""
        type_capacity(builder, self.gpu_type, self.classes.size[self.cls] * self.gang[self.cls],
                      self.problem.capacity)

    def fractions(self, values: Array) -> Array:
        """The per-job allocation (jobs x types) of the first ``num_pairs`` column values."""
        per_class = np.zeros(self.throughput.shape)
        per_class[self.cls, self.gpu_type] = values[:self.num_pairs]
        return np.asarray(np.clip(per_class[self.classes.of_job], 0.0, 1.0) + 0.0,
                          dtype=np.float64)


def solve_in_stages(model: MatrixModel, stages: Sequence[Array],
                    budget: Budget | None = None) -> tuple[Array | None, bool]:
    """Minimise ``stages[0] @ x`` over ``model``'s constraints, then each later stage's
    objective with every earlier one held at its optimum (within :data:`HOLD_RELATIVE`);
    HiGHS, one thread, each stage from the previous one's basis. The column values and
    whether every stage ended optimal; ``None`` when the first did not (infeasible, or
    out of ``budget``: a wall-clock budget limits HiGHS's time, an LP is otherwise
    solved to optimality, which is deterministic)."""
    budget = budget or Budget.unlimited()
    highs = highspy.Highs()
    for name, value in (("output_flag", False), ("threads", 1), ("random_seed", 0)):
        highs.setOptionValue(name, value)
    load_model(highs, model)
    columns = np.arange(model.num_cols, dtype=np.int32)
    values: Array | None = None
    for index, cost in enumerate(stages):
        if index:
            assert values is not None
            before = np.asarray(stages[index - 1], dtype=np.float64)
            best = float(before @ values)
            nonzero = np.flatnonzero(before).astype(np.int32)
            highs.addRow(-math.inf, best + HOLD_RELATIVE * max(1.0, abs(best)), len(nonzero),
                         nonzero, before[nonzero])
        highs.changeColsCost(model.num_cols, columns, np.asarray(cost, dtype=np.float64))
        if not run_highs(highs, budget):
            return values, False
        values = np.asarray(highs.getSolution().col_value, dtype=np.float64)
    return values, True
