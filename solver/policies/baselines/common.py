"""What the baseline policies share: predicted speeds and the types worth starting on
(from :mod:`hetsched.policies.starting`, re-exported here), GPU choice on a node (best fit), a
priority-order realiser with or without preemption, and the starvation guard.

Every placement goes through :meth:`~hetsched.allocation.layout.FreeGpuIndex.best_fit`, which only
returns GPUs of one type where the job's throughput (as the policy sees it) is positive
for the placement the GPUs imply, so no baseline ever puts a job where it cannot run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.records import Job
from hetsched.core.settings import RESTART_PENALTY_S
from hetsched.policies.baselines.kept_queue import FeedReader, KeptOrder, StarvationGuard
from hetsched.policies.rolling import ClusterState, Decision
from hetsched.policies.starting import (
    ReleaseTimes,
    SpeedBook,
    TypeChoice,
    types_worth_starting,
    worth_starting,
)

__all__ = ["BOUNDARY_TOLERANCE_S", "RESTART_PENALTY_S", "FeedReader",
           "KeptOrder", "Misses", "ReleaseTimes",
           "RoundClock", "SpeedBook", "StarvationGuard", "TypeChoice", "active_jobs",
           "cluster_order", "place", "preempt_in_order", "start_in_order", "steps_left",
           "types_worth_starting", "worth_starting"]

#: A decision this close (s) before a round boundary is on it (floating-point error).
BOUNDARY_TOLERANCE_S = 1e-3


class RoundClock:
    """A policy's round boundaries: its first decision plus multiples of ``round_s`` (s),
    where the simulator calls it (see ``RollingPolicy.round_s``). :meth:`boundary` says
    whether a decision is the first one at or after a boundary not seen yet, so a round
    is realised once even if events fall on its boundary, and a boundary the policy was
    not called at (nothing ran) is simply skipped."""

    def __init__(self, round_s: float) -> None:
        if not (math.isfinite(round_s) and round_s > 0):
            raise ValueError(f"a round must be finite and > 0 s, got {round_s}")
        self.round_s = round_s
        self.origin: float | None = None
        self.last = -1  # the last boundary index seen

    def boundary(self, now: float) -> bool:
        """Whether the decision at ``now`` (s) realises a round (the first call does)."""
        if self.origin is None:
            self.origin = now
        index = math.floor((now - self.origin + BOUNDARY_TOLERANCE_S) / self.round_s)
        if index > self.last:
            self.last = index
            return True
        return False


def cluster_order(state: ClusterState, job: Job) -> list[str]:
    """The heterogeneity-agnostic type preference: the cluster's order, allowed types only."""
    return [t for t in state.cluster.type_names if job.may_use(t)]


class Misses:
    """The gangs that found no GPUs earlier in one decision, so that a long queue of jobs
    that cannot start costs a look-up each, not a search of the cluster.

    Within a walk of :func:`start_in_order` or :func:`preempt_in_order`, what a request
    may get only shrinks: starts take free GPUs, passing a running job keeps its GPUs
    (no longer victims); a preempted job's GPUs were victims already. So a gang of a job
    type, a size and a GPU type that found nothing finds nothing later in the walk either,
    on free GPUs or with victims. The exceptions clear or bypass the record: a preempted
    job gives its nodes' CPUs and memory back (:meth:`clear`), and jobs asking for a
    share of a GPU, for CPUs and memory, or for some nodes only are never recorded
    (their answers depend on more than the job type)."""

    def __init__(self) -> None:
        self._failed: set[tuple[str, int, str, bool]] = set()

    @staticmethod
    def recordable(job: Job) -> bool:
        """Whether a failed request of ``job`` says something about its job type's."""
        return job.gpu_share is None and job.allowed_nodes is None and \
            not job.needs_node_resources

    def failed(self, job: Job, gpu_type: str, count: int, with_victims: bool) -> bool:
        """Whether this gang already found nothing (with victims counts for both)."""
        failed = self._failed
        return (job.job_type, count, gpu_type, True) in failed or \
            (not with_victims and (job.job_type, count, gpu_type, False) in failed)

    def add(self, job: Job, gpu_type: str, count: int, with_victims: bool) -> None:
        """Record that this gang found nothing (a job of a recordable kind)."""
        self._failed.add((job.job_type, count, gpu_type, with_victims))

    def hopeless(self, job: Job, gpu_types: Iterable[str], pool: FreeGpuIndex,
                 with_victims: bool) -> bool:
        """Whether ``job`` at its gang size cannot start now on any of ``gpu_types`` (so
        on no subset of them either): on each, fewer GPUs could be given than it asks
        for (:meth:`FreeGpuIndex.best_fit`'s first test), or the gang already found
        nothing there. Never for a job asking for a share of a GPU."""
        if job.gpu_share is not None:
            return False
        count = job.num_gpus
        recordable = self.recordable(job)
        return all(pool.available(t, with_victims) < count or (
            recordable and self.failed(job, t, count, with_victims)) for t in gpu_types)

    def clear(self) -> None:
        """Forget every failure (after something came back: CPUs and memory)."""
        self._failed.clear()


def place(state: ClusterState, job: Job, gpu_types: Iterable[str], count: int,
          pool: FreeGpuIndex, *, preempting: bool = False,
          misses: Misses | None = None) -> Start | None:
    """The first of ``gpu_types`` (in order) where :meth:`FreeGpuIndex.best_fit` finds a
    gang, first on free GPUs only, then (if ``preempting``) taking victims; the GPUs are
    taken from ``pool``. With ``misses``, gangs that found nothing earlier in the same
    walk are not searched again, and new failures are recorded there."""
    types = list(gpu_types)
    memo = misses if misses is not None and Misses.recordable(job) else None
    for with_victims in ((False, True) if preempting else (False,)):
        for gpu_type in types:
            if memo is not None and memo.failed(job, gpu_type, count, with_victims):
                continue
            gpus = pool.best_fit(job, gpu_type, count, state.throughput, with_victims)
            if gpus is not None:
                pool.take(gpus, job)
                return Start(job.id, gpu_type, gpus)
            if memo is not None and job.may_use(gpu_type):
                memo.add(job, gpu_type, count, with_victims)
    return None


TypesFor = Callable[[Job], Sequence[str]]


def start_in_order(state: ClusterState, order: Iterable[Job], types_for: TypesFor, *,
                   reserves: Callable[[Job], bool] | None = None,
                   pool: FreeGpuIndex | None = None) -> Decision:
    """Non-preemptive: start pending jobs of ``order`` on free GPUs while they fit, skipping
    those that do not (backfilling), except that a job for which ``reserves(job)`` is true
    and which fits nowhere reserves its first GPU type: no later job starts on that type in
    this decision, so the type drains until the job fits. ``pool``: the state's pool to
    take GPUs from (default: a new one)."""
    pool = state.pool() if pool is None else pool
    reserved: set[str] = set()
    starts = []
    misses = Misses()
    every_type = len(state.cluster.type_names)
    for job in order:
        if not pool.has_free() or len(reserved) == every_type:
            break  # (every type reserved: no later job may start anywhere)
        if isinstance(types_for, TypeChoice) and not (reserves is not None and reserves(job)) \
                and misses.hopeless(job, types_for.candidates(job), pool, False):
            continue  # nothing it could try has room
        types = [t for t in types_for(job) if t not in reserved]
        chosen = place(state, job, types, job.num_gpus, pool, misses=misses)
        if chosen is not None:
            starts.append(chosen)
            if isinstance(types_for, TypeChoice):
                types_for.started(job, chosen)
        elif reserves is not None and reserves(job) and types:
            reserved.add(types[0])
    return Decision(tuple(starts))


def preempt_in_order(state: ClusterState, order: Iterable[Job], types_for: TypesFor,
                     ranks: Mapping[str, int] | None = None,
                     pool: FreeGpuIndex | None = None) -> Decision:
    """Preemptive: walk ``order`` (pending and running jobs, highest priority first). A
    running job keeps its GPUs unless a job before it took some of them, in which case it
    is preempted; a pending job starts on free GPUs if it can, else on GPUs of running
    jobs later in the order (the lowest priority first). So a job is only preempted for a
    job of higher priority that actually starts on its GPUs. Running jobs missing from
    ``order`` are never preempted, nor are jobs running on a share of a GPU (their GPU
    is not theirs alone to give).

    ``ranks``: each running job's place in ``order`` (any numbers in the same order),
    when ``order`` is walked once (a merge of a kept queue and the running jobs): then
    the walk ends as soon as every running job in it is passed and no GPU is left, and
    the waiting jobs after that point are never looked at. ``pool``: the state's pool
    with the victims of :func:`victim_ranks` (default: a new one)."""
    running = state.held()
    if ranks is None:
        order = list(order)
        ranks = {job.id: i for i, job in enumerate(order) if job.id in running}
    if pool is None:
        pool = state.pool(victim_ranks(state, ranks))
    unseen = sum(1 for job_id in running if job_id in ranks)  # running jobs still ahead
    taken: set[str] = set()
    starts: list[Start] = []
    preempt: list[str] = []
    misses = Misses()
    for job in order:
        run = running.get(job.id)
        if run is not None:
            unseen -= 1
            if run.job.gpu_share is not None or taken.isdisjoint(run.gpus):
                pool.keep(run.gpus)
                continue
            preempt.append(job.id)
            pool.keep(run.gpus)
            pool.release([g for g in run.gpus if g not in taken], run.job)
            if run.job.needs_node_resources:
                misses.clear()
            continue
        if not pool.victims and not pool.has_free():
            if unseen == 0:
                break  # nothing left to give, and nobody left to keep or preempt
            continue
        if isinstance(types_for, TypeChoice) and \
                misses.hopeless(job, types_for.candidates(job), pool, True):
            continue
        chosen = place(state, job, types_for(job), job.num_gpus, pool, preempting=True,
                       misses=misses)
        if chosen is not None:
            starts.append(chosen)
            taken.update(chosen.gpus)
            if isinstance(types_for, TypeChoice):
                types_for.started(job, chosen)
    return Decision(tuple(starts), tuple(preempt))


def victim_ranks(state: ClusterState, ranks: Mapping[str, int]) -> dict[str, int]:
    """The GPUs of running jobs that may be taken, with their job's rank (a larger one is
    taken first): every job of ``ranks`` but those running on a share of a GPU."""
    return {g: ranks[job_id] for job_id, held in state.held().items() if job_id in ranks
            and held.job.gpu_share is None for g in held.gpus}


def steps_left(state: ClusterState, jobs: Sequence[Job], least: float = 0.0) -> list[float]:
    """Each of ``jobs``' steps left at ``state`` (a running job's as it runs, a waiting
    one's as the state says, else all of its work), at least ``least``."""
    running = {r.job.id: r.remaining for r in state.running}
    remaining = state.remaining
    return [max(least, running[job.id] if job.id in running
                else remaining.get(job.id, job.work)) for job in jobs]


def deadline_rates(state: ClusterState, jobs: Sequence[Job]) -> npt.NDArray[np.float64]:
    """The steps/s each of ``jobs`` needs from now on to meet its deadline (Gavel's SLOs):
    its steps left over the time left; 0 for a job with no deadline or one already past
    (Gavel's rate would be negative, which any allocation meets)."""
    steps = np.array(steps_left(state, jobs), dtype=np.float64)
    left = np.array([np.inf if job.deadline is None else job.deadline - state.now
                     for job in jobs], dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.asarray(np.where(left > 0, steps / left, 0.0), dtype=np.float64)


def active_jobs(state: ClusterState) -> list[Job]:
    """Pending and running jobs."""
    return [*state.pending, *(r.job for r in state.running)]
