"""Non-preemptive ordering policies with the starvation guard (:class:`GuardedOrder`:
SJF, EDF), whose walk looks only at jobs that could start (issue 33, item 18).

On the whole Philly trace a few GPUs often stay free that no waiting job wants: starting
on them finishes later than waiting for a faster type
(:func:`~hetsched.policies.starting.worth_starting`).
A walk of the whole queue then tries tens of thousands of jobs at every arrival for
nothing. Jobs of one kind (job type, gang size, allowed GPU types, no node limits) have
the same speeds, and whether a type is worth starting on is a threshold on the job's
steps left: a job of more steps than its kind's threshold for every type with room
cannot start. :func:`start_kept` walks the promoted jobs, then only the other jobs under
their kind's threshold (a bound a little above it: never a job that could start left
out), in the queue's order, recomputing the thresholds after each start. It starts
exactly the jobs the walk of every job (:func:`~hetsched.policies.baselines.common.start_in_order`)
starts: a job over the bound tries only types without room, which fails and records
nothing that changes a later job's answer.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Sequence
from typing import Any

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.core.records import Job
from hetsched.policies.baselines.common import start_in_order
from hetsched.policies.baselines.kept_queue import (
    FeedReader,
    KeptOrder,
    Kind,
    KindIndex,
    Rule,
    StarvationGuard,
)
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks
from hetsched.policies.starting import SpeedBook, TypeChoice, types_worth_starting

__all__ = ["GuardedOrder", "kept_walk"]

def kept_walk(state: ClusterState, order: KeptOrder, types: TypeChoice, pool: FreeGpuIndex,
              running: Sequence[tuple[Any, Job]] = ()) -> Iterator[Job]:
    """The walk of a decision: ``order``'s waiting jobs that could start, merged by key
    with ``running`` (``(key, job)`` of running jobs, sorted; their GPUs are the
    ``pool``'s victims, ranked by their place there): every promoted job, then the
    others under their kind's bound (:func:`_rules`). Read it one job at a time,
    deciding each before asking for the next: the bounds are computed again, from
    the last job given, whenever the pool's free GPUs or ``types``' starts changed
    (a start takes GPUs and changes when GPUs free; a preemption frees GPUs)."""
    kinds = order.kinds
    assert kinds is not None
    keys_by_rank = [key for key, _ in running]
    after: Any = None
    seen: tuple[int, int] | None = None
    waiting: Iterator[tuple[Any, Job]] = iter(())
    head: tuple[Any, Job] | None = None
    index = 0
    while True:
        now_seen = (types.starts, pool.free_count())
        if now_seen != seen:  # (first, or something changed): the candidates again
            seen = now_seen
            rules = _rules(state, kinds, types, pool, _victim_keys(state, pool, keys_by_rank))
            waiting = heapq.merge(_after(order.front_items(), after),
                                  kinds.candidates(after, rules), key=_first)
            head = next(waiting, None)
        if index < len(running) and (head is None or running[index][0] < head[0]):
            after, job = running[index]
            index += 1
        elif head is not None:
            after, job = head
            head = next(waiting, None)
        else:
            return
        yield job


def _victim_keys(state: ClusterState, pool: FreeGpuIndex, keys_by_rank: Sequence[Any]
                 ) -> dict[str, Any]:
    """Per GPU type, the key of the last running job in the walk whose GPUs of that type
    are victims (a waiting job after it finds only free GPUs there)."""
    last: dict[str, int] = {}
    gpus = state.cluster.gpu_by_id
    for gpu, rank in pool.victims.items():
        gpu_type = gpus[gpu].gpu_type
        if rank > last.get(gpu_type, -1):
            last[gpu_type] = rank
    return {gpu_type: keys_by_rank[rank] for gpu_type, rank in last.items()}


def _rules(state: ClusterState, kinds: KindIndex, types: TypeChoice, pool: FreeGpuIndex,
           victim_keys: dict[str, Any]) -> dict[Kind | None, list[Rule]]:
    """Per kind, which of its jobs could start now: for each type with room (free GPUs
    for any job; victims' GPUs for jobs before the last victim there), the jobs of no
    more steps than make the type worth starting on (:func:`_threshold`)."""
    rules: dict[Kind | None, list[Rule]] = {}
    now = state.now
    for kind, by_key in kinds.by_key.items():
        if kind is None:
            continue
        job = by_key[0][1]
        speeds = types.book.speeds(state, job)
        count = job.num_gpus
        found: list[Rule] = []
        for gpu_type, speed in speeds.items():
            if pool.available(gpu_type) >= count:
                before = None
            elif gpu_type in victim_keys and pool.available(gpu_type, True) >= count:
                before = victim_keys[gpu_type]
            else:
                continue
            found.append((_threshold(speeds, gpu_type, speed, count, types, now), before))
        rules[kind] = found
    return rules


def _after(items: Iterator[tuple[Any, Job]], after: Any) -> Iterator[tuple[Any, Job]]:
    return items if after is None else (item for item in items if item[0] > after)


def _first(item: tuple[Any, Job]) -> Any:
    return item[0]


def _threshold(speeds: dict[str, float], gpu_type: str, speed: float, count: int,
               types: TypeChoice, now: float) -> float:
    """Steps above which starting on ``gpu_type`` now finishes later than waiting for a
    faster type (``worth_starting``'s test, with its tolerance), plus a margin."""
    limit = math.inf
    for other, faster in speeds.items():
        if faster <= speed:
            continue
        free_at = types.releases.earliest(other, count)
        if not math.isfinite(free_at):
            continue
        # now + s/speed <= free_at + s/faster + 1e-9 * max(1, best), best <= free_at + s/faster
        slope = 1.0 / speed - 1.0 / faster - 1e-9 / faster
        if slope <= 0:
            continue
        # (and the rounding of sums of times this large: a few ulps, generously)
        room = free_at - now + 1e-9 * (1.0 + abs(free_at)) + 1e-13 * (1.0 + abs(now)
                                                                       + abs(free_at))
        limit = min(limit, room / slope)
    return limit * (1 + 1e-7) + 1e-9 if limit != math.inf else limit


class GuardedOrder(PolicyHooks):
    """A non-preemptive ordering policy with backfilling and the starvation guard: pending
    jobs in the order of :meth:`rank` (promoted jobs first, by arrival), each on the
    fastest GPU type worth starting (:func:`types_worth_starting`); a promoted job that fits
    nowhere reserves its fastest type. Subclasses give ``name`` and :meth:`rank`."""

    name = "guarded-order"
    #: Events only: a non-preemptive order has nothing to do while nobody waits.
    round_s: float | None = None

    def __init__(self, *, starvation_factor: float = 8.0) -> None:
        self.speeds = SpeedBook()
        self.guard = StarvationGuard(starvation_factor)
        # The queue kept in order from decision to decision (kept_queue): a decision
        # costs time in what changed, not in the jobs waiting.
        self.reader = FeedReader()
        self.order = KeptOrder(by_kind=True)
        self._order_kept = False

    def rank(self, state: ClusterState, job: Job) -> tuple[float, float, str]:
        """The order among jobs that are not promoted (smallest first)."""
        raise NotImplementedError

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event when nobody waits (only the guard's clock moves, and the
        call at the last boundary moves it as far)."""
        return -math.inf if state.pending else math.inf

    def decide(self, state: ClusterState) -> Decision:
        """Start the pending jobs that fit, in order: promoted jobs by arrival, then the
        others by :meth:`rank`."""
        changes = self.reader.read(state)
        promoted = self.guard.update(state, lambda job: self.speeds.predicted_s(state, job),
                                     changes)

        def rank(job: Job) -> tuple[int, tuple[float, float, str]]:
            return (1, self.rank(state, job))  # after every promoted job

        def steps(job: Job) -> float:
            return state.remaining.get(job.id, job.work)

        if changes is not None and self.guard.followed and self._order_kept:
            self.order.follow(changes, promoted, self.guard.newly, self.reader.jobs, rank,
                              _by_arrival, steps)
        else:
            self.order.rebuild(state.pending, promoted, rank, _by_arrival, steps)
        self._order_kept = state.pending_feed is not None
        if not state.pending or not state.has_free():
            return Decision()
        types = types_worth_starting(state, self.speeds, promoted)
        pool = state.pool()
        return start_in_order(state, kept_walk(state, self.order, types, pool), types,
                              reserves=lambda job: job.id in promoted, pool=pool)


def _by_arrival(job: Job) -> tuple[int, tuple[float, float, str]]:
    """A promoted job's place: before the others, by arrival."""
    return (0, (job.arrival, 0.0, job.id))
