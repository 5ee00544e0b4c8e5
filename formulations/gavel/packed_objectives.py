"""Gavel's other allocations with space sharing, over the jobs alone and the pairs of one-GPU
jobs of a :class:`~hetsched.formulations.gavel.packed.PackedProblem` (each job's rate
``r_j = sum_k T_jk x_jk + sum_{p of j} sum_k P_jpk y_pk``, the time and capacity rows of
every packed allocation):

- :func:`packed_finish_time`, Gavel's ``finish_time_fairness_packed``: the least worst
  ratio of a job's expected finish time to its isolated time,
  ``min max_j (since_j + steps_j / r_j) / iso_j``. As :mod:`.finish_time` does without
  pairs, for a target z the allocations finishing every job within z are those giving
  each job ``c_j(z) = steps_j / (z iso_j - since_j)``: the packed max-min LP with each
  job's normalised rate ``r_j / c_j(z)`` (Dinkelbach's iteration, each solve lowering z
  to the worst ratio its allocation reaches, until it gains less than
  :data:`RELATIVE_GAP`). The last solve is an interior point of the allocations that
  reach the optimum, as Gavel's conic solver returns.
- :func:`packed_min_total_duration`, Gavel's ``min_total_duration_packed``: the least
  makespan ``max_j steps_j / r_j``, the packed max-min LP with normalised rates
  ``r_j / steps_j`` (its optimum is one over the makespan): one interior-point solve,
  whose answer is the interior allocation of least makespan (Gavel bisects on the
  makespan and keeps ECOS's interior allocation at a makespan up to 5 % above the least;
  ``min-total-duration`` measured both: 0.918 against 0.917 of Gavel's average JCT).
- :func:`packed_water_filling`, Gavel's ``max_min_fairness_water_filling_packed``: the
  max-min floor raised in stages, the jobs that hold it fixed at their level after each.
- :func:`packed_feasible`: a point inside the allocations giving each job a rate, with
  no objective (Gavel's bisection keeps such a point at its last feasible makespan).
- :func:`packed_throughput_per_cost`, Gavel's
  ``max_sum_throughput_normalized_by_cost_packed_SLOs``: the most throughput per dollar,
  ``max sum_j r_j / (E_j p)`` (each term over the price of the GPU it runs on; raw
  steps/s, Gavel's objective, with ``normalized`` off), each job with a rate to meet
  getting it; if no allocation meets every one, none is asked (as Gavel drops its SLOs).

Each is solved by HiGHS's interior-point method without crossover (as
:func:`~hetsched.formulations.gavel.packed.solve_packed_max_min`), every array built at
once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import highspy
import numpy as np

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.central import interior_point
from hetsched.formulations.gavel.packed import PackedColumns, PackedProblem, solve_packed_max_min
from hetsched.formulations.gavel.problem import Array
from hetsched.formulations.mip.model import INF

#: Dinkelbach's iteration stops once a solve lowers the worst ratio by less than this.
RELATIVE_GAP = 1e-6
#: At most this many LPs per finish-time allocation.
MAX_SOLVES = 50
#: A job's rate may fall short of the rate asked of it by this much (relative).
NEED_TOLERANCE = 1e-6


@dataclass(frozen=True)
class PackedAnswer:
    """Time fractions alone (jobs x types) and together (pairs x types), the objective's
    value (the worst ratio, the makespan in s, or the throughput per dollar), whether it
    is proved optimal (within the method's gap), and the LPs solved."""

    alone: Array
    together: Array
    value: float
    optimal: bool
    solves: int


def asking(problem: PackedProblem, need: Array) -> PackedProblem:
    """``problem`` with each job's weight set so that its normalised rate in the max-min
    LP is its rate over ``need`` (steps/s, > 0): ``w_j = s_j need_j / E_j``."""
    base = problem.alone
    weights = base.scale_factors * need / base.equal_share_throughput()
    return replace(problem, alone=replace(base, weights=np.asarray(weights, dtype=np.float64)))


def worst_ratio(problem: PackedProblem, alone: Array, together: Array, since_s: Array,
                steps_left: Array, isolated_s: Array) -> float:
    """The largest ``(since_j + steps_j / r_j) / iso_j`` (``inf`` if a job gets no rate)."""
    rate = problem.rates(alone, together)
    if np.any(rate <= 0):
        return math.inf
    return float(((since_s + steps_left / rate) / isolated_s).max(initial=0.0))


def packed_finish_time(problem: PackedProblem, since_s: Array, steps_left: Array,
                       isolated_s: Array, start: tuple[Array, Array],
                       budget: Budget | None = None) -> PackedAnswer | None:
    """The packed allocation of least worst finish-time ratio (module notes), from the
    feasible allocation ``start`` (alone, together), whose worst ratio must be finite;
    ``None`` if it is not. Not optimal if an LP failed or the solves ran out (the best
    allocation found is still feasible)."""
    best = start
    worst = worst_ratio(problem, *best, since_s, steps_left, isolated_s)
    if not math.isfinite(worst):
        return None
    budget = budget or Budget.unlimited()
    solves, optimal = 0, False
    while solves < MAX_SOLVES and not budget.expired():
        need = steps_left / (worst * isolated_s - since_s)
        found = solve_packed_max_min(asking(problem, need), budget)
        solves += 1
        if found is None:
            break
        reached = worst_ratio(problem, *found, since_s, steps_left, isolated_s)
        if reached >= worst:  # no allocation finishes every job sooner
            optimal = True
            break
        best, gained, worst = found, (worst - reached) / worst, reached
        if gained < RELATIVE_GAP:
            optimal = True
            break
    return PackedAnswer(best[0], best[1], worst, optimal, solves)


def packed_min_total_duration(problem: PackedProblem, steps_left: Array,
                              budget: Budget | None = None) -> PackedAnswer | None:
    """The interior packed allocation of least makespan (module notes); ``None`` if HiGHS
    gives none."""
    found = solve_packed_max_min(asking(problem, np.asarray(steps_left, dtype=np.float64)),
                                 budget)
    if found is None:
        return None
    rate = problem.rates(*found)
    makespan = math.inf if np.any(rate <= 0) else float((steps_left / rate).max(initial=0.0))
    return PackedAnswer(found[0], found[1], makespan, True, 1)


def packed_feasible(problem: PackedProblem, need: Array, budget: Budget | None = None
                    ) -> tuple[Array, Array] | None:
    """A point inside the packed allocations that give every job at least ``need``
    steps/s, with no objective: HiGHS's interior-point method on the feasibility LP,
    stopped without crossover, ends inside the polytope (no type need be full, no job
    at exactly its rate), as ECOS does on the feasibility problems of Gavel's bisection
    (``cp.Maximize(1)``, ``policies/min_total_duration.py:43,109``). ``None`` if HiGHS
    gives none (or none is feasible)."""
    base = problem.alone
    jobs, types = base.throughput.shape
    if jobs == 0:
        return np.zeros((0, types)), np.zeros((len(problem.first), types))
    columns = PackedColumns(problem)
    rows, cols, speed = columns.rate_terms()
    scale = 1.0 / np.maximum(need, 1e-300)  # (each row over its need: 1 on the right)
    columns.builder.add_rows(rows, cols, speed * scale[rows], np.where(need > 0, 1.0, 0.0),
                             INF, count=jobs)
    columns.add_limits()
    found = interior_point(columns.builder.build(np.zeros(columns.builder.num_cols)), budget,
                           presolve=False)
    if found is None:
        return None
    answer = columns.allocation(found)
    if answer is None or np.any(problem.rates(*answer) < need * (1.0 - NEED_TOLERANCE)):
        return None
    return answer


def packed_throughput_per_cost(problem: PackedProblem, prices: Array, need: Array,
                               normalized: bool = True, budget: Budget | None = None
                               ) -> PackedAnswer | None:
    """The interior packed allocation of most throughput per dollar (module notes):
    ``prices`` USD per GPU-hour by type (> 0), ``need`` each job's steps/s to meet (0:
    none); ``None`` if HiGHS gives none even with no rate asked."""
    base = problem.alone
    jobs, types = base.throughput.shape
    if jobs == 0:
        return PackedAnswer(np.zeros((0, types)), np.zeros((len(problem.first), types)),
                            0.0, True, 0)
    asked = need > 0
    rank = np.cumsum(asked) - 1  # a job asked a rate: its row among those asked
    for solves, ask in enumerate((True, False) if asked.any() else (False,), start=1):
        columns = PackedColumns(problem)
        rows, cols, speed = columns.rate_terms()
        if ask:  # each job asked a rate: r_j / need_j >= 1 (a job asked none: no row)
            keep = asked[rows]
            columns.builder.add_rows(rank[rows[keep]], cols[keep], speed[keep] /
                                     need[rows[keep]] / (1.0 - NEED_TOLERANCE), 1.0, INF,
                                     count=int(asked.sum()))
        columns.add_limits()
        per_job = 1.0 / base.equal_share_throughput() if normalized else np.ones(jobs)
        on_type = np.concatenate([columns.x_types, columns.y_types, columns.y_types])
        cost = np.zeros(columns.builder.num_cols)
        np.add.at(cost, cols, -speed * per_job[rows] / prices[on_type])
        # Scaled so the largest coefficient is 1 (steps/s and prices vary by orders).
        cost /= max(float(np.abs(cost).max(initial=0.0)), 1e-300)
        found = interior_point(columns.builder.build(cost), budget, presolve=False)
        answer = None if found is None else columns.allocation(found)
        if answer is not None:
            value = float(sum(
                (speed * per_job[rows] / prices[on_type])
                * np.concatenate([answer[0].ravel(), answer[1].ravel(), answer[1].ravel()])))
            return PackedAnswer(answer[0], answer[1], value, True, solves)
    return None


def packed_water_filling(problem: PackedProblem, budget: Budget | None = None
                         ) -> PackedAnswer | None:
    """Gavel's ``max_min_fairness_water_filling_packed``: every job's normalised rate
    ``s_j r_j / E_j`` raised together in proportion to its weight, and once some jobs
    cannot go higher (their floor row has a dual price > 0 in HiGHS's simplex, as
    :mod:`.water_filling` finds them without pairs), the others raised further, until
    every job has a level; then a point inside the allocations that give every job its
    level (:func:`packed_feasible`), as Gavel keeps its last ECOS solve, with no
    further objective. The value is the least ``s_j r_j / (E_j w_j)``; ``None`` if an
    LP did not end optimal."""
    from hetsched.formulations.gavel.matrix import run_highs
    from hetsched.formulations.gavel.water_filling import DUAL_TOLERANCE, LEVEL_SLACK
    from hetsched.formulations.mip.highs import load_model

    base = problem.alone
    jobs, types = base.throughput.shape
    if jobs == 0:
        return PackedAnswer(np.zeros((0, types)), np.zeros((len(problem.first), types)),
                            0.0, True, 0)
    budget = budget or Budget.unlimited()
    relative = base.scale_factors / base.equal_share_throughput()
    columns = PackedColumns(problem)
    builder = columns.builder
    t = int(builder.add_columns(1, 0.0, INF)[0])
    columns.add_limits()
    rows, cols, speed = columns.rate_terms()
    first_floor = builder.num_rows
    builder.add_rows(  # w_j t - s_j r_j / E_j <= -level_j
        np.concatenate([rows, np.arange(jobs)]), np.concatenate([cols, np.full(jobs, t)]),
        np.concatenate([-speed * relative[rows], base.weights]), -INF, 0.0, count=jobs)
    cost = np.zeros(builder.num_cols)
    cost[t] = -1.0
    highs = highspy.Highs()
    for option, setting in (("output_flag", False), ("threads", 1), ("random_seed", 0),
                            ("solver", "simplex")):
        highs.setOptionValue(option, setting)
    load_model(highs, builder.build(cost))
    floors = (first_floor + np.arange(jobs)).astype(np.int32)
    level = np.zeros(jobs)
    rising = base.throughput.max(axis=1, initial=0.0) > 0  # (a job that runs nowhere: 0)
    solves = 0
    while rising.any():
        for job in np.flatnonzero(~rising).tolist():
            highs.changeCoeff(int(floors[job]), t, 0.0)
        highs.changeRowsBounds(jobs, floors, np.full(jobs, -math.inf), -level)
        solves += 1
        if not run_highs(highs, budget):
            return None
        solution = highs.getSolution()
        height = float(solution.col_value[t])
        duals = np.abs(np.asarray(solution.row_dual, dtype=np.float64)[floors])
        holding = rising & (duals > DUAL_TOLERANCE)
        if not holding.any():
            holding = rising.copy()
        level[rising] += base.weights[rising] * height * (1.0 - LEVEL_SLACK)
        rising &= ~holding
    need = level / relative
    inside = packed_feasible(problem, need, budget)
    if inside is None:  # (the last simplex solve's vertex)
        inside = columns.allocation(np.asarray(highs.getSolution().col_value,
                                               dtype=np.float64))
        if inside is None:
            return None
    value = float((relative * problem.rates(*inside) / base.weights).min())
    return PackedAnswer(inside[0], inside[1], value, True, solves + 1)
