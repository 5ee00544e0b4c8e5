"""Gavel's ``min_total_duration_perf`` policy: the allocation that finishes every active job
soonest, i.e. minimises the makespan of the current jobs,

    min_X T   s.t.  sum_k T_jk X_jk >= steps_j / T  for every job j

over Gavel's allocations X (``sum_k X_jk <= 1``, ``sum_j s_j X_jk <= C_k``; ``steps_j``
the job's steps left).

Gavel bisects on T (from 100 s to 10^6 s, widening by tenfold until a T is feasible),
solving a feasibility problem (cvxpy, ECOS) at each T, and stops within 5 % of the
least T. Here the constraint is linear in the rate ``u = 1/T``: ``sum_k T_jk X_jk -
steps_j u >= 0``, so ``max u`` is one LP whose optimum is exact (no 5 % slack, no
bracket to widen), solved once by HiGHS. ``u`` is scaled as ``w = T_lb u``, with
``T_lb = max_j steps_j / max_k T_jk`` (every job alone on its fastest type: no
allocation does better, so ``0 <= w <= 1``), and each job's row is divided by its best
speed, so the coefficients lie in [0, 1] whatever the units of steps and seconds.

The makespan pins only the last job to finish; the other jobs' time is left to the LP's
vertex (Gavel takes ECOS's interior point at a T up to 5 % above the least). A second
stage, the makespan held, maximises the total throughput relative to each job's equal
share, ``sum_j sum_k T_jk X_jk / E_j`` (``gavel-max-sum``'s objective), so the time the
last job cannot use goes to the others instead of being left idle.

Rows, over job classes (:mod:`hetsched.formulations.gavel.class_lp`; a class also has one
number of steps left): time and capacity as every allocation, and
``sum_k (T_ck / R_c) x_ck - steps_c / (R_c T_lb) w >= 0`` for every class c (``R_c =
max_k T_ck``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.class_lp import ClassColumns, solve_in_stages
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Array
from hetsched.formulations.mip.model import INF, MatrixBuilder


@dataclass(frozen=True, eq=False)
class DurationProblem:
    """Gavel's allocation problem (its weights unused) and each job's steps left (> 0)."""

    allocation: AllocationProblem
    steps_left: Array

    def __post_init__(self) -> None:
        steps = np.asarray(self.steps_left, dtype=np.float64)
        if steps.shape != (len(self.allocation.job_ids),) or not np.all(np.isfinite(steps)) \
                or np.any(steps <= 0):
            raise ValueError(f"steps_left must be {len(self.allocation.job_ids)} finite "
                             "numbers > 0")
        object.__setattr__(self, "steps_left", steps)

    def makespan(self, fractions: Array) -> float:
        """``max_j steps_j / sum_k T_jk X_jk`` (s): when the last job would finish at the
        speeds of ``fractions`` (``inf`` if a job gets no speed; 0 for no job)."""
        speed = (self.allocation.throughput * fractions).sum(axis=1)
        if np.any(speed <= 0):
            return math.inf
        return float((self.steps_left / speed).max(initial=0.0))

    def lower_bound(self) -> float:
        """``T_lb = max_j steps_j / max_k T_jk`` (s): every job alone on its fastest type."""
        best = self.allocation.throughput.max(axis=1, initial=0.0)
        return float((self.steps_left / best).max(initial=0.0))


class _DurationLp:
    """The arrays of the min-total-duration LP (see the module)."""

    def __init__(self, problem: DurationProblem) -> None:
        base = problem.allocation
        self.columns = ClassColumns.of(base, problem.steps_left)
        self.lower_bound = problem.lower_bound()
        columns = self.columns
        self.steps = columns.per_class(problem.steps_left)
        self.best_speed = columns.throughput.max(axis=1)
        builder = MatrixBuilder()
        builder.add_columns(columns.num_pairs, 0.0, 1.0)
        self.rate = int(builder.add_columns(1, 0.0, INF)[0])  # w, the last column
        columns.one_type_at_a_time(builder)
        columns.type_capacity(builder)
        self._finish_by_the_makespan(builder)
        self.model = builder.build(np.zeros(builder.num_cols))
        equal = columns.throughput @ (base.capacity / base.capacity.sum())
        pairs = (columns.cls, columns.gpu_type)
        #: stage 1: max w; stage 2: max sum_c n_c sum_k T_ck / E_c x_ck
        self.stages = [np.zeros(builder.num_cols), np.zeros(builder.num_cols)]
        self.stages[0][self.rate] = -1.0
        self.stages[1][:columns.num_pairs] = -columns.classes.size[columns.cls] \
            * columns.throughput[pairs] / equal[columns.cls]

    def _finish_by_the_makespan(self, builder: MatrixBuilder) -> None:
        """sum_k (T_ck / R_c) x_ck - steps_c / (R_c T_lb) w >= 0 for every class c."""
        columns = self.columns
        pairs = (columns.cls, columns.gpu_type)
        rows = np.concatenate([columns.cls, np.arange(columns.num_classes)])
        cols = np.concatenate([np.arange(columns.num_pairs),
                               np.full(columns.num_classes, self.rate)])
        values = np.concatenate([columns.throughput[pairs] / self.best_speed[columns.cls],
                                 -self.steps / (self.best_speed * self.lower_bound)])
        builder.add_rows(rows, cols, values, 0.0, INF, count=columns.num_classes)


def min_total_duration(problem: DurationProblem, budget: Budget | None = None) -> Allocation:
    """The allocation of least makespan (both stages, see the module); its makespan (s)
    as the value, recomputed from the fractions. Not ``ok`` if the first stage did not
    finish within ``budget``."""
    began = time.perf_counter()
    base = problem.allocation
    if not base.job_ids:
        return Allocation(base, np.zeros((0, len(base.gpu_types))), 0.0, True)
    lp = _DurationLp(problem)
    values, optimal = solve_in_stages(lp.model, lp.stages, budget)
    if values is None:
        return Allocation(base, np.zeros(base.throughput.shape), math.nan, False,
                          time.perf_counter() - began)
    fractions = lp.columns.fractions(values)
    return Allocation(base, fractions, problem.makespan(fractions), optimal,
                      time.perf_counter() - began)
