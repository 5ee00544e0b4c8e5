"""The books of a replay (:class:`Books`): every job's record, the queue, the runs, the
free GPUs, the events to come and the decisions taken, in one record the simulator's
steps (:mod:`hetsched.simulate.simulator`) read and move; and the grid of decision
points (:class:`Boundaries`), computed rather than stepped through."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.core.records import Cluster, Job
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import ThroughputModel
from hetsched.knowledge.view import KnowledgeView
from hetsched.policies.rolling import PendingFeed, PendingLog
from hetsched.simulate.live_state import LiveState
from hetsched.simulate.record import DecisionLog, JobRecord
from hetsched.simulate.runs import Sharers, SimulatedRun

__all__ = ["EPS", "Books", "Boundaries", "Event"]

#: Times closer than this (s) are one event.
EPS = 1e-9

#: ``(time, run version, job id)``: when a run ends or changes speed; stale once its job's
#: run has another version (preempted, moved, continued at another speed).
Event = tuple[float, int, str]


@dataclass(frozen=True)
class Boundaries:
    """The decision points ``origin + k * period`` (k >= 1, any of ``periods``: the
    policy's round and the replay's interval), computed in O(1) per period, so a long idle
    gap costs nothing."""

    origin: float
    periods: tuple[float, ...]

    def next_after(self, now: float) -> float | None:
        """The first point later than ``now`` (by more than :data:`EPS`); ``None``
        without periods."""
        best: float | None = None
        for period in self.periods:
            k = max(1, math.floor((now - self.origin) / period) + 1)
            point = self.origin + k * period
            while point <= now + EPS:
                k += 1
                point = self.origin + k * period
            best = point if best is None else min(best, point)
        return best

    def last_before(self, end: float) -> float | None:
        """The last point earlier than ``end`` by more than :data:`EPS` (a point that close
        to ``end`` is one event with it), computed as :meth:`next_after` computes them;
        ``None`` if there is none."""
        if not math.isfinite(end):
            return None
        best: float | None = None
        for period in self.periods:
            k = max(0, math.ceil((end - EPS - self.origin) / period) - 1)
            while k >= 1 and self.origin + k * period >= end - EPS:
                k -= 1
            while self.origin + (k + 1) * period < end - EPS:
                k += 1
            if k >= 1:
                point = self.origin + k * period
                best = point if best is None else max(best, point)
        return best


@dataclass
class Books:
    """What a replay keeps while it runs. ``left``: the steps left of every job not
    running (a running job's are its run's, computed from time); ``free``: the free GPUs,
    an index moved by what happens (starts take, completions and preemptions release),
    which policies read and work on forks of; ``queue_log``: what joined and left
    ``pending``, in order; ``completions`` and ``phases``: heaps of :data:`Event` (a run's
    end; a running job's speed changing with its progress, an elastic job's next epoch,
    which is no decision point); ``version``: the last run version given out;
    ``next_tick``: the next boundary that is a decision point; ``last_decision``: when the
    policy last decided, and ``batch_due``: when events it has not yet answered are (with
    ``batch_s``; ``inf``: none); ``knowledge``: the jobs
    as the policy sees them when it may not know their work (``None``: it sees the
    truth; then ``pending`` and the queue log hold the true jobs, else the shown ones)."""

    arrivals: Sequence[Job]
    boundaries: Boundaries
    records: dict[str, JobRecord]
    left: dict[str, float]
    free: FreeGpuIndex
    sharers: Sharers
    now: float
    next_tick: float | None
    last_decision: float = -math.inf
    batch_due: float = math.inf
    pending: dict[str, Job] = field(default_factory=dict)
    queue_log: PendingLog = field(default_factory=PendingLog)
    running: dict[str, SimulatedRun] = field(default_factory=dict)
    completions: list[Event] = field(default_factory=list)
    phases: list[Event] = field(default_factory=list)
    decisions: list[DecisionLog] = field(default_factory=list)
    next_arrival: int = 0
    done: int = 0
    version: int = 0
    warned_fallback: bool = False
    knowledge: KnowledgeView | None = None

    @classmethod
    def open(cls, cluster: Cluster, arrivals: Sequence[Job], colocation: CoLocationModel,
             periods: tuple[float, ...]) -> Books:
        """The books before the first event: ``arrivals`` sorted by arrival, every GPU
        free, the decision points from the first arrival on."""
        start_time = arrivals[0].arrival if arrivals else 0.0
        boundaries = Boundaries(start_time, periods)
        return cls(arrivals=arrivals, boundaries=boundaries,
                   records={j.id: JobRecord(j) for j in arrivals},
                   left={j.id: j.work for j in arrivals},
                   free=FreeGpuIndex(cluster, frozenset(cluster.gpu_by_id)),
                   sharers=Sharers(colocation), now=start_time,
                   next_tick=boundaries.next_after(start_time))

    @property
    def start_time(self) -> float:
        """The first arrival (s): where the decision points' grid starts."""
        return self.boundaries.origin

    @property
    def arrivals_left(self) -> bool:
        """Whether a job is still to arrive."""
        return self.next_arrival < len(self.arrivals)

    @property
    def next_arrival_time(self) -> float:
        """When the next job arrives (s; ``inf`` when none is left to)."""
        return self.arrivals[self.next_arrival].arrival if self.arrivals_left else math.inf

    def new_version(self) -> int:
        """A run version not given out before."""
        self.version += 1
        return self.version

    def current(self, event: Event) -> bool:
        """Whether ``event`` belongs to a run going on (the completion of a run that was
        preempted is no event, even when its job runs again)."""
        run = self.running.get(event[2])
        return run is not None and run.version == event[1]

    def drop_stale(self, events: list[Event]) -> None:
        """Pop the events of runs no longer going on off the top of ``events``."""
        while events and not self.current(events[0]):
            heapq.heappop(events)

    def next_at(self, events: list[Event]) -> float:
        """When the next of ``events`` that belongs to a run going on happens (s; ``inf``
        when none does): ``completions``' is the next end."""
        self.drop_stale(events)
        return events[0][0] if events else math.inf

    def schedule_end(self, run: SimulatedRun) -> None:
        """``run``'s end, as an event."""
        heapq.heappush(self.completions, (run.finish, run.version, run.record.job.id))

    def live_state(self, cluster: Cluster, model: ThroughputModel,
                   colocation: CoLocationModel) -> LiveState:
        """The state a policy decides on now (:class:`LiveState`: built when read)."""
        return LiveState.make(self.now, cluster, model, self.pending, self.free,
                              self.running, self.records, self.left,
                              PendingFeed(self.queue_log, len(self.queue_log.entries)),
                              colocation, self.knowledge)
