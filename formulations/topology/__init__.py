"""Topology-aware placement (after Amaral et al., SC 2017), solved exactly as a column
model in CP-SAT or PuLP (CBC, HiGHS). See docs/formulations.md, "topology"."""

from __future__ import annotations

from formulations.topology.problem import Gang, PlacementModel, build, fragmentation
from formulations.topology.solution import PlacementOutcome
from solver.data import Cluster

BACKENDS = ("cpsat", "cbc", "highs")


def place(cluster: Cluster, busy: set[str] | frozenset[str], gangs: tuple[Gang, ...], *,
          backend: str = "cpsat", time_limit_s: float | None = None, threads: int = 1,
          seed: int = 0, hint: dict[str, tuple[str, ...]] | None = None) -> PlacementOutcome:
    """Place every gang on free GPUs (not in ``busy``): least communication cost, then
    fewest partly free nodes."""
    model = build(cluster, frozenset(busy), gangs)
    if backend == "cpsat":
        from formulations.topology.cpsat import PlacementCpSat

        cp = PlacementCpSat(model)
        if hint:
            cp.hint(hint)
        return cp.solve(time_limit_s, threads, seed)
    from formulations.topology.milp import PlacementMilp

    milp = PlacementMilp(model)
    if hint:
        milp.hint(hint)
    return milp.solve(backend, time_limit_s, threads)


__all__ = ["BACKENDS", "Gang", "PlacementModel", "PlacementOutcome", "build", "fragmentation",
           "place"]
