"""Tiresias (Gu et al., NSDI 2019): discretised two-dimensional least attained service."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence

from hetsched.core.records import Job
from hetsched.policies.baselines.common import cluster_order, preempt_in_order
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks


class Tiresias(PolicyHooks):
    """Discretised 2D-LAS: priority queues on attained GPU time, no duration knowledge.

    A job's attained service is its GPU-seconds (GPUs held x time, the restore after a
    preemption included) since it arrived or was last promoted. It sits in queue ``q`` =
    the number of ``thresholds_gpu_s`` it has passed (default 1 and 10 GPU-hours: three
    queues). Queues are served in order; within a queue running jobs come first, then
    pending jobs first in first out (by the time they entered the queue). Lower-queue
    running jobs are preempted when a higher-priority job starts on their GPUs. GPU types
    are taken in cluster order (Tiresias knows no heterogeneity), packed on the fullest
    node that holds the gang, else spread.

    Starvation guard (Tiresias' PROMOTEKNOB): a pending job outside queue 0 whose time
    waiting since it last ran reaches ``promote_knob`` times its run time since its last
    promotion goes back to queue 0 with its attained service reset.

    Decisions at arrivals, completions and every ``round_s`` while any job runs or waits
    (queue changes between them are seen at the next one; a boundary where nobody waits
    only updates the queues: Tiresias does not migrate).
    """

    name = "tiresias"

    def __init__(self, *, thresholds_gpu_s: Sequence[float] = (3600.0, 36000.0),
                 promote_knob: float = 4.0, round_s: float = 360.0) -> None:
        limits = list(thresholds_gpu_s)
        if any(b <= a for a, b in itertools.pairwise(limits)) or \
                any(t <= 0 for t in limits):
            raise ValueError(f"thresholds must be positive and increasing, got {limits}")
        if not promote_knob > 0 or not round_s > 0:
            raise ValueError("promote_knob and round_s must be > 0")
        self.thresholds_gpu_s = tuple(limits)
        self.promote_knob = promote_knob
        self.round_s = round_s
        self._base: dict[str, float] = {}  # attained at the last promotion
        self._queue: dict[str, tuple[int, float]] = {}  # queue, time it entered it
        self._last_ran: dict[str, float] = {}
        self.promotions = 0

    def queue_of(self, job_id: str) -> int:
        """The queue a job is in now (0 is the highest priority)."""
        return self._queue.get(job_id, (0, 0.0))[0]

    def quiet_until(self, state: ClusterState) -> float:
        """When nobody waits: 1 s before the first running job's attained service reaches
        its next threshold (it grows by its GPUs per second, the restore included), so
        its queue, and the time it entered it, change at the same call as with a call at
        every boundary. Before that a call only sets ``_last_ran`` to now, which the
        call at the last boundary sets too. With jobs waiting: no promise."""
        if state.pending:
            return -math.inf
        until = math.inf
        for run in state.running:
            service = state.attained.get(run.job.id, 0.0) - self._base.get(run.job.id, 0.0)
            queue = bisect.bisect_right(self.thresholds_gpu_s, service)
            if queue < len(self.thresholds_gpu_s):
                reach = state.now + (self.thresholds_gpu_s[queue] - service) / len(run.gpus)
                until = min(until, reach - 1.0)
        return until

    def decide(self, state: ClusterState) -> Decision:
        """Serve the queues in order, preempting lower queues."""
        now = state.now
        attained = state.attained  # GPU-seconds up to now, restores included
        for run in state.running:
            self._last_ran[run.job.id] = now
        alive = {job.id for job in state.pending} | {r.job.id for r in state.running}
        for table in (self._base, self._queue, self._last_ran):
            for job_id in [j for j in table if j not in alive]:
                del table[job_id]
        jobs = [*state.pending, *(r.job for r in state.running)]
        running = {r.job.id for r in state.running}
        for job in jobs:
            service = attained.get(job.id, 0.0) - self._base.get(job.id, 0.0)
            queue = bisect.bisect_right(self.thresholds_gpu_s, service)
            if job.id not in running and queue > 0 and job.id in self._last_ran:
                ran_s = service / job.num_gpus
                if now - self._last_ran[job.id] >= self.promote_knob * ran_s:
                    self._base[job.id] = attained.get(job.id, 0.0)
                    self._queue[job.id] = (0, now)
                    self.promotions += 1
                    continue
            if self._queue.get(job.id, (None, 0.0))[0] != queue:
                self._queue[job.id] = (queue, job.arrival if job.id not in self._queue
                                       else now)
        if not state.pending:
            return Decision()

        def key(job: Job) -> tuple[int, int, float, float, str]:
            queue, entered = self._queue[job.id]
            return (queue, 0 if job.id in running else 1, entered, job.arrival, job.id)

        order = sorted(jobs, key=key)
        return preempt_in_order(state, order, lambda job: cluster_order(state, job))
