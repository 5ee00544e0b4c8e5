"""The one entry point: ``solve(instance, model=..., backend=..., time_limit=...)``."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.records import Instance
from hetsched.core.result import Result, Schedule, compute_metrics
from hetsched.formulations.budget import Budget
from hetsched.policies.planner import run_planner
from hetsched.registry import planner

log = logging.getLogger(__name__)


def solve(
    instance: Instance,
    model: str = "fifo",
    backend: str | None = None,
    time_limit: float | None = None,
    *,
    deterministic: bool = False,
    gap: float = 0.0,
    threads: int = 1,
    seed: int = 0,
    warm_start: Schedule | None = None,
    placement: str = "first-fit",
    budget: Budget | None = None,
    started: float | None = None,
    lp_bound: bool = True,
    **knobs: Any,
) -> Result:
    """Schedule ``instance`` with the planner ``model`` (any registered name) on ``backend``.

    ``time_limit`` is the budget of the whole solve, in seconds (the model's default when
    ``None``), or in deterministic work units with ``deterministic`` (the same answer on
    any machine; see :mod:`hetsched.formulations.budget`); ``gap``, ``threads``, ``seed``,
    ``warm_start`` and ``lp_bound`` are the :class:`~hetsched.policies.planner.SolveOptions` of
    that name.
    ``knobs`` are the model's own settings, arguments of its planner's constructor
    (``objective`` for ``deadline``, ``alpha`` for ``allox``, a rolling policy's
    parameters). ``placement``: GPUs inside a node by ``"first-fit"`` or by the exact
    ``"topology"`` model after the solve. One
    :class:`~hetsched.formulations.budget.Budget` is made (or given as ``budget``;
    ``started`` a ``time.monotonic()`` reading from which a wall-clock budget counts, e.g.
    the start of a command), and every phase of the solve consults it. The result's
    runtime is wall time of the whole solve and its metrics are computed from the
    returned schedule.
    """
    began = time.perf_counter()
    if placement not in ("first-fit", "topology"):
        raise InputError("unknown placement", path="placement", value=placement,
                         expected="first-fit or topology")
    policy = planner(model, **knobs)
    result, settings = run_planner(
        policy, instance, backend=backend, time_limit=time_limit, deterministic=deterministic,
        budget=budget, started=started, gap=gap, threads=threads, seed=seed,
        warm_start=warm_start, lp_bound=lp_bound)
    if placement == "topology" and model != "topology" and len(result.schedule):
        from hetsched.policies.topology import topology_replacement

        schedule, extra = topology_replacement(
            instance, result.schedule, backend=settings.backend if settings.backend in (
                "cpsat", "cbc", "highs", "scip") else "cpsat",
            budget=settings.budget, threads=settings.threads, seed=settings.seed)
        result = dataclasses.replace(result, schedule=schedule,
                                     extra={**result.extra, **extra})
    runtime = time.perf_counter() - began
    metrics = compute_metrics(instance, result.schedule)
    log.info("%s: status %s objective %.6g in %.3f s", model, result.status, result.objective,
             runtime)
    return dataclasses.replace(result, runtime_s=runtime, metrics=metrics,
                               backend=settings.backend)
