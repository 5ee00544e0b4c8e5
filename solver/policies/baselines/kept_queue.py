"""The pending queue kept from one decision to the next: what joined and left it since a
policy last looked (:class:`FeedReader`, from the state's
:class:`~hetsched.policies.rolling.PendingFeed`), the starvation guard's clocks
(:class:`StarvationGuard`) and the queue in a policy's order (:class:`KeptOrder`), each
changed by what changed. On the whole Philly trace tens of thousands of jobs wait while
the cluster is full: a decision that walks, or sorts, every waiting job costs time in
the queue at every arrival and completion, one that follows the changes costs time in
them. A state without a feed (made by hand, or derived by a wrapper
with other pending jobs) is read whole, as before; both ways decide the same."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Hashable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any

from hetsched.core.records import Job
from hetsched.policies.rolling import ClusterState, PendingFeed, PendingLog

__all__ = ["Change", "FeedReader", "KeptOrder", "KindIndex", "Rule", "StarvationGuard"]

#: A change of the queue, in order: (the job, its id) joined, (None, its id) left.
Change = tuple[Job | None, str]
#: Which jobs of a kind could start: (most steps left, key to stay below or None).
Rule = tuple[float, Any]
#: A job's place in an order (unique per job: ending in its id, say).
Key = Callable[[Job], Any]


class FeedReader:
    """Follows a replay's pending queue for one policy: :meth:`read` returns the changes
    since the previous read, or ``None`` when they cannot be followed (no feed, another
    replay, a state derived with other jobs), and ``jobs`` holds the pending jobs by id
    either way."""

    def __init__(self) -> None:
        self._log: PendingLog | None = None
        self._mark = 0
        self.jobs: dict[str, Job] = {}

    def read(self, state: ClusterState) -> list[Change] | None:
        """The changes of ``state``'s queue since the last read (``None``: read whole)."""
        feed = state.pending_feed
        if feed is None or feed.log is not self._log or feed.mark < self._mark:
            self._whole(state)
            return None
        changes = feed.since(self._mark)
        jobs = self.jobs
        for job, job_id in changes:
            if job is None:
                jobs.pop(job_id, None)
            else:
                jobs[job_id] = job
        self._mark = feed.mark
        if len(jobs) != len(state.pending):
            self._whole(state)
            return None
        return changes

    def _whole(self, state: ClusterState) -> None:
        feed = state.pending_feed
        self._log = None if feed is None else feed.log
        self._mark = 0 if feed is None else feed.mark
        self.jobs = {job.id: job for job in state.pending}


class StarvationGuard:
    """Promotes a pending job that has waited ``factor`` times its predicted duration
    (since its arrival, or since it was last preempted). A promoted job keeps the
    promotion until it finishes; the policies put promoted jobs first, oldest arrival
    first, and a promoted job that does not fit reserves its preferred GPU type (no job
    after it starts there) until it does.

    With the queue's changes (``changes`` of a :class:`FeedReader`) an update costs time
    in the changes, the running jobs and the jobs promoted now: each waiting job's
    promotion time sits in a heap. Without them every waiting job is looked at."""

    def __init__(self, factor: float = 8.0) -> None:
        if not factor > 0:
            raise ValueError(f"starvation factor must be > 0, got {factor}")
        self.factor = factor
        self.promoted: set[str] = set()
        #: jobs promoted by the last update (in the order found)
        self.newly: list[str] = []
        # A waiting job: since when (s), and how long it may wait (s), fixed while it
        # waits (its steps left do not change), for the model and cluster of ``_model``.
        self._since: dict[str, tuple[float, float]] = {}
        self._model: tuple[object, object] = (None, None)
        self._ran: set[str] = set()
        self._last_now = -math.inf
        # (when it may be promoted, job id) of waiting jobs, while ``_heap_ok``
        self._heap: list[tuple[float, str]] = []
        self._heap_ok = False
        self._running: frozenset[str] = frozenset()
        #: whether the last update followed the queue's changes (else it read it whole)
        self.followed = False

    def update(self, state: ClusterState, predicted_s: Callable[[Job], float],
               changes: list[Change] | None = None) -> set[str]:
        """Record who waits since when; return the promoted job ids."""
        model, cluster = self._model
        if state.throughput is not model or state.cluster is not cluster:
            # Another model or cluster: other predictions.
            self._model = (state.throughput, state.cluster)
            self._since.update({job_id: (start, math.nan)
                                for job_id, (start, _) in self._since.items()})
            changes = None
        self.followed = changes is not None and self._heap_ok
        if changes is None or not self._heap_ok:
            return self._update_whole(state, predicted_s)
        return self._update_changes(state, predicted_s, changes)

    def _update_whole(self, state: ClusterState, predicted_s: Callable[[Job], float]
                      ) -> set[str]:
        running = frozenset(state.running_types())
        since = self._since
        factor = self.factor
        promoted = self.promoted
        now = state.now
        before = set(promoted)
        for job in state.pending:
            found = since.get(job.id)
            if found is None or found[1] != found[1]:  # new, or its wait is to compute
                # Preemptions happen at decisions: a job seen running before waits since
                # the previous decision.
                start = found[0] if found is not None else \
                    self._last_now if job.id in self._ran else job.arrival
                found = since[job.id] = (start, factor * predicted_s(job))
            if now - found[0] >= found[1]:
                promoted.add(job.id)
        for job_id in running:
            since.pop(job_id, None)
        alive = running | {job.id for job in state.pending}
        self._ran = (self._ran | running) & alive
        promoted &= alive
        for job_id in [j for j in since if j not in alive]:
            del since[job_id]
        self._last_now = now
        self.newly = [job_id for job_id in promoted if job_id not in before]
        self._running = running
        self._heap = [(start + wait, job_id) for job_id, (start, wait) in since.items()
                      if job_id not in promoted]
        heapq.heapify(self._heap)
        self._heap_ok = state.pending_feed is not None
        return promoted

    def _update_changes(self, state: ClusterState, predicted_s: Callable[[Job], float],
                        changes: list[Change]) -> set[str]:
        since = self._since
        heap = self._heap
        promoted = self.promoted
        factor = self.factor
        now = state.now
        running = frozenset(state.running_types())
        left: set[str] = set()
        for job, job_id in changes:
            if job is None:
                since.pop(job_id, None)
                left.add(job_id)
                continue
            left.discard(job_id)
            start = self._last_now if job_id in self._ran else job.arrival
            wait = factor * predicted_s(job)
            since[job_id] = (start, wait)
            if job_id not in promoted:
                heapq.heappush(heap, (start + wait, job_id))
        for job_id in running:
            since.pop(job_id, None)
        # Jobs that ran and are gone (finished) lose their promotion.
        for job_id in (self._running | left) - running:
            if job_id not in since:
                promoted.discard(job_id)
        self._ran |= running
        self._running = running
        newly = []
        later = []
        slack = 1e-6 * max(1.0, abs(now))
        while heap and heap[0][0] <= now + slack:
            entry = heapq.heappop(heap)
            found = since.get(entry[1])
            if found is None or entry[1] in promoted or found[0] + found[1] != entry[0]:
                continue  # it started, or was promoted, or joined again since
            if now - found[0] >= found[1]:
                promoted.add(entry[1])
                newly.append(entry[1])
            else:
                later.append(entry)
        for entry in later:
            heapq.heappush(heap, entry)
        self.newly = newly
        self._last_now = now
        return promoted


class KeptOrder:
    """The pending jobs in two runs, each sorted by a key unique per job: promoted jobs
    (by ``front_key``) before the others (by ``key``, held by kind in ``kinds``), kept
    from decision to decision by the queue's changes and the guard's new promotions. A
    waiting job's key must not change while it waits (it may when it joins again); the
    keys, and the steps left the kinds sort by, are computed when a job is placed, with
    the functions of that decision."""

    def __init__(self) -> None:
        self._front: list[tuple[Any, Job]] = []
        self._where: dict[str, tuple[bool, Any]] = {}  # job id -> (in front, its key)
        #: the jobs not promoted, by kind
        self.kinds = KindIndex()
        self._kept = False  # built from a state with a feed: the next changes apply

    def front_items(self) -> Iterator[tuple[Any, Job]]:
        """``(key, job)`` of the promoted jobs, in order."""
        yield from self._front

    def first_key(self) -> Any:
        """The smallest key of a waiting job, promoted or not (``None``: nobody waits)."""
        heads = [entries[0][0] for entries in self.kinds.by_key.values() if entries]
        if self._front:
            heads.append(self._front[0][0])
        return min(heads, default=None)

    def can_follow(self, changes: list[Change] | None) -> bool:
        """Whether ``changes`` (of a :class:`FeedReader`) apply to this order: there are
        some, and the order was built from a state with a feed."""
        return changes is not None and self._kept

    def keep(self, state: ClusterState, changes: list[Change] | None,
             promoted: AbstractSet[str], newly: list[str], jobs: dict[str, Job], key: Key,
             front_key: Key, steps: Callable[[Job], float]) -> None:
        """The order of ``state``'s waiting jobs: ``changes`` followed if they apply
        (:meth:`can_follow`), else every job anew."""
        if self.can_follow(changes):
            assert changes is not None
            self.follow(changes, promoted, newly, jobs, key, front_key, steps)
        else:
            self.rebuild(state.pending, promoted, key, front_key, steps, state.pending_feed)

    def rebuild(self, jobs: Iterable[Job], promoted: AbstractSet[str], key: Key,
                front_key: Key, steps: Callable[[Job], float],
                feed: PendingFeed | None = None) -> None:
        """Every job anew (``feed``: that of the state they are the waiting jobs of)."""
        self._kept = feed is not None
        self._front, self._where = [], {}
        self.kinds.clear()
        for job in jobs:
            first = job.id in promoted
            self._add(job, first, front_key(job) if first else key(job), steps)

    def follow(self, changes: list[Change], promoted: AbstractSet[str], newly: list[str],
               jobs: dict[str, Job], key: Key, front_key: Key,
               steps: Callable[[Job], float]) -> None:
        """Apply the queue's ``changes`` (in order), then move the jobs ``newly``
        promoted (``jobs``: the pending jobs by id) to the front."""
        for job, job_id in changes:
            self._drop(job_id)
            if job is not None:
                first = job_id in promoted
                self._add(job, first, front_key(job) if first else key(job), steps)
        for job_id in newly:
            job = jobs.get(job_id)
            if job is not None and not self._where[job_id][0]:
                self._drop(job_id)
                self._add(job, True, front_key(job), steps)

    def __iter__(self) -> Iterator[Job]:
        """The jobs in order (front first)."""
        for _, job in heapq.merge(self._front, self.kinds.candidates(None, {}), key=_first):
            yield job

    def _add(self, job: Job, first: bool, key: Any, steps: Callable[[Job], float]) -> None:
        self._where[job.id] = (first, key)
        if first:
            self._front.insert(bisect.bisect_left(self._front, key, key=_first), (key, job))
        else:
            self.kinds.add(job, key, steps(job))

    def _drop(self, job_id: str) -> None:
        found = self._where.pop(job_id, None)
        if found is None:
            return
        first, key = found
        if first:
            del self._front[bisect.bisect_left(self._front, key, key=_first)]
        else:
            self.kinds.drop(job_id)


Kind = tuple[str, int, Any]


class KindIndex:
    """Jobs by kind, each kind sorted twice: by its place in the order (``key``) and by
    steps left. Jobs that are not of a kind (a share of a GPU, node limits, CPUs and
    memory) are kept apart, always looked at."""

    def __init__(self) -> None:
        self.by_key: dict[Kind | None, list[tuple[Any, Job]]] = {}
        self.by_steps: dict[Kind | None, list[tuple[float, Any, Job]]] = {}
        self._of: dict[str, tuple[Kind | None, float, Any]] = {}

    @staticmethod
    def kind(job: Job) -> Kind | None:
        """The job's kind, ``None`` if it has none (see the class)."""
        if job.gpu_share is not None or job.allowed_nodes is not None or \
                job.needs_node_resources:
            return None
        return (job.job_type, job.num_gpus, job.allowed_gpu_types)

    def add(self, job: Job, key: Any, steps: float) -> None:
        """``job`` waits, at ``key``, with ``steps`` left."""
        kind = self.kind(job)
        by_key = self.by_key.setdefault(kind, [])
        by_key.insert(bisect.bisect_left(by_key, key, key=_first), (key, job))
        by_steps = self.by_steps.setdefault(kind, [])
        entry = (steps, key, job)
        by_steps.insert(bisect.bisect_left(by_steps, (steps, key), key=_two), entry)
        self._of[job.id] = (kind, steps, key)

    def drop(self, job_id: str) -> None:
        """``job_id`` no longer waits here."""
        found = self._of.pop(job_id, None)
        if found is None:
            return
        kind, steps, key = found
        by_key = self.by_key[kind]
        del by_key[bisect.bisect_left(by_key, key, key=_first)]
        by_steps = self.by_steps[kind]
        del by_steps[bisect.bisect_left(by_steps, (steps, key), key=_two)]
        if not by_key:
            del self.by_key[kind], self.by_steps[kind]

    def clear(self) -> None:
        """No job."""
        self.by_key.clear()
        self.by_steps.clear()
        self._of.clear()

    def candidates(self, after: Any, rules: dict[Kind | None, list[Rule]]
                   ) -> Iterator[tuple[Any, Job]]:
        """``(key, job)`` of the jobs after ``after`` (``None``: from the first) that some
        rule of their kind admits, in key order: a rule ``(steps, before)`` admits the
        jobs of at most ``steps`` steps left and, unless ``before`` is ``None``, of keys
        below ``before``. A kind without rules in ``rules`` (and the jobs of no kind):
        every job."""
        runs: list[Iterator[tuple[Any, Job]] | list[tuple[Any, Job]]] = []
        for kind, by_key in self.by_key.items():
            start = 0 if after is None else bisect.bisect_right(by_key, after, key=_first)
            found = rules.get(kind) if kind is not None else None
            if found is None or any(steps == math.inf and before is None
                                    for steps, before in found):
                runs.append(_from(by_key, start))
                continue
            chosen: dict[str, tuple[Any, Job]] = {}
            by_steps = self.by_steps[kind]
            for steps, before in found:
                if steps == math.inf:
                    end = len(by_key) if before is None else \
                        bisect.bisect_left(by_key, before, key=_first)
                    chosen.update((job.id, (key, job)) for key, job in by_key[start:end])
                    continue
                for _, key, job in by_steps[:bisect.bisect_right(by_steps, steps,
                                                                 key=_first3)]:
                    if (after is None or key > after) and (before is None or key < before):
                        chosen[job.id] = (key, job)
            if chosen:
                runs.append(sorted(chosen.values(), key=_first))
        return heapq.merge(*runs, key=_first)


def _from(entries: list[tuple[Any, Job]], start: int) -> Iterator[tuple[Any, Job]]:
    for index in range(start, len(entries)):
        yield entries[index]


def _two(entry: tuple[float, Any, Job]) -> tuple[float, Any]:
    return (entry[0], entry[1])


def _first3(entry: tuple[float, Any, Job]) -> float:
    return entry[0]


def _first(entry: tuple[Hashable, Job]) -> Any:
    return entry[0]
