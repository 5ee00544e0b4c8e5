"""Results of a solve: status, objective, bound, gap, runtime, and the schedule.

Metrics are computed from the schedule and the instance alone, never from a
solver's internals, so every policy is measured the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from hetsched.data import Instance


class Status(str, Enum):
    """How a solve ended. OPTIMAL only when the solver proved it."""

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    TIME_LIMIT = "TIME_LIMIT"
    UNKNOWN = "UNKNOWN"
    ERROR = "ERROR"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Assignment:
    """One job's place in a schedule: GPU type, GPU ids, start and finish (s)."""

    job: str
    gpu_type: str
    gpus: tuple[str, ...]
    start: float
    finish: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", tuple(self.gpus))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the keys ``job, gpu_type, gpus, start, finish``."""
        return {
            "job": self.job,
            "gpu_type": self.gpu_type,
            "gpus": list(self.gpus),
            "start": self.start,
            "finish": self.finish,
        }


@dataclass(frozen=True)
class Schedule:
    """Assignments of jobs to GPUs over time, ordered by start time then job id."""

    assignments: tuple[Assignment, ...] = ()

    def __post_init__(self) -> None:
        ordered = sorted(self.assignments, key=lambda a: (a.start, a.job))
        object.__setattr__(self, "assignments", tuple(ordered))

    def __iter__(self) -> Iterator[Assignment]:
        return iter(self.assignments)

    def __len__(self) -> int:
        return len(self.assignments)

    def by_job(self) -> dict[str, Assignment]:
        """Assignments keyed by job id (the last one wins if a job appears twice)."""
        return {a.job: a for a in self.assignments}

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-ready list of assignments."""
        return [a.to_dict() for a in self.assignments]

    @classmethod
    def from_list(cls, rows: Iterable[dict[str, Any]]) -> Schedule:
        """Inverse of :meth:`to_list`."""
        return cls(
            tuple(
                Assignment(r["job"], r["gpu_type"], tuple(r["gpus"]), r["start"], r["finish"])
                for r in rows
            )
        )


@dataclass(frozen=True)
class Metrics:
    """Schedule quality, in seconds unless stated."""

    jobs: int  # jobs in the instance
    scheduled: int  # jobs with an assignment
    avg_jct_s: float  # mean of finish - arrival over scheduled jobs
    p95_jct_s: float
    total_weighted_completion_s: float  # sum of weight x (finish - arrival)
    makespan_s: float  # last finish - instance.now
    deadline_jobs: int
    deadline_met: int
    total_tardiness_s: float  # sum of max(0, finish - deadline)
    utilization: float  # busy GPU-seconds / (GPUs some job can use x makespan)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def compute_metrics(instance: Instance, schedule: Schedule) -> Metrics:
    """Metrics of ``schedule`` on ``instance``, from the schedule alone."""
    jobs = instance.job_by_id
    placed = [a for a in schedule if a.job in jobs]
    jct = np.array([a.finish - jobs[a.job].arrival for a in placed], dtype=float)
    weighted = sum(jobs[a.job].weight * (a.finish - jobs[a.job].arrival) for a in placed)
    with_deadline = [job for job in instance.jobs if job.deadline is not None]
    finish = {a.job: a.finish for a in placed}
    met = sum(
        1 for job in with_deadline
        if job.id in finish and job.deadline is not None and finish[job.id] <= job.deadline + 1e-6
    )
    tardiness = sum(
        max(0.0, finish[job.id] - job.deadline)
        for job in with_deadline
        if job.id in finish and job.deadline is not None
    )
    makespan = max((a.finish for a in placed), default=instance.now) - instance.now
    busy = sum((a.finish - a.start) * len(a.gpus) for a in placed)
    # Only GPUs of a type some job can run on: the others are idle whatever the schedule.
    from hetsched.bounds import usable_gpus

    usable = usable_gpus(instance.jobs, instance.cluster, instance.throughput)
    capacity = (usable or instance.cluster.num_gpus()) * makespan
    return Metrics(
        jobs=len(instance.jobs),
        scheduled=len(placed),
        avg_jct_s=float(jct.mean()) if len(jct) else math.nan,
        p95_jct_s=float(np.percentile(jct, 95)) if len(jct) else math.nan,
        total_weighted_completion_s=float(weighted),
        makespan_s=float(makespan),
        deadline_jobs=len(with_deadline),
        deadline_met=met,
        total_tardiness_s=float(tardiness),
        utilization=float(busy / capacity) if capacity > 0 else 0.0,
    )


@dataclass(frozen=True)
class Result:
    """What :func:`hetsched.solve` returns.

    ``objective`` is ``inf`` when there is no schedule; ``bound`` is the best
    proven bound on the objective (``None`` for heuristics); ``gap`` is
    ``|objective - bound| / max(|objective|, 1e-9)`` when both are known.
    """

    status: Status
    objective: float
    bound: float | None
    runtime_s: float
    schedule: Schedule
    model: str
    backend: str | None = None
    metrics: Metrics | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        """Relative gap between objective and bound, or ``None`` if either is unknown."""
        return relative_gap(self.objective, self.bound)

    def is_feasible(self) -> bool:
        """Whether the result carries a schedule."""
        return self.status in (Status.OPTIMAL, Status.FEASIBLE) or (
            self.status is Status.TIME_LIMIT and len(self.schedule) > 0
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: status, objective, bound, gap, runtime_s, metrics, schedule."""
        return {
            "status": self.status.value,
            "model": self.model,
            "backend": self.backend,
            "objective": _json_number(self.objective),
            "bound": _json_number(self.bound),
            "gap": _json_number(self.gap),
            "runtime_s": self.runtime_s,
            "message": self.message,
            "metrics": {k: _json_number(v) for k, v in self.metrics.to_dict().items()}
            if self.metrics
            else None,
            "schedule": self.schedule.to_list(),
            **({"extra": self.extra} if self.extra else {}),
        }


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|objective - bound| / max(|objective|, 1e-9)``; ``None`` if either is unknown."""
    if objective is None or bound is None or not math.isfinite(objective):
        return None
    if not math.isfinite(bound):
        return None
    return abs(objective - bound) / max(abs(objective), 1e-9)


def _json_number(value: Any) -> Any:
    """NaN and infinities become ``None`` so the output is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
