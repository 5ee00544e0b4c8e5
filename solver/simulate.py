"""Event-driven replay of a job trace under a rolling policy.

Time jumps from event to event: arrivals, completions (at their exact times: a job
finishes when its remaining work is done at the *measured* throughput of the GPUs it
holds, never at the end of a round) and, optionally, a fixed re-solve interval. At every
event time the policy decides (see :mod:`solver.rolling`); it sees the *fitted*
throughput model. A preempted job keeps its progress; when it starts again (or
migrates) it makes no progress for ``restart_penalty_s`` (checkpoint restore). GPU time
is accounted exactly, the restore included.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from solver.data import Cluster, Job
from solver.errors import InputError
from solver.rolling import ClusterState, Decision, RollingFifo, RollingPolicy, RunningJob, Start
from solver.throughput import ThroughputModel

log = logging.getLogger(__name__)

#: Times closer than this (s) are one event.
EPS = 1e-9


@dataclass
class JobRecord:
    """What happened to one job."""

    job: Job
    first_start: float | None = None
    finish: float | None = None
    gpu_types: list[str] = field(default_factory=list)
    gpus: tuple[str, ...] = ()
    preemptions: int = 0
    gpu_seconds: float = 0.0

    @property
    def met(self) -> bool | None:
        """Deadline met (``None`` without a deadline or before it finishes)."""
        if self.job.deadline is None or self.finish is None:
            return None
        return self.finish <= self.job.deadline + 1e-6


@dataclass(frozen=True)
class DecisionLog:
    """One decision point."""

    time: float
    pending: int
    running: int
    started: int
    preempted: int
    decision_time_s: float
    fallback: bool
    note: str


@dataclass
class Replay:
    """The outcome of a replay: per-job records and the decision log."""

    records: dict[str, JobRecord]
    decisions: list[DecisionLog]
    cluster: Cluster
    wall_time_s: float
    start_time: float
    interrupted: bool = False

    def summary(self) -> dict[str, float | int | bool]:
        """The replay's metrics (seconds unless stated)."""
        done = [r for r in self.records.values() if r.finish is not None]
        jct = np.array([r.finish - r.job.arrival for r in done if r.finish is not None])
        queue = np.array([(r.first_start or 0.0) - r.job.arrival for r in done])
        with_deadline = [r for r in self.records.values() if r.job.deadline is not None]
        tardiness = sum(max(0.0, (r.finish or math.inf) - (r.job.deadline or 0.0))
                        for r in with_deadline if r.finish is not None)
        end = max((r.finish for r in done if r.finish is not None), default=self.start_time)
        makespan = end - self.start_time
        busy = sum(r.gpu_seconds for r in self.records.values())
        capacity = len(self.cluster.gpus) * makespan
        times = np.array([d.decision_time_s for d in self.decisions]) if self.decisions \
            else np.zeros(1)

        def pct(values: np.ndarray, q: float) -> float:
            return float(np.percentile(values, q)) if len(values) else math.nan

        return {
            "jobs": len(self.records),
            "completed": len(done),
            "avg_jct_s": float(jct.mean()) if len(jct) else math.nan,
            "p50_jct_s": pct(jct, 50),
            "p95_jct_s": pct(jct, 95),
            "p99_jct_s": pct(jct, 99),
            "makespan_s": makespan,
            "avg_queue_s": float(queue.mean()) if len(queue) else math.nan,
            "deadline_jobs": len(with_deadline),
            "deadline_met": sum(1 for r in with_deadline if r.met),
            "total_tardiness_s": tardiness,
            "utilization": busy / capacity if capacity > 0 else 0.0,
            "preemptions": sum(r.preemptions for r in self.records.values()),
            "decisions": len(self.decisions),
            "decision_time_p50_s": float(np.percentile(times, 50)),
            "decision_time_p95_s": float(np.percentile(times, 95)),
            "decision_time_max_s": float(times.max()),
            "fallbacks": sum(1 for d in self.decisions if d.fallback),
            "wall_time_s": self.wall_time_s,
            "interrupted": self.interrupted,
        }


    def write(self, out_dir: str | Path, extra: dict[str, object] | None = None) -> None:
        """Write ``summary.json``, ``jobs.csv`` (one row per job) and ``decisions.csv`` (one
        row per decision point) into ``out_dir``, each atomically (a reader never sees half
        a file). Everything but the wall-clock fields is the same for the same input."""
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        summary = {**self.summary(), **(extra or {})}
        _atomic(folder / "summary.json", json.dumps(
            {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in summary.items()}, indent=1) + "\n")
        rows = io.StringIO()
        writer = csv.writer(rows, lineterminator="\n")
        writer.writerow(["job", "arrival", "start", "finish", "jct", "gpu_types", "num_gpus",
                         "gpus", "preemptions", "gpu_seconds", "deadline", "met"])
        for record in sorted(self.records.values(), key=lambda r: (r.job.arrival, r.job.id)):
            job = record.job
            writer.writerow([
                job.id, _num(job.arrival), _num(record.first_start), _num(record.finish),
                _num(None if record.finish is None else record.finish - job.arrival),
                "|".join(dict.fromkeys(record.gpu_types)), len(record.gpus),
                " ".join(record.gpus), record.preemptions, _num(record.gpu_seconds),
                _num(job.deadline), "" if record.met is None else int(record.met)])
        _atomic(folder / "jobs.csv", rows.getvalue())
        rows = io.StringIO()
        writer = csv.writer(rows, lineterminator="\n")
        fields = list(asdict(self.decisions[0])) if self.decisions else ["time"]
        writer.writerow(fields)
        for decision in self.decisions:
            writer.writerow([_num(v) if isinstance(v, float) else v
                             for v in asdict(decision).values()])
        _atomic(folder / "decisions.csv", rows.getvalue())


def _num(value: float | None) -> str:
    """A float for CSV: repr-exact, empty for None."""
    return "" if value is None else repr(float(value))


def _atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@dataclass
class _Run:
    record: JobRecord
    gpu_type: str
    gpus: tuple[str, ...]
    since: float  # progress is accounted up to here
    resume: float  # no progress before this time (restart penalty)
    speed: float  # measured steps/s
    remaining: float  # steps left at ``since``
    finish: float
    version: int


class Simulator:
    """Replays ``jobs`` on ``cluster`` under ``policy``.

    ``truth`` advances the jobs (measured throughput); ``model`` is what the policy sees
    (fitted). ``interval_s`` adds a decision point every so many seconds while jobs are
    pending; ``restart_penalty_s`` is the time without progress after a restart.
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policy: RollingPolicy, *,
                 truth: ThroughputModel, model: ThroughputModel | None = None,
                 interval_s: float | None = None, restart_penalty_s: float = 30.0,
                 progress: Callable[[int, int, float, int], None] | None = None) -> None:
        self.cluster = cluster
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.id))
        self.policy = policy
        self.truth = truth
        self.model = model or truth
        self.interval_s = interval_s
        self.restart_penalty_s = restart_penalty_s
        self.progress = progress
        ids = [j.id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise InputError("duplicate job ids in the trace", value=len(ids) - len(set(ids)),
                             expected="unique ids")

    def run(self) -> Replay:
        """Replay every job to completion."""
        began = time.perf_counter()
        records = {j.id: JobRecord(j) for j in self.jobs}
        remaining = {j.id: j.work for j in self.jobs}
        attained: dict[str, float] = {}
        pending: dict[str, Job] = {}
        running: dict[str, _Run] = {}
        free = {g.id for g in self.cluster.gpus}
        completions: list[tuple[float, int, str]] = []
        decisions: list[DecisionLog] = []
        arrivals = self.jobs
        next_arrival = 0
        start_time = arrivals[0].arrival if arrivals else 0.0
        now = start_time
        done = 0
        version = 0
        next_tick = None if self.interval_s is None else start_time + self.interval_s
        interrupted = False
        try:
            while done < len(arrivals):
                # 1. the next event time
                candidates = []
                if next_arrival < len(arrivals):
                    candidates.append(arrivals[next_arrival].arrival)
                while completions and completions[0][2] not in running:
                    heapq.heappop(completions)
                if completions:
                    candidates.append(completions[0][0])
                if next_tick is not None and pending:
                    candidates.append(next_tick)
                if not candidates:
                    raise RuntimeError(f"replay stalled at {now:g} s with {len(pending)} pending "
                                       "jobs, nothing running and nothing arriving")
                now = max(now, min(candidates))
                # 2. completions at ``now``
                while completions and completions[0][0] <= now + EPS:
                    finish, stamp, job_id = heapq.heappop(completions)
                    run = running.get(job_id)
                    if run is None or run.version != stamp:
                        continue
                    self._account(run, run.finish)
                    record = run.record
                    record.finish = run.finish
                    free.update(run.gpus)
                    del running[job_id]
                    remaining[job_id] = 0.0
                    done += 1
                # 3. arrivals at ``now``
                while next_arrival < len(arrivals) and arrivals[next_arrival].arrival <= now + EPS:
                    job = arrivals[next_arrival]
                    pending[job.id] = job
                    next_arrival += 1
                if next_tick is not None:
                    while next_tick <= now + EPS:
                        next_tick += self.interval_s or math.inf
                if not pending:
                    continue
                # 4. decide
                for run in running.values():
                    self._account(run, now)
                state = ClusterState(
                    now=now, cluster=self.cluster, throughput=self.model,
                    pending=tuple(pending.values()),
                    remaining={job_id: remaining[job_id] for job_id in pending},
                    running=tuple(RunningJob(r.record.job, r.gpu_type, r.gpus, r.since,
                                             max(0.0, r.remaining)) for r in running.values()),
                    free=frozenset(free),
                    attained=attained,
                    preemptions={j: records[j].preemptions for j in pending},
                )
                clock = time.perf_counter()
                decision = self.policy.decide(state)
                spent = time.perf_counter() - clock
                if not decision.start and not running and not decision.preempt and \
                        next_arrival >= len(arrivals):
                    # Nothing runs and nothing will arrive: the policy would stall for ever.
                    decision = RollingFifo().decide(state)
                    decision = Decision(decision.start, (), True,
                                        "the policy started nothing on an idle cluster: FIFO")
                    log.warning("t=%g: %s", now, decision.note)
                for job_id in decision.preempt:
                    run = running.pop(job_id, None)
                    if run is None:
                        raise RuntimeError(f"{self.policy.name} preempted {job_id}, not running")
                    remaining[job_id] = max(0.0, run.remaining)
                    records[job_id].preemptions += 1
                    free.update(run.gpus)
                    pending[job_id] = run.record.job
                for start in decision.start:
                    self._check_start(start, pending, free)
                    job = pending.pop(start.job)
                    record = records[job.id]
                    speed = self.truth.throughput(job.job_type, start.gpu_type, len(start.gpus),
                                                  self.cluster.placement_of(start.gpus))
                    restart = record.first_start is not None
                    resume = now + (self.restart_penalty_s if restart else 0.0)
                    if record.first_start is None:
                        record.first_start = now
                    record.gpu_types.append(start.gpu_type)
                    record.gpus = start.gpus
                    version += 1
                    finish = resume + remaining[job.id] / speed
                    run = _Run(record, start.gpu_type, start.gpus, now, resume, speed,
                               remaining[job.id], finish, version)
                    running[job.id] = run
                    free.difference_update(start.gpus)
                    heapq.heappush(completions, (finish, version, job.id))
                for job_id, run in running.items():
                    attained[job_id] = run.record.gpu_seconds
                decisions.append(DecisionLog(now, len(pending), len(running), len(decision.start),
                                             len(decision.preempt), spent, decision.fallback,
                                             decision.note))
                if self.progress is not None:
                    self.progress(done, len(arrivals), now, len(decisions))
        except KeyboardInterrupt:
            log.warning("replay interrupted at %g s: %d of %d jobs done", now, done,
                        len(arrivals))
            interrupted = True
        return Replay(records, decisions, self.cluster, time.perf_counter() - began, start_time,
                      interrupted)

    def _account(self, run: _Run, until: float) -> None:
        """Advance ``run`` to ``until``: GPU time, and work done after the restart penalty."""
        if until <= run.since:
            return
        working_from = max(run.since, run.resume)
        if until > working_from:
            run.remaining -= (until - working_from) * run.speed
        run.record.gpu_seconds += (until - run.since) * len(run.gpus)
        run.since = until

    def _check_start(self, start: Start, pending: dict[str, Job], free: set[str]) -> None:
        """A policy's start must name a pending job, free GPUs of one allowed type, an
        allowed gang size and a configuration with measured throughput > 0."""
        name = self.policy.name
        job = pending.get(start.job)
        if job is None:
            raise RuntimeError(f"{name} started {start.job}, which is not pending")
        busy = [g for g in start.gpus if g not in free]
        if busy or len(set(start.gpus)) != len(start.gpus):
            raise RuntimeError(f"{name} started {job.id} on GPUs that are not free: {busy}")
        gpus = self.cluster.gpu_by_id
        if any(gpus[g].gpu_type != start.gpu_type for g in start.gpus) or not job.may_use(
                start.gpu_type):
            raise RuntimeError(f"{name} started {job.id} on GPUs of the wrong type")
        if len(start.gpus) not in job.gpu_counts:
            raise RuntimeError(f"{name} gave {job.id} {len(start.gpus)} GPUs, allowed "
                               f"{job.gpu_counts}")
        if self.truth.throughput(job.job_type, start.gpu_type, len(start.gpus),
                                 self.cluster.placement_of(start.gpus)) <= 0:
            raise RuntimeError(f"{name} put {job.id} where its measured throughput is 0")

