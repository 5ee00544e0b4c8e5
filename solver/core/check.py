"""The independent schedule checker.

Written from the problem statement alone, without reference to any formulation
or policy: it reads the instance's cluster, jobs and throughput and the
schedule's assignments, and lists everything that is wrong.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from hetsched.core.cluster import Gpu
from hetsched.core.records import Instance, Job
from hetsched.core.result import Assignment, Schedule
from hetsched.core.sharing import PACKED_SHARE, CoLocationModel
from hetsched.core.throughput import Placement, ThroughputModel, throughput_after

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
    ``finish = start + latency + work / throughput`` (the schedule's start latency,
    0 but in replays that charge one); no GPU is used by two jobs at once, except
    by jobs that ask for shares of it (``Job.gpu_share``) or run packed on it
    (``Assignment.packed``: a whole job of one GPU holding half of it), whose shares on a
    GPU never add up to more than 1 at any moment, and which run at their throughput times the
    speed factor of their co-runners (``instance.colocation``, hetsched.core.sharing; that
    factor must stay the same from an assignment's start to its finish); no node
    gives its jobs more CPUs or memory than it has (``Node.cpus``, ``Node.memory_gb``;
    ``Job.node_demand``).

    A job run in segments (assignments with ``work``, :class:`~hetsched.core.result.Assignment`)
    is checked segment by segment: each one as above, with its own ``work`` and, for every
    segment but the first, the schedule's restart penalty before any progress, after the
    start latency of every segment (``finish = start + latency + penalty + work /
    throughput``; a segment ended within them did no work), unless it is ``continued``
    (it goes on from the segment before, on the same GPUs, at another speed: the penalty
    left of the restart it continues); its segments do not overlap in time; their work
    adds up to the job's.
    """
    violations: list[Violation] = []
    jobs = instance.job_by_id
    gpus = instance.cluster.gpu_by_id
    placed: list[Assignment] = []  # the assignments whose GPUs are checked for overlaps
    whole: set[str] = set()  # jobs with an assignment without ``work`` (run whole)
    segments: dict[str, list[tuple[Assignment, float]]] = defaultdict(list)
    factors = _sharing_factors(schedule, jobs, instance.colocation or CoLocationModel())
    # A run segment of a preempted job often has the GPUs of the one before: whether the
    # job may run on them, and its throughput there, are worked out once per (job, GPUs).
    verdicts: dict[tuple[str, tuple[str, ...], str], float | tuple[str, str]] = {}
    gpu_sets: dict[tuple[tuple[str, ...], str], frozenset[str] | tuple[str, str]] = {}
    speeds: dict[tuple[str, str, int, Placement], float] = {}

    for a in schedule:
        if a.job not in jobs:
            violations.append(Violation(a.job, "unknown-job", "the instance has no such job"))
            continue
        if a.job in whole or (a.work is None and a.job in segments):
            violations.append(Violation(a.job, "duplicate",
                                        "the job is scheduled more than once"))
            continue
        job = jobs[a.job]
        if a.work is None:
            whole.add(a.job)
        key = (a.job, a.gpus, a.gpu_type)
        verdict = verdicts.get(key)
        if verdict is None:
            verdict = verdicts[key] = _verdict(job, a, gpus, gpu_sets, speeds,
                                               instance.throughput)
        if isinstance(verdict, tuple):  # (kind, message): the job cannot run there
            violations.append(Violation(a.job, *verdict))
            continue
        # (a slack is at least ABS_TOL_S: the comparisons it cannot change skip it)
        if a.start < job.arrival and a.start < job.arrival - _slack(0.0, a.start, job.arrival):
            violations.append(Violation(a.job, "before-arrival", f"starts at {a.start:g} s, "
                                        f"arrives at {job.arrival:g} s"))
        if a.start < instance.now and \
                a.start < instance.now - _slack(0.0, a.start, instance.now):
            violations.append(Violation(a.job, "before-now", f"starts at {a.start:g} s, "
                                        f"before the current time {instance.now:g} s"))

        if a.packed and (job.gpu_share is not None or len(a.gpus) != 1):
            violations.append(Violation(a.job, "packed", (
                f"packed on {len(a.gpus)} GPUs with share {job.gpu_share}: only a whole "
                "job of one GPU is packed")))
            continue
        factor = factors.get(id(a), 1.0)
        if factor is None:
            violations.append(Violation(a.job, "co-runners", "the speed its GPU's co-runners "
                                        "allow changes between its start and its finish (a "
                                        "change of speed ends a run segment)"))
            continue
        speed = verdict * factor
        if a.work is None:
            duration = schedule.start_latency_s + job.work / speed
            expected = a.start + duration
            miss = abs(a.finish - expected)
            if miss > ABS_TOL_S and miss > _slack(duration, a.finish, expected):
                terms, values = ("start + latency + ", f"{a.start:g} + "
                                 f"{schedule.start_latency_s:g} + ") \
                    if schedule.start_latency_s else ("start + ", f"{a.start:g} + ")
                violations.append(Violation(a.job, "finish", (
                    f"finish {a.finish:.6f} s, but {terms}work / throughput = {values}"
                    f"{job.work:g} / {speed:g} = {expected:.6f} s ({_placement(a, gpus)})")))
        else:
            segments[a.job].append((a, speed))
        placed.append(a)

    violations += _node_resources(instance, schedule)
    model = instance.throughput
    for job_id, runs in segments.items():
        speed_at = None
        if getattr(model, "throughput_after", None) is not None:  # speeds with progress
            job_type = jobs[job_id].job_type

            def speed_at(a: Assignment, done: float, job_type: str = job_type) -> float:
                return throughput_after(model, job_type, a.gpu_type, len(a.gpus),
                                        _placement(a, gpus), done) * (factors.get(id(a))
                                                                     or 1.0)
        violations += _check_segments(jobs[job_id].work, job_id, runs,
                                      schedule.restart_penalty_s, complete,
                                      schedule.start_latency_s, speed_at)

    if complete:
        for job_id in jobs:
            if job_id not in whole and job_id not in segments:
                violations.append(Violation(job_id, "unscheduled", "the job has no assignment"))

    violations += _gpu_overlaps(placed, jobs)
    return violations


def _gpu_overlaps(placed: list[Assignment], jobs: Mapping[str, Job]) -> list[Violation]:
    """No GPU is used by two jobs at once; the GPUs of jobs that ask for shares hold
    shares adding up to at most 1 (:func:`_gpu_shares`).

    The sweep below, in start order per GPU, remembering the interval that reaches
    furthest so far, is exact. On the millions of intervals of a long replay it is run
    only on the GPUs :func:`_suspects` finds (and those of jobs that share GPUs)."""
    sharing = {job_id for job_id, job in jobs.items() if job.gpu_share is not None} | \
        {a.job for a in placed if a.packed}
    exact = _suspects(placed)
    if sharing:
        exact |= {g for a in placed if a.job in sharing for g in a.gpus}
    usage: dict[str, list[tuple[float, float, str, float]]] = {}
    for a in placed if exact else ():
        for g in a.gpus:
            if g in exact:
                usage.setdefault(g, []).append((a.start, a.finish, a.job,
                                                PACKED_SHARE if a.packed else jobs[a.job].share))
    found: list[Violation] = []
    for gid, intervals in usage.items():
        if sharing and any(j in sharing for _, _, j, _ in intervals):
            found += _gpu_shares(gid, intervals)
            continue
        intervals.sort()
        s1, f1, j1, _ = intervals[0]
        for s2, f2, j2, _ in intervals[1:]:
            if s2 < f1 and s2 < f1 - _slack(min(f1 - s1, f2 - s2), s2, f1):
                found.append(Violation(
                    j2, "overlap",
                    f"GPU {gid} is used by {j1} during [{s1:g}, {f1:g}) and by {j2} from {s2:g}",
                ))
            if f2 > f1:
                s1, f1, j1 = s2, f2, j2
    return found


def _suspects(placed: list[Assignment]) -> set[str]:
    """The GPUs where an interval starts more than ``ABS_TOL_S`` (the least slack) before
    the furthest reach of the intervals that start before it (or at the same time and
    end sooner): found with arrays, they are the only GPUs that can hold an overlap."""
    index: dict[str, int] = {}
    rows: dict[tuple[str, ...], npt.NDArray[np.int64]] = {}  # a GPU set's GPUs' numbers
    for a in placed:
        if a.gpus not in rows:
            rows[a.gpus] = np.array([index.setdefault(g, len(index)) for g in a.gpus],
                                    dtype=np.int64)
    if not placed:
        return set()
    gpu = np.concatenate([rows[a.gpus] for a in placed])
    counts = np.fromiter((len(a.gpus) for a in placed), np.int64, len(placed))
    start = np.repeat(np.fromiter((a.start for a in placed), float, len(placed)), counts)
    finish = np.repeat(np.fromiter((a.finish for a in placed), float, len(placed)), counts)
    order = np.lexsort((finish, start, gpu))
    gpu, start, finish = gpu[order], start[order], finish[order]
    cuts = [0, *(np.flatnonzero(np.diff(gpu)) + 1).tolist(), len(gpu)]
    names = list(index)
    return {names[gpu[lo]] for lo, hi in itertools.pairwise(cuts) if hi - lo > 1 and np.any(
        start[lo + 1:hi] < np.maximum.accumulate(finish[lo:hi - 1]) - ABS_TOL_S)}


def _verdict(job: Job, a: Assignment, gpus: Mapping[str, Gpu],
             gpu_sets: dict[tuple[tuple[str, ...], str], frozenset[str] | tuple[str, str]],
             speeds: dict[tuple[str, str, int, Placement], float],
             throughput: ThroughputModel) -> float | tuple[str, str]:
    """The throughput of ``job`` on the GPUs of ``a``, or (kind, message) of why it cannot
    run there. ``gpu_sets`` and ``speeds`` keep what was worked out for a GPU set and a
    configuration."""
    nodes = gpu_sets.get((a.gpus, a.gpu_type))
    if nodes is None:
        nodes = gpu_sets[a.gpus, a.gpu_type] = _gpu_set(a, gpus)
    if isinstance(nodes, tuple):
        return nodes
    off = [] if job.allowed_nodes is None else \
        sorted(node for node in nodes if not job.may_use_node(node))
    if off:
        return "node-not-allowed", \
            f"runs on nodes {off}, the job allows only {list(job.allowed_nodes or ())}"
    if not job.may_use(a.gpu_type):
        return "gpu-type-not-allowed", \
            f"runs on {a.gpu_type}, the job allows only {list(job.allowed_gpu_types or ())}"
    if len(a.gpus) not in job.gpu_counts:
        return "gang-size", f"{len(a.gpus)} GPUs given, the job allows {list(job.gpu_counts)}"
    placement = Placement.PACKED if len(nodes) == 1 else Placement.SPREAD
    config = (job.job_type, a.gpu_type, len(a.gpus), placement)
    speed = speeds.get(config)
    if speed is None:
        speed = speeds[config] = throughput.throughput(*config)
    if speed <= 0:
        return "zero-throughput", (f"job type {job.job_type} cannot run on {len(a.gpus)} x "
                                   f"{a.gpu_type} {placement} (throughput {speed:g})")
    return speed


def _placement(a: Assignment, gpus: Mapping[str, Gpu]) -> Placement:
    """Packed on one node, else spread."""
    return Placement.PACKED if len({gpus[g].node for g in a.gpus}) == 1 else Placement.SPREAD


def _gpu_set(a: Assignment, gpus: Mapping[str, Gpu]) -> frozenset[str] | tuple[str, str]:
    """The nodes of the GPUs ``a`` runs on, or (kind, message) of what is wrong with them:
    GPUs that do not exist, a GPU listed twice, GPUs not of the stated type."""
    unknown = [g for g in a.gpus if g not in gpus]
    if unknown:
        return "unknown-gpu", f"GPUs {unknown} do not exist in the cluster"
    if len(set(a.gpus)) != len(a.gpus):
        return "repeated-gpu", f"a GPU is listed twice in {list(a.gpus)}"
    wrong_type = [g for g in a.gpus if gpus[g].gpu_type != a.gpu_type]
    if wrong_type:
        return "gpu-type", f"GPUs {wrong_type} are not of the stated type {a.gpu_type}"
    return frozenset(gpus[g].node for g in a.gpus)


def _check_segments(total: float, job: str, runs: list[tuple[Assignment, float]],
                    penalty: float, complete: bool = True, latency: float = 0.0,
                    speed_at: Callable[[Assignment, float], float] | None = None
                    ) -> list[Violation]:
    """The run segments of one job (each with its throughput), in order of start: each
    segment's length from its work (after ``latency``, and ``penalty`` but in the first),
    no overlap, the work adding up to ``total`` (at most ``total`` if not ``complete``: an
    interrupted replay lists the segments of jobs that had not finished). With
    ``speed_at``, a segment's throughput is ``speed_at(segment, work done before it)``
    (a speed that depends on the job's progress: :func:`throughput_after`)."""
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
            resume = a.start + latency + (penalty if k else 0.0)
        setup = max(0.0, resume - a.start)
        length = a.finish - a.start
        if not math.isfinite(work) or work < 0:
            found.append(Violation(job, "work", f"segment from {a.start:g} s does {work:g} "
                                   "steps, expected a finite number >= 0"))
            continue
        if speed_at is not None:
            speed = speed_at(a, done)
        busy = work / speed
        miss = abs(length - setup - busy)
        if work > 0 and miss > ABS_TOL_S and miss > _slack(busy + setup, a.finish, a.start):
            found.append(Violation(job, "finish", (
                f"segment from {a.start:g} s ends at {a.finish:.6f} s, but start + latency + "
                f"penalty + work / throughput = {a.start:g} + {setup:g} + {work:g} / {speed:g} = "
                f"{a.start + setup + busy:.6f} s")))
        elif work == 0 and length > setup + _slack(setup, a.finish, a.start):
            found.append(Violation(job, "finish", (
                f"segment from {a.start:g} s to {a.finish:g} s does no work, but its latency "
                f"and restart penalty are {setup:g} s")))
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
                     colocation: CoLocationModel) -> dict[int, float | None]:
    """For each assignment (by ``id``) of a job that asks for a GPU share (or is packed)
    and has co-runners, the speed factor they give it
    (:class:`~hetsched.core.sharing.CoLocationModel`), which must stay the same from its
    start to its finish: ``None`` if it changes in between (the caller reports it). Every
    other assignment runs at factor 1."""
    on_gpu: dict[str, list[Assignment]] = defaultdict(list)
    for a in schedule:
        job = jobs.get(a.job)
        if job is not None and (job.gpu_share is not None or a.packed):
            for g in a.gpus:
                on_gpu[g].append(a)
    found: dict[int, float | None] = {}
    for runs in on_gpu.values():
        # In start order, with the furthest finish so far: an assignment overlaps only
        # the ones after it that start before it ends and the ones before it up to the
        # last whose furthest finish is past its start (a long replay packs tens of
        # thousands of segments on a GPU: no comparison of every two).
        runs.sort(key=attrgetter("start", "finish"))
        reach = list(itertools.accumulate((r.finish for r in runs), max))
        for i, a in enumerate(runs):
            near = []
            k = i - 1
            while k >= 0 and reach[k] > a.start:
                near.append(runs[k])
                k -= 1
            k = i + 1
            while k < len(runs) and runs[k].start < a.finish:
                near.append(runs[k])
                k += 1
            beside = [b for b in near if b.job != a.job and min(a.finish, b.finish) - max(
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
                factors.add(colocation.factor(jobs[a.job].job_type, a.gpu_type, others))
            if len(factors) > 1:
                found[id(a)] = None
            elif factors and found.get(id(a), 1.0) is not None:
                found[id(a)] = factors.pop()
    return found


def _gpu_shares(gpu: str, intervals: list[tuple[float, float, str, float]]
                ) -> list[Violation]:
    """The shares held of ``gpu`` (``(start, finish, job, share)``; a whole GPU is a share
    of 1, a packed run's :data:`~hetsched.core.sharing.PACKED_SHARE`) never add up to more
    than 1 at any moment."""
    found: list[Violation] = []
    active: list[tuple[float, float, str, float]] = []
    for start, finish, job, share in sorted(intervals):
        active = [r for r in active if r[1] > start + _slack(0.0, r[1], start)]
        active.append((start, finish, job, share))
        held = sum(r[3] for r in active)
        if held > 1 + 1e-9:
            found.append(Violation(job, "gpu-share", (
                f"GPU {gpu} holds shares adding up to {held:.3g} from {start:g} s "
                f"({', '.join(sorted(r[2] for r in active))})")))
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
