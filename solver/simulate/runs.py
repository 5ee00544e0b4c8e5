"""A job's run on its GPUs, as the simulator keeps it (:class:`SimulatedRun`), and the jobs that
share GPUs (:class:`Sharers`): who runs on each shared GPU, how fast co-location lets
each of them run (:class:`hetsched.core.sharing.CoLocationModel`), and a run continued at a
new speed when its co-runners change (docs/traces.md, "GPU shares, CPUs and memory")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from hetsched.core.records import Job, packed_holder
from hetsched.core.result import Assignment
from hetsched.core.sharing import CoLocationModel
from hetsched.policies.rolling import Held
from hetsched.simulate.record import JobRecord


@dataclass(frozen=True)
class SimulatedRun:
    """A job on its GPUs since ``start`` (s): no progress before ``resume`` (the restart
    penalty), then ``speed`` measured steps/s until ``work_left`` steps are done at
    ``finish``. Never changed once made, so progress is computed, not accounted step by
    step at every event. ``since``: when the job last (re)started (``start`` unless the
    run ``continued`` an earlier one at another speed, its co-runners having changed);
    ``share``: the share of each GPU it holds (1: whole); ``packed``: a whole job packed
    on its GPU beside at most one other (``Start.packed``: it holds half of it)."""

    record: JobRecord
    gpu_type: str
    gpus: tuple[str, ...]
    start: float
    resume: float
    speed: float  # measured steps/s
    work_left: float  # steps left at ``start``
    finish: float
    version: int
    since: float
    share: float = 1.0
    continued: bool = False
    packed: bool = False

    @cached_property
    def held(self) -> Held:
        """What the run holds, as a policy reads it (:meth:`ClusterState.held`)."""
        return Held(self.record.job, self.gpu_type, self.gpus)

    @cached_property
    def holder(self) -> Job:
        """The job as it holds its GPUs: a packed run's job holds a share of its GPU
        (:func:`hetsched.core.records.packed_holder`)."""
        job = self.record.job
        return packed_holder(job) if self.packed else job

    def remaining_at(self, moment: float) -> float:
        """Steps left at ``moment`` (s, between ``start`` and ``finish``)."""
        return max(0.0, self.work_left - max(0.0, moment - self.resume) * self.speed)

    def segment(self, end: float, work: float) -> Assignment:
        """This run as a run segment ending at ``end`` (s) having done ``work`` steps."""
        return Assignment(self.record.job.id, self.gpu_type, self.gpus, self.start, end, work,
                          self.continued, self.packed)

    def gpu_seconds_at(self, moment: float) -> float:
        """GPU-seconds used on these GPUs from ``start`` to ``moment``, the restore
        included (a share of a GPU counts its share)."""
        return max(0.0, moment - self.start) * len(self.gpus) * self.share

    def at_speed(self, now: float, speed: float, version: int
                 ) -> tuple[SimulatedRun, Assignment | None]:
        """This run continued from ``now`` at ``speed`` (steps/s): the new run, and the
        segment that ends now (``None`` when the run started now: it is replaced)."""
        left = self.remaining_at(now)
        resume = max(self.resume, now)
        moved = replace(self, start=now, resume=resume, speed=speed, work_left=left,
                        finish=resume + left / speed, version=version,
                        continued=self.continued if self.start >= now else True)
        if self.start >= now:
            return moved, None
        return moved, self.segment(now, self.work_left - left)


class Sharers:
    """The jobs running on each GPU that hosts jobs asking for a share (in the order they
    started), and the speed factor co-location gives each (``colocation``)."""

    def __init__(self, colocation: CoLocationModel) -> None:
        self.colocation = colocation
        self.on_gpu: dict[str, dict[str, str]] = {}  # GPU -> {job id: job type}

    def add(self, gpu: str, job_id: str, job_type: str) -> list[str]:
        """``job_id`` starts on ``gpu``; the other jobs there (whose speed may change)."""
        jobs = self.on_gpu.setdefault(gpu, {})
        others = list(jobs)
        jobs[job_id] = job_type
        return others

    def remove(self, gpu: str, job_id: str) -> list[str]:
        """``job_id`` leaves ``gpu``; the jobs left there (whose speed may change)."""
        jobs = self.on_gpu.get(gpu, {})
        jobs.pop(job_id, None)
        if not jobs:
            self.on_gpu.pop(gpu, None)
        return list(jobs)

    def factor(self, gpu: str, gpu_type: str, job_id: str) -> float:
        """The speed factor of ``job_id`` on ``gpu`` beside the jobs there now."""
        jobs = self.on_gpu.get(gpu, {})
        others = sorted(kind for other, kind in jobs.items() if other != job_id)
        return self.colocation.factor(jobs[job_id], gpu_type, others)
