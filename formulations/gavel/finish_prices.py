"""Finish-time fairness through the GPU types' capacity prices: the least worst ratio of
:mod:`hetsched.formulations.gavel.finish_time` without an LP of one row per job.

**A target z.** Job j finishes within ratio z if it gets ``c_j(z) = steps_j / (z iso_j -
since_j)`` steps/s. Its time fractions that do, ``P_j(z) = {x >= 0, x_k = 0 where T_jk =
0, sum_k x_k <= 1, T_j . x >= c_j}``, form a polytope whose vertices (at a least-cost
point for prices >= 0) use one type (``x_k = c_j / T_jk``, if ``T_jk >= c_j``) or two
with all of the job's time (``T_jk < c_j < T_jl``). Each is affine in ``c_j``: the
*candidates* below. z is reachable iff some ``x_j`` in every ``P_j(z)`` uses at most
``C_k`` GPUs of every type: iff ``U(z) = sum_j s_j P_j(z)`` (a polytope in as many
dimensions as types) holds a point ``u <= C``.

**Prices.** By LP duality z is out of reach iff some prices ``pi >= 0`` (summing to 1)
make every point of ``U(z)`` cost more than the cluster: ``phi(z, pi) = min_{u in U(z)}
sum_k pi_k u_k / C_k > 1``. The minimum splits into one tiny problem per job (its
cheapest candidate), solved for all jobs at once with numpy.

**Feasibility of z** (column generation): a small LP (HiGHS; a row per type) finds the
mix of usage points found so far whose busiest type is least loaded; its row duals are
prices, whose cheapest point is added, until the mix fits (z is reached: the allocation
is the same mix of the jobs' fractions) or the prices cost more than 1 everywhere (z is
out of reach, the prices prove it).

**The search on z.** ``z_lb = max_j (since_j + steps_j / max_k T_jk) / iso_j`` is a
lower bound (a job cannot beat all of its time on its fastest type). ``phi(., pi)`` is
convex and decreasing in z (a job's least cost is convex and increasing in its rate,
which is convex and decreasing in z), so from a z ruled out by ``pi``, Newton's method
stays below the least z' with ``phi(z', pi) <= 1`` and converges to it: every z below z'
is ruled out by the same prices, so z' is again a lower bound. The search tests each
lower bound; the first one reached is the optimum (exactly, up to rounding). When the
bounds stall, z is raised by half of
:data:`~hetsched.formulations.gavel.finish_time.RELATIVE_GAP` (the answer is then within
that of the optimum). A problem the prices cannot settle in :data:`MAX_ROUNDS` tests is
left to the LP iteration (the caller's).

**The allocation** gives every job the cheapest mix found for its rate at the optimum,
then the GPUs left, greedily to the (job, type) pairs of most normalised rate per GPU
(:func:`spare_by_value`, the greedy form of Gavel's max-min second stage, which the LP
iteration's last solve ran): each job's rate only grows, so the worst ratio stays the
optimum.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import highspy
import numpy as np

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.problem import Array

log = logging.getLogger(__name__)

#: Tests of a target z (each a column generation) before the caller's LP takes over.
MAX_ROUNDS = 40
#: Usage points (columns) added per test of a target before the caller's LP takes over.
MAX_COLUMNS = 200
#: A mix of usage points fits if its busiest type holds this relative amount more than
#: its GPUs (the allocation is then scaled down to fit exactly).
FITS_WITHIN = 1e-9
#: Column generation stops at prices that rule a target out by more than the master may
#: still come down (times this; their Newton step is then about as good as the best).
EARLY_PRICES = 1.0
#: Candidates cost within this of a job's least (relative): tied.
PRICE_TOLERANCE = 1e-12
#: The cheapest point at the master LP's prices costs within this of the master's value
#: (relative; HiGHS's tolerances): no column improves the master.
MASTER_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PriceAnswer:
    """The allocation of the least worst ratio found (needs plus the spare time), a lower
    bound of the optimum proved by prices (or by a job's fastest type), and the target z
    the allocation reaches."""

    fractions: Array
    lower_bound: float
    target: float
    tests: int


class _Candidates:
    """Each job's candidate vertices as affine functions of its rate c: fractions
    ``base + c * per_rate`` (types x jobs x candidates: a price vector weighs them in one
    BLAS call), valid for ``low < c <= high``."""

    def __init__(self, throughput: Array) -> None:
        jobs, types = throughput.shape
        pairs = [(k, m) for k in range(types) for m in range(k + 1, types)]
        count = types + len(pairs)
        self.base = np.zeros((types, jobs, count))
        self.per_rate = np.zeros((types, jobs, count))
        self.low = np.full((jobs, count), math.inf)
        self.high = np.full((jobs, count), -math.inf)
        rows = np.arange(jobs)
        with np.errstate(divide="ignore", invalid="ignore"):
            for k in range(types):  # one type: x_k = c / T_k
                usable = throughput[:, k] > 0
                self.per_rate[k, usable, k] = 1.0 / throughput[usable, k]
                self.low[usable, k] = 0.0
                self.high[usable, k] = throughput[usable, k]
            for q, (k, m) in enumerate(pairs, start=types):  # all the time on two types
                slow = np.where(throughput[:, k] <= throughput[:, m], k, m)
                fast = k + m - slow
                t_slow, t_fast = throughput[rows, slow], throughput[rows, fast]
                usable = (t_slow > 0) & (t_fast > t_slow)
                span = np.where(usable, t_fast - t_slow, 1.0)
                # x_fast = (c - T_slow) / span, x_slow = (T_fast - c) / span
                self.base[fast, rows, q] = np.where(usable, -t_slow / span, 0.0)
                self.per_rate[fast, rows, q] = np.where(usable, 1.0 / span, 0.0)
                self.base[slow, rows, q] = np.where(usable, t_fast / span, 0.0)
                self.per_rate[slow, rows, q] = np.where(usable, -1.0 / span, 0.0)
                self.low[usable, q] = t_slow[usable]
                self.high[usable, q] = t_fast[usable]


class PriceSearch:
    """The search of the module's notes for one problem: jobs (rows) with throughputs
    ``T``, gangs ``s``, on types of capacities ``C > 0``, and per job the time since its
    arrival, its steps left and its isolated time."""

    def __init__(self, throughput: Array, gangs: Array, capacity: Array, since_s: Array,
                 steps_left: Array, isolated_s: Array) -> None:
        self.throughput = throughput
        self.gangs = gangs
        self.capacity = capacity
        self.since_s = since_s
        self.steps_left = steps_left
        self.isolated_s = isolated_s
        self.candidates = _Candidates(throughput)
        tie_prices = 1.0 / capacity
        self._tie_fixed = np.tensordot(tie_prices, self.candidates.base, 1)
        self._tie_slope = np.tensordot(tie_prices, self.candidates.per_rate, 1)
        self.fastest = throughput.max(axis=1)
        #: tests of a target z so far, and usage points added by the last one
        self.tests = 0
        self.columns = 0
        self._highs = self._master()
        #: each column's fractions
        self._mixes: list[Array] = []

    def lower_bound(self) -> float:
        """``z_lb``: the largest ratio of a job with all of its time on its fastest type."""
        return float(((self.since_s + self.steps_left / self.fastest) / self.isolated_s).max())

    def rates(self, target: float) -> Array:
        """``c_j(z)``: each job's steps/s to finish within ratio ``target`` (at most its
        fastest type's: ``target >= z_lb`` up to rounding)."""
        return np.asarray(np.minimum(self.steps_left / (target * self.isolated_s
                                                         - self.since_s), self.fastest),
                          dtype=np.float64)

    def cheapest(self, rates: Array, prices: Array) -> tuple[Array, Array, Array]:
        """Each job's cheapest fractions reaching ``rates`` at ``prices`` per GPU (ties:
        the cheaper at prices 1 / C), their GPUs of every type, and each job's cost's
        derivative in its rate (in cost per steps/s)."""
        base, per_rate = self.candidates.base, self.candidates.per_rate
        valid = (rates[:, None] > self.candidates.low) & (rates[:, None] <= self.candidates.high)
        fixed, slope = np.tensordot(prices, base, 1), np.tensordot(prices, per_rate, 1)
        cost = np.where(valid, fixed + rates[:, None] * slope, math.inf)
        rows = np.arange(len(rates))
        choice = np.argmin(cost, axis=1)
        least = cost[rows, choice]
        tied = cost <= (least + PRICE_TOLERANCE * np.abs(least))[:, None]
        several = np.flatnonzero(np.count_nonzero(tied, axis=1) > 1)
        if len(several):
            tie_cost = self._tie_fixed[several] \
                + rates[several, None] * self._tie_slope[several]
            choice[several] = np.argmin(np.where(tied[several], tie_cost, math.inf), axis=1)
        fractions = np.maximum(base[:, rows, choice] + rates * per_rate[:, rows, choice], 0.0).T
        return (fractions, self.gangs @ fractions,
                np.asarray(self.gangs * slope[rows, choice], dtype=np.float64))

    def price_value(self, target: float, prices: Array) -> tuple[float, float]:
        """``phi(target, pi)`` (``prices = pi / C``) and its derivative in the target."""
        rates = self.rates(target)
        _, usage, slope = self.cheapest(rates, prices)
        rate_slope = -self.isolated_s * rates * rates / self.steps_left
        return float(usage @ prices), float(slope @ rate_slope)

    def rule_out(self, target: float, prices: Array) -> float:
        """The least z >= ``target`` where ``prices`` no longer rule z out (Newton's method
        from below on the convex, decreasing ``phi(., pi)``): a lower bound of the optimum
        if they rule out ``target``."""
        ruled = target
        for _ in range(100):
            value, slope = self.price_value(ruled, prices)
            if value <= 1.0 or slope >= 0.0:
                break
            step = (value - 1.0) / -slope
            if step <= 1e-15 * ruled:
                break
            ruled += step
        return ruled

    def _master(self) -> highspy.Highs:
        """The master LP, without columns yet: min m s.t. ``sum_i l_i u_ik / C_k - m <= 0``
        for every type k, ``sum_i l_i = 1``, ``l >= 0`` (m the first column)."""
        types = len(self.capacity)
        highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
        highs.setOptionValue("threads", 1)
        # (tight: a column whose reduced cost is within HiGHS's default 1e-7 would enter
        # the master again and again)
        highs.setOptionValue("dual_feasibility_tolerance", 1e-10)
        highs.setOptionValue("primal_feasibility_tolerance", 1e-10)
        highs.addVar(0.0, math.inf)
        highs.changeColCost(0, 1.0)
        highs.addRows(types, np.full(types, -math.inf), np.zeros(types), types,
                      np.arange(types, dtype=np.int32), np.zeros(types, dtype=np.int32),
                      np.full(types, -1.0))
        highs.addRow(1.0, 1.0, 0, np.zeros(0, dtype=np.int32), np.zeros(0))
        return highs

    def test(self, target: float, warm: Array | None) -> tuple[Array | None, Array]:
        """Column generation at ``target``: the fractions of a mix that fits (or None)
        and the last prices ``pi / C`` (which rule ``target`` out if no mix fits). The
        master keeps the columns of lower targets: their points are in ``U(target)``
        (a job's rate for a lower target is higher)."""
        self.tests += 1
        rates = self.rates(target)
        types = len(self.capacity)
        highs = self._highs
        starts = [np.full(types, 1.0 / types), *np.eye(types)] if warm is None else \
            [warm * self.capacity]
        prices = starts[0] / self.capacity
        for start in starts:
            self._add(highs, rates, start / self.capacity)
        self.columns = 0
        while True:
            highs.run()
            if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                log.debug("ftf prices: master LP %s",
                          highs.modelStatusToString(highs.getModelStatus()))
                return None, prices
            solution = highs.getSolution()
            load = float(solution.col_value[0])
            duals = np.maximum(-np.asarray(solution.row_dual[:types], dtype=np.float64), 0.0)
            if duals.sum() > 0:
                prices = duals / duals.sum() / self.capacity
            if load <= 1.0 + FITS_WITHIN:
                weights = np.maximum(np.asarray(solution.col_value[1:], dtype=np.float64), 0.0)
                weights /= weights.sum()
                used = np.flatnonzero(weights > 0)
                return np.tensordot(weights[used], np.array([self._mixes[i] for i in used]),
                                    axes=1), prices
            value = self._add(highs, rates, prices)
            if value >= load - MASTER_TOLERANCE * load or self.columns >= MAX_COLUMNS \
                    or value - 1.0 > EARLY_PRICES * (load - value):
                # (a master no column improves, or prices that rule the target out by
                # most of what the master is over)
                return None, prices

    def _add(self, highs: highspy.Highs, rates: Array, prices: Array) -> float:
        """Adds the cheapest usage point at ``prices`` as a column; its cost."""
        fractions, usage, _ = self.cheapest(rates, prices)
        share = usage / self.capacity
        types = len(self.capacity)
        highs.addCol(0.0, 0.0, math.inf, types + 1, np.arange(types + 1, dtype=np.int32),
                     np.append(share, 1.0))
        self._mixes.append(fractions)
        self.columns += 1
        return float(usage @ prices)

    def search(self, gap: float, budget: Budget) -> PriceAnswer | None:
        """The least worst ratio within relative ``gap`` (None if the prices could not
        settle it, or the budget ran out): the needs' allocation at the target reached."""
        lower = self.lower_bound()
        target = lower
        prices: Array | None = None
        while self.tests < MAX_ROUNDS and not budget.expired():
            fractions, prices = self.test(target, prices)
            if fractions is not None:
                return PriceAnswer(fractions, lower, target, self.tests)
            if self.columns >= MAX_COLUMNS:
                return None
            if self.price_value(target, prices)[0] > 1.0:
                lower = max(lower, self.rule_out(target, prices))
            # (else the master's tolerances left the target undecided.) A new lower bound
            # is tested as it is; one that barely moved, or none, raised by gap / 2.
            target = lower if lower > target * (1 + gap / 4) else \
                max(lower, target) * (1 + gap / 2)
        return None


def spare_by_value(fractions: Array, rates: Array, throughput: Array, gangs: Array,
                   capacity: Array) -> Array:
    """``fractions`` plus the GPUs they leave, greedily to the (job, type) pairs of most
    normalised rate per GPU, ``T_jk / (s_j c_j)`` (``rates`` the ``c_j``), each pair as
    much time as its job has left and its type holds: the greedy form of Gavel's max-min
    second stage (maximise ``sum_j r_j / c_j``), as the LP iteration's last solve did."""
    filled = fractions.copy()
    left = np.maximum(1.0 - filled.sum(axis=1), 0.0)
    room = np.maximum(capacity - gangs @ filled, 0.0)
    with np.errstate(divide="ignore"):
        value = np.where(throughput > 0, throughput / (gangs * rates)[:, None], 0.0)
    jobs, types = np.nonzero(value > 0)
    order = np.lexsort((types, jobs, -value[jobs, types]))
    for job, gpu_type in zip(jobs[order].tolist(), types[order].tolist(), strict=True):
        if left[job] <= 0 or room[gpu_type] <= FITS_WITHIN * capacity[gpu_type]:
            if np.all(room <= FITS_WITHIN * capacity):  # (no GPU left worth giving)
                break
            continue
        time = min(float(left[job]), float(room[gpu_type]) / float(gangs[job]))
        filled[job, gpu_type] += time
        left[job] -= time
        room[gpu_type] = max(float(room[gpu_type]) - time * float(gangs[job]), 0.0)
    return filled
