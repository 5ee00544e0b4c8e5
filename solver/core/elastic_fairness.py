"""Finish-time fairness of elastic jobs as Sia measures it: each job's completion time
over its time alone on its fair share of the GPUs, of each type in turn.

Sia (SOSP'23; its artifact's ``sia-simulator/ftf_simulator.py``) defines a job's
isolated time from its contention ``N_avg`` (the average number of active jobs over its
life, :func:`~hetsched.core.fairness.average_contention`) and the cluster's ``C`` GPUs:

* its fair share is ``v = C / N_avg`` GPUs (``generate_workload_jobs``);
* on each GPU type ``t`` the job runs alone, elastic, on at most ``floor(v)`` and at most
  ``ceil(v)`` GPUs of ``t`` (at least 1, at most the type's GPUs), and its time on ``v``
  is interpolated linearly between the two; under 1 GPU, its time on one GPU over ``v``
  (``interpolate_jct``);
* the isolated time is the mean over the types it can run on, weighted by each type's
  GPUs (``combine_cluster_jcts``), and ``rho = JCT / isolated``.

Sia runs each isolated job through its simulator under its own policy, so its isolated
time includes the bootstrap's growth and the re-scales on the way; here the job alone
runs each epoch at its best goodput with at most that many GPUs (:func:`alone_seconds`),
after one start of ``start_s`` seconds: an isolated time no longer than Sia's, so a rho
no smaller. The same definition serves both simulators' schedules (it needs only each
job's arrival and finish).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from hetsched.core.cluster import Cluster
from hetsched.core.fairness import average_contention
from hetsched.core.records import Job
from hetsched.core.throughput import (
    Placement,
    ThroughputModel,
    speed_change_after,
    throughput_after,
)


class AloneTimes:
    """Seconds a job of a type takes alone on at most ``n`` GPUs of a GPU type, each
    epoch at its best speed there (see the module); kept per (job type, GPU type)."""

    def __init__(self, cluster: Cluster, model: ThroughputModel) -> None:
        self.cluster, self.model = cluster, model
        #: (job type, GPU type) -> (epoch starts, [epoch, n] best steps/s with <= n GPUs)
        self._profiles: dict[tuple[str, str], tuple[list[float], npt.NDArray[np.float64]]] = {}

    def seconds(self, job: Job, gpu_type: str, limit: int) -> float:
        """``job``'s seconds alone on at most ``limit`` GPUs of ``gpu_type`` (``inf``
        where it cannot run)."""
        starts, best = self._profile(job, gpu_type)
        column = min(limit, best.shape[1] - 1)
        total, ends = 0.0, [*starts[1:], math.inf]
        for start, end, speed in zip(starts, ends, best[:, column], strict=True):
            if start >= job.work:
                break
            if speed <= 0:
                return math.inf
            total += (min(end, job.work) - start) / speed
        return total

    def _profile(self, job: Job, gpu_type: str
                 ) -> tuple[list[float], npt.NDArray[np.float64]]:
        key = (job.job_type, gpu_type)
        found = self._profiles.get(key)
        if found is not None and (found[0][-1] >= job.work or
                                  speed_change_after(self.model, job.job_type,
                                                     found[0][-1]) is None):
            return found
        capacity = self.cluster.num_gpus(gpu_type)
        counts = [n for n in job.gpu_counts if n <= capacity]
        starts: list[float] = [0.0]
        while True:
            following = speed_change_after(self.model, job.job_type, starts[-1])
            if following is None or following <= starts[-1] or starts[-1] >= job.work:
                break
            starts.append(following)
        best = np.zeros((len(starts), capacity + 1))
        for row, done in enumerate(starts):
            for n in counts:
                best[row, n] = max(throughput_after(self.model, job.job_type, gpu_type, n,
                                                    placement, done)
                                   for placement in Placement)
        best = np.maximum.accumulate(best, axis=1)
        self._profiles[key] = (starts, best)
        return starts, best


def share_seconds(job: Job, share: float, cluster: Cluster, alone: AloneTimes,
                  start_s: float) -> float:
    """``job``'s isolated seconds on ``share`` GPUs (Sia's rule, see the module):
    ``inf`` where it can run on no type."""
    times, weights = [], []
    for gpu_type in cluster.type_names:
        if not job.may_use(gpu_type):
            continue
        if share < 1:
            seconds = alone.seconds(job, gpu_type, 1) / share
        else:
            low, high = max(math.floor(share), 1), max(math.ceil(share), 1)
            seconds = alone.seconds(job, gpu_type, low)
            if high > low:
                seconds += (alone.seconds(job, gpu_type, high) - seconds) * (share - low)
        if math.isfinite(seconds):
            times.append(seconds + start_s)
            weights.append(cluster.num_gpus(gpu_type))
    if not times:
        return math.inf
    return float(np.average(times, weights=weights))


def elastic_finish_time_fairness(jobs: Iterable[Job], finish: Mapping[str, float],
                                 cluster: Cluster, model: ThroughputModel, *,
                                 start_s: float = 0.0) -> dict[str, float]:
    """Each finished job's rho by Sia's rule (see the module): job id -> rho, for the jobs
    of ``finish`` (job id -> finish time, s) that can run somewhere; ``start_s`` the
    seconds of its one start alone. Jobs that did not finish count as active to the
    end."""
    listed = list(jobs)
    contention = average_contention(
        {job.id: (job.arrival, finish.get(job.id, math.inf)) for job in listed})
    total = len(cluster.gpus)
    alone = AloneTimes(cluster, model)
    rho: dict[str, float] = {}
    for job in listed:
        if job.id not in contention:
            continue
        isolated = share_seconds(job, total / contention[job.id], cluster, alone, start_s)
        if math.isfinite(isolated) and isolated > 0:
            rho[job.id] = (finish[job.id] - job.arrival) / isolated
    return rho
