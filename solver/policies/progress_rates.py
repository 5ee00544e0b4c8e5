"""The rates ahead that ``progress`` plans an elastic job with (``plan_ahead``), kept for
the next decision.

A job whose speed changes with its progress (an elastic job's epochs) is planned on each
(GPU type, size) with its steps/s over the next ``horizon_s`` seconds from where it is
(:func:`~hetsched.core.throughput.throughput_ahead`). That rate is a function of the job's
type, the option, its placement's speed, the steps it has done and the horizon, under one
model: a waiting job keeps its steps done while it waits, and jobs of one workload often
share a type and a start (Sia's 32x workload issues every job 32 times), so most of a
decision's rates were asked before. :class:`RatesAhead` answers them from the last two
decisions' answers (two generations: what a decision does not ask again is dropped at the
next, so the memory holds about two decisions' rates); the answers are the function's,
so the decisions are the same (a test replays with and without it).
"""

from __future__ import annotations

from hetsched.allocation.layout import throughput_of
from hetsched.core.records import Job
from hetsched.core.throughput import Placement, ThroughputModel, throughput_ahead
from hetsched.policies.rolling import ClusterState

#: (job type, GPU type, size, speed, steps done, horizon)
Key = tuple[str, str, int, float, float, float]


def rate_ahead(state: ClusterState, job: Job, gpu_type: str, size: int, speed: float,
               done: float, horizon_s: float) -> float:
    """``job``'s steps/s over the next ``horizon_s`` seconds once it has done ``done``, on
    ``size`` GPUs of ``gpu_type`` at the placement that gives ``speed`` (:class:`SpeedBook`'s:
    the best the cluster allows), from the model the policy sees
    (:func:`~hetsched.core.throughput.throughput_ahead`)."""
    model = state.throughput
    for placement in Placement:
        if throughput_of(model, job.job_type, gpu_type, size, placement) == speed:
            return throughput_ahead(model, job.job_type, gpu_type, size, placement, done,
                                    horizon_s)
    return speed


class RatesAhead:
    """:func:`rate_ahead`, remembered for a decision and the next (see the module)."""

    def __init__(self) -> None:
        self._model: ThroughputModel | None = None
        self._now: dict[Key, float] = {}
        self._before: dict[Key, float] = {}

    def decision(self, model: ThroughputModel) -> None:
        """A decision begins under ``model``: the one before's answers are kept, older
        ones dropped (all of them if the model changed)."""
        if model is not self._model:
            self._model, self._now, self._before = model, {}, {}
        else:
            self._before, self._now = self._now, {}

    def rate(self, state: ClusterState, job: Job, gpu_type: str, size: int, speed: float,
             done: float, horizon_s: float) -> float:
        """:func:`rate_ahead`, from memory when it was asked in this decision or the
        last."""
        key = (job.job_type, gpu_type, size, speed, done, horizon_s)
        found = self._now.get(key)
        if found is None:
            found = self._before.get(key)
            if found is None:
                found = rate_ahead(state, job, gpu_type, size, speed, done, horizon_s)
            self._now[key] = found
        return found
