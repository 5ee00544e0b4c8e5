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
)
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
        if not state.pending:
            return Decision()
        running = {r.job.id for r in state.running}
        for job_id in running:
            self._last_ran[job_id] = now
        alive = running | {job.id for job in state.pending}
        for job_id in [j for j in self._last_ran if j not in alive]:
            del self._last_ran[job_id]

        def waited(job: Job) -> tuple[float, float, str]:
            return (self._last_ran.get(job.id, job.arrival), job.arrival, job.id)

        waiting = sorted(state.pending, key=waited)
        if not boundary:
            return start_in_order(state, waiting, lambda job: cluster_order(state, job))
        # ``started``: the start of the current stint (the last (re)start)
        served = [r for r in state.running
                  if now - r.started < self.quantum_s - BOUNDARY_TOLERANCE_S]
        due = [r for r in state.running
               if now - r.started >= self.quantum_s - BOUNDARY_TOLERANCE_S]
        served.sort(key=lambda r: (r.started, r.job.arrival, r.job.id))
        # Of the jobs that had their quantum, the one that resumed last stays longest.
        due.sort(key=lambda r: (-r.started, r.job.arrival, r.job.id))
        order = [*(r.job for r in served), *waiting, *(r.job for r in due)]
        decision = preempt_in_order(state, order, lambda job: cluster_order(state, job))
        return decision if decision.start or decision.preempt else Decision()
