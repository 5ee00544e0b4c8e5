"""The one entry point: ``solve(instance, model=..., backend=..., time_limit=...)``."""

from __future__ import annotations

import dataclasses
import logging
import time

from solver.data import Instance
from solver.errors import InputError
from solver.policies import SolveOptions, get_policy
from solver.result import Result, compute_metrics

log = logging.getLogger(__name__)


def solve(
    instance: Instance,
    model: str = "fifo",
    backend: str | None = None,
    time_limit: float | None = None,
    **options: object,
) -> Result:
    """Schedule ``instance`` with the policy ``model`` on ``backend``.

    ``time_limit`` is in seconds; further keyword arguments are fields of
    :class:`~solver.policies.SolveOptions` (``gap``, ``threads``, ``seed``,
    ``warm_start``). The result's runtime is wall time of the whole solve and its
    metrics are computed from the returned schedule.
    """
    policy = get_policy(model)
    if backend is not None and backend not in policy.backends:
        expected = ", ".join(policy.backends) if policy.backends else "no --backend (a heuristic)"
        raise InputError(f"model {model} has no such back-end", path="--backend", value=backend,
                         expected=expected)
    if options.get("placement", "first-fit") not in ("first-fit", "topology"):
        raise InputError("unknown placement", path="--placement", value=options["placement"],
                         expected="first-fit or topology")
    if time_limit is not None and not time_limit > 0:
        raise InputError("bad time limit", path="--time-limit", value=time_limit,
                         expected="a number of seconds > 0")
    settings = SolveOptions(
        backend=backend or (policy.backends[0] if policy.backends else None),
        time_limit_s=time_limit,
        **options,  # type: ignore[arg-type]
    )
    log.info("solving %s (%d jobs) with %s/%s", instance.name or "instance", len(instance.jobs),
             model, settings.backend or "-")
    started = time.perf_counter()
    result = policy.solve(instance, settings)
    if settings.placement == "topology" and model != "topology" and len(result.schedule):
        from solver.policies.topology import topology_replacement

        schedule, extra = topology_replacement(
            instance, result.schedule, backend=settings.backend if settings.backend in (
                "cpsat", "cbc", "highs") else "cpsat",
            time_limit_s=time_limit, threads=settings.threads, seed=settings.seed)
        result = dataclasses.replace(result, schedule=schedule,
                                     extra={**result.extra, **extra})
    runtime = time.perf_counter() - started
    metrics = compute_metrics(instance, result.schedule)
    log.info("%s: status %s objective %.6g in %.3f s", model, result.status, result.objective,
             runtime)
    return dataclasses.replace(result, runtime_s=runtime, metrics=metrics,
                               backend=settings.backend)
