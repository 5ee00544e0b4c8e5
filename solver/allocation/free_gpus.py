"""The free-GPU index every policy and the simulator take GPUs from: the placement
requests, answered from the free GPUs counted per node and type in node classes
(:class:`hetsched.allocation.free_counts.FreeGpuCounts`: a master, forks, takes and
releases) at a cost that does not grow with the number of idle nodes.

Requests (the same answers as scanning every node in cluster order, which
tests/allocation/test_free_gpus.py checks on random sequences): :meth:`~FreeGpuIndex.first_fit`
(packed on the first node in cluster order, else spread over the first free GPUs),
:meth:`~FreeGpuIndex.best_fit` (the tightest node, counting victims as few and as
low-priority as cover the need), :meth:`~FreeGpuIndex.packed`, :meth:`~FreeGpuIndex.spread`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from hetsched.allocation.free_counts import FreeGpuCounts
from hetsched.allocation.layout import Start, throughput_of, victim_gpus
from hetsched.core.records import Job
from hetsched.core.throughput import Placement, ThroughputModel

__all__ = ["FreeGpuIndex", "victim_gpus"]


class FreeGpuIndex(FreeGpuCounts):
    """The free GPUs of one cluster (:class:`FreeGpuCounts`: ``FreeGpuIndex(cluster, free,
    victims)`` makes a master, :meth:`fork` a policy's working copy, :meth:`take`,
    :meth:`release` and :meth:`keep` change it) and the requests that place a job on them
    (module docstring)."""

    def _victim_ids(self, gpu_type: str) -> list[str]:
        """The victims' GPUs of ``gpu_type`` in cluster order (some may be taken or kept
        since: check them against ``victims``)."""
        if self._victim_order is None:
            where = self._layout
            self._victim_order = {}
            for gid in sorted(self.victims, key=where.order.__getitem__):
                self._victim_order.setdefault(where.type_of[gid], []).append(gid)
        return self._victim_order.get(gpu_type, [])

    def _share_fit(self, job: Job, gpu_types: Iterable[str],
                   model: ThroughputModel) -> Start | None:
        """For a job asking for a share of one GPU: the GPU already hosting share jobs
        with the fewest thousandths left that hold its share (then cluster order), of
        the first of ``gpu_types`` where it has throughput, on a node it may use with its
        CPUs and memory; ``None`` if none has room (a free GPU is then the way)."""
        where = self._layout
        use = self._use
        need = use.share_of(job)
        best: tuple[int, int, str] | None = None
        for gpu_type in gpu_types:
            if not job.may_use(gpu_type) or throughput_of(
                    model, job.job_type, gpu_type, 1, Placement.PACKED) <= 0:
                continue
            for gid, left in use.shared(gpu_type):
                pos = where.node_of[gid]
                if left >= need and job.may_use_node(where.node_name[pos]) and \
                        use.fits(pos, job, 1):
                    key = (left, where.order[gid], gid)
                    if best is None or key < best:
                        best = key
        return None if best is None else Start(job.id, where.type_of[best[2]], (best[2],))

    # -- requests ----------------------------------------------------------------------
    def first_fit(self, job: Job, size: int, model: ThroughputModel) -> Start | None:
        """Free GPUs for ``job`` at ``size`` GPUs: packed on the first node (cluster order)
        of an allowed type with enough free GPUs and positive packed throughput, else
        spread over the first free GPUs (cluster order) of the first type where spread
        throughput is positive, at most ``size - 1`` of them on the first node so that
        the gang does span two nodes; ``None`` if neither fits. Only nodes the job may
        use, with the CPUs and memory it needs, count. A job asking for a share of one
        GPU goes first where share jobs already run (:meth:`_share_fit`)."""
        where = self._layout
        if job.gpu_share is not None and size == 1:
            shared = self._share_fit(job, where.type_names, model)
            if shared is not None:
                return shared
        allowed = job.allowed_nodes
        best: int | None = None
        for gpu_type in where.type_names:
            if self.available(gpu_type) < size or not job.may_use(gpu_type) or \
                    throughput_of(model, job.job_type, gpu_type, size, Placement.PACKED) <= 0:
                continue
            pos = self._first_at_least(gpu_type, size, allowed, job)
            if pos is not None and (best is None or pos < best):
                best = pos
        if best is not None:
            return Start(job.id, where.node_type[best], tuple(self._free_ids(best)[:size]))
        if size < 2:
            return None
        for gpu_type in where.type_names:
            if self.available(gpu_type) < size or not job.may_use(gpu_type) or \
                    throughput_of(model, job.job_type, gpu_type, size, Placement.SPREAD) <= 0:
                continue
            ids: list[str] = []
            for pos in self._with_free(gpu_type, allowed):
                on_node = self._free_ids(pos)
                # A spread gang spans two nodes at least: size - 1 from the first; as many
                # as the node's CPUs and memory hold.
                here = (on_node if ids else on_node[: size - 1])[: size - len(ids)]
                ids.extend(here[: self._use.most(pos, job, len(here))])
                if len(ids) >= size:
                    return Start(job.id, gpu_type, tuple(ids[:size]))
        return None

    def packed(self, gpu_type: str, size: int, nodes: tuple[str, ...] | None = None
               ) -> tuple[str, ...] | None:
        """The first ``size`` free GPUs (index order) of the first node of ``gpu_type``
        (cluster order; among ``nodes`` if given) with that many free; ``None`` if none
        has."""
        if gpu_type not in self._store.classes:
            return None
        pos = self._first_at_least(gpu_type, size, nodes)
        return None if pos is None else tuple(self._free_ids(pos)[:size])

    def _first_free(self, gpu_type: str, size: int,
                    nodes: AbstractSet[str] | Sequence[str] | None,
                    job: Job | None = None) -> list[str]:
        """The first ``size`` free GPUs of ``gpu_type`` in cluster order (on ``nodes``;
        on nodes with the CPUs and memory ``job`` needs of them)."""
        ids: list[str] = []
        for pos in self._with_free(gpu_type, nodes):
            here = self._free_ids(pos)[: size - len(ids)]
            ids.extend(here if job is None else here[: self._use.most(pos, job, len(here))])
            if len(ids) >= size:
                break
        return ids[:size]

    def spread(self, gpu_type: str, size: int, nodes: tuple[str, ...] | None = None
               ) -> tuple[str, ...] | None:
        """The first ``size`` free GPUs of ``gpu_type`` in cluster order (on ``nodes`` if
        given), on one node or more; ``None`` if fewer are free."""
        if self.available(gpu_type) < size:
            return None
        ids = self._first_free(gpu_type, size, nodes)
        return tuple(ids) if len(ids) >= size else None

    def best_fit(self, job: Job, gpu_type: str, count: int, model: ThroughputModel,
                 with_victims: bool = False) -> tuple[str, ...] | None:
        """``count`` GPUs of ``gpu_type`` for ``job``, or ``None`` (nothing is taken).

        Packed first: the node of that type that can hold the gang (its free GPUs and, if
        ``with_victims``, victims' GPUs) with the fewest GPUs of the jobs it would
        preempt, then the fewest available GPUs (best fit, which keeps whole nodes for
        large gangs), then in cluster order. Else spread over free GPUs in cluster order,
        then victims' GPUs. Victims are whole running jobs, as few and as low-priority as
        cover the need (:func:`victim_gpus`). A placement is only returned where the
        throughput ``model`` gives is positive, on nodes with the CPUs and memory the job
        needs (victims' are counted only once they stop). A job asking for a share of one
        GPU goes first where share jobs already run (:meth:`_share_fit`)."""
        if job.gpu_share is not None and count == 1:
            shared = self._share_fit(job, (gpu_type,), model)
            if shared is not None:
                return shared.gpus
        if not job.may_use(gpu_type) or self.available(gpu_type, with_victims) < count:
            return None
        where = self._layout
        victims = self.victims if with_victims else {}
        allowed = job.allowed_nodes
        packed_ok = throughput_of(model, job.job_type, gpu_type, count, Placement.PACKED) > 0
        if packed_ok:
            best = self._best_packed(job, gpu_type, count, victims)
            if best is not None:
                return best
        if count < 2 or throughput_of(model, job.job_type, gpu_type, count,
                                      Placement.SPREAD) <= 0:
            return None
        own = self._first_free(gpu_type, count, allowed, job)
        if len(own) < count and victims:
            candidates = [g for g in self._victim_ids(gpu_type) if g in victims and (
                allowed is None or where.node_name[where.node_of[g]] in allowed)]
            own += victim_gpus(candidates, victims, count - len(own))
        chosen = own[:count]
        if len(chosen) < count or not self._fits_nodes(chosen, job):
            return None
        if len({where.node_of[g] for g in chosen}) == 1 and not packed_ok:
            return None
        return tuple(chosen)

    def _best_packed(self, job: Job, gpu_type: str, count: int,
                     victims: Mapping[str, int]) -> tuple[str, ...] | None:
        """:meth:`best_fit`'s packed gang: the node with the lowest ``(victims' GPUs
        taken, free and taken GPUs, cluster position)``. Nodes without victims are found
        in their node classes; nodes with victims, and with ``allowed`` nodes every
        allowed node, are scored one by one."""
        where = self._layout
        allowed = job.allowed_nodes

        def score(pos: int) -> tuple[tuple[int, int, int], tuple[str, ...]] | None:
            ids = where.node_ids[pos]
            if len(ids) < count or not self._use.fits(pos, job, count):
                return None
            own = self._free_ids(pos)
            if len(own) < count and not victims:
                return None
            taken = victim_gpus(ids, victims, count - len(own))
            if len(own) + len(taken) < count:
                return None
            return (len(taken), len(own) + len(taken), pos), (*own, *taken)[:count]

        if allowed is not None:
            positions = self._allowed(gpu_type, allowed)
        else:
            tightest = self._tightest(gpu_type, count, job)
            positions = [] if tightest is None else [tightest[1]]
            # A node whose free GPUs hold the gang takes no victims' GPUs: the tightest
            # of them scores lowest of all (when it scores: it has the CPUs and memory).
            if victims and (tightest is None or score(tightest[1]) is None):
                positions += {where.node_of[g] for g in self._victim_ids(gpu_type)
                              if g in victims}
        best: tuple[tuple[int, int, int], tuple[str, ...]] | None = None
        for bound, pos in sorted((self._packed_bound(pos, count), pos) for pos in positions):
            if best is not None and bound >= best[0]:
                break  # no node left can score lower
            found = score(pos)
            if found is not None and (best is None or found < best):
                best = found
        return None if best is None else best[1]

    def _packed_bound(self, pos: int, count: int) -> tuple[int, int, int]:
        """The lowest score :meth:`_best_packed` can give node ``pos`` for a gang of
        ``count``: its free GPUs ``f`` and at least ``count - f`` victims' GPUs."""
        free = self.node_free(pos)
        need = max(0, count - free)
        return need, free + need, pos
