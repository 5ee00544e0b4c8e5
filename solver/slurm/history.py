"""What the agent saw happen on the live cluster, in trace time: each managed job's runs
(GPU type, GPUs, start, end), its preemptions and finish, and each decision. It serves
the policy's view of progress (steps left, GPU-seconds received) and the output files,
the same ``jobs.csv``, ``decisions.csv`` and ``summary.json`` as a replay
(:class:`~hetsched.simulate.record.Replay`), so ``hetsched compare`` puts a real run
beside a replay.

Every change is appended to ``OUT/events.jsonl`` (one JSON object a line, flushed) as it
is seen, and read back when an agent restarts on the same ``--out``: nothing seen is
lost when the agent is killed. Scheduling never depends on it (Slurm says what waits
and what runs); only the predicted progress of jobs that ran before does.

Times: a run starts at Slurm's ``start_time`` and a finished job ends at its
``end_time`` (whole Unix seconds: each is taken as the middle of its second, +0.5 s); a
preempted run ends when the agent asked for the requeue.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from hetsched.allocation.layout import throughput_of
from hetsched.core.outputs import write_text
from hetsched.core.records import Cluster, Job
from hetsched.core.result import Assignment
from hetsched.core.tenants import TenantTable
from hetsched.core.throughput import ThroughputModel
from hetsched.simulate.record import DecisionLog, JobRecord, Replay
from hetsched.slurm.checkpoint import checkpoint_path, read_checkpoint
from hetsched.slurm.metadata import JobMeta
from hetsched.slurm.runnable import why_never_runs
from hetsched.slurm.state import Snapshot

log = logging.getLogger(__name__)

#: jobs.csv's ``end_state`` of a job that ended otherwise than COMPLETED, by Slurm's
#: state (GONE: it left Slurm's job list unseen); others in lower case.
END_STATES = {"CANCELLED": "cancelled", "FAILED": "failed", "OUT_OF_MEMORY": "failed",
              "TIMEOUT": "failed", "NODE_FAIL": "node-failed", "BOOT_FAIL": "node-failed",
              "GONE": "gone", "COMPLETED": ""}

#: Slurm's times are whole seconds: the middle of the second.
HALF_SECOND = 0.5


@dataclass
class LiveRun:
    """One run of a job (Unix seconds; ``end`` ``None`` while it runs)."""

    gpu_type: str
    gpus: tuple[str, ...]
    start: float
    end: float | None = None
    finished: bool = False
    #: From a real job's report (:mod:`hetsched.job`): its times and steps are the
    #: job's own, its GPUs those the agent saw it hold.
    reported: bool = False


@dataclass
class Seen:
    """A managed job: its metadata, runs, when the agent asked to start or preempt it,
    and whether it ended (and how)."""

    meta: JobMeta
    runs: list[LiveRun] = field(default_factory=list)
    asked_start: float | None = None
    asked_preempt: float | None = None
    asked_move: float | None = None  # when the agent requeued it to start elsewhere at once
    ended: str = ""  # "", or Slurm's final state
    latencies: list[float] = field(default_factory=list)
    move_latencies: list[float] = field(default_factory=list)
    slurm_id: int | None = None


class History:
    """The agent's memory (module docstring), journaled to ``journal`` if given."""

    def __init__(self, journal: Path | None = None) -> None:
        self.jobs: dict[str, Seen] = {}
        self.decisions: list[DecisionLog] = []
        self.cluster: Cluster | None = None
        self._origin: tuple[float, float] | None = None
        self._handle: TextIO | None = None
        self.path = journal
        if journal is not None:
            if journal.is_file():
                self._replay_journal(journal)
            journal.parent.mkdir(parents=True, exist_ok=True)
            self._handle = journal.open("a", encoding="utf-8")

    # -- journal ---------------------------------------------------------------------------
    def _log(self, event: dict[str, Any]) -> None:
        if self._handle is not None:
            self._handle.write(json.dumps(event) + "\n")
            self._handle.flush()

    def _replay_journal(self, path: Path) -> None:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                event = json.loads(line)
                self._apply(event)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s, line %d: skipped (%s)", path, number, exc)

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "job":
            meta = JobMeta.from_comment(event["comment"])
            known = self.jobs.get(meta.job.id)
            if known is not None and known.slurm_id != event.get("slurm_id"):
                del self.jobs[meta.job.id]  # submitted again
            self._know(meta).slurm_id = event.get("slurm_id")
            return
        if kind == "decision":
            self.decisions.append(DecisionLog(**event["log"]))
            return
        seen = self.jobs[event["job"]]
        if kind == "run":
            seen.runs.append(LiveRun(event["gpu_type"], tuple(event["gpus"]), event["start"]))
        elif kind == "end":
            seen.runs[-1].end = event["end"]
            seen.runs[-1].finished = event["finished"]
        elif kind == "ended":
            seen.ended = event["state"]

    def _know(self, meta: JobMeta) -> Seen:
        seen = self.jobs.get(meta.job.id)
        if seen is None:
            seen = self.jobs[meta.job.id] = Seen(meta)
            if self._origin is None:
                self._origin = (meta.origin, meta.speedup)
            elif self._origin != (meta.origin, meta.speedup):
                log.warning("job %s has another time scale (origin %s, speedup %s) than the "
                            "first job's %s: its times are read on the first's", meta.job.id,
                            meta.origin, meta.speedup, self._origin)
        return seen

    def close(self) -> None:
        """Close the journal."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    # -- time ------------------------------------------------------------------------------
    def trace_time(self, unix: float) -> float:
        """Trace seconds of a Unix time, on the first job's scale."""
        if self._origin is None:
            return 0.0
        origin, speedup = self._origin
        return (unix - origin) * speedup

    # -- observing -------------------------------------------------------------------------
    def observe(self, snapshot: Snapshot, unix: float) -> list[str]:
        """Record what changed since the last reading: runs that began or ended, jobs
        that ended; the ids of the jobs that ended, in the order seen."""
        self.cluster = snapshot.cluster
        ended: list[str] = []
        for job_id, job in snapshot.jobs.items():
            seen = self.jobs.get(job_id)
            if seen is None or seen.slurm_id != job.slurm_id:
                if job.ended:
                    continue  # it ended before this agent knew it (an earlier run's)
                if seen is not None:  # submitted again: a new job of the same id
                    del self.jobs[job_id]
                seen = self._know(job.meta)
                seen.slurm_id = job.slurm_id
                self._log({"event": "job", "comment": job.meta.to_comment(),
                           "slurm_id": job.slurm_id})
            open_run = seen.runs[-1] if seen.runs and seen.runs[-1].end is None else None
            running = job.state in ("RUNNING", "COMPLETING") and bool(job.gpus)
            if running and open_run is None and not job.ended:
                start = (job.start_unix or unix) + (HALF_SECOND if job.start_unix else 0.0)
                gpu_type = snapshot.cluster.node_by_name[job.nodes[0]].gpu_type
                seen.runs.append(LiveRun(gpu_type, job.gpus, start))
                if seen.asked_move is not None:  # requeue to RUNNING elsewhere, as seen
                    seen.move_latencies.append(unix - seen.asked_move)
                    seen.asked_move = seen.asked_start = None
                elif seen.asked_start is not None:
                    # Release to RUNNING as this reading sees it: at most a poll late
                    # (Slurm's start_time is a whole second, too coarse for this).
                    seen.latencies.append(unix - seen.asked_start)
                    seen.asked_start = None
                self._log({"event": "run", "job": job_id, "gpu_type": gpu_type,
                           "gpus": list(job.gpus), "start": start})
            elif open_run is not None and not running:
                finished = job.state == "COMPLETED"
                if job.ended and job.end_unix is not None:
                    end = job.end_unix + HALF_SECOND
                else:
                    end = seen.asked_preempt or unix
                open_run.end, open_run.finished = max(end, open_run.start), finished
                seen.asked_preempt = None
                self._log({"event": "end", "job": job_id, "end": open_run.end,
                           "finished": finished})
            if job.ended and not seen.ended:
                last = seen.runs[-1] if seen.runs else None
                if job.state == "COMPLETED" and last is not None and not last.finished:
                    # Requeued as it completed (the requeue closed its run first): the job
                    # finished in that run, at Slurm's end time.
                    last.finished = True
                    if job.end_unix is not None:
                        last.end = max(job.end_unix + HALF_SECOND, last.start)
                    self._log({"event": "end", "job": job_id, "end": last.end,
                               "finished": True})
                seen.ended = job.state
                ended.append(job_id)
                self._log({"event": "ended", "job": job_id, "state": job.state})
                if job.state != "COMPLETED":
                    log.warning("job %s (Slurm %d) ended %s", job_id, job.slurm_id, job.state)

        for job_id, seen in self.jobs.items():  # gone from Slurm's list (MinJobAge)
            if job_id not in snapshot.jobs and not seen.ended and seen.slurm_id is not None:
                if seen.runs and seen.runs[-1].end is None:
                    seen.runs[-1].end = unix
                    self._log({"event": "end", "job": job_id, "end": unix, "finished": False})
                seen.ended = "GONE"
                ended.append(job_id)
                self._log({"event": "ended", "job": job_id, "state": "GONE"})
                log.warning("job %s left Slurm's job list unseen: its end is unknown", job_id)
        return ended

    def starting(self, job_id: str, unix: float) -> None:
        """The agent released ``job_id`` at ``unix``."""
        if job_id in self.jobs:
            self.jobs[job_id].asked_start = unix

    def preempting(self, job_id: str, unix: float) -> None:
        """The agent requeued ``job_id`` at ``unix``."""
        if job_id in self.jobs:
            self.jobs[job_id].asked_preempt = unix

    def moving(self, job_id: str, unix: float) -> None:
        """The agent requeued ``job_id`` at ``unix`` to start it elsewhere at once."""
        if job_id in self.jobs:
            self.jobs[job_id].asked_move = unix

    def decided(self, now: float, unix: float, *, pending: int, running: int,
                started: list[str], preempted: list[str], spent_s: float, fallback: bool,
                note: str) -> None:
        """Log one decision (at trace time ``now``)."""
        busy = sum(len(r.gpus) for s in self.jobs.values() for r in s.runs if r.end is None)
        entry = DecisionLog(now, pending, running, busy, len(started), len(preempted),
                            spent_s, fallback, note)
        self.decisions.append(entry)
        self._log({"event": "decision", "log": entry.__dict__, "unix": unix})

    # -- what the policy sees ----------------------------------------------------------------
    def job(self, job_id: str) -> Job | None:
        """The job ``job_id`` (its metadata's)."""
        seen = self.jobs.get(job_id)
        return None if seen is None else seen.meta.job

    def _speed(self, job: Job, run: LiveRun, model: ThroughputModel, cluster: Cluster) -> float:
        return throughput_of(model, job.job_type, run.gpu_type, len(run.gpus),
                             cluster.placement_of(run.gpus))

    def remaining(self, job: Job, now: float, model: ThroughputModel, cluster: Cluster) -> float:
        """Steps left of ``job`` at trace time ``now`` as ``model`` predicts them from
        its runs (a resumed run pays the restart penalty first); at least a tiny part."""
        seen = self.jobs.get(job.id)
        if seen is None:
            return job.work
        done = 0.0
        for index, run in enumerate(seen.runs):
            begin = self.trace_time(run.start) + (seen.meta.restart_penalty_s if index else 0.0)
            end = self.trace_time(run.end) if run.end is not None else now
            done += self._speed(job, run, model, cluster) * max(0.0, end - begin)
        return max(job.work - done, job.work * 1e-6)

    def started(self, job_id: str, now: float) -> float:
        """When the job's current run began (trace s)."""
        seen = self.jobs.get(job_id)
        runs = seen.runs if seen is not None else []
        return self.trace_time(runs[-1].start) if runs else now

    def attained(self, now: float) -> dict[str, float]:
        """GPU-seconds every job received so far (trace s)."""
        return {job_id: sum(len(r.gpus) * ((self.trace_time(r.end) if r.end is not None
                                             else now) - self.trace_time(r.start))
                            for r in seen.runs)
                for job_id, seen in self.jobs.items() if seen.runs}

    def preemptions(self) -> dict[str, int]:
        """Runs each job lost to a preemption."""
        return {job_id: sum(1 for r in seen.runs if r.end is not None and not r.finished)
                for job_id, seen in self.jobs.items()}

    def ended_ids(self) -> set[str]:
        """The managed jobs that ended for good."""
        return {job_id for job_id, seen in self.jobs.items() if seen.ended}

    def end_states(self) -> dict[str, int]:
        """How many managed jobs ended in each of Slurm's end states (COMPLETED,
        CANCELLED, FAILED, NODE_FAIL, ...; GONE: left Slurm's list unseen)."""
        counts: dict[str, int] = {}
        for seen in self.jobs.values():
            if seen.ended:
                counts[seen.ended] = counts.get(seen.ended, 0) + 1
        return dict(sorted(counts.items()))

    def ended_count(self) -> int:
        """Managed jobs that ended for good."""
        return sum(1 for seen in self.jobs.values() if seen.ended)

    def latencies(self) -> list[float]:
        """Wall seconds from each release the agent asked for to the run's start (but a
        move's: :meth:`move_latencies`)."""
        return [x for seen in self.jobs.values() for x in seen.latencies]

    def move_latencies(self) -> list[float]:
        """Wall seconds from each move's requeue to the job running where it moved: what
        a restart costs on the cluster beyond the job's own restart penalty."""
        return [x for seen in self.jobs.values() for x in seen.move_latencies]

    # -- outputs ---------------------------------------------------------------------------
    def runs_of(self, seen: Seen, checkpoints: Path | None) -> list[tuple[LiveRun, float | None]]:
        """A job's ended runs, each with the steps it did if known. From its report (the
        emulator's or a real job's checkpoint file in ``checkpoints``) when there is
        one: its exact times and steps, a run killed without a last word (its node lost
        power) counted up to what it last wrote, which the next run resumed from, a run
        still going left out. Else as the agent saw them, steps unknown."""
        path = None if checkpoints is None or seen.slurm_id is None else \
            checkpoint_path(checkpoints, str(seen.slurm_id))
        found = read_checkpoint(path) if path is not None else None
        if found is None:
            return [(r, None) for r in seen.runs if r.end is not None]
        closed: list[tuple[LiveRun, float | None]] = []
        for index, r in enumerate(found.runs):
            killed = r.state == "running" and index < len(found.runs) - 1
            if not (killed or r.state in ("stopped", "completed", "failed", "refused")):
                continue  # running still, or killed last with nothing after it
            run = LiveRun(r.gpu_type, r.gpus, r.start, r.end, r.state == "completed",
                          reported=not r.gpus)
            if not r.gpus:  # a real job's run: where it ran, as the agent saw it
                saw = overlapping(seen.runs, r.start, r.end)
                if saw is None:
                    log.warning("job %s: a reported run (%.0f-%.0f) the agent never saw "
                                "run: left out", seen.meta.job.id, r.start, r.end)
                    continue
                run.gpu_type, run.gpus = saw.gpu_type, saw.gpus
            closed.append((run, r.steps_end - r.steps_start))
        return closed

    def reported_throughput(self, seen: Seen, checkpoints: Path | None) -> float | None:
        """Steps per trace second of a job over its runs as its report has them (from
        each run's resume: no restore time); ``None`` without a report or progress."""
        path = None if checkpoints is None or seen.slurm_id is None else \
            checkpoint_path(checkpoints, str(seen.slurm_id))
        found = read_checkpoint(path) if path is not None else None
        if found is None:
            return None
        steps = sum(r.steps_end - r.steps_start for r in found.runs)
        seconds = sum(max(0.0, r.end - r.resume) for r in found.runs) * seen.meta.speedup
        return steps / seconds if steps > 0 and seconds > 0 else None

    def replay(self, truth: ThroughputModel | None, *, wall_s: float = 0.0,
               checkpoints: Path | None = None) -> Replay:
        """What ran as a :class:`Replay` in trace time: one segment per run, with the
        steps it did: the emulator's (:meth:`runs_of`), else those ``truth`` says it
        did, a finished job's last run doing the rest of its work. A job whose metadata
        leaves its work out (``work_hidden``) did the steps of its runs: its record's work
        is their sum once it finished (its last run's too, as ``truth`` says)."""
        assert self.cluster is not None, "nothing was read from the cluster"
        records: dict[str, JobRecord] = {}
        penalty = 0.0
        for job_id, seen in self.jobs.items():
            job = seen.meta.job
            penalty = seen.meta.restart_penalty_s
            record = records[job_id] = JobRecord(job, ended_otherwise=END_STATES.get(
                seen.ended, seen.ended.lower()))
            closed = self.runs_of(seen, checkpoints)
            record.reported_throughput = self.reported_throughput(seen, checkpoints)
            # a job that ended otherwise than completed (cancelled, failed, its node
            # failed): its last run was not a preemption
            stopped_for_good = seen.ended not in ("", "COMPLETED")
            for index, (run, steps) in enumerate(closed):
                start, end = self.trace_time(run.start), self.trace_time(run.end or run.start)
                length = max(0.0, end - start - (penalty if index else 0.0))
                if steps is not None:
                    work = steps
                    if truth is not None and run.finished and not run.reported:
                        end = self._clock_end(job, run, truth, start, work,
                                              penalty if index else 0.0, end)
                elif run.finished and not seen.meta.work_hidden:
                    work = job.work - sum(s.work or 0.0 for s in record.segments)
                elif truth is not None:
                    work = min(self._speed(job, run, truth, self.cluster) * length,
                               job.work - sum(s.work or 0.0 for s in record.segments))
                else:
                    work = 0.0
                record.segments.append(Assignment(job_id, run.gpu_type, run.gpus, start, end,
                                                  max(work, 0.0)))
                record.gpu_types.append(run.gpu_type)
                record.gpus = run.gpus
                record.gpu_seconds += len(run.gpus) * (end - start)
                record.first_start = start if record.first_start is None else record.first_start
                if run.finished:
                    # (a job requeued as it completed is started again, finds its work
                    # done and ends at once: it finished in the run that did the work)
                    record.finish = end if record.finish is None else record.finish
                elif not (stopped_for_good and index == len(closed) - 1):
                    record.preemptions += 1
            total = sum(s.work or 0.0 for s in record.segments)
            if seen.meta.work_hidden and record.finish is not None and total > 0:
                record.job = replace(job, work=total)
        first = min((seen.meta.job.arrival for seen in self.jobs.values()), default=0.0)
        unfinished = any(r.finish is None for r in records.values())
        return Replay(records, list(self.decisions), self.cluster, wall_s, first,
                      interrupted=unfinished, restart_penalty_s=penalty, truth=truth)

    def _clock_end(self, job: Job, run: LiveRun, truth: ThroughputModel, start: float,
                   work: float, penalty: float, end: float) -> float:
        """A completed emulated run's end as its own arithmetic has it (start, penalty,
        steps over the throughput), when that is within the resolution of the Unix
        clock the emulator wrote (a microsecond of wall time, times the speedup: about
        0.01 trace s at 10,000): trace times are Unix times scaled up, and their last
        bits are noise the checker would count."""
        assert self.cluster is not None
        speed = self._speed(job, run, truth, self.cluster)
        if speed <= 0:
            return end
        exact = start + penalty + work / speed
        resolution = 1e-6 * (self._origin[1] if self._origin is not None else 1.0)
        return exact if abs(exact - end) <= max(resolution, 1e-6) else end

    def write(self, out: Path, *, policy: str, truth: ThroughputModel | None,
              wall_s: float = 0.0, checkpoints: Path | None = None,
              tenants: TenantTable | None = None,
              figures: dict[str, object] | None = None) -> dict[str, object]:
        """Write the replay's files into ``out`` (beside ``events.jsonl``); the summary
        with the agent's figures (release-to-start latency p50 and p95, and a move's
        requeue-to-start, wall s) and,
        with the emulator's ``checkpoints`` and ``truth``, the independent checker's
        verdict on what ran (``checker_violations``; the first few in the log; real jobs,
        which train at their own speed, left out: ``checker_left_out_real_jobs``); with
        ``tenants``, the fairness figures that need the tenant table (quota violations);
        ``figures``, the policy's own (its ``figures()``, as a replay's summary has them)."""
        replay = self.replay(truth, wall_s=wall_s, checkpoints=checkpoints)
        replay.tenants = tenants
        latencies = sorted(self.latencies())
        moves = sorted(self.move_latencies())
        traces = sorted({seen.meta.trace for seen in self.jobs.values() if seen.meta.trace})
        extra: dict[str, object] = {
            "policy": policy, "source": "slurm",
            **({"trace": ", ".join(traces)} if traces else {}),
            **({"cluster": gpu_counts(self.cluster)} if self.cluster is not None else {}),
            "start_latency_p50_s": _percentile(latencies, 50),
            "start_latency_p95_s": _percentile(latencies, 95),
            "starts_measured": len(latencies),
            "move_latency_p50_s": _percentile(moves, 50),
            "move_latency_p95_s": _percentile(moves, 95),
            "moves_measured": len(moves), "end_states": self.end_states(),
            **(figures or {})}
        if checkpoints is not None and truth is not None:
            from hetsched.replaying import check_replay

            # A real job trains at its own speed, not the model's: left to its report.
            real = {job_id for job_id, seen in self.jobs.items()
                    if any(run.reported for run, _ in self.runs_of(seen, checkpoints))}
            checked = [r.job for r in replay.records.values() if r.job.id not in real and (
                r.segments or not why_never_runs(r.job, replay.cluster, truth))]
            violations = check_replay(replay, checked, truth)
            extra["checker_violations"] = len(violations)
            extra["checker_left_out_real_jobs"] = len(real)
            for violation in violations[:5]:
                log.warning("checker: %s", violation)
        files = replay.files(extra)
        for name, text in files.items():
            write_text(out / name, text, "--out")
        return {**replay.summary(), **extra}


def overlapping(runs: list[LiveRun], start: float, end: float) -> LiveRun | None:
    """The run of ``runs`` longest within ``[start, end]`` (Unix s; one whole second of
    slack each side, Slurm's times being whole seconds), ``None`` if none is."""
    best, overlap = None, 0.0
    for run in runs:
        stop = run.end if run.end is not None else end
        shared = min(stop, end + 1.0) - max(run.start, start - 1.0)
        if shared > overlap:
            best, overlap = run, shared
    return best


def gpu_counts(cluster: Cluster) -> str:
    """The cluster as a spec of GPU counts by type (``v100=8,k80=4``, types in the
    cluster's order), as ``hetsched compare`` reads a replay's ``--cluster``."""
    return ",".join(f"{kind}={cluster.num_gpus(kind)}" for kind in cluster.type_names
                    if cluster.num_gpus(kind))


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    position = (len(values) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)
