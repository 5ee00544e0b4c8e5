"""The outcome of a replay and its output files.

:class:`Replay` holds what happened to every job (:class:`JobRecord`) and every decision
point (:class:`DecisionLog`); :meth:`Replay.write` writes them as one set of files into a
folder of their own: ``summary.json``, ``jobs.csv`` and ``decisions.csv``, which are the
same for the same input, and ``timing.json``, the wall-clock figures (docs/traces.md).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.core.errors import PolicyError
from hetsched.core.fairness import FairnessFigures, fairness_figures, finish_time_fairness
from hetsched.core.outputs import check_output_folder
from hetsched.core.prices import total_cost
from hetsched.core.records import Cluster, Job
from hetsched.core.result import Assignment, Schedule, completion_figures
from hetsched.core.settings import RESTART_PENALTY_S
from hetsched.core.sharing import CoLocationModel
from hetsched.core.tenants import TenantTable
from hetsched.core.throughput import ThroughputModel
from hetsched.simulate.summary import ReplaySummary
from hetsched.speeds.learned import LearnedThroughput


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
    #: Its run segments, in order (:class:`~hetsched.core.result.Assignment` with ``work``).
    segments: list[Assignment] = field(default_factory=list)
    #: How it ended when not by completing (a live run's: cancelled, failed,
    #: node-failed, gone); "" for a job that completed or has not ended.
    ended_otherwise: str = ""
    #: Steps per trace second over its runs as the job reported them (a live run's,
    #: hetsched.job), ``None`` without a report.
    reported_throughput: float | None = None

    @property
    def end_state(self) -> str:
        """jobs.csv's ``end_state``: completed, :attr:`ended_otherwise`, or "" (not ended)."""
        return "completed" if self.finish is not None else self.ended_otherwise

    @property
    def met(self) -> bool | None:
        """Deadline met (``None`` without a deadline or before it finishes)."""
        if self.job.deadline is None or self.finish is None:
            return None
        return self.finish <= self.job.deadline + 1e-6


@dataclass(frozen=True)
class DecisionLog:
    """One decision point: the time (s), the pending and running jobs and the busy GPUs
    right after the decision, the jobs it started and preempted, how long the policy took
    (s), whether a fallback decided, and the policy's note."""

    time: float
    pending: int
    running: int
    busy_gpus: int
    started: int
    preempted: int
    decision_time_s: float
    fallback: bool
    note: str


#: The files of one replay's output folder (:meth:`Replay.write`): nothing else may be in
#: it, since the folder is replaced as a whole.
OUTPUT_FILES = ("summary.json", "jobs.csv", "decisions.csv", "timing.json")
#: Files a replay's folder may hold besides: ``run.toml``, the settings ``hetsched replay``
#: ran with (:mod:`hetsched.cli.run_config`), written with the others as one set.
COMMAND_FILES = ("run.toml",)
#: What a replay that learned its throughputs (``--learn``) learned (a throughput table
#: ``--throughput`` reads: :meth:`hetsched.speeds.learned.LearnedThroughput.csv_text`).
LEARNED_FILE = "learned_throughput.csv"
#: Every file a replay's folder may hold (:func:`hetsched.core.outputs.check_output_folder`).
FOLDER_FILES = OUTPUT_FILES + COMMAND_FILES + (LEARNED_FILE,)
#: ``summary.json`` lists at most this many distinct fallback notes.
MAX_WARNINGS = 10
#: The wall-clock fields, kept out of ``summary.json`` (they go to ``timing.json``).
TIMING_FIELDS = ("wall_time_s", "decision_time_p50_s", "decision_time_p95_s",
                 "decision_time_max_s")


@dataclass
class Replay:
    """The outcome of a replay: per-job records and the decision log, and the settings
    that shaped it (the policy's round, the extra decision interval, the restart
    penalty, all in s)."""

    records: dict[str, JobRecord]
    decisions: list[DecisionLog]
    cluster: Cluster
    wall_time_s: float
    start_time: float
    interrupted: bool = False
    round_s: float | None = None
    interval_s: float | None = None
    restart_penalty_s: float = RESTART_PENALTY_S
    #: GPUs of a type some job can run on (:func:`hetsched.core.bounds.usable_gpus`); ``None``:
    #: every GPU of the cluster
    usable_gpus: int | None = None
    #: how fast jobs sharing a GPU ran (hetsched.core.sharing), for the checker
    colocation: CoLocationModel | None = None
    #: the policy's failure that stopped the replay (``interrupted`` then too)
    failure: PolicyError | None = None
    #: the throughput jobs ran at, for the fairness figures (NaN without it)
    truth: ThroughputModel | None = None
    #: the tenants' weights and quotas, for the fairness figures (none: weight 1, no quota)
    tenants: TenantTable | None = None
    #: the time without progress at every start (s; the simulator's ``start_latency_s``)
    start_latency_s: float = 0.0
    #: the settings that could not change the replay, one line each
    #: (hetsched.setting_notices): the first of summary.json's ``warnings``
    setting_warnings: tuple[str, ...] = ()
    #: how good the policy's guesses of the jobs' work were, when it was not shown the
    #: truth (:meth:`hetsched.knowledge.view.KnowledgeView.accuracy`; None: it was)
    estimates: dict[str, object] | None = None
    #: what the policy's model learned from the runs (``--learn``; None: it did not learn)
    learned: LearnedThroughput | None = None
    _rho: dict[str, float] | None = field(default=None, init=False, repr=False, compare=False)

    def summary(self) -> dict[str, object]:
        """The replay's metrics (seconds unless stated) as summary.json holds them: a
        function of the input alone, no wall-clock field (those are :meth:`timing`'s)."""
        return self.metrics().to_dict()

    def metrics(self) -> ReplaySummary:
        """The replay's metrics as a typed record (:class:`ReplaySummary`)."""
        done = [r for r in self.records.values() if r.finish is not None]
        queue = np.array([(r.first_start or 0.0) - r.job.arrival for r in done])
        busy = sum(r.gpu_seconds for r in self.records.values())
        # Utilisation counts the GPUs some job can use: a type no job runs on is idle
        # whatever the policy does (``utilization_all_gpus`` counts every GPU).
        usable = self.usable_gpus or len(self.cluster.gpus)
        finish = {r.job.id: r.finish for r in done if r.finish is not None}
        jobs = [r.job for r in self.records.values()]
        figures = completion_figures(jobs, finish, self.start_time, busy, usable)
        capacity_all = len(self.cluster.gpus) * figures.makespan_s
        cost = total_cost((s for r in self.records.values() for s in r.segments),
                          self.cluster.gpu_types)
        fair = FairnessFigures(math.nan, math.nan, math.nan, math.nan, math.nan) \
            if self.truth is None else fairness_figures(
                jobs, finish, [s for r in self.records.values() for s in r.segments],
                self.cluster, self.truth, self.tenants, self.rho())

        return ReplaySummary(
            jobs=len(self.records),
            completed=len(done),
            avg_jct_s=figures.mean_jct(),
            p50_jct_s=figures.percentile_jct(50),
            p95_jct_s=figures.percentile_jct(95),
            p99_jct_s=figures.percentile_jct(99),
            makespan_s=figures.makespan_s,
            avg_queue_s=float(queue.mean()) if len(queue) else math.nan,
            deadline_jobs=figures.deadline_jobs,
            deadline_met=figures.deadline_met,
            total_tardiness_s=figures.total_tardiness_s,
            max_rho=fair.max_rho,
            mean_rho=fair.mean_rho,
            rho_above_1=fair.rho_above_1,
            tenant_jain_index=fair.tenant_jain_index,
            quota_violation_gpu_s=fair.quota_violation_gpu_s,
            utilization=figures.utilization,
            utilization_all_gpus=busy / capacity_all if capacity_all > 0 else 0.0,
            usable_gpus=usable,
            total_cost_usd=cost,
            cost_per_job_usd=cost / len(done) if done else math.nan,
            preemptions=sum(r.preemptions for r in self.records.values()),
            decisions=len(self.decisions),
            fallbacks=sum(1 for d in self.decisions if d.fallback),
            warnings=tuple(self.warnings()),
            round_s=self.round_s,
            interval_s=self.interval_s,
            restart_penalty_s=self.restart_penalty_s,
            start_latency_s=self.start_latency_s,
            interrupted=self.interrupted,
        )

    def schedule(self) -> Schedule:
        """What ran where and when, for :func:`hetsched.core.check.check` (against the measured
        throughput; an interrupted replay has the segments that ended): a job that ran
        once is one assignment, a preempted job one per run segment, each with the work
        it did, and the replay's restart penalty and start latency."""
        return Schedule(tuple(
            segment for r in self.records.values() for segment in (
                [dataclasses.replace(r.segments[0], work=None)]
                if len(r.segments) == 1 and r.finish is not None else r.segments)),
            self.restart_penalty_s, self.start_latency_s)

    def job_rows(self) -> list[tuple[object, ...]]:
        """One row per job (the columns :data:`JOB_COLUMNS`, jobs.csv's), by arrival:
        times in s, ``None`` where unknown (not started, not finished, no deadline, no
        rho: hetsched.core.fairness), the tenant empty for none."""
        rho = self.rho()
        rows: list[tuple[object, ...]] = []
        for record in sorted(self.records.values(), key=lambda r: (r.job.arrival, r.job.id)):
            job = record.job
            rows.append((
                job.id, job.job_type, job.arrival, record.first_start, record.finish,
                None if record.finish is None else record.finish - job.arrival,
                "|".join(dict.fromkeys(record.gpu_types)), len(record.gpus),
                " ".join(record.gpus), record.preemptions, record.gpu_seconds,
                job.deadline, "" if record.met is None else int(record.met), job.tenant or "",
                rho.get(job.id), record.end_state, record.reported_throughput))
        return rows

    def rho(self) -> dict[str, float]:
        """Each finished job's finish-time fairness (hetsched.core.fairness); none without
        the throughput the jobs ran at. Computed once (the summary and jobs.csv read it)."""
        if self.truth is None:
            return {}
        if self._rho is None:
            finish = {r.job.id: r.finish for r in self.records.values()
                      if r.finish is not None}
            self._rho = finish_time_fairness([r.job for r in self.records.values()], finish,
                                             self.cluster, self.truth)
        return self._rho

    def jobs_frame(self) -> Any:
        """jobs.csv as a pandas DataFrame: times as floats (NaN where unknown: not started,
        not finished, no deadline), ``met`` as a nullable boolean (``<NA>`` for a job
        without a deadline or not finished)."""
        import pandas as pd

        frame = pd.DataFrame(self.job_rows(), columns=list(JOB_COLUMNS))
        for column in FLOAT_COLUMNS:
            frame[column] = frame[column].astype(float)
        frame["met"] = frame["met"].replace("", None).astype("boolean")
        return frame

    def warnings(self) -> list[str]:
        """The settings that could not change the replay (:attr:`setting_warnings`), then
        one line per distinct fallback note (the first :data:`MAX_WARNINGS`, in order of
        first use): how many decisions fell back with it and from when (s)."""
        return [*self.setting_warnings, *self._fallback_warnings()]

    def _fallback_warnings(self) -> list[str]:
        seen: dict[str, list[float]] = {}  # note -> [count, first time]
        for decision in self.decisions:
            if decision.fallback:
                entry = seen.setdefault(decision.note or "(no note)", [0, decision.time])
                entry[0] += 1
        lines = [f"{count:.0f} fallback decision{'s' if count != 1 else ''} from t = "
                 f"{first:.0f} s: {note}"
                 for note, (count, first) in list(seen.items())[:MAX_WARNINGS]]
        if len(seen) > MAX_WARNINGS:
            lines.append(f"... and {len(seen) - MAX_WARNINGS} other fallback notes")
        return lines

    def timing(self) -> dict[str, float]:
        """The wall-clock figures (s): the replay's wall time and the policy's decision
        time (p50, p95, max over the decision points). They differ from run to run."""
        times = np.array([d.decision_time_s for d in self.decisions]) if self.decisions \
            else np.zeros(1)
        return {"wall_time_s": self.wall_time_s,
                "decision_time_p50_s": float(np.percentile(times, 50)),
                "decision_time_p95_s": float(np.percentile(times, 95)),
                "decision_time_max_s": float(times.max())}

    def write(self, out_dir: str | Path, extra: dict[str, object] | None = None,
              files: Mapping[str, str] | None = None) -> None:
        """Write :meth:`files` into ``out_dir`` as one set (see :func:`write_folder`), and
        ``files`` (name -> text, names of :data:`COMMAND_FILES`: ``run.toml``, the
        command's settings)."""
        write_folder(out_dir, {**self.files(extra), **(files or {})})

    def files(self, extra: dict[str, object] | None = None, *,
              metrics: Mapping[str, object] | None = None) -> dict[str, str]:
        """The outputs as text, by file name: ``summary.json`` (:meth:`summary`, or
        ``metrics`` when the caller has it already, and ``extra``), ``jobs.csv`` (one row
        per job), ``decisions.csv`` (one row per decision point), all three the same for
        the same input, and ``timing.json`` (:meth:`timing` and ``decision_time_s``, the
        policy's wall-clock time at each decision point, in the order of decisions.csv's
        rows)."""
        summary = {**(self.summary() if metrics is None else metrics), **(extra or {})}
        rows = io.StringIO()
        writer = csv.writer(rows, lineterminator="\n")
        writer.writerow(JOB_COLUMNS)
        for row in self.job_rows():
            writer.writerow([_num(v) if name in FLOAT_COLUMNS else v  # type: ignore[arg-type]
                             for name, v in zip(JOB_COLUMNS, row, strict=True)])
        decisions = io.StringIO()
        writer = csv.writer(decisions, lineterminator="\n")
        writer.writerow(DECISION_COLUMNS)
        for decision in self.decisions:
            values = (getattr(decision, name) for name in DECISION_COLUMNS)
            writer.writerow([_num(v) if isinstance(v, float) else v for v in values])
        timing = {**self.timing(),
                  "decision_time_s": [d.decision_time_s for d in self.decisions]}
        return {"summary.json": _json(summary), "jobs.csv": rows.getvalue(),
                "decisions.csv": decisions.getvalue(), "timing.json": _json(timing),
                **({LEARNED_FILE: self.learned.csv_text()} if self.learned is not None
                   else {})}


#: The columns of jobs.csv (:meth:`Replay.job_rows`).
JOB_COLUMNS = ("job", "job_type", "arrival", "start", "finish", "jct", "gpu_types",
               "num_gpus", "gpus", "preemptions", "gpu_seconds", "deadline", "met", "tenant",
               "rho", "end_state", "reported_throughput")
#: The columns of jobs.csv written as repr-exact floats (empty when unknown).
FLOAT_COLUMNS = frozenset({"arrival", "start", "finish", "jct", "gpu_seconds", "deadline",
                          "rho", "reported_throughput"})
#: The columns of decisions.csv: every field of :class:`DecisionLog` but the wall clock.
DECISION_COLUMNS = tuple(f.name for f in fields(DecisionLog) if f.name != "decision_time_s")


def _json(values: dict[str, object]) -> str:
    """JSON with non-finite floats as null."""
    def clean(value: object) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return json.dumps({k: clean(v) for k, v in values.items()}, indent=1) + "\n"


def _num(value: float | None) -> str:
    """A float for CSV: repr-exact, empty for None."""
    return "" if value is None else repr(float(value))


def write_folder(out_dir: str | Path, files: Mapping[str, str]) -> None:
    """Write ``files`` (name -> text) as the whole content of the folder ``out_dir``: into
    a temporary folder beside it, then renamed into place (a folder already there, which
    may only hold a replay's outputs, is moved aside first and removed). A reader, or a
    second replay into the same folder, never sees a mix of two replays' files; an
    interrupted write leaves the folder as it was."""
    folder = Path(out_dir).absolute()
    folder.parent.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    temporary = folder.with_name(f".{folder.name}.tmp-{token}")
    try:
        temporary.mkdir()
        for name, text in files.items():
            (temporary / name).write_text(text, encoding="utf-8")
        for attempt in range(20):
            try:
                os.rename(temporary, folder)  # absent, or (POSIX) an empty folder
                return
            except OSError:
                if not folder.exists():
                    continue
            check_output_folder(folder, holds=FOLDER_FILES)
            aside = folder.with_name(f".{folder.name}.old-{token}-{attempt}")
            try:
                os.rename(folder, aside)
            except FileNotFoundError:  # another replay moved it first
                continue
            try:
                os.rename(temporary, folder)
                return
            except OSError:  # another replay's folder landed in between: try again
                continue
            finally:
                shutil.rmtree(aside, ignore_errors=True)
        raise RuntimeError(f"could not write {folder}: other replays keep replacing it")
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
