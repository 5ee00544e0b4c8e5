"""The time-indexed LP relaxation (:mod:`hetsched.formulations.completion`) for the
``deadline`` model: a lower bound on its completion term at any size, and a job order to
start from.

The deadline model's completion term is ``sum_j w'_j (e_j - a_j)`` over its plans, with
``w'_j`` the weights as the model scales them and ``e_j`` a job's end on the model's grid
(never before its real end). A plan is one schedule the simulator could produce (gangs
packed on a node, no preemption), so the relaxation's bound on ``sum_j w'_j C_j`` over
*every* schedule, less ``sum_j w_j a_j``, bounds the term of every plan: unlike the
solvers' own completion bound it does not assume the deadline term at its best, and it
exists when the solver gives none (docs/formulations.md).

The order: jobs by the LP's mean busy date estimate ``C_j - p_j / 2`` (``p_j`` the job's
shortest mode), the classic LP-order list schedule for total weighted completion time;
:func:`hetsched.policies.deadline.search.decode` turns it into a plan.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

from hetsched.core.log_levels import solve_log_level
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import TICK_S
from hetsched.formulations.completion import CompletionBoundSettings, completion_bound
from hetsched.formulations.deadline.problem import DeadlineProblem

log = logging.getLogger(__name__)

#: Share of the solver's budget the relaxation may use, and at most this much of it.
LP_SHARE = 0.25
LP_MAX = 60.0
#: Deterministic budgets: HiGHS simplex iterations per work unit (about 1,400 per second
#: measured on medium.json, 200 jobs), and interior point iterations per unit.
LP_ITERATIONS_PER_UNIT = 2_000.0
LP_IPM_ITERATIONS_PER_UNIT = 20.0


@dataclass(frozen=True)
class Relaxation:
    """What the relaxation gave: ``bound_s``, a lower bound on the model's completion term
    (s) over every plan (the planner may raise it to the time-indexed relaxation's, which
    holds for every plan missing no more deadlines than the one it returns); HiGHS's
    ``status``; ``order``, job indices (into
    ``problem.jobs``) by LP mean busy date (empty when no solve ended optimal); its size
    and time."""

    bound_s: float
    status: str
    order: tuple[int, ...]
    columns: int
    rows: int
    seconds: float

    def as_dict(self) -> dict[str, object]:
        """For ``Result.extra``."""
        return {"bound": self.bound_s, "status": self.status, "columns": self.columns,
                "rows": self.rows, "seconds": round(self.seconds, 4)}


def relaxation_settings(budget: Budget) -> CompletionBoundSettings:
    """The relaxation's settings under ``budget`` (a part of the solve's): a wall-clock
    limit, or iteration limits for a deterministic budget (charged afterwards)."""
    amount = budget.remaining()
    if amount is None:
        return CompletionBoundSettings()
    if budget.deterministic:
        return CompletionBoundSettings(
            iteration_limit=max(1, int(amount * LP_ITERATIONS_PER_UNIT)),
            ipm_iteration_limit=max(1, int(amount * LP_IPM_ITERATIONS_PER_UNIT)))
    return CompletionBoundSettings(time_limit_s=max(1e-3, amount))


def relax(problem: DeadlineProblem, budget: Budget) -> Relaxation:
    """The relaxation of ``problem`` within ``budget`` (module notes)."""
    settings = relaxation_settings(budget)
    jobs = [dataclasses.replace(data.job, arrival=max(data.job.arrival, problem.instance.now),
                                weight=data.weight / problem.weight_scale, deadline=None)
            for data in problem.jobs]
    instance = problem.instance
    bound = completion_bound(jobs, instance.cluster, instance.throughput, settings=settings)
    if budget.deterministic:
        budget.charge(bound.iterations / LP_ITERATIONS_PER_UNIT)
    completion = bound.completion_s
    order: tuple[int, ...] = ()
    if len(completion) == len(jobs) and all(math.isfinite(c) for c in completion):
        shortest = [min(m.duration for m in data.modes) * TICK_S for data in problem.jobs]
        order = tuple(sorted(range(len(jobs)),
                             key=lambda j: (completion[j] - shortest[j] / 2, j)))
    value = bound.total_weighted_s - problem.weighted_arrivals()
    log.log(solve_log_level(), "deadline: LP relaxation bound %.6g (%s, %d columns, %.2f s)",
            value, bound.status, bound.columns, bound.build_s + bound.lp_s)
    return Relaxation(value, bound.status, order, bound.columns, bound.rows,
                      bound.build_s + bound.lp_s)
