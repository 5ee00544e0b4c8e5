"""The :class:`~hetsched.policies.rolling.ClusterState` the simulator hands a policy at
a decision: built in time independent of the queue's length. The pending jobs are one
tuple; ``running`` and ``free`` are built when first read; ``remaining``, ``attained``
and ``preemptions`` are read-only views of the simulator's books, which answer for one
job in constant time (a policy that sorts 40,000 waiting jobs once and keeps them in
order does not pay for a dict of them at every event); ``pending_feed`` says where the
queue stands in the replay's :class:`~hetsched.policies.rolling.PendingLog`. With a
:class:`~hetsched.knowledge.view.KnowledgeView`, the jobs and the work left it shows are
the view's, not the truth (the pending jobs come shown already: the books hold them so)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cached_property
from typing import TypeVar

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.core.records import Cluster, Job
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import ThroughputModel
from hetsched.knowledge.view import KnowledgeView
from hetsched.policies.rolling import ClusterState, Held, PendingFeed, RunningJob
from hetsched.simulate.record import JobRecord
from hetsched.simulate.runs import SimulatedRun

__all__ = ["LiveState"]

V = TypeVar("V")


class LiveState(ClusterState):
    """The state at a decision (see the module). A policy reads its state while it
    decides: once ``decide`` returns, a field not built yet, or a view, raises
    ``RuntimeError`` when read (the simulator has moved on)."""

    _runs: dict[str, SimulatedRun]
    _records: dict[str, JobRecord]
    _left: dict[str, float]
    _waiting: dict[str, Job]
    _open: bool
    _knowledge: KnowledgeView | None

    @classmethod
    def make(cls, now: float, cluster: Cluster, throughput: ThroughputModel,
             waiting: dict[str, Job], index: FreeGpuIndex, runs: dict[str, SimulatedRun],
             records: dict[str, JobRecord], left: dict[str, float],
             feed: PendingFeed | None = None,
             colocation: CoLocationModel | None = None,
             knowledge: KnowledgeView | None = None) -> LiveState:
        """The state at ``now``; ``index`` is the simulator's free-GPU index (read, never
        changed by the policy: it works on forks), ``waiting`` and ``runs`` the pending
        and running jobs by id, ``left`` the steps left of every job not running (the
        simulator changes none of them while the policy decides), ``colocation`` the
        replay's co-location model, ``knowledge`` what the policy may know of the work
        (``None``: the truth)."""
        state = cls(now=now, cluster=cluster, throughput=throughput,
                    pending=tuple(waiting.values()), remaining={}, running=(),
                    free=frozenset(), free_index=index, pending_feed=feed,
                    colocation=colocation)
        for name in _LAZY_FIELDS:
            del state.__dict__[name]  # the cached properties below build them
        for name, value in (("_runs", runs), ("_records", records), ("_left", left),
                            ("_waiting", waiting), ("_open", True),
                            ("_knowledge", knowledge)):
            object.__setattr__(state, name, value)
        return state

    def close(self) -> None:
        """The decision is taken: fields not read by now can no longer be built."""
        object.__setattr__(self, "_open", False)

    def check_open(self, name: str) -> None:
        """``RuntimeError`` if the decision is over (see the class)."""
        if not self._open:
            raise RuntimeError(f"ClusterState.{name} read after the decision at "
                               f"{self.now:g} s: read the state inside decide()")

    def running_types(self) -> dict[str, str]:
        """The GPU type of every running job, by job id, without building their records
        (a state derived with ``dataclasses.replace`` has no books but its own
        ``running``: theirs)."""
        if "_runs" not in self.__dict__:
            return super().running_types()
        self.check_open("running_types")
        return {job_id: run.gpu_type for job_id, run in self._runs.items()}

    def held(self) -> dict[str, Held]:
        """What every running job holds, by job id, without building their records
        (each run keeps its own: :attr:`SimulatedRun.held`; a derived state: its ``running``)."""
        if "_runs" not in self.__dict__:
            return super().held()
        self.check_open("held")
        knowledge = self._knowledge
        if knowledge is not None:
            now = self.now
            return {job_id: run.held._replace(job=knowledge.shown(
                run.record.job, run.record.job.work - run.remaining_at(now)))
                for job_id, run in self._runs.items()}
        return {job_id: run.held for job_id, run in self._runs.items()}

    @cached_property
    def free(self) -> frozenset[str]:
        """Every free GPU id (built when first read: time in the free GPUs)."""
        self.check_open("free")
        assert self.free_index is not None
        return self.free_index.free

    @cached_property
    def running(self) -> tuple[RunningJob, ...]:
        """Running jobs, with the steps left at ``now``."""
        self.check_open("running")
        return _running_jobs(self._runs.values(), self.now, self._knowledge)

    @cached_property
    def remaining(self) -> Mapping[str, float]:
        """Steps left of every pending job."""
        self.check_open("remaining")
        knowledge = self._knowledge
        if knowledge is not None:
            return _PerWaitingJob(self, "remaining", lambda state, job_id: knowledge.remaining(
                job_id, state._records[job_id].job.work - state._left[job_id]))
        return _PerWaitingJob(self, "remaining", lambda state, job_id: state._left[job_id])

    @cached_property
    def attained(self) -> Mapping[str, float]:
        """GPU-seconds received up to ``now`` by every running job and every pending job
        that ran before."""
        self.check_open("attained")
        return _Attained(self)

    @cached_property
    def preemptions(self) -> Mapping[str, int]:
        """Times each pending job was preempted."""
        self.check_open("preemptions")
        return _PerWaitingJob(self, "preemptions",
                              lambda state, job_id: state._records[job_id].preemptions)


def _running_jobs(runs: Iterable[SimulatedRun], now: float,
                  knowledge: KnowledgeView | None = None) -> tuple[RunningJob, ...]:
    """Each run as ``RunningJob(job, gpu_type, gpus, since, remaining at now)`` (the job
    and its work left as ``knowledge`` shows them, if given), made
    without the frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field): a
    busy cluster holds hundreds of running jobs at each of the whole Philly trace's
    160,000 decisions."""
    new = object.__new__
    made: list[RunningJob] = []
    for run in runs:
        one: RunningJob = new(RunningJob)
        job, left = run.record.job, run.remaining_at(now)
        if knowledge is not None:
            job, left = knowledge.seen(job, job.work - left)
        one.__dict__.update(job=job, gpu_type=run.gpu_type, gpus=run.gpus,
                            started=run.since, remaining=left, packed=run.packed)
        made.append(one)
    return tuple(made)


_LAZY_FIELDS = ("free", "running", "remaining", "attained", "preemptions")


class _PerWaitingJob(Mapping[str, V]):
    """A figure of each pending job (``read(state, job_id)``), read from the simulator's
    books; ``field``: the state's field it is (named when read too late)."""

    def __init__(self, state: LiveState, field: str,
                 read: Callable[[LiveState, str], V]) -> None:
        self.state = state
        self.field = field
        self.read = read

    def __getitem__(self, job_id: str) -> V:
        state = self.state
        state.check_open(self.field)
        if job_id not in state._waiting:
            raise KeyError(job_id)
        return self.read(state, job_id)

    def __iter__(self) -> Iterator[str]:
        self.state.check_open(self.field)
        return iter(tuple(self.state._waiting))

    def __len__(self) -> int:
        return len(self.state._waiting)


class _Attained(Mapping[str, float]):
    """GPU-seconds received by each running job, and each pending job that ran before,
    up to the state's ``now``; running jobs first, then pending ones, in the order the
    simulator holds them."""

    def __init__(self, state: LiveState) -> None:
        self.state = state

    def __getitem__(self, job_id: str) -> float:
        state = self.state
        state.check_open("attained")
        run = state._runs.get(job_id)
        if run is not None:
            return run.record.gpu_seconds + run.gpu_seconds_at(state.now)
        if job_id in state._waiting:
            record = state._records[job_id]
            if record.first_start is not None:
                return record.gpu_seconds
        raise KeyError(job_id)

    def __iter__(self) -> Iterator[str]:
        state = self.state
        state.check_open("attained")
        records = state._records
        return iter((*state._runs, *(job_id for job_id in state._waiting
                                     if records[job_id].first_start is not None)))

    def __len__(self) -> int:
        return sum(1 for _ in self)
