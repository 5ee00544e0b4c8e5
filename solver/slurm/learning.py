"""What the agent learns from the jobs' own reports (docs/slurm.md, "Learning from the
jobs"): each managed job reports its steps through :mod:`hetsched.job` (the emulator
does too) in ``CHECKPOINTS/SLURM_ID.json``; :class:`Reports` reads them as they change.

- **Progress comes from the job.** A job with a report has done the steps it last
  reported; a running one, since that write, what the policy's model says of its GPUs
  (a second of wall time at most: reports are written every second). Without a report,
  the history's prediction from the runs the agent saw (:meth:`History.remaining`).
- **Throughputs are learned** (``--learn``): every new stretch of a reported run (steps
  and trace seconds since the last reading, from the run's resume: no restore time) is an
  observation of its (job type, GPU type, GPU count, placement) in a
  :class:`~hetsched.speeds.learned.LearnedThroughput`, whose prior is what the agent
  knew at the start (the throughput source, the built-in catalogue, or nothing). A job
  type the model never saw starts from its bootstrap estimate (Sia's way), so it is
  scheduled rather than refused. The policy sees the model as a frozen table of every
  answer it may ask (:meth:`Reports.policy_model`), rebuilt when something was learned:
  policies cache a model's answers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from hetsched.allocation.layout import throughput_of
from hetsched.core.records import Cluster, Job
from hetsched.core.throughput import ThroughputModel, ThroughputTable
from hetsched.job import Checkpoint
from hetsched.simulate.learning import learning_prior
from hetsched.slurm.checkpoint import checkpoint_path, read_checkpoint
from hetsched.slurm.history import History, LiveRun, overlapping
from hetsched.slurm.source import LEARN_PRIORS
from hetsched.speeds.learned import LearnedThroughput

log = logging.getLogger(__name__)


@dataclass
class Reports:
    """The managed jobs' reports in ``folder``, read as they change; ``learned`` (when
    learning) takes every new stretch of a run."""

    folder: Path
    learned: LearnedThroughput | None = None
    #: job id -> (steps done, Unix time of the write, running)
    progress: dict[str, tuple[float, float, bool]] = field(default_factory=dict)
    #: job id -> the state of its last reported run (running, stopped, completed, failed)
    last_run: dict[str, str] = field(default_factory=dict)
    _stamps: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: (Slurm id, run index) -> (Unix time, steps) of the last stretch observed
    _observed: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    _bad: set[str] = field(default_factory=set)

    def read(self, history: History, cluster: Cluster) -> int:
        """Read every changed report of a job the history knows; the observations
        taken."""
        taken = 0
        for job_id, seen in history.jobs.items():
            if seen.slurm_id is None:
                continue
            path = checkpoint_path(self.folder, str(seen.slurm_id))
            try:
                stat = path.stat()
            except OSError:
                continue
            stamp = (stat.st_mtime_ns, stat.st_size)
            if self._stamps.get(job_id) == stamp:
                continue
            self._stamps[job_id] = stamp
            try:
                report = read_checkpoint(path)
            except ValueError as exc:  # (InputError too) a damaged report: said once
                if job_id not in self._bad:
                    self._bad.add(job_id)
                    log.warning("job %s: its report is unreadable, progress predicted "
                                "instead: %s", job_id, exc)
                continue
            if report is None:
                continue
            running = bool(report.runs) and report.runs[-1].state == "running"
            self.progress[job_id] = (report.steps, report.updated, running)
            self.last_run[job_id] = report.runs[-1].state if report.runs else ""
            if self.learned is not None:
                taken += self._learn(seen.slurm_id, seen.meta.job, seen.runs, report,
                                     seen.meta.speedup, cluster)
        return taken

    def _learn(self, slurm_id: int, job: Job, seen_runs: list[LiveRun], report: Checkpoint,
               speedup: float, cluster: Cluster) -> int:
        assert self.learned is not None
        taken = 0
        for index, run in enumerate(report.runs):
            gpus, gpu_type = run.gpus, run.gpu_type
            if not gpus:  # a real job's run: where the agent saw it
                saw = overlapping(seen_runs, run.start, run.end)
                if saw is None:
                    continue
                gpus, gpu_type = saw.gpus, saw.gpu_type
            key = (slurm_id, index)
            since, steps_then = self._observed.get(key, (run.resume, run.steps_start))
            seconds = (run.end - since) * speedup
            steps = run.steps_end - steps_then
            if seconds <= 0 or steps < 0:
                continue
            try:
                placement = cluster.placement_of(gpus)
            except (KeyError, ValueError):  # GPUs of another cluster's
                continue
            self.learned.observe(job.job_type, gpu_type, len(gpus), placement, steps, seconds)
            self._observed[key] = (run.end, run.steps_end)
            taken += 1
        return taken

    def remaining(self, job: Job, now: float, history: History, model: ThroughputModel,
                  cluster: Cluster) -> float:
        """Steps left of ``job`` at trace time ``now``: its work less what it reported
        (and, running, what ``model`` says it did since the report); the history's
        prediction without a report. At least a millionth of its work."""
        found = self.progress.get(job.id)
        if found is None:
            return history.remaining(job, now, model, cluster)
        steps, updated, running = found
        seen = history.jobs.get(job.id)
        if running and seen is not None and seen.runs and seen.runs[-1].end is None:
            run = seen.runs[-1]
            speed = throughput_of(model, job.job_type, run.gpu_type, len(run.gpus),
                                  cluster.placement_of(run.gpus))
            steps += speed * max(0.0, now - history.trace_time(max(updated, run.start)))
        return max(job.work - steps, job.work * 1e-6)

    def policy_model(self, jobs: list[Job], cluster: Cluster) -> ThroughputTable:
        """The learned model as a frozen table of every answer the policy may ask
        (:meth:`~hetsched.speeds.learned.LearnedThroughput.policy_table`): the jobs'
        types on the cluster's GPU types, at each GPU count the jobs ask for or allow."""
        assert self.learned is not None
        return self.learned.policy_table(jobs, cluster.type_names)


def reports_for(folder: Path | None, learn: str, cluster: Cluster,
                source: ThroughputModel) -> Reports | None:
    """The agent's :class:`Reports` on ``folder`` (``None`` without one), learning over
    the prior ``learn`` names (:func:`~hetsched.simulate.learning.learning_prior`, as a
    replay's ``--learn``); ``off``: progress from reports, nothing learned."""
    assert learn in LEARN_PRIORS, learn
    if folder is None:
        return None
    if learn == "off":
        return Reports(folder)
    return Reports(folder, LearnedThroughput(learning_prior(learn, cluster, source),
                                             cluster.type_names))
