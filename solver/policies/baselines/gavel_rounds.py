"""Gavel's own rounds, as its simulator runs them (stanford-futuredata/gavel,
``scheduler/scheduler.py``), for the allocation policies' ``rounds="gavel"``: what a
study needs to set hetsched's allocation LPs beside Gavel's simulator with the
mechanism held equal, so that a difference is the LP's, not the rounds'.

What Gavel does and hetsched's own rounds do not (line numbers of ``scheduler.py``):

- **Time received starts at half a round.** A job enters with ``round_s / 2`` seconds
  counted on every type (``:501-502``), and every reset sets each job's count back to
  that (``:2303-2304``); a type's total is the sum of its jobs' counts at the reset plus
  the time run on it since (``:2305``, ``:3074-3077``; a job arriving between resets
  adds nothing to it). A pair's priority is ``X_jk / (count_jk / total_k)`` (``:2440``,
  ``:2461``), so a job that has not run yet competes with half a round received.
- **Deficits.** At each reset every job's deficit on each type grows by the time its
  last allocation gave it there minus the time it ran (``:2282-2301``); a deficit breaks
  ties of priority.
- **One queue per type, in a fixed order.** The (job, type) pairs are sorted per type
  by (priority, deficit, allocation), largest first, ties in the order the jobs arrived
  (a stable sort of the jobs' insertion order), and the types' queues are walked one
  after the other in the cluster's order (Gavel's ``["v100", "p100", "k80"]``,
  ``:866``; it shuffles them each round for its heterogeneity-agnostic policies, which
  this does not), every pair of a job that can run on the type, priority 0 included
  (``:766-856``): GPUs of a type left over go to jobs whose allocation gives them
  nothing there before the next type's queue is walked.
- **Resets wait.** The allocation is computed again, and the counts reset, only when
  the active jobs changed and at least ``reset_interval_s`` (Gavel's
  ``minimum_time_between_allocation_resets``, 1,920 s; ``:67``, ``:2369-2389``) passed
  since the last reset; a job that arrived since has priority 0 until then.
- No starvation guard, and GPUs free between rounds stay free (not work conserving).

The (job, type) pairs a round walks (:class:`Pairs`, :func:`arrival_rank`) are kept
here for both kinds of rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.core.records import Job
from hetsched.formulations.gavel.problem import Array
from hetsched.policies.baselines.gavel_params import GAVEL_RESET_INTERVAL_S
from hetsched.policies.rolling import ClusterState

#: A job whose shares add up to 1 less this has all of its time (:func:`whole_first`).
WHOLE_TOLERANCE = 1e-6


class GavelLedger:
    """Each job's time received on each type since the last reset (starting at half a
    round), each type's total, and each job's deficits, kept as Gavel's scheduler keeps
    them (module notes). Columns are the cluster's types."""

    def __init__(self, num_types: int, round_s: float,
                 reset_interval_s: float = GAVEL_RESET_INTERVAL_S) -> None:
        self.half_round_s = round_s / 2.0
        self.reset_interval_s = reset_interval_s
        self._width = num_types
        self._received: dict[str, list[float]] = {}
        self._deficit: dict[str, list[float]] = {}
        self._total = [0.0] * num_types
        #: when the counts were last reset (None: never)
        self.reset_at: float | None = None

    def keep(self, job_ids: Iterable[str]) -> None:
        """The active jobs are ``job_ids``: a job seen first enters with half a round on
        every type and no deficit; jobs gone are forgotten (their time stays in the
        types' totals)."""
        active = set(job_ids)
        for job_id in [j for j in self._received if j not in active]:
            del self._received[job_id]
            del self._deficit[job_id]
        for job_id in active:
            self._enter(job_id)

    def _enter(self, job_id: str) -> list[float]:
        received = self._received.get(job_id)
        if received is None:
            received = self._received[job_id] = [self.half_round_s] * self._width
            self._deficit[job_id] = [0.0] * self._width
        return received

    def ran(self, job_id: str, column: int, seconds: float) -> None:
        """``job_id`` ran ``seconds`` on the type of ``column``."""
        self._enter(job_id)[column] += seconds
        self._total[column] += seconds

    def due(self, now: float) -> bool:
        """Whether a reset may happen at ``now`` (the first, or ``reset_interval_s``
        after the last)."""
        return self.reset_at is None or now - self.reset_at >= self.reset_interval_s

    def reset(self, now: float, shares: Callable[[str], Sequence[float]]) -> None:
        """Gavel's ``_reset_time_run_so_far`` at ``now``: each job's deficit on each type
        grows by ``shares(job)`` (its last allocation there; empty: none) times the time
        since the last reset, less the time it ran there; counts go back to half a round."""
        elapsed = 0.0 if self.reset_at is None else now - self.reset_at
        half = self.half_round_s
        for job_id, received in self._received.items():
            share = shares(job_id) or [0.0] * self._width
            deficit = self._deficit[job_id]
            for column in range(self._width):
                deficit[column] += share[column] * elapsed - (received[column] - half)
                received[column] = half
        self._total = [half * len(self._received)] * self._width
        self.reset_at = now

    def priorities(self, job_ids: Sequence[str], share: Array) -> tuple[Array, Array]:
        """Each (job, type) pair's priority ``X_jk / (received_jk / total_k)`` (``X * 1e9``
        where a type has no time counted yet, 0 where ``X_jk = 0``) and deficit, rows in
        the order of ``job_ids`` (``share``: their allocations' rows)."""
        received = np.array([self._enter(job_id) for job_id in job_ids],
                            dtype=np.float64).reshape(len(job_ids), self._width)
        deficit = np.array([self._deficit[job_id] for job_id in job_ids],
                           dtype=np.float64).reshape(len(job_ids), self._width)
        total = np.array(self._total, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(total > 0, received / total, 0.0)
            priority = np.where(share > 0, np.where(fraction > 0, share / fraction,
                                                    share * 1e9), 0.0)
        return np.asarray(priority, dtype=np.float64), deficit


def gavel_queue(priority: Array, deficit: Array, share: Array,
                usable: npt.NDArray[np.bool_], rank: npt.NDArray[np.int64]
                ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The (job row, type column) pairs in the order Gavel's greedy walks them: type by
    type in column order, each type's usable pairs by priority, deficit and allocation,
    largest first, ties by ``rank`` (arrival order)."""
    rows_out: list[npt.NDArray[np.int64]] = []
    cols_out: list[npt.NDArray[np.int64]] = []
    for column in range(usable.shape[1]):
        rows = np.flatnonzero(usable[:, column])
        order = np.lexsort((rank[rows], -share[rows, column], -deficit[rows, column],
                            -priority[rows, column]))
        rows_out.append(rows[order])
        cols_out.append(np.full(len(rows), column, dtype=np.int64))
    if not rows_out:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return (np.concatenate(rows_out).astype(np.int64),
            np.concatenate(cols_out).astype(np.int64))


def whole_first(pairs: Pairs, running_column: Sequence[int]
                ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """For hetsched's rounds with ``keep_whole``: which jobs' allocations give them all of
    their time (their shares add up to 1: the round takes them first, so no round leaves
    them out) and, per pair, whether it is such a job's type it runs on
    (``running_column``: the column of the type each job runs on, -1 for a waiting job)
    with a priority of 1 or more: it has had no more than its share there since the
    solve, so it stays and pays no restart."""
    stay = np.zeros(pairs.share.shape, dtype=np.bool_)
    whole = np.asarray(pairs.share.sum(axis=1) >= 1.0 - WHOLE_TOLERANCE, dtype=np.bool_)
    for row in np.flatnonzero(whole).tolist():
        column = running_column[row]
        if column >= 0:
            stay[row, column] = bool(pairs.priority[row, column] >= 1.0)
    return whole, stay


def arrival_rank(jobs: Sequence[Job]) -> npt.NDArray[np.int64]:
    """Each job's place in the order of (arrival, id)."""
    rank = np.empty(len(jobs), dtype=np.int64)
    if jobs:  # (numpy compares strings by code point, as Python does)
        rank[np.lexsort((np.array([job.id for job in jobs]),
                         np.array([job.arrival for job in jobs], dtype=np.float64)))] = \
            np.arange(len(jobs))
    return rank


@dataclass(frozen=True)
class Pairs:
    """A decision's (job, type) pairs as arrays, rows in the order of the jobs asked for
    (:meth:`Gavel._pairs`)."""

    priority: Array
    share: Array
    usable: npt.NDArray[np.bool_]
    #: each row's columns in preference order (usable ones first)
    preference: npt.NDArray[np.int64]
    starved: npt.NDArray[np.bool_]

    def rows(self, index: Sequence[int]) -> Pairs:
        """The pairs of the jobs at ``index``."""
        at = np.asarray(index, dtype=np.int64)
        return Pairs(self.priority[at], self.share[at], self.usable[at],
                      self.preference[at], self.starved[at])

    def with_room(self, state: ClusterState, waiting: Sequence[Job],
                  pool: FreeGpuIndex) -> npt.NDArray[np.bool_]:
        """Which of the ``waiting`` jobs (these pairs' rows) have a usable type with free
        GPUs for their gang: the others cannot start in a fill (starts only take GPUs) and
        are not walked. (A job asking for a share of a GPU may fit on a GPU in use: always
        walked.)"""
        room = np.array([pool.available(t) for t in state.cluster.type_names],
                        dtype=np.int64)
        gangs = np.array([0 if job.gpu_share is not None else job.num_gpus
                          for job in waiting], dtype=np.int64)
        fits: npt.NDArray[np.bool_] = np.any(
            self.usable & (room[np.newaxis, :] >= gangs[:, np.newaxis]), axis=1)
        return fits
