"""The options of a ``progress`` round (:class:`Option`) and the GPUs its decision hands
out (:class:`Gangs`): gangs at the full speed of their option, from free GPUs or from
the running jobs the round dropped, resized elastic jobs and packed pairs
(:mod:`hetsched.policies.progress` says in which order)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from hetsched.allocation.layout import Start, throughput_of
from hetsched.core.records import Job, packed_holder
from hetsched.core.throughput import Placement
from hetsched.policies.rolling import ClusterState, RunningJob

__all__ = ["Gangs", "Option", "spreadable"]


@dataclass(frozen=True)
class Option:
    """One way a job can run next round."""

    job: Job
    gpu_type: str
    size: int
    speed: float  # predicted steps/s
    remaining: float  # steps left
    urgent: bool
    running_here: bool  # the job runs now on this type with this many GPUs
    slack: float = math.inf  # deadline - predicted end on this option (s)
    #: with a rho bound, for a job it makes urgent: the time by which the option ends
    #: before the job's rho reaches the bound (s; inf: not urgent by fairness)
    fair_slack: float = math.inf
    #: a pair (``pairing``, :mod:`hetsched.policies.pairing`): the job packed beside this
    #: one on one GPU (``speed`` is then this job's packed speed), the pair's value, and
    #: the GPU of a partner that runs packed there alone (the pair takes no GPU)
    partner: Job | None = None
    pair_value: float = 0.0
    joins: str | None = None
    #: predicted steps/s over the round's horizon on this option, for a job whose
    #: speed changes with its progress (an elastic job's epochs: docs/elastic.md); None:
    #: ``speed`` all along
    rate: float | None = None

    @property
    def planned(self) -> float:
        """The steps/s the round plans the option with: ``rate``, else ``speed``."""
        return self.speed if self.rate is None else self.rate


class Gangs:
    """The GPUs a decision hands out: gangs at the full speed of their option, taken from
    free GPUs or from the running jobs the round dropped (which are then preempted)."""

    def __init__(self, state: ClusterState, dropped: list[RunningJob]) -> None:
        self.state = state
        self.dropped = dropped  # lowest priority first
        self.running = {r.job.id: r for r in state.running}
        self.starts: list[Start] = []
        self.preempt: list[str] = []
        self.owner: dict[str, tuple[str, ...]] = {}  # a victim GPU -> the jobs it preempts
        self.packed_on: dict[str, list[str]] = {}  # GPU -> the packed runs on it
        self.packed_now: set[str] = set()  # GPUs this decision packs jobs on
        for run in state.running:
            if run.packed:
                self.packed_on.setdefault(run.gpus[0], []).append(run.job.id)
        self.pool = state.pool()
        self.widen([])

    def widen(self, cheaper: list[RunningJob]) -> None:
        """The GPUs that may be taken: free ones, those of the dropped jobs, then those of
        ``cheaper`` (running jobs, lowest priority first), of jobs still holding them. A
        GPU of packed runs may be taken once every job on it may be."""
        gone = {s.job for s in self.starts} | set(self.preempt)
        dropped = [r for r in self.dropped if r.job.id not in gone]
        kept = [r for r in cheaper if r.job.id not in gone and r not in dropped]
        ranked = [*reversed(kept), *reversed(dropped)]
        may_go = gone | {r.job.id for r in ranked}
        victims: dict[str, int] = {}
        self.owner = {}
        for rank, run in enumerate(ranked):
            if run.job.gpu_share is not None:
                continue  # a share job's GPU is not its alone to give
            if run.packed:
                on_gpu = self.packed_on[run.gpus[0]]
                if any(job_id not in may_go for job_id in on_gpu):
                    continue
                owners = tuple(j for j in on_gpu if j not in gone)
            else:
                owners = (run.job.id,)
            if self.packed_now.intersection(run.gpus):
                continue
            for g in run.gpus:
                victims[g] = rank  # a larger rank is taken first
                self.owner[g] = owners
        self.pool = self.pool.fork(victims)

    def full_speed(self, option: Option, *, with_victims: bool) -> tuple[str, ...] | None:
        """A gang for ``option`` by best fit whose placement gives the option's speed, or
        ``None`` (nothing is taken)."""
        state = self.state
        gpus = self.pool.best_fit(option.job, option.gpu_type, option.size, state.throughput,
                                  with_victims)
        if gpus is None:
            return None
        speed = throughput_of(state.throughput, option.job.job_type, option.gpu_type,
                              option.size, state.cluster.placement_of(gpus))
        if speed >= option.speed * (1 - 1e-9):
            return gpus
        return None if with_victims else self._spread(option)

    def _spread(self, option: Option) -> tuple[str, ...] | None:
        """A gang of free GPUs over two servers at least (cluster order, ``size - 1`` at
        most on the first), for an option whose speed is its spread speed: best fit
        gives a packed gang whenever a server has room, and in Gavel's table some jobs
        run faster spread than packed (ResNet-50 at batch 128 on 4 V100s: 7.35 against
        6.40 steps/s fitted), so such a job waited, chosen round after round, while
        whole servers were free (until the free GPUs happened to be scattered).
        ``None`` if the spread speed is not the option's or the GPUs do not hold it."""
        state, pool, job = self.state, self.pool, option.job
        if option.size < 2 or throughput_of(state.throughput, job.job_type, option.gpu_type,
                                            option.size, Placement.SPREAD) \
                < option.speed * (1 - 1e-9):
            return None
        node = state.cluster.gpu_by_id
        free = [g for g in pool.spread(option.gpu_type, pool.available(option.gpu_type)) or ()
                if job.allowed_nodes is None or node[g].node in job.allowed_nodes]
        if not free:
            return None
        first = node[free[0]].node
        gang = [g for g in free if node[g].node == first][:option.size - 1]
        gang += [g for g in free if node[g].node != first][:option.size - len(gang)]
        if len(gang) < option.size or not pool.can_hold(gang, job):
            return None
        return tuple(gang)

    def resize(self, option: Option, run: RunningJob) -> bool:
        """Start a running job's option of another GPU count (an elastic job resized) on a
        gang that may include its own GPUs, free ones first, else also those of the jobs
        the round dropped (then preempted): whether it did. Its run is preempted and the
        new gang started, with the restart penalty."""
        pool = self.pool
        pool.release(run.gpus, run.job)
        gpus = self.full_speed(option, with_victims=False)
        if gpus is None:
            gpus = self.full_speed(option, with_victims=True)
            if gpus is None:
                pool.take(run.gpus, run.job)
                return False
            self._claim(gpus)
        pool.take(gpus, option.job)
        self.preempt.append(run.job.id)
        self.starts.append(Start(option.job.id, option.gpu_type, gpus))
        return True

    def pair(self, option: Option) -> None:
        """Start a pair's waiting job(s) packed: beside the partner that runs alone on
        the GPU it ``joins``, else both on one GPU, free or a dropped job's (then
        preempted); nothing when there is none."""
        partner = option.partner
        assert partner is not None
        pool = self.pool
        if option.running_here:  # the pair runs packed there now
            return
        if option.joins is not None:
            holder = packed_holder(option.job)
            if partner.id not in self.preempt and pool.can_hold((option.joins,), holder):
                pool.keep((option.joins,))
                self.packed_now.add(option.joins)
                pool.take((option.joins,), holder)
                self.starts.append(Start(option.job.id, option.gpu_type, (option.joins,),
                                         packed=True))
            return
        alone = dataclasses.replace(option, partner=None)
        gpus = self.full_speed(alone, with_victims=False) or \
            self.full_speed(alone, with_victims=True)
        if gpus is None:
            return
        self._claim(gpus)
        self.packed_now.update(gpus)
        for job in (option.job, partner):
            pool.take(gpus, packed_holder(job))
            self.starts.append(Start(job.id, option.gpu_type, gpus, packed=True))

    def start(self, option: Option, gpus: tuple[str, ...], run: RunningJob | None) -> None:
        """Start ``option`` on ``gpus``: the jobs it takes GPUs from are preempted (their
        other GPUs freed), and a running job that moves frees its old GPUs."""
        pool = self.pool
        pool.take(gpus, option.job)
        self._claim(gpus)
        if run is not None:  # a migration: its old GPUs are free once it moves
            self.preempt.append(run.job.id)
            pool.release(run.gpus, run.holder)
        self.starts.append(Start(option.job.id, option.gpu_type, gpus))

    def _claim(self, gpus: tuple[str, ...]) -> None:
        """The running jobs ``gpus`` are taken from are preempted (their other GPUs
        freed)."""
        pool = self.pool
        for victim in sorted({j for g in gpus if g in self.owner for j in self.owner[g]}):
            self.preempt.append(victim)
            held = self.running[victim].gpus
            pool.keep(held)
            pool.release([g for g in held if g not in gpus], self.running[victim].holder)
            for g in held:
                self.owner.pop(g, None)


def spreadable(state: ClusterState, option: Option) -> bool:
    """Whether the option's gang may span servers (spread throughput > 0)."""
    if option.size < 2:
        return False
    return throughput_of(state.throughput, option.job.job_type, option.gpu_type, option.size,
                         Placement.SPREAD) > 0
