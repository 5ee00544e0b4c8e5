"""Topology-aware placement (after Amaral et al., SC 2017), solved exactly as a column
model in CP-SAT or PuLP (CBC, HiGHS). See docs/formulations.md, "topology"."""

from __future__ import annotations

import logging
import time

from formulations.topology.problem import Gang, PlacementModel, build, fragmentation
from formulations.topology.solution import PlacementOutcome, from_placement
from solver.data import Cluster
from solver.result import Status

log = logging.getLogger(__name__)

BACKENDS = ("cpsat", "cbc", "highs")


def place(cluster: Cluster, busy: set[str] | frozenset[str], gangs: tuple[Gang, ...], *,
          backend: str = "cpsat", time_limit_s: float | None = None, threads: int = 1,
          seed: int = 0, hint: dict[str, tuple[str, ...]] | None = None) -> PlacementOutcome:
    """Place every gang on free GPUs (not in ``busy``): least communication cost, then
    fewest partly free nodes. With a ``hint`` (a feasible placement, e.g. first fit) the
    solver starts from it, and it is returned (status FEASIBLE) if the solver finds
    nothing in time, so a caller always gets a placement when one was known."""
    started = time.perf_counter()
    model = build(cluster, frozenset(busy), gangs)
    outcome: PlacementOutcome
    if backend == "cpsat":
        from formulations.topology.cpsat import PlacementCpSat

        cp = PlacementCpSat(model)
        if hint:
            cp.hint(hint)
        outcome = cp.solve(time_limit_s, threads, seed)
    else:
        from formulations.topology.milp import PlacementMilp

        milp = PlacementMilp(model)
        if hint:
            milp.hint(hint)
        outcome = milp.solve(backend, time_limit_s, threads)
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


__all__ = ["BACKENDS", "Gang", "PlacementModel", "PlacementOutcome", "build", "fragmentation",
           "place"]
