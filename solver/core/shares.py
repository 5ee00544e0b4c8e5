"""Weighted shares of a cluster between tenants: what each tenant received against what
weighted max-min fairness entitles it to, over time.

At every instant, each tenant with work (a job arrived and not finished) has a demand,
the GPUs its jobs ask for (waiting or running, capped at the cluster's GPUs). Its
**entitlement** is its weighted max-min share of the cluster's GPUs (water-filling: the
GPUs are split in proportion to the weights of the tenants with work; a tenant whose
demand is below its part gets its demand, and what it leaves is split again among the
others). What it **received** is the GPUs its jobs held. Both are integrated over the
instants when at least ``min_tenants`` tenants have work (one tenant alone is entitled
to everything it asks for: there is nothing to share), in GPU-seconds, every GPU type
alike. A scheduler that keeps weights gives each tenant received / entitled close to 1.

**Normalised** (``speeds``), the GPUs are valued as Gavel's heterogeneity-aware
fairness values them: a job holding ``s`` GPUs of type k counts ``s T_k / E``, with
``T_k`` its speed there and ``E = sum_k T_k C_k / sum_k C_k`` its speed with an equal
share of every GPU of the cluster (Gavel's X^equal); it asks for ``s max_k T_k / E`` (all
of its time on its best type). A V100 is then worth more than a K80 to a job that runs
faster on it, and a cluster of jobs alike holds as many normalised GPUs as it has GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hetsched.core.fairness import tenant_of
from hetsched.core.records import Job
from hetsched.core.result import Assignment


@dataclass(frozen=True)
class TenantShare:
    """One tenant's GPU-seconds received and entitled to over the measured instants."""

    tenant: str
    weight: float
    received_gpu_s: float
    entitled_gpu_s: float

    @property
    def ratio(self) -> float:
        """Received over entitled (nan if entitled to nothing)."""
        return self.received_gpu_s / self.entitled_gpu_s if self.entitled_gpu_s > 0 \
            else float("nan")


def water_fill(demand: Mapping[str, float], weight: Mapping[str, float],
               capacity: float) -> dict[str, float]:
    """Weighted max-min split of ``capacity`` among the tenants of ``demand`` (> 0): in
    proportion to ``weight`` (1 for a tenant it does not name), none above its demand."""
    share = dict.fromkeys(demand, 0.0)
    open_ = {t for t, d in demand.items() if d > 0}
    left = capacity
    while open_ and left > 1e-12:
        total = sum(weight.get(t, 1.0) for t in open_)
        part = {t: left * weight.get(t, 1.0) / total for t in open_}
        full = {t for t in open_ if demand[t] - share[t] <= part[t]}
        if not full:
            for t in open_:
                share[t] += part[t]
            break
        for t in full:
            left -= demand[t] - share[t]
            share[t] = demand[t]
        open_ -= full
    return share


def weighted_shares(jobs: Iterable[Job], finish: Mapping[str, float],
                    segments: Iterable[Assignment], weight: Mapping[str, float],
                    capacity: int, *, min_tenants: int = 2,
                    speeds: Mapping[str, Mapping[str, float]] | None = None,
                    gpus_of: Mapping[str, int] | None = None) -> list[TenantShare]:
    """Each tenant's GPU-seconds received and entitled to (module notes), over the
    instants when at least ``min_tenants`` tenants have work; a job without a finish is
    active to the last event. Tenants in order of name. With ``speeds`` (each job's
    steps/s on each GPU type at its gang, 0 where it cannot run) and ``gpus_of`` (each
    type's GPUs), normalised GPU-seconds."""
    if min_tenants < 1:
        raise ValueError("min_tenants must be >= 1")
    events: list[tuple[float, str, float, float]] = []  # time, tenant, demand, held
    tenant_of_job: dict[str, str] = {}
    ends = [*finish.values()]
    value: dict[str, dict[str, float]] = {}
    if speeds is not None:
        counts = gpus_of or {}
        total_gpus = sum(counts.values())
        if total_gpus <= 0:
            raise ValueError("normalised shares need each GPU type's GPUs (gpus_of)")
        for job_id, by_type in speeds.items():
            equal = sum(v * counts.get(t, 0) for t, v in by_type.items()) / total_gpus
            value[job_id] = {t: v / equal if equal > 0 else 0.0 for t, v in by_type.items()}
    for job in jobs:
        tenant = tenant_of_job[job.id] = tenant_of(job)
        asks = float(job.num_gpus) * (max(value[job.id].values(), default=0.0)
                                      if job.id in value else 1.0)
        events.append((job.arrival, tenant, asks, 0.0))
        if job.id in finish:
            events.append((finish[job.id], tenant, -asks, 0.0))
    for segment in segments:
        tenant = tenant_of_job[segment.job]
        held = float(len(segment.gpus)) * (value[segment.job].get(segment.gpu_type, 0.0)
                                           if segment.job in value else 1.0)
        events += [(segment.start, tenant, 0.0, held), (segment.finish, tenant, 0.0, -held)]
        ends.append(segment.finish)
    events.sort(key=lambda e: e[0])
    tenants = sorted(set(tenant_of_job.values()))
    demand: dict[str, float] = defaultdict(float)
    held_now: dict[str, float] = defaultdict(float)
    received = dict.fromkeys(tenants, 0.0)
    entitled = dict.fromkeys(tenants, 0.0)
    index, count = 0, len(events)
    while index < count:
        now = events[index][0]
        while index < count and events[index][0] == now:
            _, tenant, d_demand, d_held = events[index]
            demand[tenant] += d_demand
            held_now[tenant] += d_held
            index += 1
        if index == count:
            break
        span = events[index][0] - now
        working = {t: min(float(capacity), d) for t, d in demand.items() if d > 1e-9}
        if span <= 0 or len(working) < min_tenants:
            continue
        for tenant, part in water_fill(working, weight, float(capacity)).items():
            entitled[tenant] += part * span
        for tenant, held in held_now.items():
            if tenant in working:
                received[tenant] += held * span
    return [TenantShare(t, weight.get(t, 1.0), received[t], entitled[t]) for t in tenants]
