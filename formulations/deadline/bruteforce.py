"""Exact enumeration of the ``deadline`` model for tiny instances (a test oracle).

It shares nothing with the solver back-ends but the problem data: it enumerates
every job order and every mode of every job and builds each schedule with the
serial schedule-generation scheme (each job, in order, at the earliest tick at or
after its release at which its node has enough free GPUs for its whole run,
possibly in a gap). For a fixed choice of modes these are the *active*
schedules, which contain an optimal schedule for any objective that does not
decrease when a job finishes later (Kolisch 1996); both objective terms are of
that kind. Partial schedules are pruned once their cost, which only grows, is no
better than the best complete one.
"""

from __future__ import annotations

from collections import defaultdict

from hetsched.formulations.deadline.problem import DeadlineObjective, DeadlineProblem, JobData, Plan
from hetsched.formulations.deadline.timing import earliest_start

#: Refuse instances whose search space (n! x modes^n) is larger than this.
MAX_LEAVES = 5_000_000


def solve_by_enumeration(problem: DeadlineProblem) -> tuple[tuple[int, int], Plan]:
    """The lexicographic optimum ``((deadline term, sum w_int end), plan)`` by enumeration."""
    jobs = problem.jobs
    leaves = 1
    for index, data in enumerate(jobs, start=1):
        leaves *= index * len(data.modes)
    if leaves > MAX_LEAVES:
        raise ValueError(f"enumeration too large ({leaves} leaves)")
    capacity = problem.node_capacity()
    best: list[tuple[tuple[int, int], Plan]] = []
    booked: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    plan: Plan = {}

    def cost_of(data: JobData, end: int) -> tuple[int, int]:
        late = 0
        if data.deadline is not None and end > data.deadline:
            late = 1 if problem.objective is DeadlineObjective.MISSED else \
                data.weight * (end - data.deadline)
        return late, data.weight * end

    def extend(remaining: list[JobData], cost: tuple[int, int]) -> None:
        if best and cost >= best[0][0]:
            return
        if not remaining:
            best[:] = [(cost, dict(plan))]
            return
        for position, data in enumerate(remaining):
            rest = remaining[:position] + remaining[position + 1:]
            for index, mode in enumerate(data.modes):
                node_booked = booked[mode.node]
                start = earliest_start(data.release, mode.duration, mode.num_gpus,
                                        capacity[mode.node], node_booked)
                late, weighted = cost_of(data, start + mode.duration)
                node_booked.append((start, start + mode.duration, mode.num_gpus))
                plan[data.job.id] = (index, start)
                extend(rest, (cost[0] + late, cost[1] + weighted))
                node_booked.pop()
                del plan[data.job.id]

    extend(list(jobs), (0, 0))
    return best[0]
