"""Non-preemptive ordering policies with the starvation guard (:class:`GuardedOrder`: SJF,
EDF), their queue kept from decision to decision and walked only where a job could start
(:mod:`hetsched.policies.baselines.walk`)."""

from __future__ import annotations

import math

from hetsched.core.records import Job
from hetsched.policies.baselines.common import start_in_order
from hetsched.policies.baselines.kept_queue import FeedReader, KeptOrder, StarvationGuard
from hetsched.policies.baselines.walk import kept_walk
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks
from hetsched.policies.starting import SpeedBook, types_worth_starting

__all__ = ["GuardedOrder"]


class GuardedOrder(PolicyHooks):
    """A non-preemptive ordering policy with backfilling and the starvation guard: pending
    jobs in the order of :meth:`rank` (promoted jobs first, by arrival), each on the
    fastest GPU type worth starting (:func:`types_worth_starting`); a promoted job that fits
    nowhere reserves its fastest type. Subclasses give ``name`` and :meth:`rank`."""

    name = "guarded-order"
    #: Events only: a non-preemptive order has nothing to do while nobody waits.
    round_s: float | None = None

    def __init__(self, *, starvation_factor: float = 8.0) -> None:
        self.speeds = SpeedBook()
        self.guard = StarvationGuard(starvation_factor)
        # The queue kept in order from decision to decision (kept_queue): a decision
        # costs time in what changed, not in the jobs waiting.
        self.reader = FeedReader()
        self.order = KeptOrder()

    def rank(self, state: ClusterState, job: Job) -> tuple[float, float, str]:
        """The order among jobs that are not promoted (smallest first)."""
        raise NotImplementedError

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event when nobody waits (only the guard's clock moves, and the
        call at the last boundary moves it as far)."""
        return -math.inf if state.pending else math.inf

    def decide(self, state: ClusterState) -> Decision:
        """Start the pending jobs that fit, in order: promoted jobs by arrival, then the
        others by :meth:`rank`."""
        changes = self.reader.read(state)
        promoted = self.guard.update(state, lambda job: self.speeds.predicted_s(state, job),
                                     changes)

        def rank(job: Job) -> tuple[int, tuple[float, float, str]]:
            return (1, self.rank(state, job))  # after every promoted job

        def steps(job: Job) -> float:
            return state.remaining.get(job.id, job.work)

        self.order.keep(state, changes if self.guard.followed else None, promoted,
                        self.guard.newly, self.reader.jobs, rank, _by_arrival, steps)
        if not state.pending or not state.has_free():
            return Decision()
        types = types_worth_starting(state, self.speeds, promoted)
        pool = state.pool()
        return start_in_order(state, kept_walk(state, self.order, types, pool), types,
                              reserves=lambda job: job.id in promoted, pool=pool)


def _by_arrival(job: Job) -> tuple[int, tuple[float, float, str]]:
    """A promoted job's place: before the others, by arrival."""
    return (0, (job.arrival, 0.0, job.id))
