"""Rolling policies: what a scheduler sees at a decision point and what it returns.

At every decision point the simulator (:mod:`hetsched.simulate.simulator`) hands a policy a
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
from functools import cached_property
from typing import NamedTuple, Protocol, runtime_checkable

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.records import Cluster, Job, packed_holder
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import ThroughputModel


class Held(NamedTuple):
    """What a running job holds: its GPUs, of ``gpu_type`` (:meth:`ClusterState.held`)."""

    job: Job
    gpu_type: str
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class RunningJob:
    """A job holding GPUs: since ``started`` (s), ``remaining`` steps left at ``now``;
    ``packed``: it holds half of its one GPU, beside at most one other packed job
    (``Start.packed``)."""

    job: Job
    gpu_type: str
    gpus: tuple[str, ...]
    started: float
    remaining: float
    packed: bool = False

    @property
    def holder(self) -> Job:
        """The job as its run holds its GPUs (a packed run: a share of its GPU,
        :func:`hetsched.core.records.packed_holder`)."""
        return packed_holder(self.job) if self.packed else self.job


class PendingLog:
    """Every change of a replay's pending queue, in order: a job joined it (it arrived,
    or was preempted) or left it (it started). The simulator writes it; a policy that
    keeps its own order of the pending jobs from one decision to the next reads what
    changed since it last looked (:class:`PendingFeed`) instead of sorting the whole queue
    at every decision, which costs time in the queue (tens of thousands of jobs on
    philly.csv) at every event."""

    def __init__(self) -> None:
        #: (the job, its id) for a job that joined, (None, its id) for one that left
        self.entries: list[tuple[Job | None, str]] = []

    def joined(self, job: Job) -> None:
        """``job`` waits from now."""
        self.entries.append((job, job.id))

    def left(self, job_id: str) -> None:
        """The job ``job_id`` no longer waits (it started)."""
        self.entries.append((None, job_id))


@dataclass(frozen=True)
class PendingFeed:
    """The pending queue of a state as a point in its :class:`PendingLog`: the state's
    ``pending`` jobs are those of the log's first ``mark`` entries that joined and did
    not leave since. A state derived from another with other pending jobs (a wrapper's)
    carries no feed."""

    log: PendingLog
    mark: int

    def since(self, mark: int) -> list[tuple[Job | None, str]]:
        """The changes after the first ``mark`` entries, up to this state's."""
        return self.log.entries[mark:self.mark]


@dataclass(frozen=True)
class ClusterState:
    """What a policy sees at time ``now`` (s).

    ``free_index``: the simulator's free-GPU index (``None`` for a state made by hand:
    then one is built from ``free`` when first asked for). A policy takes GPUs from
    :meth:`pool` (a working copy, free to change) and asks :meth:`has_free`, which cost
    time in the GPU types and what the decision changes, not in the cluster's nodes;
    reading ``free`` (every free GPU id) costs time in the free GPUs."""

    now: float
    cluster: Cluster
    throughput: ThroughputModel
    pending: tuple[Job, ...]  # arrived and not running, in arrival order
    remaining: Mapping[str, float]  # steps left for every pending job (preempted jobs: less)
    running: tuple[RunningJob, ...]
    free: frozenset[str]  # free GPU ids
    attained: Mapping[str, float] = field(default_factory=dict)  # GPU-seconds received so far
    preemptions: Mapping[str, int] = field(default_factory=dict)
    free_index: FreeGpuIndex | None = field(default=None, compare=False, repr=False)
    #: where ``pending`` stands in the replay's queue log (``None``: unknown; a state
    #: derived with other pending jobs must say ``None``)
    pending_feed: PendingFeed | None = field(default=None, compare=False, repr=False)
    #: how fast jobs sharing a GPU run (the replay's measured pairs; ``None``: unknown)
    colocation: CoLocationModel | None = field(default=None, compare=False, repr=False)

    @cached_property
    def _index(self) -> FreeGpuIndex:
        """The free-GPU index of this state (the simulator's, or one built from ``free``)."""
        return self.free_index if self.free_index is not None else \
            FreeGpuIndex(self.cluster, self.free)

    def pool(self, victims: Mapping[str, int] | None = None) -> FreeGpuIndex:
        """A working copy of the free GPUs for this decision, with ``victims`` (GPUs of
        running jobs that may be taken, by their job's rank; a larger rank is taken
        first): :meth:`FreeGpuIndex.fork`, no time in the cluster's size."""
        return self._index.fork(victims)

    def running_types(self) -> dict[str, str]:
        """The GPU type of every running job, by job id (the simulator's state answers
        without building :attr:`running`)."""
        return {run.job.id: run.gpu_type for run in self.running}

    def held(self) -> dict[str, Held]:
        """What every running job holds, by job id: :attr:`running` without the steps
        left and the start (the simulator's state answers without building
        :attr:`running`: a policy that needs only the GPUs pays nothing per running job
        for them)."""
        return {run.job.id: Held(run.job, run.gpu_type, run.gpus) for run in self.running}

    def has_free(self) -> bool:
        """Whether any GPU is free (time in the GPU types)."""
        return self._index.has_free()

    def free_gpus(self, gpu_type: str) -> int:
        """How many GPUs of ``gpu_type`` are free."""
        return self._index.available(gpu_type)


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

    Four hooks, with defaults in :class:`PolicyHooks` (which every policy class inherits):
    ``quiet_until(state)``, asked right after ``decide(state)`` returned an empty
    decision at a boundary: the time (s; ``inf``: until the next event, ``-inf``: no
    promise) before which calls at later boundaries, with no arrival or completion in
    between, would return empty decisions and change nothing that matters to its later
    decisions, provided it is still called at the last boundary before the next event
    (the simulator then skips the others, :mod:`hetsched.simulate.simulator`); and
    ``on_finished(job, now)``, called when a job completes; ``figures()``, what the
    policy reports of itself in ``summary.json`` (nothing by default); and
    ``on_stall(state)``, what to start when the policy started nothing on an idle cluster
    with nothing more to arrive (by default FIFO, so every replay ends)."""

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

    def on_stall(self, state: ClusterState) -> Decision:
        """What to start when ``decide`` started nothing while nothing runs and nothing
        more will arrive (the replay would otherwise never end): a decision marked
        ``fallback``."""
        ...


class PolicyHooks:
    """The hooks of :class:`RollingPolicy` with their defaults: no promise of quiet
    rounds, nothing to do when a job finishes, no figures, FIFO when stalled. Every policy
    class inherits it and overrides what it uses."""

    def quiet_until(self, state: ClusterState) -> float:
        """No promise: ``-inf``."""
        return -math.inf

    def on_finished(self, job: Job, now: float) -> None:
        """Nothing to do."""

    def figures(self) -> dict[str, object]:
        """None."""
        return {}

    def on_stall(self, state: ClusterState) -> Decision:
        """First in, first out (:class:`RollingFifo`), marked as a fallback."""
        started = RollingFifo().decide(state).start
        return Decision(started, (), True, "the policy started nothing on an idle cluster: FIFO")


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


def first_fit_gpus(state: ClusterState, job: Job, pool: FreeGpuIndex,
                   count: int | None = None) -> Start | None:
    """GPUs for ``job`` now from ``pool`` (:meth:`FreeGpuIndex.first_fit`): packed on the
    first node (cluster order) of an allowed type with enough free GPUs and positive packed
    throughput, else spread over the first free GPUs (cluster order) of the first type
    where spread throughput is positive, at most ``size - 1`` of them on the first node so
    that the gang does span two nodes; ``None`` if neither fits. Nothing is taken."""
    return pool.first_fit(job, count or job.num_gpus, state.throughput)


class RollingFifo(PolicyHooks):
    """First in, first out: start pending jobs in arrival order while first fit finds them
    GPUs; stop at the first that does not fit (no backfilling, no preemption). It works on
    the state's pool (a fork of the simulator's index), so a decision costs time in the
    jobs it starts and the node classes, not in the cluster's nodes."""

    name = "fifo"
    round_s: float | None = None  # events only

    def decide(self, state: ClusterState) -> Decision:
        """Start the longest prefix of the queue that fits now."""
        return Decision(self.start_prefix(state.pending, state.pool(), state.throughput))

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
            free.take(chosen.gpus, job)
        return tuple(starts)
