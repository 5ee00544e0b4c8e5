"""A rolling policy driven under guard (:class:`PolicyDriver`): every call into the policy
(``decide``, ``on_stall``, ``quiet_until``, ``on_finished``) made within the replay's
wall-clock limit per call, what it returns checked to be a :class:`Decision`, and each
start it asks for checked against the cluster, the queue and the free GPUs
(:func:`start_problem`) before anything is applied. The simulator ends a replay on the
:class:`~hetsched.core.errors.PolicyError` these raise; the live agent
(:mod:`hetsched.slurm.agent`) asks through the same driver and skips what is refused,
keeping what runs. A policy of yours is code neither trusts (docs/policies.md, "Checked,
not trusted")."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import partial

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.errors import PolicyError
from hetsched.core.interrupts import WallClockLimit
from hetsched.core.records import Cluster, Job, packed_holder
from hetsched.core.throughput import ThroughputModel
from hetsched.policies.rolling import (
    ClusterState,
    Decision,
    QueuePolicy,
    RollingPolicy,
    quiet_until,
)
from hetsched.simulate.guard import ask, checked_decision

__all__ = ["PolicyDriver", "start_problem"]


class PolicyDriver:
    """``policy`` asked under ``limit`` (:func:`~hetsched.simulate.guard.ask`); each
    method raises a :class:`PolicyError` naming the policy, the time and what went
    wrong. ``queue_policy``: the policy when it is a
    :class:`~hetsched.policies.rolling.QueuePolicy` (FIFO), which is handed the queue and
    the free GPUs instead of a state."""

    def __init__(self, policy: RollingPolicy, limit: WallClockLimit | None = None) -> None:
        self.policy = policy
        self.limit = limit or WallClockLimit(None)
        self.queue_policy = policy if isinstance(policy, QueuePolicy) else None

    @property
    def name(self) -> str:
        """The policy's name, as errors give it."""
        return self.policy.name

    def decide(self, state: ClusterState) -> Decision:
        """The policy's decision on ``state``, checked to be one."""
        return self._decision("decide", self.policy.decide, state)

    def on_stall(self, state: ClusterState) -> Decision:
        """The policy's decision when nothing runs and nothing will arrive."""
        return self._decision("on_stall", self.policy.on_stall, state)

    def queue_starts(self, pending: Iterable[Job], free: FreeGpuIndex,
                     model: ThroughputModel) -> Decision:
        """A queue policy's starts: the prefix of ``pending`` it starts on a fork of
        ``free``."""
        assert self.queue_policy is not None
        return Decision(self.queue_policy.start_prefix(pending, free.fork(), model))

    def quiet_until(self, state: ClusterState | None, now: float) -> float:
        """Until when the policy's boundary calls would change nothing (s): ``inf`` for a
        queue policy, ``-inf`` without a state."""
        if self.queue_policy is not None:
            return math.inf
        return ask(self.name, now, "quiet_until", partial(self._quiet_until, state),
                   self.limit)

    def finished(self, job: Job, at: float, now: float) -> None:
        """Tell the policy ``job`` finished at ``at`` (s)."""
        ask(self.name, now, "on_finished", partial(self.policy.on_finished, job, at),
            self.limit)

    def check_start(self, start: Start, pending: dict[str, Job], cluster: Cluster,
                    throughput: ThroughputModel, holds: Callable[[tuple[str, ...], Job], bool],
                    now: float) -> Job:
        """The pending job ``start`` starts, if :func:`start_problem` finds nothing wrong
        with it; a :class:`PolicyError` naming what it broke otherwise."""
        job = pending.get(start.job)
        if job is None:
            raise PolicyError(self.name, now, "started a job that is not pending", start.job)
        problem = start_problem(start, job, cluster, throughput, holds)
        if problem:
            raise PolicyError(self.name, now, problem, job.id)
        return job

    def _decision(self, what: str, call: Callable[[ClusterState], object],
                  state: ClusterState) -> Decision:
        now = state.now
        return checked_decision(self.name, now,
                                ask(self.name, now, what, partial(call, state), self.limit))

    def _quiet_until(self, state: ClusterState | None) -> float:
        return -math.inf if state is None else quiet_until(self.policy, state)


def start_problem(start: Start, job: Job, cluster: Cluster, throughput: ThroughputModel,
                  holds: Callable[[tuple[str, ...], Job], bool]) -> str:
    """What is wrong with starting ``job`` as ``start`` ("" if nothing): it must be on
    GPUs of the cluster of one type the job may use, on nodes it may use, that ``holds``
    says are free for it (a packed start: one GPU, free or holding one packed job), in a
    gang size it allows, where ``throughput`` is above 0."""
    gpus = cluster.gpu_by_id
    unknown = [g for g in start.gpus if g not in gpus]
    if unknown:
        return f"started it on GPUs the cluster does not have: {unknown[:3]}"
    if start.packed and (job.gpu_share is not None or len(start.gpus) != 1):
        return ("packed a job that is not a whole job of one GPU "
                f"({len(start.gpus)} GPUs, share {job.gpu_share})")
    holder = packed_holder(job) if start.packed else job
    if len(set(start.gpus)) != len(start.gpus) or not holds(start.gpus, holder):
        return ("started it on GPUs that are not free (or without its share, CPUs or memory "
                f"there): {list(start.gpus)}")
    if any(gpus[g].gpu_type != start.gpu_type for g in start.gpus) or not job.may_use(
            start.gpu_type):
        return "started it on GPUs of the wrong type"
    if any(not job.may_use_node(gpus[g].node) for g in start.gpus):
        return "started it on a node it may not use"
    if len(start.gpus) not in job.gpu_counts:
        return f"gave it {len(start.gpus)} GPUs, allowed {list(job.gpu_counts)}"
    if throughput.throughput(job.job_type, start.gpu_type, len(start.gpus),
                             cluster.placement_of(start.gpus)) <= 0:
        return "put it where its measured throughput is 0"
    return ""
