"""Results of a solve: status, objective, bound, gap, runtime, and the schedule.

Metrics are computed from the schedule and the instance alone, never from a
solver's internals, so every policy is measured the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from hetsched.core.records import Instance, Job


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
    """A job on GPUs: GPU type, GPU ids, start and finish (s).

    ``work`` is ``None`` for a job run whole, from start to finish, on these GPUs (every
    static model's schedule). A job that is preempted and resumed (a replay, a rolling
    policy) has one assignment per run segment, each with the ``work`` (steps) done in
    it; every segment begins with the schedule's start latency
    (:attr:`Schedule.start_latency_s`) and a resumed one then with its restart penalty
    (:attr:`Schedule.restart_penalty_s`), without progress. A ``continued`` segment
    goes on from the one before on the same GPUs at another speed (its GPU's co-runners
    changed, hetsched.core.sharing): no restart, no penalty of its own. A ``packed``
    one is of a whole job of one GPU that holds half of it, beside at most one other
    packed job (space sharing, :data:`hetsched.core.sharing.PACKED_SHARE`)."""

    job: str
    gpu_type: str
    gpus: tuple[str, ...]
    start: float
    finish: float
    work: float | None = None
    continued: bool = False
    packed: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", tuple(self.gpus))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the keys ``job, gpu_type, gpus, start, finish`` (and
        ``work`` for a run segment, ``continued`` for a continued one, ``packed`` for a
        packed one)."""
        row: dict[str, Any] = {
            "job": self.job,
            "gpu_type": self.gpu_type,
            "gpus": list(self.gpus),
            "start": self.start,
            "finish": self.finish,
        }
        if self.work is not None:
            row["work"] = self.work
        if self.continued:
            row["continued"] = True
        if self.packed:
            row["packed"] = True
        return row

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Assignment:
        """Inverse of :meth:`to_dict`."""
        return cls(row["job"], row["gpu_type"], tuple(row["gpus"]), float(row["start"]),
                   float(row["finish"]), None if row.get("work") is None else float(row["work"]),
                   bool(row.get("continued", False)), bool(row.get("packed", False)))


@dataclass(frozen=True)
class Schedule:
    """Assignments of jobs to GPUs over time, ordered by start time then job id.

    ``restart_penalty_s``: the time without progress at the start of every run segment
    of a job but its first (0 for static schedules, where each job runs once);
    ``start_latency_s``: the time without progress at the start of every run, before
    any penalty (a replay's dispatch latency, hetsched.core.settings.START_LATENCY_S; 0
    but in replays that charge one)."""

    assignments: tuple[Assignment, ...] = ()
    restart_penalty_s: float = 0.0
    start_latency_s: float = 0.0

    def __post_init__(self) -> None:
        ordered = sorted(self.assignments, key=attrgetter("start", "job"))
        object.__setattr__(self, "assignments", tuple(ordered))

    def __iter__(self) -> Iterator[Assignment]:
        return iter(self.assignments)

    def __len__(self) -> int:
        return len(self.assignments)

    def by_job(self) -> dict[str, Assignment]:
        """Assignments keyed by job id (a job run in segments: its last segment)."""
        return {a.job: a for a in self.assignments}

    def segments(self) -> dict[str, list[Assignment]]:
        """Every job's assignments (run segments), in order of start."""
        grouped: dict[str, list[Assignment]] = {}
        for a in self.assignments:
            grouped.setdefault(a.job, []).append(a)
        return grouped

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-ready list of assignments (:meth:`Assignment.to_dict` each)."""
        return [a.to_dict() for a in self.assignments]

    @classmethod
    def from_list(cls, rows: Iterable[Mapping[str, Any]], restart_penalty_s: float = 0.0,
                  start_latency_s: float = 0.0) -> Schedule:
        """Inverse of :meth:`to_list`."""
        return cls(tuple(Assignment.from_dict(r) for r in rows), restart_penalty_s,
                   start_latency_s)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``assignments`` (:meth:`to_list`), ``restart_penalty_s``
        and, when not 0, ``start_latency_s``."""
        return {"assignments": self.to_list(), "restart_penalty_s": self.restart_penalty_s,
                **({"start_latency_s": self.start_latency_s} if self.start_latency_s else {})}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Schedule:
        """Inverse of :meth:`to_dict`."""
        return cls.from_list(values["assignments"], float(values.get("restart_penalty_s", 0)),
                             float(values.get("start_latency_s", 0)))

    def to_frame(self) -> Any:
        """The assignments as a pandas DataFrame: one row per assignment (a run segment of
        a preempted job is a row of its own), with the columns ``job, gpu_type, gpus,
        num_gpus, start, finish, work`` (``work`` empty for a job run whole)."""
        import pandas as pd

        return pd.DataFrame(
            [{"job": a.job, "gpu_type": a.gpu_type, "gpus": " ".join(a.gpus),
              "num_gpus": len(a.gpus), "start": a.start, "finish": a.finish, "work": a.work}
             for a in self.assignments],
            columns=["job", "gpu_type", "gpus", "num_gpus", "start", "finish", "work"])


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
        """A JSON-ready dict (NaN where no job finished; :meth:`Result.to_dict` writes it
        as null)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Metrics:
        """Inverse of :meth:`to_dict` (``None`` read as NaN, as strict JSON writes it)."""
        def number(name: str) -> float:
            value = values[name]
            return math.nan if value is None else float(value)

        return cls(
            jobs=int(values["jobs"]), scheduled=int(values["scheduled"]),
            avg_jct_s=number("avg_jct_s"), p95_jct_s=number("p95_jct_s"),
            total_weighted_completion_s=number("total_weighted_completion_s"),
            makespan_s=number("makespan_s"), deadline_jobs=int(values["deadline_jobs"]),
            deadline_met=int(values["deadline_met"]),
            total_tardiness_s=number("total_tardiness_s"), utilization=number("utilization"))

    def to_frame(self) -> Any:
        """The metrics as a one-row pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame([self.to_dict()])


@dataclass(frozen=True)
class CompletionFigures:
    """What every metric of a schedule or a replay is made of, defined once
    (:func:`completion_figures`): the finished jobs' completion times in the order given
    (s), the makespan from the origin, the deadline counts and the tardiness, the
    utilisation."""

    jct: npt.NDArray[np.float64]
    makespan_s: float
    deadline_jobs: int
    deadline_met: int
    total_tardiness_s: float
    utilization: float

    def mean_jct(self) -> float:
        """The average JCT (s); NaN if no job finished."""
        return float(self.jct.mean()) if len(self.jct) else math.nan

    def percentile_jct(self, q: float) -> float:
        """The ``q``-th percentile of the JCTs (s); NaN if no job finished."""
        return float(np.percentile(self.jct, q)) if len(self.jct) else math.nan


def completion_figures(jobs: Iterable[Job], finish: Mapping[str, float], origin: float,
                       busy_gpu_s: float, gpus: int) -> CompletionFigures:
    """The figures of jobs that finished at ``finish`` (job id -> s; the finished jobs,
    in the order their JCTs are averaged): JCT = finish - arrival; makespan = the last
    finish - ``origin`` (``now`` of a static instance, the first arrival of a replay);
    a deadline is met by finishing at most 1 us after it; tardiness sums
    ``max(0, finish - deadline)``; utilisation = ``busy_gpu_s`` / (``gpus`` x makespan)."""
    listed = list(jobs)
    arrival = {job.id: job.arrival for job in listed}
    jct = np.array([end - arrival[job] for job, end in finish.items()], dtype=float)
    with_deadline = [job for job in listed if job.deadline is not None]
    met = sum(1 for job in with_deadline if job.id in finish and job.deadline is not None
              and finish[job.id] <= job.deadline + 1e-6)
    tardiness = sum(max(0.0, finish[job.id] - (job.deadline or 0.0))
                    for job in with_deadline if job.id in finish)
    makespan = max(finish.values(), default=origin) - origin
    capacity = gpus * makespan
    return CompletionFigures(jct, makespan, len(with_deadline), met, tardiness,
                             busy_gpu_s / capacity if capacity > 0 else 0.0)


def compute_metrics(instance: Instance, schedule: Schedule) -> Metrics:
    """Metrics of ``schedule`` on ``instance``, from the schedule alone (a job run in
    segments finishes when its last segment does; every segment keeps its GPUs busy;
    the figures of :func:`completion_figures`, from ``instance.now``)."""
    jobs = instance.job_by_id
    placed = [a for a in schedule if a.job in jobs]
    finish: dict[str, float] = {}
    for a in placed:
        finish[a.job] = max(a.finish, finish.get(a.job, -math.inf))
    weighted = sum(jobs[job].weight * (end - jobs[job].arrival) for job, end in finish.items())
    busy = sum((a.finish - a.start) * len(a.gpus) for a in placed)
    # Only GPUs of a type some job can run on: the others are idle whatever the schedule.
    from hetsched.core.bounds import usable_gpus

    usable = usable_gpus(instance.jobs, instance.cluster, instance.throughput)
    figures = completion_figures(instance.jobs, finish, instance.now, busy,
                                 usable or instance.cluster.num_gpus())
    return Metrics(
        jobs=len(instance.jobs),
        scheduled=len(finish),
        avg_jct_s=figures.mean_jct(),
        p95_jct_s=figures.percentile_jct(95),
        total_weighted_completion_s=float(weighted),
        makespan_s=float(figures.makespan_s),
        deadline_jobs=figures.deadline_jobs,
        deadline_met=figures.deadline_met,
        total_tardiness_s=float(figures.total_tardiness_s),
        utilization=float(figures.utilization),
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
            **({"restart_penalty_s": self.schedule.restart_penalty_s}
               if self.schedule.restart_penalty_s else {}),
            **({"start_latency_s": self.schedule.start_latency_s}
               if self.schedule.start_latency_s else {}),
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Result:
        """Inverse of :meth:`to_dict` (e.g. a ``hetsched solve --out`` file): a null
        objective is ``inf`` (no schedule), null metrics NaN."""
        objective = values.get("objective")
        bound = values.get("bound")
        metrics = values.get("metrics")
        return cls(
            status=Status(values["status"]),
            objective=math.inf if objective is None else float(objective),
            bound=None if bound is None else float(bound),
            runtime_s=float(values["runtime_s"]),
            schedule=Schedule.from_list(values["schedule"],
                                        float(values.get("restart_penalty_s", 0.0)),
                                        float(values.get("start_latency_s", 0.0))),
            model=str(values["model"]), backend=values.get("backend"),
            metrics=None if metrics is None else Metrics.from_dict(metrics),
            message=str(values.get("message", "")), extra=dict(values.get("extra", {})))

    def summary(self) -> dict[str, Any]:
        """One flat row: model, back-end, status, objective, bound, gap, runtime and every
        metric of :class:`Metrics`, e.g. to compare solves in a DataFrame."""
        row: dict[str, Any] = {"model": self.model, "backend": self.backend,
                               "status": self.status.value, "objective": self.objective,
                               "bound": self.bound, "gap": self.gap,
                               "runtime_s": self.runtime_s}
        if self.metrics is not None:
            row.update(self.metrics.to_dict())
        return row

    def to_frame(self) -> Any:
        """The schedule as a pandas DataFrame (:meth:`Schedule.to_frame`: one row per
        assignment or run segment; ``summary()`` is the one-row view of the result)."""
        return self.schedule.to_frame()


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
