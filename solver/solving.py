"""The one entry point: ``solve(instance, model, SolveOptions(...))``."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.records import Instance
from hetsched.core.result import Result, compute_metrics
from hetsched.policies.planner import SolveOptions, run_planner
from hetsched.registry import planner

__all__ = ["PLACEMENTS", "SolveOptions", "solve"]

log = logging.getLogger(__name__)

#: How GPUs inside a node are chosen after the solve (``solve(placement=...)``).
PLACEMENTS = ("first-fit", "topology")
#: The settings of a solve (every field of :class:`SolveOptions`, and ``time_limit``, its
#: old keyword), which ``solve`` takes in ``options``, never as keywords.
_SETTINGS = frozenset({*(f.name for f in dataclasses.fields(SolveOptions)), "time_limit"})


def solve(instance: Instance, model: str = "fifo", options: SolveOptions | None = None, *,
          placement: str = "first-fit", started: float | None = None,
          **knobs: Any) -> Result:
    """Schedule ``instance`` with the planner ``model`` (any registered name).

    ``options`` (default :class:`~hetsched.policies.planner.SolveOptions`, also
    ``hetsched.SolveOptions``) are the settings of the solve, checked when made: the
    back-end (default: the model's first), ``time_limit_s``, the budget of the whole solve
    in seconds (the model's default when ``None``) or in deterministic work units with
    ``deterministic`` (the same answer on any machine; see
    :mod:`hetsched.formulations.budget`), ``gap``, ``threads``, ``seed``, ``warm_start``,
    ``lp_bound``, or a ready ``budget``. ``knobs`` are the model's own settings, arguments
    of its planner's constructor (``objective`` for ``deadline``, ``alpha`` for ``allox``,
    a rolling policy's parameters). ``placement``: GPUs inside a node by ``"first-fit"``
    or by the exact ``"topology"`` model after the solve. One
    :class:`~hetsched.formulations.budget.Budget` is made (unless given), counted from
    ``started`` (a ``time.monotonic()`` reading, e.g. the start of a command; default
    now), and every phase of the solve consults it. The result's runtime is wall time of
    the whole solve and its metrics are computed from the returned schedule.
    """
    began = time.perf_counter()
    misplaced = sorted(_SETTINGS.intersection(knobs))
    if misplaced:
        name = misplaced[0]
        field = "time_limit_s" if name == "time_limit" else name
        raise TypeError(f"solve() takes the solve setting {name!r} in options: "
                        f"solve(instance, model, SolveOptions({field}=...))")
    if placement not in PLACEMENTS:
        raise InputError("unknown placement", path="placement", value=placement,
                         expected=" or ".join(PLACEMENTS))
    policy = planner(model, **knobs)
    result, used = run_planner(policy, instance, options, started=started)
    if placement == "topology" and model != "topology" and len(result.schedule):
        from hetsched.policies.topology import topology_replacement

        exact = planner("topology").backends  # the exact placement model's
        schedule, extra = topology_replacement(
            instance, result.schedule,
            backend=used.backend if used.backend in exact else exact[0],
            budget=used.budget, threads=used.threads, seed=used.seed)
        result = dataclasses.replace(result, schedule=schedule,
                                     extra={**result.extra, **extra})
    runtime = time.perf_counter() - began
    metrics = compute_metrics(instance, result.schedule)
    log.info("%s: status %s objective %.6g in %.3f s", model, result.status, result.objective,
             runtime)
    return dataclasses.replace(result, runtime_s=runtime, metrics=metrics,
                               backend=used.backend)
