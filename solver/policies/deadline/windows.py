"""The ``deadline`` planner's large-neighbourhood search: CP-SAT on windows of a plan,
every other job fixed (:mod:`hetsched.formulations.deadline.window`).

On 200 jobs and 96 GPUs CP-SAT finds no plan of the whole model in 6 s, and the local
search (:func:`~hetsched.policies.deadline.search.improve_plan`) stalls at a local optimum.
A window frees the jobs that a few nodes run, consecutive in start order. First they may
take any mode (node, GPU type, gang size): moves between the nodes, to other types, and to
any other node where the fixed jobs leave room. Once that gains little, each keeps its
kind (GPU type, gang size) and the windows grow. Each sweep groups the nodes at random (of
any GPU types; of one type once kinds are kept), so the next sweep searches other
neighbourhoods. Windows of a few nodes beat windows of consecutive jobs over all nodes:
they let jobs move between those nodes (the figures are in
benchmarks/history/formulations.md).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

from hetsched.formulations.budget import Budget
from hetsched.formulations.deadline.problem import DeadlineProblem, Plan
from hetsched.formulations.deadline.window import solve_window

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WindowShape:
    """What a window frees: up to ``jobs`` jobs of ``nodes`` nodes, consecutive in start
    order, in any mode or (``keep_kinds``) each in its kind (GPU type, gang size)."""

    nodes: int
    jobs: int
    keep_kinds: bool


#: Windows first free the jobs of two nodes, 8 at a time, in any mode: the shape that
#: gained most of those measured (benchmarks/history/formulations.md).
ANY_MODE = WindowShape(nodes=2, jobs=8, keep_kinds=False)
#: After a sweep of those that gains less than ``SWITCH_GAIN``, the jobs keep their kinds
#: (by then few plans still change a job's kind), and windows grow, since a window of
#: fixed kinds is a smaller model. Their nodes are of one GPU type: jobs that keep their
#: kinds on nodes of other types never meet, so a mixed group would be several small
#: windows (benchmarks/history/formulations.md has the shapes and groupings measured).
SAME_KIND = WindowShape(nodes=4, jobs=12, keep_kinds=True)
SWITCH_GAIN = 1e-2
#: A window of 8 jobs gets this part of the budget, a larger one in proportion: wall
#: seconds (the best median of those measured over seeds,
#: benchmarks/history/formulations.md) ...
WINDOW_S = 0.18
#: ... or work units (deterministic budgets; CP-SAT's deterministic time, 0.1 per unit).
WINDOW_UNITS = 0.25
#: A sweep that takes less than this share off the completion term (and no deadline
#: term) improves nothing; after ``STALL_SWEEPS`` of them in a row (in windows of the
#: same kind) the search stops (one sweep is one random grouping of the nodes: a later one
#: may still find moves).
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


def node_groups(nodes: Sequence[str], rng: random.Random, size: int,
                gpu_type: Mapping[str, str] | None = None) -> list[list[str]]:
    """``nodes`` shuffled and cut into groups of ``size`` (the last one perhaps smaller);
    with ``gpu_type`` (node -> its GPU type), each group within one type, the groups of all
    types in a shuffled order."""
    if gpu_type is not None:
        groups = [group for gpu in sorted({gpu_type[node] for node in nodes})
                  for group in node_groups([n for n in nodes if gpu_type[n] == gpu], rng,
                                           size)]
        rng.shuffle(groups)
        return groups
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    return [shuffled[first:first + size] for first in range(0, len(shuffled), size)]


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
    """CP-SAT on windows of the jobs of a few nodes (:data:`ANY_MODE`, then, once a sweep
    gains less than :data:`SWITCH_GAIN`, :data:`SAME_KIND`), each within :data:`WINDOW_S`
    s or :data:`WINDOW_UNITS` units of ``budget`` per 8 jobs, sweeping over a random
    grouping of the nodes (drawn from ``seed``), then another, while the budget lasts or
    until :data:`STALL_SWEEPS` sweeps in a row of windows that keep kinds improve nothing.
    Never worse than ``plan``; in deterministic mode the result depends only on the input,
    the budget and ``seed``.

    With a wall-clock budget and ``threads`` > 1, ``threads`` groups are searched at once
    from the same plan (one CP-SAT worker each, :func:`merge_windows`); otherwise one group
    at a time, each window from the best plan so far, CP-SAT with ``threads`` workers."""
    rng = random.Random(seed)
    nodes = sorted(problem.node_capacity())
    gpu_type = {node.name: node.gpu_type for node in problem.instance.cluster.nodes}
    best, value = plan, problem.evaluate(plan)
    lanes = threads if threads > 1 and not budget.deterministic else 1
    search = _GroupSearch(problem, budget, threads=1 if lanes > 1 else threads, seed=seed)
    shape = ANY_MODE
    sweeps = stalled = 0
    with ThreadPoolExecutor(lanes, thread_name_prefix="windows") as pool:
        while stalled < STALL_SWEEPS and not budget.expired():
            before = value
            sweeps += 1
            groups = node_groups(nodes, rng, shape.nodes,
                                 gpu_type if shape.keep_kinds else None)
            for first in range(0, len(groups), lanes):
                if budget.expired():
                    break
                batch = groups[first:first + lanes]
                if lanes == 1:
                    best = search(best, batch[0], shape)
                else:
                    found = list(pool.map(partial(search, best, shape=shape), batch))
                    best = merge_windows(problem, best, found)
                value = problem.evaluate(best)
            log.debug("windows, sweep %d (%s): %s (%s)", sweeps, shape, value, budget)
            if shape is ANY_MODE and not _gained(before, value, SWITCH_GAIN):
                shape = SAME_KIND
            else:
                stalled = 0 if _gained(before, value, SWEEP_MIN_GAIN) else stalled + 1
    log.debug("windows: %s -> %s in %d windows, %d sweeps, %d at once (%s)",
              problem.evaluate(plan), value, search.solved, sweeps, lanes, budget)
    return best


def _gained(before: tuple[int, int], after: tuple[int, int], share: float) -> bool:
    """Whether ``after`` misses fewer deadlines than ``before`` or takes at least
    ``share`` off its completion term."""
    return after[0] < before[0] or after[1] < before[1] * (1.0 - share)


class _GroupSearch:
    """The windows of one group of nodes (:meth:`__call__`); counts the windows solved."""

    def __init__(self, problem: DeadlineProblem, budget: Budget, *, threads: int,
                 seed: int) -> None:
        self.problem = problem
        self.budget = budget
        self.threads = threads
        self.seed = seed
        self.solved = 0

    def __call__(self, plan: Plan, group: Sequence[str], shape: WindowShape) -> Plan:
        """The windows of ``shape`` over the jobs ``plan`` puts on the nodes ``group``,
        each from the best plan so far; that plan."""
        problem, budget = self.problem, self.budget
        jobs = problem.jobs
        unit = WINDOW_UNITS if budget.deterministic else WINDOW_S
        cap = unit * shape.jobs / ANY_MODE.jobs
        best, value = plan, problem.evaluate(plan)
        order = jobs_on(problem, plan, group)
        if len(order) < 2:
            return plan
        for first, last in windows(len(order), shape.jobs):
            if budget.expired():
                break
            free = order[first:last]
            budget.charge(UNITS_PER_INTERVAL * (sum(len(jobs[j].modes) for j in free)
                                                + len(jobs) - len(free)))
            outcome = solve_window(problem, best, free, budget.part(1.0, cap),
                                   threads=self.threads, seed=self.seed,
                                   keep_kinds=shape.keep_kinds)
            self.solved += 1
            found = problem.evaluate(outcome.plan)
            if found < value:
                best, value = outcome.plan, found
        return best


def merge_windows(problem: DeadlineProblem, plan: Plan, found: Sequence[Plan]) -> Plan:
    """``plan`` with the moves of each plan in ``found`` (each is ``plan`` with the jobs
    of one group's windows moved), taken in turn when the plan stays valid and gets better:
    groups searched at once may move jobs into the same room, and then the later group's
    moves are dropped."""
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
