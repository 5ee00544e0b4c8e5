"""Gavel's ``max_sum_throughput_normalized_by_cost_perf`` policy and its ``_SLOs`` version:
the allocation of most throughput per dollar,

    max_X  sum_j sum_k T_jk X_jk / (E_j p_k)
    s.t.   sum_k T_jk X_jk >= steps_j / (deadline_j - now)   for jobs with a deadline

over Gavel's allocations X (``sum_k X_jk <= 1``, ``sum_j s_j X_jk <= C_k``); ``p_k`` the
price of a GPU of type k per hour, ``E_j`` job j's throughput with an equal share of the
cluster (:meth:`AllocationProblem.equal_share_throughput`).

Where it departs from Gavel's code (``scheduler/policies/max_sum_throughput.py``), on
purpose:

- Gavel sums raw steps/s over prices, so a model with small steps counts more than one
  with large steps; each job's throughput is divided by ``E_j`` here, as
  ``gavel-max-sum`` does (docs/policies.md), unless ``normalized`` is off
  (``max-throughput-per-cost-raw``: Gavel's objective).
- With deadlines, Gavel drops every deadline when the LP is infeasible. Here the jobs
  that could not meet theirs even alone (their need above their best speed with all the
  time of their best type, ``max_k T_jk min(1, C_k / s_j)``) are left out first; only if
  the others still cannot all be met are all deadlines dropped. A deadline already past
  constrains nothing (Gavel's rate would be negative, which any allocation meets).

Rows, over job classes (:mod:`hetsched.formulations.gavel.class_lp`; a class also has one
rate to meet, ``need_c``): time and capacity as every allocation, and
``sum_k (T_ck / need_c) x_ck >= 1`` for every class with ``need_c > 0``.
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

#: A job's speed may fall short of its deadline's need by this much (relative) and meet it.
NEED_TOLERANCE = 1e-7


@dataclass(frozen=True, eq=False)
class CostProblem:
    """Gavel's allocation problem (its weights unused), the price of each GPU type (USD
    per GPU-hour, > 0), and the speed each job must get to meet its deadline (steps/s;
    0: no deadline to meet)."""

    allocation: AllocationProblem
    prices: Array
    need: Array
    #: divide each job's throughput by its equal share ``E_j`` (Gavel's code does not:
    #: ``raw``, its objective ``sum_j sum_k T_jk X_jk / p_k``)
    normalized: bool = True

    def __post_init__(self) -> None:
        base = self.allocation
        prices = np.asarray(self.prices, dtype=np.float64)
        need = np.asarray(self.need, dtype=np.float64)
        if prices.shape != (len(base.gpu_types),) or not np.all(np.isfinite(prices)) \
                or np.any(prices <= 0):
            raise ValueError(f"prices must be {len(base.gpu_types)} finite numbers > 0")
        if need.shape != (len(base.job_ids),) or not np.all(np.isfinite(need)) \
                or np.any(need < 0):
            raise ValueError(f"need must be {len(base.job_ids)} finite numbers >= 0")
        object.__setattr__(self, "prices", prices)
        object.__setattr__(self, "need", need)

    def value(self, fractions: Array) -> float:
        """The objective: ``sum_j sum_k T_jk X_jk / (E_j p_k)`` (per USD/h; without
        ``normalized``, ``E_j = 1``)."""
        base = self.allocation
        relative = base.throughput / base.equal_share_throughput()[:, np.newaxis] \
            if self.normalized else base.throughput
        return float((relative * fractions / self.prices[np.newaxis, :]).sum())

    def best_alone(self) -> Array:
        """Each job's speed alone on the cluster: ``max_k T_jk min(1, C_k / s_j)``."""
        base = self.allocation
        share = np.minimum(1.0, base.capacity[np.newaxis, :] / base.scale_factors[:, np.newaxis])
        return np.asarray((base.throughput * share).max(axis=1, initial=0.0), dtype=np.float64)

    def missed(self, fractions: Array) -> Array:
        """Which jobs' speeds under ``fractions`` fall short of their need."""
        speed = (self.allocation.throughput * fractions).sum(axis=1)
        return np.asarray(speed < self.need * (1 - NEED_TOLERANCE), dtype=np.bool_)


@dataclass(frozen=True, eq=False)
class CostAllocation:
    """The allocation (its value the objective, per USD/h), and the jobs whose deadlines
    the LP was made to meet (a subset of those with a need; see the module)."""

    allocation: Allocation
    kept: tuple[str, ...]


def _lp_arrays(problem: CostProblem, need: Array) -> tuple[ClassColumns, MatrixBuilder, Array]:
    """The LP's columns, rows and objective (minimised) for the needs ``need``."""
    base = problem.allocation
    columns = ClassColumns.of(base, need)
    builder = MatrixBuilder()
    builder.add_columns(columns.num_pairs, 0.0, 1.0)
    columns.one_type_at_a_time(builder)
    columns.type_capacity(builder)
    _meet_the_deadlines(columns, columns.per_class(need), builder)
    pairs = (columns.cls, columns.gpu_type)
    equal = columns.throughput @ (base.capacity / base.capacity.sum()) \
        if problem.normalized else np.ones(len(columns.throughput))
    # (prices over the cheapest: the same optimum, coefficients near 1)
    prices = problem.prices / problem.prices.min()
    cost = -columns.classes.size[columns.cls] * columns.throughput[pairs] \
        / (equal[columns.cls] * prices[columns.gpu_type])
    return columns, builder, cost


def _meet_the_deadlines(columns: ClassColumns, need: Array, builder: MatrixBuilder) -> None:
    """sum_k (T_ck / need_c) x_ck >= 1 for every class c with need_c > 0."""
    constrained = need > 0
    row_of = np.cumsum(constrained) - 1
    mask = constrained[columns.cls]
    builder.add_rows(row_of[columns.cls[mask]], np.flatnonzero(mask),
                     columns.throughput[columns.cls[mask], columns.gpu_type[mask]]
                     / need[columns.cls[mask]], 1.0, INF, count=int(constrained.sum()))


def max_throughput_per_cost(problem: CostProblem, budget: Budget | None = None
                            ) -> CostAllocation:
    """The allocation of most throughput per dollar meeting the deadlines it can (see the
    module); not ``ok`` if no LP finished within ``budget``."""
    began = time.perf_counter()
    base = problem.allocation
    if not base.job_ids:
        return CostAllocation(Allocation(base, np.zeros((0, len(base.gpu_types))), 0.0, True),
                              ())
    need = np.where(problem.need <= problem.best_alone(), problem.need, 0.0)
    attempts = [need, np.zeros_like(need)] if np.any(need > 0) else [need]
    for attempt in attempts:
        columns, builder, cost = _lp_arrays(problem, attempt)
        values, optimal = solve_in_stages(builder.build(cost), [cost], budget)
        if values is not None:
            fractions = columns.fractions(values)
            kept = tuple(base.job_ids[j] for j in np.flatnonzero(attempt > 0).tolist())
            return CostAllocation(Allocation(base, fractions, problem.value(fractions),
                                             optimal, time.perf_counter() - began), kept)
        if budget is not None and budget.expired():
            break
    return CostAllocation(Allocation(base, np.zeros(base.throughput.shape), math.nan, False,
                                     time.perf_counter() - began), ())
