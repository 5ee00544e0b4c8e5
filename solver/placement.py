"""From per-node (or per-type) plans to concrete GPU ids.

A model that reasons about nodes ("job j holds c GPUs of node n during
[start, end)") leaves open *which* GPUs of the node it holds. Any plan that
never uses more GPUs of a node at once than the node has can be given concrete
GPUs that the job keeps for its whole run: the jobs' intervals, each repeated
``c`` times, form an interval graph whose largest clique is the node's peak use,
and an interval graph is coloured with as many colours as its largest clique by
handing out colours greedily in order of start time (:func:`place_on_nodes`).

:func:`left_shift` is the other realisation used by the formulations: given each
job's GPU set and the order in which jobs start, start every job as early as its
arrival and its GPUs allow, with its exact duration on the placement it actually
gets. No pulp or ortools here.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hetsched.data import Instance
from hetsched.result import Assignment, Schedule


@dataclass(frozen=True)
class NodeBooking:
    """Job ``job`` holds ``num_gpus`` GPUs of ``node`` from ``start`` until ``end``.

    ``start`` and ``end`` may be in any unit (seconds, or integer ticks for exact
    comparisons); ``end`` is when the GPUs are handed back, which may be later
    than the job's actual finish.
    """

    job: str
    node: str
    num_gpus: int
    start: float
    end: float


class PlacementError(ValueError):
    """A plan uses more GPUs of a node at some moment than the node has."""


def place_on_nodes(
    instance: Instance, bookings: Iterable[NodeBooking], *, tolerance: float = 0.0
) -> dict[str, tuple[str, ...]]:
    """Concrete GPU ids (lowest free index first) for every booking.

    A GPU handed back at ``end`` may be taken by a booking that starts at
    ``end - tolerance`` or later. Raises :class:`PlacementError` if at some start
    the node has fewer free GPUs than the booking needs, i.e. the bookings break
    the node's capacity.
    """
    by_node: dict[str, list[NodeBooking]] = defaultdict(list)
    for booking in bookings:
        by_node[booking.node].append(booking)
    gpus: dict[str, tuple[str, ...]] = {}
    for node_name, node_bookings in by_node.items():
        node = instance.cluster.node_by_name[node_name]
        free = list(node.gpu_ids())  # kept sorted by index
        busy: list[tuple[float, int, tuple[str, ...]]] = []  # (end, tie, gpu ids)
        order = sorted(node_bookings, key=lambda b: (b.start, b.end, b.job))
        for tie, booking in enumerate(order):
            while busy and busy[0][0] <= booking.start + tolerance:
                _, _, released = heapq.heappop(busy)
                free.extend(released)
            free.sort(key=lambda gid: instance.cluster.gpu_by_id[gid].index)
            if len(free) < booking.num_gpus:
                raise PlacementError(
                    f"node {node_name} has {len(free)} free GPUs at {booking.start:g} but job "
                    f"{booking.job} needs {booking.num_gpus}"
                )
            taken = tuple(free[: booking.num_gpus])
            del free[: booking.num_gpus]
            gpus[booking.job] = taken
            heapq.heappush(busy, (booking.end, tie, taken))
    return gpus


def left_shift(
    instance: Instance,
    sequence: Sequence[tuple[str, str, Sequence[str]]],
    *,
    not_before: dict[str, float] | None = None,
) -> Schedule:
    """Start each ``(job, gpu_type, gpu ids)`` of ``sequence``, in that order, at the
    earliest time its arrival, ``instance.now`` and its GPUs allow (seconds).

    A job never starts before a job that comes earlier in ``sequence`` on one of
    its GPUs has finished (no overtaking on a GPU); its finish is start + work /
    throughput of the placement its GPUs actually have. ``not_before`` gives
    optional extra earliest starts per job (s).
    """
    jobs = instance.job_by_id
    free: dict[str, float] = defaultdict(lambda: instance.now)
    assignments = []
    for job_id, gpu_type, gpu_ids in sequence:
        job = jobs[job_id]
        placement = instance.cluster.placement_of(gpu_ids)
        speed = instance.throughput.throughput(job.job_type, gpu_type, len(gpu_ids), placement)
        if speed <= 0:
            raise PlacementError(f"job {job_id} has no throughput on {len(gpu_ids)} x "
                                 f"{gpu_type} {placement}")
        start = max([job.arrival, instance.now, *(free[g] for g in gpu_ids)])
        if not_before is not None and job_id in not_before:
            start = max(start, not_before[job_id])
        finish = start + job.work / speed
        for g in gpu_ids:
            free[g] = finish
        assignments.append(Assignment(job_id, gpu_type, tuple(gpu_ids), start, finish))
    return Schedule(tuple(assignments))
