"""Rolling policies: what a scheduler sees at a decision point and what it returns.

At every decision point the simulator (:mod:`solver.simulate`) hands a policy a
:class:`ClusterState`: the time, the free GPUs, the running jobs (placement,
remaining work) and the pending jobs (arrived, not running, with their remaining work),
and the throughput model the policy may use (the *fitted* one; the simulator advances
jobs at the *measured* speed). The policy returns a :class:`Decision`: which pending
jobs start now on which GPUs, and which running jobs are preempted.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
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


class _Layout:
    """A cluster's GPUs by node, for first fit: each node's GPU ids (index order), the node
    of every GPU, and the nodes of each type (cluster order). Holds no reference to the
    cluster, so it can be cached per cluster in a weak dictionary."""

    def __init__(self, cluster: Cluster) -> None:
        self.node_ids = [tuple(node.gpu_ids()) for node in cluster.nodes]
        self.node_type = [node.gpu_type for node in cluster.nodes]
        self.node_of = {gid: pos for pos, ids in enumerate(self.node_ids) for gid in ids}
        self.type_names = cluster.type_names
        self.nodes_by_type: dict[str, list[int]] = {name: [] for name in self.type_names}
        for pos, gpu_type in enumerate(self.node_type):
            self.nodes_by_type[gpu_type].append(pos)


_LAYOUTS: weakref.WeakKeyDictionary[Cluster, _Layout] = weakref.WeakKeyDictionary()


def _layout(cluster: Cluster) -> _Layout:
    layout = _LAYOUTS.get(cluster)
    if layout is None:
        layout = _LAYOUTS[cluster] = _Layout(cluster)
    return layout


class FreeGpuIndex:
    """The free GPUs of one cluster counted per node and per type, for first fit in time
    proportional to the nodes, not the GPUs.

    :meth:`sync` brings it in step with any set of free GPU ids (by set difference, so
    only the GPUs that changed are counted again); :meth:`take` marks GPUs busy.
    Throughput look-ups are cached per (job type, GPU type, count, placement) for the
    last model used (models are pure functions of these)."""

    def __init__(self, cluster: Cluster, free: AbstractSet[str] = frozenset()) -> None:
        self._layout = _layout(cluster)
        self._free: set[str] = set()
        self._node_free = [0] * len(self._layout.node_ids)
        self._type_free = dict.fromkeys(self._layout.type_names, 0)
        self._model: ThroughputModel | None = None
        self._speeds: dict[tuple[str, str, int, Placement], float] = {}
        self.sync(free)

    def sync(self, free: AbstractSet[str]) -> None:
        """Make the free GPUs exactly ``free`` (ids not of the cluster are ignored)."""
        node_of = self._layout.node_of
        added = [gid for gid in free - self._free if gid in node_of]
        removed = self._free - free
        self._count(added, 1)
        self._count(removed, -1)
        self._free.update(added)
        self._free.difference_update(removed)

    def take(self, gpus: Iterable[str]) -> None:
        """Mark ``gpus`` busy (those already busy are left as they are)."""
        taken = [gid for gid in gpus if gid in self._free]
        self._count(taken, -1)
        self._free.difference_update(taken)

    def release(self, gpus: Iterable[str]) -> None:
        """Mark ``gpus`` free (those already free, or not of the cluster, are left)."""
        node_of = self._layout.node_of
        freed = [gid for gid in gpus if gid not in self._free and gid in node_of]
        self._count(freed, 1)
        self._free.update(freed)

    def _count(self, gpus: Iterable[str], step: int) -> None:
        layout = self._layout
        for gid in gpus:
            pos = layout.node_of[gid]
            self._node_free[pos] += step
            self._type_free[layout.node_type[pos]] += step

    def _speed(self, model: ThroughputModel, job_type: str, gpu_type: str, size: int,
               placement: Placement) -> float:
        if model is not self._model:
            self._model, self._speeds = model, {}
        key = (job_type, gpu_type, size, placement)
        speed = self._speeds.get(key)
        if speed is None:
            speed = self._speeds[key] = model.throughput(job_type, gpu_type, size, placement)
        return speed

    def first_fit(self, job: Job, size: int, model: ThroughputModel) -> Start | None:
        """What :func:`first_fit_gpus` returns for ``job`` at ``size`` GPUs on these free
        GPUs (the first node in cluster order that fits packed, else the first type that
        fits spread)."""
        layout = self._layout
        node_free = self._node_free
        best: int | None = None
        for gpu_type in layout.type_names:
            if self._type_free[gpu_type] < size or not job.may_use(gpu_type) or \
                    self._speed(model, job.job_type, gpu_type, size, Placement.PACKED) <= 0:
                continue
            for pos in layout.nodes_by_type[gpu_type]:
                if best is not None and pos > best:
                    break
                if node_free[pos] >= size:  # (then the node has at least ``size`` GPUs)
                    best = pos
                    break
        if best is not None:
            packed = [gid for gid in layout.node_ids[best] if gid in self._free]
            return Start(job.id, layout.node_type[best], tuple(packed[:size]))
        if size < 2:
            return None
        for gpu_type in layout.type_names:
            if self._type_free[gpu_type] < size or not job.may_use(gpu_type) or \
                    self._speed(model, job.job_type, gpu_type, size, Placement.SPREAD) <= 0:
                continue
            ids: list[str] = []
            for pos in layout.nodes_by_type[gpu_type]:
                if node_free[pos]:
                    on_node = [gid for gid in layout.node_ids[pos] if gid in self._free]
                    # A spread gang spans two nodes at least: size - 1 from the first.
                    ids.extend(on_node if ids else on_node[: size - 1])
                    if len(ids) >= size:
                        return Start(job.id, gpu_type, tuple(ids[:size]))
        return None


def first_fit_gpus(state: ClusterState, job: Job, free: set[str],
                   count: int | None = None) -> Start | None:
    """GPUs for ``job`` now: packed on the first node (cluster order) of an allowed type with
    enough free GPUs and positive packed throughput, else spread over the first free GPUs
    (cluster order) of the first type where spread throughput is positive, at most
    ``size - 1`` of them on the first node so that the gang does span two nodes; ``None``
    if neither fits."""
    return FreeGpuIndex(state.cluster, free).first_fit(job, count or job.num_gpus,
                                                       state.throughput)


class RollingFifo:
    """First in, first out: start pending jobs in arrival order while first fit finds them
    GPUs; stop at the first that does not fit (no backfilling, no preemption).

    It keeps a :class:`FreeGpuIndex` of the last cluster between decisions and brings it
    in step with each state's free GPUs, so a decision costs time in the GPUs that
    changed and the nodes scanned, not in every GPU of the cluster."""

    name = "fifo"

    def __init__(self) -> None:
        self._cluster: Cluster | None = None
        self._index: FreeGpuIndex | None = None

    def decide(self, state: ClusterState) -> Decision:
        """Start the longest prefix of the queue that fits now."""
        if self._index is None or state.cluster is not self._cluster:
            self._cluster, self._index = state.cluster, FreeGpuIndex(state.cluster)
        self._index.sync(state.free)
        return Decision(self.start_prefix(state.pending, self._index, state.throughput))

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
