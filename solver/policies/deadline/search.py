"""The ``deadline`` planner's search, without a solver: serial schedule generation on the
model's grid (:func:`decode`), the greedy start plan, and a local search that improves it
under a budget.

Every back-end starts from the plan these give (a CP-SAT hint, a MIP start), and a solve
never returns anything worse than it (:class:`~hetsched.policies.deadline.planner.DeadlinePlanner`).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from hetsched.core.log_levels import solve_log_level
from hetsched.formulations.budget import LOCAL_SEARCH_UNITS_PER_ITEM, Budget
from hetsched.formulations.common import TICK_S
from hetsched.formulations.deadline import warm_plan
from hetsched.formulations.deadline.problem import DeadlineProblem, Plan
from hetsched.formulations.deadline.timing import earliest_start
from hetsched.formulations.options import SolveOptions

log = logging.getLogger(__name__)


def start_plan(problem: DeadlineProblem, options: SolveOptions, budget: Budget,
               extra: dict[str, Any]) -> Plan:
    """The caller's warm start, completed by the greedy plan (a MIP start must give every
    variable), or the greedy plan alone if the merge is not feasible."""
    warm = warm_plan(problem, options, extra)
    if warm is not None and len(warm) == len(problem.jobs):
        return warm
    greedy = greedy_plan(problem, budget)
    merged = {**greedy, **(warm or {})}
    return greedy if problem.violations(merged) else merged


def greedy_plan(problem: DeadlineProblem, budget: Budget | None = None) -> Plan:
    """A quick complete plan (a MIP start / hint): jobs by release, then earliest
    deadline; each in the mode that finishes first, in the earliest gap of its node. With
    a wall-clock ``budget`` that runs out, the rest of the jobs are appended (see
    :func:`decode`): a plan always comes back."""
    order = sorted(range(len(problem.jobs)), key=lambda j: (
        problem.jobs[j].release, problem.jobs[j].deadline is None,
        problem.jobs[j].deadline or 0, problem.jobs[j].job.id))
    return decode(problem, order, dict.fromkeys(order), budget)


#: :func:`decode` reads its budget every this many jobs.
_BUDGET_EVERY = 32


def decode(problem: DeadlineProblem, order: list[int],
           modes: Mapping[int, int | None], budget: Budget | None = None) -> Plan:
    """Serial schedule generation: jobs (indices into ``problem.jobs``) in ``order``, each
    at the earliest start (gaps allowed) that the jobs before it leave. A job's mode in
    ``modes`` fixes its GPU type and gang size, and the node among those offering that
    (type, size) where it ends first is taken; ``None`` lets it take any mode, the one
    that ends first.

    Filling gaps costs time in the bookings of a node; if a wall-clock ``budget`` runs out,
    the remaining jobs are *appended* instead: each starts once its node is empty of the
    jobs before it (time in its modes only), which is always feasible."""
    return plan_of(problem, decode_steps(problem, order, modes, budget))


#: One job of a decoded order: (job index, mode index, start tick).
Step = tuple[int, int, int]


def plan_of(problem: DeadlineProblem, steps: Sequence[Step]) -> Plan:
    """The plan of decoded steps."""
    return {problem.jobs[j].job.id: (mode, start) for j, mode, start in steps}


def decode_steps(problem: DeadlineProblem, order: list[int],
                 modes: Mapping[int, int | None], budget: Budget | None = None,
                 prefix: Sequence[Step] = ()) -> list[Step]:
    """:func:`decode`, step by step in ``order``; ``prefix``: the steps of an earlier
    decode whose first ``len(prefix)`` jobs are those of ``order``, in the same modes:
    they are taken as they are (the same jobs in the same modes decode the same way) and
    only the rest of ``order`` is decoded."""
    capacity = problem.node_capacity()
    booked: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    last_end: dict[str, int] = defaultdict(int)
    steps: list[Step] = []
    for j, index, start in prefix:
        mode = problem.jobs[j].modes[index]
        booked[mode.node].append((start, start + mode.duration, mode.num_gpus))
        last_end[mode.node] = max(last_end[mode.node], start + mode.duration)
        steps.append((j, index, start))
    appending = False
    for position in range(len(prefix), len(order)):
        j = order[position]
        if budget is not None and not appending and position % _BUDGET_EVERY == 0 and \
                not budget.deterministic and budget.expired():
            appending = True
            log.log(solve_log_level(),
                    "decode: budget spent after %d of %d jobs: appending the rest",
                    position, len(order))
        data = problem.jobs[j]
        best: tuple[int, int, int] | None = None  # (end, mode index, start)
        for index in candidate_modes(problem, j, modes.get(j)):
            mode = data.modes[index]
            if best is not None and data.release + mode.duration >= best[0]:
                continue  # it cannot end first even if it starts at the release
            if appending:
                start = max(data.release, last_end[mode.node])
            else:
                start = earliest_start(data.release, mode.duration, mode.num_gpus,
                                       capacity[mode.node], booked[mode.node])
            if best is None or start + mode.duration < best[0]:
                best = (start + mode.duration, index, start)
        assert best is not None
        end, index, start = best
        mode = data.modes[index]
        booked[mode.node].append((start, end, mode.num_gpus))
        last_end[mode.node] = max(last_end[mode.node], end)
        steps.append((j, index, start))
    return steps


def candidate_modes(problem: DeadlineProblem, job: int, fixed: int | None) -> list[int]:
    """The modes :func:`decode` tries for ``job``: all, or those of the fixed mode's
    (GPU type, gang size) on any node."""
    data = problem.jobs[job]
    if fixed is None:
        return list(range(len(data.modes)))
    kind = (data.modes[fixed].gpu_type, data.modes[fixed].num_gpus)
    return [i for i, m in enumerate(data.modes) if (m.gpu_type, m.num_gpus) == kind]


class DecodeWork:
    """Deterministic work units of decoding: the (job, mode) pairs tried, times
    :data:`~hetsched.formulations.budget.LOCAL_SEARCH_UNITS_PER_ITEM` (counts per job and
    mode kept, so that pricing a call costs time in the jobs, not in their modes)."""

    def __init__(self, problem: DeadlineProblem) -> None:
        self.every = [len(data.modes) for data in problem.jobs]
        self.same_kind = []
        for data in problem.jobs:
            kinds = [(m.gpu_type, m.num_gpus) for m in data.modes]
            self.same_kind.append([kinds.count(kind) for kind in kinds])

    def __call__(self, modes: Mapping[int, int | None], jobs: Iterable[int] | None = None
                 ) -> float:
        """The units of decoding ``jobs`` (default: all) with ``modes`` fixed (job index ->
        mode or ``None``)."""
        items = 0
        for j in range(len(self.every)) if jobs is None else jobs:
            fixed = modes.get(j)
            items += self.every[j] if fixed is None else self.same_kind[j][fixed]
        return items * LOCAL_SEARCH_UNITS_PER_ITEM


def kind_modes(problem: DeadlineProblem, job: int) -> list[int]:
    """One mode of each (GPU type, gang size) of ``job``, the first in its modes: fixing
    any mode of a kind decodes the same way (:func:`candidate_modes`)."""
    first: dict[tuple[str, int], int] = {}
    for index, mode in enumerate(problem.jobs[job].modes):
        first.setdefault((mode.gpu_type, mode.num_gpus), index)
    return list(first.values())


def improve_plan(problem: DeadlineProblem, plan: Plan, budget: Budget | None = None) -> Plan:
    """Local search from ``plan`` (a primal heuristic for the warm start of every back-end),
    within ``budget`` (a wall-clock or deterministic one; ``None``: until no move improves).

    A solution is a priority order and a mode per job, decoded by :func:`decode`. Moves,
    first improvement, until none improves or the budget is spent: give one job another
    (GPU type, gang size); move one job to another place in the order. A move re-decodes
    the order from its first changed place only (the jobs before it decode as they did).
    Starting points: ``plan``'s own order (by start) and modes, and the
    weighted-shortest-processing-time order with each job in the mode that ends first.
    The lexicographic objective (deadline term, then weighted completion) decides; the
    result is never worse than ``plan``. In deterministic mode every decode is charged
    :class:`DecodeWork` units for the jobs it decodes, so the moves tried, and the result,
    depend only on the input and the budget."""
    budget = budget or Budget.unlimited()
    search = LocalSearch(problem, budget)
    best_plan, best_value = plan, problem.evaluate(plan)
    # Search from the better starting point first.
    for value, order, modes, steps in sorted(search.starting_points(plan),
                                             key=lambda start: start[0]):
        value, steps = search.descend(value, order, modes, steps)
        if value < best_value:
            best_plan, best_value = plan_of(problem, steps), value
        if budget.expired():
            break
    log.debug("local search: %s -> %s (%s)", problem.evaluate(plan), best_value, budget)
    return best_plan


#: A plan's value, lexicographic: (deadline term, weighted completion), in model units.
Value = tuple[int, int]
#: A job index's mode (``None``: any) for :func:`decode`.
Modes = dict[int, int | None]


class LocalSearch:
    """:func:`improve_plan`'s moves on ``problem`` within ``budget``: each decode is charged
    :class:`DecodeWork` units in deterministic mode."""

    def __init__(self, problem: DeadlineProblem, budget: Budget) -> None:
        self.problem = problem
        self.budget = budget
        self._work = DecodeWork(problem) if budget.deterministic else None
        #: each job's modes of distinct (GPU type, gang size)
        self._kinds = [kind_modes(problem, j) for j in range(len(problem.jobs))]

    def run(self, order: list[int], chosen: Mapping[int, int | None],
            prefix: Sequence[Step] = ()) -> tuple[list[Step], Value]:
        """The decode of ``order`` from ``prefix`` (charged for the jobs it decodes) and
        its value."""
        if self._work is not None:
            self.budget.charge(self._work(chosen, order[len(prefix):]))
        steps = decode_steps(self.problem, order, chosen, prefix=prefix)
        return steps, self.problem.evaluate(plan_of(self.problem, steps))

    def starting_points(self, plan: Plan) -> list[tuple[Value, list[int], Modes, list[Step]]]:
        """``plan``'s own order (by start) and modes, and the weighted-shortest-processing-
        time order with each job in the mode that ends first, decoded while the budget
        lasts: (value, order, modes, steps) of each."""
        jobs = self.problem.jobs
        index = {data.job.id: j for j, data in enumerate(jobs)}
        own_modes: Modes = {index[jid]: mode for jid, (mode, _) in plan.items()}
        shortest = {j: min(m.duration for m in d.modes) for j, d in enumerate(jobs)}
        starts: list[tuple[list[int], Modes]] = [
            (sorted(own_modes, key=lambda j: (plan[jobs[j].job.id][1], j)), own_modes),
            (sorted(range(len(jobs)), key=lambda j: (
                jobs[j].release + shortest[j] / max(jobs[j].weight, 1),
                jobs[j].deadline is None, jobs[j].deadline or 0, j)),
             dict.fromkeys(range(len(jobs))))]
        decoded = []
        for order, start_modes in starts:
            if self.budget.expired():
                break
            steps, value = self.run(order, start_modes)
            chosen: Modes = {j: m for j, m, _ in steps}
            decoded.append((value, list(order), chosen, steps))
        return decoded

    def descend(self, value: Value, order: list[int], modes: Modes, steps: list[Step]
                ) -> tuple[Value, list[Step]]:
        """Moves, first improvement, from a decoded start until none improves or the
        budget is spent: the value and steps reached."""
        improved = True
        while improved and not self.budget.expired():
            modes, steps, value, changed = self._other_modes(value, order, modes, steps)
            order, steps, value, moved = self._other_places(value, order, modes, steps)
            improved = changed or moved
        return value, steps

    def _same_kind(self, j: int, one: int | None, other: int | None) -> bool:
        """Whether two modes of job ``j`` are of one (GPU type, gang size)."""
        if one is None or other is None:
            return one is other
        a, b = self.problem.jobs[j].modes[one], self.problem.jobs[j].modes[other]
        return (a.gpu_type, a.num_gpus) == (b.gpu_type, b.num_gpus)

    def _other_modes(self, value: Value, order: list[int], modes: Modes, steps: list[Step]
                     ) -> tuple[Modes, list[Step], Value, bool]:
        """Each job in turn given each other (GPU type, gang size), kept where it
        improves; whether any did."""
        improved = False
        for position, j in enumerate(list(order)):
            for mode in self._kinds[j]:
                if self._same_kind(j, mode, modes[j]) or self.budget.expired():
                    continue
                trial_modes = {**modes, j: mode}
                trial, trial_value = self.run(order, trial_modes, steps[:position])
                if trial_value < value:
                    modes, steps, value, improved = trial_modes, trial, trial_value, True
            if self.budget.expired():
                break
        return modes, steps, value, improved

    def _other_places(self, value: Value, order: list[int], modes: Modes,
                      steps: list[Step]) -> tuple[list[int], list[Step], Value, bool]:
        """Each job in turn moved to the first other place in the order that improves;
        whether any did."""
        improved = False
        for position in range(1, len(order)):
            if self.budget.expired():
                break
            for target in range(len(order)):
                if target == position or self.budget.expired():
                    continue
                rest = order[:position] + order[position + 1:]
                trial_order = [*rest[:target], order[position], *rest[target:]]
                trial, trial_value = self.run(trial_order, modes, steps[:min(position, target)])
                if trial_value < value:
                    order, steps, value, improved = trial_order, trial, trial_value, True
                    break
        return order, steps, value, improved


#: :func:`guided_plans`: a job with a deadline is ranked no later than its latest start that
#: meets the deadline less each of these multiples of the median duration of the hinted
#: modes (one order each): the larger, the more deadlines met and the later the others.
GUIDED_MARGINS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def guided_plans(problem: DeadlineProblem, start_s: Sequence[float], modes: Sequence[int],
                 budget: Budget | None = None) -> list[Plan]:
    """Plans decoded from a relaxation's hints (per job: a start date, s, and a mode): jobs
    ordered by the start, by the start plus the mode's duration, and, for each margin of
    :data:`GUIDED_MARGINS`, by the start or, for a job with a deadline, its latest start
    that meets the deadline less the margin if earlier; each order with the modes fixed to
    the hint's (GPU type, gang size) and free (:func:`decode`)."""
    durations = [problem.jobs[j].modes[modes[j]].duration * TICK_S
                 for j in range(len(problem.jobs))]
    typical = sorted(durations)[len(durations) // 2] if durations else 0.0
    latest = [math.inf if data.deadline is None else data.deadline * TICK_S - durations[j]
              for j, data in enumerate(problem.jobs)]
    def by_deadline(margin: float) -> Callable[[int], tuple[float, int]]:
        return lambda j: (min(start_s[j], latest[j] - margin), j)

    keys: list[Callable[[int], tuple[float, int]]] = [
        lambda j: (start_s[j], j),
        lambda j: (start_s[j] + durations[j], j),
        *(by_deadline(share * typical) for share in GUIDED_MARGINS),
    ]
    plans = []
    for key in keys:
        order = sorted(range(len(problem.jobs)), key=key)
        plans.append(decode(problem, order, dict(enumerate(modes)), budget))
        plans.append(decode(problem, order, dict.fromkeys(order), budget))
    return plans
