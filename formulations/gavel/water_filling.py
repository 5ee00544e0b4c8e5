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

**Hierarchical** (``groups``: each job's tenant), as Gavel's water-filling with an
``entity_to_job_mapping`` and its ``fairness`` reweighting: a tenant's weight is the sum
of its jobs' weights, and when some of its jobs are fixed, their part of that weight goes
to its jobs still rising (in proportion to their own weights), so a tenant whose small
jobs cannot take more still gets its share through its others. Each stage then raises
every rising job's rate by ``t`` times its weight of the stage, from the level it reached.

The LP is over job classes (identical throughput row, gang, weight and group:
:class:`~hetsched.formulations.gavel.class_lp.ClassColumns`), one HiGHS instance warm
from solve to solve: a stage changes the floor rows' coefficients of ``t`` and bounds.
Rows, in the class form (``s`` gang, ``C`` capacity, ``r_ck = s_c T_ck / E_c`` or ``s_c``
for GPUs, ``w_c`` the class's weight in the stage, ``b_c`` its level so far):
``sum_k x_ck <= 1``; ``sum_c n_c s_c x_ck <= C_k``; ``w_c t - sum_k r_ck x_ck <= - b_c``
for a class still rising, ``- sum_k r_ck x_ck <= - b_c`` for one fixed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import highspy
import numpy as np
import numpy.typing as npt

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.class_lp import ClassColumns
from hetsched.formulations.gavel.matrix import run_highs
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem
from hetsched.formulations.mip.highs import load_model
from hetsched.formulations.mip.model import INF, MatrixBuilder

#: A fixed level is held within this (relative), so rounding cannot make it infeasible.
LEVEL_SLACK = 1e-9
#: A floor row's dual above this marks its class as holding ``t``.
DUAL_TOLERANCE = 1e-9


def water_filling(problem: AllocationProblem, budget: Budget | None = None, *,
                  share: str = "throughput",
                  groups: npt.ArrayLike | None = None) -> Allocation:
    """The water-filling allocation of ``problem`` (module notes); its value is the least
    ``rho_j / w_j``. Not ok (value nan) if an LP did not end optimal. ``share="gpus"``
    fills GPUs instead of normalised rates: the floor rows count a job's GPUs held,
    ``s_j sum_k x_jk / w_j`` (weighted shares of GPUs, every type alike, as quotas count
    them); the last stage still gives what is left by normalised rates. ``groups`` (an
    integer per job, -1 for none) makes it hierarchical (module notes)."""
    if share not in ("throughput", "gpus"):
        raise ValueError(f"share must be 'throughput' or 'gpus', not {share!r}")
    group = np.full(len(problem.job_ids), -1, dtype=np.int64) if groups is None else \
        np.asarray(groups, dtype=np.int64)
    if group.shape != (len(problem.job_ids),):
        raise ValueError(f"groups has shape {group.shape}, expected "
                         f"({len(problem.job_ids)},)")
    began = time.perf_counter()
    jobs, types = problem.throughput.shape
    if not jobs:
        return Allocation(problem, np.zeros((0, types)), 0.0, True)
    budget = budget or Budget.unlimited()
    columns = ClassColumns.of(problem, problem.weights, group.astype(np.float64))
    pairs, classes = columns.num_pairs, columns.num_classes
    equal = columns.throughput @ (problem.capacity / problem.capacity.sum())
    relative = columns.throughput[columns.cls, columns.gpu_type] / equal[columns.cls]
    weight = columns.per_class(problem.weights)
    rate = columns.gang[columns.cls] * (relative if share == "throughput" else 1.0)
    builder = MatrixBuilder()
    builder.add_columns(pairs, 0.0, 1.0)
    builder.add_columns(1, 0.0, INF)  # t, the last column
    columns.one_type_at_a_time(builder)
    columns.type_capacity(builder)
    first_floor = builder.num_rows
    builder.add_rows(np.concatenate([columns.cls, np.arange(classes)]),
                     np.concatenate([np.arange(pairs), np.full(classes, pairs)]),
                     np.concatenate([-rate, weight]), -INF, 0.0, count=classes)
    cost = np.zeros(pairs + 1)
    cost[-1] = -1.0
    highs = highspy.Highs()
    for option, setting in (("output_flag", False), ("threads", 1), ("random_seed", 0)):
        highs.setOptionValue(option, setting)
    load_model(highs, builder.build(cost))
    stages = _Stages(weight, columns.classes.size, columns.per_class(group.astype(np.float64)))
    stages.rising[np.setdiff1d(np.arange(classes), columns.cls)] = False  # (runs nowhere)
    floors = first_floor + np.arange(classes, dtype=np.int32)
    stage_weight = weight.copy()
    while stages.rising.any():
        now = stages.weights()
        for c in np.flatnonzero(now != stage_weight).tolist():
            highs.changeCoeff(first_floor + c, pairs, float(now[c]))
        stage_weight = now
        highs.changeRowsBounds(classes, floors, np.full(classes, -math.inf), -stages.level)
        if not run_highs(highs, budget):
            return _failed(problem, began)
        solution = highs.getSolution()
        t = float(solution.col_value[pairs])
        duals = np.abs(np.asarray(solution.row_dual, dtype=np.float64)[
            first_floor:first_floor + classes])
        holding = stages.rising & (duals > DUAL_TOLERANCE)
        if not holding.any():
            holding = stages.rising.copy()
        stages.level[stages.rising] += now[stages.rising] * t * (1.0 - LEVEL_SLACK)
        stages.rising &= ~holding
    # What the levels leave, by the greatest sum of normalised rates.
    highs.changeRowsBounds(classes, floors, np.full(classes, -math.inf), -stages.level)
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


def groups_of(names: Sequence[str]) -> npt.NDArray[np.int64] | None:
    """Each job's group (an integer per distinct name, in order of name) for a
    hierarchical :func:`water_filling`; ``None`` when there is one name or none."""
    distinct = sorted(set(names))
    if len(distinct) < 2:
        return None
    index = {name: i for i, name in enumerate(distinct)}
    return np.array([index[name] for name in names], dtype=np.int64)


class _Stages:
    """The classes' levels and which still rise, and each rising class's weight in a
    stage: its own, or, in a group, the group's weight (the sum over its jobs) shared
    among its rising classes' jobs in proportion to their own weights."""

    def __init__(self, weight: npt.NDArray[np.float64], size: npt.NDArray[np.float64],
                 group: npt.NDArray[np.float64]) -> None:
        self.own = weight
        self.size = size
        self.group = group.astype(np.int64)
        self.rising = np.ones(len(weight), dtype=bool)
        #: each class's rate so far (each of its jobs')
        self.level = np.zeros(len(weight))
        grouped = self.group >= 0
        self._index = np.unique(self.group[grouped], return_inverse=True)[1].reshape(-1)
        self._grouped = grouped
        self._total = np.bincount(self._index, weights=(size * weight)[grouped])

    def weights(self) -> npt.NDArray[np.float64]:
        """Each class's weight in this stage (0 once fixed)."""
        now = np.where(self.rising, self.own, 0.0)
        if self._grouped.any():
            rising = self.rising[self._grouped]
            left = np.bincount(self._index, weights=np.where(
                rising, (self.size * self.own)[self._grouped], 0.0),
                minlength=len(self._total))
            scale = np.divide(self._total, left, out=np.zeros_like(left), where=left > 0)
            now[self._grouped] = np.where(rising, self.own[self._grouped]
                                          * scale[self._index], 0.0)
        return now


def _failed(problem: AllocationProblem, began: float) -> Allocation:
    return Allocation(problem, np.zeros(problem.throughput.shape), math.nan, False,
                      time.perf_counter() - began)

