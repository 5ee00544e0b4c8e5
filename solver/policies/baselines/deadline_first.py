"""Earliest deadline first."""

from __future__ import annotations

import math

from hetsched.core.records import Job
from hetsched.policies.baselines.guarded import GuardedOrder
from hetsched.policies.rolling import ClusterState


class EarliestDeadlineFirst(GuardedOrder):
    """Non-preemptive EDF with backfilling.

    Pending jobs by deadline, earliest first; jobs without a deadline after them, by
    arrival. Each starts on the fastest GPU type (as the policy's throughput model says)
    with a free gang, or the next fastest; a job that fits nowhere is skipped. Starvation
    guard (jobs without a deadline, big gangs): a job that has waited
    ``starvation_factor`` times its predicted duration is promoted; promoted jobs go first
    in arrival order, and one that fits nowhere reserves its fastest GPU type (no later
    job starts there) until it fits.
    """

    name = "edf"

    def rank(self, state: ClusterState, job: Job) -> tuple[float, float, str]:
        """Deadline (none: last), then arrival."""
        return (math.inf if job.deadline is None else job.deadline, job.arrival, job.id)
