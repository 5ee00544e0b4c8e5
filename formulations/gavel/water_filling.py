"""Weighted max-min fairness by water-filling (Gavel's ``max_min_fairness_water_filling``
policy): the allocation that raises every job's weighted normalised rate
``rho_j / w_j`` together, and, when some jobs cannot go higher, keeps raising the others.

Gavel's max-min LP (:mod:`hetsched.formulations.gavel.matrix`) has one floor: it
maximises ``t`` with ``rho_j >= t w_j`` for every job, then gives what is left by the
greatest sum of ``rho``. When the floor is held by a few jobs that cannot take more (a
job runs on its whole gang at most), everything above it goes by that sum, not by the
weights. Water-filling repeats the first stage: after each solve, the jobs whose floor
rows have a dual price > 0 are the ones that hold ``t`` (the duals add up to 1, so at
least one job has one); their level is fixed at ``t`` and ``t`` is raised again for the
others, until every job has a level. A last stage gives what the levels leave by the
greatest sum of normalised rates ``T_jk / E_j`` (weights play no part in it).

The LP is over job classes (identical throughput row, gang and weight:
:class:`~hetsched.formulations.gavel.class_lp.ClassColumns`), one HiGHS instance warm
from solve to solve: fixing a class changes its floor row's coefficient of ``t`` and its
bound. Rows, in the class form (``s`` gang, ``C`` capacity, ``a_ck = s_c / w_c T_ck /
E_c``): ``sum_k x_ck <= 1``; ``sum_c n_c s_c x_ck <= C_k``; ``t - sum_k a_ck x_ck <= 0``
for a class still rising, ``- sum_k a_ck x_ck <= - level_c`` for one fixed.
"""

from __future__ import annotations

import math
import time

import highspy
import numpy as np

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.class_lp import ClassColumns, run_highs
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem
from hetsched.formulations.mip.highs import load_model
from hetsched.formulations.mip.model import INF, MatrixBuilder

#: A fixed level is held within this (relative), so rounding cannot make it infeasible.
LEVEL_SLACK = 1e-9
#: A floor row's dual above this marks its class as holding ``t``.
DUAL_TOLERANCE = 1e-9


def water_filling(problem: AllocationProblem, budget: Budget | None = None, *,
                  share: str = "throughput") -> Allocation:
    """The water-filling allocation of ``problem`` (module notes); its value is the least
    ``rho_j / w_j``. Not ok (value nan) if an LP did not end optimal. ``share="gpus"``
    fills GPUs instead of normalised rates: the floor rows count a job's GPUs held,
    ``s_j sum_k x_jk / w_j`` (weighted shares of GPUs, every type alike, as quotas count
    them); the last stage still gives what is left by normalised rates."""
    if share not in ("throughput", "gpus"):
        raise ValueError(f"share must be 'throughput' or 'gpus', not {share!r}")
    began = time.perf_counter()
    jobs, types = problem.throughput.shape
    if not jobs:
        return Allocation(problem, np.zeros((0, types)), 0.0, True)
    budget = budget or Budget.unlimited()
    columns = ClassColumns.of(problem, problem.weights)
    pairs, classes = columns.num_pairs, columns.num_classes
    equal = columns.throughput @ (problem.capacity / problem.capacity.sum())
    relative = columns.throughput[columns.cls, columns.gpu_type] / equal[columns.cls]
    weight = columns.per_class(problem.weights)
    rho = columns.gang[columns.cls] / weight[columns.cls] * (
        relative if share == "throughput" else 1.0)
    builder = MatrixBuilder()
    builder.add_columns(pairs, 0.0, 1.0)
    builder.add_columns(1, 0.0, INF)  # t, the last column
    columns.one_type_at_a_time(builder)
    columns.type_capacity(builder)
    first_floor = builder.num_rows
    builder.add_rows(np.concatenate([columns.cls, np.arange(classes)]),
                     np.concatenate([np.arange(pairs), np.full(classes, pairs)]),
                     np.concatenate([-rho, np.ones(classes)]), -INF, 0.0, count=classes)
    cost = np.zeros(pairs + 1)
    cost[-1] = -1.0
    highs = highspy.Highs()
    for option, setting in (("output_flag", False), ("threads", 1), ("random_seed", 0)):
        highs.setOptionValue(option, setting)
    load_model(highs, builder.build(cost))
    rising = np.ones(classes, dtype=bool)
    rising[np.setdiff1d(np.arange(classes), columns.cls)] = False  # (runs nowhere: level 0)
    for c in np.flatnonzero(~rising).tolist():
        highs.changeCoeff(first_floor + c, pairs, 0.0)
    level = np.zeros(classes)
    while rising.any():
        if not run_highs(highs, budget):
            return _failed(problem, began)
        solution = highs.getSolution()
        t = float(solution.col_value[pairs])
        duals = np.abs(np.asarray(solution.row_dual, dtype=np.float64)[
            first_floor:first_floor + classes])
        holding = rising & (duals > DUAL_TOLERANCE)
        if not holding.any():
            holding = rising.copy()
        for c in np.flatnonzero(holding).tolist():
            level[c] = t * (1.0 - LEVEL_SLACK)
            highs.changeCoeff(first_floor + c, pairs, 0.0)
            highs.changeRowBounds(first_floor + c, -math.inf, -level[c])
        rising &= ~holding
    # What the levels leave, by the greatest sum of normalised rates.
    highs.changeColBounds(pairs, 0.0, 0.0)
    efficiency = np.zeros(pairs + 1)
    efficiency[:pairs] = -columns.classes.size[columns.cls] * relative
    highs.changeColsCost(pairs + 1, np.arange(pairs + 1, dtype=np.int32), efficiency)
    if not run_highs(highs, budget):
        return _failed(problem, began)
    fractions = columns.fractions(np.asarray(highs.getSolution().col_value, dtype=np.float64))
    value = float(problem.normalised(fractions).min()) if share == "throughput" else \
        float((problem.scale_factors * fractions.sum(axis=1) / problem.weights).min())
    return Allocation(problem, fractions, value, True, time.perf_counter() - began)


def _failed(problem: AllocationProblem, began: float) -> Allocation:
    return Allocation(problem, np.zeros(problem.throughput.shape), math.nan, False,
                      time.perf_counter() - began)

