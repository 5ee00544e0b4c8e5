"""Rolling policies: what a scheduler sees at a decision point and what it returns.

At every decision point the simulator (:mod:`hetsched.simulate`) hands a policy a
:class:`ClusterState`: the time, the free GPUs, the running jobs (placement,
remaining work) and the pending jobs (arrived, not running, with their remaining work),
and the throughput model the policy may use (the *fitted* one; the simulator advances
jobs at the *measured* speed). The policy returns a :class:`Decision`: which pending
jobs start now on which GPUs, and which running jobs are preempted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from hetsched.data import Cluster, Job
from hetsched.gpus import FreeGpuIndex, Start
from hetsched.throughput import ThroughputModel


@dataclass(frozen=True)
class RunningJob:
    """A job holding GPUs: since ``started`` (s), ``remaining`` steps left at ``now``."""

    job: Job
    gpu_type: str
    gpus: tuple[str, ...]
    started: float
    remaining: float


@dataclass(frozen=True)
class ClusterState:
    """What a policy sees at time ``now`` (s)."""

    now: float
    cluster: Cluster
    throughput: ThroughputModel
    pending: tuple[Job, ...]  # arrived and not running, in arrival order
    remaining: Mapping[str, float]  # steps left for every pending job (preempted jobs: less)
    running: tuple[RunningJob, ...]
    free: frozenset[str]  # free GPU ids
    attained: Mapping[str, float] = field(default_factory=dict)  # GPU-seconds received so far
    preemptions: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """Jobs to preempt (their GPUs are freed first) and jobs to start now."""

    start: tuple[Start, ...] = ()
    preempt: tuple[str, ...] = ()
    #: True when the policy's own method failed and a heuristic decided instead.
    fallback: bool = False
    note: str = ""


class RollingPolicy(Protocol):
    """A scheduler driven by the simulator.

    ``round_s`` declares the policy's round (s), or ``None``: a round-based policy is
    called at every round boundary (the first decision time plus a multiple of
    ``round_s``) while any job runs or waits, besides arrivals and completions while jobs
    wait; a policy without rounds only at those events. A boundary where nothing changes
    should return an empty :class:`Decision` quickly.

    Two hooks, with defaults in :class:`PolicyHooks` (which every policy class inherits):
    ``quiet_until(state)``, asked right after ``decide(state)`` returned an empty
    decision at a boundary: the time (s; ``inf``: until the next event, ``-inf``: no
    promise) before which calls at later boundaries, with no arrival or completion in
    between, would return empty decisions and change nothing that matters to its later
    decisions, provided it is still called at the last boundary before the next event
    (the simulator then skips the others, :mod:`hetsched.simulate`); and
    ``on_finished(job, now)``, called when a job completes; and ``figures()``, what the
    policy reports of itself in ``summary.json`` (nothing by default)."""

    name: str

    @property
    def round_s(self) -> float | None:
        """The round length (s), or ``None`` for a policy driven by events only."""
        ...

    def decide(self, state: ClusterState) -> Decision:
        """What to start and preempt at ``state.now``."""
        ...

    def quiet_until(self, state: ClusterState) -> float:
        """Until when boundary calls would change nothing (s); ``-inf``: no promise."""
        ...

    def on_finished(self, job: Job, now: float) -> None:
        """``job`` completed at ``now`` (s)."""
        ...

    def figures(self) -> dict[str, object]:
        """The policy's own figures for ``summary.json`` (e.g. POP's objective ratios)."""
        ...


class PolicyHooks:
    """The hooks of :class:`RollingPolicy` with their defaults: no promise of quiet
    rounds, nothing to do when a job finishes. Every policy class inherits it and
    overrides what it uses."""

    def quiet_until(self, state: ClusterState) -> float:
        """No promise: ``-inf``."""
        return -math.inf

    def on_finished(self, job: Job, now: float) -> None:
        """Nothing to do."""

    def figures(self) -> dict[str, object]:
        """None."""
        return {}


@runtime_checkable
class QueuePolicy(Protocol):
    """A rolling policy that decides from the queue and the free GPUs alone (FIFO): the
    simulator drives it without a :class:`ClusterState`, keeping a :class:`FreeGpuIndex`
    up to date and calling :meth:`start_prefix` at every event, so an event costs time
    in what changed, not in the queue or the cluster. Its ``decide`` must start the same
    jobs."""

    def start_prefix(self, queue: Iterable[Job], free: FreeGpuIndex,
                     model: ThroughputModel) -> tuple[Start, ...]:
        """The starts for ``queue`` (in order) on ``free`` (their GPUs taken from it)."""
        ...


def quiet_until(policy: RollingPolicy, state: ClusterState) -> float:
    """``policy.quiet_until(state)`` (see :class:`RollingPolicy`), ``-inf`` for an answer
    that is not a number."""
    value = float(policy.quiet_until(state))
    return -math.inf if math.isnan(value) else value


def first_fit_gpus(state: ClusterState, job: Job, free: set[str],
                   count: int | None = None) -> Start | None:
    """GPUs for ``job`` now: packed on the first node (cluster order) of an allowed type with
    enough free GPUs and positive packed throughput, else spread over the first free GPUs
    (cluster order) of the first type where spread throughput is positive, at most
    ``size - 1`` of them on the first node so that the gang does span two nodes; ``None``
    if neither fits."""
    return FreeGpuIndex(state.cluster, free).first_fit(job, count or job.num_gpus,
                                                       state.throughput)


class RollingFifo(PolicyHooks):
    """First in, first out: start pending jobs in arrival order while first fit finds them
    GPUs; stop at the first that does not fit (no backfilling, no preemption).

    It keeps a :class:`FreeGpuIndex` of the last cluster between decisions and brings it
    in step with each state's free GPUs, so a decision costs time in the GPUs that
    changed and the nodes scanned, not in every GPU of the cluster."""

    name = "fifo"
    round_s: float | None = None  # events only

    def __init__(self) -> None:
        self._cluster: Cluster | None = None
        self._index: FreeGpuIndex | None = None

    def decide(self, state: ClusterState) -> Decision:
        """Start the longest prefix of the queue that fits now."""
        if self._index is None or state.cluster is not self._cluster:
            self._cluster, self._index = state.cluster, FreeGpuIndex(state.cluster)
        self._index.sync(state.free)
        return Decision(self.start_prefix(state.pending, self._index, state.throughput))

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event: FIFO keeps no state, and a queue that does not fit now
        does not fit until a job arrives or ends."""
        return math.inf

    @staticmethod
    def start_prefix(queue: Iterable[Job], free: FreeGpuIndex,
                     model: ThroughputModel) -> tuple[Start, ...]:
        """Starts, by first fit on ``free`` (their GPUs are taken from it), for the longest
        prefix of ``queue`` that fits. The simulator calls this directly for the native
        FIFO, with the queue and an index it keeps up to date, instead of building a
        :class:`ClusterState` at every event (same decisions, time in what changed)."""
        starts = []
        for job in queue:
            chosen = free.first_fit(job, job.num_gpus, model)
            if chosen is None:
                break
            starts.append(chosen)
            free.take(chosen.gpus)
        return tuple(starts)
