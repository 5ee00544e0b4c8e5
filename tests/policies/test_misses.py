"""The short cuts of a long queue (the whole Philly trace) change no decision: the memo of
gangs that found no GPUs in a walk (:class:`Misses`), the types-worth-starting answer
computed with remembered earliest releases, the remembered waiting times of the
starvation guard and the remembered predictions, the queue kept in order from the
replay's log of what joined and left it (with the guard's clocks in a heap), the
walk that looks only at jobs under their kind's bound, Tiresias' look at a running
job's queue only once it could have passed a threshold, a packed gang's search over
victims' nodes stopped by a lower bound, Gavel's fill that skips jobs with no room,
and Optimus' greedy over first steps kept in order. Each policy is replayed on a queue of
hundreds of jobs (the first Philly-like jobs of Gavel's trace at load 4 on a small
cluster) with every short cut and with none; the two runs must be the same, start for
start."""

from __future__ import annotations

import heapq
import math
from collections.abc import Set as AbstractSet

import numpy as np
import pytest

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.core.records import Job
from hetsched.core.settings import ReplaySettings
from hetsched.policies.baselines import common, guarded, kept_queue, walk
from hetsched.policies.baselines.duration import ShortestRemainingTimeFirst
from hetsched.policies.baselines.gavel_rounds import Pairs
from hetsched.policies.baselines.optimus import Optimus
from hetsched.policies.baselines.tiresias import Tiresias
from hetsched.policies.rolling import ClusterState, Decision
from hetsched.policies.starting import (
    SpeedBook,
    TypeChoice,
    types_worth_starting,
    worth_starting,
)
from hetsched.replaying import replay_trace
from hetsched.simulate.record import Replay
from tests.helpers import SHARED_DATA

GAVEL = SHARED_DATA / "gavel" / "traces" / "ee9e8c.trace"
pytestmark = pytest.mark.skipif(not GAVEL.is_file(),
                                reason=f"{GAVEL} is absent (../shared/data)")


def runs(replay: Replay) -> list[tuple[str, str, tuple[str, ...], float, float]]:
    return sorted((s.job, s.gpu_type, s.gpus, s.start, s.finish)
                  for record in replay.records.values() for s in record.segments)


def without_short_cuts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The code as it was: no memo, worth_starting called afresh, no remembered wait."""
    monkeypatch.setattr(common.Misses, "recordable", staticmethod(lambda job: False))
    monkeypatch.setattr(common.Misses, "hopeless", lambda self, *args: False)

    def call(self: TypeChoice, job: Job) -> list[str]:
        speeds = self.book.speeds(self.state, job)
        return list(speeds) if job.id in self.promoted else \
            worth_starting(self.state, job, speeds, self.releases)

    monkeypatch.setattr(TypeChoice, "__call__", call)

    def predicted(self: SpeedBook, state: object, job: Job, work: float | None = None) -> float:
        steps = state.remaining.get(job.id, job.work) if work is None else work  # type: ignore[attr-defined]
        speed = self.fastest(state, job)  # type: ignore[arg-type]
        return steps / speed if speed > 0 else math.inf

    monkeypatch.setattr(SpeedBook, "predicted_s", predicted)
    # Every decision reads the whole queue (no log followed), sorts it and walks every
    # job, as the policies did before they kept their queue.
    monkeypatch.setattr(kept_queue.FeedReader, "read",
                        lambda self, state: self._whole(state))
    monkeypatch.setattr(walk, "_rules", lambda *args: {})
    monkeypatch.setattr(guarded.GuardedOrder, "decide", sorted_guarded_order)
    monkeypatch.setattr(ShortestRemainingTimeFirst, "decide", sorted_srtf)
    # Tiresias looks at every running job's queue at every decision; a packed gang's
    # search scores every node with victims; Gavel's fill walks every waiting job.
    monkeypatch.setattr(Tiresias, "_place_running",
                        lambda self, job, gpus, attained, running, now:
                        self._place(job, attained, running, now))
    monkeypatch.setattr(FreeGpuIndex, "_packed_bound", lambda self, pos, count: (-1, -1, pos))
    monkeypatch.setattr(Pairs, "with_room",
                        lambda self, state, waiting, pool: np.ones(len(waiting), dtype=bool))
    monkeypatch.setattr(Optimus, "_allocate", heap_allocate)


def heap_allocate(self: Optimus, state: ClusterState, excluded: AbstractSet[str],
                  pool: FreeGpuIndex, reserved: set[str]) -> list[tuple[Job, str, int]]:
    """Optimus' greedy as it was: a heap of every waiting job's steps at every decision."""
    jobs = [job for job in state.pending if job.id not in excluded]
    types = state.cluster.type_names
    left = {t: 0 if t in reserved else pool.available(t, with_victims=False) for t in types}
    rate: dict[tuple[str, str, int], float] = {}
    heap: list[tuple[float, float, str, int, int, int]] = []
    by_id = {job.id: job for job in jobs}
    version = dict.fromkeys(by_id, 0)
    current: dict[str, tuple[int, int]] = {}

    def push(job: Job, type_index: int | None, count: int) -> None:
        base = 0.0 if type_index is None else rate[job.id, types[type_index], count]
        for k, gpu_type in enumerate(types):
            if type_index is not None and k != type_index:
                continue
            for size in job.gpu_counts:
                if size <= count:
                    continue
                key = (job.id, gpu_type, size)
                if key not in rate:
                    speed = self.speeds.speeds(state, job, size).get(gpu_type, 0.0)
                    remaining = max(state.remaining.get(job.id, job.work), 1e-9)
                    rate[key] = speed / remaining
                gain = (rate[key] - base) / (size - count)
                if gain > 0:
                    heapq.heappush(heap, (-gain, job.arrival, job.id, k, size,
                                          version[job.id]))

    for job in jobs:
        push(job, None, 0)
    while heap:
        _, _, job_id, k, size, stamp = heapq.heappop(heap)
        if stamp != version[job_id]:
            continue
        _, had = current.get(job_id, (k, 0))
        if left[types[k]] < size - had:
            continue
        left[types[k]] -= size - had
        current[job_id] = (k, size)
        version[job_id] += 1
        push(by_id[job_id], k, size)
    return [(by_id[j], types[k], n) for j, (k, n) in current.items()]


def sorted_guarded_order(self: guarded.GuardedOrder, state: ClusterState) -> Decision:
    """SJF's and EDF's decision as it was: the whole queue sorted at every decision."""
    promoted = self.guard.update(state, lambda job: self.speeds.predicted_s(state, job))
    if not state.pending or not state.has_free():
        return Decision()

    def key(job: Job) -> tuple[int, tuple[float, float, str]]:
        if job.id in promoted:
            return (0, (job.arrival, 0.0, job.id))
        return (1, self.rank(state, job))

    return common.start_in_order(state, sorted(state.pending, key=key),
                                 types_worth_starting(state, self.speeds, promoted),
                                 reserves=lambda job: job.id in promoted)


def sorted_srtf(self: ShortestRemainingTimeFirst, state: ClusterState) -> Decision:
    """SRTF's decision as it was: every active job keyed and sorted at every decision."""
    promoted = self.guard.update(state, lambda job: self.speeds.predicted_s(state, job))
    if not state.pending:
        return Decision()
    keys: dict[str, tuple[float, float, float, str]] = {}
    for run in state.running:
        job = run.job
        keys[job.id] = (0, 0, job.arrival, job.id) if job.id in promoted else \
            (1, self.speeds.predicted_s(state, job, run.remaining), job.arrival, job.id)
    for job in state.pending:
        keys[job.id] = (0, 1, job.arrival, job.id) if job.id in promoted else \
            (1, self.speeds.predicted_s(state, job) * (1 + self.margin)
             + self.restart_penalty_s, job.arrival, job.id)
    order = sorted([*state.pending, *(r.job for r in state.running)],
                   key=lambda job: keys[job.id])
    return common.preempt_in_order(state, order,
                                   types_worth_starting(state, self.speeds, promoted))


@pytest.mark.parametrize("policy", [
    "srtf", *(pytest.param(name, marks=pytest.mark.slow)
              for name in ("sjf", "tiresias", "gandiva", "edf", "optimus", "gavel"))])
def test_a_long_queue_is_decided_the_same_with_and_without_short_cuts(
        policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ReplaySettings(limit_jobs=250, load=4.0)
    fast = replay_trace(GAVEL, "gavel", "v100=8,p100=8,k80=8", policy,
                        settings=settings).replay
    peak = max(d.pending for d in fast.decisions)
    assert peak >= 100  # a long queue: the short cuts had work to do
    with monkeypatch.context() as patch:
        without_short_cuts(patch)
        slow = replay_trace(GAVEL, "gavel", "v100=8,p100=8,k80=8", policy,
                            settings=settings).replay
    assert runs(fast) == runs(slow)
    assert [(d.time, d.started, d.preempted) for d in fast.decisions] == \
        [(d.time, d.started, d.preempted) for d in slow.decisions]
