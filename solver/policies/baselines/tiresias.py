"""Tiresias (Gu et al., NSDI 2019): discretised two-dimensional least attained service."""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from hetsched.core.records import Job
from hetsched.policies.baselines.common import cluster_order, preempt_in_order, victim_ranks
from hetsched.policies.baselines.kept_queue import FeedReader, KeptOrder
from hetsched.policies.baselines.walk import kept_walk, walked_running
from hetsched.policies.params import ROUND_S
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
                 promote_knob: float = 4.0, round_s: float = ROUND_S) -> None:
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
        # The queue kept from decision to decision (kept_queue): waiting jobs in order, and
        # (time, job) when each waiting job outside queue 0 starves.
        self.reader = FeedReader()
        self._finished: list[str] = []  # jobs finished since the last decision
        self.order = KeptOrder()
        self._due: list[tuple[float, str]] = []
        # A running job's queue is looked at again from this time on (when it could have
        # passed its next threshold; a pause only makes that later).
        self._check_at: dict[str, float] = {}

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
        for run in state.held().values():
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
        changes = self.reader.read(state)
        self._forget_finished()
        held = state.held()  # (without building the running jobs' records)
        running = held.keys()
        check_at = self._check_at
        for job_id, run in held.items():
            self._last_ran[job_id] = now
            if now >= check_at.get(job_id, -math.inf):
                self._place_running(run.job, len(run.gpus), attained, running, now)
        waiting = self.reader.jobs
        if changes is None or not self.order.can_follow(changes):
            # Read whole: every waiting job looked at, the order and the clocks anew.
            self._due = []
            for pending in state.pending:
                self._place(pending, attained, running, now)
            self.order.rebuild(state.pending, frozenset(), self._key, self._key, _no_steps,
                               state.pending_feed)
        else:
            # What changed only: the jobs that joined, then the promotions now due.
            for joined, job_id in changes:
                if joined is not None and waiting.get(job_id) is joined:
                    self._place(joined, attained, running, now)
            self.order.follow(changes, frozenset(), [], waiting, self._key, self._key,
                              _no_steps)
            self._promote_due(attained, now)
        if not state.pending:
            return Decision()
        items = walked_running(self.order, ((self._key(r.job, 0), r.job)
                                            for r in held.values()))
        ranks = {job.id: i for i, (_, job) in enumerate(items)}
        pool = state.pool(victim_ranks(state, ranks))
        return preempt_in_order(state, kept_walk(state, self.order, None, pool, items),
                                lambda job: cluster_order(state, job), ranks, pool)

    def on_finished(self, job: Job, now: float) -> None:
        """Forget the job at the next decision."""
        self._finished.append(job.id)

    def _forget_finished(self) -> None:
        for job_id in self._finished:
            for table in (self._base, self._queue, self._last_ran, self._check_at):
                table.pop(job_id, None)
        self._finished.clear()

    def _key(self, job: Job, waits: int = 1) -> tuple[int, int, float, float, str]:
        """A job's place: its queue, running jobs first, the time it entered the queue."""
        queue, entered = self._queue.get(job.id, (0, job.arrival))
        return (queue, waits, entered, job.arrival, job.id)

    def _place(self, job: Job, attained: Mapping[str, float], running: AbstractSet[str],
               now: float) -> None:
        """Put ``job`` in its queue now (a waiting job that starved: back to queue 0);
        a waiting job that may starve later gets its time in ``_due``."""
        due = self._queue_now(job, attained, running, now)
        if due is not None:
            heapq.heappush(self._due, (due, job.id))

    def _place_running(self, job: Job, gpus: int, attained: Mapping[str, float],
                       running: AbstractSet[str], now: float) -> None:
        """:meth:`_place` for a running job on ``gpus`` GPUs, and the time its queue is
        next looked at: when its attained service, growing by at most ``gpus`` GPU-seconds
        a second, could reach its next threshold (a little early: rounding)."""
        self._place(job, attained, running, now)
        service = attained.get(job.id, 0.0) - self._base.get(job.id, 0.0)
        queue = bisect.bisect_right(self.thresholds_gpu_s, service)
        if queue < len(self.thresholds_gpu_s):
            reach = now + (self.thresholds_gpu_s[queue] - service) / gpus
            self._check_at[job.id] = reach - 1e-6 * max(1.0, abs(reach))
        else:
            self._check_at[job.id] = math.inf

    def _queue_now(self, job: Job, attained: Mapping[str, float], running: AbstractSet[str],
                   now: float) -> float | None:
        """:meth:`_place`, returning the time a waiting job starves (``None``: never, or
        now: it went back to queue 0)."""
        job_id = job.id
        service = attained.get(job_id, 0.0) - self._base.get(job_id, 0.0)
        queue = bisect.bisect_right(self.thresholds_gpu_s, service)
        due = None
        if job_id not in running and queue > 0 and job_id in self._last_ran:
            ran_s = service / job.num_gpus
            last = self._last_ran[job_id]
            if now - last >= self.promote_knob * ran_s:
                self._base[job_id] = attained.get(job_id, 0.0)
                self._queue[job_id] = (0, now)
                self._check_at.pop(job_id, None)  # its service starts again from 0
                self.promotions += 1
                return None
            due = last + self.promote_knob * ran_s
        if self._queue.get(job_id, (None, 0.0))[0] != queue:
            self._queue[job_id] = (queue, job.arrival if job_id not in self._queue else now)
        return due

    def _promote_due(self, attained: Mapping[str, float], now: float) -> None:
        """Look again, as every waiting job is looked at when read whole, at the waiting
        jobs whose time in ``_due`` has come (a little early: rounding), and move those
        that went back to queue 0 in the order."""
        heap = self._due
        slack = 1e-6 * max(1.0, abs(now))
        waiting = self.reader.jobs
        come: dict[str, Job] = {}
        while heap and heap[0][0] <= now + slack:
            job_id = heapq.heappop(heap)[1]
            found = waiting.get(job_id)
            if found is not None:  # (else it started since)
                come[job_id] = found
        for job in come.values():
            before = self._queue.get(job.id)
            due = self._queue_now(job, attained, set(), now)
            if due is not None:
                heapq.heappush(heap, (due, job.id))
            if self._queue.get(job.id) != before:
                self.order.follow([(None, job.id), (job, job.id)], frozenset(), [], waiting,
                                  self._key, self._key, _no_steps)


def _no_steps(job: Job) -> float:
    """Tiresias weighs no steps: its kinds' rules admit any."""
    return 0.0
