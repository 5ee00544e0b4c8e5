"""The one entry point: ``solve(instance, model=..., backend=..., time_limit=...)``."""

from __future__ import annotations

import dataclasses
import logging
import math
import time

from hetsched.data import Instance
from hetsched.errors import InputError
from hetsched.formulations.budget import Budget
from hetsched.policies import SolveOptions, get_policy
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
    if time_limit is not None and not (isinstance(time_limit, int | float) and
                                       math.isfinite(time_limit) and time_limit > 0):
        raise InputError("bad time limit", path="--time-limit", value=time_limit,
                         expected="a finite number of seconds > 0")
    policy = get_policy(model)
    limit = time_limit if time_limit is not None else policy.default_time_limit_s
    budget = given if isinstance(given, Budget) else Budget(
        limit, deterministic=deterministic,
        started=counted_from if isinstance(counted_from, float) else None)
    if backend is not None and backend not in policy.backends:
        expected = ", ".join(policy.backends) if policy.backends else "no --backend (a heuristic)"
        raise InputError(f"model {model} has no such back-end", path="--backend", value=backend,
                         expected=expected)
    if options.get("placement", "first-fit") not in ("first-fit", "topology"):
        raise InputError("unknown placement", path="--placement", value=options["placement"],
                         expected="first-fit or topology")
    settings = SolveOptions(
        backend=backend or (policy.backends[0] if policy.backends else None),
        time_limit_s=limit, deterministic=deterministic, budget=budget,
        **options,  # type: ignore[arg-type]
    )
    log.info("solving %s (%d jobs) with %s/%s, budget %s", instance.name or "instance",
             len(instance.jobs), model, settings.backend or "-", budget.describe())
    result = policy.solve(instance, settings)
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
