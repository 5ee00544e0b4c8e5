"""Learning the throughputs in a replay as the live agent learns them (``--learn``).

``hetsched slurm run --learn PRIOR`` plans with a
:class:`~hetsched.speeds.learned.LearnedThroughput` that starts from ``PRIOR`` and takes
each run's reported steps as they come (:mod:`hetsched.slurm.learning`). A replay given
the same setting (:attr:`~hetsched.core.settings.ReplaySettings.learn`) does the same,
so that it predicts the run of a learning agent, not that of an agent told the truth:
:class:`RunLearner` follows every run the simulator makes and, at every decision and
when the run ends (completed or preempted), observes the steps made since its last
observation over the seconds since, counted from the run's resume (no progress during
the start latency and the restore, as a job's report shows none). The policy sees the
model as the agent's policy does, a frozen table rebuilt when something was learned
(:meth:`~hetsched.speeds.learned.LearnedThroughput.policy_table`), and, as in every
replay (:class:`~hetsched.core.throughput.PolicyView`), 0 where the measurements say a
configuration cannot run: the agent learns that from a refused run, which the simulator,
which refuses such a start outright, cannot play.

The simulator still advances the jobs at the true speeds; the learned model is written
beside the replay (``learned_throughput.csv``, what ``--throughput`` reads) and counted
in summary.json (``learn``, ``learned_keys``).

``--learn bootstrap`` is for elastic jobs, whose speed a table cannot hold:
:class:`BootstrapLearner` shows the policy what Sia's policy knows of them
(:mod:`hetsched.speeds.bootstrap`: the one-GPU speed on each type, the scaling learned
on a type as the job type runs there, projected to the types it has not run on).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hetsched.core.records import Cluster, Job
from hetsched.core.settings import LEARN
from hetsched.core.throughput import Placement, PolicyView, ThroughputModel
from hetsched.speeds.bootstrap import BootstrapThroughput
from hetsched.speeds.learned import LearnedThroughput


class Learner(Protocol):
    """What the simulator tells a learner of its runs, and asks it (see the module)."""

    @property
    def learned(self) -> LearnedThroughput | None:
        """What was learned, as ``--throughput`` reads it (None: nothing to write)."""

    def started(self, job: Job, gpu_type: str, gpus: Sequence[str], now: float,
                resume: float, left: float) -> None: ...

    def observe(self, job_id: str, now: float, left: float) -> None: ...

    def ended(self, job_id: str, now: float, left: float) -> None: ...

    def model(self, jobs: Iterable[Job]) -> ThroughputModel: ...


def learning_prior(name: str, cluster: Cluster, source: ThroughputModel | None
                   ) -> ThroughputModel | None:
    """The prior ``name`` (:data:`~hetsched.core.settings.LEARN`, not ``off``) names:
    the throughput source's model (``source``), the built-in catalogue on the cluster's
    GPU types it knows (``catalogue``: none of a Gavel trace's job types), or nothing
    (``none``)."""
    assert name in LEARN, name
    assert name not in ("off", "bootstrap"), name
    if name == "source":
        return source
    if name == "none":
        return None
    from hetsched.files.generate import GPU_TYPES, catalogue_table

    return catalogue_table([t for t in cluster.type_names if t in GPU_TYPES])


@dataclass
class _Followed:
    """A run the learner follows: its key, when it makes progress from, and its last
    observation (time, steps left)."""

    key: tuple[str, str, int, Placement]
    resume: float
    at: float
    left: float


class RunLearner:
    """A learned model and the runs it observes (see the module)."""

    def __init__(self, learned: LearnedThroughput, truth: ThroughputModel,
                 cluster: Cluster) -> None:
        self.learned, self.truth, self.cluster = learned, truth, cluster
        self._runs: dict[str, _Followed] = {}
        self._view: tuple[object, PolicyView] | None = None

    @classmethod
    def of(cls, name: str, cluster: Cluster, truth: ThroughputModel,
           source: ThroughputModel | None) -> RunLearner:
        """A learner over the prior ``name`` (:func:`learning_prior`)."""
        return cls(LearnedThroughput(learning_prior(name, cluster, source), cluster.type_names),
                   truth, cluster)

    def started(self, job: Job, gpu_type: str, gpus: Sequence[str], now: float,
                resume: float, left: float) -> None:
        """``job`` starts now on ``gpus`` of ``gpu_type`` with ``left`` steps to do,
        making progress from ``resume``."""
        key = (job.job_type, gpu_type, len(gpus), self.cluster.placement_of(gpus))
        self._runs[job.id] = _Followed(key, resume, now, left)

    def observe(self, job_id: str, now: float, left: float) -> None:
        """The run of ``job_id`` has ``left`` steps to do at ``now``: the steps since its
        last observation, over the seconds of progress since, are learned."""
        run = self._runs[job_id]
        since = max(run.at, run.resume)
        if now > since:
            self.learned.observe(*run.key, steps=max(0.0, run.left - left),
                                 trace_seconds=now - since)
        run.at, run.left = now, left

    def ended(self, job_id: str, now: float, left: float) -> None:
        """The run of ``job_id`` ends now (completed: ``left`` 0; or preempted)."""
        self.observe(job_id, now, left)
        del self._runs[job_id]

    def running(self) -> Iterable[str]:
        """The jobs whose runs are followed."""
        return tuple(self._runs)

    def model(self, jobs: Iterable[Job]) -> ThroughputModel:
        """What the policy sees now of ``jobs`` (see the module)."""
        table = self.learned.policy_table(jobs, self.cluster.type_names)
        if self._view is None or self._view[0] is not table:
            self._view = (table, PolicyView(table, self.truth))
        return self._view[1]


class BootstrapLearner:
    """``--learn bootstrap``: elastic jobs planned as Sia plans them before it knows how
    they scale (:class:`~hetsched.speeds.bootstrap.BootstrapThroughput`). A run teaches
    its job type its GPU type and count once it has made progress (at a decision after
    its resume, or at its end if it ran past its resume), as Sia's job profiles a
    configuration while it trains there."""

    learned = None

    def __init__(self, truth: ThroughputModel, jobs: Iterable[Job]) -> None:
        elastic = frozenset(j.job_type for j in jobs if len(j.gpu_counts) > 1)
        self.known = BootstrapThroughput(truth, elastic)
        self._runs: dict[str, tuple[str, str, int, float]] = {}

    def started(self, job: Job, gpu_type: str, gpus: Sequence[str], now: float,
                resume: float, left: float) -> None:
        """``job`` starts on ``gpus`` of ``gpu_type``, making progress from ``resume``."""
        self._runs[job.id] = (job.job_type, gpu_type, len(gpus), resume)

    def observe(self, job_id: str, now: float, left: float) -> None:
        """The run of ``job_id`` is seen at ``now``: past its resume, it has taught its
        configuration."""
        job_type, gpu_type, num_gpus, resume = self._runs[job_id]
        if now > resume:
            self.known = self.known.learn(job_type, gpu_type, num_gpus)

    def ended(self, job_id: str, now: float, left: float) -> None:
        """The run of ``job_id`` ends now."""
        self.observe(job_id, now, left)
        del self._runs[job_id]

    def model(self, jobs: Iterable[Job]) -> ThroughputModel:
        """What the policy knows now (a new object each time something was learned)."""
        return self.known


def learner_of(name: str, cluster: Cluster, jobs: Sequence[Job], truth: ThroughputModel,
               source: ThroughputModel | None) -> Learner | None:
    """The learner a replay's ``learn`` setting names (None: ``off``)."""
    if name == "off":
        return None
    if name == "bootstrap":
        return BootstrapLearner(truth, jobs)
    return RunLearner.of(name, cluster, truth, source)
