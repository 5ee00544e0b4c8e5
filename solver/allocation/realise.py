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

from hetsched.core.records import Instance
from hetsched.core.result import Assignment, Schedule


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


class SerialSchedule:
    """Serial schedule generation, written once: jobs placed one after another on given
    GPUs, each starting as soon as it has arrived, ``instance.now`` has come, every GPU it
    takes is free and any earliest start the caller adds has passed; it runs for its work
    over the throughput of the placement its GPUs have. FIFO, left shifts of a model's
    sequence and AlloX's decoding all place jobs through :meth:`place`."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.jobs = instance.job_by_id
        self._free: dict[str, float] = {}
        self.assignments: list[Assignment] = []

    def free_at(self, gpu: str) -> float:
        """When ``gpu`` is free (s): ``instance.now`` until a placed job holds it."""
        return self._free.get(gpu, self.instance.now)

    def place(self, job_id: str, gpu_type: str, gpus: Sequence[str],
              not_before: float | None = None, speed: float | None = None) -> Assignment:
        """Place ``job_id`` on ``gpus`` (of ``gpu_type``) at its earliest start; ``speed``
        (steps/s) when the caller has it, else the instance's throughput of the
        placement."""
        job = self.jobs[job_id]
        if speed is None:
            placement = self.instance.cluster.placement_of(gpus)
            speed = self.instance.throughput.throughput(job.job_type, gpu_type, len(gpus),
                                                        placement)
            if speed <= 0:
                raise PlacementError(f"job {job_id} has no throughput on {len(gpus)} x "
                                     f"{gpu_type} {placement}")
        start = max([job.arrival, self.instance.now, *(self.free_at(g) for g in gpus)])
        if not_before is not None:
            start = max(start, not_before)
        finish = start + job.work / speed
        for g in gpus:
            self._free[g] = finish
        assignment = Assignment(job_id, gpu_type, tuple(gpus), start, finish)
        self.assignments.append(assignment)
        return assignment

    def schedule(self) -> Schedule:
        """Every job placed so far."""
        return Schedule(tuple(self.assignments))


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
    serial = SerialSchedule(instance)
    for job_id, gpu_type, gpu_ids in sequence:
        serial.place(job_id, gpu_type, gpu_ids,
                     not_before=None if not_before is None else not_before.get(job_id))
    return serial.schedule()
