"""The independent schedule checker.

Written from the problem statement alone, without reference to any formulation
or policy: it reads the instance's cluster, jobs and throughput and the
schedule's assignments, and lists everything that is wrong.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from hetsched.core.records import Instance, Job
from hetsched.core.result import Assignment, Schedule
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import Placement

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
    ``finish = start + work / throughput``; no GPU is used by two jobs at once, except
    by jobs that ask for shares of it (``Job.gpu_share``), whose shares on a GPU never
    add up to more than 1 at any moment, and which run at their throughput times the
    speed factor of their co-runners (``instance.colocation``, hetsched.core.sharing; that
    factor must stay the same from an assignment's start to its finish); no node
    gives its jobs more CPUs or memory than it has (``Node.cpus``, ``Node.memory_gb``;
    ``Job.node_demand``).

    A job run in segments (assignments with ``work``, :class:`~hetsched.core.result.Assignment`)
    is checked segment by segment: each one as above, with its own ``work`` and, for every
    segment but the first, the schedule's restart penalty before any progress
    (``finish = start + penalty + work / throughput``; a segment ended within its
    penalty did no work), unless it is ``continued`` (it goes on from the segment before,
    on the same GPUs, at another speed: the penalty left of the restart it continues);
    its segments do not overlap in time; their work adds up to the job's.
    """
    violations: list[Violation] = []
    jobs = instance.job_by_id
    gpus = instance.cluster.gpu_by_id
    usage: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    whole: set[str] = set()  # jobs with an assignment without ``work`` (run whole)
    segments: dict[str, list[tuple[Assignment, float]]] = defaultdict(list)
    factors = _sharing_factors(schedule, jobs, instance.colocation or CoLocationModel())

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
        off = [] if job.allowed_nodes is None else \
            sorted({gpus[g].node for g in a.gpus if not job.may_use_node(gpus[g].node)})
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
        # (a slack is at least ABS_TOL_S: the comparisons it cannot change skip it)
        if a.start < job.arrival and a.start < job.arrival - _slack(0.0, a.start, job.arrival):
            bad("before-arrival", f"starts at {a.start:g} s, arrives at {job.arrival:g} s")
        if a.start < instance.now and \
                a.start < instance.now - _slack(0.0, a.start, instance.now):
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
        factor = factors.get(id(a))
        if factor is None:
            bad("co-runners", "the speed its GPU's co-runners allow changes between its "
                "start and its finish (a change of speed ends a run segment)")
            continue
        speed *= factor
        if a.work is None:
            duration = job.work / speed
            expected = a.start + duration
            miss = abs(a.finish - expected)
            if miss > ABS_TOL_S and miss > _slack(duration, a.finish, expected):
                bad("finish", f"finish {a.finish:.6f} s, but start + work / throughput = "
                    f"{a.start:g} + {job.work:g} / {speed:g} = {expected:.6f} s ({placement})")
        else:
            segments[a.job].append((a, speed))
        for g in a.gpus:
            usage[g].append((a.start, a.finish, a.job))

    violations += _node_resources(instance, schedule)
    for job_id, runs in segments.items():
        violations += _check_segments(jobs[job_id].work, job_id, runs,
                                      schedule.restart_penalty_s, complete)

    if complete:
        for job_id in jobs:
            if job_id not in whole and job_id not in segments:
                violations.append(Violation(job_id, "unscheduled", "the job has no assignment"))

    sharing = {job_id for job_id, job in jobs.items() if job.gpu_share is not None}
    for gid, intervals in usage.items():
        if sharing and any(j in sharing for _, _, j in intervals):
            violations += _gpu_shares(gid, intervals, jobs)
            continue
        intervals.sort()
        # Sweep in start order, remembering the interval that reaches furthest so far.
        s1, f1, j1 = intervals[0]
        for s2, f2, j2 in intervals[1:]:
            if s2 < f1 and s2 < f1 - _slack(min(f1 - s1, f2 - s2), s2, f1):
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
    resume = -math.inf  # progress starts at the end of the last restart's penalty
    for k, (a, speed) in enumerate(runs):
        work = a.work if a.work is not None else 0.0
        if a.continued and (previous is None or previous.gpus != a.gpus or abs(
                a.start - previous.finish) > _slack(0.0, a.start, previous.finish)):
            found.append(Violation(job, "continued", (
                f"a segment from {a.start:g} s continues none (it must start where the one "
                "before ends, on the same GPUs)")))
        if not a.continued:
            resume = a.start + (penalty if k else 0.0)
        setup = max(0.0, resume - a.start)
        length = a.finish - a.start
        if not math.isfinite(work) or work < 0:
            found.append(Violation(job, "work", f"segment from {a.start:g} s does {work:g} "
                                   "steps, expected a finite number >= 0"))
            continue
        busy = work / speed
        miss = abs(length - setup - busy)
        if work > 0 and miss > ABS_TOL_S and miss > _slack(busy + setup, a.finish, a.start):
            found.append(Violation(job, "finish", (
                f"segment from {a.start:g} s ends at {a.finish:.6f} s, but start + penalty + "
                f"work / throughput = {a.start:g} + {setup:g} + {work:g} / {speed:g} = "
                f"{a.start + setup + busy:.6f} s")))
        elif work == 0 and length > setup + _slack(setup, a.finish, a.start):
            found.append(Violation(job, "finish", (
                f"segment from {a.start:g} s to {a.finish:g} s does no work, but its restart "
                f"penalty is {setup:g} s")))
        if previous is not None and a.start < previous.finish and \
                a.start < previous.finish - _slack(0.0, a.start, previous.finish):
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


def _sharing_factors(schedule: Schedule, jobs: Mapping[str, Job],
                     colocation: CoLocationModel) -> dict[int, float]:
    """For each assignment (by ``id``), the speed factor its co-runners give it
    (:class:`~hetsched.core.sharing.CoLocationModel`; 1 alone, and for every job that does not
    ask for a GPU share), which must stay the same from its start to its finish; an
    assignment whose factor changes in between is left out (the caller reports it)."""
    on_gpu: dict[str, list[Assignment]] = defaultdict(list)
    for a in schedule:
        job = jobs.get(a.job)
        if job is not None and job.gpu_share is not None:
            for g in a.gpus:
                on_gpu[g].append(a)
    found: dict[int, float] = {id(a): 1.0 for a in schedule}
    gpu_type = {id(a): a.gpu_type for a in schedule}
    for runs in on_gpu.values():
        for a in runs:
            beside = [b for b in runs if b.job != a.job and min(a.finish, b.finish) - max(
                a.start, b.start) > _slack(0.0, a.finish, b.start)]
            if not beside:
                continue
            cuts = sorted({a.start, a.finish, *(t for b in beside for t in (b.start, b.finish)
                                                if a.start < t < a.finish)})
            factors = set()
            for left, right in itertools.pairwise(cuts):
                if right - left <= _slack(0.0, left, right):
                    continue
                middle = (left + right) / 2
                others = sorted(jobs[b.job].job_type for b in beside
                                if b.start <= middle < b.finish)
                factors.add(colocation.factor(jobs[a.job].job_type, gpu_type[id(a)], others))
            if len(factors) > 1:
                del found[id(a)]
            elif factors:
                found[id(a)] = factors.pop()
    return found


def _gpu_shares(gpu: str, intervals: list[tuple[float, float, str]],
                jobs: Mapping[str, Job]) -> list[Violation]:
    """The shares held of ``gpu`` (a whole GPU is a share of 1) never add up to more than
    1 at any moment."""
    found: list[Violation] = []
    active: list[tuple[float, float, str]] = []
    for start, finish, job in sorted(intervals):
        active = [r for r in active if r[1] > start + _slack(0.0, r[1], start)]
        active.append((start, finish, job))
        held = sum(jobs[j].share for _, _, j in active)
        if held > 1 + 1e-9:
            found.append(Violation(job, "gpu-share", (
                f"GPU {gpu} holds shares adding up to {held:.3g} from {start:g} s "
                f"({', '.join(sorted(j for _, _, j in active))})")))
    return found


def _node_resources(instance: Instance, schedule: Schedule) -> list[Violation]:
    """No node gives its running jobs more CPUs or memory than it has, at any moment."""
    jobs = instance.job_by_id
    gpus = instance.cluster.gpu_by_id
    nodes = instance.cluster.node_by_name
    # node -> (start, finish, job, cores, GB) of every assignment with a demand there
    demand: dict[str, list[tuple[float, float, str, float, float]]] = defaultdict(list)
    for a in schedule:
        job = jobs.get(a.job)
        if job is None or not job.needs_node_resources or any(g not in gpus for g in a.gpus):
            continue
        count: dict[str, int] = defaultdict(int)
        for g in a.gpus:
            count[gpus[g].node] += 1
        for name, here in count.items():
            demand[name].append((a.start, a.finish, a.job, *job.node_demand(here)))
    found: list[Violation] = []
    for name, intervals in demand.items():
        server = nodes[name]
        active: list[tuple[float, float, str, float, float]] = []
        for start, finish, job_id, cpus, memory in sorted(intervals):
            active = [r for r in active if r[1] > start + _slack(0.0, r[1], start)]
            active.append((start, finish, job_id, cpus, memory))
            used = (sum(r[3] for r in active), sum(r[4] for r in active))
            for held, capacity, what in ((used[0], server.cpus, "CPUs"),
                                         (used[1], server.memory_gb, "memory (GB)")):
                if capacity is not None and held > capacity * (1 + 1e-9) + 1e-9:
                    found.append(Violation(job_id, "node-resources", (
                        f"node {name} gives {held:.6g} {what} of {capacity:g} from "
                        f"{start:g} s")))
    return found
