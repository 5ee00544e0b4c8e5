"""Gandiva (Xiao et al., OSDI 2018): time slicing, packing at measured pair speeds and
migration for locality."""

from __future__ import annotations

import math
from typing import Any

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.core.records import Job
from hetsched.core.sharing import CoLocationModel
from hetsched.policies.baselines.common import (
    BOUNDARY_TOLERANCE_S,
    RoundClock,
    cluster_order,
    preempt_in_order,
    start_in_order,
    victim_ranks,
)
from hetsched.policies.baselines.gandiva_moves import has_packing_pair, pack, spread_moves
from hetsched.policies.baselines.kept_queue import FeedReader, KeptOrder
from hetsched.policies.baselines.walk import kept_walk, walked_running
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RunningJob


class Gandiva(PolicyHooks):
    """Heterogeneity-agnostic greedy placement, round-robin time slicing when jobs wait,
    packing of one-GPU jobs at measured pair speeds, and migration for locality.

    Placement: GPU types in cluster order; a gang goes on one node when one has room (the
    fullest such node, which packs jobs and keeps whole nodes free for large gangs), else
    it is spread. At arrivals and completions, waiting jobs fill free GPUs, the one that
    last ran longest ago first (never-run jobs by arrival). Every ``quantum_s`` (its
    declared round) while jobs wait, Gandiva time-slices: jobs that have run a full
    quantum since they last (re)started are suspended, in favour of the waiting jobs in
    the same round-robin order; jobs that have not yet had their quantum keep their GPUs.
    A waiting job is therefore overtaken by at most the jobs ahead of it in the
    round-robin, which is the starvation guard.

    Kept from the paper: time slicing with suspend and resume, as above. Packing
    (``packing``) with its introspection known beforehand: Gandiva packs jobs when the
    cluster is oversubscribed and unpacks a pair that progresses worse than time
    slicing; with measured pair speeds (``state.colocation``) that verdict is known
    before packing, so only one-GPU jobs whose measured combined rate on the GPU type is
    above 1 are packed, the best rate first, at any decision where jobs wait
    (:mod:`~hetsched.policies.baselines.gandiva_moves`). A packed pair is time-sliced as
    one job: it has had its quantum when its later member has, and is then suspended
    whole. Migration for locality (``migration``): at each quantum boundary a gang
    spread over several nodes moves onto one node of its type with room, where it runs
    faster, the largest gangs first.

    Not modelled: grow-shrink (a gang keeps its size); introspection by profiling at run
    time (the measured pairs stand for it, so no pair is packed only to be unpacked);
    the random pairing of Gavel's version (its ``gandiva`` policy pairs the jobs at
    random whenever the cluster is oversubscribed): pairs here are chosen by their
    measured rate. Where ``state.colocation`` is ``None`` or has no pair above 1, nothing
    is packed.
    """

    name = "gandiva"

    def __init__(self, *, quantum_s: float = 600.0, packing: bool = True,
                 migration: bool = True) -> None:
        if not quantum_s > 0:
            raise ValueError(f"quantum must be > 0 s, got {quantum_s}")
        self.quantum_s = quantum_s
        self.packing = packing
        self.migration = migration
        self.clock = RoundClock(quantum_s)
        self._last_ran: dict[str, float] = {}
        self.reader = FeedReader()
        self._finished: list[str] = []  # jobs finished since the last decision
        self.order = KeptOrder()
        # The colocation model last seen, and whether it has a pair worth packing.
        self._pairs_of: CoLocationModel | None = None
        self._packs = False
        # A gang moved onto one node: (when it moved, when its stint began before): a
        # move continues the stint, so it brings no fresh quantum.
        self._moved: dict[str, tuple[float, float]] = {}

    @property
    def round_s(self) -> float:
        """The quantum (s): the simulator calls at every quantum boundary."""
        return self.quantum_s

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event when nobody waits and no spread gang could move (only the
        clock moves, and the call at the last boundary moves it as far; the free GPUs a
        move needs change only at events)."""
        if state.pending:
            return -math.inf
        if self.migration and spread_moves(state, state.pool(), frozenset()):
            return -math.inf
        return math.inf

    def decide(self, state: ClusterState) -> Decision:
        """Fill free GPUs; at a quantum boundary, rotate jobs that had their quantum and
        move spread gangs; pack jobs left without a GPU where a pair is worth it."""
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
            if boundary and self.migration:
                return self._migrate(state, Decision(), state.pool())
            return Decision()
        self._forget_finished()
        for job_id in state.running_types():  # (without building the running jobs)
            self._last_ran[job_id] = now
        if not boundary:
            pool = state.pool()
            decision = start_in_order(state, kept_walk(state, self.order, None, pool),
                                      lambda job: cluster_order(state, job), pool=pool)
            return self._pack(state, decision, pool)
        served, due = self._units(state)
        # The order: served running jobs, the waiting jobs, the running jobs due (the
        # members of a packed pair side by side, under one key).
        running = walked_running(self.order, [
            *(((0, i), job) for i, unit in enumerate(served) for job in unit),
            *(((2, i), job) for i, unit in enumerate(due) for job in unit)])
        # A pair's members share one rank (that of its last member): its GPU is one
        # victim, taken from both.
        last = {key: rank for rank, (key, _) in enumerate(running)}
        ranks = {job.id: last[key] for key, job in running}
        pool = state.pool(victim_ranks(state, ranks))
        decision = preempt_in_order(state, kept_walk(state, self.order, None, pool, running),
                                    lambda job: cluster_order(state, job), ranks, pool)
        if self.migration:
            decision = self._migrate(state, decision, pool)
        decision = self._pack(state, decision, pool)
        return decision if decision.start or decision.preempt else Decision()

    def on_finished(self, job: Job, now: float) -> None:
        """Forget the job at the next decision."""
        self._finished.append(job.id)

    def _units(self, state: ClusterState) -> tuple[list[list[Job]], list[list[Job]]]:
        """The running jobs as units time-sliced together (a packed pair on one GPU, else
        one job), served (not yet had their quantum) and due: served ones in order of
        their (re)start, due ones the one that resumed last first (it stays longest).
        A unit's start is its last member's, and a packed job on a GPU that also hosts a
        share job is left out (its GPU is not the pair's to give, as a share job's)."""
        now = state.now
        units: list[tuple[float, list[RunningJob]]] = []
        on_gpu: dict[str, list[RunningJob]] = {}
        for run in state.running:
            if run.packed or (run.job.gpu_share is not None and len(run.gpus) == 1):
                on_gpu.setdefault(run.gpus[0], []).append(run)
            else:
                units.append((self._stint_start(run), [run]))
        for runs in on_gpu.values():
            if all(run.packed for run in runs):
                runs.sort(key=lambda run: (run.job.arrival, run.job.id))
                units.append((max(run.started for run in runs), runs))
            else:
                units += [(run.started, [run]) for run in runs if not run.packed]
        served: list[tuple[Any, list[Job]]] = []
        due: list[tuple[Any, list[Job]]] = []
        for started, runs in units:
            first = runs[0].job
            members = [run.job for run in runs]
            if now - started < self.quantum_s - BOUNDARY_TOLERANCE_S:
                served.append(((started, first.arrival, first.id), members))
            else:
                # Of the jobs that had their quantum, the one that resumed last stays
                # longest.
                due.append(((-started, first.arrival, first.id), members))
        served.sort(key=_first)
        due.sort(key=_first)
        return [members for _, members in served], [members for _, members in due]

    def _stint_start(self, run: RunningJob) -> float:
        """When ``run``'s stint began: its (re)start, or, for a gang moved onto one node
        since, when it began before the move."""
        moved = self._moved.get(run.job.id)
        if moved is None:
            return run.started
        if abs(run.started - moved[0]) > BOUNDARY_TOLERANCE_S:  # (suspended since)
            del self._moved[run.job.id]
            return run.started
        return moved[1]

    def _migrate(self, state: ClusterState, decision: Decision, pool: FreeGpuIndex
                 ) -> Decision:
        """``decision`` with the spread gangs it keeps moved onto one node
        (:func:`~hetsched.policies.baselines.gandiva_moves.spread_moves`); the GPUs they
        leave go to the waiting jobs the decision did not start, in round-robin order."""
        moves = spread_moves(state, pool, frozenset(decision.preempt))
        if not moves:
            return decision
        for run, _ in moves:
            pool.release(run.gpus, run.job)
            self._moved[run.job.id] = (state.now, self._stint_start(run))
        starts = [*decision.start, *(start for _, start in moves)]
        if state.pending:
            pool.keep(list(pool.victims))  # (what the decision left running stays)
            started = {start.job for start in decision.start}
            more = start_in_order(state, (job for job in kept_walk(state, self.order, None,
                                                                   pool)
                                          if job.id not in started),
                                  lambda job: cluster_order(state, job), pool=pool)
            starts += more.start
        return Decision(tuple(starts),
                        (*decision.preempt, *(run.job.id for run, _ in moves)))

    def _pack(self, state: ClusterState, decision: Decision, pool: FreeGpuIndex
              ) -> Decision:
        """``decision`` with jobs left without a GPU packed beside others where their
        measured pair is worth it (:func:`~hetsched.policies.baselines.gandiva_moves.
        pack`); unchanged without packing or a pair above 1."""
        if not self.packing:
            return decision
        colocation = state.colocation
        if colocation is not self._pairs_of:
            self._pairs_of, self._packs = colocation, has_packing_pair(colocation)
        if not self._packs:
            return decision
        return pack(state, decision, self.order, self.reader.jobs, pool)

    def _forget_finished(self) -> None:
        for job_id in self._finished:
            self._last_ran.pop(job_id, None)
            self._moved.pop(job_id, None)
        self._finished.clear()

    def _waited(self, job: Job) -> tuple[int, tuple[float, float, str]]:
        """A waiting job's place: after the served running jobs, the one that last ran
        longest ago first (a job that never ran: since its arrival)."""
        return (1, (self._last_ran.get(job.id, job.arrival), job.arrival, job.id))


def _first(item: tuple[Any, list[Job]]) -> Any:
    return item[0]


def _no_steps(job: Job) -> float:
    """Gandiva weighs no steps: its kinds' rules admit any."""
    return 0.0
