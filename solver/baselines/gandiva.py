"""Gandiva (Xiao et al., OSDI 2018): greedy packing with locality and time slicing."""

from __future__ import annotations

import math

from solver.baselines.common import cluster_order, preempt_in_order, start_in_order
from solver.data import Job
from solver.rolling import ClusterState, Decision

#: A decision this close to a quantum boundary is on it (the simulator's ticks add up
#: floating-point error).
BOUNDARY_TOLERANCE_S = 1e-3


class Gandiva:
    """Heterogeneity-agnostic greedy packing, round-robin time slicing when jobs wait.

    Placement: GPU types in cluster order; a gang goes on one node when one has room (the
    fullest such node, which packs jobs and keeps whole nodes free for large gangs), else
    it is spread. At arrivals and completions, waiting jobs fill free GPUs, the one that
    last ran longest ago first (never-run jobs by arrival). Every ``quantum_s`` (the
    decision interval) while jobs wait, Gandiva time-slices: jobs that have run a full
    quantum since they last (re)started are suspended, in favour of the waiting jobs in
    the same round-robin order; jobs that have not yet had their quantum keep their GPUs.
    A waiting job is therefore overtaken by at most the jobs ahead of it in the
    round-robin, which is the starvation guard.
    """

    name = "gandiva"

    def __init__(self, *, quantum_s: float = 600.0) -> None:
        if not quantum_s > 0:
            raise ValueError(f"quantum must be > 0 s, got {quantum_s}")
        self.quantum_s = quantum_s
        self._last_ran: dict[str, float] = {}
        self._next_quantum: float | None = None

    @property
    def interval_s(self) -> float:
        """Decisions every quantum."""
        return self.quantum_s

    def decide(self, state: ClusterState) -> Decision:
        """Fill free GPUs; at a quantum boundary, rotate jobs that had their quantum."""
        now = state.now
        running = {r.job.id for r in state.running}
        for job_id in running:
            self._last_ran[job_id] = now
        alive = running | {job.id for job in state.pending}
        for job_id in [j for j in self._last_ran if j not in alive]:
            del self._last_ran[job_id]
        if not state.pending:
            return Decision()

        def waited(job: Job) -> tuple[float, float, str]:
            return (self._last_ran.get(job.id, job.arrival), job.arrival, job.id)

        waiting = sorted(state.pending, key=waited)
        # Quantum boundaries at the first decision + k quanta (where the simulator's ticks
        # fall when it uses ``interval_s``), each taken at the first decision at or after.
        if self._next_quantum is None:
            self._next_quantum = now
        boundary = now >= self._next_quantum - BOUNDARY_TOLERANCE_S
        if boundary:
            skipped = math.floor((now - self._next_quantum) / self.quantum_s + 1e-9)
            self._next_quantum += (max(skipped, 0) + 1) * self.quantum_s
        else:
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
