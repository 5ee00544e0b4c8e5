"""Static planners: an :class:`~hetsched.core.records.Instance` in, a
:class:`~hetsched.core.result.Result` out.

Every planner declares its back-ends (the default first; none for a pure heuristic), the
time limit used when the caller gives none, and whether, replanned at every decision point
of a replay (:class:`~hetsched.policies.replanning.Replanning`), it may preempt running jobs.
:func:`run_planner` is the one way to run one: it checks the back-end, makes the budget
and the settings. Planners are found by name in :mod:`hetsched.registry`, which also
turns every rolling policy into a planner (:class:`~hetsched.simulate.simulated.Simulated`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Protocol

from hetsched.core.errors import InputError
from hetsched.core.log_levels import solve_log_level
from hetsched.core.records import Instance
from hetsched.core.result import Result, Schedule
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import ScheduleOutcome
from hetsched.formulations.options import MAX_SEED, MAX_THREADS, SolveOptions
from hetsched.policies.backends import check_installed

log = logging.getLogger(__name__)

__all__ = ["MAX_SEED", "MAX_THREADS", "Planner", "SolveOptions", "outcome_result", "run_planner"]


class Planner(Protocol):
    """A static scheduler: an exact model, a heuristic, or a simulated rolling policy."""

    @property
    def name(self) -> str:
        """The registry name."""
        ...

    @property
    def backends(self) -> tuple[str, ...]:
        """Back-ends it can run on, the default first; empty for a pure heuristic."""
        ...

    @property
    def default_time_limit_s(self) -> float | None:
        """The time limit (s) used when the caller gives none (``None``: no limit)."""
        ...

    @property
    def replan_preemptive(self) -> bool:
        """Replanned in a replay, whether it sees the running jobs and may preempt them."""
        ...

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job of ``instance``; ``runtime_s`` and metrics are filled in by
        :func:`hetsched.solve`."""
        ...

    def unrunnable(self, instance: Instance) -> dict[str, str]:
        """The jobs of ``instance`` it cannot run (job id -> why), e.g. a gang the model
        can only place packed and no node holds; empty if it runs them all."""
        ...


def outcome_result(outcome: ScheduleOutcome, model: str) -> Result:
    """The :class:`Result` of what a model found: no schedule is an empty one, with an
    infinite objective and no bound; runtime and metrics are filled in by
    :func:`hetsched.solve`."""
    if outcome.schedule is None:
        return Result(outcome.status, math.inf, None, 0.0, Schedule(), model,
                      message=outcome.message, extra=dict(outcome.extra))
    return Result(outcome.status, outcome.objective, outcome.bound, 0.0, outcome.schedule,
                  model, message=outcome.message, extra=dict(outcome.extra))


def run_planner(planner: Planner, instance: Instance, options: SolveOptions | None = None, *,
                started: float | None = None) -> tuple[Result, SolveOptions]:
    """Run ``planner`` on ``instance`` with ``options`` (default :class:`SolveOptions`)
    under one budget; the result and the options used: the planner's first back-end when
    they name none, its default time limit when they give none, and the budget, theirs or
    one made of the time limit (seconds, or deterministic work units with
    ``deterministic``: :mod:`hetsched.formulations.budget`) counting from ``started`` (a
    ``time.monotonic()`` reading; default now)."""
    options = options or SolveOptions()
    check_installed(options.backend)
    if options.backend is not None and options.backend not in planner.backends:
        expected = ", ".join(planner.backends) if planner.backends else \
            "no back-end (a heuristic)"
        raise InputError(f"model {planner.name} has no such back-end", path="backend",
                         value=options.backend, expected=expected)
    limit = options.time_limit_s if options.time_limit_s is not None else \
        planner.default_time_limit_s
    budget = options.budget if options.budget is not None else Budget(
        limit, deterministic=options.deterministic, started=started)
    settings = dataclasses.replace(
        options, backend=options.backend or (planner.backends[0] if planner.backends else None),
        time_limit_s=limit, budget=budget)
    log.log(solve_log_level(), "solving %s (%d jobs) with %s/%s, budget %s",
            instance.name or "instance", len(instance.jobs), planner.name, settings.backend or "-",
            budget.describe())
    return planner.solve(instance, settings), settings
