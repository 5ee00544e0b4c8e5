"""``deadline``: deadline-aware heterogeneous assignment (Hydra-style), exact models.

Each job gets a GPU type, a gang size among its allowed sizes and a start time;
the objective is lexicographic, first the deadline term (missed deadlines or
total weighted tardiness, the constructor's ``objective``), then total
weighted completion time (s). Solved in CP-SAT (``cpsat``) or as a MILP
(``cbc``, ``highs``); the mathematics is in docs/formulations.md and the models in
:mod:`hetsched.formulations.deadline`.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, ClassVar

from hetsched.core.errors import InputError
from hetsched.core.records import Instance
from hetsched.core.result import Result, Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.deadline.problem import DeadlineProblem, Plan, StagePlans
from hetsched.formulations.deadline.relaxation import Relaxation
from hetsched.policies.backends import CPSAT_OR_MIP
from hetsched.policies.planner import SolveOptions, outcome_result

if TYPE_CHECKING:
    from hetsched.formulations.deadline.timeindexed import TimeIndexedBound

log = logging.getLogger(__name__)

#: A finer grid of the time-indexed relaxation is tried while what is left of its part of
#: the budget is this many times what the last grid cost: each finer grid costs about
#: 2.5-3 times the last, and one cut short before its optimum gives a weaker bound than
#: the coarser grid it replaces (docs/formulations.md, "Time-indexed relaxation of the
#: deadline model's own plans", has the costs measured).
REFINE_COST = 3.0
#: Each finer grid has this many halves of the last one's slots, adaptive (half of them
#: where the last LP's columns start, where the bound gains most per slot).
REFINE_FACTOR = 3
#: ... and never beyond this many slots, nor this many (job, kind, slot) columns priced
#: (what the pricing keeps between rounds is about 21-29 bytes per column: 230 MB here).
REFINE_MAX_SLOTS = 3200
REFINE_MAX_COLUMNS = 8_000_000
#: CP-SAT's whole model is solved up to this many (job, mode) pairs; above, its time goes
#: to CP-SAT on windows of the plan (:mod:`hetsched.policies.deadline.windows`). On
#: ``medium.json`` (200 jobs, 5,712 pairs) the whole model's first stage found no plan in
#: 6 s of a 30 s budget.
WHOLE_MODEL_MAX_MODES = 3000


class DeadlinePlanner:
    """The ``deadline`` model on CP-SAT or a MILP back-end."""

    name: ClassVar[str] = "deadline"
    backends: ClassVar[tuple[str, ...]] = CPSAT_OR_MIP
    default_time_limit_s: ClassVar[float | None] = 60.0
    #: Replanned in a replay, it sees the running jobs (pinned to their nodes) and may
    #: preempt them (:class:`~hetsched.policies.replanning.Replanning`).
    replan_preemptive: ClassVar[bool] = True

    def __init__(self, objective: str = "missed") -> None:
        if objective not in ("missed", "tardiness"):
            raise InputError("unknown deadline objective", path="objective", value=objective,
                             expected="missed or tardiness")
        #: The first objective term: deadlines missed, or total weighted tardiness (s).
        self.objective = objective

    def unrunnable(self, instance: Instance) -> dict[str, str]:
        """The gangs with no packed configuration: the model runs every gang on one node."""
        from hetsched.formulations.deadline.problem import build_problem

        why = ("no packed configuration (all its GPUs on one node) has throughput > 0; the "
               "deadline model runs gangs packed")
        return dict.fromkeys(build_problem(instance).unplaceable, why)

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job; objective = total weighted JCT (s) once the deadline term
        is at its best value.

        One budget (``options.budget``, made by :func:`hetsched.solve`) covers everything:
        the model's data, the start plan (the caller's warm start completed by the greedy
        plan), the local search, building the solver's model, the cuts and both stages
        (:mod:`hetsched.formulations.deadline`). The result is never worse than the start
        plan; when the budget runs out before the solver's model is built, the start plan
        is returned with status TIME_LIMIT and a message saying so."""
        from hetsched.formulations.budget import BudgetExhaustedError
        from hetsched.formulations.deadline import (
            LOCAL_SEARCH_MAX,
            LOCAL_SEARCH_SHARE,
            conclude,
            prepare,
            run_stages,
        )
        from hetsched.policies.deadline.search import improve_plan, start_plan

        budget = options.budget or Budget(options.time_limit_s or self.default_time_limit_s,
                                          deterministic=options.deterministic)
        problem, notes, extra, done = prepare(instance, self.objective)
        if done is not None:
            return outcome_result(done, self.name)
        start = start_plan(problem, options, budget, extra)
        backend = options.backend or "cpsat"
        plans = None
        lp_bound_s: float | None = None
        searched: tuple[str, Plan] | None = None
        ran_out = False
        if budget.expired():
            ran_out = True
            notes.append(f"the budget ({budget.describe()}) ran out while making the start "
                         "plan: the start plan is returned")
        else:
            if options.lp_bound:
                lp_bound_s, start = _bounds(problem, start, budget, extra)
            began = budget.elapsed_s()
            start = improve_plan(problem, start, budget.part(LOCAL_SEARCH_SHARE,
                                                             LOCAL_SEARCH_MAX))
            extra["local_search_s"] = round(budget.elapsed_s() - began, 4)
            modes = sum(len(data.modes) for data in problem.jobs)
            if _windows_on(options) and modes > WHOLE_MODEL_MAX_MODES:
                extra["whole_model"] = (f"not solved: {modes:,} job-modes, over "
                                        f"{WHOLE_MODEL_MAX_MODES:,}; CP-SAT on windows instead")
                part = budget.part(1.0)
                searched = _search(problem, start, part, extra, options)
                ran_out = part.expired()
            else:
                try:
                    plans = run_stages(problem, backend, options, budget, start)
                except BudgetExhaustedError as exc:
                    ran_out = True
                    notes.append(f"{exc}: the start plan is returned")
                else:
                    searched = _search_the_rest(problem, start, plans, budget, extra, options)
        return outcome_result(conclude(problem, backend, start, plans, ran_out, notes, extra,
                                       budget, lp_bound_s, searched), self.name)


def _search_the_rest(problem: DeadlineProblem, start: Plan, plans: StagePlans,
                     budget: Budget, extra: dict[str, Any],
                     options: SolveOptions | None = None) -> tuple[str, Plan] | None:
    """What the solver's stages left of ``budget`` spent on searching from the best plan
    so far (the start or a stage's), so that no part of the budget goes unused when the
    stages end early (the first stage finding no plan skips the second: 200 jobs on 96
    GPUs, the solver's model has 5,712 modes); ``None`` when nothing is left, or when the
    solver proved its plan optimal. The search and its plan: see :func:`_search`."""

    stages = [s for s in (plans.deadline, plans.completion) if s is not None]
    if plans.completion_plan is not None and all(s.outcome is Status.OPTIMAL for s in stages):
        return None
    if budget.expired():
        return None
    found = [plan for plan in (start, plans.deadline_plan, plans.completion_plan)
             if plan is not None]
    best = min(reversed(found), key=problem.evaluate)
    return _search(problem, best, budget.part(1.0), extra, options)


def _search(problem: DeadlineProblem, plan: Plan, budget: Budget, extra: dict[str, Any],
            options: SolveOptions | None) -> tuple[str, Plan]:
    """``budget`` spent improving ``plan``: on CP-SAT (``options`` given, back-end
    ``cpsat``, ``options.windows``) first CP-SAT on windows of the plan's jobs
    (:func:`~hetsched.policies.deadline.windows.improve_by_windows`), then the local search
    with what they leave (``extra["windows_s"]``, ``extra["leftover_search_s"]``); the
    plan's source (``windows``, ``local search``) and the plan."""
    from hetsched.policies.deadline.search import improve_plan
    from hetsched.policies.deadline.windows import improve_by_windows

    source = "local search"
    if options is not None and _windows_on(options):
        began = budget.elapsed_s()
        windowed = improve_by_windows(problem, plan, budget, threads=options.threads,
                                      seed=options.seed)
        extra["windows_s"] = round(budget.elapsed_s() - began, 4)
        if problem.evaluate(windowed) < problem.evaluate(plan):
            source, plan = "windows", windowed
        if budget.expired():
            return source, plan
    began = budget.elapsed_s()
    searched = improve_plan(problem, plan, budget)
    extra["leftover_search_s"] = round(budget.elapsed_s() - began, 4)
    if problem.evaluate(searched) < problem.evaluate(plan):
        source, plan = "local search", searched
    return source, plan


def _windows_on(options: SolveOptions) -> bool:
    """Whether the solve searches CP-SAT windows: back-end ``cpsat`` and
    ``options.windows``."""
    return options.windows and (options.backend or "cpsat") == "cpsat"


def _bounds(problem: DeadlineProblem, start: Plan, budget: Budget, extra: dict[str, Any]
            ) -> tuple[float | None, Plan]:
    """The relaxations' bound on the completion term (``None`` without one) and the best
    plan they lead to: the time-indexed relaxation of the model's own plans
    (:func:`_time_indexed`), then, only when it did not converge, the preemptive LP
    relaxation (:func:`_relax`). Converged, the time-indexed bound was the higher on every
    instance measured (``medium.json``: 757,585 s against 698,817 s; generated instances of
    16 and 24 jobs: 10 % and 9 % higher), and the preemptive LP's 2.6 s on
    ``medium.json`` went to the plan instead (gap 8.2 % -> 7.0 %)."""
    timed, start = _time_indexed(problem, start, budget, extra)
    bounds = [timed.bound_s]
    if timed.status != "optimal" and not budget.expired():
        relaxed, start = _relax(problem, start, budget, extra)
        bounds.append(relaxed.bound_s)
    finite = [bound for bound in bounds if math.isfinite(bound)]
    return (max(finite) if finite else None), start


def _relax(problem: DeadlineProblem, start: Plan, budget: Budget, extra: dict[str, Any]
           ) -> tuple[Relaxation, Plan]:
    """The LP relaxation (a part of ``budget``) and the better, lexicographically, of
    ``start`` and the plan of the LP's job order (``extra["start"]`` says which)."""
    from hetsched.formulations.deadline.relaxation import LP_MAX, LP_SHARE, relax
    from hetsched.policies.deadline.search import decode

    relaxed = relax(problem, budget.part(LP_SHARE, LP_MAX))
    extra["lp_relaxation"] = relaxed.as_dict()
    if relaxed.order:
        order = list(relaxed.order)
        ordered = decode(problem, order, dict.fromkeys(order), budget)
        if problem.evaluate(ordered) < problem.evaluate(start):
            extra["start"] = "LP order"
            return relaxed, ordered
    return relaxed, start


def _time_indexed(problem: DeadlineProblem, start: Plan, budget: Budget,
                  extra: dict[str, Any]) -> tuple[TimeIndexedBound, Plan]:
    """The time-indexed relaxation of the model's own (non-preemptive) plans, a part of
    ``budget``: first with no deadline to be missed, its start dates and modes ordering
    plans (:func:`~hetsched.policies.deadline.search.guided_plans`) that replace ``start``
    when better; then with the late row at the best plan's deadline term, its bound (it
    holds for every plan missing no more deadlines, the returned plan and the optimum
    among them), refined on finer grids (:func:`_refine`)."""
    from hetsched.formulations.deadline.timeindexed import (
        TI_FIRST_SHARE,
        TI_MAX,
        TI_SHARE,
        TimeIndexedRelaxation,
    )
    from hetsched.policies.deadline.search import guided_plans

    part = budget.part(TI_SHARE, TI_MAX)
    capped = problem.has_deadlines
    relaxation = TimeIndexedRelaxation(problem, late_cap=0.0 if capped else None, start=start)
    relaxation.run(part.part(TI_FIRST_SHARE) if capped else part)
    hints = relaxation.result()
    best = min((start, *guided_plans(problem, hints.median_start_s, hints.mode, part)),
               key=problem.evaluate)
    if capped:
        relaxation.set_late_cap(float(problem.evaluate(best)[0]))
        relaxation.run(part)
        hints = relaxation.result()
        best = min((best, *guided_plans(problem, hints.median_start_s, hints.mode, part)),
                   key=problem.evaluate)
    if best is not start:
        extra["start"] = "time-indexed order"
    bound = _refine(problem, best, hints, part)
    extra["time_indexed"] = bound.as_dict()
    return bound, best


def _refine(problem: DeadlineProblem, best: Plan, bound: TimeIndexedBound, part: Budget
            ) -> TimeIndexedBound:
    """The relaxation again on grids of :data:`REFINE_FACTOR` halves as many slots while
    what is left of its ``part`` of the budget covers :data:`REFINE_COST` times the last
    run's cost (seconds, or work units), at most :data:`REFINE_MAX_SLOTS` and
    :data:`REFINE_MAX_COLUMNS`, the late row at ``best``'s deadline term and the horizon at
    its end; the best bound, each one holding for the same plans. Each finer grid is
    adaptive, finer where the last LP's columns start
    (:func:`~hetsched.formulations.deadline.timeindexed.adaptive_edges`), and its master
    starts from those columns: on ``medium.json`` 752,690 s with 400 even slots, 758,902 s
    with 600 adaptive ones."""
    from hetsched.formulations.deadline.timeindexed import TimeIndexedRelaxation

    cap = float(problem.evaluate(best)[0]) if problem.has_deadlines else None
    cost = part.spent()
    log.debug("time-indexed relaxation: %d slots cost %.3g, %.3g left", bound.slots, cost,
              _left(part))
    slots = REFINE_FACTOR * bound.slots // 2
    while bound.status == "optimal" and slots <= REFINE_MAX_SLOTS and \
            bound.pairs * slots <= REFINE_MAX_COLUMNS and _left(part) > REFINE_COST * cost:
        began = part.spent()
        finer = TimeIndexedRelaxation(
            problem, late_cap=cap, start=best, slots=slots, columns=bound.support,
            dense_s=[start for _, _, start in bound.support])
        finer.run(part)
        cost = part.spent() - began
        found = finer.result()
        log.debug("time-indexed relaxation: %d slots cost %.3g, %.3g left", found.slots, cost,
                  _left(part))
        if found.status != "optimal" or not found.bound_s > bound.bound_s:
            break
        bound = found
        slots = REFINE_FACTOR * bound.slots // 2
    return bound


def _left(budget: Budget) -> float:
    """What is left of ``budget`` (infinite without a limit)."""
    left = budget.remaining()
    return math.inf if left is None else left
