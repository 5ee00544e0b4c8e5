"""Fairness figures of a finished schedule, defined once for replays, real runs and
comparisons with other simulators: each job's finish-time fairness (rho) and Jain's index
over tenants.

**Finish-time fairness** (Themis, Mahajan et al., NSDI 2020): a job's rho is
its completion time when sharing the cluster over its completion time with 1/N of the
cluster to itself, N the number of jobs contending for it,

    rho_j = JCT_j / T_iso_j,   T_iso_j = W_j / s_iso_j(N_j)

with W_j the job's steps and N_j the average number of active jobs (arrived, not finished,
the job itself included) over the job's life from arrival to finish, as Themis averages
the contention ("N_avg"). rho <= 1: the job did at least as well as with its fair share.

"1/N of the cluster" on a heterogeneous cluster with gangs is Gavel's isolated allocation
(``IsolatedPolicy`` in Gavel's ``finish_time_fairness`` policies): every GPU type's
``c_t`` GPUs are split equally among N jobs, so a gang of ``k`` GPUs runs on type t a
time share ``x_t = c_t / (N k)``, all shares scaled down together when they add up to
more than 1 (a gang runs in one place at a time); its speed is
``s_iso = sum_t x_t v_t``, ``v_t`` its steps/s on type t at ``k`` GPUs (on the best
placement the cluster has; 0 on a type it may not use or cannot run on, whose share is
then lost, as in Gavel). Gavel integrates the same share round by round in its policy; a
schedule's figure uses N_j's time average, which only needs each job's arrival and finish,
so the same definition applies to a schedule from any simulator or a real cluster.

**Jain's index** over tenants (Jain, Chiu and Hawe, 1984) of ``x_i``, tenant i's
GPU-seconds divided by its weight: ``(sum x)^2 / (n sum x^2)``, 1 when every tenant got
GPU time in proportion to its weight, 1/n when one tenant got all of it."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hetsched.core.cluster import Cluster
from hetsched.core.records import Job, configurations
from hetsched.core.result import Assignment
from hetsched.core.tenants import TenantTable
from hetsched.core.throughput import ThroughputModel

#: The tenant of a job that names none.
DEFAULT_TENANT = "default"


def type_speeds(job: Job, cluster: Cluster, model: ThroughputModel) -> dict[str, float]:
    """``{gpu_type: steps/s}`` of ``job`` at its requested gang size, on the best placement
    the cluster has on that type (types where it cannot run are left out)."""
    speeds: dict[str, float] = {}
    for config in configurations(cluster, model, job):
        if config.num_gpus == job.num_gpus:
            speeds[config.gpu_type] = max(speeds.get(config.gpu_type, 0.0), config.throughput)
    return speeds


def isolated_shares(capacity: npt.ArrayLike, gangs: npt.ArrayLike,
                    contention: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Gavel's isolated allocation (see the module): ``shares[j, t]``, the time share of
    type t that job j's gang of ``gangs[j]`` GPUs gets with 1/``contention[j]`` (or one N
    for all) of a cluster of ``capacity[t]`` GPUs per type: ``c_t / (N k)``, each row
    scaled down to a sum of 1 when it is more."""
    capacity = np.asarray(capacity, dtype=np.float64)
    gangs = np.asarray(gangs, dtype=np.float64).reshape(-1, 1)
    contention = np.asarray(contention, dtype=np.float64).reshape(-1, 1)
    if np.any(~(contention > 0)):
        raise ValueError(f"contention must be > 0 jobs, got {contention.ravel().tolist()}")
    shares = capacity.reshape(1, -1) / (contention * gangs)
    total = shares.sum(axis=1, keepdims=True)
    return np.asarray(shares / np.maximum(total, 1.0), dtype=np.float64)


def isolated_speed(job: Job, cluster: Cluster, speeds: Mapping[str, float],
                   contention: float) -> float:
    """``job``'s steps/s with 1/``contention`` of ``cluster`` to itself (Gavel's isolated
    allocation, :func:`isolated_shares`): ``speeds`` as :func:`type_speeds` gives them."""
    types = cluster.type_names
    shares = isolated_shares([cluster.num_gpus(t) for t in types], [job.num_gpus],
                             contention)[0]
    return float(sum(share * speeds.get(t, 0.0) for t, share in zip(types, shares,
                                                                    strict=True)))


def average_contention(spans: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """For each job of ``spans`` (job id -> (arrival, finish), finish ``inf`` for a job that
    did not finish, which stays active), the time average of the number of active jobs
    over its own span (itself included); only finished jobs with a span > 0 get one."""
    changes: dict[float, int] = {}
    for arrival, finish in spans.values():
        changes[arrival] = changes.get(arrival, 0) + 1
        if math.isfinite(finish):
            changes[finish] = changes.get(finish, 0) - 1
    times = sorted(changes)
    # integral[i]: the integral of the active count from times[0] to times[i].
    integral = [0.0] * len(times)
    active = 0
    for i, when in enumerate(times):
        if i:
            integral[i] = integral[i - 1] + active * (when - times[i - 1])
        active += changes[when]

    def at(when: float) -> float:
        return integral[bisect.bisect_left(times, when)]

    return {job: (at(finish) - at(arrival)) / (finish - arrival)
            for job, (arrival, finish) in spans.items()
            if math.isfinite(finish) and finish > arrival}


def finish_time_fairness(jobs: Iterable[Job], finish: Mapping[str, float], cluster: Cluster,
                         model: ThroughputModel) -> dict[str, float]:
    """Each finished job's rho (see the module): job id -> rho, for the jobs of ``finish``
    (job id -> finish time, s) that can run somewhere on ``cluster``. Jobs that did not
    finish count as active to the end."""
    listed = list(jobs)
    spans = {job.id: (job.arrival, finish.get(job.id, math.inf)) for job in listed}
    contention = average_contention(spans)
    shapes: dict[tuple[object, ...], dict[str, float]] = {}
    rho: dict[str, float] = {}
    for job in listed:
        if job.id not in contention:
            continue
        key = (job.job_type, job.num_gpus, job.allowed_gpu_types, job.allowed_nodes)
        speeds = shapes.get(key)
        if speeds is None:
            speeds = shapes[key] = type_speeds(job, cluster, model)
        speed = isolated_speed(job, cluster, speeds, contention[job.id])
        if speed > 0:
            rho[job.id] = (finish[job.id] - job.arrival) / (job.work / speed)
    return rho


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index of ``values`` (>= 0): ``(sum x)^2 / (n sum x^2)``, from 1/n to
    1; NaN for no values, 1 when all are 0 (nobody got more than anybody)."""
    if not values:
        return math.nan
    if any(v < 0 or not math.isfinite(v) for v in values):
        raise ValueError(f"Jain's index needs finite values >= 0, got {list(values)}")
    squares = sum(v * v for v in values)
    if squares == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * squares)


def tenant_of(job: Job) -> str:
    """The tenant ``job`` runs for: its ``tenant``, or :data:`DEFAULT_TENANT`."""
    return job.tenant or DEFAULT_TENANT


def quota_violations(jobs: Iterable[Job], segments: Iterable[Assignment],
                     finish: Mapping[str, float], runs_on: Mapping[str, Iterable[str]],
                     tenants: TenantTable) -> float:
    """GPU-seconds tenants held beyond their nominal quotas while a tenant within its own
    waited for that type (docs/fairness.md): at every moment and for every GPU type t,
    the least of the GPUs of t held beyond quotas (``sum_A max(0, held_A - nominal_A)``)
    and the GPUs of t owed to waiting tenants (``sum_B min(room_B, GPUs asked for by B's
    waiting jobs that run on t and whose gang fits in room_B)``, ``room_B = nominal_B -
    held_B`` for the tenants B below their quota), integrated over time. A job waits
    from its arrival to its finish while it holds no GPUs (to the end of the schedule,
    for a job that never finishes); ``segments`` are what ran (start, finish, GPUs),
    ``runs_on`` the GPU types each job can run on."""
    listed = {job.id: job for job in jobs}
    events: list[tuple[float, int, str, str, int]] = []  # time, kind, job, type, GPUs
    for job in listed.values():
        events.append((job.arrival, 0, job.id, "", 0))
        if job.id in finish:
            events.append((finish[job.id], 3, job.id, "", 0))
    for segment in segments:
        if segment.job in listed:
            events.append((segment.start, 1, segment.job, segment.gpu_type, len(segment.gpus)))
            events.append((segment.finish, 2, segment.job, segment.gpu_type,
                           len(segment.gpus)))
    events.sort()
    held: dict[tuple[str, str], int] = {}  # (tenant, type) -> GPUs held
    # (tenant, type) -> the gangs of its waiting jobs that run there, by size
    wanted: dict[tuple[str, str], Counter[int]] = {}
    running: dict[str, int] = {}  # job -> segments it holds GPUs in
    waiting: set[str] = set()
    arrived: set[str] = set()
    done: set[str] = set()
    types = sorted({t for kinds in runs_on.values() for t in kinds})
    total = 0.0

    def wait(job_id: str, sign: int) -> None:
        job = listed[job_id]
        for gpu_type in runs_on.get(job_id, ()):
            wanted.setdefault((tenant_of(job), gpu_type), Counter())[job.num_gpus] += sign
        (waiting.add if sign > 0 else waiting.discard)(job_id)

    def rate() -> float:
        names = {tenant for tenant, _ in (*held, *wanted)}
        moment = 0.0
        for gpu_type in types:
            over = owed = 0
            for name in names:
                room = tenants.get(name).quota(gpu_type).nominal - held.get((name, gpu_type), 0)
                over += max(0, -room)
                gangs = wanted.get((name, gpu_type))
                if room > 0 and gangs:
                    owed += min(room, sum(g * n for g, n in gangs.items() if g <= room))
            moment += min(over, owed)
        return moment

    for index, (when, kind, job_id, gpu_type, gpus) in enumerate(events):
        tenant = tenant_of(listed[job_id])
        if kind == 1:
            held[(tenant, gpu_type)] = held.get((tenant, gpu_type), 0) + gpus
            running[job_id] = running.get(job_id, 0) + 1
        elif kind == 2:
            held[(tenant, gpu_type)] -= gpus
            running[job_id] -= 1
        elif kind == 0:
            arrived.add(job_id)
        else:
            done.add(job_id)
        should = job_id in arrived and job_id not in done and not running.get(job_id, 0)
        if should != (job_id in waiting):
            wait(job_id, 1 if should else -1)
        if index + 1 < len(events) and events[index + 1][0] > when:
            total += rate() * (events[index + 1][0] - when)
    return total


@dataclass(frozen=True)
class FairnessFigures:
    """A schedule's fairness: rho over the finished jobs (its largest, mean and the share
    of jobs above 1; NaN when none finished), Jain's index of the tenants' GPU-seconds
    over their weights, and the GPU-seconds held beyond quotas while a tenant within its
    own waited (:func:`quota_violations`)."""

    max_rho: float
    mean_rho: float
    rho_above_1: float
    tenant_jain_index: float
    quota_violation_gpu_s: float


def fairness_figures(jobs: Iterable[Job], finish: Mapping[str, float],
                     segments: Sequence[Assignment], cluster: Cluster, model: ThroughputModel,
                     tenants: TenantTable | None = None,
                     rho: Mapping[str, float] | None = None) -> FairnessFigures:
    """The :class:`FairnessFigures` of a schedule: ``finish`` (job id -> s) of the finished
    jobs, ``segments`` what ran (finished or not); tenants' weights and quotas from
    ``tenants`` (none: weight 1, no quota). Every tenant with a job counts in Jain's
    index, with the GPU time it got (0 if none). ``rho``: the jobs' finish-time fairness
    if already computed (:func:`finish_time_fairness`)."""
    listed = list(jobs)
    table = tenants or TenantTable()
    ratios = list((rho if rho is not None else
                   finish_time_fairness(listed, finish, cluster, model)).values())
    used: dict[str, float] = {tenant_of(job): 0.0 for job in listed}
    owner = {job.id: tenant_of(job) for job in listed}
    for segment in segments:
        if segment.job in owner:
            used[owner[segment.job]] += len(segment.gpus) * (segment.finish - segment.start)
    jain = jain_index([seconds / table.get(tenant).weight for tenant, seconds in used.items()])
    violations = 0.0
    if table.has_quotas():
        shapes: dict[tuple[object, ...], list[str]] = {}
        runs_on: dict[str, list[str]] = {}
        for job in listed:
            key = (job.job_type, job.num_gpus, job.allowed_gpu_types, job.allowed_nodes)
            if key not in shapes:
                shapes[key] = list(type_speeds(job, cluster, model))
            runs_on[job.id] = shapes[key]
        violations = quota_violations(listed, segments, finish, runs_on, table)
    if not ratios:
        return FairnessFigures(math.nan, math.nan, math.nan, jain, violations)
    return FairnessFigures(max(ratios), sum(ratios) / len(ratios),
                           sum(1 for r in ratios if r > 1.0) / len(ratios), jain, violations)
