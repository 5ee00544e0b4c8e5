"""Quotas kept around every rolling policy (hetsched.policies.quotas): borrowing idle GPUs,
the borrowing limit, and a quota given back in the decision its owner's jobs arrive at."""

from __future__ import annotations

import random

import pytest

from hetsched.core.records import Job
from hetsched.core.tenants import Quota, Tenant, TenantTable
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.policies.quotas import TenantKeeper
from hetsched.policies.rolling import ClusterState
from hetsched.registry import ENTRIES, rolling
from hetsched.replaying import replay
from hetsched.simulate.record import Replay

#: One job type, twice as fast on a V100 as on a K80.
TABLE = ThroughputTable({("m", "v100", 1, Placement.PACKED): 2.0,
                         ("m", "k80", 1, Placement.PACKED): 1.0})
CLUSTER = parse_cluster("v100=8,k80=8")
#: Two tenants: A is guaranteed the 8 V100s, B the 8 K80s, both may borrow.
TWO = TenantTable((Tenant("A", quotas={"v100": Quota(8)}),
                   Tenant("B", quotas={"k80": Quota(8)})))
ROLLING = sorted(name for name, entry in ENTRIES.items() if entry.policy is not None)


def jobs() -> list[Job]:
    """B's 12 jobs at 0 (8 take the V100s, its fastest type, 4 the K80s); A's 6 at 1,000,
    while B's still run (3,600 steps: 1,800 s on a V100)."""
    return [*(Job(f"b{i}", 0.0, "m", 1, 3600.0, tenant="B") for i in range(12)),
            *(Job(f"a{i}", 1000.0, "m", 1, 3600.0, tenant="A") for i in range(6))]


def held(ran: Replay, tenant: str, gpu_type: str, when: float) -> int:
    """GPUs of ``gpu_type`` ``tenant``'s jobs held at ``when``."""
    return sum(len(s.gpus) for r in ran.records.values() if r.job.tenant == tenant
               for s in r.segments if s.gpu_type == gpu_type and s.start <= when < s.finish)


@pytest.mark.parametrize("policy", ROLLING)
def test_a_quota_comes_back_in_the_decision_its_jobs_arrive_at(policy: str) -> None:
    ran = replay(jobs(), CLUSTER, policy, throughput=TABLE, tenants=TWO).replay
    summary = ran.metrics()
    assert summary.completed == 18  # and replay() checked what ran
    assert held(ran, "B", "v100", 999.0) > 0  # B borrowed idle V100s
    for index in range(6):  # every A job started when it arrived, on a V100
        record = ran.records[f"a{index}"]
        assert record.first_start == 1000.0, (policy, record.first_start)
        assert record.gpu_types[0] == "v100"
    assert summary.quota_violation_gpu_s == 0.0


def test_without_the_quotas_kept_fifo_breaks_them() -> None:
    # fifo alone: at 1,000 a0-a3 take the 4 idle K80s, a4 and a5 wait for B's V100 jobs
    # to end at 1,800 while B holds all 8 V100s beyond its quota of none: 2 GPUs owed to A
    # for 800 s.
    loose = replay(jobs(), CLUSTER, "fifo", throughput=TABLE, tenants=TWO,
                   keep_tenants=False).replay
    assert [loose.records[f"a{i}"].first_start for i in range(6)] == [1000.0] * 4 + [1800.0] * 2
    assert loose.metrics().quota_violation_gpu_s == pytest.approx(1600.0)


@pytest.mark.parametrize("policy", ["fifo", "srtf", "gavel"])
def test_a_borrowing_limit_is_never_passed(policy: str) -> None:
    # B may borrow at most 2 V100s: at any time it holds at most 2.
    table = TenantTable((Tenant("A", quotas={"v100": Quota(8)}),
                         Tenant("B", quotas={"k80": Quota(8), "v100": Quota(0, 2)})))
    ran = replay(jobs(), CLUSTER, policy, throughput=TABLE, tenants=table).replay
    starts = sorted({s.start for r in ran.records.values() for s in r.segments})
    assert max(held(ran, "B", "v100", when) for when in starts) == 2
    assert ran.metrics().completed == 18


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("policy", ["fifo", "sjf", "srtf", "tiresias", "gavel", "ftf"])
def test_quotas_hold_on_random_workloads(policy: str, seed: int) -> None:
    # Three tenants with random nominal quotas and borrowing limits on 4 V100s and 4 K80s,
    # 1-GPU jobs at random times: no tenant ever holds more than nominal plus borrowing
    # limit of a type, and no GPU is held beyond a quota while a tenant within its own
    # waits (one-GPU jobs always fit a GPU a borrower gives back).
    draw = random.Random(seed)
    cluster = parse_cluster("v100=4,k80=4")
    nominal = {t: draw.sample([0, 1, 1, 2, 2, 3], 3) for t in ("v100", "k80")}
    table = TenantTable(tuple(
        Tenant(name, quotas={t: Quota(max(0, min(nominal[t][i], 4 - sum(nominal[t][:i]))),
                                      draw.choice([None, 0, 1, 2]))
                             for t in ("v100", "k80")})
        for i, name in enumerate("xyz")))
    jobs = [Job(f"j{i}", float(draw.randint(0, 4000)), "m", 1,
                float(draw.randint(200, 6000)), tenant=draw.choice("xyz")) for i in range(24)]
    ran = replay(jobs, cluster, policy, throughput=TABLE, tenants=table).replay
    assert ran.metrics().completed == 24
    assert ran.metrics().quota_violation_gpu_s == 0.0
    moments = sorted({s.start for r in ran.records.values() for s in r.segments})
    for tenant in table.tenants:
        for gpu_type in ("v100", "k80"):
            most = tenant.quota(gpu_type).most
            assert all(held(ran, tenant.name, gpu_type, when) <= most for when in moments)


def test_weighted_tenants_share_gavels_allocation_by_weight() -> None:
    # 8 V100s, tenants A (weight 3) and B (weight 1) with 12 one-GPU jobs each, all waiting
    # from 0. Each job is shown its tenant's weight over its tenant's 12 jobs (scaled so
    # the weights average 1: 1.5 and 0.5); max-min gives a job time in proportion to its
    # weight: each A job half a GPU, each B job a sixth, A 6 GPUs, B 2.
    cluster = parse_cluster("v100=8")
    table = TenantTable((Tenant("A", 3.0), Tenant("B", 1.0)))
    work = [*(Job(f"a{i}", 0.0, "m", 1, 7200.0, tenant="A") for i in range(12)),
            *(Job(f"b{i}", 0.0, "m", 1, 7200.0, tenant="B") for i in range(12))]
    assert replay(work, cluster, "gavel", throughput=TABLE, tenants=table).summary \
        .completed == 24
    policy = TenantKeeper(rolling("gavel"), table)
    state = ClusterState(0.0, cluster, TABLE, tuple(work), {j.id: j.work for j in work}, (),
                         frozenset(g.id for g in cluster.gpus))
    policy.decide(state)
    shares = policy.policy.allocation  # type: ignore[attr-defined]
    assert shares["a0"]["v100"] == pytest.approx(0.5, abs=1e-6)
    assert shares["b0"]["v100"] == pytest.approx(1 / 6, abs=1e-6)
    # Without the table's weights every job weighs the same: a third of a GPU each.
    alone = rolling("gavel")
    alone.decide(state)
    assert alone.allocation["a0"]["v100"] == pytest.approx(1 / 3, abs=1e-6)  # type: ignore[attr-defined]


def test_water_filling_over_tenants_gives_a_small_jobs_share_to_its_tenants_others() -> None:
    # 6 V100s; tenants A and B of equal weight (2: a table of weights 1 weighs nothing);
    # A has a 1-GPU job and a 4-GPU job, B a 4-GPU job; the keeper shows A's jobs with
    # half of A's weight each. Water-filling of GPUs held raises them as 0.5 L, 0.5 L, L:
    # A's small job stops at its 1 GPU at L = 2 (A's large job holds 1, B's 2). Flat, the
    # two large jobs rise on from 1 and 2 as 0.5 t and t: 1 + 0.5 t + 2 + t = 5, t = 4/3,
    # A's 5/3 GPUs (5/12 of the time), B's 10/3 (10/12). Over tenants (the default), the
    # small job's half of A's weight goes to A's large job: 1 + t + 2 + t = 5, t = 1: A's
    # 2 GPUs (1/2), B's 3 (3/4), and A and B hold 3 GPUs each.
    cluster = parse_cluster("v100=6")
    table = TenantTable((Tenant("A", 2.0), Tenant("B", 2.0)))
    work = [Job("a-small", 0.0, "m", 1, 7200.0, tenant="A"),
            Job("a-large", 0.0, "m4", 4, 7200.0, tenant="A"),
            Job("b-large", 0.0, "m4", 4, 7200.0, tenant="B")]
    model = ThroughputTable({**TABLE.entries, ("m4", "v100", 4, Placement.PACKED): 6.0})
    state = ClusterState(0.0, cluster, model, tuple(work), {j.id: j.work for j in work}, (),
                         frozenset(g.id for g in cluster.gpus))
    for hierarchical, large, other in ((True, 1 / 2, 3 / 4), (False, 5 / 12, 10 / 12)):
        policy = TenantKeeper(rolling("gavel-water-filling-gpus", hierarchical=hierarchical),
                              table)
        policy.decide(state)
        shares = policy.policy.allocation  # type: ignore[attr-defined]
        assert shares["a-small"]["v100"] == pytest.approx(1.0, abs=1e-6)
        assert shares["a-large"]["v100"] == pytest.approx(large, abs=1e-6)
        assert shares["b-large"]["v100"] == pytest.approx(other, abs=1e-6)
