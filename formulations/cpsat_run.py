"""Running a CP-SAT model under a :class:`~hetsched.formulations.budget.Budget`, interruptibly.

Every CP-SAT solve of the project goes through :func:`run_cpsat`:

- *Budget*: a wall-clock budget becomes ``max_time_in_seconds`` (what is left of it); a
  deterministic one becomes ``max_deterministic_time`` (x
  :data:`~hetsched.formulations.budget.CPSAT_DETERMINISTIC_PER_UNIT`) and is charged with the
  deterministic time CP-SAT reports, so the same model, seed and budget give the same
  answer on any machine. Deterministic mode with several workers also sets
  ``interleave_search`` (CP-SAT's reproducible parallel mode).
- *Signals*: CP-SAT's own SIGINT handler (``catch_sigint_signal``) is switched off: it
  leaves SIGINT at its default action after a solve, so a later Ctrl-C killed the
  process before Python could write anything. Instead the solve runs in a worker thread
  (CP-SAT releases the GIL) while the calling thread waits; a KeyboardInterrupt (or a
  SIGTERM turned into one by the CLI) stops the search with ``stop_search`` and is
  raised again once the solver has returned, with Python's handlers untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ortools.sat.python import cp_model

from hetsched.formulations.budget import CPSAT_DETERMINISTIC_PER_UNIT, Budget

#: How often (s) the waiting thread wakes up to let Python run its signal handlers.
_POLL_S = 0.05


def cpsat_parameters(solver: cp_model.CpSolver, budget: Budget, *, threads: int = 1,
                     seed: int = 0, gap: float = 0.0) -> None:
    """Set workers, seed, gap and the budget's limit on ``solver``'s parameters."""
    params = solver.parameters
    params.num_workers = max(1, threads)
    params.random_seed = seed
    params.relative_gap_limit = gap
    params.catch_sigint_signal = False
    limit = budget.for_solver()
    if budget.deterministic:
        if threads > 1:
            params.interleave_search = True
        if limit is not None:
            params.max_deterministic_time = limit * CPSAT_DETERMINISTIC_PER_UNIT
    elif limit is not None:
        params.max_time_in_seconds = limit


def run_cpsat(model: cp_model.CpModel, budget: Budget, *, threads: int = 1, seed: int = 0,
              gap: float = 0.0, configure: Callable[[Any], None] | None = None,
              ) -> tuple[cp_model.CpSolver, Any]:
    """Solve ``model`` within ``budget``; returns the solver (for values, bound, times) and
    the status. ``configure`` may adjust further parameters (it gets
    ``solver.parameters``). The budget is charged with the deterministic time used."""
    solver = cp_model.CpSolver()
    cpsat_parameters(solver, budget, threads=threads, seed=seed, gap=gap)
    if configure is not None:
        configure(solver.parameters)
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["status"] = solver.solve(model)
        except BaseException as exc:  # handed to the calling thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="cp-sat", daemon=True)
    try:
        worker.start()
        while worker.is_alive():
            worker.join(_POLL_S)
    except BaseException:
        # Ctrl-C (or SIGTERM raised as KeyboardInterrupt): stop the search, wait for the
        # solver to hand back (a stop asked for before the search began is asked again),
        # then let the interrupt continue up the stack. A second Ctrl-C while waiting does
        # not leave the solver running in a thread Python then abandons.
        _stop(solver, worker)
        raise
    if "error" in outcome:
        raise outcome["error"]
    budget.charge(float(solver.response_proto.deterministic_time)
                  / CPSAT_DETERMINISTIC_PER_UNIT)
    return solver, outcome["status"]


def _stop(solver: cp_model.CpSolver, worker: threading.Thread) -> None:
    """Stop the search and wait until the worker thread has ended."""
    while worker.ident is not None and worker.is_alive():
        try:
            solver.stop_search()
            worker.join(_POLL_S)
        except BaseException:  # another interrupt: keep stopping, the first is raised
            continue
