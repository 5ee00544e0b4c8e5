"""What the engines share: limits from a budget, the raw report of a run, a solve in a
worker thread that Ctrl-C can stop, and the one mapping from a report to a
:class:`~hetsched.formulations.mip.result.SolverResult`.

Interrupts. HiGHS and SCIP run in a worker thread (both release the GIL) while the
calling thread waits on an event, so a signal handler (Python's SIGINT handler raising
KeyboardInterrupt, or a caller's SIGTERM handler) runs at once in the main thread; the
engine is then told to stop (HiGHS: an interrupt callback; SCIP: ``interruptSolve``),
given :data:`STOP_WAIT_S` to return, and the exception propagates. No signal handler is
installed or replaced. The same wait enforces the wall watchdog: an engine still running
:data:`KILL_GRACE_S` (+ :data:`KILL_GRACE_SHARE` of the limit) after its time limit is
stopped like an interrupt, and the run counts as stopped by its limit.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

import numpy as np

from hetsched.core.result import Status
from hetsched.formulations.budget import HIGHS_NODES_PER_UNIT, Budget
from hetsched.formulations.common import SolverResult
from hetsched.formulations.mip.model import MatrixModel, Vector
from hetsched.formulations.mip.result import MipSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A wall-clock engine still running this many seconds past its limit is stopped.
KILL_GRACE_S = 0.5
#: ... plus this share of the limit.
KILL_GRACE_SHARE = 0.05
#: After asking an engine to stop, wait at most this long (s) before raising anyway.
STOP_WAIT_S = 5.0
#: How often (s) the waiting thread wakes up to check the watchdog.
POLL_S = 0.05
#: Largest scaled violation (rows: by 1 + |A| |x|; bounds: by 1 + |bound|; integrality:
#: absolute) of a solution that is accepted.
FEASIBILITY_TOLERANCE = 1e-5
#: Relative difference below which two objective values are the same.
OBJECTIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Limits:
    """What one engine call may use: a wall deadline on ``time.monotonic`` (wall mode),
    a node limit (deterministic mode, MILPs only), or nothing."""

    deadline: float | None = None
    nodes: int | None = None

    @classmethod
    def from_budget(cls, budget: Budget, model: MatrixModel) -> Limits:
        """Wall mode: the deadline is now + ``budget.for_solver()``. Deterministic mode:
        ``for_solver()`` units x :data:`HIGHS_NODES_PER_UNIT` nodes (at least 1), and no
        limit for an LP (it is solved exactly)."""
        allowed = budget.for_solver()
        if allowed is None:
            return cls()
        if budget.deterministic:
            if not model.integer.any():
                return cls()
            return cls(nodes=max(1, int(allowed * HIGHS_NODES_PER_UNIT)))
        return cls(deadline=time.monotonic() + allowed)

    def time_s(self) -> float | None:
        """Seconds left until the deadline (at least 0.01), ``None`` without one."""
        if self.deadline is None:
            return None
        return max(0.01, self.deadline - time.monotonic())

    def kill_at(self) -> float | None:
        """When a wall-clock engine still running must be stopped (monotonic seconds)."""
        if self.deadline is None:
            return None
        return self.deadline + KILL_GRACE_S + KILL_GRACE_SHARE * max(
            0.0, self.deadline - time.monotonic())

    def describe(self) -> dict[str, Any]:
        """For ``detail``."""
        return {"limit_time_s": None if self.deadline is None else round(self.time_s() or 0.0,
                                                                          3),
                "limit_nodes": self.nodes}


class RunKind(str, Enum):
    """How an engine run ended, before the checks of :func:`finish`."""

    OPTIMAL = "optimal"  # proven (within the requested gap)
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"  # unbounded, or infeasible-or-unbounded
    LIMIT = "limit"  # a time or node limit, or the watchdog
    ERROR = "error"


@dataclass
class EngineRun:
    """An engine's raw answer: values in column order, ``bound`` including the model's
    offset, ``nodes`` explored, the engine's own status text."""

    kind: RunKind
    status: str
    values: Vector | None = None
    bound: float | None = None
    nodes: float = 0.0
    message: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


class EngineStuckError(RuntimeError):
    """An engine asked to stop after its time limit did not (an ERROR outcome)."""


class Stopper:
    """The stop request shared by the waiting thread and an engine's interrupt hook."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.by_watchdog = False


def run_in_thread(work: Callable[[], T], stop: Callable[[], None], stopper: Stopper,
                  kill_at: float | None, name: str) -> T:
    """``work()`` in a daemon thread; the caller waits, interruptible. ``stop()`` asks the
    engine to stop (called again every :data:`POLL_S` until the work returns, since an
    engine may not accept it before its solve has begun). Any exception in the waiting
    thread (KeyboardInterrupt) stops the engine and propagates after at most
    :data:`STOP_WAIT_S`; at ``kill_at`` the engine is stopped and ``stopper.by_watchdog``
    set."""
    done = threading.Event()
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    def ask() -> None:
        stopper.requested.set()
        try:
            stop()
        except Exception as exc:
            log.debug("%s: stop request not taken yet: %s", name, exc)

    thread = threading.Thread(target=body, name=f"hetsched-{name}", daemon=True)
    thread.start()
    try:
        while not done.wait(POLL_S):
            now = time.monotonic()
            if stopper.requested.is_set():
                ask()
                if kill_at is not None and now > kill_at + STOP_WAIT_S:
                    raise EngineStuckError(
                        f"{name} did not stop {STOP_WAIT_S:g} s after being asked to (past "
                        "its time limit); its thread is abandoned")
            elif kill_at is not None and now > kill_at:
                log.warning("%s: still running past its time limit; stopping it", name)
                stopper.by_watchdog = True
                ask()
    except EngineStuckError:
        raise
    except BaseException:
        ask()
        waited = time.monotonic() + STOP_WAIT_S
        while not done.wait(POLL_S) and time.monotonic() < waited:
            ask()
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def check_values(model: MatrixModel, values: Vector) -> tuple[Vector, float]:
    """``values`` with integer columns rounded, and the largest scaled violation of the
    unrounded integrality or of a row or bound by the rounded values (0 if feasible)."""
    rounded = np.array(values, dtype=np.float64, copy=True)
    worst = 0.0
    if model.integer.any():
        part = rounded[model.integer]
        nearest = np.round(part)
        worst = float(np.max(np.abs(part - nearest), initial=0.0))
        rounded[model.integer] = nearest
    if model.num_rows:
        activity = model.matrix @ rounded
        scale = 1.0 + abs(model.matrix) @ np.abs(rounded)
        with np.errstate(invalid="ignore"):
            rows = np.maximum(model.row_lower - activity, activity - model.row_upper) / scale
        worst = max(worst, float(np.nanmax(rows, initial=0.0)))
    with np.errstate(invalid="ignore"):
        below = (model.col_lower - rounded) / (1.0 + np.abs(model.col_lower))
        above = (rounded - model.col_upper) / (1.0 + np.abs(model.col_upper))
    worst = max(worst, float(np.nanmax(below, initial=0.0)), float(np.nanmax(above, initial=0.0)))
    if not np.all(np.isfinite(rounded)):
        worst = math.inf
    return rounded, worst


def _better(first: float, second: float) -> bool:
    """Whether objective ``first`` is lower than ``second`` by more than round-off."""
    return first < second - OBJECTIVE_TOLERANCE * max(1.0, abs(second))


def finish(model: MatrixModel, run: EngineRun, settings: MipSettings,
           start: Vector | None, began: float) -> SolverResult:
    """The :class:`SolverResult` of ``run``: values checked against the model (an
    infeasible answer is dropped), the start kept when it beats the engine's answer,
    OPTIMAL only with a proof (and, with ``settings.gap > 0``, a bound equal to the
    objective), FEASIBLE / NO_SOLUTION after a limit."""
    detail: dict[str, Any] = {**run.detail, "engine_status": run.status, "nodes": run.nodes}
    if run.message:
        detail["message"] = run.message
    values: Vector | None = None
    if run.values is not None:
        values, violation = check_values(model, run.values)
        detail["violation"] = violation
        if violation > FEASIBILITY_TOLERANCE:
            log.warning("%s returned a solution that violates the model by %.3g (scaled): "
                        "dropped", detail.get("engine"), violation)
            values = None
    objective = None if values is None else model.objective(values)
    detail["source"] = "engine" if values is not None else None
    if start is not None:
        start_values, start_violation = check_values(model, start)
        detail["start_feasible"] = start_violation <= FEASIBILITY_TOLERANCE
        if detail["start_feasible"] and run.kind is not RunKind.ERROR:
            start_objective = model.objective(start_values)
            if objective is None or _better(start_objective, objective):
                values, objective, detail["source"] = start_values, start_objective, "start"
    bound = run.bound if run.bound is not None and math.isfinite(run.bound) else None
    if bound is not None and objective is not None and bound > objective:
        bound = objective  # the engine's round-off: a bound is never above a solution
    outcome, hit_limit = _outcome(run, values, objective, bound, settings, detail)
    if outcome is Status.OPTIMAL:
        detail["engine_bound"] = bound
        bound = objective
    elif outcome in (Status.INFEASIBLE, Status.ERROR):
        values, objective, bound, detail["source"] = None, None, None, None
    work = run.nodes / HIGHS_NODES_PER_UNIT
    return SolverResult(outcome, objective, bound, values, time.monotonic() - began, hit_limit,
                     work, detail)


def _outcome(run: EngineRun, values: Vector | None, objective: float | None,
             bound: float | None, settings: MipSettings,
             detail: dict[str, Any]) -> tuple[Status, bool]:
    if run.kind is RunKind.ERROR:
        return Status.ERROR, False
    if run.kind is RunKind.UNBOUNDED:
        detail["unbounded"] = True
        detail.setdefault("message", f"no finite optimum: {run.status}")
        return Status.ERROR, False
    if run.kind is RunKind.INFEASIBLE:
        if values is None:
            return Status.INFEASIBLE, False
        log.warning("the engine reports %s but the start is feasible", run.status)
        return Status.FEASIBLE, False
    if values is None or objective is None:
        if run.kind is RunKind.LIMIT:
            return Status.TIME_LIMIT, True
        detail.setdefault("message", f"{run.status} without a usable solution")
        return Status.ERROR, False
    if run.kind is RunKind.LIMIT:
        return Status.FEASIBLE, True
    # The engine claims optimality (within settings.gap).
    if detail["source"] == "start":
        return Status.FEASIBLE, False  # the start beat what the engine called optimal
    if settings.gap == 0.0 or (bound is not None and not _better(bound, objective)):
        return Status.OPTIMAL, False
    return Status.FEASIBLE, False
