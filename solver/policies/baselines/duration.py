"""Shortest job first and quasi-shortest service first (non-preemptive), and shortest
remaining time first (preemptive), on predicted durations: remaining steps over the job's
fastest configuration in the throughput model the policy sees (the fitted one in a
replay), the steps being the truth or the replay's estimates (``--knowledge``,
:mod:`hetsched.knowledge`)."""

from __future__ import annotations

import math

from hetsched.core.records import Job
from hetsched.policies.baselines.common import (
    RESTART_PENALTY_S,
    FeedReader,
    KeptOrder,
    SpeedBook,
    StarvationGuard,
    preempt_in_order,
    types_worth_starting,
    victim_ranks,
)
from hetsched.policies.baselines.guarded import GuardedOrder
from hetsched.policies.baselines.walk import kept_walk, walked_running
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks


class ShortestJobFirst(GuardedOrder):
    """Non-preemptive SJF with backfilling.

    Pending jobs in order of predicted duration (remaining steps / fastest steps/s at the
    requested gang size); each starts on the fastest GPU type with a free gang (packed if
    a node holds it, else spread), or the next fastest; a job that fits nowhere is
    skipped (backfilling). Starvation guard: a job that has waited ``starvation_factor``
    times its predicted duration is promoted; promoted jobs go first in arrival order, and
    one that fits nowhere reserves its fastest GPU type (no later job starts there) until
    it fits.
    """

    name = "sjf"

    def rank(self, state: ClusterState, job: Job) -> tuple[float, float, str]:
        """Predicted duration, then arrival."""
        return (self.speeds.predicted_s(state, job), job.arrival, job.id)


class QuasiShortestServiceFirst(GuardedOrder):
    """QSSF (Hu et al., SC'21, the Helios traces; HeliosArtifact's
    ``framework/QSSF Service/policies/qssf.py``): pending jobs in order of predicted
    *service*, GPU time (predicted duration times GPUs requested), so that a large gang
    of a short job does not go before many small ones. Helios predicts the duration from
    the user's history (``hetsched replay --knowledge estimate``: the same rule,
    :class:`hetsched.knowledge.HistoryEstimator`); under ``truth`` it is shortest GPU
    time first. Placement and backfilling as :class:`ShortestJobFirst` (Helios' simulator
    does not backfill: the first job that does not fit stops the walk); no starvation
    guard by default, as in Helios (``starvation_factor``: :class:`ShortestJobFirst`'s,
    8, when given: on guessed durations it promotes the jobs guessed too short, and a
    promoted gang that reserves its GPU type makes the queue FIFO's; docs/knowledge.md).
    """

    name = "qssf"

    def __init__(self, *, starvation_factor: float = math.inf) -> None:
        super().__init__(starvation_factor=starvation_factor)

    def rank(self, state: ClusterState, job: Job) -> tuple[float, float, str]:
        """Predicted GPU-seconds, then arrival."""
        return (self.speeds.predicted_s(state, job) * job.num_gpus, job.arrival, job.id)


class ShortestRemainingTimeFirst(PolicyHooks):
    """Preemptive SRTF on predicted remaining time.

    Every active job gets a key from its predicted remaining time on its fastest
    configuration (whatever type it runs on now, so a job's key does not jump when it
    moves): a running job that time; a pending job that time times ``1 + margin``, plus
    ``restart_penalty_s``. Jobs are taken in key order and a pending job
    preempts running jobs of larger keys only if it then starts on their GPUs. So a pending
    job displaces a running one only if it is shorter by the margin and the restart
    penalty the victim will pay; a job's key only shrinks while it runs, so the job that
    took the GPUs is never displaced back by the one it preempted (no thrashing). Decisions
    at every arrival and completion, and every ``round_s`` for the guard (a boundary
    where nobody waits changes nothing: SRTF does not migrate a running job). Starvation
    guard as in :class:`ShortestJobFirst`; promoted running jobs are never preempted.
    """

    name = "srtf"

    def __init__(self, *, margin: float = 0.2, restart_penalty_s: float = RESTART_PENALTY_S,
                 starvation_factor: float = 8.0, round_s: float = 600.0) -> None:
        if margin < 0 or restart_penalty_s < 0 or not round_s > 0:
            raise ValueError("margin and restart penalty must be >= 0, round > 0")
        self.margin = margin
        self.restart_penalty_s = restart_penalty_s
        self.round_s = round_s
        self.speeds = SpeedBook()
        self.guard = StarvationGuard(starvation_factor)
        # The queue kept in order from decision to decision (kept_queue).
        self.reader = FeedReader()
        self.order = KeptOrder()

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event when nobody waits (only the guard's clock moves, and the
        call at the last boundary moves it as far)."""
        return -math.inf if state.pending else math.inf

    def decide(self, state: ClusterState) -> Decision:
        """Keep or start the jobs of shortest remaining time; preempt the rest."""
        changes = self.reader.read(state)
        promoted = self.guard.update(state, lambda job: self.speeds.predicted_s(state, job),
                                     changes)

        def waiting_key(job: Job) -> tuple[float, float, float, str]:
            left = self.speeds.predicted_s(state, job) * (1 + self.margin) \
                + self.restart_penalty_s
            return (1, left, job.arrival, job.id)

        def steps(job: Job) -> float:
            return state.remaining.get(job.id, job.work)

        self.order.keep(state, changes if self.guard.followed else None, promoted,
                        self.guard.newly, self.reader.jobs, waiting_key, _promoted_waiting,
                        steps)
        if not state.pending:
            return Decision()
        running: list[tuple[tuple[float, float, float, str], Job]] = []
        for run in state.running:
            job = run.job
            if job.id in promoted:
                running.append(((0, 0, job.arrival, job.id), job))
                continue
            left = self.speeds.predicted_s(state, job, run.remaining)
            running.append(((1, left, job.arrival, job.id), job))
        running = walked_running(self.order, running)
        ranks = {job.id: i for i, (_, job) in enumerate(running)}
        types = types_worth_starting(state, self.speeds, promoted)
        pool = state.pool(victim_ranks(state, ranks))
        return preempt_in_order(state, kept_walk(state, self.order, types, pool, running),
                                types, ranks, pool)


def _promoted_waiting(job: Job) -> tuple[float, float, float, str]:
    """A promoted waiting job's key: after promoted running jobs, by arrival."""
    return (0, 1, job.arrival, job.id)
