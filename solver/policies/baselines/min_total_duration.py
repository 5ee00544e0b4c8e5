"""``min-total-duration`` (and ``min-total-duration-packed``): Gavel's
``min_total_duration_perf``, the allocation that finishes the active jobs soonest,
realised in rounds as ``gavel`` realises its own, and its ``min_total_duration_packed``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hetsched.core.records import Job
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.packed import PackedProblem
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem
from hetsched.policies.baselines.common import steps_left
from hetsched.policies.baselines.gavel_objectives import (
    LEAST_STEPS,
    GavelObjective,
    PackedShares,
)
from hetsched.policies.rolling import ClusterState


class MinTotalDuration(GavelObjective):
    """Gavel's min-total-duration allocation: the time fractions that minimise the
    makespan of the active jobs, ``max_j steps_j / sum_k T_jk X_jk`` (their steps left at
    the allocation's speeds), one LP in the rate 1/T instead of Gavel's bisection on T,
    then the makespan held, the most total relative throughput
    (:mod:`hetsched.formulations.gavel.duration`). Recomputed at the first round boundary
    after the active jobs changed and realised by ``gavel``'s rounds and starvation
    guard (jobs the makespan does not need may get ``X = 0``: the guard lets them run).
    ``min-total-duration-agnostic`` sees every type alike, like Gavel's
    ``min_total_duration``, which gives every type the V100's throughput.
    ``spare="central"``: of the allocations of least makespan, an interior one, as
    Gavel's conic solver returns (:mod:`hetsched.formulations.gavel.central`), not the
    second stage's; ``spare="gavel"``: as Gavel's policy returns, a point inside the
    allocations of makespan at most the T its bisection stops at (:func:`gavels_bisection`),
    found with no objective, as ECOS finds it
    (:func:`hetsched.formulations.gavel.packed_objectives.packed_feasible`, no pairs).
    Packed, the least makespan's interior allocation, or with ``spare="gavel"`` the point
    its bisection gives."""

    def __init__(self, spare: str = "two-stage") -> None:
        super().__init__()
        self.spare = spare

    def alone(self, state: ClusterState, jobs: Sequence[Job], problem: AllocationProblem,
              budget: Budget) -> Allocation:
        """The least-makespan allocation of ``jobs`` at ``state``."""
        from hetsched.formulations.gavel.duration import DurationProblem, min_total_duration

        steps = np.array(steps_left(state, jobs, LEAST_STEPS))
        duration = DurationProblem(problem, steps)
        answer = min_total_duration(duration, budget)
        if self.spare == "central" and answer.ok and problem.job_ids:
            from hetsched.formulations.gavel.central import CENTRAL_TOLERANCE, central_for_rates

            central = central_for_rates(problem, steps / answer.value, budget)
            if central is not None and \
                    duration.makespan(central) <= answer.value * (1 + CENTRAL_TOLERANCE):
                return Allocation(problem, central, duration.makespan(central),
                                  answer.optimal, answer.runtime_s)
        if self.spare == "gavel" and answer.ok and problem.job_ids:
            from hetsched.formulations.gavel.packed_objectives import packed_feasible

            inside = packed_feasible(PackedProblem.without_pairs(problem),
                                     steps / gavels_bisection(answer.value), budget)
            if inside is not None:
                return Allocation(problem, inside[0], duration.makespan(inside[0]),
                                  answer.optimal, answer.runtime_s)
        return answer

    def packed(self, state: ClusterState, jobs: Sequence[Job], problem: PackedProblem,
               budget: Budget) -> PackedShares:
        """Gavel's ``min_total_duration_packed``."""
        from hetsched.formulations.gavel.packed_objectives import (
            packed_feasible,
            packed_min_total_duration,
        )

        steps = np.array(steps_left(state, jobs, LEAST_STEPS))
        answer = packed_min_total_duration(problem, steps, budget)
        if answer is None:
            return None
        if self.spare == "gavel" and math.isfinite(answer.value):
            inside = packed_feasible(problem, steps / gavels_bisection(answer.value), budget)
            if inside is not None:
                return inside
        return answer.alone, answer.together


def gavels_bisection(least: float) -> float:
    """The makespan Gavel's ``min_total_duration_perf`` settles on when the least one is
    ``least`` (s): its bisection from [100 s, 10^6 s] (the range moved up tenfold while
    nothing in it is feasible) stops once the bounds are within 5 % of each other, at
    the last feasible T, which may be up to 5 % above ``least``
    (``scheduler/policies/min_total_duration.py``)."""
    low, high, top = 100.0, 1e6, 1e6
    found: float | None = None
    while found is None:
        while 1.05 * low < high:
            middle = (low + high) / 2.0
            if middle >= least:
                found = high = middle
            else:
                low = middle
        low, high, top = top, top * 10.0, top * 10.0
    return found
