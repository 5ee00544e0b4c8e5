"""The independent schedule checker.

Written from the problem statement alone, without reference to any formulation
or policy: it reads the instance's cluster, jobs and throughput and the
schedule's assignments, and lists everything that is wrong.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from hetsched.data import Instance
from hetsched.result import Assignment, Schedule
from hetsched.throughput import Placement

#: Times are compared with this tolerance: absolute seconds, plus a part relative to the
#: *durations* involved (never to the clock value: at Unix-epoch times, 1e-6 of the clock
#: is half an hour), plus a few units in the last place of the times compared (their
#: float resolution: 2.4e-7 s at 1.7e9 s; validation keeps times below 1e10 s).
ABS_TOL_S = 1e-6
REL_TOL = 1e-6
ULPS = 4


@dataclass(frozen=True)
class Violation:
    """One thing wrong with a schedule: which job, what kind, and a readable message."""

    job: str
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.job}: {self.kind}: {self.message}"


def _slack(duration: float, *times: float) -> float:
    """How far two times may differ: absolute, relative to ``duration``, float resolution."""
    return ABS_TOL_S + REL_TOL * abs(duration) + ULPS * max(math.ulp(t) for t in times)


def check(instance: Instance, schedule: Schedule, *, complete: bool = True) -> list[Violation]:
    """Every violation of ``schedule`` on ``instance``; an empty list means it is valid.

    Checks: each job scheduled once (and, with ``complete``, every job scheduled);
    every GPU exists and is of the stated type, a type the job may use, on a node the job
    may use; the gang size is one the job allows;
    no job starts before it arrives or before ``instance.now``; the throughput of
    the actual placement (packed on one node, else spread) is positive and
    ``finish = start + work / throughput``; no GPU is used by two jobs at once.

    A job run in segments (assignments with ``work``, :class:`~hetsched.result.Assignment`)
    is checked segment by segment: each one as above, with its own ``work`` and, for every
    segment but the first, the schedule's restart penalty before any progress
    (``finish = start + penalty + work / throughput``; a segment ended within its
    penalty did no work); its segments do not overlap in time; their work adds up to the
    job's.
    """
    violations: list[Violation] = []
    jobs = instance.job_by_id
    gpus = instance.cluster.gpu_by_id
    usage: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    whole: set[str] = set()  # jobs with an assignment without ``work`` (run whole)
    segments: dict[str, list[tuple[Assignment, float]]] = defaultdict(list)

    for a in schedule:
        def bad(kind: str, message: str, job: str = a.job) -> None:
            violations.append(Violation(job, kind, message))

        if a.job not in jobs:
            bad("unknown-job", "the instance has no such job")
            continue
        if a.job in whole or (a.work is None and a.job in segments):
            bad("duplicate", "the job is scheduled more than once")
            continue
        job = jobs[a.job]
        if a.work is None:
            whole.add(a.job)

        unknown = [g for g in a.gpus if g not in gpus]
        if unknown:
            bad("unknown-gpu", f"GPUs {unknown} do not exist in the cluster")
            continue
        if len(set(a.gpus)) != len(a.gpus):
            bad("repeated-gpu", f"a GPU is listed twice in {list(a.gpus)}")
            continue
        wrong_type = [g for g in a.gpus if gpus[g].gpu_type != a.gpu_type]
        if wrong_type:
            bad("gpu-type", f"GPUs {wrong_type} are not of the stated type {a.gpu_type}")
            continue
        off = sorted({gpus[g].node for g in a.gpus if not job.may_use_node(gpus[g].node)})
        if off:
            bad("node-not-allowed", f"runs on nodes {off}, the job allows only "
                f"{list(job.allowed_nodes or ())}")
            continue
        if not job.may_use(a.gpu_type):
            bad("gpu-type-not-allowed", f"runs on {a.gpu_type}, the job allows only "
                f"{list(job.allowed_gpu_types or ())}")
            continue
        if len(a.gpus) not in job.gpu_counts:
            bad("gang-size", f"{len(a.gpus)} GPUs given, the job allows {list(job.gpu_counts)}")
            continue
        if a.start < job.arrival - _slack(0.0, a.start, job.arrival):
            bad("before-arrival", f"starts at {a.start:g} s, arrives at {job.arrival:g} s")
        if a.start < instance.now - _slack(0.0, a.start, instance.now):
            bad("before-now", f"starts at {a.start:g} s, before the current time "
                f"{instance.now:g} s")

        nodes = {gpus[g].node for g in a.gpus}
        placement = Placement.PACKED if len(nodes) == 1 else Placement.SPREAD
        speed = instance.throughput.throughput(
            job.job_type, a.gpu_type, len(a.gpus), placement
        )
        if speed <= 0:
            bad("zero-throughput", f"job type {job.job_type} cannot run on {len(a.gpus)} x "
                f"{a.gpu_type} {placement} (throughput {speed:g})")
            continue
        if a.work is None:
            duration = job.work / speed
            expected = a.start + duration
            if abs(a.finish - expected) > _slack(duration, a.finish, expected):
                bad("finish", f"finish {a.finish:.6f} s, but start + work / throughput = "
                    f"{a.start:g} + {job.work:g} / {speed:g} = {expected:.6f} s ({placement})")
        else:
            segments[a.job].append((a, speed))
        for g in a.gpus:
            usage[g].append((a.start, a.finish, a.job))

    for job_id, runs in segments.items():
        violations += _check_segments(jobs[job_id].work, job_id, runs,
                                      schedule.restart_penalty_s, complete)

    if complete:
        for job_id in jobs:
            if job_id not in whole and job_id not in segments:
                violations.append(Violation(job_id, "unscheduled", "the job has no assignment"))

    for gid, intervals in usage.items():
        intervals.sort()
        # Sweep in start order, remembering the interval that reaches furthest so far.
        s1, f1, j1 = intervals[0]
        for s2, f2, j2 in intervals[1:]:
            if s2 < f1 - _slack(min(f1 - s1, f2 - s2), s2, f1):
                violations.append(Violation(
                    j2, "overlap",
                    f"GPU {gid} is used by {j1} during [{s1:g}, {f1:g}) and by {j2} from {s2:g}",
                ))
            if f2 > f1:
                s1, f1, j1 = s2, f2, j2
    return violations


def _check_segments(total: float, job: str, runs: list[tuple[Assignment, float]],
                    penalty: float, complete: bool = True) -> list[Violation]:
    """The run segments of one job (each with its throughput), in order of start: each
    segment's length from its work, no overlap, the work adding up to ``total`` (at
    most ``total`` if not ``complete``: an interrupted replay lists the segments of jobs
    that had not finished)."""
    found: list[Violation] = []
    done = 0.0
    previous: Assignment | None = None
    for k, (a, speed) in enumerate(runs):
        work = a.work if a.work is not None else 0.0
        setup = penalty if k else 0.0
        length = a.finish - a.start
        if not math.isfinite(work) or work < 0:
            found.append(Violation(job, "work", f"segment from {a.start:g} s does {work:g} "
                                   "steps, expected a finite number >= 0"))
            continue
        busy = work / speed
        if work > 0 and abs(length - setup - busy) > _slack(busy + setup, a.finish, a.start):
            found.append(Violation(job, "finish", (
                f"segment from {a.start:g} s ends at {a.finish:.6f} s, but start + penalty + "
                f"work / throughput = {a.start:g} + {setup:g} + {work:g} / {speed:g} = "
                f"{a.start + setup + busy:.6f} s")))
        elif work == 0 and length > setup + _slack(setup, a.finish, a.start):
            found.append(Violation(job, "finish", (
                f"segment from {a.start:g} s to {a.finish:g} s does no work, but its restart "
                f"penalty is {setup:g} s")))
        if previous is not None and a.start < previous.finish - _slack(
                0.0, a.start, previous.finish):
            found.append(Violation(job, "segment-overlap", (
                f"a segment starts at {a.start:g} s, before the one from "
                f"{previous.start:g} s ends at {previous.finish:g} s")))
        done += work
        previous = a
    short = complete and total - done > _slack(total, total)
    if short or done - total > _slack(total, total):
        found.append(Violation(job, "work-total", (
            f"its segments do {done:.6g} steps, the job has {total:.6g}")))
    return found
