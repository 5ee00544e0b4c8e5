"""The settings every model accepts (:class:`SolveOptions`): defined in the formulations'
layer, which the models read them in, and re-exported by :mod:`hetsched.policies.planner`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_SEED, check_seed
from hetsched.core.result import Schedule
from hetsched.formulations.budget import Budget

#: Most solver threads a solve may ask for: HiGHS starts one OS thread per thread asked
#: for (100,000 did not stop within its limit) and CP-SAT takes at most 10,000 workers.
MAX_THREADS = 256

__all__ = ["MAX_SEED", "MAX_THREADS", "SolveOptions", "check_seed"]


@dataclass(frozen=True)
class SolveOptions:
    """Settings every planner accepts; a heuristic ignores what it has no use for. A
    model's own knobs are arguments of its planner's constructor (``DeadlinePlanner(
    objective=...)``, ``AlloxPlanner(alpha=...)``), not settings.

    ``budget`` is the one budget of the whole solve (made by :func:`hetsched.solve` from
    ``time_limit_s`` and ``deterministic``; every phase of a policy consults it), ``gap``
    is the relative gap at which a solver may stop, ``warm_start`` a schedule to start
    from. ``lp_bound``: a model whose own bound can be weak may spend part of the budget
    on the time-indexed LP relaxation (:mod:`hetsched.formulations.completion`) for a bound
    and a start (``deadline`` does); replays turn it off (one decision reports no bound).
    ``windows``: a model may spend what its solver leaves of the budget (all of it when its
    whole model is too large) on CP-SAT over windows of its plan (``deadline`` on CP-SAT
    does); replays turn it off (a decision's plan is made again at the next event, and on
    ee9e8c at load 1 the replay's average JCT got 15 % worse with it).
    """

    backend: str | None = None
    time_limit_s: float | None = None
    #: the time limit counts deterministic work units instead of wall seconds
    deterministic: bool = False
    budget: Budget | None = None
    gap: float = 0.0
    threads: int = 1
    seed: int = 0
    warm_start: Schedule | None = None
    lp_bound: bool = True
    windows: bool = True

    def __post_init__(self) -> None:
        if self.time_limit_s is not None and not (
                isinstance(self.time_limit_s, int | float) and not isinstance(
                    self.time_limit_s, bool) and math.isfinite(self.time_limit_s)
                and self.time_limit_s > 0):
            raise InputError("bad time limit", path="time_limit_s", value=self.time_limit_s,
                             expected="a finite number of seconds > 0, or None (the model's "
                             "default)")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or not (
                1 <= self.threads <= MAX_THREADS):
            raise InputError("bad thread count", path="threads", value=self.threads,
                             expected=f"an integer from 1 to {MAX_THREADS}")
        check_seed(self.seed, "seed")
        if not isinstance(self.gap, int | float) or not (
                math.isfinite(self.gap) and self.gap >= 0):
            raise InputError("bad gap", path="gap", value=self.gap,
                             expected="a finite number >= 0")
