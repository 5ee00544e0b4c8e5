"""Optimus (Peng et al., EuroSys 2018): greedy marginal-gain GPU allocation on a speed model."""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.records import Job
from hetsched.policies.baselines.common import (
    RESTART_PENALTY_S,
    RoundClock,
    SpeedBook,
    StarvationGuard,
    place,
)
from hetsched.policies.baselines.kept_queue import FeedReader
from hetsched.policies.baselines.optimus_steps import FirstSteps, PromotedOrder
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RunningJob


class Optimus(PolicyHooks):
    """Greedy marginal gain with the fitted speed model; running jobs migrate to faster
    free GPUs at interval boundaries.

    At each decision the free GPUs are handed out one allocation step at a time: every
    pending job may get, on one GPU type, any of its allowed gang sizes, and an allocated
    job may grow to a larger allowed size on the same type. Each step is worth its
    marginal gain per GPU, ``(1/T' - 1/T) / (n' - n)``, where ``T`` is the job's predicted
    remaining time (remaining steps / predicted steps/s, ``1/T = 0`` unallocated) and
    ``n`` its GPUs: the growth in the fraction of the job done per second, per GPU added.
    The step of largest gain that fits the free GPUs of its type is taken, until none
    fits. Then the gangs are placed, largest first (packed on the fullest node that holds
    them, else spread; a gang that does not fit is tried at its smaller sizes).

    Re-allocation (Optimus re-allocates every job every interval, ``round_s``, 10 min):
    at each interval boundary, GPUs still free after the pending jobs had them go to
    running jobs that finish sooner there than where they run, the restart penalty
    included, by the same gain per GPU (``1/T_move - 1/T_stay``, same gang size); the
    GPUs a moved job leaves go to the jobs still waiting. A move is never undone (it only
    goes to a faster configuration), so jobs do not thrash.

    Simplified: a running gang keeps its size (Optimus also resizes it), and is only moved
    to GPUs that are free; Optimus allocates parameter servers and workers, here GPUs
    only.

    Starvation guard: a job that has waited ``starvation_factor`` times its predicted
    duration is promoted; promoted jobs are served first in arrival order at their
    smallest size on their fastest type with room, and one that fits nowhere reserves its
    fastest type (nothing else starts or moves there) until it fits.
    """

    name = "optimus"

    def __init__(self, *, starvation_factor: float = 8.0, round_s: float = 600.0,
                 restart_penalty_s: float = RESTART_PENALTY_S) -> None:
        if not restart_penalty_s >= 0:
            raise ValueError(f"restart penalty must be >= 0 s, got {restart_penalty_s}")
        self.speeds = SpeedBook()
        self.guard = StarvationGuard(starvation_factor)
        self.round_s = round_s
        self.clock = RoundClock(round_s)
        self.restart_penalty_s = restart_penalty_s
        # The queue kept from decision to decision (a long queue: kept_queue): the waiting jobs
        # and their first allocation steps in order.
        self.reader = FeedReader()
        self.steps = FirstSteps()
        self.promoted_order = PromotedOrder()

    def decide(self, state: ClusterState) -> Decision:
        """Allocate the free GPUs by marginal gain; at a boundary, move running jobs."""
        changes = self.reader.read(state)
        promoted = self.guard.update(state, lambda job: self.speeds.predicted_s(state, job),
                                     changes)
        self.steps.follow(state, changes, self.reader.jobs,
                          lambda job, k, size: self._rate(state, job, k, size))
        self.promoted_order.follow(promoted, self.reader.jobs)
        boundary = self.clock.boundary(state.now)
        if not (state.pending or (boundary and state.running)) or not state.has_free():
            return Decision()
        pool = state.pool()
        reserved: set[str] = set()
        starts = self._start(state, frozenset(), promoted, pool, reserved)
        if not boundary or not state.running or not pool.has_free():
            return Decision(tuple(starts))
        moves = self._moves(state, pool, reserved)
        if not moves:
            return Decision(tuple(starts))
        for run, _ in moves:
            pool.release(run.gpus, run.job)
        more = self._start(state, frozenset(s.job for s in starts), promoted, pool, reserved)
        return Decision((*starts, *(start for _, start in moves), *more),
                        tuple(run.job.id for run, _ in moves))

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event (``inf``) when nobody waits and no running job would move
        at a later boundary before it; else no promise.

        With nobody waiting and the free GPUs unchanged, a boundary only considers moves
        (the guard and the clock are set by the call at the last boundary as by every
        call). A job moves to a type it predicts ``s`` steps/s on, from ``c``, when
        ``penalty + r / s < r / c`` (``r``: steps left, which only shrink). For ``s <= c``
        never; for ``s > c`` the gap ``r / c - r / s - penalty`` shrinks with ``r``, so if
        it is below 0 now by more than float rounding (1e-12 relative) it stays so."""
        if state.pending:
            return -math.inf
        if not state.has_free():
            return math.inf
        pool = state.pool()
        for run in state.running:
            count = len(run.gpus)
            current = self.speeds.running_speed(state, run)
            if current <= 0:
                return -math.inf
            for gpu_type, speed in self.speeds.speeds(state, run.job, count).items():
                if gpu_type == run.gpu_type or speed <= current or \
                        pool.available(gpu_type, with_victims=False) < count:
                    continue
                stay = run.remaining / current
                move = self.restart_penalty_s + run.remaining / speed
                if stay - move >= -1e-12 * max(stay, move):
                    return -math.inf
        return math.inf

    def _start(self, state: ClusterState, started: AbstractSet[str], promoted: set[str],
               pool: FreeGpuIndex, reserved: set[str]) -> list[Start]:
        """Starts for the pending jobs but ``started`` on the pool's free GPUs: promoted
        jobs first, then the greedy. Promoted jobs that fit nowhere add their fastest type
        to ``reserved``."""
        starts: list[Start] = []
        waiting = self.reader.jobs
        every_type = len(state.cluster.type_names)
        for job in self.promoted_order.jobs(waiting, started):
            if len(reserved) == every_type:  # no type left for the promoted jobs after
                break
            start = None
            for count in job.gpu_counts:
                types = [t for t in self.speeds.speeds(state, job, count) if t not in reserved]
                start = place(state, job, types, count, pool)
                if start is not None:
                    break
            if start is not None:
                starts.append(start)
                continue
            preferred = [t for t in self.speeds.speeds(state, job) if t not in reserved]
            if preferred:
                reserved.add(preferred[0])
        plan = self._allocate(state, started | promoted, pool, reserved)
        for job, gpu_type, count in sorted(plan, key=lambda p: (-p[2], p[0].arrival, p[0].id)):
            for size in sorted((c for c in job.gpu_counts if c <= count), reverse=True):
                if gpu_type not in self.speeds.speeds(state, job, size):
                    continue
                start = place(state, job, [gpu_type], size, pool)
                if start is not None:
                    starts.append(start)
                    break
        return starts

    def _moves(self, state: ClusterState, pool: FreeGpuIndex,
               reserved: set[str]) -> list[tuple[RunningJob, Start]]:
        """Running jobs to move onto free GPUs of another type, where they finish sooner
        than by staying (predicted, the restart penalty included), best gain per GPU
        first; the new GPUs are taken from ``pool``."""
        candidates: list[tuple[float, float, str, str, RunningJob]] = []
        for run in state.running:
            count = len(run.gpus)
            current = self.speeds.running_speed(state, run)
            stay = run.remaining / current if current > 0 else math.inf
            for gpu_type, speed in self.speeds.speeds(state, run.job, count).items():
                if gpu_type == run.gpu_type or gpu_type in reserved or \
                        pool.available(gpu_type, with_victims=False) < count:
                    continue
                move = self.restart_penalty_s + run.remaining / speed
                if move < stay:
                    gain = (1.0 / max(move, 1e-9) - 1.0 / stay) / count
                    candidates.append((-gain, run.job.arrival, run.job.id, gpu_type, run))
        moves: list[tuple[RunningJob, Start]] = []
        moved: set[str] = set()
        for _, _, job_id, gpu_type, run in sorted(candidates, key=lambda c: c[:4]):
            if job_id in moved:
                continue
            start = place(state, run.job, [gpu_type], len(run.gpus), pool)
            if start is not None:
                moves.append((run, start))
                moved.add(job_id)
        return moves

    def _allocate(self, state: ClusterState, excluded: AbstractSet[str],
                  pool: FreeGpuIndex, reserved: set[str]) -> list[tuple[Job, str, int]]:
        """The greedy over the waiting jobs but ``excluded``: (job, GPU type, GPUs) for
        every job that got GPUs (:meth:`FirstSteps.greedy`: the steps in order of gain per
        GPU, ties by arrival, job id, type and size)."""
        types = state.cluster.type_names
        left = {t: 0 if t in reserved else pool.available(t, with_victims=False)
                for t in types}
        return self.steps.greedy(types, left, excluded, self.reader.jobs,
                                 lambda job, k, size: self._rate(state, job, k, size))

    def _rate(self, state: ClusterState, job: Job, type_index: int, size: int) -> float:
        """``1/T``, the fraction of ``job`` done per second on ``size`` GPUs of the type at
        ``type_index``: predicted steps/s over steps left."""
        gpu_type = state.cluster.type_names[type_index]
        speed = self.speeds.speeds(state, job, size).get(gpu_type, 0.0)
        return speed / max(state.remaining.get(job.id, job.work), 1e-9)
