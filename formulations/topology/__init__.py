"""Topology-aware placement (after Amaral et al., SC 2017), solved exactly as a column
model in CP-SAT or PuLP (CBC, HiGHS). See docs/topology.md, "The placement model"."""

from __future__ import annotations

import logging
import time

from hetsched.core.records import Cluster
from hetsched.core.result import Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.topology.problem import (
    Gang,
    PlacementModel,
    build,
    fragmentation,
    placement_cost,
)
from hetsched.formulations.topology.solution import PlacementOutcome, from_placement

log = logging.getLogger(__name__)

BACKENDS = ("cpsat", "highs", "cbc", "scip")
#: The least wall time (s) worth handing a back-end: below it, building the model and
#: starting the solver would cost more than the placement could gain, and the hint is
#: returned. CBC runs as a child process (about 0.1 s to start and read its model).
MIN_SOLVE_S = {"cpsat": 0.02, "highs": 0.02, "scip": 0.05, "cbc": 0.3}


def place(cluster: Cluster, busy: set[str] | frozenset[str], gangs: tuple[Gang, ...], *,
          backend: str = "cpsat", budget: Budget | None = None, threads: int = 1,
          seed: int = 0, hint: dict[str, tuple[str, ...]] | None = None) -> PlacementOutcome:
    """Place every gang on free GPUs (not in ``busy``) within ``budget``: least
    communication cost, then fewest partly free nodes. With a ``hint`` (a feasible
    placement, e.g. first fit) the solver starts from it, and it is returned (status
    FEASIBLE) if the solver finds nothing in time or something worse, so a caller always
    gets a placement when one was known."""
    started = time.perf_counter()
    budget = budget or Budget.unlimited()
    left = budget.for_solver()
    if hint and not budget.deterministic and left is not None and \
            left < MIN_SOLVE_S.get(backend, 0.02):
        return _hint_outcome(cluster, busy, gangs, hint, backend, started,
                             f"no budget left for {backend} ({left:.3f} s): first fit kept")
    model = build(cluster, frozenset(busy), gangs)
    outcome: PlacementOutcome
    if backend == "cpsat":
        from hetsched.formulations.topology.cpsat import PlacementCpSat

        cp = PlacementCpSat(model)
        if hint:
            cp.hint(hint)
        outcome = cp.solve(budget, threads, seed)
    else:
        from hetsched.formulations.topology.milp import PlacementMilp

        milp = PlacementMilp(model)
        if hint:
            milp.hint(hint)
        outcome = milp.solve(backend, budget, threads, seed)
    if hint and outcome.status is not Status.INFEASIBLE:
        fallback = from_placement(model, hint, time.perf_counter() - started, backend, "")
        if not outcome.placement:
            log.warning("placement: %s returned no placement (%s); using the hint", backend,
                        outcome.message or outcome.status.value)
            fallback.message = f"{backend} found no placement in time; the hint is returned"
            return fallback
        if fallback.cost < outcome.cost - 1e-9:
            # A solver stopped by its time limit may hold an incumbent worse than the
            # hint: never return worse than what the caller already had.
            fallback.bound = outcome.bound
            fallback.message = f"{backend} stopped on a placement worse than the hint"
            return fallback
    return outcome


def _hint_outcome(cluster: Cluster, busy: set[str] | frozenset[str], gangs: tuple[Gang, ...],
                  hint: dict[str, tuple[str, ...]], backend: str, started: float,
                  message: str) -> PlacementOutcome:
    """The hint as an outcome (status TIME_LIMIT: no solver ran), without the model."""
    taken = set(busy) | {g for gpus in hint.values() for g in gpus}
    return PlacementOutcome(Status.TIME_LIMIT, dict(hint), placement_cost(cluster, gangs, hint),
                            None, fragmentation(cluster, taken),
                            time.perf_counter() - started, backend, message=message)


__all__ = ["BACKENDS", "Gang", "PlacementModel", "PlacementOutcome", "build", "fragmentation",
           "place"]
