"""What a policy starting jobs needs to know: each job's predicted speed per GPU type
(:class:`SpeedBook`), when each GPU is predicted to be free (:class:`ReleaseTimes`), and
the types where starting a job now finishes no later than waiting for a faster one
(:func:`types_worth_starting`). Written once, below every policy that uses them (the
baselines and the ``progress`` policy), on the rolling interface only."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from functools import cached_property

from hetsched.allocation.layout import SpeedView, Start, layout, throughput_of
from hetsched.core.records import Job
from hetsched.policies.rolling import ClusterState, RunningJob


class SpeedBook:
    """Predicted steps/s of a job per GPU type, at a gang size, on the best placement the
    cluster allows (packed if a node can hold the gang, else spread), from the throughput
    model the policy sees. Cached per (job type, count, allowed types) for one model."""

    def __init__(self) -> None:
        self._view: SpeedView | None = None
        # (job type, GPU type, GPUs) -> steps/s of a running job, for self._view.
        self._running: dict[tuple[str, str, tuple[str, ...]], float] = {}
        # job id -> (the job, its steps left, predicted_s), for self._view.
        self._predicted: dict[str, tuple[Job, float, float]] = {}

    def view(self, state: ClusterState) -> SpeedView:
        """The speed view of ``state``'s cluster and model (a new one when either changes)."""
        view = self._view
        if view is None or view.model is not state.throughput or view.cluster is not state.cluster:
            view = self._view = SpeedView(state.cluster, state.throughput)
            self._running.clear()
            self._predicted.clear()
        return view

    def speeds(self, state: ClusterState, job: Job, count: int | None = None) -> dict[str, float]:
        """``{gpu_type: steps/s}`` for every allowed type with positive throughput, fastest
        first (ties in cluster order)."""
        return self.view(state).by_type(job, count)

    def fastest(self, state: ClusterState, job: Job, count: int | None = None) -> float:
        """The job's best predicted steps/s at ``count`` GPUs (0 if it cannot run)."""
        return next(iter(self.speeds(state, job, count).values()), 0.0)

    def predicted_s(self, state: ClusterState, job: Job, work: float | None = None) -> float:
        """Seconds to do ``work`` steps (default: its remaining steps) on its fastest
        configuration at its requested gang size."""
        if work is not None:
            speed = self.fastest(state, job)
            return work / speed if speed > 0 else math.inf
        # A waiting job's steps do not change: remembered per job (the same job object).
        steps = state.remaining.get(job.id, job.work)
        self.view(state)  # forgets them when the model or the cluster changed
        known = self._predicted
        found = known.get(job.id)
        if found is not None and found[0] is job and found[1] == steps:
            return found[2]
        speed = self.fastest(state, job)
        seconds = steps / speed if speed > 0 else math.inf
        if len(known) > 1 << 17:
            known.clear()
        known[job.id] = (job, steps, seconds)
        return seconds

    def running_speed(self, state: ClusterState, run: RunningJob) -> float:
        """Predicted steps/s of a running job where it runs now (remembered per job type
        and GPUs for the model and cluster of :meth:`view`)."""
        known = self._running
        self.view(state)  # forgets them when the model or the cluster changed
        key = (run.job.job_type, run.gpu_type, run.gpus)
        speed = known.get(key)
        if speed is None:
            if len(known) > 1 << 16:
                known.clear()
            speed = known[key] = throughput_of(
                state.throughput, run.job.job_type, run.gpu_type, len(run.gpus),
                state.cluster.placement_of(run.gpus))
        return speed


class ReleaseTimes:
    """When each GPU is predicted to be free, per type: now for a free GPU, now plus the
    predicted remaining time of the job holding it otherwise (from the policy's model).
    :meth:`hold` books GPUs a decision hands out, so the jobs after it in the same
    decision see them busy.

    Free GPUs are only counted per type (they all free now), so building one costs time
    in the GPU types and the running jobs' GPUs, not in the cluster's idle GPUs."""

    def __init__(self, state: ClusterState, speeds: SpeedBook) -> None:
        self.now = state.now
        self.idle = {t: state.free_gpus(t) for t in state.cluster.type_names}
        self._type_of = layout(state.cluster).type_of
        # GPU id of a running job -> predicted release (s): a GPU shared by jobs that ask
        # for a share of it is free when the last of them ends.
        self.at: dict[str, float] = {}
        for run in state.running:
            speed = speeds.running_speed(state, run)
            end = state.now + run.remaining / speed if speed > 0 else math.inf
            for g in run.gpus:
                self.at[g] = max(end, self.at.get(g, end))
        busy: dict[str, list[float]] = {t: [] for t in state.cluster.type_names}
        for g, end in self.at.items():
            busy[self._type_of[g]].append(end)
        self.busy = {t: sorted(v) for t, v in busy.items()}

    def hold(self, gpus: Iterable[str], until: float) -> None:
        """``gpus`` are taken now and predicted free again at ``until`` (s)."""
        for g in gpus:
            gpu_type = self._type_of[g]
            times = self.busy[gpu_type]
            old = self.at.get(g)
            if old is None:  # a free GPU
                self.idle[gpu_type] -= 1
            else:
                index = bisect.bisect_left(times, old)
                if index < len(times) and times[index] == old:
                    del times[index]
            bisect.insort(times, until)
            self.at[g] = until

    def earliest(self, gpu_type: str, count: int) -> float:
        """The earliest time ``count`` GPUs of ``gpu_type`` are predicted free."""
        idle = self.idle.get(gpu_type, 0)
        if count <= idle:
            return self.now
        times = self.busy.get(gpu_type, [])
        return times[count - idle - 1] if count - idle <= len(times) else math.inf


def worth_starting(state: ClusterState, job: Job, speeds: Mapping[str, float],
                   releases: ReleaseTimes) -> list[str]:
    """The GPU types (of ``speeds``, fastest first) where starting ``job`` now finishes no
    later than waiting for any type to free a gang (:class:`ReleaseTimes`) and running
    there: a job does not start on a much slower type when a faster one frees soon."""
    steps = state.remaining.get(job.id, job.work)
    finish = {t: releases.earliest(t, job.num_gpus) + steps / s for t, s in speeds.items()}
    if not finish:
        return []
    best = min(finish.values())
    return [t for t, s in speeds.items()
            if state.now + steps / s <= best + 1e-9 * max(1.0, abs(best))]


class TypeChoice:
    """For each job, the GPU types to try now, fastest first: those
    :func:`worth_starting` says; every usable type for a promoted job (the starvation
    guard takes any GPU). :meth:`started` books a start of the same decision (its GPUs
    are busy until its predicted end), so a later job does not wait for a GPU an
    earlier one just took: it weighs a slower free type against that GPU's real release."""

    def __init__(self, state: ClusterState, book: SpeedBook,
                 promoted: AbstractSet[str] = frozenset()) -> None:
        self.state = state
        self.book = book
        self.promoted = promoted
        # (GPU type, gang size) -> ReleaseTimes.earliest, until the next start.
        self._earliest: dict[tuple[str, int], float] = {}
        #: how many starts were booked (:meth:`started`)
        self.starts = 0

    @cached_property
    def releases(self) -> ReleaseTimes:
        """When each GPU frees (built when first needed: a decision where no job can
        start never needs it; the state does not change during a decision)."""
        return ReleaseTimes(self.state, self.book)

    def __call__(self, job: Job) -> list[str]:
        """The types to try for ``job``, fastest first (:func:`worth_starting`'s answer,
        computed the same way, with the earliest releases remembered between starts)."""
        state = self.state
        speeds = self.book.speeds(state, job)
        if job.id in self.promoted or not speeds:
            return list(speeds)
        steps = state.remaining.get(job.id, job.work)
        count = job.num_gpus
        earliest = self._earliest
        best = math.inf
        for gpu_type, speed in speeds.items():
            key = (gpu_type, count)
            free_at = earliest.get(key)
            if free_at is None:
                free_at = earliest[key] = self.releases.earliest(gpu_type, count)
            best = min(best, free_at + steps / speed)
        limit = best + 1e-9 * max(1.0, abs(best))
        now = state.now
        return [t for t, s in speeds.items() if now + steps / s <= limit]

    def candidates(self, job: Job) -> list[str]:
        """Every type ``job`` could be given (what :meth:`__call__` picks from)."""
        return list(self.book.speeds(self.state, job))

    def started(self, job: Job, start: Start) -> None:
        """``job`` starts now as ``start`` says: its GPUs are busy until its predicted end."""
        speed = self.book.speeds(self.state, job, len(start.gpus)).get(start.gpu_type, 0.0)
        steps = self.state.remaining.get(job.id, job.work)
        self._earliest.clear()
        self.starts += 1
        self.releases.hold(start.gpus, self.state.now + steps / speed if speed > 0
                           else math.inf)


def types_worth_starting(state: ClusterState, book: SpeedBook,
                         promoted: AbstractSet[str] = frozenset()) -> TypeChoice:
    """The :class:`TypeChoice` of a decision (call it with a job: its types to try)."""
    return TypeChoice(state, book, promoted)
