"""The ``deadline`` model: choose GPU type, gang size and start; lexicographic objective.

The contract every model follows: :func:`prepare` builds the model's data, the caller
(the planner, :class:`hetsched.policies.deadline.planner.DeadlinePlanner`) makes a start plan
(its search, :mod:`hetsched.policies.deadline.search`), :func:`run_stages` solves both
stages on the chosen back-end (CP-SAT, or the MILP on HiGHS/CBC/SCIP) from that warm
start, and :func:`conclude` returns the best plan realised on concrete GPUs as a
:class:`~hetsched.formulations.common.ScheduleOutcome`, with the solver's outcome mapped
onto :class:`hetsched.core.result.Status`.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from hetsched.core.records import Instance
from hetsched.core.result import Schedule, Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import TICK_S, ScheduleOutcome, SolverResult, call_word
from hetsched.formulations.deadline.problem import (
    DeadlineObjective,
    DeadlineProblem,
    Plan,
    StagePlans,
    build_problem,
)
from hetsched.formulations.options import SolveOptions

log = logging.getLogger(__name__)

#: The local search that improves the start plan gets this share of the budget, at most
#: ``LOCAL_SEARCH_MAX`` (seconds or work units).
LOCAL_SEARCH_SHARE = 0.05
LOCAL_SEARCH_MAX = 2.0

__all__ = ["LOCAL_SEARCH_MAX", "LOCAL_SEARCH_SHARE", "DeadlineObjective",
           "DeadlineOutcome", "build_problem", "conclude", "prepare", "run_stages", "warm_plan"]


#: What the model found (the shared :class:`ScheduleOutcome`).
DeadlineOutcome = ScheduleOutcome


def prepare(instance: Instance, first_term: str = "missed"
            ) -> tuple[DeadlineProblem, list[str], dict[str, Any], ScheduleOutcome | None]:
    """The model of ``instance`` (``first_term``: ``"missed"`` deadlines or weighted
    ``"tardiness"``, s), the notes and figures every outcome reports, and the outcome
    itself when there is nothing to solve (a gang no node holds packed: INFEASIBLE; no
    job: OPTIMAL)."""
    problem = build_problem(instance, first_term)
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
        return problem, notes, extra, ScheduleOutcome(Status.INFEASIBLE, None, message=reason,
                                                      extra=extra)
    if not problem.jobs:
        return problem, notes, extra, ScheduleOutcome(Status.OPTIMAL, Schedule(), 0.0, 0.0,
                                                      extra=extra)
    return problem, notes, extra, None


def warm_plan(problem: DeadlineProblem, options: SolveOptions,
              extra: dict[str, Any]) -> Plan | None:
    """The caller's warm start (``options.warm_start``) as a plan of the model, or
    ``None`` without one."""
    if options.warm_start is None:
        return None
    warm = problem.plan_from_schedule(options.warm_start)
    extra["warm_start_jobs"] = len(warm)
    return warm


def run_stages(problem: DeadlineProblem, backend: str, options: SolveOptions, budget: Budget,
               warm: Plan) -> StagePlans:
    """Both stages of the model on ``backend`` (``cpsat``, or the MILP on ``highs``,
    ``cbc``, ``scip``) from the complete plan ``warm`` (a hint, a MIP start), within
    ``budget``; :class:`BudgetExhaustedError` if it runs out before a model is built."""
    if backend == "cpsat":
        from hetsched.formulations.deadline.cpsat import CpSatSettings, DeadlineCpSat

        settings = CpSatSettings(options.gap, options.threads, options.seed)
        return DeadlineCpSat(problem, budget).solve(settings, warm)
    from hetsched.formulations.deadline.milp import DeadlineMilp
    from hetsched.formulations.mip import MipSettings

    milp_settings = MipSettings(options.gap, options.threads, options.seed)
    return DeadlineMilp(problem, budget).solve(backend, milp_settings, warm)


def conclude(problem: DeadlineProblem, backend: str, start: Plan, plans: StagePlans | None,
             ran_out: bool, notes: list[str], extra: dict[str, Any],
             budget: Budget, lp_bound_s: float | None = None,
             searched: tuple[str, Plan] | None = None) -> ScheduleOutcome:
    """The outcome: the best (lexicographically) of the start plan, the plans the stages
    found and ``searched`` (the search after the stages, from the best of them: its name,
    ``local search`` or ``windows``, and its plan),
    so never worse than the start (``extra["plan_source"]`` says which won; on a tie the
    solver's), realised on concrete GPUs; OPTIMAL only when both stages were proven and
    the solver's plan is returned; ``ran_out``: the budget ended the solve early.
    ``lp_bound_s``: the relaxations' bound on the completion term, reported when it beats
    the solver's."""
    candidates: list[tuple[str, Plan]] = [("start plan", start)]
    if searched is not None:
        candidates.append(searched)
    if plans is not None:
        extra["stages"] = {"completion": _describe(plans.completion)}
        if plans.deadline is not None:
            extra["stages"]["deadline"] = _describe(plans.deadline)
        if plans.deadline_plan is not None:
            candidates.append(("first stage", plans.deadline_plan))
        if plans.completion_plan is not None:
            candidates.append(("solver", plans.completion_plan))
        failed = [s for s in (plans.deadline, plans.completion) if s is not None and
                  s.outcome in (Status.ERROR, Status.INFEASIBLE)]
        if failed:
            notes.append(f"{backend} ended with {call_word(failed[0].outcome)}"
                         + (f" ({failed[0].detail.get('message')})"
                            if failed[0].detail.get("message") else ""))
    # The best plan, lexicographically; on a tie the solver's (its proof stays valid).
    source, plan = min(reversed(candidates), key=lambda c: problem.evaluate(c[1]))
    extra["plan_source"] = source
    if plans is not None and plans.completion_plan is not None and \
            problem.evaluate(plans.completion_plan) > problem.evaluate(start):
        returned = "the start" if source == "start plan" else f"the {source}'s plan"
        notes.append(f"{backend} stopped on a plan worse than its start: {returned} is returned")
    schedule = problem.realise(plan)
    deadline_term, weighted_end = problem.evaluate(plan)
    objective = problem.completion_seconds(weighted_end)
    status, bound = _status_and_bound(problem, backend, plans, source, objective, ran_out,
                                      lp_bound_s)
    extra["budget"] = budget.as_dict()
    extra["deadline_term"] = problem.deadline_seconds(deadline_term)
    if plans is not None and plans.deadline is not None and plans.deadline.bound is not None:
        raw = plans.deadline.bound
        extra["deadline_term_bound"] = problem.deadline_seconds(raw) if backend == "cpsat" \
            else raw
    jobs = problem.instance.job_by_id
    extra["realised_objective"] = sum(jobs[a.job].weight * (a.finish - jobs[a.job].arrival)
                                      for a in schedule)
    extra["missed_deadlines"] = sorted(
        a.job for a in schedule
        if jobs[a.job].deadline is not None and a.finish > (jobs[a.job].deadline or 0) + 1e-6)
    return ScheduleOutcome(status, schedule, objective, bound, "; ".join(notes), extra)


def _status_and_bound(problem: DeadlineProblem, backend: str, plans: StagePlans | None,
                      source: str, objective: float, ran_out: bool,
                      lp_bound: float | None = None) -> tuple[Status, float | None]:
    """OPTIMAL only when both stages were proven and the solver's plan is returned, or the
    deadline term was proven and the completion bound is within half a grid step of the
    returned plan's objective (objectives of plans differ by whole steps of
    ``TICK_S / weight_scale`` s, so no plan lies in between: an engine's round-off no
    longer hides a proof). The bound (s): the larger of the solver's completion bound,
    only when the deadline term was proven (else it bounds another problem), and
    ``lp_bound``, the relaxations', which holds for every plan missing no more deadlines
    than the returned one (so for the optimum)."""
    unconditional = None if lp_bound is None or not math.isfinite(lp_bound) else min(
        lp_bound, objective)
    if plans is None:
        return Status.TIME_LIMIT if ran_out else Status.FEASIBLE, unconditional
    stats = plans.completion
    stages = [s for s in (plans.deadline, stats) if s is not None]
    own: float | None = None
    first_proven = plans.deadline is None or plans.deadline.outcome is Status.OPTIMAL
    if first_proven and stats.bound is not None:
        own = stats.bound if backend != "cpsat" else problem.completion_seconds(stats.bound)
        own = min(own, objective)
    bound = max((b for b in (own, unconditional) if b is not None), default=None)
    if source == "solver" and all(s.outcome is Status.OPTIMAL for s in stages):
        return Status.OPTIMAL, objective if bound is None else bound
    if first_proven and bound is not None and \
            objective - bound < TICK_S / problem.weight_scale / 2:
        return Status.OPTIMAL, bound
    if ran_out or any(s.hit_limit for s in stages):
        return Status.TIME_LIMIT, bound
    return Status.FEASIBLE, bound


def _describe(stats: SolverResult) -> dict[str, Any]:
    return {"outcome": call_word(stats.outcome), "objective": stats.objective, "bound": stats.bound,
            "wall_s": round(stats.wall_s, 4), "hit_time_limit": stats.hit_limit}
