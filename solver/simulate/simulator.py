"""Event-driven replay of a job trace under a rolling policy.

Time jumps from event to event: arrivals, completions (at their exact times: a job
finishes when its remaining work is done at the *measured* throughput of the GPUs it
holds, never at the end of a round), the boundaries of the policy's declared round
(``round_s``) and, optionally, a fixed decision interval. At every decision point the
policy decides (see :mod:`hetsched.policies.rolling`); it sees the *fitted* throughput model. A
preempted job keeps its progress; when it starts again (or migrates) it makes no
progress for ``restart_penalty_s`` (checkpoint restore). GPU time is accounted exactly,
the restore included. The outcome and its files: :mod:`hetsched.simulate.record`.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections.abc import Callable, Sequence
from functools import partial

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.bounds import usable_gpus
from hetsched.core.errors import InputError, PolicyError
from hetsched.core.interrupts import WallClockLimit
from hetsched.core.log_levels import per_decision_logs
from hetsched.core.records import Cluster, Job, packed_holder
from hetsched.core.settings import (
    RESTART_PENALTY_S,
    START_LATENCY_S,
    check_interval,
    check_period,
    check_restart_penalty,
    check_start_latency,
)
from hetsched.core.sharing import PACKED_SHARE, CoLocationModel
from hetsched.core.throughput import ThroughputModel, speed_change_after, throughput_after
from hetsched.policies.rolling import (
    Decision,
    PendingFeed,
    PendingLog,
    QueuePolicy,
    RollingPolicy,
    quiet_until,
)
from hetsched.simulate.guard import ask, checked_decision
from hetsched.simulate.live_state import LiveState
from hetsched.simulate.record import (
    OUTPUT_FILES,
    DecisionLog,
    JobRecord,
    Replay,
    check_out_folder,
    write_folder,
)
from hetsched.simulate.runs import Run, Sharers

__all__ = ["EPS", "OUTPUT_FILES", "DecisionLog", "JobRecord", "Replay", "Simulator",
           "check_out_folder", "write_folder"]

log = logging.getLogger(__name__)

#: Times closer than this (s) are one event.
EPS = 1e-9


def _current(completion: tuple[float, int, str], running: dict[str, Run]) -> bool:
    """Whether a ``(finish, version, job)`` entry is the completion of a run going on."""
    run = running.get(completion[2])
    return run is not None and run.version == completion[1]


class Simulator:
    """Replays ``jobs`` on ``cluster`` under ``policy``.

    ``truth`` advances the jobs (measured throughput); ``model`` is what the policy sees
    (fitted). The policy is called at every arrival and completion while jobs wait, and,
    while any job runs or waits, at every boundary of its declared round
    (``policy.round_s``: the first arrival plus a multiple of it) and every ``interval_s``
    (extra decision points, on the same grid); ``restart_penalty_s`` is the time without
    progress after a restart, and ``start_latency_s`` the time without progress at every
    start before it (a real scheduler's dispatch latency; none by default). Through time where
    nothing runs or waits no boundary is visited: the next one is computed, not reached by stepping.

    Quiet rounds (``skip_quiet_rounds``, on by default): after a boundary decision that
    changed nothing, the simulator asks the policy's ``quiet_until(state)``
    (:class:`~hetsched.policies.rolling.RollingPolicy`) until when its boundary calls would change
    nothing either, and skips the boundaries before the next event (arrival, completion,
    or that time) but the last one, where it calls the policy as usual (a completion that
    a job's speed change brings forward, an elastic job's next epoch, ends the skip before
    it). Every job's
    record is the same as with a call at every boundary; only the skipped boundaries'
    rows (nothing started or preempted, no fallback) are missing from decisions.csv
    and from ``decisions``. So one job running for 1e10 s under a 360 s round costs a
    few calls, not 3e7. Policies keeping the default (``-inf``) are called at every boundary.

    Speed: nothing is done per running job or per GPU at every event. A run's progress is
    a function of time (``Run``), not accounted at each event; a policy gets the free
    GPUs as one frozenset, rebuilt only when they change, and the pending and running
    jobs as tuples, with the per-job fields built only when it reads them
    (``LiveState``). A queue policy (:class:`~hetsched.policies.rolling.QueuePolicy`: FIFO) gets no
    state at all: the simulator keeps a :class:`~hetsched.policies.rolling.FreeGpuIndex` up to date
    and hands it the queue (``start_prefix``), so an event costs time in the
    jobs it starts and the nodes first fit scans, not in the queue or the cluster
    (philly.csv, 82,247 jobs on 2,496 GPUs: seconds; benchmarks/replay.py).
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policy: RollingPolicy, *,
                 truth: ThroughputModel, model: ThroughputModel | None = None,
                 interval_s: float | None = None, restart_penalty_s: float = RESTART_PENALTY_S,
                 start_latency_s: float = START_LATENCY_S,
                 progress: Callable[[int, int, float, int], None] | None = None,
                 skip_quiet_rounds: bool = True,
                 colocation: CoLocationModel | None = None,
                 decision_timeout_s: float | None = None) -> None:
        self.cluster = cluster
        self.colocation = colocation or CoLocationModel()
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.id))
        self.policy = policy
        self.truth = truth
        self.model = model or truth
        self.interval_s = check_interval(interval_s)
        self.round_s = check_period(policy.round_s, f"{policy.name}'s round_s")
        self.restart_penalty_s = check_restart_penalty(restart_penalty_s)
        self.start_latency_s = check_start_latency(start_latency_s)
        self.progress = progress
        self.skip_quiet_rounds = skip_quiet_rounds
        #: the policy's wall-clock limit per call (:mod:`hetsched.simulate.guard`)
        self.decision_timeout_s = decision_timeout_s
        ids = [j.id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise InputError("duplicate job ids in the trace", value=len(ids) - len(set(ids)),
                             expected="unique ids")

    def run(self) -> Replay:
        """Replay every job to completion, or until Ctrl-C or the policy fails
        (:mod:`hetsched.simulate.guard`): then the replay is ``interrupted`` and, on a
        failure, its ``failure`` says why. The solves of its decisions log their stages at
        DEBUG (:mod:`hetsched.core.log_levels`): ``-v`` shows the replay."""
        with per_decision_logs(), WallClockLimit(self.decision_timeout_s) as limit:
            return self._run(limit)

    def _run(self, limit: WallClockLimit) -> Replay:
        began = time.perf_counter()
        records = {j.id: JobRecord(j) for j in self.jobs}
        left = {j.id: j.work for j in self.jobs}  # steps left of jobs not running
        pending: dict[str, Job] = {}
        queue_log = PendingLog()  # what joined and left ``pending``, in order
        running: dict[str, Run] = {}
        sharers = Sharers(self.colocation)  # who runs on each GPU shared by share jobs
        # The free GPUs, in an index moved by what happens (starts take, completions and
        # preemptions release); policies read it and work on forks of it.
        free = FreeGpuIndex(self.cluster, frozenset(self.cluster.gpu_by_id))
        # A queue policy (FIFO) is driven without a ClusterState: it reads only the queue
        # (in order) and the free GPUs (QueuePolicy.start_prefix, on a fork).
        queue_policy = self.policy if isinstance(self.policy, QueuePolicy) else None
        total_gpus = len(self.cluster.gpus)
        completions: list[tuple[float, int, str]] = []
        # when a running job's speed changes with its progress (an elastic job's next
        # epoch): (time, run version, job); no decision point
        phases: list[tuple[float, int, str]] = []
        decisions: list[DecisionLog] = []
        arrivals = self.jobs
        next_arrival = 0
        start_time = arrivals[0].arrival if arrivals else 0.0
        now = start_time
        done = 0
        version = 0
        periods = tuple(p for p in (self.round_s, self.interval_s) if p is not None)
        next_tick = _next_boundary(start_time, start_time, periods)
        interrupted = False
        failure: PolicyError | None = None
        warned = False
        name = self.policy.name
        try:
            while done < len(arrivals):
                # 1. the next event time
                candidates = []
                if next_arrival < len(arrivals):
                    candidates.append(arrivals[next_arrival].arrival)
                # (the completion of a run that was preempted is no event, even when its
                # job runs again)
                while completions and not _current(completions[0], running):
                    heapq.heappop(completions)
                if completions:
                    candidates.append(completions[0][0])
                while phases and not _current(phases[0], running):
                    heapq.heappop(phases)
                if phases:
                    candidates.append(phases[0][0])
                if next_tick is not None and (pending or running):
                    candidates.append(next_tick)
                if not candidates:
                    raise RuntimeError(f"replay stalled at {now:g} s with {len(pending)} pending "
                                       "jobs, nothing running and nothing arriving")
                now = max(now, min(candidates))
                # 1b. speeds that change with progress at ``now`` (a continued segment)
                while phases and phases[0][0] <= now + EPS:
                    _, stamp, job_id = heapq.heappop(phases)
                    run = running.get(job_id)
                    if run is None or run.version != stamp or run.finish <= now + EPS:
                        continue
                    version += 1
                    run = self._next_phase(run, now, version)
                    running[job_id] = run
                    heapq.heappush(completions, (run.finish, version, job_id))
                    self._push_phase(run, phases)
                    if next_tick is not None and run.finish < next_tick - EPS:
                        # Quiet rounds were skipped up to the run's old completion; it now
                        # ends sooner: the boundaries around its new end are called again.
                        last = _last_boundary_before(run.finish, start_time, periods)
                        next_tick = min(next_tick, last if last is not None and
                                        last > now + EPS else
                                        _next_boundary(now, start_time, periods) or next_tick)
                # 2. completions at ``now``
                while completions and completions[0][0] <= now + EPS:
                    _, stamp, job_id = heapq.heappop(completions)
                    run = running.get(job_id)
                    if run is None or run.version != stamp:
                        continue
                    record = run.record
                    record.gpu_seconds += run.gpu_seconds_at(run.finish)
                    record.finish = run.finish
                    record.segments.append(run.segment(run.finish, run.work_left))
                    ask(name, now, "on_finished",
                        partial(self.policy.on_finished, record.job, run.finish), limit)
                    free.release(run.gpus, run.holder)
                    del running[job_id]
                    if run.holder.gpu_share is not None:
                        version = self._co_runners_changed(run, now, sharers, running,
                                                           completions, version, leaving=True)
                    left[job_id] = 0.0
                    done += 1
                # 3. arrivals at ``now``
                while next_arrival < len(arrivals) and arrivals[next_arrival].arrival <= now + EPS:
                    job = arrivals[next_arrival]
                    pending[job.id] = job
                    queue_log.joined(job)
                    next_arrival += 1
                # A boundary is a decision point while anything runs or waits; then the
                # next boundary after ``now`` (computed: no stepping through idle time).
                tick = next_tick is not None and next_tick <= now + EPS
                if tick:
                    next_tick = _next_boundary(now, start_time, periods)
                if not pending and not (tick and running):
                    continue
                # 4. decide
                state: LiveState | None = None
                clock = time.perf_counter()
                if queue_policy is not None:
                    decision = Decision(queue_policy.start_prefix(pending.values(), free.fork(),
                                                                  self.model))
                else:
                    state = LiveState.make(now, self.cluster, self.model, pending, free,
                                           running, records, left,
                                           PendingFeed(queue_log, len(queue_log.entries)),
                                           self.colocation)
                    decision = checked_decision(name, now, ask(
                        name, now, "decide", partial(self.policy.decide, state), limit))
                spent = time.perf_counter() - clock
                if pending and not decision.start and not running and not decision.preempt \
                        and next_arrival >= len(arrivals):
                    # Nothing runs and nothing will arrive: the policy would stall for ever.
                    if state is None:
                        state = LiveState.make(now, self.cluster, self.model, pending,
                                               free, running, records, left,
                                               PendingFeed(queue_log, len(queue_log.entries)),
                                               self.colocation)
                    decision = checked_decision(name, now, ask(
                        name, now, "on_stall", partial(self.policy.on_stall, state), limit))
                    if decision.note:
                        log.warning("t=%g: %s", now, decision.note)
                    else:  # (rounds that are not work conserving: a round now)
                        log.debug("t=%g: nothing runs and nothing will arrive: %s's "
                                  "on_stall decided", now, name)
                # Until when the policy's boundary calls would change nothing (see the
                # class docstring); asked while it may still read the state.
                quiet = -math.inf
                if tick and self.skip_quiet_rounds and not (
                        decision.start or decision.preempt or decision.fallback):
                    quiet = math.inf if queue_policy is not None else ask(
                        name, now, "quiet_until", partial(self._quiet_until, state), limit)
                if state is not None:
                    state.close()
                if decision.fallback and not warned:
                    warned = True
                    log.warning("t=%g: %s fell back: %s (later fallbacks are counted in "
                                "summary.json)", now, self.policy.name, decision.note)
                for job_id in decision.preempt:
                    run = running.pop(job_id, None)
                    if run is None:
                        raise PolicyError(name, now, "preempted a job that is not running",
                                          job_id)
                    left[job_id] = run.remaining_at(now)
                    records[job_id].gpu_seconds += run.gpu_seconds_at(now)
                    records[job_id].segments.append(
                        run.segment(now, run.work_left - left[job_id]))
                    records[job_id].preemptions += 1
                    free.release(run.gpus, run.holder)
                    pending[job_id] = run.record.job
                    queue_log.joined(run.record.job)
                    if run.holder.gpu_share is not None:
                        version = self._co_runners_changed(run, now, sharers, running,
                                                           completions, version, leaving=True)
                for start in decision.start:
                    self._check_start(start, pending, free, now)
                    job = pending.pop(start.job)
                    queue_log.left(job.id)
                    record = records[job.id]
                    speed = throughput_after(self.truth, job.job_type, start.gpu_type,
                                             len(start.gpus),
                                             self.cluster.placement_of(start.gpus),
                                             job.work - left[job.id])
                    restart = record.first_start is not None
                    resume = now + self.start_latency_s + (
                        self.restart_penalty_s if restart else 0.0)
                    if record.first_start is None:
                        record.first_start = now
                    record.gpu_types.append(start.gpu_type)
                    record.gpus = start.gpus
                    version += 1
                    run = Run(record, start.gpu_type, start.gpus, now, resume, speed,
                              left[job.id], resume + left[job.id] / speed, version, now,
                              PACKED_SHARE if start.packed else job.share,
                              packed=start.packed)
                    running[job.id] = run
                    free.take(start.gpus, run.holder)
                    heapq.heappush(completions, (run.finish, version, job.id))
                    self._push_phase(run, phases)
                    if run.holder.gpu_share is not None:
                        version = self._co_runners_changed(run, now, sharers, running,
                                                           completions, version, leaving=False)
                decisions.append(DecisionLog(now, len(pending), len(running),
                                             total_gpus - free.free_count(),
                                             len(decision.start),
                                             len(decision.preempt), spent, decision.fallback,
                                             decision.note))
                if quiet > now and next_tick is not None:
                    # Skip to the last boundary before the next event (or ``quiet``): the
                    # boundaries before it would be calls that change nothing.
                    while completions and not _current(completions[0], running):
                        heapq.heappop(completions)
                    end = min(quiet, completions[0][0] if completions else math.inf,
                              arrivals[next_arrival].arrival if next_arrival < len(arrivals)
                              else math.inf)
                    last = _last_boundary_before(end, start_time, periods)
                    if last is not None and last > next_tick:
                        next_tick = last
                if self.progress is not None:
                    self.progress(done, len(arrivals), now, len(decisions))
        except KeyboardInterrupt:
            log.warning("replay interrupted at %g s: %d of %d jobs done", now, done,
                        len(arrivals))
            interrupted = True
        except PolicyError as error:
            log.error("%s; replay stopped: %d of %d jobs done", error, done, len(arrivals))
            interrupted, failure = True, error
        fallbacks = sum(1 for d in decisions if d.fallback)
        if fallbacks > 1:
            log.warning("%s fell back at %d of %d decisions (summary.json: warnings)",
                        self.policy.name, fallbacks, len(decisions))
        usable = usable_gpus(self.jobs, self.cluster, self.truth) if self.jobs else None
        return Replay(records, decisions, self.cluster, time.perf_counter() - began, start_time,
                      interrupted, self.round_s, self.interval_s, self.restart_penalty_s,
                      usable or None, self.colocation, failure, self.truth,
                      start_latency_s=self.start_latency_s)

    def _quiet_until(self, state: LiveState | None) -> float:
        """The policy's ``quiet_until(state)`` (s); ``-inf`` without a state."""
        return -math.inf if state is None else quiet_until(self.policy, state)

    def _push_phase(self, run: Run, phases: list[tuple[float, int, str]]) -> None:
        """When ``run``'s speed changes with its progress before it ends, as an event."""
        job = run.record.job
        done = job.work - run.work_left
        change = speed_change_after(self.truth, job.job_type, done)
        if change is not None and change - done < run.work_left:
            heapq.heappush(phases, (run.resume + (change - done) / run.speed, run.version,
                                    job.id))

    def _next_phase(self, run: Run, now: float, version: int) -> Run:
        """``run`` at ``now``, where its speed changes with its progress: the segment that
        ends is recorded and the run goes on at the new speed (continued, no penalty)."""
        job = run.record.job
        done = job.work - run.remaining_at(now)
        speed = throughput_after(self.truth, job.job_type, run.gpu_type, len(run.gpus),
                                 self.cluster.placement_of(run.gpus), done)
        moved, segment = run.at_speed(now, speed, version)
        if segment is not None:
            run.record.gpu_seconds += run.gpu_seconds_at(now)
            run.record.segments.append(segment)
        return moved

    def _co_runners_changed(self, run: Run, now: float, sharers: Sharers,
                            running: dict[str, Run], completions: list[tuple[float, int, str]],
                            version: int, *, leaving: bool) -> int:
        """``run``'s job, which asks for a share of its GPU, starts on it or leaves it at
        ``now``: the jobs on that GPU whose speed that changes (its own included when it
        starts) go on at their new speed (a continued run segment, no restart penalty).
        Returns the last run version used."""
        gpu = run.gpus[0]
        job = run.record.job
        if leaving:
            affected = sharers.remove(gpu, job.id)
        else:
            affected = [*sharers.add(gpu, job.id, job.job_type), job.id]
        for other in affected:
            current = running[other]
            base = self.truth.throughput(current.record.job.job_type, current.gpu_type, 1,
                                         self.cluster.placement_of(current.gpus))
            speed = base * sharers.factor(gpu, current.gpu_type, other)
            if speed == current.speed:
                continue
            version += 1
            moved, segment = current.at_speed(now, speed, version)
            if segment is not None:
                current.record.gpu_seconds += current.gpu_seconds_at(now)
                current.record.segments.append(segment)
            running[other] = moved
            heapq.heappush(completions, (moved.finish, version, other))
        return version

    def _check_start(self, start: Start, pending: dict[str, Job], free: FreeGpuIndex,
                     now: float) -> None:
        """A policy's start must name a pending job, free GPUs of the cluster of one
        allowed type (a packed start: one GPU, free or holding one packed job), an allowed
        gang size and a configuration with measured throughput > 0; a
        :class:`PolicyError` names what it broke."""
        name = self.policy.name
        job = pending.get(start.job)
        if job is None:
            raise PolicyError(name, now, "started a job that is not pending", start.job)
        gpus = self.cluster.gpu_by_id
        unknown = [g for g in start.gpus if g not in gpus]
        if unknown:
            raise PolicyError(name, now, f"started it on GPUs the cluster does not have: "
                              f"{unknown[:3]}", job.id)
        if start.packed and (job.gpu_share is not None or len(start.gpus) != 1):
            raise PolicyError(name, now, "packed a job that is not a whole job of one GPU "
                              f"({len(start.gpus)} GPUs, share {job.gpu_share})", job.id)
        holder = packed_holder(job) if start.packed else job
        if len(set(start.gpus)) != len(start.gpus) or not free.can_hold(start.gpus, holder):
            raise PolicyError(name, now, "started it on GPUs that are not free (or without "
                              f"its share, CPUs or memory there): {list(start.gpus)}", job.id)
        if any(gpus[g].gpu_type != start.gpu_type for g in start.gpus) or not job.may_use(
                start.gpu_type):
            raise PolicyError(name, now, "started it on GPUs of the wrong type", job.id)
        if any(not job.may_use_node(gpus[g].node) for g in start.gpus):
            raise PolicyError(name, now, "started it on a node it may not use", job.id)
        if len(start.gpus) not in job.gpu_counts:
            raise PolicyError(name, now, f"gave it {len(start.gpus)} GPUs, allowed "
                              f"{list(job.gpu_counts)}", job.id)
        if self.truth.throughput(job.job_type, start.gpu_type, len(start.gpus),
                                 self.cluster.placement_of(start.gpus)) <= 0:
            raise PolicyError(name, now, "put it where its measured throughput is 0", job.id)



def _last_boundary_before(end: float, origin: float, periods: Sequence[float]
                          ) -> float | None:
    """The last point of ``origin + k * period`` (k >= 1, any of ``periods``) earlier than
    ``end`` by more than :data:`EPS` (a boundary that close to ``end`` is one event with
    it), computed as :func:`_next_boundary` computes them; ``None`` if there is none."""
    if not math.isfinite(end):
        return None
    best: float | None = None
    for period in periods:
        k = max(0, math.ceil((end - EPS - origin) / period) - 1)
        while k >= 1 and origin + k * period >= end - EPS:
            k -= 1
        while origin + (k + 1) * period < end - EPS:
            k += 1
        if k >= 1:
            point = origin + k * period
            best = point if best is None else max(best, point)
    return best


def _next_boundary(now: float, origin: float, periods: Sequence[float]) -> float | None:
    """The first point of ``origin + k * period`` (k >= 1, any of ``periods``) later than
    ``now`` (by more than :data:`EPS`); ``None`` without periods. Computed in O(1) per
    period, so a long idle gap costs nothing."""
    best: float | None = None
    for period in periods:
        k = max(1, math.floor((now - origin) / period) + 1)
        point = origin + k * period
        while point <= now + EPS:
            k += 1
            point = origin + k * period
        best = point if best is None else min(best, point)
    return best
