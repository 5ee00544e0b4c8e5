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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, Job, configurations
from hetsched.core.throughput import ThroughputModel


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
    #: least GPU-seconds of all jobs over the number of usable GPUs
    makespan_capacity_s: float
    #: max over arrival times t of (t - first arrival + least GPU-seconds of the jobs
    #: arriving at t or later over the number of usable GPUs)
    makespan_tail_capacity_s: float
    #: least GPU-seconds of all jobs (each at its best throughput per GPU)
    total_gpu_seconds: float
    #: every GPU of the cluster
    gpus: int
    #: last arrival - first arrival
    arrival_span_s: float = 0.0
    #: GPUs of a type some job can run on (:func:`usable_gpus`); 0 means ``gpus``
    usable_gpus: int = 0

    @property
    def offered_load(self) -> float:
        """Least GPU-seconds over the GPU-seconds the usable GPUs have while jobs arrive
        (``total_gpu_seconds / (usable_gpus x arrival_span_s)``): above 1, no policy keeps
        up and queues grow whatever it does; ``inf`` when every job arrives at once."""
        if self.arrival_span_s <= 0:
            return math.inf
        return self.total_gpu_seconds / (self.usable_gpus * self.arrival_span_s)

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
        if self.usable_gpus == 0:
            object.__setattr__(self, "usable_gpus", self.gpus)
        if not 1 <= self.usable_gpus <= self.gpus:
            raise InputError("bad number of usable GPUs", path="usable_gpus",
                             value=self.usable_gpus, expected=f"1 to {self.gpus}")
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
    A job asking for a share ``s`` of one GPU holds ``s`` GPU-seconds a second, at most
    at its throughput alone (co-runners only slow it): ``s`` times as much.
    """
    per_gpu = [c.throughput / c.num_gpus for c in configurations(cluster, throughput, job)]
    if not per_gpu:
        raise InputError("job cannot run on this cluster", path=f"job {job.id}",
                         value=f"{job.num_gpus} x {job.job_type}",
                         expected="a GPU type of the cluster with throughput > 0")
    return job.share * job.work / max(per_gpu)


def usable_gpu_types(jobs: Iterable[Job], cluster: Cluster,
                     throughput: ThroughputModel) -> tuple[str, ...]:
    """The GPU types (cluster order) on which some job of ``jobs`` has a configuration with
    throughput > 0 (:func:`hetsched.core.records.configurations`; jobs alike are looked at once)."""
    usable: set[str] = set()
    seen: set[tuple[str, tuple[int, ...], tuple[str, ...] | None]] = set()
    for job in jobs:
        key = (job.job_type, job.gpu_counts, job.allowed_gpu_types)
        if key in seen:
            continue
        seen.add(key)
        usable.update(c.gpu_type for c in configurations(cluster, throughput, job))
        if len(usable) == len(cluster.type_names):
            break
    return tuple(t for t in cluster.type_names if t in usable)


def usable_gpus(jobs: Iterable[Job], cluster: Cluster, throughput: ThroughputModel) -> int:
    """How many GPUs of the cluster some job of ``jobs`` can use (:func:`usable_gpu_types`):
    a GPU of another type never runs a job, so it counts neither in the capacity bounds
    nor in utilisation."""
    return sum(cluster.num_gpus(t) for t in usable_gpu_types(jobs, cluster, throughput))


def lower_bounds(jobs: Sequence[Job], cluster: Cluster, throughput: ThroughputModel) -> Bounds:
    """Lower bounds on the average JCT and the makespan of ``jobs`` on ``cluster``.

    * **Average JCT**: the mean of the isolated durations (:func:`isolated_duration`);
      each JCT is at least its job's, so the mean is at least their mean.
    * **Makespan, longest job**: job ``j`` cannot finish before
      ``arrival_j + isolated_j``, so the last finish, counted from the first arrival, is
      at least ``max_j(arrival_j - first arrival + isolated_j)``.
    * **Makespan, capacity**: the cluster gives the jobs at most ``G`` GPU-seconds per
      second (``G`` usable GPUs, :func:`usable_gpus`: a GPU of a type no job can run on
      never runs one) and the jobs need at least ``sum_j least_gpu_seconds_j``
      (:func:`least_gpu_seconds`), so the makespan is at least their quotient.
    * **Makespan, tail capacity**: the same argument for the jobs arriving at ``t`` or
      later, which can use GPUs only after ``t``: the makespan is at least
      ``t - first arrival + (their least GPU-seconds) / G`` for every arrival time ``t``
      (``t`` = first arrival gives the capacity bound).

    ``throughput`` should be the measured one (the simulator's truth).
    """
    if not jobs:
        raise InputError("no jobs to bound", path="jobs", value=0, expected=">= 1 job")
    ordered = sorted(jobs, key=lambda j: (j.arrival, j.id))
    first = ordered[0].arrival
    isolated = [isolated_duration(job, cluster, throughput) for job in ordered]
    gpu_seconds = [least_gpu_seconds(job, cluster, throughput) for job in ordered]
    gpus = usable_gpus(ordered, cluster, throughput)  # >= 1: every job can run somewhere
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
        gpus=len(cluster.gpus),
        arrival_span_s=ordered[-1].arrival - first,
        usable_gpus=gpus,
    )
