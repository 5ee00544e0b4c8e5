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

from typing import ClassVar

from solver.data import Instance, Job
from solver.policies import SolveOptions
from solver.result import Assignment, Result, Schedule, Status


class FifoPolicy:
    """First-in first-out list scheduling."""

    name: ClassVar[str] = "fifo"
    backends: ClassVar[tuple[str, ...]] = ()
    default_time_limit_s: ClassVar[float | None] = None

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job in arrival order; the objective is total weighted completion
        time (s)."""
        schedule = fifo_schedule(instance)
        jobs = instance.job_by_id
        objective = sum(jobs[a.job].weight * (a.finish - jobs[a.job].arrival) for a in schedule)
        return Result(Status.FEASIBLE, objective, None, 0.0, schedule, self.name)


def _candidates(
    instance: Instance, job: Job, free: dict[str, float]
) -> list[tuple[str, list[str]]]:
    """(GPU type, GPU ids) sets that could take ``job``'s gang, in first-fit order."""
    cluster = instance.cluster
    count = job.num_gpus
    found: list[tuple[str, list[str]]] = []
    for node in cluster.nodes:
        if node.num_gpus >= count and job.may_use(node.gpu_type):
            ids = sorted(node.gpu_ids(), key=lambda g: free[g])[:count]
            found.append((node.gpu_type, ids))
    for gpu_type in cluster.type_names:
        if not job.may_use(gpu_type):
            continue
        ids = sorted((g.id for g in cluster.gpus if g.gpu_type == gpu_type), key=lambda g: free[g])
        if len(ids) >= count:
            found.append((gpu_type, ids[:count]))
    return found


def fifo_schedule(instance: Instance) -> Schedule:
    """The FIFO schedule of every job of ``instance``."""
    cluster = instance.cluster
    free = {gpu.id: instance.now for gpu in cluster.gpus}
    last_start = instance.now
    assignments = []
    for job in sorted(instance.jobs, key=lambda j: (j.arrival, j.id)):
        release = max(job.arrival, instance.now, last_start)
        best: tuple[float, int, Assignment] | None = None
        for rank, (gpu_type, ids) in enumerate(_candidates(instance, job, free)):
            placement = cluster.placement_of(ids)
            speed = instance.throughput.throughput(job.job_type, gpu_type, len(ids), placement)
            if speed <= 0:
                continue
            start = max([release, *(free[g] for g in ids)])
            candidate = Assignment(job.id, gpu_type, tuple(ids), start, start + job.work / speed)
            if best is None or (start, rank) < best[:2]:
                best = (start, rank, candidate)
        if best is None:  # Instance validation guarantees some configuration exists.
            raise RuntimeError(f"no GPU set can run job {job.id}")
        chosen = best[2]
        for g in chosen.gpus:
            free[g] = chosen.finish
        last_start = chosen.start
        assignments.append(chosen)
    return Schedule(tuple(assignments))
