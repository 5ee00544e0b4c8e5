"""Gandiva (Xiao et al., OSDI 2018): greedy packing with locality and time slicing."""

from __future__ import annotations

import math

from hetsched.core.records import Job
from hetsched.policies.baselines.common import (
    BOUNDARY_TOLERANCE_S,
    RoundClock,
    cluster_order,
    preempt_in_order,
    start_in_order,
    victim_ranks,
)
from hetsched.policies.baselines.kept_queue import FeedReader, KeptOrder
from hetsched.policies.baselines.walk import kept_walk, walked_running
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks


class Gandiva(PolicyHooks):
    """Heterogeneity-agnostic greedy packing, round-robin time slicing when jobs wait.

    Placement: GPU types in cluster order; a gang goes on one node when one has room (the
    fullest such node, which packs jobs and keeps whole nodes free for large gangs), else
    it is spread. At arrivals and completions, waiting jobs fill free GPUs, the one that
    last ran longest ago first (never-run jobs by arrival). Every ``quantum_s`` (its
    declared round) while jobs wait, Gandiva time-slices: jobs that have run a full
    quantum since they last (re)started are suspended, in favour of the waiting jobs in
    the same round-robin order; jobs that have not yet had their quantum keep their GPUs.
    A waiting job is therefore overtaken by at most the jobs ahead of it in the
    round-robin, which is the starvation guard. A quantum boundary where nobody waits
    changes nothing (no migration: Gandiva's migrates for packing, which is not modelled).
    """

    name = "gandiva"

    def __init__(self, *, quantum_s: float = 600.0) -> None:
        if not quantum_s > 0:
            raise ValueError(f"quantum must be > 0 s, got {quantum_s}")
        self.quantum_s = quantum_s
        self.clock = RoundClock(quantum_s)
        self._last_ran: dict[str, float] = {}
        self.reader = FeedReader()
        self._finished: list[str] = []  # jobs finished since the last decision
        self.order = KeptOrder()

    @property
    def round_s(self) -> float:
        """The quantum (s): the simulator calls at every quantum boundary."""
        return self.quantum_s

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event when nobody waits (only the clock moves, and the call at
        the last boundary moves it as far)."""
        return -math.inf if state.pending else math.inf

    def decide(self, state: ClusterState) -> Decision:
        """Fill free GPUs; at a quantum boundary, rotate jobs that had their quantum."""
        now = state.now
        # Quantum boundaries at the first decision + k quanta (where the simulator calls),
        # each taken at the first decision at or after it.
        boundary = self.clock.boundary(now)
        # The waiting jobs, the one that last ran longest ago first (kept_queue): a job's
        # place is fixed while it waits (when it last ran is set while it runs).
        changes = self.reader.read(state)
        self.order.keep(state, changes, frozenset(), [], self.reader.jobs, self._waited,
                        self._waited, _no_steps)
        if not state.pending:
            return Decision()
        self._forget_finished()
        for job_id in state.running_types():  # (without building the running jobs)
            self._last_ran[job_id] = now
        if not boundary:
            pool = state.pool()
            return start_in_order(state, kept_walk(state, self.order, None, pool),
                                  lambda job: cluster_order(state, job), pool=pool)
        # ``started``: the start of the current stint (the last (re)start)
        served = [r for r in state.running
                  if now - r.started < self.quantum_s - BOUNDARY_TOLERANCE_S]
        due = [r for r in state.running
               if now - r.started >= self.quantum_s - BOUNDARY_TOLERANCE_S]
        served.sort(key=lambda r: (r.started, r.job.arrival, r.job.id))
        # Of the jobs that had their quantum, the one that resumed last stays longest.
        due.sort(key=lambda r: (-r.started, r.job.arrival, r.job.id))
        # The order: served running jobs, the waiting jobs, the running jobs due.
        running = walked_running(self.order, [*(((0, i), r.job) for i, r in enumerate(served)),
                                              *(((2, i), r.job) for i, r in enumerate(due))])
        ranks = {job.id: i for i, (_, job) in enumerate(running)}
        pool = state.pool(victim_ranks(state, ranks))
        decision = preempt_in_order(state, kept_walk(state, self.order, None, pool, running),
                                    lambda job: cluster_order(state, job), ranks, pool)
        return decision if decision.start or decision.preempt else Decision()

    def on_finished(self, job: Job, now: float) -> None:
        """Forget the job at the next decision."""
        self._finished.append(job.id)

    def _forget_finished(self) -> None:
        for job_id in self._finished:
            for table in (self._last_ran,):
                table.pop(job_id, None)
        self._finished.clear()

    def _waited(self, job: Job) -> tuple[int, tuple[float, float, str]]:
        """A waiting job's place: after the served running jobs, the one that last ran
        longest ago first (a job that never ran: since its arrival)."""
        return (1, (self._last_ran.get(job.id, job.arrival), job.arrival, job.id))


def _no_steps(job: Job) -> float:
    """Gandiva weighs no steps: its kinds' rules admit any."""
    return 0.0
