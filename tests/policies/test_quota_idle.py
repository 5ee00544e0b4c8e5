"""The quota keeper (hetsched.policies.quotas) never leaves a GPU idle that a waiting job
may take: what the wrapped policy would have run, the keeper runs or gives to another job
its tenant may start; and a job that may not borrow holds up no other tenant's job."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from hetsched.core.records import Job
from hetsched.core.tenants import Quota, Tenant, TenantTable
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.policies.quotas import TenantKeeper
from hetsched.policies.rolling import ClusterState, Decision
from hetsched.registry import ENTRIES, rolling
from hetsched.replaying import replay

#: Two job types: m twice as fast on a V100 as on a K80, n nearly alike on both (so
#: heterogeneity-aware policies move jobs between the types).
TABLE = ThroughputTable({("m", "v100", 1, Placement.PACKED): 2.0,
                         ("m", "k80", 1, Placement.PACKED): 1.0,
                         ("n", "v100", 1, Placement.PACKED): 1.1,
                         ("n", "k80", 1, Placement.PACKED): 1.0})
TYPES = ("v100", "k80")
ROLLING = sorted(name for name, entry in ENTRIES.items() if entry.policy is not None)


def may_take(table: TenantTable, held: Counter[tuple[str, str]], waiting: list[Job],
             job: Job, gpu_type: str) -> bool:
    """Whether ``job`` may start on ``gpu_type`` by docs/fairness.md's rules, written out
    again here: within nominal plus borrowing limit; beyond the nominal only while no
    other tenant waits with a job that fits below its own nominal of the type, and while
    the job does not fit below its own tenant's nominal of a type others borrow."""
    tenant = job.tenant or "default"
    quota = table.get(tenant).quota(gpu_type)
    after = held[(tenant, gpu_type)] + job.num_gpus
    if after > quota.most:
        return False
    if after <= quota.nominal:
        return True

    def nominal(name: str, kind: str) -> int:
        return table.get(name).quota(kind).nominal

    owed = any((w.tenant or "default") != tenant and held[(w.tenant or "default", gpu_type)]
               + w.num_gpus <= nominal(w.tenant or "default", gpu_type) for w in waiting)
    own_back = any(held[(tenant, kind)] + job.num_gpus <= nominal(tenant, kind) and any(
        count > nominal(name, k) for (name, k), count in held.items() if k == kind)
        for kind in TYPES)
    return not owed and not own_back


class Watched(TenantKeeper):
    """The keeper, checking each of its decisions against the wrapped policy's: where the
    keeper leaves fewer GPUs of a type busy than the policy would have, no waiting job may
    take them (fewer such GPUs than its gang, or the quotas forbid it)."""

    def __init__(self, policy: str, tenants: TenantTable) -> None:
        super().__init__(rolling(policy), tenants)
        self.failures: list[str] = []

    def decide(self, state: ClusterState) -> Decision:
        inner = self.policy.decide(self.limited(state))
        kept = self.keep(state, inner)
        self._check(state, inner, kept)
        return kept

    def _check(self, state: ClusterState, inner: Decision, kept: Decision) -> None:
        def busy(decision: Decision) -> Counter[str]:
            count = Counter(r.gpu_type for r in state.running
                            if r.job.id not in decision.preempt for _ in r.gpus)
            count.update(s.gpu_type for s in decision.start for _ in s.gpus)
            return count

        short = busy(inner)
        short.subtract(busy(kept))
        if not +short:
            return
        started = {s.job for s in kept.start}
        running = {r.job.id: r for r in state.running}
        held: Counter[tuple[str, str]] = Counter()
        for run in state.running:
            if run.job.id not in kept.preempt:
                held[(run.job.tenant or "default", run.gpu_type)] += len(run.gpus)
        jobs = {j.id: j for j in state.pending} | {r.job.id: r.job for r in state.running}
        for start in kept.start:
            held[(jobs[start.job].tenant or "default", start.gpu_type)] += len(start.gpus)
        waiting = [j for j in state.pending if j.id not in started] + \
            [running[j].job for j in kept.preempt if j not in started]
        for job in waiting:
            for gpu_type, count in (+short).items():
                if TABLE.throughput(job.job_type, gpu_type, 1, Placement.PACKED) > 0 and \
                        count >= job.num_gpus and \
                        may_take(self.tenants, held, waiting, job, gpu_type):
                    self.failures.append(f"t={state.now:g}: {job.id} ({job.tenant}) may "
                                         f"take a {gpu_type} the policy had kept busy")


def workload(seed: int) -> tuple[TenantTable, list[Job]]:
    """Three tenants with random nominal quotas (4 GPUs of each type among them) and
    borrowing limits, 30 one-GPU jobs of both types at random times."""
    draw = random.Random(seed)
    nominal = {t: draw.sample([0, 1, 2, 2, 3, 4], 3) for t in TYPES}
    table = TenantTable(tuple(
        Tenant(name, quotas={t: Quota(max(0, min(nominal[t][i], 4 - sum(nominal[t][:i]))),
                                      draw.choice([None, None, 1, 2])) for t in TYPES})
        for i, name in enumerate("xyz")))
    jobs = [Job(f"j{i}", float(draw.randint(0, 6000)), draw.choice("mn"), 1,
                float(draw.randint(300, 8000)), tenant=draw.choice("xyz")) for i in range(30)]
    return table, jobs


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("policy", ROLLING)
def test_the_keeper_leaves_no_gpu_idle_that_a_waiting_job_may_take(policy: str,
                                                                    seed: int) -> None:
    table, jobs = workload(seed)
    keeper = Watched(policy, table)
    ran = replay(jobs, parse_cluster("v100=4,k80=4"), keeper, throughput=TABLE,
                 tenants=table, keep_tenants=False)
    assert ran.summary.completed == 30  # (and replay() checked what ran)
    assert keeper.failures == []
    # The quotas hold all the same: no GPU held beyond a quota while a tenant within its
    # own waits.
    assert ran.summary.quota_violation_gpu_s == 0.0


def test_a_fifo_head_that_may_not_borrow_holds_up_no_other_tenant() -> None:
    # x holds both V100s (its nominal quota); z may borrow one K80 at most and holds it
    # from 0. z's second job (the FIFO head from 10) may only wait for a V100; y, with no
    # quota, arrives at 20 and may borrow the idle K80: it starts at 20, not when the
    # head does (3,000, when x's jobs end).
    table = TenantTable((Tenant("x", quotas={"v100": Quota(2)}),
                         Tenant("z", quotas={"k80": Quota(0, 1)})))
    jobs = [Job("x1", 0.0, "m", 1, 6000.0, tenant="x"),
            Job("x2", 0.0, "m", 1, 6000.0, tenant="x"),
            Job("z1", 0.0, "n", 1, 9000.0, tenant="z"),
            Job("z2", 10.0, "m", 1, 100.0, tenant="z"),
            Job("y1", 20.0, "n", 1, 100.0, tenant="y")]
    ran = replay(jobs, parse_cluster("v100=2,k80=2"), "fifo", throughput=TABLE, tenants=table)
    assert ran.replay.records["y1"].first_start == 20.0
    assert ran.replay.records["y1"].gpu_types[0] == "k80"
    assert ran.replay.records["z2"].first_start == 3000.0  # x's jobs: 6,000 steps at 2 steps/s


@pytest.mark.parametrize("policy", ["gavel", "gavel-max-sum-raw"])
def test_a_job_the_quotas_let_borrow_again_is_seen_on_every_type(policy: str) -> None:
    # A is guaranteed both V100s; its two jobs and B's arrive at 0, so B's job is shown
    # with the K80s only and runs there. A's jobs end at 500 s (1,000 steps at 2 steps/s);
    # from then on nobody is owed the V100s and B may borrow them: the allocation is
    # solved again with B's job on every type (not with the types it was first shown
    # with), and at the round boundary at 720 s it moves to a V100, its fastest type.
    table = TenantTable((Tenant("A", quotas={"v100": Quota(2)}),))
    jobs = [Job("a1", 0.0, "m", 1, 1000.0, tenant="A"),
            Job("a2", 0.0, "m", 1, 1000.0, tenant="A"),
            Job("b1", 0.0, "m", 1, 20000.0, tenant="B")]
    ran = replay(jobs, parse_cluster("v100=2,k80=2"), policy, throughput=TABLE,
                 tenants=table)
    segments = ran.replay.records["b1"].segments
    assert [(s.gpu_type, s.start) for s in segments] == [("k80", 0.0), ("v100", 720.0)]
