"""FIFO: a greedy list scheduler, first-fit over nodes, earliest start.

Jobs are taken in arrival order (ties by id). Starts never go backwards: a job
starts no earlier than the job before it (strict FIFO, no backfilling). Each job
gets its requested gang size; among the candidate GPU sets (packed on each node
of each GPU type in cluster order, then spread over the earliest-free GPUs of
each type) it takes the one that can start first, ties going to the first
candidate in that order (first fit). It ignores deadlines and which GPU type is
faster: the heterogeneity-agnostic baseline.
"""

from __future__ import annotations

import bisect
from typing import ClassVar

from hetsched.allocation.realise import SerialSchedule
from hetsched.core.records import Instance, Job
from hetsched.core.result import Result, Schedule, Status
from hetsched.core.throughput import Placement
from hetsched.policies.planner import SolveOptions


class FifoPlanner:
    """First-in first-out list scheduling."""

    name: ClassVar[str] = "fifo"
    backends: ClassVar[tuple[str, ...]] = ()
    default_time_limit_s: ClassVar[float | None] = None
    replan_preemptive: ClassVar[bool] = False

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job in arrival order; the objective is total weighted completion
        time (s)."""
        schedule = fifo_schedule(instance)
        jobs = instance.job_by_id
        objective = sum(jobs[a.job].weight * (a.finish - jobs[a.job].arrival) for a in schedule)
        return Result(Status.FEASIBLE, objective, None, 0.0, schedule, self.name)

    def unrunnable(self, instance: Instance) -> dict[str, str]:
        """None: FIFO runs every job the instance accepts."""
        return {}


def fifo_schedule(instance: Instance) -> Schedule:
    """The FIFO schedule of every job of ``instance``.

    Candidates, in first-fit order: the ``count`` GPUs of each node (of an allowed type
    and big enough) that are free first, then the ``count`` GPUs of each allowed type that
    are free first (spread, or packed if they happen to share a node); the one that starts
    first wins, ties to the earlier candidate. Each node and each type keeps its GPUs
    sorted by (free time, position), updated only for the GPUs a job takes, and
    throughputs are cached, so a job costs time in the nodes, not in the GPUs."""
    cluster = instance.cluster
    now = instance.now
    node_free = [(node, [(now, k, gid) for k, gid in enumerate(node.gpu_ids())])
                 for node in cluster.nodes]
    type_free = {t: [(now, k, g.id) for k, g in enumerate(
        g for g in cluster.gpus if g.gpu_type == t)] for t in cluster.type_names}
    where: dict[str, list[tuple[list[tuple[float, int, str]], tuple[float, int, str]]]] = {}
    for _, entries in node_free:
        for entry in entries:
            where[entry[2]] = [(entries, entry)]
    for entries in type_free.values():
        for entry in entries:
            where[entry[2]].append((entries, entry))
    speeds: dict[tuple[str, str, int, Placement], float] = {}
    node_of = {g.id: g.node for g in cluster.gpus}

    def speed(job: Job, gpu_type: str, count: int, placement: Placement) -> float:
        key = (job.job_type, gpu_type, count, placement)
        value = speeds.get(key)
        if value is None:
            value = speeds[key] = instance.throughput.throughput(*key)
        return value

    last_start = now
    serial = SerialSchedule(instance)  # the timing of each job on the GPUs it gets
    for job in sorted(instance.jobs, key=lambda j: (j.arrival, j.id)):
        release = max(job.arrival, now, last_start)
        count = job.num_gpus
        best: tuple[float, str, list[tuple[float, int, str]], float] | None = None
        candidates: list[tuple[str, list[tuple[float, int, str]], Placement | None]] = [
            (node.gpu_type, entries, Placement.PACKED) for node, entries in node_free
            if node.num_gpus >= count and job.may_use(node.gpu_type)
            and job.may_use_node(node.name)]
        for gpu_type, entries in type_free.items():
            if job.allowed_nodes is not None:  # the type's GPUs on its nodes, same order
                entries = [e for e in entries if job.may_use_node(node_of[e[2]])]
            if job.may_use(gpu_type) and len(entries) >= count:
                candidates.append((gpu_type, entries, None))
        for gpu_type, entries, placement in candidates:  # in rank order: ties keep the first
            start = max(release, entries[count - 1][0])
            if best is not None and start >= best[0]:
                continue
            if placement is None:
                placement = cluster.placement_of(entry[2] for entry in entries[:count])
            throughput = speed(job, gpu_type, count, placement)
            if throughput > 0:
                best = (start, gpu_type, entries, throughput)
        if best is None:  # Instance validation guarantees some configuration exists.
            raise RuntimeError(f"no GPU set can run job {job.id}")
        start, gpu_type, entries, throughput = best
        chosen = [entry[2] for entry in entries[:count]]
        assignment = serial.place(job.id, gpu_type, chosen, not_before=last_start,
                                  speed=throughput)
        for gid in chosen:
            for index, (entries, entry) in enumerate(where[gid]):
                entries.remove(entry)
                moved = (assignment.finish, entry[1], gid)
                bisect.insort(entries, moved)
                where[gid][index] = (entries, moved)
        last_start = start
    return serial.schedule()
