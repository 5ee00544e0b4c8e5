"""What choosing GPUs needs, written once: a cluster's layout (one cache per cluster),
cached throughput look-ups, a job's speeds on a cluster (:class:`SpeedView`), a start
(:class:`Start`) and the victims a preempting start takes (:func:`victim_gpus`). The
free-GPU index every policy and the simulator take GPUs from is
:class:`hetsched.allocation.free_gpus.FreeGpuIndex`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hetsched.core.records import Cluster, Configuration, Job, Node, configurations
from hetsched.core.throughput import Placement, ThroughputModel

__all__ = ["GpuLayout", "SpeedView", "Start", "layout", "throughput_of", "victim_gpus"]


@dataclass(frozen=True)
class Start:
    """Start ``job`` now on ``gpus`` (all of ``gpu_type``); ``packed``: a whole job of one
    GPU that holds half of it, beside at most one other packed job (space sharing at
    measured pair speeds, :mod:`hetsched.core.sharing`)."""

    job: str
    gpu_type: str
    gpus: tuple[str, ...]
    packed: bool = False


class GpuLayout:
    """A cluster's GPUs by node: each node's GPU ids (index order), name and type, the
    position of each node name, the node of every GPU and its place in cluster order
    (``order``), the nodes of each type (cluster order), per type all its GPU ids in
    order, its GPUs (``type_gpus``), its largest node (``largest``) and how many of its
    nodes hold more than half the largest (``over_half``). Holds no reference to the
    cluster, so it is cached per cluster in a weak dictionary (:func:`layout`)."""

    def __init__(self, cluster: Cluster) -> None:
        self.node_ids = [tuple(node.gpu_ids()) for node in cluster.nodes]
        self.node_name = [node.name for node in cluster.nodes]
        self.node_type = [node.gpu_type for node in cluster.nodes]
        self.position = {name: pos for pos, name in enumerate(self.node_name)}
        self.node_of = {gid: pos for pos, ids in enumerate(self.node_ids) for gid in ids}
        self.order = {gid: k for k, gid in enumerate(self.node_of)}
        self.type_of = {gid: self.node_type[pos] for gid, pos in self.node_of.items()}
        self.type_names = cluster.type_names
        self.nodes_by_type: dict[str, list[int]] = {name: [] for name in self.type_names}
        self.ids_by_type: dict[str, list[str]] = {name: [] for name in self.type_names}
        for pos, gpu_type in enumerate(self.node_type):
            self.nodes_by_type[gpu_type].append(pos)
            self.ids_by_type[gpu_type].extend(self.node_ids[pos])
        self.type_gpus = {t: len(ids) for t, ids in self.ids_by_type.items()}
        self.largest = {t: max((len(self.node_ids[p]) for p in positions), default=0)
                        for t, positions in self.nodes_by_type.items()}
        self.over_half = {t: sum(1 for p in positions
                                 if 2 * len(self.node_ids[p]) > self.largest[t])
                          for t, positions in self.nodes_by_type.items()}


_LAYOUTS: weakref.WeakKeyDictionary[Cluster, GpuLayout] = weakref.WeakKeyDictionary()


def layout(cluster: Cluster) -> GpuLayout:
    """The (cached) layout of ``cluster``."""
    found = _LAYOUTS.get(cluster)
    if found is None:
        found = _LAYOUTS[cluster] = GpuLayout(cluster)
    return found


_SPEEDS: weakref.WeakKeyDictionary[ThroughputModel, dict[tuple[str, str, int, Placement], float]] \
    = weakref.WeakKeyDictionary()


def throughput_of(model: ThroughputModel, job_type: str, gpu_type: str, count: int,
                  placement: Placement) -> float:
    """``model.throughput(...)``, cached per model (a model is a pure function of these)."""
    key = (job_type, gpu_type, count, placement)
    try:
        cache = _SPEEDS.setdefault(model, {})
    except TypeError:  # a model that cannot be weakly referenced: no cache
        return model.throughput(job_type, gpu_type, count, placement)
    found = cache.get(key)
    if found is None:
        found = cache[key] = model.throughput(job_type, gpu_type, count, placement)
    return found


class SpeedView:
    """What a job can run at on one cluster under one throughput model: its
    configurations, its best speed over all of them, its speed per GPU type at one gang
    size. Cached per (job type, gang sizes, allowed types), so a job costs one look-up
    per shape, however often it is asked about.

    The two notions of "a job's best speed" are named apart: :meth:`best` looks at every
    gang size the job allows (what a model may choose), :meth:`fastest` at one size (what
    a policy that keeps the requested size can get)."""

    def __init__(self, cluster: Cluster, model: ThroughputModel) -> None:
        self.cluster = cluster
        self.model = model
        self._configurations: dict[tuple[str, tuple[int, ...], tuple[str, ...] | None],
                                   list[Configuration]] = {}
        self._by_type: dict[tuple[object, ...], dict[str, float]] = {}

    def configurations(self, job: Job) -> list[Configuration]:
        """Every (GPU type, gang size, placement) the cluster can give ``job`` with
        throughput > 0 (:func:`hetsched.core.records.configurations`)."""
        key = (job.job_type, job.gpu_counts, job.allowed_gpu_types)
        found = self._configurations.get(key)
        if found is None:
            found = self._configurations[key] = configurations(self.cluster, self.model, job)
        return found

    def best(self, job: Job) -> float:
        """The largest throughput of any configuration of ``job`` (0 if it cannot run)."""
        return max((c.throughput for c in self.configurations(job)), default=0.0)

    def packable(self, job: Job) -> bool:
        """Whether some configuration of ``job`` runs packed on one node."""
        return any(c.placement is Placement.PACKED for c in self.configurations(job))

    def by_type(self, job: Job, count: int | None = None) -> dict[str, float]:
        """``{gpu_type: steps/s}`` at ``count`` GPUs (default: the requested size) for every
        allowed type with positive throughput, on the best placement the cluster allows
        there, fastest first (ties in cluster order)."""
        size = count or job.num_gpus
        key: tuple[object, ...] = (job.job_type, size, job.allowed_gpu_types)
        if job.needs_node_resources:  # (the placements its CPUs and memory allow)
            key = (*key, job.num_gpus, job.cpus, job.memory_gb, job.allowed_nodes)
        found = self._by_type.get(key)
        if found is None:
            cluster, model = self.cluster, self.model
            found = {}
            for gpu_type in cluster.type_names:
                if not job.may_use(gpu_type):
                    continue
                best = max((model.throughput(job.job_type, gpu_type, size, p)
                            for p in Placement if self._placeable(job, gpu_type, size, p)),
                           default=0.0)
                if best > 0:
                    found[gpu_type] = best
            order = {t: i for i, t in enumerate(cluster.type_names)}
            found = dict(sorted(found.items(), key=lambda item: (-item[1], order[item[0]])))
            self._by_type[key] = found
        return found

    def _placeable(self, job: Job, gpu_type: str, size: int, placement: Placement) -> bool:
        """Whether the cluster's nodes of ``gpu_type`` can hold a gang of ``size`` GPUs of
        ``job`` with ``placement`` when idle: its GPUs and, for a job that needs them, its
        CPUs and memory (:func:`fits_a_node`: a gang whose cores no node has runs
        spread)."""
        return self.cluster.can_place(gpu_type, size, placement) and fits_a_node(
            self.cluster, job, Configuration(gpu_type, size, placement, 1.0))

    def fastest(self, job: Job, count: int | None = None) -> float:
        """The best steps/s of ``job`` at ``count`` GPUs (0 if it cannot run there)."""
        return next(iter(self.by_type(job, count).values()), 0.0)


def victim_gpus(ids: Sequence[str], victims: Mapping[str, int], needed: int) -> list[str]:
    """``needed`` GPUs among ``ids`` held by victims, taken from as few and as
    low-priority running jobs as possible: jobs are added lowest priority first until they
    cover the need, then any job the others cover without is dropped, highest priority
    first (its preemption would be for nothing). Empty if they cannot cover it."""
    if needed <= 0:
        return []
    by_job: dict[int, list[str]] = {}
    for g in ids:
        if g in victims:
            by_job.setdefault(victims[g], []).append(g)
    chosen: list[int] = []
    total = 0
    for rank in sorted(by_job, reverse=True):
        if total >= needed:
            break
        chosen.append(rank)
        total += len(by_job[rank])
    if total < needed:
        return []
    for rank in sorted(chosen):
        if total - len(by_job[rank]) >= needed:
            chosen.remove(rank)
            total -= len(by_job[rank])
    return [g for rank in sorted(chosen, reverse=True) for g in by_job[rank]]


def fits_a_node(cluster: Cluster, job: Job, config: Configuration) -> bool:
    """Whether the CPUs and memory ``job`` needs (:meth:`Job.node_demand`) can be had for
    ``config`` on an idle cluster: packed, on one node of its type (and allowed) with
    the GPUs, cores and GB; spread, on nodes of its type that together hold the gang
    with each GPU's part of them. Always for a job that needs none."""
    if not job.needs_node_resources:
        return True
    nodes = [n for n in cluster.nodes if n.gpu_type == config.gpu_type
             and job.may_use_node(n.name)]
    count = config.num_gpus

    def holds(node: Node, gpus: int) -> bool:
        cores, gigabytes = job.node_demand(gpus)
        return (node.cpus is None or cores <= node.cpus + 1e-9) and \
            (node.memory_gb is None or gigabytes <= node.memory_gb + 1e-9)

    if config.placement is Placement.PACKED:
        return any(n.num_gpus >= count and holds(n, count) for n in nodes)
    room = 0
    for node in nodes:
        room += max((k for k in range(node.num_gpus, 0, -1) if holds(node, k)), default=0)
        if room >= count:
            return True
    return False
