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

from hetsched.allocation.layout import Start
from hetsched.core.bounds import usable_gpus
from hetsched.core.errors import InputError, PolicyError
from hetsched.core.interrupts import WallClockLimit
from hetsched.core.log_levels import per_decision_logs
from hetsched.core.records import Cluster, Job
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
from hetsched.knowledge.view import KnowledgeView
from hetsched.policies.rolling import Decision, RollingPolicy
from hetsched.simulate.books import EPS, Books
from hetsched.simulate.driver import PolicyDriver
from hetsched.simulate.learning import Learner
from hetsched.simulate.live_state import LiveState
from hetsched.simulate.record import (
    OUTPUT_FILES,
    DecisionLog,
    JobRecord,
    Replay,
    write_folder,
)
from hetsched.simulate.runs import SimulatedRun

__all__ = ["EPS", "OUTPUT_FILES", "DecisionLog", "JobRecord", "Replay", "Simulator",
           "write_folder"]

log = logging.getLogger(__name__)


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

    Batched decisions (``batch_s``; none by default): an arrival or completion less than
    ``batch_s`` after the last decision does not call the policy; one decision at the last
    one plus ``batch_s`` answers every such event (a boundary of the policy's round or of
    ``interval_s`` still decides at once). On the whole Philly trace, where the cluster is
    full and an event comes every minute, this is what makes a policy that solves a model
    at every decision finish (docs/scale.md measures what it costs).

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
    a function of time (``SimulatedRun``), not accounted at each event; a policy gets the free
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
                 decision_timeout_s: float | None = None,
                 knowledge: KnowledgeView | None = None,
                 batch_s: float | None = None, learner: Learner | None = None) -> None:
        self.cluster = cluster
        #: an event this close after the last decision waits for one decision then
        self.batch_s = check_period(batch_s, "batch_s")
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
        #: what the policy may know of the jobs' work (None: the truth;
        #: :mod:`hetsched.knowledge.view`): the jobs it is shown, guessed at arrival
        self.knowledge = knowledge
        #: the model the policy plans with, learned from the runs (None: ``model``;
        #: :mod:`hetsched.simulate.learning`)
        self.learner = learner
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
        """The replay: event after event until every job is done (see the class)."""
        began = time.perf_counter()
        periods = tuple(p for p in (self.round_s, self.interval_s) if p is not None)
        books = Books.open(self.cluster, self.jobs, self.colocation, periods)
        books.knowledge = self.knowledge
        driver = PolicyDriver(self.policy, limit)
        interrupted = False
        failure: PolicyError | None = None
        try:
            while books.done < len(books.arrivals):
                self._step(books, driver)
        except KeyboardInterrupt:
            log.warning("replay interrupted at %g s: %d of %d jobs done", books.now,
                        books.done, len(books.arrivals))
            interrupted = True
        except PolicyError as error:
            log.error("%s; replay stopped: %d of %d jobs done", error, books.done,
                      len(books.arrivals))
            interrupted, failure = True, error
        fallbacks = sum(1 for d in books.decisions if d.fallback)
        if fallbacks > 1:
            log.warning("%s fell back at %d of %d decisions (summary.json: warnings)",
                        self.policy.name, fallbacks, len(books.decisions))
        usable = usable_gpus(self.jobs, self.cluster, self.truth) if self.jobs else None
        return Replay(books.records, books.decisions, self.cluster, time.perf_counter() - began,
                      books.start_time, interrupted, self.round_s, self.interval_s,
                      self.restart_penalty_s, usable or None, self.colocation, failure,
                      self.truth, start_latency_s=self.start_latency_s,
                      estimates=self.knowledge.accuracy() if self.knowledge else None,
                      learned=self.learner.learned if self.learner else None)

    def _step(self, books: Books, driver: PolicyDriver) -> None:
        """One event time: the next event, then what happens at it in order (speeds that
        change with progress, completions, arrivals) and, at a decision point, a
        decision applied."""
        books.now = max(books.now, self._next_event(books))
        self._advance_phases(books)
        self._complete(books, driver)
        self._arrive(books)
        # A boundary is a decision point while anything runs or waits; then the next
        # boundary after ``now`` (computed: no stepping through idle time).
        tick = books.next_tick is not None and books.next_tick <= books.now + EPS
        if tick:
            books.next_tick = books.boundaries.next_after(books.now)
        if books.pending or (tick and books.running):
            batch = self.batch_s
            due = books.batch_due <= books.now + EPS
            if batch is not None and not tick and not due and \
                    books.now < books.last_decision + batch - EPS:
                books.batch_due = min(books.batch_due, books.last_decision + batch)
                return
            self._decide(books, driver, tick)
            books.last_decision = books.now
            books.batch_due = math.inf

    @staticmethod
    def _next_event(books: Books) -> float:
        """The time of the next event: an arrival, a completion, a speed change, or a
        boundary while anything runs or waits."""
        tick = books.next_tick if books.next_tick is not None and (
            books.pending or books.running) else math.inf
        upcoming = min(books.next_arrival_time, books.next_at(books.completions),
                       books.next_at(books.phases), tick,
                       books.batch_due if books.pending else math.inf)
        if upcoming == math.inf:
            raise RuntimeError(f"replay stalled at {books.now:g} s with {len(books.pending)} "
                               "pending jobs, nothing running and nothing arriving")
        return upcoming

    def _advance_phases(self, books: Books) -> None:
        """The runs whose speed changes with their progress now go on at the new speed (a
        continued segment); where one now ends sooner than skipped quiet rounds assumed,
        the boundaries around its new end are decision points again."""
        now, phases = books.now, books.phases
        while phases and phases[0][0] <= now + EPS:
            _, stamp, job_id = heapq.heappop(phases)
            run = books.running.get(job_id)
            if run is None or run.version != stamp or run.finish <= now + EPS:
                continue
            run = self._next_phase(run, now, books.new_version())
            books.running[job_id] = run
            books.schedule_end(run)
            self._push_phase(run, phases)
            tick = books.next_tick
            if tick is not None and run.finish < tick - EPS:
                last = books.boundaries.last_before(run.finish)
                books.next_tick = min(tick, last if last is not None and last > now + EPS
                                      else books.boundaries.next_after(now) or tick)

    def _complete(self, books: Books, driver: PolicyDriver) -> None:
        """The runs that end now: recorded, told to the policy, their GPUs released."""
        completions = books.completions
        while completions and completions[0][0] <= books.now + EPS:
            _, stamp, job_id = heapq.heappop(completions)
            run = books.running.get(job_id)
            if run is None or run.version != stamp:
                continue
            record = run.record
            record.gpu_seconds += run.gpu_seconds_at(run.finish)
            record.finish = run.finish
            record.segments.append(run.segment(run.finish, run.work_left))
            if self.learner is not None:
                self.learner.ended(job_id, run.finish, 0.0)
            told = record.job
            if books.knowledge is not None:  # (told as the policy saw it; learned)
                told = books.knowledge.shown(record.job, record.job.work)
                books.knowledge.finished(record.job)
            driver.finished(told, run.finish, books.now)
            books.free.release(run.gpus, run.holder)
            del books.running[job_id]
            if run.holder.gpu_share is not None:
                self._co_runners_changed(run, books, leaving=True)
            books.left[job_id] = 0.0
            books.done += 1

    @staticmethod
    def _arrive(books: Books) -> None:
        """The jobs that arrive now join the queue."""
        while books.arrivals_left and books.next_arrival_time <= books.now + EPS:
            job = books.arrivals[books.next_arrival]
            if books.knowledge is not None:
                job = books.knowledge.arrived(job)
            books.pending[job.id] = job
            books.queue_log.joined(job)
            books.next_arrival += 1

    def _decide(self, books: Books, driver: PolicyDriver, tick: bool) -> None:
        """Ask the policy, apply its preemptions and starts, log the decision and, after a
        boundary decision that changed nothing, skip the quiet boundaries (class notes)."""
        now = books.now
        state: LiveState | None = None
        clock = time.perf_counter()
        model = self._model_now(books)
        if driver.queue_policy is not None:
            decision = driver.queue_starts(books.pending.values(), books.free, model)
        else:
            state = books.live_state(self.cluster, model, self.colocation)
            decision = driver.decide(state)
        spent = time.perf_counter() - clock
        if books.pending and not decision.start and not books.running and \
                not decision.preempt and not books.arrivals_left:
            # Nothing runs and nothing will arrive: the policy would stall for ever.
            state = state or books.live_state(self.cluster, model, self.colocation)
            decision = self._on_stall(driver, state)
        # Until when the policy's boundary calls would change nothing; asked while it may
        # still read the state.
        quiet = -math.inf
        if tick and self.skip_quiet_rounds and not (
                decision.start or decision.preempt or decision.fallback):
            quiet = driver.quiet_until(state, now)
        if state is not None:
            state.close()
        if decision.fallback and not books.warned_fallback:
            books.warned_fallback = True
            log.warning("t=%g: %s fell back: %s (later fallbacks are counted in "
                        "summary.json)", now, self.policy.name, decision.note)
        self._preempt(books, decision.preempt)
        self._start(books, driver, decision.start)
        books.decisions.append(DecisionLog(
            now, len(books.pending), len(books.running),
            len(self.cluster.gpus) - books.free.free_count(), len(decision.start),
            len(decision.preempt), spent, decision.fallback, decision.note))
        if quiet > now and books.next_tick is not None:
            self._skip_quiet(books, quiet)
        if self.progress is not None:
            self.progress(books.done, len(books.arrivals), now, len(books.decisions))

    def _model_now(self, books: Books) -> ThroughputModel:
        """What the policy plans with now: the model, or the learner's after it observed
        every running job's progress since its last observation."""
        if self.learner is None:
            return self.model
        for job_id, run in books.running.items():
            self.learner.observe(job_id, books.now, run.remaining_at(books.now))
        return self.learner.model([*books.pending.values(),
                                   *(run.record.job for run in books.running.values())])

    def _on_stall(self, driver: PolicyDriver, state: LiveState) -> Decision:
        """The policy's ``on_stall`` decision (nothing runs and nothing will arrive)."""
        decision = driver.on_stall(state)
        if decision.note:
            log.warning("t=%g: %s", state.now, decision.note)
        else:  # (rounds that are not work conserving: a round now)
            log.debug("t=%g: nothing runs and nothing will arrive: %s's on_stall decided",
                      state.now, self.policy.name)
        return decision

    def _preempt(self, books: Books, preempt: Sequence[str]) -> None:
        """The preempted jobs stop where they are, keep their progress and wait again."""
        now = books.now
        for job_id in preempt:
            run = books.running.pop(job_id, None)
            if run is None:
                raise PolicyError(self.policy.name, now, "preempted a job that is not running",
                                  job_id)
            left = books.left[job_id] = run.remaining_at(now)
            record = books.records[job_id]
            record.gpu_seconds += run.gpu_seconds_at(now)
            record.segments.append(run.segment(now, run.work_left - left))
            record.preemptions += 1
            if self.learner is not None:
                self.learner.ended(job_id, now, left)
            books.free.release(run.gpus, run.holder)
            job = run.record.job
            if books.knowledge is not None:
                job = books.knowledge.shown(job, job.work - left)
            books.pending[job_id] = job
            books.queue_log.joined(job)
            if run.holder.gpu_share is not None:
                self._co_runners_changed(run, books, leaving=True)

    def _start(self, books: Books, driver: PolicyDriver, starts: Sequence[Start]) -> None:
        """Each start checked (:meth:`PolicyDriver.check_start`) and made: the job runs at
        its measured speed after the start latency (and the restart penalty when it ran
        before)."""
        now = books.now
        for start in starts:
            driver.check_start(start, books.pending, self.cluster, self.truth,
                               books.free.can_hold, now)
            books.pending.pop(start.job)
            record = books.records[start.job]
            job = record.job  # (the truth: the pending one may be the policy's view)
            books.queue_log.left(job.id)
            left = books.left[job.id]
            speed = throughput_after(self.truth, job.job_type, start.gpu_type, len(start.gpus),
                                     self.cluster.placement_of(start.gpus), job.work - left)
            restart = record.first_start is not None
            resume = now + self.start_latency_s + (self.restart_penalty_s if restart else 0.0)
            if record.first_start is None:
                record.first_start = now
            record.gpu_types.append(start.gpu_type)
            record.gpus = start.gpus
            if self.learner is not None:
                self.learner.started(job, start.gpu_type, start.gpus, now, resume, left)
            run = SimulatedRun(record, start.gpu_type, start.gpus, now, resume, speed, left,
                               resume + left / speed, books.new_version(), now,
                               PACKED_SHARE if start.packed else job.share,
                               packed=start.packed)
            books.running[job.id] = run
            books.free.take(start.gpus, run.holder)
            books.schedule_end(run)
            self._push_phase(run, books.phases)
            if run.holder.gpu_share is not None:
                self._co_runners_changed(run, books, leaving=False)

    @staticmethod
    def _skip_quiet(books: Books, quiet: float) -> None:
        """Skip to the last boundary before the next event (or ``quiet``): the boundaries
        before it would be calls that change nothing."""
        end = min(quiet, books.next_at(books.completions), books.next_arrival_time)
        last = books.boundaries.last_before(end)
        if last is not None and books.next_tick is not None and last > books.next_tick:
            books.next_tick = last

    def _push_phase(self, run: SimulatedRun, phases: list[tuple[float, int, str]]) -> None:
        """When ``run``'s speed changes with its progress before it ends, as an event."""
        job = run.record.job
        done = job.work - run.work_left
        change = speed_change_after(self.truth, job.job_type, done)
        if change is not None and change - done < run.work_left:
            heapq.heappush(phases, (run.resume + (change - done) / run.speed, run.version,
                                    job.id))

    def _next_phase(self, run: SimulatedRun, now: float, version: int) -> SimulatedRun:
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

    def _co_runners_changed(self, run: SimulatedRun, books: Books, *, leaving: bool) -> None:
        """``run``'s job, which asks for a share of its GPU, starts on it or leaves it
        now: the jobs on that GPU whose speed that changes (its own included when it
        starts) go on at their new speed (a continued run segment, no restart penalty)."""
        gpu = run.gpus[0]
        job = run.record.job
        if leaving:
            affected = books.sharers.remove(gpu, job.id)
        else:
            affected = [*books.sharers.add(gpu, job.id, job.job_type), job.id]
        for other in affected:
            current = books.running[other]
            base = self.truth.throughput(current.record.job.job_type, current.gpu_type, 1,
                                         self.cluster.placement_of(current.gpus))
            speed = base * books.sharers.factor(gpu, current.gpu_type, other)
            if speed == current.speed:
                continue
            moved, segment = current.at_speed(books.now, speed, books.new_version())
            if segment is not None:
                current.record.gpu_seconds += current.gpu_seconds_at(books.now)
                current.record.segments.append(segment)
            books.running[other] = moved
            books.schedule_end(moved)
