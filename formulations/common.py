"""Helpers shared by the formulations: the time grid, integer weights, solver outcomes.

Time grid. CP-SAT needs integer times, so every model works on a grid of
``TICK_S`` seconds (1 ms): a release is rounded up to the grid, a processing
time is rounded up to whole ticks, and a deadline is rounded down. A schedule
that is feasible on the grid stays feasible with exact processing times (jobs
only finish earlier), so the realised schedule is never worse than the model's.
The PuLP models use the same rounded data, in seconds, so both back-ends solve
exactly the same problem.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hetsched.core.result import Schedule, Status

#: Length of one tick of the time grid, in seconds.
TICK_S = 1e-3
#: Slack when turning seconds into ticks, so that 2255.95 s is 2,255,950 ticks.
_ROUNDING_SLACK = 1e-6


def ticks_up(seconds: float) -> int:
    """The smallest whole number of ticks that is at least ``seconds``."""
    return math.ceil(seconds / TICK_S - _ROUNDING_SLACK)


def ticks_down(seconds: float) -> int:
    """The largest whole number of ticks that is at most ``seconds``."""
    return math.floor(seconds / TICK_S + _ROUNDING_SLACK)


def seconds(ticks: float) -> float:
    """Ticks back to seconds."""
    return ticks * TICK_S


def integer_weights(weights: Iterable[float]) -> tuple[int, list[int], bool]:
    """``(scale, integer weights, exact)``: the smallest power of ten (up to 10^6) that
    turns every weight into an integer, the scaled weights, and whether the scaling
    was exact (if not, weights are rounded at 10^6 and the caller must say so)."""
    values = list(weights)
    for exponent in range(7):
        scale = 10**exponent
        scaled = [value * scale for value in values]
        if all(abs(v - round(v)) <= 1e-9 * max(1.0, abs(v)) for v in scaled):
            return scale, [round(v) for v in scaled], True
    scale = 10**6
    return scale, [max(1, round(value * scale)) for value in values], False


class Outcome(str, Enum):
    """How one solver call ended, before it is mapped onto :class:`hetsched.core.result.Status`."""

    OPTIMAL = "optimal"  # proven optimal (within the requested gap, which may be 0)
    FEASIBLE = "feasible"  # a solution, stopped by the time limit or a gap limit
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no-solution"  # stopped (time limit) before any solution
    ERROR = "error"


@dataclass
class SolveStats:
    """What a back-end reports about one solve: outcome, objective, bound, time."""

    outcome: Outcome
    objective: float | None = None
    bound: float | None = None
    wall_s: float = 0.0
    hit_time_limit: bool = False
    detail: dict[str, object] = field(default_factory=dict)


@dataclass
class ScheduleOutcome:
    """What a scheduling model found (every model that returns a schedule: ``deadline``,
    ``allox``): the status, the schedule (``None`` if it has none), the objective and
    the proven bound (s of weighted JCT), a message, and the model's own figures
    (``extra``). A planner turns it into a :class:`~hetsched.core.result.Result`."""

    status: Status
    schedule: Schedule | None
    objective: float = math.inf
    bound: float | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
