"""The free GPUs of one cluster, counted once, at a cost per change that depends on the
GPU types, the node sizes and what changed, not on the number of nodes: the books under
the free-GPU index (:class:`hetsched.allocation.free_gpus.FreeGpuIndex`, which answers the
placement requests from them).

:class:`FreeGpuCounts` counts the free GPUs per node and per type, and keeps the nodes of
each type in **node classes** by their number of free GPUs (``classes[t][k]``: the nodes
of type ``t`` with exactly ``k`` free, in cluster order). The first node that holds a
gang of ``s`` (first fit) is the first of the classes ``k >= s``; the node that fits it
most tightly (best fit) the first of the smallest such class: a few look-ups, however
many nodes sit idle.

The simulator owns one index (a *master*) and moves it with what happens: starts take
GPUs, completions and preemptions release them. A policy works on a **fork**
(:meth:`FreeGpuCounts.fork`, what ``ClusterState.pool()`` returns): its takes and
releases are kept as differences from the master, which it only reads, so a fork costs
nothing to make and its requests cost time in the nodes the decision changed. A
preemptive policy gives a fork ``victims``: GPUs of running jobs that may be taken, each
with the rank of its job in the priority order (a larger rank is a lower priority).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Self

from hetsched.allocation.layout import GpuLayout, layout
from hetsched.allocation.node_classes import NodeClasses
from hetsched.allocation.node_use import WHOLE, NodeUse
from hetsched.core.records import Cluster, Job

__all__ = ["FreeGpuCounts"]


class FreeGpuCounts:
    """The GPUs a decision may hand out on one cluster (module docstring): free ones,
    counted per node and per type in node classes, and ``victims`` (GPUs of running jobs
    that may be taken, with their job's rank; a larger rank is a lower priority).

    ``FreeGpuCounts(cluster, free, victims)`` makes a master from a set of free GPU ids
    (time in the GPUs, once); :meth:`fork` makes a policy's working copy of a master (no
    time). :meth:`take` hands GPUs out (free ones or victims'), :meth:`release` frees them,
    :meth:`keep` leaves victims' GPUs with their running job; on a master they change it,
    on a fork only the fork."""

    def __init__(self, cluster: Cluster, free: AbstractSet[str] = frozenset(),
                 victims: Mapping[str, int] | None = None) -> None:
        where = layout(cluster)
        use = NodeUse(cluster, where)
        store = NodeClasses(where, use.left)
        use.listener = store.resources_changed
        self._setup(where, store, use, victims)
        self._master = True
        self.release(sorted(free, key=lambda g: where.order.get(g, -1)))

    def _setup(self, where: GpuLayout, store: NodeClasses, use: NodeUse,
               victims: Mapping[str, int] | None) -> None:
        self._layout = where
        self._store = store
        self._use = use  # GPU shares, node CPUs and memory (hetsched.allocation.node_use)
        self._master = False
        # A fork's differences from its master: GPUs it took that are free there, GPUs it
        # freed that are busy there, the free count of each node it changed (by type).
        self._taken: set[str] = set()
        self._freed: set[str] = set()
        self._node: dict[int, int] = {}
        self._changed: dict[str, set[int]] = {}
        self._type_delta: dict[str, int] = {}
        self._total_delta = 0  # the sum of ``_type_delta``
        self.victims: dict[str, int] = dict(victims or {})
        type_of = where.type_of
        self._victim_count = Counter(type_of[g] for g in self.victims)
        # Victims' GPUs per type in cluster order (taken or kept ones are dropped when
        # read), sorted when a placement first needs them (most decisions never do).
        self._victim_order: dict[str, list[str]] | None = None

    def fork(self, victims: Mapping[str, int] | None = None) -> Self:
        """A working copy for one decision, with ``victims``: this index's free GPUs (and
        the changes of this fork so far, if it is one), read from the master, never
        written to it."""
        copy = object.__new__(type(self))
        copy._setup(self._layout, self._store, self._use.fork(), victims)
        if not self._master:
            copy._taken, copy._freed = set(self._taken), set(self._freed)
            copy._node = dict(self._node)
            copy._changed = {t: set(p) for t, p in self._changed.items()}
            copy._type_delta = dict(self._type_delta)
            copy._total_delta = self._total_delta
        return copy

    # -- reading -----------------------------------------------------------------------
    def is_free(self, gpu: str) -> bool:
        """Whether ``gpu`` is free (in this index)."""
        if gpu in self._freed:
            return True
        return gpu not in self._taken and gpu in self._store.free

    def all_free(self, gpus: Iterable[str]) -> bool:
        """Whether every one of ``gpus`` is free."""
        return all(self.is_free(g) for g in gpus)

    def can_hold(self, gpus: Sequence[str], job: Job) -> bool:
        """Whether ``job`` could run on ``gpus`` now: free ones (or, for a share job, one
        GPU with its share left) on nodes with the CPUs and memory it needs."""
        if job.gpu_share is not None and len(gpus) == 1:
            left = self._use.share_left(gpus[0])
            if (left is None and not self.is_free(gpus[0])) or \
                    (left is not None and left < self._use.share_of(job)):
                return False
        elif not self.all_free(gpus):
            return False
        return self._fits_nodes(gpus, job)

    def _fits_nodes(self, gpus: Sequence[str], job: Job) -> bool:
        """Whether the nodes of ``gpus`` have the CPUs and memory ``job`` needs."""
        if not job.needs_node_resources:
            return True
        here = Counter(self._layout.node_of[g] for g in gpus)
        return all(self._use.fits(pos, job, count) for pos, count in here.items())

    def free_count(self) -> int:
        """How many GPUs are free."""
        return self._store.total_free + self._total_delta

    def has_free(self) -> bool:
        """Whether any GPU is free."""
        return self._store.total_free + self._total_delta > 0

    @property
    def free(self) -> frozenset[str]:
        """Every free GPU id (time in the free GPUs: for tests and small clusters; the
        requests below never build it)."""
        store = self._store.free
        return frozenset((store - self._taken) | self._freed)

    def available(self, gpu_type: str, with_victims: bool = False) -> int:
        """GPUs of ``gpu_type`` that could be given (free, plus victims' if asked)."""
        count = self._store.type_free.get(gpu_type, 0) + self._type_delta.get(gpu_type, 0)
        return count + (self._victim_count[gpu_type] if with_victims else 0)

    def node_free(self, pos: int) -> int:
        """Free GPUs of the node at cluster position ``pos``."""
        found = self._node.get(pos)
        return self._store.node_free[pos] if found is None else found

    def _free_ids(self, pos: int) -> list[str]:
        """The free GPUs of node ``pos``, in index order."""
        return [g for g in self._layout.node_ids[pos] if self.is_free(g)]

    def _first_at_least(self, gpu_type: str, size: int,
                        nodes: AbstractSet[str] | Sequence[str] | None,
                        job: Job | None = None) -> int | None:
        """The first node (cluster order) of ``gpu_type`` with ``size`` free GPUs or more
        (among ``nodes`` if given; with the CPUs and memory ``job`` needs for them), or
        ``None``: the first of the classes ``k >= size``."""
        if nodes is not None:
            return next((pos for pos in self._allowed(gpu_type, nodes)
                         if self.node_free(pos) >= size and (
                             job is None or self._use.fits(pos, job, size))), None)
        need = job is not None and job.needs_node_resources
        skip = self._skip(gpu_type, need)
        best: int | None = None
        classes = self._store.classes[gpu_type]
        for k in range(max(size, 0), len(classes)):
            if need:
                pos = self._first_in_class(gpu_type, k, skip, job, size)
                if pos is not None and (best is None or pos < best):
                    best = pos
                continue
            for pos in classes[k]:
                if best is not None and pos > best:
                    break
                if pos not in skip:
                    best = pos
                    break
        for pos in skip:
            if self.node_free(pos) >= size and (best is None or pos < best) and (
                    job is None or self._use.fits(pos, job, size)):
                best = pos
        return best

    def _tightest(self, gpu_type: str, count: int,
                  job: Job | None = None) -> tuple[int, int] | None:
        """``(free, position)`` of the node of ``gpu_type`` with the fewest free GPUs that
        are at least ``count`` (with the CPUs and memory ``job`` needs for them), the
        first in cluster order among equals; ``None``."""
        need = job is not None and job.needs_node_resources
        skip = self._skip(gpu_type, need)
        best = min(((self.node_free(pos), pos) for pos in skip if self.node_free(pos) >= count
                    and (job is None or self._use.fits(pos, job, count))), default=None)
        classes = self._store.classes[gpu_type]
        for k in range(max(count, 0), len(classes)):
            if best is not None and best[0] < k:
                break
            pos = self._first_in_class(gpu_type, k, skip, job, count) if need else \
                next((p for p in classes[k] if p not in skip), None)
            if pos is not None and (best is None or (k, pos) < best):
                best = (k, pos)
        return best

    def _skip(self, gpu_type: str, resources: bool) -> set[int]:
        """The nodes of ``gpu_type`` the master's classes cannot answer for in this
        fork: those whose free GPUs it changed (and, for a job that needs CPUs and
        memory, those whose CPUs or memory it changed); they are looked at one by one."""
        skip = self._changed.get(gpu_type, set())
        if resources:
            node_type = self._layout.node_type
            skip = skip | {p for p in self._use.touched() if node_type[p] == gpu_type}
        return skip

    def _first_in_class(self, gpu_type: str, free: int, skip: set[int], job: Job | None,
                        count: int) -> int | None:
        """The first node of class ``free`` of ``gpu_type`` not in ``skip`` with the CPUs
        and memory ``job`` needs for ``count`` GPUs (the class's max tree)."""
        assert job is not None
        cpus, memory = self._use.demand(job, count)
        return self._store.first_with(gpu_type, free, cpus, memory, skip)

    def _with_free(self, gpu_type: str,
                   nodes: AbstractSet[str] | Sequence[str] | None) -> Iterator[int]:
        """The nodes of ``gpu_type`` (among ``nodes``) with a free GPU, in cluster order."""
        if nodes is not None:
            yield from (pos for pos in self._allowed(gpu_type, nodes) if self.node_free(pos))
            return
        changed = self._changed.get(gpu_type, set())
        unchanged = (pos for pos in heapq.merge(*self._store.classes[gpu_type][1:])
                     if pos not in changed)
        yield from heapq.merge(unchanged, sorted(p for p in changed if self._node[p]))

    def _allowed(self, gpu_type: str, nodes: AbstractSet[str] | Sequence[str]) -> list[int]:
        """The positions of ``nodes`` of ``gpu_type``, in cluster order."""
        where = self._layout
        return sorted(pos for name in nodes if (pos := where.position.get(name)) is not None
                      and where.node_type[pos] == gpu_type)

    # -- changing ----------------------------------------------------------------------
    def _set(self, pos: int, step: int) -> None:
        """Node ``pos`` gains ``step`` free GPUs (a negative step: loses)."""
        gpu_type = self._layout.node_type[pos]
        old = self.node_free(pos)
        if self._master:
            self._store.move(pos, gpu_type, old, old + step)
            return
        self._node[pos] = old + step
        self._changed.setdefault(gpu_type, set()).add(pos)
        self._type_delta[gpu_type] = self._type_delta.get(gpu_type, 0) + step
        self._total_delta += step

    def take(self, gpus: Iterable[str], job: Job | None = None) -> None:
        """Hand ``gpus`` out: free ones become busy, victims' ones are taken. With the
        ``job`` that takes them, its share of a GPU (a share job's one GPU: free, or with
        its share left) and the CPUs and memory it needs of their nodes are held too."""
        ids = list(gpus)
        use = self._use
        if job is not None and job.gpu_share is not None and len(ids) == 1:
            left = use.share_left(ids[0])
            if left is None:  # a whole GPU for share jobs, the rest left to others
                self._move(ids, taking=True)
                left = WHOLE
            use.set_share(ids[0], left - use.share_of(job))
        else:
            self._move(ids, taking=True)
        if job is not None:
            use.hold(job, ids, 1)

    def _move(self, gpus: Iterable[str], taking: bool) -> None:
        """Whole GPUs change hands: ``taking``, the free ones among ``gpus`` become busy
        (victims' ones are taken); else the busy ones become free. Each node's count moves
        once. A fork writes its differences from the master: a GPU it freed (took) and
        takes (frees) again is no longer one."""
        where = self._layout
        step = -1 if taking else 1
        undone, done = (self._freed, self._taken) if taking else (self._taken, self._freed)
        steps: dict[int, int] = {}  # node position -> free GPUs it gains (one move each)
        for gid in gpus:
            if self.is_free(gid) is taking:
                if not self._master:
                    if gid in undone:
                        undone.discard(gid)
                    else:
                        done.add(gid)
                elif taking:
                    self._store.free.discard(gid)
                else:
                    self._store.free.add(gid)
                pos = where.node_of[gid]
                steps[pos] = steps.get(pos, 0) + step
            elif taking and self.victims.pop(gid, None) is not None:
                self._victim_count[where.type_of[gid]] -= 1
        for pos, change in steps.items():
            self._set(pos, change)

    def release(self, gpus: Iterable[str], job: Job | None = None) -> None:
        """Mark ``gpus`` free (those already free, or not of the cluster, are left). With
        the ``job`` that held them, its share and node CPUs and memory are given back; a
        GPU that still hosts share jobs stays busy (and is never freed without one)."""
        node_of = self._layout.node_of
        ids = [g for g in gpus if g in node_of]
        use = self._use
        if job is not None and job.gpu_share is not None and len(ids) == 1:
            left = use.share_left(ids[0])
            if left is not None:
                left += use.share_of(job)
                use.set_share(ids[0], None if left >= WHOLE else left)
                if left < WHOLE:
                    ids = []
        self._move((g for g in ids if use.share_left(g) is None), taking=False)
        if job is not None:
            use.hold(job, [g for g in gpus if g in node_of], -1)

    def keep(self, gpus: Iterable[str]) -> None:
        """``gpus`` stay with their running job: no longer victims."""
        type_of = self._layout.type_of
        for gid in gpus:
            if self.victims.pop(gid, None) is not None:
                self._victim_count[type_of[gid]] -= 1

    def sync(self, free: AbstractSet[str]) -> None:
        """Make the free GPUs exactly ``free`` (ids not of the cluster are ignored)."""
        current = self.free
        self.take(sorted(current - free))
        self.release(sorted(free - current))
