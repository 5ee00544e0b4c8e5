"""Preemption for weighted shares at a job's arrival (a tenant table's
``preempt_for_shares``; docs/fairness.md), kept around any rolling policy by the tenant
keeper (:mod:`hetsched.policies.quotas`).

A policy that decides in rounds starts a job that arrives mid-round at the next round at
the earliest, whatever its tenant is owed: a short job of a small tenant then spends a
large part of its life waiting, and its tenant never gets its weighted share. With
``preempt_for_shares``, at the decision a job arrives at (it waits, and the policy did not
start it), if its tenant holds less than its **entitlement** by at least the job's gang
(weighted max-min of the cluster's GPUs among the tenants with work, none above what its
jobs ask for: :func:`hetsched.core.shares.water_fill`, the measure of
``benchmarks/fairness.py --philly-shares``), the job starts now: on free GPUs, else on
GPUs of running jobs of tenants that hold more than their entitlements, which are
preempted (and pay the restart penalty). As Kueue's fair-sharing preemption
(``LessThanOrEqualToFinalShare``), a job is only preempted if its tenant's weighted share
after (GPUs held over weight) stays at least the arriving job's tenant's after: a
preemption never makes the shares less fair. Victims are whole jobs, the tenant furthest
above its entitlement first, then the latest started, as few as cover the gang
(:meth:`~hetsched.allocation.free_gpus.FreeGpuIndex.best_fit`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.fairness import tenant_of
from hetsched.core.records import Job
from hetsched.core.shares import water_fill
from hetsched.core.tenants import TenantTable
from hetsched.policies.rolling import ClusterState, Decision, RunningJob

#: Shares compared within this (GPUs over weight), so rounding cannot decide.
SHARE_TOLERANCE = 1e-9


def reclaim_shares(state: ClusterState, decision: Decision, tenants: TenantTable,
                   arrived: Iterable[str], types_of: Callable[[Job], Sequence[str]]
                   ) -> tuple[Decision, list[str]]:
    """``decision`` with the jobs of ``arrived`` (ids of jobs that arrived since the last
    decision) started where their tenants are owed their shares (module notes), and the
    running jobs preempted for them; ``types_of(job)``: the GPU types it can run on, best
    first."""
    started = {start.job for start in decision.start}
    new = set(arrived)
    candidates = sorted((job for job in state.pending if job.id in new
                         and job.id not in started), key=lambda j: (j.arrival, j.id))
    if not candidates:
        return decision, []
    weights = tenants.weights()
    preempted = set(decision.preempt)
    jobs = {**{run.job.id: run.job for run in state.running},
            **{job.id: job for job in state.pending}}
    running = {run.job.id: run for run in state.running if run.job.id not in preempted}
    held: Counter[str] = Counter()
    for run in running.values():
        held[tenant_of(run.job)] += len(run.gpus)
    for start in decision.start:
        held[tenant_of(jobs[start.job])] += len(start.gpus)
    demand: Counter[str] = Counter()
    for job in jobs.values():
        demand[tenant_of(job)] += job.num_gpus
    capacity = float(len(state.cluster.gpus))
    entitled = water_fill({t: min(capacity, float(d)) for t, d in demand.items()}, weights,
                          capacity)
    starts = list(decision.start)
    victims: list[str] = []
    moving = {start.job for start in starts}
    for job in candidates:
        tenant = tenant_of(job)
        if held[tenant] + job.num_gpus > entitled.get(tenant, 0.0) + SHARE_TOLERANCE:
            continue
        after = (held[tenant] + job.num_gpus) / weights.get(tenant, 1.0)
        eligible = [run for run in running.values() if run.job.id not in moving
                    and _may_preempt(run, tenant, after, held, entitled, weights)]
        pool = _pool(state, decision, starts, victims, eligible, held, entitled, weights,
                     jobs)
        for gpu_type in types_of(job):
            gpus = pool.best_fit(job, gpu_type, job.num_gpus, state.throughput) or \
                pool.best_fit(job, gpu_type, job.num_gpus, state.throughput,
                              with_victims=True)
            if gpus is None:
                continue
            taken = set(gpus)
            for run in eligible:
                if taken.intersection(run.gpus) and run.job.id in running:
                    victims.append(run.job.id)
                    held[tenant_of(run.job)] -= len(run.gpus)
                    del running[run.job.id]
            starts.append(Start(job.id, gpu_type, gpus))
            moving.add(job.id)
            held[tenant] += job.num_gpus
            break
    if len(starts) == len(decision.start):
        return decision, []
    return Decision(tuple(starts), (*decision.preempt, *victims), decision.fallback,
                    decision.note), victims


def _may_preempt(run: RunningJob, tenant: str, after: float, held: Counter[str],
                 entitled: dict[str, float], weights: dict[str, float]) -> bool:
    """Whether ``run`` may be preempted for a job of ``tenant`` whose weighted share
    would be ``after``: another tenant's, above its entitlement, and left with a weighted
    share at least ``after``."""
    owner = tenant_of(run.job)
    if owner == tenant or held[owner] <= entitled.get(owner, 0.0) + SHARE_TOLERANCE:
        return False
    return (held[owner] - len(run.gpus)) / weights.get(owner, 1.0) >= after - SHARE_TOLERANCE


def _pool(state: ClusterState, decision: Decision, starts: Sequence[Start],
          victims: Sequence[str], eligible: Sequence[RunningJob], held: Counter[str],
          entitled: dict[str, float], weights: dict[str, float],
          jobs: dict[str, Job]) -> FreeGpuIndex:
    """The free GPUs after ``decision``'s preemptions, ``starts`` and ``victims``, with
    the GPUs of ``eligible`` as victims: the tenant furthest above its entitlement (over
    its weight) taken first, then the latest started (``jobs``: every job, by id)."""
    order = sorted(eligible, key=lambda r: (
        (held[tenant_of(r.job)] - entitled.get(tenant_of(r.job), 0.0))
        / weights.get(tenant_of(r.job), 1.0), r.started, r.job.id))
    pool = state.pool({gpu: rank for rank, run in enumerate(order) for gpu in run.gpus})
    gone = {*decision.preempt, *victims}
    for run in state.running:
        if run.job.id in gone:
            pool.release(run.gpus, run.job)
    for start in starts:
        pool.take(start.gpus, jobs[start.job])
    return pool
