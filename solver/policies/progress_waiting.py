"""The waiting jobs a ``progress`` round may leave out of its MILP, kept from one
decision to the next.

On the whole Philly trace tens of thousands of jobs wait while the cluster is full: a
round over every active job would be a MILP of about 100,000 options, built at every
arrival and completion. Most of those jobs cannot be chosen, and this module says
which, with a proof rather than a window:

*Dominance.* Let option ``o`` of job ``j`` be ``s`` GPUs of type ``t`` worth ``v``, on a
cluster of ``C`` GPUs. If more than ``C - s`` other jobs each have a one-GPU option on
``t`` worth more than ``v``, and none of those options is a packed gang of more than
half a server, no optimal choice of the round takes ``o``: a choice that takes it takes
at most ``C - s`` other jobs (each holds at least one GPU), so one of those jobs is not
chosen, and giving it its one-GPU option instead of ``o`` fits (no more GPUs of ``t``,
no more big packed gangs, one option for that job) and is worth more. A waiting job
all of whose options are so dominated is left out of the MILP, which keeps exactly its
optimal choices (its solver may return another of them, or another choice within its
gap: replays where jobs are left out are measured, not assumed, to be the same;
docs/scale.md).

Only one-GPU options count as dominators, so that one partial sort per GPU type at each
decision gives every threshold: ``tau(t, s)``, the ``(C - s + 1)``-th largest one-GPU
value on ``t`` among the round's options (the running jobs', those of the waiting jobs
always in the MILP, and the candidates'); a candidate's option on ``t`` is dominated
when its value is below ``tau(t, s)``. On Philly 93 % of the jobs ask for one GPU.

*Candidates* are waiting jobs of one gang size and no deadline, under the plain
``progress`` (:meth:`~hetsched.policies.progress.Progress.plain`): their options and
values do not change while they wait (the work left of a waiting job is fixed, and so is
whether it ran before), so each is computed once, when the job joins the queue
(followed through the replay's :class:`~hetsched.policies.rolling.PendingFeed`), not at
every decision. Without a feed (a state made by hand, the live agent's) nothing is left
out.

The jobs left out still count where the policy looks past the MILP: the GPUs left free
once the chosen options are placed go to waiting jobs by value, and that fill sees every
waiting job (:meth:`WaitingOptions.left_out`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from hetsched.core.records import Job
from hetsched.policies.baselines.kept_queue import FeedReader
from hetsched.policies.progress_gangs import Option
from hetsched.policies.rolling import ClusterState

__all__ = ["Valued", "WaitingOptions"]

#: An option, its value in the round, and whether it is a packed gang of more than half
#: of its type's largest server.
Valued = tuple[Option, float, bool]
#: A job's valued options (empty: it can run nowhere).
Make = Callable[[Job], list[Valued]]


@dataclass
class _Waiting:
    """A waiting job: its place in the queue, and for a candidate its options and slot."""

    seq: int
    job: Job
    candidate: bool
    options: list[Valued] = field(default_factory=list)
    slot: int = -1


class WaitingOptions:
    """The queue as the policy last saw it, with each candidate's options and their
    values in arrays (a row per slot, a column per GPU type; see the module)."""

    def __init__(self) -> None:
        self._reader = FeedReader()
        self._key: tuple[int, ...] | None = None
        self._types = 0
        self._type_index: dict[str, int] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._always: dict[str, _Waiting] = {}  # the waiting jobs that are not candidates
        self._seq = 0
        self._slots: list[_Waiting | None] = []
        self._free: list[int] = []
        self._value = np.empty((0, 0))  # value of the slot's option on each type; -inf: none
        self._size = np.empty(0, dtype=np.int64)
        self._small = np.empty((0, 0), dtype=np.bool_)  # a one-GPU option, not a big gang
        self._alive = np.empty(0, dtype=np.bool_)
        self._kept = np.empty(0, dtype=np.bool_)
        #: candidates left out of a round's MILP, summed over its decisions
        self.left_out_total = 0

    # -- following the queue ----------------------------------------------------------
    def follow(self, state: ClusterState, key: tuple[int, ...], types: Sequence[str],
               candidate: Callable[[Job], bool], make: Make) -> bool:
        """Bring the queue up to ``state``'s; ``key`` names what the options were
        computed from (when it changes, they are computed anew), ``types`` the cluster's
        GPU types in the round's order. ``False``: the state has no feed, and the caller
        takes the whole queue."""
        if state.pending_feed is None:
            self._forget()
            return False
        if key != self._key or len(types) != self._types:
            self._forget()
            self._key, self._types = key, len(types)
            self._type_index = {t: i for i, t in enumerate(types)}
        changes = self._reader.read(state)
        joined: dict[str, Job] = {}
        if changes is None:
            self._forget_jobs()
            joined = {job.id: job for job in state.pending}
        else:
            for job, job_id in changes:
                joined.pop(job_id, None)
                self._leave(job_id)
                if job is not None:
                    joined[job_id] = job
        for job in joined.values():
            self._join(job, candidate(job), make)
        return True

    def _forget(self) -> None:
        self._reader = FeedReader()
        self._key = None
        self._forget_jobs()

    def _forget_jobs(self) -> None:
        self._waiting.clear()
        self._always.clear()
        self._slots.clear()
        self._free.clear()
        types = self._types
        self._value = np.empty((0, types))
        self._small = np.empty((0, types), dtype=np.bool_)
        self._size = np.empty(0, dtype=np.int64)
        self._alive = np.empty(0, dtype=np.bool_)
        self._kept = np.empty(0, dtype=np.bool_)

    def _leave(self, job_id: str) -> None:
        gone = self._waiting.pop(job_id, None)
        self._always.pop(job_id, None)
        if gone is not None and gone.slot >= 0:
            self._alive[gone.slot] = False
            self._slots[gone.slot] = None
            self._free.append(gone.slot)

    def _join(self, job: Job, candidate: bool, make: Make) -> None:
        self._seq += 1
        entry = _Waiting(self._seq, job, candidate)
        self._waiting[job.id] = entry
        if not candidate:
            self._always[job.id] = entry
            return
        entry.options = make(job)
        slot = self._free.pop() if self._free else self._grow()
        entry.slot = slot
        self._slots[slot] = entry
        row = self._value[slot]
        row.fill(-np.inf)
        self._small[slot] = False
        self._size[slot] = entry.options[0][0].size if entry.options else 0
        for option, value, big in entry.options:
            t = self._type_index[option.gpu_type]
            row[t] = value
            self._small[slot, t] = option.size == 1 and not big
        self._alive[slot] = bool(entry.options)

    def _grow(self) -> int:
        slot = len(self._slots)
        self._slots.append(None)
        if slot >= len(self._alive):
            more = max(1024, len(self._alive))
            types = self._types
            self._value = np.concatenate([self._value, np.full((more, types), -np.inf)])
            self._small = np.concatenate([self._small, np.zeros((more, types), dtype=np.bool_)])
            self._size = np.concatenate([self._size, np.zeros(more, dtype=np.int64)])
            self._alive = np.concatenate([self._alive, np.zeros(more, dtype=np.bool_)])
        return slot

    # -- a round ----------------------------------------------------------------------
    def always(self) -> list[Job]:
        """The waiting jobs that are not candidates (always in the MILP), in queue order."""
        return [w.job for w in self._always.values()]

    def best_per_gpu(self) -> float:
        """The largest value per GPU of any candidate's option (0 if none)."""
        alive = self._alive
        if not alive.any():
            return 0.0
        values = self._value[: len(alive)][alive]
        per_gpu = values / np.maximum(self._size[: len(alive)][alive], 1)[:, None]
        return float(per_gpu.max(initial=0.0))

    def choose(self, gpus: int, small: Iterable[tuple[str, float]]) -> int:
        """Decide which candidates the round keeps, on a cluster of ``gpus`` GPUs; ``small``:
        (GPU type, value) of each one-GPU option, not a big packed gang, of the jobs already in
        the round (one per job and type). How many candidates are left out."""
        count = len(self._alive)
        alive = self._alive
        values = self._value[:count]
        sizes = self._size[:count]
        fixed: list[list[float]] = [[] for _ in range(self._types)]
        for gpu_type, value in small:
            fixed[self._type_index[gpu_type]].append(value)
        dominated = np.ones(count, dtype=np.bool_)
        rank = gpus - sizes  # tau(t, s): the (gpus - s + 1)-th largest, index gpus - s
        for t in range(self._types):
            column = values[:, t]
            pool = np.concatenate([column[alive & self._small[:count, t]],
                                   np.asarray(fixed[t], dtype=np.float64)])
            tau = np.full(count, -np.inf)
            if len(pool) and gpus >= 1:
                top = min(gpus, len(pool))
                best = -np.sort(-np.partition(pool, len(pool) - top)[len(pool) - top:])
                usable = (rank >= 0) & (rank < top)
                tau[usable] = best[rank[usable]]
            dominated &= (column < tau) | (column == -np.inf)
        self._kept = alive & ~dominated
        left = int(np.count_nonzero(alive & dominated))
        self.left_out_total += left
        return left

    def in_round(self, always: dict[str, list[Valued]]) -> list[Valued]:
        """The waiting jobs' options in the round, in queue order: ``always``, those of
        the jobs always in it, by job id, and those of the candidates kept."""
        slots = self._slots
        entries = [w for w in self._always.values() if w.job.id in always]
        entries += [w for slot in np.flatnonzero(self._kept)
                    if (w := slots[slot]) is not None]
        entries.sort(key=lambda w: w.seq)
        found: list[Valued] = []
        for entry in entries:
            found.extend(entry.options if entry.candidate else always[entry.job.id])
        return found

    def left_out(self) -> list[Valued]:
        """The options of the candidates the round left out (the fill sees them)."""
        slots = self._slots
        count = len(self._kept)
        return [valued for slot in np.flatnonzero(self._alive[:count] & ~self._kept)
                if (w := slots[slot]) is not None for valued in w.options]
