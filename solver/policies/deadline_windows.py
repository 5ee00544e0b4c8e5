"""The ``deadline`` planner's large-neighbourhood search: CP-SAT on windows of a plan,
every other job fixed (:mod:`hetsched.formulations.deadline.window`).

On 200 jobs and 96 GPUs CP-SAT finds no plan of the whole model in 6 s, and the local
search (:func:`~hetsched.policies.deadline_search.improve_plan`) stalls at a local optimum.
A window frees the jobs that two nodes run, consecutive in start order, and lets them take
any mode (any node, GPU type, gang size): moves between the two nodes, and to any other
node where the fixed jobs leave room. Each sweep pairs the nodes at random (of any GPU
types), so the next sweep searches other neighbourhoods. On ``medium.json`` these windows
took the local search's plan from 834,570 s to 802,000-805,000 s in 19 s; windows of 8
jobs consecutive in the plan's start order over all nodes reached 820,000 s, windows of
two nodes of one GPU type 806,700 s (docs/formulations.md, "Where the gap stands").
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from hetsched.formulations.budget import Budget
from hetsched.formulations.deadline.problem import DeadlineProblem, Plan
from hetsched.formulations.deadline.window import solve_window

log = logging.getLogger(__name__)

#: A window frees the jobs of this many nodes ...
NODES_PER_WINDOW = 2
#: ... this many at a time, consecutive in start order (a window starts half a window
#: after the one before). Measured on ``medium.json`` (19 s from the local search's
#: plan): 3 nodes and 9 or 12 jobs reached 811,000 s, 2 nodes and 12 jobs 810,600 s,
#: windows doubling after a sweep that gains little 806,600 s, 2 nodes and 8 jobs
#: 802,300-805,200 s.
WINDOW_JOBS = 8
#: A window gets this part of the budget: wall seconds ...
WINDOW_S = 0.25
#: ... or work units (deterministic budgets; CP-SAT's deterministic time, 0.1 per unit).
WINDOW_UNITS = 0.25
#: A sweep that takes less than this share off the completion term (and no deadline
#: term) improves nothing; after ``STALL_SWEEPS`` of them in a row the search stops
#: (one sweep is one random pairing of the nodes: a later one may still find moves).
SWEEP_MIN_GAIN = 1e-4
STALL_SWEEPS = 5
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


def node_groups(nodes: Sequence[str], rng: random.Random) -> list[list[str]]:
    """``nodes`` shuffled and cut into groups of :data:`NODES_PER_WINDOW` (the last one
    perhaps smaller)."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    return [shuffled[first:first + NODES_PER_WINDOW]
            for first in range(0, len(shuffled), NODES_PER_WINDOW)]


def jobs_on(problem: DeadlineProblem, plan: Plan, nodes: Sequence[str]) -> list[int]:
    """The jobs (indices into ``problem.jobs``) ``plan`` puts on ``nodes``, by start."""
    chosen = set(nodes)
    on = []
    for j, data in enumerate(problem.jobs):
        mode, start = plan[data.job.id]
        if data.modes[mode].node in chosen:
            on.append((start, j))
    return [j for _, j in sorted(on)]


def improve_by_windows(problem: DeadlineProblem, plan: Plan, budget: Budget, *,
                       threads: int = 1, seed: int = 0) -> Plan:
    """CP-SAT on windows of the jobs of two nodes (:data:`WINDOW_JOBS` consecutive in
    start order, each within :data:`WINDOW_S` s or :data:`WINDOW_UNITS` units of
    ``budget``), sweeping over a random pairing of the nodes (drawn from ``seed``), then
    another, while the budget lasts or until :data:`STALL_SWEEPS` sweeps in a row improve
    nothing. Never worse than ``plan``; in deterministic mode the result depends only on
    the input, the budget and ``seed``.

    With a wall-clock budget and ``threads`` > 1, ``threads`` pairs are searched at once
    (one CP-SAT worker each, :func:`merge_windows`); otherwise one pair at a time, each
    window from the best plan so far, CP-SAT with ``threads`` workers."""
    rng = random.Random(seed)
    nodes = sorted(problem.node_capacity())
    best, value = plan, problem.evaluate(plan)
    lanes = threads if threads > 1 and not budget.deterministic else 1
    workers = 1 if lanes > 1 else threads
    sweeps = stalled = 0
    counter = _Counter()
    with ThreadPoolExecutor(lanes, thread_name_prefix="windows") as pool:
        while stalled < STALL_SWEEPS and not budget.expired():
            before = value
            sweeps += 1
            groups = node_groups(nodes, rng)
            for first in range(0, len(groups), lanes):
                if budget.expired():
                    break
                batch = groups[first:first + lanes]
                if lanes == 1:
                    best = _search_pair(problem, best, batch[0], budget=budget,
                                        threads=workers, seed=seed, counter=counter)
                else:
                    search = partial(_search_pair, problem, best, budget=budget,
                                     threads=workers, seed=seed, counter=counter)
                    best = merge_windows(problem, best, list(pool.map(search, batch)))
                value = problem.evaluate(best)
            log.debug("windows, sweep %d: %s (%s)", sweeps, value, budget)
            gained = value[0] < before[0] or value[1] < before[1] * (1.0 - SWEEP_MIN_GAIN)
            stalled = 0 if gained else stalled + 1
    log.debug("windows: %s -> %s in %d windows, %d sweeps, %d at once (%s)",
              problem.evaluate(plan), value, counter.solved, sweeps, lanes, budget)
    return best


class _Counter:
    """Windows solved (for the log)."""

    def __init__(self) -> None:
        self.solved = 0


def _search_pair(problem: DeadlineProblem, plan: Plan, group: Sequence[str], *,
                 budget: Budget, threads: int, seed: int, counter: _Counter) -> Plan:
    """The windows of the jobs ``plan`` puts on the nodes ``group``, each from the best
    plan so far; that plan."""
    jobs = problem.jobs
    cap = WINDOW_UNITS if budget.deterministic else WINDOW_S
    best, value = plan, problem.evaluate(plan)
    order = jobs_on(problem, plan, group)
    if len(order) < 2:
        return plan
    for first, last in windows(len(order), WINDOW_JOBS):
        if budget.expired():
            break
        free = order[first:last]
        budget.charge(UNITS_PER_INTERVAL * (sum(len(jobs[j].modes) for j in free)
                                            + len(jobs) - len(free)))
        outcome = solve_window(problem, best, free, budget.part(1.0, cap),
                               threads=threads, seed=seed)
        counter.solved += 1
        found = problem.evaluate(outcome.plan)
        if found < value:
            best, value = outcome.plan, found
    return best


def merge_windows(problem: DeadlineProblem, plan: Plan, found: Sequence[Plan]) -> Plan:
    """``plan`` with the moves of each plan in ``found`` (each ``plan`` with the jobs of
    other windows moved) taken in turn when the plan stays valid and gets better: windows
    searched at once may move jobs into the same room, and then the later one is dropped."""
    best, value = plan, problem.evaluate(plan)
    for other in found:
        moved = {job: place for job, place in other.items() if plan[job] != place}
        if not moved:
            continue
        merged = {**best, **moved}
        score = problem.evaluate(merged)
        if score < value and not problem.violations(merged):
            best, value = merged, score
    return best
