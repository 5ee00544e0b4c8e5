"""Earliest deadline first."""

from __future__ import annotations

import math

from solver.baselines.common import (
    SpeedBook,
    StarvationGuard,
    start_in_order,
    types_worth_starting,
)
from solver.data import Job
from solver.rolling import ClusterState, Decision


class EarliestDeadlineFirst:
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

    def __init__(self, *, starvation_factor: float = 8.0) -> None:
        self.speeds = SpeedBook()
        self.guard = StarvationGuard(starvation_factor)

    def decide(self, state: ClusterState) -> Decision:
        """Start the pending jobs of earliest deadline that fit."""
        promoted = self.guard.update(state, lambda job: self.speeds.predicted_s(state, job))
        if not state.pending or not state.free:
            return Decision()

        def key(job: Job) -> tuple[int, float, float, str]:
            if job.id in promoted:
                return (0, job.arrival, 0.0, job.id)
            deadline = math.inf if job.deadline is None else job.deadline
            return (1, deadline, job.arrival, job.id)

        order = sorted(state.pending, key=key)
        return start_in_order(state, order, types_worth_starting(state, self.speeds, promoted),
                              reserves=lambda job: job.id in promoted)
