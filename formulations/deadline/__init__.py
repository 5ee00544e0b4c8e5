"""The ``deadline`` model: choose GPU type, gang size and start; lexicographic objective.

:func:`solve_deadline` builds the model's data, runs the chosen back-end (CP-SAT,
or the MILP on CBC/HiGHS), turns the plan into concrete GPUs and maps the
solver's outcome onto :class:`solver.result.Status`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from formulations.common import TICK_S, Outcome, SolveStats
from formulations.deadline.problem import (
    DeadlineObjective,
    DeadlineProblem,
    Plan,
    build_problem,
    greedy_plan,
    improve_plan,
)
from solver.data import Instance
from solver.policies import SolveOptions
from solver.result import Schedule, Status

log = logging.getLogger(__name__)

#: Time limit (s) when the caller gives none, for both stages together.
DEFAULT_TIME_LIMIT_S = 60.0
#: The local search that improves the start plan gets this share of the time limit, at most
#: ``LOCAL_SEARCH_MAX_S``.
LOCAL_SEARCH_SHARE = 0.05
LOCAL_SEARCH_MAX_S = 2.0

__all__ = ["DeadlineObjective", "DeadlineOutcome", "build_problem", "solve_deadline"]


@dataclass
class DeadlineOutcome:
    """What :func:`solve_deadline` found; objective and bound in seconds of weighted JCT."""

    status: Status
    schedule: Schedule | None
    objective: float = float("inf")
    bound: float | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def solve_deadline(instance: Instance, options: SolveOptions) -> DeadlineOutcome:
    """Solve the ``deadline`` model of ``instance`` with ``options`` (back-end, time limit,
    gap, threads, seed, warm start, deadline objective)."""
    problem = build_problem(instance, options.deadline_objective, options.pinned_nodes)
    extra: dict[str, Any] = {
        "deadline_objective": str(problem.objective),
        "time_resolution_s": TICK_S,
        "unmeetable_deadlines": list(problem.unmeetable),
    }
    notes = []
    if problem.unmeetable:
        notes.append("cannot meet their deadline even alone on their fastest configuration: "
                     + ", ".join(problem.unmeetable))
    if not problem.weights_exact:
        notes.append(f"weights rounded to 1/{problem.weight_scale}")
    if problem.unplaceable:
        reason = ("no packed configuration (all GPUs on one node) with throughput > 0 for jobs "
                  + ", ".join(problem.unplaceable) + "; the deadline model runs gangs packed")
        return DeadlineOutcome(Status.INFEASIBLE, None, message=reason, extra=extra)
    if not problem.jobs:
        return DeadlineOutcome(Status.OPTIMAL, Schedule(), 0.0, 0.0, extra=extra)
    warm: Plan | None = None
    if options.warm_start is not None:
        warm = problem.plan_from_schedule(options.warm_start)
        extra["warm_start_jobs"] = len(warm)
    if warm is None or len(warm) < len(problem.jobs):
        # Complete the start with the greedy plan: a MIP start must give every variable.
        greedy = greedy_plan(problem)
        merged = {**greedy, **(warm or {})}
        warm = greedy if problem.violations(merged) else merged
    backend = options.backend or "cpsat"
    if options.time_limit_s is None:
        # Proofs can take unbounded time on congested instances (docs/formulations.md).
        options = dataclasses.replace(options, time_limit_s=DEFAULT_TIME_LIMIT_S)
        notes.append(f"no time limit given: {DEFAULT_TIME_LIMIT_S:g} s used")
    # Improve the start by local search (a primal heuristic; a share of the time limit).
    assert options.time_limit_s is not None
    began = time.perf_counter()
    warm = improve_plan(problem, warm, min(LOCAL_SEARCH_MAX_S,
                                           LOCAL_SEARCH_SHARE * options.time_limit_s))
    spent = time.perf_counter() - began
    extra["local_search_s"] = round(spent, 4)
    options = dataclasses.replace(options, time_limit_s=max(0.05, options.time_limit_s - spent))
    plan, stats, deadline_stats = _run(problem, backend, options, warm)
    extra["stages"] = {"completion": _describe(stats)}
    if deadline_stats is not None:
        extra["stages"]["deadline"] = _describe(deadline_stats)
    if plan is None and warm is not None and (stats.hit_time_limit or (
            deadline_stats is not None and deadline_stats.hit_time_limit)):
        # The solver found nothing in time: return the (complete) start plan, unproven.
        notes.append("the solver found no schedule in time: returning the start plan")
        plan = warm
    if plan is None:
        failed = deadline_stats if deadline_stats is not None and \
            deadline_stats.outcome is not Outcome.OPTIMAL and \
            deadline_stats.outcome is not Outcome.FEASIBLE else stats
        status = {Outcome.INFEASIBLE: Status.INFEASIBLE, Outcome.ERROR: Status.ERROR}.get(
            failed.outcome, Status.TIME_LIMIT if failed.hit_time_limit else Status.UNKNOWN)
        return DeadlineOutcome(status, None, message="; ".join(
            ["no schedule found", *notes]), extra=extra)

    schedule = problem.realise(plan)
    deadline_term, weighted_end = problem.evaluate(plan)
    objective = problem.completion_seconds(weighted_end)
    stages = [s for s in (deadline_stats, stats) if s is not None]
    proven = all(s.outcome is Outcome.OPTIMAL for s in stages)
    bound: float | None = None
    first_proven = deadline_stats is None or deadline_stats.outcome is Outcome.OPTIMAL
    if first_proven and stats.bound is not None:
        bound = stats.bound if backend != "cpsat" else problem.completion_seconds(stats.bound)
        bound = min(bound, objective)
    if proven:
        status = Status.OPTIMAL
        bound = objective if bound is None else bound
    elif any(s.hit_time_limit for s in stages):
        status = Status.TIME_LIMIT
    else:
        status = Status.FEASIBLE
    extra["deadline_term"] = problem.deadline_seconds(deadline_term)
    if deadline_stats is not None and deadline_stats.bound is not None:
        raw = deadline_stats.bound
        extra["deadline_term_bound"] = problem.deadline_seconds(raw) if backend == "cpsat" \
            else raw
    jobs = instance.job_by_id
    extra["realised_objective"] = sum(jobs[a.job].weight * (a.finish - jobs[a.job].arrival)
                                      for a in schedule)
    extra["missed_deadlines"] = sorted(
        a.job for a in schedule
        if jobs[a.job].deadline is not None and a.finish > (jobs[a.job].deadline or 0) + 1e-6)
    return DeadlineOutcome(status, schedule, objective, bound, "; ".join(notes), extra)


def _run(problem: DeadlineProblem, backend: str, options: SolveOptions, warm: Plan | None
         ) -> tuple[Plan | None, SolveStats, SolveStats | None]:
    if backend == "cpsat":
        from formulations.deadline.cpsat import CpSatSettings, DeadlineCpSat

        settings = CpSatSettings(options.time_limit_s, options.gap, options.threads,
                                 options.seed)
        return DeadlineCpSat(problem).solve(settings, warm)
    from formulations.deadline.milp import DeadlineMilp
    from formulations.pulp_backend import MipSettings

    milp_settings = MipSettings(options.time_limit_s, options.gap, options.threads, options.seed)
    return DeadlineMilp(problem).solve(backend, milp_settings, warm)


def _describe(stats: SolveStats) -> dict[str, Any]:
    return {"outcome": stats.outcome.value, "objective": stats.objective, "bound": stats.bound,
            "wall_s": round(stats.wall_s, 4), "hit_time_limit": stats.hit_time_limit}
