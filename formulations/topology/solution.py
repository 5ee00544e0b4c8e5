"""Turning chosen columns into a placement, and what a placement solve returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from hetsched.core.result import Status
from hetsched.formulations.topology.problem import PlacementModel, fragmentation, placement_cost


@dataclass
class PlacementOutcome:
    """A placement (job -> GPU ids) with its communication cost (seconds per GB, recomputed
    from the graph), a proven lower bound on it, the fragmentation it leaves (partly free
    nodes), wall time and the back-end used."""

    status: Status
    placement: dict[str, tuple[str, ...]]
    cost: float
    bound: float | None
    fragmentation: int
    wall_s: float
    backend: str
    message: str = ""
    notes: list[str] = field(default_factory=list)


def decode(model: PlacementModel, chosen: list[int], status: Status, wall_s: float,
           backend: str) -> PlacementOutcome:
    """Hand the chosen whole columns of a class to its gangs in order, and join the pieces
    of spreading gangs. Raises ValueError if the columns do not form a placement (a
    solver's answer is checked, not trusted)."""
    placement: dict[str, tuple[str, ...]] = {}
    queues = {c: list(members) for c, members in enumerate(model.classes)}
    pieces: dict[int, list[str]] = {}
    for index in chosen:
        column = model.columns[index]
        if column.piece:
            pieces.setdefault(column.owner, []).extend(column.gpus)
        else:
            if not queues[column.owner]:
                raise ValueError(f"solution gives class {column.owner} more placements than "
                                 "it has gangs")
            gang = queues[column.owner].pop(0)
            placement[model.gangs[gang].job] = column.gpus
    for gang, gpus in pieces.items():
        placement[model.gangs[gang].job] = tuple(sorted(gpus))
    used = [g for gpus in placement.values() for g in gpus]
    if len(placement) != len(model.gangs) or len(used) != len(set(used)):
        raise ValueError("solution does not place every gang on distinct GPUs")
    busy = {g for node in model.cluster.nodes for g in node.gpu_ids()
            if g not in set(model.free.get(node.name, ()))}
    busy |= {g for gpus in placement.values() for g in gpus}
    cost = placement_cost(model.cluster, model.gangs, placement)
    return PlacementOutcome(status, placement, cost, None, fragmentation(model.cluster, busy),
                            wall_s, backend, notes=list(model.notes))


def from_placement(model: PlacementModel, placement: dict[str, tuple[str, ...]], wall_s: float,
                   backend: str, message: str) -> PlacementOutcome:
    """An outcome for a placement found elsewhere (a hint used as the fallback)."""
    busy = {g for node in model.cluster.nodes for g in node.gpu_ids()
            if g not in set(model.free.get(node.name, ()))}
    busy |= {g for gpus in placement.values() for g in gpus}
    return PlacementOutcome(Status.FEASIBLE, dict(placement),
                            placement_cost(model.cluster, model.gangs, placement), None,
                            fragmentation(model.cluster, busy), wall_s, backend,
                            message=message, notes=list(model.notes))
