"""Rolling policies: what a scheduler sees at a decision point and what it returns.

At every decision point the simulator (:mod:`solver.simulate`) hands a policy a
:class:`ClusterState`: the time, the free GPUs, the running jobs (placement,
remaining work) and the pending jobs (arrived, not running, with their remaining work),
and the throughput model the policy may use (the *fitted* one; the simulator advances
jobs at the *measured* speed). The policy returns a :class:`Decision`: which pending
jobs start now on which GPUs, and which running jobs are preempted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from solver.data import Cluster, Job
from solver.throughput import Placement, ThroughputModel


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
class Start:
    """Start ``job`` now on ``gpus`` (all of ``gpu_type``)."""

    job: str
    gpu_type: str
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    """Jobs to preempt (their GPUs are freed first) and jobs to start now."""

    start: tuple[Start, ...] = ()
    preempt: tuple[str, ...] = ()
    #: True when the policy's own method failed and a heuristic decided instead.
    fallback: bool = False
    note: str = ""


class RollingPolicy(Protocol):
    """A scheduler driven by the simulator."""

    name: str

    def decide(self, state: ClusterState) -> Decision:
        """What to start and preempt at ``state.now``."""
        ...


def first_fit_gpus(state: ClusterState, job: Job, free: set[str],
                   count: int | None = None) -> Start | None:
    """GPUs for ``job`` now: packed on the first node (cluster order) of an allowed type with
    enough free GPUs and positive packed throughput, else spread over the first free GPUs
    of the first type where spread throughput is positive; ``None`` if neither fits."""
    size = count or job.num_gpus
    model = state.throughput
    for node in state.cluster.nodes:
        if node.num_gpus < size or not job.may_use(node.gpu_type):
            continue
        ids = [g for g in node.gpu_ids() if g in free]
        if len(ids) >= size and model.throughput(job.job_type, node.gpu_type, size,
                                                 Placement.PACKED) > 0:
            return Start(job.id, node.gpu_type, tuple(ids[:size]))
    if size < 2:
        return None
    for gpu_type in state.cluster.type_names:
        if not job.may_use(gpu_type) or model.throughput(
                job.job_type, gpu_type, size, Placement.SPREAD) <= 0:
            continue
        ids = [g.id for g in state.cluster.gpus if g.gpu_type == gpu_type and g.id in free]
        if len(ids) >= size:
            return Start(job.id, gpu_type, tuple(ids[:size]))
    return None


class RollingFifo:
    """First in, first out: start pending jobs in arrival order while first fit finds them
    GPUs; stop at the first that does not fit (no backfilling, no preemption)."""

    name = "fifo"

    def decide(self, state: ClusterState) -> Decision:
        """Start the longest prefix of the queue that fits now."""
        free = set(state.free)
        starts = []
        for job in state.pending:
            chosen = first_fit_gpus(state, job, free)
            if chosen is None:
                break
            starts.append(chosen)
            free.difference_update(chosen.gpus)
        return Decision(tuple(starts))


#: A plan's start this close to ``now`` counts as now: the exact models work on a time grid
#: (1 ms) and round releases up, so "now" comes back as up to one tick later.
START_TOLERANCE_S = 0.01


class ModelPolicy:
    """A static policy (``solver.solve``'s models: ``deadline``, ``allox``, ``topology``,
    ``fifo``) driven at every decision point.

    It builds an instance from the state: the pending jobs (work = remaining steps, their
    own arrivals and deadlines) on the GPUs free now (each node shrunk to its free GPUs,
    which keep their order), solves it with the time limit, and commits only the jobs the
    plan starts now. At most ``window`` pending jobs (the earliest that fit now) enter a
    solve. Jobs that no free GPU set can hold now wait for the next decision.
    Running jobs are never moved, and the solve is not yet warm-started from the previous
    plan. If the solve fails or plans nothing on an idle cluster, first fit decides and the
    decision is marked as a fallback.
    """

    def __init__(self, model: str, *, backend: str | None = None,
                 time_limit_s: float | None = 5.0, window: int = 48,
                 **options: object) -> None:
        self.model = model
        self.window = window
        self.name = model
        self.backend = backend
        self.time_limit_s = time_limit_s
        self.options = options

    def decide(self, state: ClusterState) -> Decision:
        """Solve the free part of the cluster; commit what starts now."""
        import dataclasses

        from solver.data import Cluster, Instance, Node, configurations
        from solver.errors import InputError
        from solver.solve import solve

        if not state.free or not state.pending:
            return Decision()
        window = state.pending[: self.window]
        # Gangs that no node of the whole cluster can hold packed run spread; models that
        # reason about packed gangs cannot place them, so first fit starts them (in arrival
        # order) before the solve, and the model plans the rest on what is left.
        early: list[Start] = []
        free = set(state.free)
        for job in window:
            if not any(c.placement is Placement.PACKED
                       for c in configurations(state.cluster, state.throughput, job)):
                chosen = first_fit_gpus(state, job, free)
                if chosen is not None:
                    early.append(chosen)
                    free.difference_update(chosen.gpus)
        started = {s.job for s in early}
        free_ids: dict[str, list[str]] = {}
        for node in state.cluster.nodes:
            ids = [g for g in node.gpu_ids() if g in free]
            if ids:
                free_ids[node.name] = ids
        if not free_ids:
            return Decision(tuple(early))
        nodes = tuple(Node(name, state.cluster.node_by_name[name].gpu_type, len(ids))
                      for name, ids in free_ids.items())
        sub = Cluster(state.cluster.gpu_types, nodes)
        to_real = {f"{name}/{i}": gid for name, ids in free_ids.items()
                   for i, gid in enumerate(ids)}
        # The model sees the ``window`` earliest pending jobs that fit now, packed, with
        # their remaining work; the rest wait for a later decision (a bounded model keeps
        # every decision fast).
        runnable = tuple(
            dataclasses.replace(job, work=max(state.remaining[job.id], 1e-9))
            for job in state.pending if job.id not in started and any(
                c.placement is Placement.PACKED
                for c in configurations(sub, state.throughput, job))
        )[: self.window]
        if not runnable:
            return Decision(tuple(early))
        try:
            instance = Instance(sub, runnable, state.throughput, now=state.now)
            result = solve(instance, model=self.model, backend=self.backend,
                           time_limit=self.time_limit_s, **self.options)
        except (InputError, RuntimeError, ValueError) as exc:
            return self._fallback(state, f"{self.model} failed: {exc}")
        starts = (*early, *(
            Start(a.job, a.gpu_type, tuple(to_real[g] for g in a.gpus))
            for a in result.schedule if a.start <= state.now + START_TOLERANCE_S
        ))
        if not starts and not state.running:
            return self._fallback(state, f"{self.model} started nothing on an idle cluster "
                                  f"({result.status.value})")
        return Decision(tuple(starts), note=result.status.value)

    def _fallback(self, state: ClusterState, why: str) -> Decision:
        decision = RollingFifo().decide(state)
        return Decision(decision.start, decision.preempt, True, why)
