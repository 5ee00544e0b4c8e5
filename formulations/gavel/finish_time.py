"""Gavel's heterogeneity-aware finish-time fairness (its ``finish_time_fairness_perf``
policy; Themis's rho, NSDI 2020): the allocation that minimises the largest ratio of a
job's expected finish time under the allocation to its finish time with 1/n of the
cluster to itself,

    min_X  max_j  (since_j + steps_j / r_j(X)) / iso_j,    r_j(X) = sum_k T_jk X_jk

over Gavel's allocations X (time fractions: ``sum_k X_jk <= 1``, ``sum_j s_j X_jk <=
C_k``). ``since_j`` is the time since job j arrived, ``steps_j`` its steps left, and
``iso_j`` the time it would take with 1/n of the cluster: the time its steps done so far
took at the isolated speed of each past solve, plus its steps left at today's isolated
speed (n the active jobs; :func:`hetsched.core.fairness.isolated_shares`), as Gavel
accumulates it.

Gavel hands the ratio to a conic solver (cvxpy). It is quasi-convex: for a target z, the
allocations that finish every job within z are those giving each job at least
``c_j(z) = steps_j / (z iso_j - since_j)`` steps/s, a polytope. So this solves Gavel's
max-min LP (:class:`~hetsched.formulations.gavel.matrix.AllocationSolver`, HiGHS, one
row per job, each solve warm-started from the previous one) with each job's weight set
so its normalised share is ``r_j / c_j(z)``: the LP's optimum t >= 1 says z is reached,
and its allocation finishes every job by ``z' = max_j (since_j + steps_j / r_j) / iso_j
<= z``. Starting from the isolated allocation's z, each solve lowers z (a Dinkelbach
iteration: z' < z while t > 1) until it gains less than :data:`RELATIVE_GAP`.

That LP iteration is the reference (``FinishTimeSolver(method="lp")``). By default the
optimum is found without it, through the GPU types' capacity prices
(:mod:`hetsched.formulations.gavel.finish_prices`: a search on z whose every step is
proved by prices, and a small LP with a row per type), exact within :data:`RELATIVE_GAP`;
the LP iteration is only the fallback when the prices do not settle a problem. The two
reach the same worst ratio but not the same allocation: the LP iteration's last solve
maximises the sum of the jobs' normalised shares (Gavel's max-min second stage), the
prices give each job the cheapest mix for its rate at the optimum, then the spare GPUs
greedily to the pairs of most normalised rate per GPU (that stage's greedy form; see
that module). Both are optima of Gavel's
problem, whose cvxpy solve picks one of its own."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

from hetsched.core.fairness import isolated_shares
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.finish_prices import PriceSearch, spare_by_value
from hetsched.formulations.gavel.matrix import AllocationSolver
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Array, Objective

#: The iteration stops once a solve lowers the worst ratio by less than this (relative).
RELATIVE_GAP = 1e-6
#: At most this many LPs per allocation.
MAX_SOLVES = 50

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class FinishTimeProblem:
    """Gavel's allocation problem (its weights unused) and, per job (rows), the time since
    its arrival (s), its steps left, and its isolated time (s): the time it would have
    taken, and takes for its steps left, with 1/n of the cluster (> 0)."""

    allocation: AllocationProblem
    since_s: Array
    steps_left: Array
    isolated_s: Array

    def __post_init__(self) -> None:
        jobs = len(self.allocation.job_ids)
        for name in ("since_s", "steps_left", "isolated_s"):
            array = np.asarray(getattr(self, name), dtype=np.float64)
            if array.shape != (jobs,) or not np.all(np.isfinite(array)) or np.any(array < 0):
                raise ValueError(f"{name} must be {jobs} finite numbers >= 0")
            object.__setattr__(self, name, array)
        if np.any(self.isolated_s <= 0) or np.any(self.steps_left <= 0):
            raise ValueError("isolated times and steps left must be > 0")

    def ratios(self, fractions: Array) -> Array:
        """Each job's expected finish time under ``fractions`` over its isolated time."""
        speed = (self.allocation.throughput * fractions).sum(axis=1)
        with np.errstate(divide="ignore"):
            finish = self.since_s + np.where(speed > 0, self.steps_left / speed, math.inf)
        return np.asarray(finish / self.isolated_s, dtype=np.float64)

    def worst(self, fractions: Array) -> float:
        """The objective: the largest ratio (0 for no job)."""
        return float(self.ratios(fractions).max(initial=0.0))


def isolated_allocation(problem: AllocationProblem) -> Array:
    """Gavel's isolated allocation of ``problem``'s jobs (1/n of the cluster each, n its
    jobs), with no time where a job cannot run (it would be lost): a feasible allocation."""
    if not problem.job_ids:
        return np.zeros((0, len(problem.gpu_types)))
    shares = isolated_shares(problem.capacity, problem.scale_factors,
                             float(len(problem.job_ids)))
    return np.asarray(np.where(problem.throughput > 0, shares, 0.0), dtype=np.float64)


def isolated_speeds(problem: AllocationProblem) -> Array:
    """Each job's steps/s with 1/n of the cluster (:func:`isolated_allocation`)."""
    return np.asarray((problem.throughput * isolated_allocation(problem)).sum(axis=1),
                      dtype=np.float64)


class FinishTimeSolver:
    """Solves successive finish-time-fairness allocations (module notes): through capacity
    prices (``method="prices"``, the LP iteration as fallback) or by the LP iteration
    alone (``method="lp"``), which keeps its LP's basis from solve to solve. One per
    policy; not thread-safe."""

    def __init__(self, method: Literal["prices", "lp"] = "prices") -> None:
        if method not in ("prices", "lp"):
            raise ValueError(f"method must be 'prices' or 'lp', not {method!r}")
        self.method = method
        self._lp = AllocationSolver(Objective.MAX_MIN, by_class=False)
        #: LPs of one row per job solved by the last call
        self.last_solves = 0
        #: targets tested through prices by the last call
        self.last_tests = 0

    def solve(self, problem: FinishTimeProblem, budget: Budget | None = None) -> Allocation:
        """The allocation of least worst ratio (within :data:`RELATIVE_GAP`), its worst
        ratio as the value; not optimal if an LP failed or the solves ran out
        (:data:`MAX_SOLVES`, or the budget), in which case the best allocation found is
        still a feasible one."""
        began = time.perf_counter()
        base = problem.allocation
        self.last_solves = self.last_tests = 0
        if not base.job_ids:
            return Allocation(base, np.zeros((0, len(base.gpu_types))), 0.0, True)
        budget = budget or Budget.unlimited()
        if self.method == "prices":
            found = self._by_prices(problem, budget)
            if found is not None:
                return Allocation(base, found.fractions, found.value, found.optimal,
                                  time.perf_counter() - began)
            log.debug("ftf: the prices did not settle %d jobs; LP iteration", len(base.job_ids))
        found = self._by_lp(problem, budget)
        return Allocation(base, found.fractions, found.value, found.optimal,
                          time.perf_counter() - began)

    def _by_prices(self, problem: FinishTimeProblem, budget: Budget) -> Allocation | None:
        """The optimum through capacity prices (:mod:`.finish_prices`), or None if they did
        not settle it (or a job can run on no type with GPUs)."""
        base = problem.allocation
        kept = base.capacity > 0
        throughput = base.throughput[:, kept]
        if np.any(throughput.max(axis=1, initial=0.0) <= 0):
            return None
        search = PriceSearch(throughput, base.scale_factors, base.capacity[kept],
                             problem.since_s, problem.steps_left, problem.isolated_s)
        answer = search.search(RELATIVE_GAP, budget)
        self.last_tests = search.tests
        if answer is None:
            return None
        needs = np.zeros(base.throughput.shape)
        needs[:, kept] = answer.fractions
        # (a mix may fill a type within FITS_WITHIN, or a job's time within rounding, over)
        used = base.scale_factors @ needs
        needs *= np.where(used > base.capacity, base.capacity / np.maximum(used, 1e-300), 1.0)
        needs /= np.maximum(needs.sum(axis=1, keepdims=True), 1.0)
        fractions = spare_by_value(needs, search.rates(answer.target), base.throughput,
                                   base.scale_factors, base.capacity)
        worst = problem.worst(fractions)
        if not base.is_feasible(fractions, 1e-9) or not math.isfinite(worst):
            log.warning("ftf prices: an allocation off by more than 1e-9; LP iteration")
            return None
        return Allocation(base, fractions, worst,
                          worst <= answer.lower_bound * (1 + RELATIVE_GAP))

    def _by_lp(self, problem: FinishTimeProblem, budget: Budget) -> Allocation:
        """Dinkelbach's iteration over the max-min LP (module notes)."""
        base = problem.allocation
        best = isolated_allocation(base)
        worst = problem.worst(best)
        equal = base.equal_share_throughput()
        optimal = False
        while self.last_solves < MAX_SOLVES and not budget.expired():
            need = problem.steps_left / (worst * problem.isolated_s - problem.since_s)
            weights = base.scale_factors * need / equal
            answer = self._lp.solve(AllocationProblem(
                base.job_ids, base.gpu_types, base.throughput, base.scale_factors,
                base.capacity, weights), budget)
            self.last_solves += 1
            if not answer.ok:
                break
            reached = problem.worst(answer.fractions)
            if reached < worst:
                best, gained = answer.fractions, (worst - reached) / worst
                worst = reached
                if gained < RELATIVE_GAP:
                    optimal = True
                    break
            else:  # t <= 1: no allocation finishes every job sooner
                optimal = True
                break
        return Allocation(base, best, worst, optimal)
