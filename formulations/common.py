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
from typing import TYPE_CHECKING, Any

from hetsched.core.result import Schedule, Status

if TYPE_CHECKING:
    from hetsched.formulations.mip.model import Vector

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


#: How one solver call's status is written in notes, logs and decisions.csv: the words
#: these outputs have always used (a replay's files stay byte-identical).
_CALL_WORDS = {Status.OPTIMAL: "optimal", Status.FEASIBLE: "feasible",
               Status.INFEASIBLE: "infeasible", Status.TIME_LIMIT: "no-solution",
               Status.UNKNOWN: "unknown", Status.ERROR: "error"}


def call_word(status: Status) -> str:
    """``status`` of one solver call as notes and logs write it (``optimal``,
    ``no-solution``: stopped before any solution, ...)."""
    return _CALL_WORDS[status]


@dataclass(frozen=True, eq=False)
class SolverResult:
    """How one solver call ended, the one record every back-end returns: an array MILP
    engine (:func:`~hetsched.formulations.mip.solve_mip`, with the column ``values``), a
    readable PuLP model (:mod:`hetsched.formulations.pulp_backend`, values left in the
    model) or CP-SAT (values read off the solver by the model). ``outcome`` is a
    :class:`~hetsched.core.result.Status` (``TIME_LIMIT``: stopped before any solution).

    ``objective`` and ``bound`` are in the model's units and include its ``offset``
    (``objective = cost @ values + offset``; ``bound`` a proven lower bound on it, ``None``
    when unknown). ``values`` has one entry per column (integer columns rounded), ``None``
    without a solution. ``wall_s``: wall seconds of the whole call (files, engine, reading
    back). ``hit_limit``: stopped by a time or node limit (or the wall watchdog), not by a
    proof or the gap. ``work``: deterministic work units used (branch-and-bound nodes /
    :data:`hetsched.formulations.budget.HIGHS_NODES_PER_UNIT`), in every mode. ``detail``: the
    engine and its version, ``engine_status`` (the engine's own words), ``nodes``
    explored, ``limit_time_s``/``limit_nodes``, ``source`` of the values (``"engine"``, or
    ``"start"`` when the start was better than anything the engine returned),
    ``start_feasible``, ``start`` (what the engine said of it: HiGHS and SCIP ``"given"``
    or ``"rejected"``, CBC ``"accepted"``, ``"read"`` or ``"not read"``), ``violation``
    (scaled, of the engine's values), ``message`` on ERROR, ``unbounded``, ``watchdog``
    (stopped past its time limit), CBC's ``returncode``/``signal``/``log_tail``.
    """

    outcome: Status
    objective: float | None = None
    bound: float | None = None
    values: Vector | None = None
    wall_s: float = 0.0
    hit_limit: bool = False
    work: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        """``(objective - bound) / max(|objective|, 1e-9)`` (dimensionless), ``None``
        without both."""
        if self.objective is None or self.bound is None:
            return None
        return max(0.0, self.objective - self.bound) / max(abs(self.objective), 1e-9)

    @property
    def has_solution(self) -> bool:
        """Whether ``values`` holds a solution."""
        return self.values is not None


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
