"""Gavel's allocation LPs built as arrays and solved by HiGHS through ``highspy``.

The same LPs as the readable PuLP model (:mod:`hetsched.formulations.gavel.lp`, kept for
the CBC and SCIP back-ends and as the tests' reference), without one Python object per
variable: every constraint family is a block of a sparse matrix made with numpy.

**Job classes.** Jobs with the same throughput row, gang size and weight are identical
to the LP. Both objectives are symmetric in identical jobs and the constraints are
linear, so averaging any optimal allocation over the permutations of a class gives an
allocation that is feasible and optimal for both stages (every ``rho_j`` of a class
becomes the class average, which is ``>= t``; sums are unchanged). The LP is therefore
solved over classes: ``x_ck`` is the time fraction of *each* job of class c on type k,
and a class of ``n_c`` jobs counts ``n_c`` times in the capacity rows and in the sums.
On Gavel's traces 2,000 to 50,000 active jobs make 80 to 83 classes. With
``by_class=False`` the LP has one row per job (the form Gavel solves; measured in
``benchmarks/allocation.py``).

Constraints (one method each, in the class form; ``s`` gang size, ``C`` capacity):

- ``sum_k x_ck <= 1`` for every class c (a job runs on one type at a time);
- ``sum_c n_c s_c x_ck <= C_k`` for every type k (no type is over-committed);
- max-min only: ``t - sum_k a_ck x_ck <= 0`` for every class c, with
  ``a_ck = s_c / w_c * T_ck / E_c`` (``rho_c >= t``).

Objectives: max-min maximises ``t``, then, with ``t`` held at its optimum (its lower
bound raised, the stage-1 basis kept: a primal simplex warm start), maximises
``sum_c n_c rho_c``; max-sum maximises ``sum_c n_c sum_k T_ck / E_c x_ck``, and raw
max-sum (Gavel's own objective) ``sum_c n_c sum_k T_ck x_ck``.

**Warm starts between solves.** :class:`AllocationSolver` keeps the final basis of each
solve keyed by class (or job) and starts the next solve from it when the job set has
changed by a few jobs: classes seen before keep their columns' and rows' statuses, new
classes enter with their columns at zero and their rows' slacks basic, and HiGHS
completes the (alien) basis. Only the starting point changes, never the optimum.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Hashable
from dataclasses import dataclass

import highspy
import numpy as np

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Array, Objective
from hetsched.formulations.mip.highs import load_model
from hetsched.formulations.mip.model import INF, Index, MatrixBuilder

log = logging.getLogger(__name__)

#: In the max-min second stage, t may give up this relative amount of its optimum.
MAX_MIN_RELAXATION = 1e-9
#: Cold solves of LPs with more columns than this use HiGHS's interior point method (with
#: crossover, so the answer is a vertex): the dual simplex stalls on the degenerate
#: max-min LP (13.9 s for 10,000 jobs against 0.5 s; benchmarks/allocation.py).
IPM_ABOVE_COLUMNS = 4000
#: A warm-started answer off by more than this (time fractions, GPUs) is solved again cold.
FEASIBLE_WITHIN = 1e-7

_BASIC = highspy.HighsBasisStatus.kBasic
_LOWER = highspy.HighsBasisStatus.kLower


@dataclass(frozen=True, eq=False)
class JobClasses:
    """The jobs of a problem grouped into classes the LP cannot tell apart."""

    #: class of each job (jobs,)
    of_job: Index
    #: one job of each class (classes,)
    first: Index
    #: jobs per class (classes,)
    size: Array
    #: what identifies each class from one solve to the next: its LP row (throughput,
    #: gang, weight) as bytes, or its job's id when each job is its own class
    keys: tuple[Hashable, ...]

    @classmethod
    def of(cls, problem: AllocationProblem, by_class: bool = True) -> JobClasses:
        """Classes of identical (throughput row, gang size, weight); one job per class
        when ``by_class`` is false."""
        jobs = len(problem.job_ids)
        if not by_class or jobs == 0:
            index = np.arange(jobs, dtype=np.int64)
            return cls(index, index, np.ones(jobs), problem.job_ids)
        key = np.column_stack([problem.throughput, problem.scale_factors, problem.weights])
        rows, first, of_job, size = np.unique(key, axis=0, return_index=True,
                                              return_inverse=True, return_counts=True)
        return cls(of_job.reshape(-1).astype(np.int64), first.astype(np.int64),
                   size.astype(np.float64), tuple(row.tobytes() for row in rows))


def one_type_at_a_time(builder: MatrixBuilder, column_class: Index, num_classes: int) -> None:
    """sum_k x_ck <= 1 for every class c (``column_class``: each column's class)."""
    columns = len(column_class)
    builder.add_rows(column_class, np.arange(columns), np.ones(columns), -INF, 1.0,
                     count=num_classes)


def type_capacity(builder: MatrixBuilder, column_type: Index, gpus: Array,
                  capacity: Array) -> None:
    """sum_c n_c s_c x_ck <= C_k for every type k (``gpus``: each column's n_c s_c)."""
    builder.add_rows(column_type, np.arange(len(column_type)), gpus, -INF, capacity,
                     count=len(capacity))


@dataclass(frozen=True)
class Timing:
    """Where one solve's time went (s): building the arrays, and inside HiGHS."""

    build_s: float
    highs_s: float
    iterations: int

    def __add__(self, other: Timing) -> Timing:
        return Timing(self.build_s + other.build_s, self.highs_s + other.highs_s,
                      self.iterations + other.iterations)


@dataclass
class _Basis:
    """A final basis by class key: per class, the statuses of its columns (per type, -1
    where it has none), of its time row and of its floor row; then the shared part."""

    by_key: dict[Hashable, tuple[tuple[int, ...], int, int]]
    capacity_rows: tuple[int, ...]
    floor_column: int


class _Lp:
    """The arrays of one allocation LP over classes (see the module's notes)."""

    def __init__(self, problem: AllocationProblem, objective: Objective,
                 classes: JobClasses) -> None:
        self.problem = problem
        self.objective = objective
        self.classes = classes
        first = classes.first
        throughput = problem.throughput[first]
        self.num_classes, self.num_types = throughput.shape
        #: the (class, type) pair of each column with throughput > 0
        self.cls, self.gpu_type = (a.astype(np.int64) for a in np.nonzero(throughput > 0))
        self.num_pairs = len(self.cls)
        equal = (throughput @ (problem.capacity / problem.capacity.sum()))
        relative = throughput[self.cls, self.gpu_type] / equal[self.cls]
        scale = problem.scale_factors[first]
        #: rho's coefficient of each column (a_ck)
        self.rho = scale[self.cls] / problem.weights[first][self.cls] * relative
        #: each column's value to max-sum: T_ck / E_c (raw max-sum: T_ck)
        self.max_sum_value = throughput[self.cls, self.gpu_type] \
            if objective is Objective.MAX_SUM_RAW else relative
        self.gang = scale
        self.with_floor = objective is Objective.MAX_MIN
        builder = MatrixBuilder()
        builder.add_columns(self.num_pairs, 0.0, 1.0)
        if self.with_floor:
            builder.add_columns(1, 0.0, math.inf)  # t, the last column
        one_type_at_a_time(builder, self.cls, self.num_classes)
        type_capacity(builder, self.gpu_type, self.classes.size[self.cls] * self.gang[self.cls],
                      problem.capacity)
        if self.with_floor:
            self._fair_floor(builder)
        cost = np.zeros(builder.num_cols)
        if self.with_floor:
            cost[-1] = -1.0  # max t
        else:
            cost[:] = -classes.size[self.cls] * self.max_sum_value
        self.model = builder.build(cost)
        self.num_cols = self.model.num_cols


    def _fair_floor(self, builder: MatrixBuilder) -> None:
        """t - sum_k a_ck x_ck <= 0 for every class c (t the last column)."""
        rows = np.concatenate([self.cls, np.arange(self.num_classes)])
        cols = np.concatenate([np.arange(self.num_pairs),
                               np.full(self.num_classes, self.num_pairs)])
        builder.add_rows(rows, cols, np.concatenate([-self.rho, np.ones(self.num_classes)]),
                         -INF, 0.0, count=self.num_classes)

    def stage_two_cost(self) -> Array:
        """-sum_c n_c rho_c as column costs (max-min's second stage)."""
        cost = np.zeros(self.num_cols)
        cost[:self.num_pairs] = -self.classes.size[self.cls] * self.rho
        return cost

    def fractions(self, values: Array) -> Array:
        """The per-job allocation (jobs x types) of column values."""
        per_class = np.zeros((self.num_classes, self.num_types))
        per_class[self.cls, self.gpu_type] = values[:self.num_pairs]
        return np.asarray(np.clip(per_class[self.classes.of_job], 0.0, 1.0) + 0.0,
                          dtype=np.float64)


class AllocationSolver:
    """Solves successive allocation LPs with HiGHS, each warm-started from the previous
    one's final basis (see the module's notes). One per policy; not thread-safe."""

    def __init__(self, objective: Objective | str, *, by_class: bool = True,
                 warm_start: bool = True) -> None:
        self.objective = Objective(objective)
        self.by_class = by_class
        self.warm_start = warm_start
        self._basis: _Basis | None = None
        #: where the last solve's time went
        self.last_timing = Timing(0.0, 0.0, 0)

    def solve(self, problem: AllocationProblem, budget: Budget | None = None) -> Allocation:
        """The optimal allocation of ``problem`` (both stages for max-min) within
        ``budget`` (a wall-clock budget limits HiGHS's time; LPs are otherwise solved to
        optimality, which is deterministic). A stage that does not finish leaves no
        allocation: ``Allocation.ok`` is then false."""
        began = time.perf_counter()
        if not problem.job_ids:
            return Allocation(problem, np.zeros((0, len(problem.gpu_types))), 0.0, True)
        budget = budget or Budget.unlimited()
        classes = JobClasses.of(problem, self.by_class)
        keys = classes.keys
        lp = _Lp(problem, self.objective, classes)
        prepared = Timing(time.perf_counter() - began, 0.0, 0)
        highs, ok, warm = self._attempt(lp, keys, budget, warm=True)
        self.last_timing = prepared + self.last_timing
        fractions = lp.fractions(np.asarray(highs.getSolution().col_value, dtype=np.float64))
        if ok and warm and not problem.is_feasible(fractions, FEASIBLE_WITHIN):
            # HiGHS accepts an answer from a completed alien basis within its tolerances on
            # the scaled model (a job's time over 1 by 1.8e-5 was seen on philly.csv):
            # such an answer is not used; the LP is solved again from scratch.
            log.debug("gavel LP: the warm-started answer is off by more than %g; solved cold",
                      FEASIBLE_WITHIN)
            spent = self.last_timing
            highs, ok, _ = self._attempt(lp, keys, budget, warm=False)
            self.last_timing = spent + self.last_timing
            fractions = lp.fractions(np.asarray(highs.getSolution().col_value,
                                                dtype=np.float64))
        if not ok:
            log.warning("gavel LP (HiGHS): %s", highs.modelStatusToString(highs.getModelStatus()))
            return Allocation(problem, np.zeros(problem.throughput.shape), math.nan, False,
                              time.perf_counter() - began)
        if self.warm_start:
            self._keep_basis(highs, lp, keys)
        return Allocation(problem, fractions, problem.objective_value(self.objective, fractions),
                          True, time.perf_counter() - began)

    def _attempt(self, lp: _Lp, keys: tuple[Hashable, ...], budget: Budget,
                 warm: bool) -> tuple[highspy.Highs, bool, bool]:
        """Both stages on a new HiGHS instance, from the kept basis if ``warm`` and there
        is one; the instance, whether it ended optimal, and whether it started warm."""
        began = time.perf_counter()
        highs = _highs(lp, budget)
        warm = warm and self._give_basis(highs, lp, keys)
        built = time.perf_counter()
        if not warm and lp.num_cols > IPM_ABOVE_COLUMNS:
            highs.setOptionValue("solver", "ipm")
        ok = run_highs(highs, budget)
        iterations = int(highs.getInfo().simplex_iteration_count)
        if ok and lp.with_floor:
            floor = float(highs.getSolution().col_value[lp.num_cols - 1])
            highs.setOptionValue("solver", "simplex")
            highs.changeColBounds(lp.num_cols - 1, floor * (1 - MAX_MIN_RELAXATION), math.inf)
            highs.changeColsCost(lp.num_cols, np.arange(lp.num_cols, dtype=np.int32),
                                 lp.stage_two_cost())
            ok = run_highs(highs, budget)
            iterations += int(highs.getInfo().simplex_iteration_count)
        self.last_timing = Timing(built - began, time.perf_counter() - built, iterations)
        return highs, ok, warm

    def _keep_basis(self, highs: highspy.Highs, lp: _Lp, keys: tuple[Hashable, ...]) -> None:
        basis = highs.getBasis()
        if not basis.valid:
            self._basis = None
            return
        col = np.array([int(s) for s in basis.col_status], dtype=np.int64)
        row = np.array([int(s) for s in basis.row_status], dtype=np.int64)
        per_type = np.full((lp.num_classes, lp.num_types), -1, dtype=np.int64)
        per_type[lp.cls, lp.gpu_type] = col[:lp.num_pairs]
        floor_rows = row[lp.num_classes + lp.num_types:] if lp.with_floor else \
            np.full(lp.num_classes, int(_BASIC))
        self._basis = _Basis(
            {key: (tuple(per_type[c].tolist()), int(row[c]), int(floor_rows[c]))
             for c, key in enumerate(keys)},
            tuple(row[lp.num_classes:lp.num_classes + lp.num_types].tolist()),
            int(col[-1]) if lp.with_floor else int(_BASIC))

    def _give_basis(self, highs: highspy.Highs, lp: _Lp, keys: tuple[Hashable, ...]) -> bool:
        """Start from the previous solve's basis, if any class was in it."""
        previous = self._basis
        if previous is None or not self.warm_start or len(previous.capacity_rows) != lp.num_types:
            return False
        per_type = np.full((lp.num_classes, lp.num_types), int(_LOWER), dtype=np.int64)
        time_rows = np.full(lp.num_classes, int(_BASIC), dtype=np.int64)
        floor_rows = np.full(lp.num_classes, int(_BASIC), dtype=np.int64)
        seen = 0
        for c, key in enumerate(keys):
            found = previous.by_key.get(key)
            if found is None:
                continue
            seen += 1
            statuses = np.array(found[0], dtype=np.int64)
            per_type[c] = np.where(statuses >= 0, statuses, int(_LOWER))
            time_rows[c], floor_rows[c] = found[1], found[2]
        if not seen:
            return False
        basis = highspy.HighsBasis()
        col = per_type[lp.cls, lp.gpu_type].tolist()
        row = [*time_rows.tolist(), *previous.capacity_rows]
        if lp.with_floor:
            col.append(previous.floor_column)
            row.extend(floor_rows.tolist())
        status = highspy.HighsBasisStatus
        basis.col_status = [status(s) for s in col]
        basis.row_status = [status(s) for s in row]
        basis.alien = True
        basis.valid = True
        return bool(highs.setBasis(basis) != highspy.HighsStatus.kError)


def _highs(lp: _Lp, budget: Budget) -> highspy.Highs:
    highs = highspy.Highs()
    options: dict[str, object] = {"output_flag": False, "threads": 1, "presolve": "off",
                                  "random_seed": 0}
    left = budget.remaining()
    if left is not None and not budget.deterministic:
        options["time_limit"] = max(left, 1e-3)
    for name, value in options.items():
        highs.setOptionValue(name, value)
    load_model(highs, lp.model)
    return highs


def run_highs(highs: highspy.Highs, budget: Budget) -> bool:
    """One HiGHS run; whether it ended optimal (a wall-clock budget may stop it first)."""
    left = budget.remaining()
    if left is not None and not budget.deterministic:
        if left <= 0:
            return False
        highs.setOptionValue("time_limit", float(left))
    highs.run()
    return bool(highs.getModelStatus() == highspy.HighsModelStatus.kOptimal)


def solve_matrix(problem: AllocationProblem, objective: Objective | str = Objective.MAX_MIN,
                 *, by_class: bool = True, budget: Budget | None = None) -> Allocation:
    """Gavel's optimal time fractions for ``problem``, built as arrays and solved by HiGHS
    (one cold solve; :class:`AllocationSolver` keeps bases between solves)."""
    return AllocationSolver(objective, by_class=by_class, warm_start=False).solve(problem,
                                                                                   budget)
