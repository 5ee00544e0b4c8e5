"""The one entry point: ``solve(instance, model=..., backend=..., time_limit=...)``."""

from __future__ import annotations

import dataclasses
import logging
import time

from hetsched.data import Instance
from hetsched.formulations.budget import Budget
from hetsched.policies import run_planner
from hetsched.registry import planner
from hetsched.result import Result, compute_metrics

log = logging.getLogger(__name__)


def solve(
    instance: Instance,
    model: str = "fifo",
    backend: str | None = None,
    time_limit: float | None = None,
    **options: object,
) -> Result:
    """Schedule ``instance`` with the policy ``model`` on ``backend``.

    ``time_limit`` is the budget of the whole solve, in seconds (the policy's default when
    ``None``), or in deterministic work units with ``deterministic=True`` (the same answer
    on any machine; see :mod:`hetsched.formulations.budget`); further keyword arguments are fields
    of :class:`~hetsched.policies.SolveOptions` (``gap``, ``threads``, ``seed``,
    ``warm_start``, ...). One :class:`~hetsched.formulations.budget.Budget` is made here (or given
    as ``budget=``; ``started=`` a ``time.monotonic()`` reading from which a wall-clock
    budget counts, e.g. the start of a command), and every phase of the solve consults
    it. The result's runtime is wall time of the whole solve and its metrics are computed
    from the returned schedule.
    """
    started = time.perf_counter()
    deterministic = bool(options.pop("deterministic", False))
    given = options.pop("budget", None)
    counted_from = options.pop("started", None)
    policy = planner(model)
    result, settings = run_planner(
        policy, instance, backend=backend, time_limit=time_limit, deterministic=deterministic,
        budget=given if isinstance(given, Budget) else None,
        started=counted_from if isinstance(counted_from, float) else None, options=options)
    budget = settings.budget
    if settings.placement == "topology" and model != "topology" and len(result.schedule):
        from hetsched.policies.topology import topology_replacement

        schedule, extra = topology_replacement(
            instance, result.schedule, backend=settings.backend if settings.backend in (
                "cpsat", "cbc", "highs", "scip") else "cpsat",
            budget=budget, threads=settings.threads, seed=settings.seed)
        result = dataclasses.replace(result, schedule=schedule,
                                     extra={**result.extra, **extra})
    runtime = time.perf_counter() - started
    metrics = compute_metrics(instance, result.schedule)
    log.info("%s: status %s objective %.6g in %.3f s", model, result.status, result.objective,
             runtime)
    return dataclasses.replace(result, runtime_s=runtime, metrics=metrics,
                               backend=settings.backend)
