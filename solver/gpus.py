"""Choosing GPUs, written once: a cluster's layout, cached throughput look-ups, and the
free-GPU index every policy and the simulator take GPUs from.

:class:`FreeGpuIndex` counts the free GPUs per node and per type, so a request costs time
in the nodes, not the GPUs. It hands GPUs out by first fit (:meth:`FreeGpuIndex.first_fit`:
the first node in cluster order that holds the gang packed, else the first type that
holds it spread) or by best fit on one type (:meth:`FreeGpuIndex.best_fit`: the node that
fits most tightly, counting, for preemptive policies, the GPUs of running jobs that may
be taken, "victims", as few and as low-priority as cover the need).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from hetsched.data import Cluster, Configuration, Job, configurations
from hetsched.throughput import Placement, ThroughputModel

__all__ = ["FreeGpuIndex", "Layout", "SpeedView", "Start", "layout", "throughput_of"]


@dataclass(frozen=True)
class Start:
    """Start ``job`` now on ``gpus`` (all of ``gpu_type``)."""

    job: str
    gpu_type: str
    gpus: tuple[str, ...]


class Layout:
    """A cluster's GPUs by node: each node's GPU ids (index order), its type, the node of
    every GPU, the nodes of each type (cluster order), and per type its nodes as
    ``(cluster index, GPU ids)`` and all its GPU ids in order. Holds no reference to the
    cluster, so it is cached per cluster in a weak dictionary (:func:`layout`)."""

    def __init__(self, cluster: Cluster) -> None:
        self.node_ids = [tuple(node.gpu_ids()) for node in cluster.nodes]
        self.node_name = [node.name for node in cluster.nodes]
        self.node_type = [node.gpu_type for node in cluster.nodes]
        self.node_of = {gid: pos for pos, ids in enumerate(self.node_ids) for gid in ids}
        self.type_of = {gid: self.node_type[pos] for gid, pos in self.node_of.items()}
        self.type_names = cluster.type_names
        self.nodes_by_type: dict[str, list[int]] = {name: [] for name in self.type_names}
        self.ids_by_type: dict[str, list[str]] = {name: [] for name in self.type_names}
        for pos, gpu_type in enumerate(self.node_type):
            self.nodes_by_type[gpu_type].append(pos)
            self.ids_by_type[gpu_type].extend(self.node_ids[pos])


_LAYOUTS: weakref.WeakKeyDictionary[Cluster, Layout] = weakref.WeakKeyDictionary()


def layout(cluster: Cluster) -> Layout:
    """The (cached) layout of ``cluster``."""
    found = _LAYOUTS.get(cluster)
    if found is None:
        found = _LAYOUTS[cluster] = Layout(cluster)
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
        self._by_type: dict[tuple[str, int, tuple[str, ...] | None], dict[str, float]] = {}

    def configurations(self, job: Job) -> list[Configuration]:
        """Every (GPU type, gang size, placement) the cluster can give ``job`` with
        throughput > 0 (:func:`hetsched.data.configurations`)."""
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
        key = (job.job_type, size, job.allowed_gpu_types)
        found = self._by_type.get(key)
        if found is None:
            cluster, model = self.cluster, self.model
            found = {}
            for gpu_type in cluster.type_names:
                if not job.may_use(gpu_type):
                    continue
                best = max((model.throughput(job.job_type, gpu_type, size, p)
                            for p in Placement if cluster.can_place(gpu_type, size, p)),
                           default=0.0)
                if best > 0:
                    found[gpu_type] = best
            order = {t: i for i, t in enumerate(cluster.type_names)}
            found = dict(sorted(found.items(), key=lambda item: (-item[1], order[item[0]])))
            self._by_type[key] = found
        return found

    def fastest(self, job: Job, count: int | None = None) -> float:
        """The best steps/s of ``job`` at ``count`` GPUs (0 if it cannot run there)."""
        return next(iter(self.by_type(job, count).values()), 0.0)


class FreeGpuIndex:
    """The GPUs a decision may still hand out on one cluster: the free ones (``free``),
    counted per node and per type, and, for preemptive policies, ``victims``: GPUs of
    running jobs that may be taken, each with the rank of its job in the priority order
    (a larger rank is a lower priority).

    :meth:`sync` brings the free GPUs in step with any set of ids (by set difference, so
    only the GPUs that changed are counted again); :meth:`take` hands GPUs out (free ones
    or victims'), :meth:`release` frees them, :meth:`keep` leaves victims' GPUs with their
    running job."""

    def __init__(self, cluster: Cluster, free: AbstractSet[str] = frozenset(),
                 victims: Mapping[str, int] | None = None) -> None:
        self._layout = layout(cluster)
        self.free: set[str] = set()
        self._node_free = [0] * len(self._layout.node_ids)
        self._type_free = dict.fromkeys(self._layout.type_names, 0)
        self.victims = dict(victims or {})
        type_of = self._layout.type_of
        self._victim_count = Counter(type_of[g] for g in self.victims)
        self.sync(free)

    def sync(self, free: AbstractSet[str]) -> None:
        """Make the free GPUs exactly ``free`` (ids not of the cluster are ignored)."""
        node_of = self._layout.node_of
        added = [gid for gid in free - self.free if gid in node_of]
        removed = self.free - free
        self._count(added, 1)
        self._count(removed, -1)
        self.free.update(added)
        self.free.difference_update(removed)

    def take(self, gpus: Iterable[str]) -> None:
        """Hand ``gpus`` out: free ones become busy, victims' ones are taken."""
        type_of = self._layout.type_of
        for gid in gpus:
            if gid in self.free:
                self._count((gid,), -1)
                self.free.discard(gid)
            elif self.victims.pop(gid, None) is not None:
                self._victim_count[type_of[gid]] -= 1

    def release(self, gpus: Iterable[str]) -> None:
        """Mark ``gpus`` free (those already free, or not of the cluster, are left)."""
        node_of = self._layout.node_of
        freed = [gid for gid in gpus if gid not in self.free and gid in node_of]
        self._count(freed, 1)
        self.free.update(freed)

    def keep(self, gpus: Iterable[str]) -> None:
        """``gpus`` stay with their running job: no longer victims."""
        type_of = self._layout.type_of
        for gid in gpus:
            if self.victims.pop(gid, None) is not None:
                self._victim_count[type_of[gid]] -= 1

    def available(self, gpu_type: str, with_victims: bool = False) -> int:
        """GPUs of ``gpu_type`` that could be given (free, plus victims' if asked)."""
        return self._type_free.get(gpu_type, 0) + (self._victim_count[gpu_type]
                                                   if with_victims else 0)

    def _count(self, gpus: Iterable[str], step: int) -> None:
        where = self._layout
        for gid in gpus:
            pos = where.node_of[gid]
            self._node_free[pos] += step
            self._type_free[where.node_type[pos]] += step

    def first_fit(self, job: Job, size: int, model: ThroughputModel) -> Start | None:
        """Free GPUs for ``job`` at ``size`` GPUs: packed on the first node (cluster order)
        of an allowed type with enough free GPUs and positive packed throughput, else
        spread over the first free GPUs (cluster order) of the first type where spread
        throughput is positive, at most ``size - 1`` of them on the first node so that
        the gang does span two nodes; ``None`` if neither fits. Only nodes the job may
        use count."""
        where = self._layout
        node_free = self._node_free
        allowed = job.allowed_nodes
        best: int | None = None
        for gpu_type in where.type_names:
            if self._type_free[gpu_type] < size or not job.may_use(gpu_type) or \
                    throughput_of(model, job.job_type, gpu_type, size, Placement.PACKED) <= 0:
                continue
            for pos in where.nodes_by_type[gpu_type]:
                if best is not None and pos > best:
                    break
                if node_free[pos] >= size and (allowed is None or
                                               where.node_name[pos] in allowed):
                    best = pos
                    break
        if best is not None:
            packed = [gid for gid in where.node_ids[best] if gid in self.free]
            return Start(job.id, where.node_type[best], tuple(packed[:size]))
        if size < 2:
            return None
        for gpu_type in where.type_names:
            if self._type_free[gpu_type] < size or not job.may_use(gpu_type) or \
                    throughput_of(model, job.job_type, gpu_type, size, Placement.SPREAD) <= 0:
                continue
            ids: list[str] = []
            for pos in where.nodes_by_type[gpu_type]:
                if node_free[pos] and (allowed is None or where.node_name[pos] in allowed):
                    on_node = [gid for gid in where.node_ids[pos] if gid in self.free]
                    # A spread gang spans two nodes at least: size - 1 from the first.
                    ids.extend(on_node if ids else on_node[: size - 1])
                    if len(ids) >= size:
                        return Start(job.id, gpu_type, tuple(ids[:size]))
        return None

    def packed(self, gpu_type: str, size: int, nodes: tuple[str, ...] | None = None
               ) -> tuple[str, ...] | None:
        """The first ``size`` free GPUs (index order) of the first node of ``gpu_type``
        (cluster order; among ``nodes`` if given) with that many free; ``None`` if none
        has."""
        where = self._layout
        for pos in where.nodes_by_type.get(gpu_type, ()):
            if self._node_free[pos] >= size and (nodes is None or where.node_name[pos] in nodes):
                return tuple([g for g in where.node_ids[pos] if g in self.free][:size])
        return None

    def spread(self, gpu_type: str, size: int, nodes: tuple[str, ...] | None = None
               ) -> tuple[str, ...] | None:
        """The first ``size`` free GPUs of ``gpu_type`` in cluster order (on ``nodes`` if
        given), on one node or more; ``None`` if fewer are free."""
        if self._type_free.get(gpu_type, 0) < size:
            return None
        where = self._layout
        ids = [g for g in where.ids_by_type[gpu_type] if g in self.free and (
            nodes is None or where.node_name[where.node_of[g]] in nodes)]
        return tuple(ids[:size]) if len(ids) >= size else None

    def best_fit(self, job: Job, gpu_type: str, count: int, model: ThroughputModel,
                 with_victims: bool = False) -> tuple[str, ...] | None:
        """``count`` GPUs of ``gpu_type`` for ``job``, or ``None`` (nothing is taken).

        Packed first: the node of that type that can hold the gang (its free GPUs and, if
        ``with_victims``, victims' GPUs) with the fewest GPUs of the jobs it would
        preempt, then the fewest available GPUs (best fit, which keeps whole nodes for
        large gangs), then in cluster order. Else spread over free GPUs in cluster order,
        then victims' GPUs. Victims are whole running jobs, as few and as low-priority as
        cover the need (:func:`victim_gpus`). A placement is only returned where the
        throughput ``model`` gives is positive."""
        if not job.may_use(gpu_type) or self.available(gpu_type, with_victims) < count:
            return None
        where = self._layout
        free = self.free
        victims = self.victims if with_victims else {}
        allowed = job.allowed_nodes
        packed_ok = throughput_of(model, job.job_type, gpu_type, count, Placement.PACKED) > 0
        best: tuple[tuple[int, int, int], tuple[str, ...]] | None = None
        if packed_ok:
            for index in where.nodes_by_type[gpu_type]:
                ids = where.node_ids[index]
                if len(ids) < count or (allowed is not None and
                                        where.node_name[index] not in allowed):
                    continue
                own = [g for g in ids if g in free]
                if len(own) < count and not victims:
                    continue
                taken = victim_gpus(ids, victims, count - len(own))
                if len(own) + len(taken) < count:
                    continue
                score = (len(taken), len(own) + len(taken), index)
                if best is None or score < best[0]:
                    best = (score, (*own, *taken)[:count])
                    if score[:2] == (0, count):
                        break  # an exact fit on free GPUs: nothing beats it
        if best is not None:
            return best[1]
        if count < 2 or throughput_of(model, job.job_type, gpu_type, count,
                                      Placement.SPREAD) <= 0:
            return None
        all_ids = where.ids_by_type[gpu_type]
        if allowed is not None:
            all_ids = [g for g in all_ids if where.node_name[where.node_of[g]] in allowed]
        own = [g for g in all_ids if g in free]
        chosen = (own + victim_gpus(all_ids, victims, count - len(own)))[:count]
        if len(chosen) < count:
            return None
        nodes = {where.node_of[g] for g in chosen}
        if len(nodes) == 1 and not packed_ok:
            return None
        return tuple(chosen)


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
