"""What each tenant holds of each GPU type during one decision of the quota keeper
(:mod:`hetsched.policies.quotas`), and who may take what: the rules of
docs/fairness.md, "Quotas and weights kept by every policy"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from hetsched.allocation.layout import Start
from hetsched.core.fairness import tenant_of
from hetsched.core.records import Job
from hetsched.core.tenants import TenantTable
from hetsched.policies.rolling import ClusterState, RunningJob

Key = tuple[str, str]  # (tenant, GPU type)


class QuotaLedger:
    """What each tenant holds of each GPU type during one decision, and the gangs of the
    jobs that wait, by tenant and type: who may take what (module notes)."""

    def __init__(self, tenants: TenantTable, types_of: Callable[[Job], list[str]],
                 running: Iterable[RunningJob], waiting: Iterable[Job]) -> None:
        self.tenants = tenants
        self.types_of = types_of
        self.held: Counter[Key] = Counter()
        for run in running:
            self.held[(tenant_of(run.job), run.gpu_type)] += len(run.gpus)
        self.gangs: dict[Key, Counter[int]] = {}
        self.wait_for(waiting)

    def wait_for(self, waiting: Iterable[Job]) -> None:
        """The jobs that wait are ``waiting`` (their gangs, by tenant and type)."""
        self.gangs = {}
        self.waiting: set[str] = set()
        for job in waiting:
            self.waiting.add(job.id)
            for gpu_type in self.types_of(job):
                self.gangs.setdefault((tenant_of(job), gpu_type), Counter())[job.num_gpus] += 1

    def nominal(self, key: Key) -> int:
        """The tenant's nominal quota of the type."""
        return self.tenants.get(key[0]).quota(key[1]).nominal

    def borrowed(self, gpu_type: str) -> bool:
        """Whether some tenant holds ``gpu_type`` beyond its nominal quota."""
        return any(count > self.nominal(key) for key, count in self.held.items()
                   if key[1] == gpu_type)

    def owed(self, gpu_type: str, besides: str) -> bool:
        """Whether a tenant other than ``besides`` waits with a job of ``gpu_type`` whose
        gang fits in what it holds below its nominal quota."""
        return any(key[1] == gpu_type and key[0] != besides and
                   any(n > 0 and g <= self.nominal(key) - self.held[key]
                       for g, n in counter.items()) for key, counter in self.gangs.items())

    def may_take(self, job: Job, gpu_type: str) -> bool:
        """Whether ``job`` may start on ``gpu_type`` now: within its tenant's nominal plus
        borrowing limit, and not borrowing while another tenant is owed the type or while
        the job fits in its own tenant's quota of a type others borrow."""
        tenant = tenant_of(job)
        key = (tenant, gpu_type)
        after = self.held[key] + job.num_gpus
        quota = self.tenants.get(tenant).quota(gpu_type)
        if after > quota.most:
            return False
        if after <= quota.nominal:
            return True
        return not self.owed(gpu_type, tenant) and not any(
            self.held[(tenant, t)] + job.num_gpus <= self.nominal((tenant, t))
            and self.borrowed(t) for t in self.types_of(job))

    def take(self, job: Job, gpu_type: str, gpus: int, sign: int = 1) -> None:
        """``job`` starts (or, ``sign`` -1, stops) on ``gpus`` GPUs of ``gpu_type``; a job
        that waited waits no more, on any type."""
        self.held[(tenant_of(job), gpu_type)] += sign * gpus
        if sign > 0 and job.id in self.waiting:
            self.waiting.discard(job.id)
            for kind in self.types_of(job):
                self.gangs[(tenant_of(job), kind)][job.num_gpus] -= 1


def protected_from(gpus: Iterable[str], tenant: str, protected: dict[str, str],
                   jobs: dict[str, Job], kept: Sequence[Start]) -> bool:
    """Whether a start of ``tenant`` on ``gpus`` would take GPUs of another tenant's
    job that the policy preempts while it runs within its quota and that does not
    start elsewhere (``kept``): a job moved to other GPUs leaves its own free."""
    owners = {protected[g] for g in gpus if g in protected}
    if not owners:
        return False
    moved = {s.job for s in kept}
    return any(tenant_of(jobs[owner]) != tenant and owner not in moved
               for owner in owners)


def busy_gpus(state: ClusterState, preempt: Iterable[str], starts: Iterable[Start]
              ) -> Counter[str]:
    """GPUs of each type busy once ``preempt`` stop and ``starts`` start."""
    stop = set(preempt)
    busy = Counter(dict.fromkeys(state.cluster.type_names, 0))
    for run in state.running:
        if run.job.id not in stop:
            busy[run.gpu_type] += len(run.gpus)
    for start in starts:
        busy[start.gpu_type] += len(start.gpus)
    return busy
