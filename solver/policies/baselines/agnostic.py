"""Heterogeneity-agnostic variants: any policy, shown a throughput model in which every
GPU type runs a job as fast as one reference type, but where a job cannot run it still
cannot."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hetsched.core.records import Job
from hetsched.core.throughput import Placement, ThroughputModel
from hetsched.policies.rolling import (
    ClusterState,
    Decision,
    PolicyHooks,
    RollingPolicy,
    quiet_until,
)

#: The suffix that makes any policy name heterogeneity-agnostic.
AGNOSTIC_SUFFIX = "-agnostic"


class AgnosticView:
    """``base`` with the GPU types made alike: for every (job type, GPU count, placement),
    each of ``gpu_types`` where ``base`` is positive gets the *slowest* positive
    throughput among them (Gavel's heterogeneity-agnostic baselines see a job run equally
    fast everywhere; the slowest type is the one a policy can count on); a 0 stays 0, so
    a policy never places a job where it cannot run."""

    def __init__(self, base: ThroughputModel, gpu_types: Sequence[str]) -> None:
        self.base = base
        self.gpu_types = tuple(gpu_types)
        self._reference: dict[tuple[str, int, Placement], float] = {}

    def reference(self, job_type: str, num_gpus: int, placement: Placement) -> float:
        """The slowest positive steps/s over the GPU types (0 if none is positive)."""
        key = (job_type, num_gpus, Placement(placement))
        found = self._reference.get(key)
        if found is None:
            positive = [v for t in self.gpu_types
                        if (v := self.base.throughput(job_type, t, num_gpus, key[2])) > 0]
            found = min(positive, default=0.0)
            self._reference[key] = found
        return found

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        """The reference steps/s where ``base`` is positive, else 0.0."""
        if self.base.throughput(job_type, gpu_type, num_gpus, placement) <= 0:
            return 0.0
        return self.reference(job_type, num_gpus, placement)


class HeterogeneityAgnostic(PolicyHooks):
    """Runs ``policy`` on states whose throughput model is an :class:`AgnosticView` of the
    real one (over the cluster's GPU types). Works for native baselines and for
    ``Replanning`` (which builds its instance from ``state.throughput``)."""

    def __init__(self, policy: RollingPolicy) -> None:
        self.policy = policy
        self.name = policy.name + AGNOSTIC_SUFFIX
        self._views: dict[tuple[int, tuple[str, ...]], tuple[ThroughputModel, AgnosticView]] \
            = {}

    @property
    def round_s(self) -> float | None:
        """The wrapped policy's round (s), or ``None``."""
        return self.policy.round_s

    def view(self, state: ClusterState) -> AgnosticView:
        """The agnostic view of ``state.throughput`` (one per model, so caches persist)."""
        key = (id(state.throughput), state.cluster.type_names)
        found = self._views.get(key)
        if found is None or found[0] is not state.throughput:
            found = (state.throughput, AgnosticView(state.throughput, state.cluster.type_names))
            self._views[key] = found
        return found[1]

    def decide(self, state: ClusterState) -> Decision:
        """The wrapped policy's decision on the agnostic state."""
        return self.policy.decide(dataclasses.replace(state, throughput=self.view(state)))

    def quiet_until(self, state: ClusterState) -> float:
        """The wrapped policy's ``quiet_until`` on the agnostic state (``-inf``: none)."""
        return quiet_until(self.policy, dataclasses.replace(state, throughput=self.view(state)))

    def on_finished(self, job: Job, now: float) -> None:
        """The wrapped policy's ``on_finished``."""
        self.policy.on_finished(job, now)

    def figures(self) -> dict[str, object]:
        """The wrapped policy's figures."""
        return self.policy.figures()
