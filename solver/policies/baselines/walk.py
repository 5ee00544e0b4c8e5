"""The walk of a decision over a kept queue (:mod:`.kept_queue`): only the waiting jobs
that could start, merged with the running jobs in the policy's order.

On the whole Philly trace tens of thousands of jobs wait while a few GPUs stay free that
no waiting job wants: starting on them finishes later than waiting for a faster type
(:func:`~hetsched.policies.starting.worth_starting`), or the job's gang does not fit.
A walk of the whole queue then tries every job at every arrival for nothing. Jobs of
one kind (job type, gang size, allowed GPU types, no node limits) have the same speeds,
and whether a type is worth starting on is a threshold on the job's steps left: a job
of more steps than its kind's threshold for every type with room cannot start, nor can
one after the last running job whose GPUs it could take when no type has free room.
:func:`kept_walk` gives the promoted jobs, then only jobs some rule of their kind admits
(a bound a little above the threshold: never a job that could start left out), in the
queue's order. It starts and preempts exactly what the walk of every job does: a job
left out tries only types without room, which fails and records nothing that changes a
later job's answer.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.core.records import Job
from hetsched.policies.baselines.kept_queue import KeptOrder, Kind, KindIndex, Rule
from hetsched.policies.rolling import ClusterState
from hetsched.policies.starting import TypeChoice

__all__ = ["kept_walk", "walked_running"]


def walked_running(order: KeptOrder, running: Iterable[tuple[Any, Job]]
                   ) -> list[tuple[Any, Job]]:
    """The running jobs a preemptive walk must look at (``(key, job)``, sorted by key):
    those whose key is not below every waiting job's. The others come before any
    waiting job, so before anything is taken: they keep their GPUs whatever happens,
    and leaving them out of the walk and of the victims decides the same (on a
    busy cluster about half of the running jobs, at every decision)."""
    first = order.first_key()
    kept = running if first is None else [item for item in running if not item[0] < first]
    return sorted(kept, key=_first)


def kept_walk(state: ClusterState, order: KeptOrder, types: TypeChoice | None,
              pool: FreeGpuIndex, running: Sequence[tuple[Any, Job]] = ()) -> Iterator[Job]:
    """The walk of a decision: ``order``'s waiting jobs that could start, merged by key
    with ``running`` (``(key, job)`` of running jobs, sorted; their GPUs are the
    ``pool``'s victims, ranked by their place there): every promoted job, then the
    others that a rule of their kind admits (:func:`_rules`; ``types``: the policy's
    choice of types worth starting, ``None`` for a policy that takes any type it may
    use). Read it one job at a time, deciding each before asking for the next: the
    rules are made again, from the last job given, whenever the pool's free GPUs grew
    (a preemption freed some) or, with ``types``, a job started (it changes when GPUs
    free); a start without ``types`` only takes room, which leaves the rules true."""
    kinds = order.kinds
    keys_by_rank = [key for key, _ in running]
    after: Any = None
    made: int | None = None  # the starts when the rules were made (None: not yet)
    free = -1
    waiting: Iterator[tuple[Any, Job]] = iter(())
    head: tuple[Any, Job] | None = None
    index = 0
    while True:
        free, was = pool.free_count(), free
        starts = types.starts if types is not None else 0
        if made != starts or free > was:  # (first, or something changed): again
            made = starts
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


def _rules(state: ClusterState, kinds: KindIndex, types: TypeChoice | None,
           pool: FreeGpuIndex, victim_keys: dict[str, Any]) -> dict[Kind | None, list[Rule]]:
    """Per kind, which of its jobs could start now: for each type with room (free GPUs
    for any job; victims' GPUs for jobs before the last victim there), the jobs of no
    more steps than make the type worth starting on (:func:`_threshold`; any steps
    without ``types``)."""
    rules: dict[Kind | None, list[Rule]] = {}
    now = state.now
    for kind, by_key in kinds.by_key.items():
        if kind is None:
            continue
        job = by_key[0][1]
        speeds = types.book.speeds(state, job) if types is not None else \
            {t: 0.0 for t in state.cluster.type_names if job.may_use(t)}
        count = job.num_gpus
        found: list[Rule] = []
        for gpu_type, speed in speeds.items():
            if pool.available(gpu_type) >= count:
                before = None
            elif gpu_type in victim_keys and pool.available(gpu_type, True) >= count:
                before = victim_keys[gpu_type]
            else:
                continue
            found.append((math.inf if types is None else
                          _threshold(speeds, gpu_type, speed, count, types, now), before))
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
