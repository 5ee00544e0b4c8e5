"""The ``deadline`` planner's large-neighbourhood search: CP-SAT on windows of consecutive
jobs of a plan, every other job fixed (:mod:`hetsched.formulations.deadline.window`).

On 200 jobs and 96 GPUs CP-SAT finds no plan of the whole model in 6 s, and the local
search (:func:`~hetsched.policies.deadline_search.improve_plan`) stalls at a local optimum;
windows of 30 jobs moved together by CP-SAT take its plan further
(docs/formulations.md, "Where the gap stands").
"""

from __future__ import annotations

import logging

from hetsched.formulations.budget import Budget
from hetsched.formulations.deadline.problem import DeadlineProblem, Plan
from hetsched.formulations.deadline.window import solve_window

log = logging.getLogger(__name__)

#: Jobs per window at first (consecutive windows share half of them); a sweep that
#: improves nothing doubles it, up to ``WINDOW_JOBS_MAX``.
WINDOW_JOBS = 8
WINDOW_JOBS_MAX = 64
#: A window of ``WINDOW_JOBS`` jobs gets this part of the budget, a larger one in
#: proportion: wall seconds ...
WINDOW_S = 0.25
#: ... or work units (deterministic budgets; CP-SAT's deterministic time, 0.1 per unit).
WINDOW_UNITS = 0.25
#: A sweep that takes less than this share off the completion term (and no deadline
#: term) counts as improving nothing: on ``medium.json`` the third sweep of 8 jobs gained
#: one tick, 4 s of a 30 s budget.
SWEEP_MIN_GAIN = 1e-3
#: Deterministic budgets: building a window is charged this many units per interval (a
#: free job's mode or a fixed job).
UNITS_PER_INTERVAL = 2e-5


def windows(count: int, size: int) -> list[tuple[int, int]]:
    """Positions ``[first, last)`` of windows of ``size`` over ``count`` places, each
    starting half a window after the one before, the last one ending at ``count``."""
    if count <= size:
        return [(0, count)]
    step = max(1, size // 2)
    firsts = list(range(0, count - size + 1, step))
    if firsts[-1] != count - size:
        firsts.append(count - size)
    return [(first, first + size) for first in firsts]


def improve_by_windows(problem: DeadlineProblem, plan: Plan, budget: Budget, *,
                       threads: int = 1, seed: int = 0) -> Plan:
    """CP-SAT on windows of jobs consecutive in ``plan``'s start order, from the first to
    the last, each from the best plan so far and within a part of ``budget``
    (:data:`WINDOW_S` s or :data:`WINDOW_UNITS` units for :data:`WINDOW_JOBS` jobs); sweeps
    again in the new plan's order while the budget lasts, with windows twice as large
    after a sweep that improved nothing, until one of :data:`WINDOW_JOBS_MAX` jobs improves
    nothing. Never worse than ``plan``; in deterministic mode the result depends only on
    the input and the budget."""
    jobs = problem.jobs
    best, value = plan, problem.evaluate(plan)
    modes = [len(data.modes) for data in jobs]
    size = WINDOW_JOBS
    sweeps = solved = 0
    while size <= WINDOW_JOBS_MAX and not budget.expired():
        before = value
        sweeps += 1
        cap = (WINDOW_UNITS if budget.deterministic else WINDOW_S) * size / WINDOW_JOBS
        order = sorted(range(len(jobs)), key=lambda j: (best[jobs[j].job.id][1], j))
        for first, last in windows(len(order), size):
            if budget.expired():
                break
            free = order[first:last]
            budget.charge(UNITS_PER_INTERVAL * (sum(modes[j] for j in free)
                                                + len(jobs) - len(free)))
            outcome = solve_window(problem, best, free, budget.part(1.0, cap),
                                   threads=threads, seed=seed)
            solved += 1
            found = problem.evaluate(outcome.plan)
            if found < value:
                best, value = outcome.plan, found
        log.debug("windows of %d jobs: %s (%s)", size, value, budget)
        if value[0] == before[0] and value[1] > before[1] * (1.0 - SWEEP_MIN_GAIN):
            if size >= len(jobs):
                break
            size *= 2
    log.debug("windows: %s -> %s in %d windows, %d sweeps (%s)", problem.evaluate(plan),
              value, solved, sweeps, budget)
    return best
