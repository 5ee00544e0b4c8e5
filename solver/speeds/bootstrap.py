"""What a scheduler knows of elastic jobs' speeds when, as in Sia, each is profiled on one
GPU of each type and learns how it scales only as it runs (``--learn bootstrap``).

Sia (Jayaram Subramanya et al., SOSP'23; artifact ``siasosp23/artifacts``,
``sia-simulator/``, run as its ``run_experiment.sh`` runs it, ``--project_throughput
--share_max_replicas``) does not give its policy the true goodput of a job on every
(GPU type, GPU count):

* a job is profiled on one GPU of each type at its start (``Cluster.compute_throughputs``
  and ``compute_throughput_ratios`` in ``cluster.py``: the one-GPU throughput on each
  type and their ratios);
* on a type where the job has run, the policy uses the job's model fitted to what it ran
  there (``Job.update_params`` refits the job's ``perf_params`` of that type from its
  profile after each new configuration, ``job.py``);
* on a type where it has not run, the model of a type where it has, times the one-GPU
  ratio of the two types (``SiaPolicy._compute_goodputs_v2``, ``sia.py``); where it has
  run nowhere, the raw one-GPU throughput, whatever the count;
* the job may grow to at most twice the most GPUs it has run on, on any type
  (``Cluster.get_sia_multi_job_info``: ``max_replicas`` = max(2 x most profiled, 1),
  shared over the types by ``--share_max_replicas``).

:class:`BootstrapThroughput` answers a policy this way over a true model (Sia's
measurements, :class:`~hetsched.speeds.sia.SiaThroughput`, or any model with the same
methods) and what has run so far (``ran``: the GPU types each job type has run on, and
the most GPUs it ran on): on a type it ran on, the truth at every count up to the limit
(Sia's fitted model, read as exact: hetsched's stand-in for a fit from the few
configurations run); on another type, the truth of the types it ran on (the median,
packed where the gang fits a node) times the one-GPU ratio; nowhere yet, one GPU only, at
its true one-GPU speed. Everywhere 0 where the truth says the job cannot run (out of
memory, a batch too large), as every replay's policy sees (``PolicyView``). Only the
*elastic* job types (``elastic``) are bootstrapped; a rigid job is profiled where it
asks to run (Sia's ``seed_profiles_rigid``) and answered by the truth.

Two differences from Sia, both kept on purpose: what a job type learns is shared by every
job of that type (hetsched's job type is the unit of what is known, as in ``--learn`` of
rigid jobs and in the live agent; Sia keeps it per job, so there every new job starts
from one GPU), and the model is frozen: a new object whenever something is learned
(:meth:`BootstrapThroughput.learn`), so a policy's caches keyed on the model stay right.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import median
from types import MappingProxyType
from typing import Protocol

from hetsched.core.throughput import (
    Placement,
    ThroughputModel,
    speed_change_after,
    throughput_after,
    throughput_ahead,
)


class _SpeedOf(Protocol):
    def __call__(self, gpu_type: str, num_gpus: int, placement: Placement) -> float: ...


@dataclass(frozen=True, eq=False)
class BootstrapThroughput:
    """The policy's view of the speeds under Sia's bootstrap (see the module)."""

    truth: ThroughputModel
    #: the job types bootstrapped (the trace's elastic ones); the others see the truth
    elastic: frozenset[str]
    #: job type -> the GPU types it has run on
    ran: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: job type -> the most GPUs one of its runs had
    most: Mapping[str, int] = field(default_factory=dict)
    _ratios: dict[tuple[str, str, str], float] = field(default_factory=dict, init=False,
                                                        repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "elastic", frozenset(self.elastic))
        object.__setattr__(self, "ran", MappingProxyType(dict(self.ran)))
        object.__setattr__(self, "most", MappingProxyType(dict(self.most)))

    def learn(self, job_type: str, gpu_type: str, num_gpus: int) -> BootstrapThroughput:
        """This model after a run of ``job_type`` on ``num_gpus`` GPUs of ``gpu_type``
        made progress: itself when that teaches nothing new, else a new model."""
        if job_type not in self.elastic:
            return self
        types = self.ran.get(job_type, frozenset())
        if gpu_type in types and num_gpus <= self.most.get(job_type, 0):
            return self
        return BootstrapThroughput(
            self.truth, self.elastic, {**self.ran, job_type: types | {gpu_type}},
            {**self.most, job_type: max(num_gpus, self.most.get(job_type, 0))})

    def limit(self, job_type: str) -> int:
        """The most GPUs ``job_type`` may be planned on: twice the most it ran on, 1 before
        it ran (Sia's ``max_replicas``)."""
        return max(2 * self.most.get(job_type, 0), 1)

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        """steps/s as the policy knows it (see the module); 0.0: not to be planned."""
        return self._answer(job_type, gpu_type, num_gpus, placement,
                            lambda g, n, p: self.truth.throughput(job_type, g, n, p))

    def throughput_after(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float) -> float:
        """steps/s once the job has done ``done`` of its work, as the policy knows it."""
        return self._answer(job_type, gpu_type, num_gpus, placement,
                            lambda g, n, p: throughput_after(self.truth, job_type, g, n, p,
                                                             done))

    def throughput_ahead(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float, horizon_s: float) -> float:
        """steps/s over the next ``horizon_s`` seconds, as the policy knows it."""
        return self._answer(job_type, gpu_type, num_gpus, placement,
                            lambda g, n, p: throughput_ahead(self.truth, job_type, g, n, p,
                                                             done, horizon_s))

    def speed_change_after(self, job_type: str, done: float) -> float | None:
        """The truth's (an elastic job's next epoch: its gradient statistics, which the
        job measures as it trains)."""
        return speed_change_after(self.truth, job_type, done)

    def _answer(self, job_type: str, gpu_type: str, num_gpus: int, placement: Placement,
                speed_of: _SpeedOf) -> float:
        if self.truth.throughput(job_type, gpu_type, num_gpus, placement) <= 0:
            return 0.0
        if job_type not in self.elastic:
            return speed_of(gpu_type, num_gpus, placement)
        if num_gpus > self.limit(job_type):
            return 0.0
        types = self.ran.get(job_type, frozenset())
        if gpu_type in types or not types:  # (not run anywhere: num_gpus is 1)
            return speed_of(gpu_type, num_gpus, placement)
        projected = []
        for source in sorted(types):
            on = Placement.PACKED
            if self.truth.throughput(job_type, source, num_gpus, on) <= 0:
                on = Placement.SPREAD
            speed = speed_of(source, num_gpus, on)
            if speed > 0:
                projected.append(speed * self._ratio(job_type, gpu_type, source))
        return median(projected) if projected else 0.0

    def _ratio(self, job_type: str, gpu_type: str, source: str) -> float:
        """The job's one-GPU speed on ``gpu_type`` over that on ``source`` (its profile)."""
        key = (job_type, gpu_type, source)
        found = self._ratios.get(key)
        if found is None:
            there = self.truth.throughput(job_type, source, 1, Placement.PACKED)
            here = self.truth.throughput(job_type, gpu_type, 1, Placement.PACKED)
            found = self._ratios[key] = here / there if there > 0 else 0.0
        return found
