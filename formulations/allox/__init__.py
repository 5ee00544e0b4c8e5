"""The ``allox`` model (AlloX, EuroSys 2020): min-cost matching of jobs to (machine,
position) slots, solved exactly, with AlloX's fairness knob ``alpha``.

:func:`solve_allox` chooses the machines (single GPUs when every job can run on
one GPU; whole nodes otherwise, the gang extension), runs the matching in rounds
of users (one round when ``alpha = 1``), and realises the sequences on concrete
GPUs with a list decoder that keeps each machine's order.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Any

from hetsched.allocation.realise import SerialSchedule
from hetsched.core.records import Instance, Job
from hetsched.core.result import Assignment, Schedule, Status
from hetsched.formulations.allox.problem import (
    MatchingProblem,
    build_matching,
    machines_for,
    sequences,
)
from hetsched.formulations.budget import Budget, BudgetExhaustedError
from hetsched.formulations.common import ScheduleOutcome
from hetsched.formulations.options import SolveOptions

log = logging.getLogger(__name__)

#: The dense assignment matrix (jobs x expanded slots) above which the min-cost flow is
#: used instead of scipy's assignment.
DENSE_ENTRIES_MAX = 2_000_000
#: Seconds of min-cost flow per (job, slot) arc, measured on 2,000 jobs (378,000 arcs, 1 s),
#: doubled for slower machines.
FLOW_S_PER_ARC = 6e-6

__all__ = ["AlloxOutcome", "solve_allox"]


#: What the model found (the shared :class:`ScheduleOutcome`).
AlloxOutcome = ScheduleOutcome


def _user(job: Job) -> str:
    return job.user if job.user is not None else ""


def exact_matching(problem: MatchingProblem, budget: Budget | None
                   ) -> tuple[dict[int, tuple[int, int]], Status, float | None]:
    """The optimal matching: scipy's assignment on the dense matrix when it has at most
    :data:`DENSE_ENTRIES_MAX` entries, else OR-Tools' min-cost flow (same optimum, integer
    costs in microseconds; 2,000 jobs on 96 nodes: 1 s against 33 s). Neither can be
    stopped, so when a wall-clock ``budget`` is too small for the flow's estimated time
    (:data:`FLOW_S_PER_ARC` per job-slot arc) the greedy matching is returned instead
    (FEASIBLE, no bound)."""
    from hetsched.formulations.allox.matching import greedy_matching, solve_assignment, solve_flow

    arcs = sum(problem.classes[c].levels for (_, c) in problem.processing)
    left = None if budget is None or budget.deterministic else budget.remaining()
    if left is not None and arcs * FLOW_S_PER_ARC > left:
        return greedy_matching(problem), Status.FEASIBLE, None
    columns = sum(len(cls.machines) * cls.levels for cls in problem.classes)
    if len(problem.jobs) * columns <= DENSE_ENTRIES_MAX:
        matching = solve_assignment(problem)
    else:
        matching = solve_flow(problem)
    return matching, Status.OPTIMAL, problem.matching_value(matching)


def _match(problem: MatchingProblem, backend: str, options: SolveOptions
           ) -> tuple[dict[int, tuple[int, int]] | None, Status, float | None]:
    """A matching, whether it is proven optimal, and the solver's bound on its cost (s)."""
    if backend == "matching":
        return exact_matching(problem, options.budget)
    from hetsched.formulations.allox.arrays import AlloxArrays
    from hetsched.formulations.allox.matching import greedy_matching
    from hetsched.formulations.mip import MipSettings, solve_mip

    start = greedy_matching(problem)
    arrays = AlloxArrays.of(problem)
    result = solve_mip(arrays.model, backend, options.budget or Budget.unlimited(),
                       MipSettings(options.gap, options.threads, options.seed),
                       arrays.start(start))
    found = None if result.values is None else arrays.matching(result.values)
    if found is not None and len(found) != len(problem.jobs):
        found = None
    start_value = problem.matching_value(start)
    if found is None or problem.matching_value(found) > start_value + 1e-9 * max(
            1.0, abs(start_value)):
        # Never worse than the start: the greedy matching when the engine found nothing
        # (or something worse).
        return start, Status.FEASIBLE, result.bound
    return found, result.outcome, result.bound


def solve_allox(instance: Instance, options: SolveOptions, *, alpha: float = 1.0
                ) -> AlloxOutcome:
    """Solve the ``allox`` model of ``instance`` (back-end ``matching``, ``cbc`` or
    ``highs``); ``alpha`` in (0, 1] is AlloX's fairness knob (the fraction of users, least
    attained service first, whose jobs enter a matching)."""
    backend = options.backend or "matching"
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    whole_nodes = not all(
        any(c.num_gpus == 1 for c in instance.configurations(job)) for job in instance.jobs)
    extra: dict[str, Any] = {"machines": "whole nodes" if whole_nodes else "single GPUs",
                             "alpha": alpha}
    pending = list(instance.jobs)
    attained: dict[str, float] = defaultdict(float)
    serial = SerialSchedule(instance)  # the realised schedule: when each GPU is free again
    assignments: list[Assignment] = []
    rounds = 0
    notes_budget: list[str] = []
    model_cost = 0.0
    proven = True
    bound_cost: float | None = 0.0
    while pending:
        rounds += 1
        users = sorted({_user(job) for job in pending}, key=lambda u: (attained[u], u))
        chosen = set(users[: math.ceil(alpha * len(users))])
        batch = [job for job in pending if _user(job) in chosen]
        pending = [job for job in pending if _user(job) not in chosen]
        machine_free = {}
        for machine in machines_for(instance, whole_nodes):
            machine_free[machine.name] = max(serial.free_at(g) for g in machine.gpus)
        machines = machines_for(instance, whole_nodes, machine_free)
        problem = build_matching(instance, batch, machines, whole_nodes)
        stranded = [job.id for j, job in enumerate(batch)
                    if not any((j, c) in problem.processing for c in range(len(problem.classes)))]
        if stranded:
            what = "a whole node" if whole_nodes else "one GPU"
            return AlloxOutcome(Status.INFEASIBLE, None, message=(
                f"jobs {', '.join(stranded)} cannot run packed on {what} of any type"),
                extra=extra)
        try:
            matching, outcome, bound = _match(problem, backend, options)
        except BudgetExhaustedError as exc:
            # The exact assignment algorithm solves the same matching in well under the
            # time the model would take to build.
            fallback = f"{exc}: the assignment algorithm's matching is used"
            if fallback not in notes_budget:
                notes_budget.append(fallback)
            matching, outcome, bound = exact_matching(problem, options.budget)
            outcome = Status.FEASIBLE
        if backend == "matching" and outcome is Status.FEASIBLE:
            greedy = ("the budget is too small for the exact matching: the greedy matching "
                      "is used")
            if greedy not in notes_budget:
                notes_budget.append(greedy)
        if matching is None:
            status = Status.TIME_LIMIT if outcome is Status.TIME_LIMIT else Status.ERROR
            return AlloxOutcome(status, None, message="the solver found no matching",
                                extra=extra)
        proven = proven and outcome is Status.OPTIMAL
        model_cost += problem.matching_value(matching)
        bound_cost = None if bound is None or bound_cost is None else bound_cost + bound
        placed = _decode(instance, problem, matching, serial)
        for assignment in placed:
            attained[_user(instance.job_by_id[assignment.job])] += \
                (assignment.finish - assignment.start) * len(assignment.gpus)
        assignments += placed
    schedule = Schedule(tuple(assignments))
    jobs = instance.job_by_id
    objective = sum(jobs[a.job].weight * (a.finish - jobs[a.job].arrival) for a in schedule)
    arrivals = sum(job.arrival for job in instance.jobs)
    extra.update(rounds=rounds, model_objective=model_cost - arrivals)
    weights = {job.weight for job in instance.jobs}
    # The matching cost is a lower bound on the total JCT of every one-GPU-per-job
    # schedule when it is exact (one round on single GPUs): arrivals and weights
    # are then the only things it relaxes, and equal weights only scale it. A job that
    # may also run on more GPUs (allowed_gpu_counts [1, 2]) can end sooner than on one,
    # so the matching bounds nothing then: no bound.
    one_gpu_only = all(c.num_gpus == 1 for job in instance.jobs
                       for c in instance.configurations(job))
    if not one_gpu_only and not whole_nodes:
        extra["bound"] = "none: some job may run on more than one GPU"
    bound_s: float | None = None
    if one_gpu_only and rounds == 1 and len(weights) <= 1 and bound_cost is not None:
        weight = weights.pop() if weights else 1.0
        bound_s = min(objective, weight * (bound_cost - arrivals))
    status = Status.TIME_LIMIT if notes_budget else Status.FEASIBLE
    if bound_s is not None and proven and objective - bound_s <= 1e-9 * max(1.0, objective):
        status = Status.OPTIMAL
    notes = list(notes_budget)
    if whole_nodes:
        notes.append("gang extension: each node is one machine in the matching (not exact)")
    if rounds > 1:
        notes.append(f"alpha = {alpha:g}: {rounds} matching rounds (not exact)")
    return AlloxOutcome(status, schedule, objective, bound_s, "; ".join(notes), extra)


def _decode(instance: Instance, problem: MatchingProblem, matching: dict[int, tuple[int, int]],
            serial: SerialSchedule) -> list[Assignment]:
    """Concrete GPUs and times: jobs in the order the matching starts them; each takes
    the GPUs of its machine that are free first, and starts once they are free and
    it has arrived (placed through ``serial``, which keeps when each GPU is free)."""
    order = sequences(problem, matching)
    machine_of = {m.name: (c, m) for c, cls in enumerate(problem.classes) for m in cls.machines}
    planned: list[tuple[float, str, int]] = []  # (model start, machine, job index)
    for name, jobs in order.items():
        c, machine = machine_of[name]
        clock = machine.free_at
        for j in jobs:
            planned.append((clock, name, j))
            clock += problem.processing[j, c].duration
    placed = []
    for _, name, j in sorted(planned):
        c, machine = machine_of[name]
        job = problem.jobs[j]
        run = problem.processing[j, c]
        gpus = sorted(machine.gpus, key=lambda g: (serial.free_at(g),
                                                   instance.cluster.gpu_by_id[g].index))
        taken = tuple(sorted(gpus[: run.num_gpus],
                             key=lambda g: instance.cluster.gpu_by_id[g].index))
        placed.append(serial.place(job.id, machine.gpu_type, taken))
    return placed
