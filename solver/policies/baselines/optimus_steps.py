"""Optimus' greedy over a long queue (thousands of waiting jobs): each waiting job's first
allocation steps kept in order from one decision to the next (:class:`FirstSteps`), and
the promoted jobs in the order they are served (:class:`PromotedOrder`).

A waiting job's first step on a GPU type at a gang size is worth ``speed / remaining /
size`` (:class:`~hetsched.policies.baselines.optimus.Optimus`), fixed while it waits (its
steps left do not change). Kept sorted per (type, size), moved by what joined and left
the queue, the greedy merges the lists' heads with a small heap of the steps that grow
jobs already given GPUs, and drops a list as soon as its size exceeds the free GPUs of its
type (they only shrink within a decision). It takes exactly the steps, in the same order,
as a heap of every waiting job's steps built at every decision: the steps it never
looks at are those that heap would pop and skip (they do not fit, or their job already
got GPUs or is not asked about)."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from hetsched.core.records import Job
from hetsched.policies.baselines.kept_queue import Change
from hetsched.policies.rolling import ClusterState

__all__ = ["FirstSteps", "PromotedOrder", "Rate", "Step"]

#: An allocation step: (-gain per GPU, arrival, job id, type index, GPUs, job's version).
Step = tuple[float, float, str, int, int, int]
#: The fraction of a job done per second on (type index, GPUs): steps/s over steps left.
Rate = Callable[[Job, int, int], float]


class FirstSteps:
    """The first steps of every waiting job (see the module), per (type index, size)."""

    def __init__(self) -> None:
        self._lists: dict[tuple[int, int], list[Step]] = {}
        self._of: dict[str, list[Step]] = {}
        self._model: tuple[object, object] = (None, None)
        self._width = 0  # the cluster's GPU types

    def follow(self, state: ClusterState, changes: list[Change] | None,
               waiting: Mapping[str, Job], rate: Rate) -> None:
        """Bring the lists to ``waiting`` (the pending jobs by id) by the queue's
        ``changes`` (``None``: rebuilt from ``waiting``)."""
        if self._model != (state.throughput, state.cluster):
            self._model = (state.throughput, state.cluster)
            self._width = len(state.cluster.type_names)
            changes = None
        if changes is not None:
            for job, job_id in changes:
                self._drop(job_id)
                if job is not None:
                    self._add(job, rate)
        if changes is None or len(self._of) != len(waiting):
            self._lists, self._of = {}, {}
            for job in waiting.values():
                self._add(job, rate, in_order=False)
            for steps in self._lists.values():
                steps.sort()

    def _add(self, job: Job, rate: Rate, in_order: bool = True) -> None:
        """``job``'s first steps, put in their lists in order (else appended)."""
        found: list[Step] = []
        for size in job.gpu_counts:
            for k in range(self._width):
                gain = rate(job, k, size) / size
                if gain > 0:
                    step = (-gain, job.arrival, job.id, k, size, 0)
                    steps = self._lists.setdefault((k, size), [])
                    if in_order:
                        bisect.insort(steps, step)
                    else:
                        steps.append(step)
                    found.append(step)
        self._of[job.id] = found

    def _drop(self, job_id: str) -> None:
        for step in self._of.pop(job_id, ()):
            steps = self._lists[step[3], step[4]]
            del steps[bisect.bisect_left(steps, step)]

    def greedy(self, types: Sequence[str], left: dict[str, int], excluded: AbstractSet[str],
               waiting: Mapping[str, Job], rate: Rate) -> list[tuple[Job, str, int]]:
        """Optimus' greedy on the free GPUs ``left`` per type (changed in place) for the
        waiting jobs not ``excluded``: (job, GPU type, GPUs) for every job given GPUs,
        in the order each first got some."""
        at = {key: 0 for key, steps in self._lists.items() if steps}
        growth: list[Step] = []  # steps that grow a job already given GPUs
        version: dict[str, int] = {}
        current: dict[str, tuple[int, int]] = {}
        while True:
            best: Step | None = None
            source: tuple[int, int] | None = None
            for key in list(at):
                k, size = key
                if left[types[k]] < size:
                    del at[key]  # free GPUs only shrink: none of these fits any more
                    continue
                steps, i = self._lists[key], at[key]
                while i < len(steps) and (steps[i][2] in excluded or steps[i][2] in version):
                    i += 1  # not asked about, or given GPUs already (a stale first step)
                if i == len(steps):
                    del at[key]
                    continue
                at[key] = i
                if best is None or steps[i] < best:
                    best, source = steps[i], key
            if growth and (best is None or growth[0] < best):
                step = heapq.heappop(growth)
            elif best is not None and source is not None:
                step = best
                at[source] += 1
            else:
                break
            _, _, job_id, k, size, stamp = step
            if stamp != version.get(job_id, 0):
                continue
            had = current[job_id][1] if job_id in current else 0
            if left[types[k]] < size - had:
                continue
            left[types[k]] -= size - had
            current[job_id] = (k, size)
            version[job_id] = stamp + 1
            job = waiting[job_id]
            base = rate(job, k, size)
            for larger in job.gpu_counts:
                if larger > size:
                    gain = (rate(job, k, larger) - base) / (larger - size)
                    if gain > 0:
                        heapq.heappush(growth, (-gain, job.arrival, job_id, k, larger,
                                                stamp + 1))
        return [(waiting[job_id], types[k], n) for job_id, (k, n) in current.items()]


class PromotedOrder:
    """The promoted jobs in the order they are served (arrival, then id), kept from one
    decision to the next: :meth:`follow` is told the guard's promoted ids at every
    decision (a set compare, then the ids that joined or left), so a queue with
    thousands of promoted jobs is not sorted again at every event."""

    def __init__(self) -> None:
        self._order: list[tuple[float, str]] = []
        self._ids: frozenset[str] = frozenset()

    def follow(self, promoted: AbstractSet[str], waiting: Mapping[str, Job]) -> None:
        """Take the promoted ids of this decision; a job joins when promoted while waiting
        (as the guard promotes: one not yet seen waiting is looked at again next time)."""
        if promoted == self._ids:
            return
        gone = self._ids - promoted
        if gone:
            self._order = [entry for entry in self._order if entry[1] not in gone]
        kept = set(self._ids - gone)
        for job_id in promoted - self._ids:
            job = waiting.get(job_id)
            if job is not None:
                bisect.insort(self._order, (job.arrival, job_id))
                kept.add(job_id)
        self._ids = frozenset(kept)

    def jobs(self, waiting: Mapping[str, Job], started: AbstractSet[str]) -> Iterator[Job]:
        """The promoted jobs waiting and not in ``started``, in order."""
        for _, job_id in self._order:
            job = waiting.get(job_id)
            if job is not None and job_id not in started:
                yield job
