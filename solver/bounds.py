"""Lower bounds on what any schedule of a job set can achieve, to read benchmark figures
against the limit.

Every bound here holds for every policy the simulator can run (preemptive or not, any
placement, restart penalties or none): it relaxes away queueing, contention and
restarts, never the throughput a job can reach. Units: seconds; work in steps,
throughput in steps/s. Compute the bounds with the *measured* throughput (the
simulator's truth), not the fitted view the policies see: a job advances at measured
speed, so only measured speeds bound what happens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from solver.data import Cluster, Job, configurations
from solver.errors import InputError
from solver.throughput import ThroughputModel


@dataclass(frozen=True)
class Bounds:
    """Lower bounds (s) on the average JCT and the makespan of a job set on a cluster.

    ``makespan_s`` counts from the first arrival, as the replay's ``makespan_s`` does;
    it is the largest of its three components.
    """

    jobs: int
    #: mean over jobs of the isolated duration: each job alone on its fastest configuration
    avg_jct_s: float
    #: max(makespan_longest_job_s, makespan_capacity_s, makespan_tail_capacity_s)
    makespan_s: float
    #: max over jobs of (arrival - first arrival + isolated duration)
    makespan_longest_job_s: float
    #: least GPU-seconds of all jobs over the number of GPUs
    makespan_capacity_s: float
    #: max over arrival times t of (t - first arrival + least GPU-seconds of the jobs
    #: arriving at t or later over the number of GPUs)
    makespan_tail_capacity_s: float
    #: least GPU-seconds of all jobs (each at its best throughput per GPU)
    total_gpu_seconds: float
    gpus: int
    #: last arrival - first arrival
    arrival_span_s: float = 0.0

    @property
    def offered_load(self) -> float:
        """Least GPU-seconds over the GPU-seconds the cluster has while jobs arrive
        (``total_gpu_seconds / (gpus x arrival_span_s)``): above 1, no policy keeps up
        and queues grow whatever it does; ``inf`` when every job arrives at once."""
        if self.arrival_span_s <= 0:
            return math.inf
        return self.total_gpu_seconds / (self.gpus * self.arrival_span_s)

    def __post_init__(self) -> None:
        for name in ("avg_jct_s", "makespan_s", "makespan_longest_job_s",
                     "makespan_capacity_s", "makespan_tail_capacity_s", "total_gpu_seconds",
                     "arrival_span_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and value >= 0 and math.isfinite(value)):
                raise InputError("bad bound", path=name, value=value,
                                 expected="a finite number >= 0 (s)")
        if self.jobs < 1 or self.gpus < 1:
            raise InputError("bounds need jobs and GPUs", path="jobs",
                             value=(self.jobs, self.gpus), expected=">= 1 of each")
        if self.makespan_s + 1e-9 < max(self.makespan_longest_job_s, self.makespan_capacity_s,
                                        self.makespan_tail_capacity_s):
            raise InputError("makespan bound below one of its components", path="makespan_s",
                             value=self.makespan_s, expected="the largest component")

    def as_dict(self) -> dict[str, float | int]:
        """The bounds as ``bound_<name>`` columns (results.csv), and ``offered_load``."""
        columns: dict[str, float | int] = {f"bound_{name}": getattr(self, name) for name in (
            "avg_jct_s", "makespan_s", "makespan_longest_job_s", "makespan_capacity_s",
            "makespan_tail_capacity_s", "total_gpu_seconds")}
        columns["offered_load"] = self.offered_load
        return columns


def isolated_duration(job: Job, cluster: Cluster, throughput: ThroughputModel) -> float:
    """The job's duration (s) alone on the cluster: its work over the largest throughput of
    any configuration (allowed GPU type, allowed count, placement the cluster can give)
    with throughput > 0.

    It bounds the job's JCT from below: a job advances at the throughput of the GPUs it
    holds, which is at most this largest one at every moment, and only after its arrival;
    waiting, preemption and restart penalties only add time.
    """
    speeds = [c.throughput for c in configurations(cluster, throughput, job)]
    if not speeds:
        raise InputError("job cannot run on this cluster", path=f"job {job.id}",
                         value=f"{job.num_gpus} x {job.job_type}",
                         expected="a GPU type of the cluster with throughput > 0")
    return job.work / max(speeds)


def least_gpu_seconds(job: Job, cluster: Cluster, throughput: ThroughputModel) -> float:
    """The fewest GPU-seconds the job can use: its work over the best throughput per GPU
    (``throughput / num_gpus``) of any configuration.

    Valid whatever the schedule, even one that changes configurations: every second on
    a configuration with ``n`` GPUs costs ``n`` GPU-seconds and does at most
    ``n x (best throughput per GPU)`` steps, so ``work`` steps cost at least this much.
    """
    per_gpu = [c.throughput / c.num_gpus for c in configurations(cluster, throughput, job)]
    if not per_gpu:
        raise InputError("job cannot run on this cluster", path=f"job {job.id}",
                         value=f"{job.num_gpus} x {job.job_type}",
                         expected="a GPU type of the cluster with throughput > 0")
    return job.work / max(per_gpu)


def lower_bounds(jobs: Sequence[Job], cluster: Cluster, throughput: ThroughputModel) -> Bounds:
    """Lower bounds on the average JCT and the makespan of ``jobs`` on ``cluster``.

    * **Average JCT**: the mean of the isolated durations (:func:`isolated_duration`);
      each JCT is at least its job's, so the mean is at least their mean.
    * **Makespan, longest job**: job ``j`` cannot finish before
      ``arrival_j + isolated_j``, so the last finish, counted from the first arrival, is
      at least ``max_j(arrival_j - first arrival + isolated_j)``.
    * **Makespan, capacity**: the cluster gives at most ``G`` GPU-seconds per second
      (``G`` GPUs) and the jobs need at least ``sum_j least_gpu_seconds_j``
      (:func:`least_gpu_seconds`), so the makespan is at least their quotient.
    * **Makespan, tail capacity**: the same argument for the jobs arriving at ``t`` or
      later, which can use GPUs only after ``t``: the makespan is at least
      ``t - first arrival + (their least GPU-seconds) / G`` for every arrival time ``t``
      (``t`` = first arrival gives the capacity bound).

    ``throughput`` should be the measured one (the simulator's truth).
    """
    if not jobs:
        raise InputError("no jobs to bound", path="jobs", value=0, expected=">= 1 job")
    gpus = len(cluster.gpus)
    ordered = sorted(jobs, key=lambda j: (j.arrival, j.id))
    first = ordered[0].arrival
    isolated = [isolated_duration(job, cluster, throughput) for job in ordered]
    gpu_seconds = [least_gpu_seconds(job, cluster, throughput) for job in ordered]
    longest = max(job.arrival - first + d for job, d in zip(ordered, isolated, strict=True))
    total = math.fsum(gpu_seconds)
    # Tail sums over arrival times, latest first; equal arrivals share one tail.
    tail = 0.0
    tail_bound = 0.0
    for index in range(len(ordered) - 1, -1, -1):
        tail += gpu_seconds[index]
        if index == 0 or ordered[index - 1].arrival < ordered[index].arrival:
            tail_bound = max(tail_bound, ordered[index].arrival - first + tail / gpus)
    capacity = total / gpus
    return Bounds(
        jobs=len(ordered),
        avg_jct_s=math.fsum(isolated) / len(isolated),
        makespan_s=max(longest, capacity, tail_bound),
        makespan_longest_job_s=longest,
        makespan_capacity_s=capacity,
        makespan_tail_capacity_s=tail_bound,
        total_gpu_seconds=total,
        gpus=gpus,
        arrival_span_s=ordered[-1].arrival - first,
    )
