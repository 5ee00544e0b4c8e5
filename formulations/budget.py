"""One budget per solve: a deadline on the monotonic clock, or a deterministic work limit.

A :class:`Budget` is created once by the caller (``hetsched.solve``, a rolling policy at
each decision) and handed to every phase of a solve: model building, cut separation,
local search, each lexicographic stage of the solver. Each phase asks how much is left
(:meth:`Budget.remaining`, :meth:`Budget.share`) and, in deterministic mode, charges
what it used (:meth:`Budget.charge`). Nothing splits the time limit by hand.

*Wall-clock* budgets (``Budget.wall(5.0)``) end at ``created + limit`` on
``time.monotonic``; a phase that starts late gets what is left, never a fresh limit.

*Deterministic* budgets (``Budget.work(5.0)``) count *work units*, each meant to be
about one second of one core of a 2026 machine (measured on this project's CI machine):
CP-SAT's deterministic time (``max_deterministic_time``; :data:`CPSAT_DETERMINISTIC_PER_UNIT`
of it per unit), the local search's decoded job-modes (:data:`LOCAL_SEARCH_UNITS_PER_ITEM`
units each) and branch-and-bound nodes of the MILP engines (:data:`HIGHS_NODES_PER_UNIT`
per unit). The conversions are averages: a unit of CP-SAT work took 0.3 to 14 wall
seconds on the deadline models measured (presolve-heavy models are the slow end).
The same input and the same budget give the same answer on any machine, at any load:
what replays and benchmarks need to be reproducible. Model building and exact
algorithms (matching, LPs solved to optimality) are not limited in this mode; they are
deterministic anyway.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: Work units charged per (job, mode) pair that the local search decodes: measured so that
#: one unit is about one second of one core of this project's CI machine (2 cores, 2026;
#: 0.4 to 1.4 units per second on the shipped instances).
LOCAL_SEARCH_UNITS_PER_ITEM = 8e-6
#: CP-SAT deterministic time per work unit: CP-SAT counted 0.07 to 0.24 of it per wall
#: second on congested.json and 30 gangs of 4 GPUs (0.007 on medium.json, whose presolve
#: it hardly counts), so a unit is a little over a second on typical models.
CPSAT_DETERMINISTIC_PER_UNIT = 0.1
#: HiGHS branch-and-bound nodes allowed per deterministic work unit.
HIGHS_NODES_PER_UNIT = 200.0
#: Wall-clock budgets: the solver phases stop this share of the limit early (at most
#: :data:`RESERVE_MAX_S`), which leaves time to turn a plan into a schedule and check it.
RESERVE_SHARE = 0.03
RESERVE_MAX_S = 0.25


class BudgetExhaustedError(RuntimeError):
    """Raised by :meth:`Budget.check` when a phase must stop (the caller keeps its best
    plan so far)."""


class Budget:
    """How long a solve may run: ``limit`` wall seconds, or ``limit`` deterministic work
    units, or without limit (``limit=None``)."""

    def __init__(self, limit: float | None = None, *, deterministic: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 started: float | None = None) -> None:
        if limit is not None and not (isinstance(limit, int | float) and limit > 0
                                      and math.isfinite(limit)):
            raise ValueError(f"a budget must be a finite number > 0, got {limit!r}")
        self.limit = None if limit is None else float(limit)
        self.deterministic = deterministic
        self._clock = clock
        #: a wall-clock budget counts from ``started`` (a reading of ``clock``; default now)
        self._started = clock() if started is None else started
        self._charged = 0.0
        self._parent: Budget | None = None

    # -- making budgets --------------------------------------------------------------------
    @classmethod
    def wall(cls, seconds: float | None) -> Budget:
        """A deadline ``seconds`` from now on the monotonic clock (``None``: no limit)."""
        return cls(seconds)

    @classmethod
    def work(cls, units: float | None) -> Budget:
        """A deterministic allowance of ``units`` work units (``None``: no limit)."""
        return cls(units, deterministic=True)

    @classmethod
    def unlimited(cls, *, deterministic: bool = False) -> Budget:
        """No limit at all."""
        return cls(None, deterministic=deterministic)

    # -- reading it ------------------------------------------------------------------------
    @property
    def limited(self) -> bool:
        """Whether there is a limit."""
        return self.limit is not None

    @property
    def kind(self) -> str:
        """``"deterministic"`` or ``"wall"``."""
        return "deterministic" if self.deterministic else "wall"

    def elapsed_s(self) -> float:
        """Wall seconds since the budget was made (for reports, in both modes)."""
        return self._clock() - self._started

    def spent(self) -> float:
        """What has been used: wall seconds, or the work units charged so far."""
        return self._charged if self.deterministic else self.elapsed_s()

    def remaining(self) -> float | None:
        """What is left (never below 0), in the budget's unit; ``None`` without a limit."""
        if self.limit is None:
            return None
        return max(0.0, self.limit - self.spent())

    def expired(self) -> bool:
        """Whether nothing is left."""
        left = self.remaining()
        return left is not None and left <= 0.0

    def check(self, phase: str) -> None:
        """Raise :class:`BudgetExhaustedError` naming ``phase`` if nothing is left."""
        if self.expired():
            raise BudgetExhaustedError(f"the budget ({self.describe()}) ran out during {phase}")

    def reserve(self) -> float:
        """What the solver phases leave unused for the caller's own work after them (wall
        budgets only; 0 in deterministic mode)."""
        if self.limit is None or self.deterministic:
            return 0.0
        return min(RESERVE_MAX_S, RESERVE_SHARE * self.limit)

    def for_solver(self) -> float | None:
        """What the next solver call may use: what is left less :meth:`reserve` (at least a
        hundredth of a second so that a solver always starts), ``None`` without limit."""
        left = self.remaining()
        if left is None:
            return None
        return max(0.01, left - self.reserve())

    def share(self, fraction: float, cap: float | None = None) -> float | None:
        """A phase's part: ``fraction`` of what the solver may still use, at most ``cap``
        (``None`` without limit, or ``cap`` if one is given)."""
        left = self.for_solver()
        if left is None:
            return cap
        part = fraction * left
        return part if cap is None else min(cap, part)

    def part(self, fraction: float, cap: float | None = None) -> Budget:
        """A budget for one phase: :meth:`share` of this one, of the same kind. Work charged
        to it is charged to this budget too; a wall-clock part never ends after this
        budget would."""
        child = Budget(None, deterministic=self.deterministic, clock=self._clock)
        amount = self.share(fraction, cap)
        child.limit = None if amount is None else max(0.0, amount)
        child._parent = self
        return child

    # -- using it --------------------------------------------------------------------------
    def charge(self, units: float) -> None:
        """Record ``units`` of deterministic work (ignored by wall-clock budgets)."""
        if self.deterministic and units > 0:
            self._charged += units
            if self._parent is not None:
                self._parent.charge(units)

    def describe(self) -> str:
        """``"5 s wall"``, ``"5 work units"`` or ``"no limit"``."""
        if self.limit is None:
            return "no limit"
        return f"{self.limit:g} work units" if self.deterministic else f"{self.limit:g} s wall"

    def as_dict(self) -> dict[str, object]:
        """For ``Result.extra``: the kind, the limit and what was used."""
        return {"kind": self.kind, "limit": self.limit, "spent": round(self.spent(), 6)}

    def __repr__(self) -> str:
        return f"Budget({self.describe()}, spent {self.spent():.3g})"
