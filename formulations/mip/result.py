"""What a MILP solve is asked (:class:`MipSettings`); what it returns is the one record
every back-end returns, :class:`hetsched.formulations.common.SolverResult`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hetsched.core.result import Status
from hetsched.formulations.mip.model import Vector


@dataclass(frozen=True)
class MipSettings:
    """How an engine searches; the limits come from the
    :class:`~hetsched.formulations.budget.Budget`.

    ``gap``: relative gap (``|objective - bound| / |objective|``, dimensionless) at which
    the engine may stop; 0 asks for a proof of optimality. ``threads``: engine threads (SCIP
    uses one whatever is asked). ``seed``: the engine's random seed. ``presolve``: HiGHS's
    presolve (CBC and SCIP ignore it); off for models whose LP relaxation is nearly
    integral, where it only costs time (the ``progress`` round: 0.42 of 0.45 s at 900
    jobs, the same optimum in 0.013 s without).
    """

    gap: float = 0.0
    threads: int = 1
    seed: int = 0
    presolve: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.gap) and 0.0 <= self.gap < 1.0):
            raise ValueError(f"gap must be in [0, 1), got {self.gap!r}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads!r}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed!r}")


class SolverResult:
    """How one :func:`~hetsched.formulations.mip.solve_mip` call ended.

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
