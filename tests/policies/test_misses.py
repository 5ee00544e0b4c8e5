"""The short cuts of a long queue (issue 33, item 18) change no decision: the memo of
gangs that found no GPUs in a walk (:class:`Misses`), the types-worth-starting answer
computed with remembered earliest releases, the remembered waiting times of the
starvation guard and the remembered predictions. Each policy is replayed on a queue of
hundreds of jobs (the first Philly-like jobs of Gavel's trace at load 4 on a small
cluster) with every short cut and with none; the two runs must be the same, start for
start."""

from __future__ import annotations

import math

import pytest

from hetsched.core.records import Job
from hetsched.core.settings import ReplaySettings
from hetsched.policies.baselines import common
from hetsched.policies.starting import SpeedBook, TypeChoice, worth_starting
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


@pytest.mark.parametrize("policy", [
    "srtf", *(pytest.param(name, marks=pytest.mark.slow)
              for name in ("sjf", "tiresias", "gandiva", "edf", "optimus"))])
def test_a_long_queue_is_decided_the_same_with_and_without_short_cuts(
        policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ReplaySettings(limit_jobs=250, load=4.0)
    fast = replay_trace(GAVEL, "gavel", "v100=8,p100=8,k80=8", policy, settings=settings)
    peak = max(d.pending for d in fast.decisions)
    assert peak >= 100  # a long queue: the short cuts had work to do
    with monkeypatch.context() as patch:
        without_short_cuts(patch)
        slow = replay_trace(GAVEL, "gavel", "v100=8,p100=8,k80=8", policy, settings=settings)
    assert runs(fast) == runs(slow)
    assert [(d.time, d.started, d.preempted) for d in fast.decisions] == \
        [(d.time, d.started, d.preempted) for d in slow.decisions]
