"""Preemption for weighted shares at a job's arrival (hetsched.policies.share_reclaim):
a tenant below its share starts its arriving job at once, taking GPUs from a tenant
above its own, never making the shares less fair; worked out by hand on 4 V100s."""

from __future__ import annotations

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.core.tenants import Quota, Tenant, TenantTable
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.files.tenants import tenants_from_dict
from hetsched.policies.quotas import TenantKeeper
from hetsched.registry import rolling
from hetsched.replaying import check_replay, replay
from hetsched.simulate.record import Replay

TABLE = ThroughputTable({("m", "v100", 1, Placement.PACKED): 1.0})
CLUSTER = parse_cluster("v100=4")


def jobs() -> list[Job]:
    """B's four 1-GPU jobs at 0 fill the 4 V100s (10,000 s each); A's three arrive at
    100, 200 and 300 (1,000 s each)."""
    return [*(Job(f"b{i}", 0.0, "m", 1, 10000.0, tenant="B") for i in range(4)),
            *(Job(f"a{i}", 100.0 * (i + 1), "m", 1, 1000.0, tenant="A") for i in range(3))]


def first_start(ran: Replay, job: str) -> float:
    return min(segment.start for segment in ran.records[job].segments)


def run(table: TenantTable, work: list[Job] | None = None,
        model: ThroughputTable = TABLE) -> tuple[Replay, TenantKeeper]:
    """``work`` (default :func:`jobs`) replayed under fifo within ``table``, past the
    checker, and the tenant keeper (its counts)."""
    work = work or jobs()
    keeper = TenantKeeper(rolling("fifo"), table)
    ran = replay(work, CLUSTER, keeper, throughput=model).replay
    assert check_replay(ran, work, model) == []
    return ran, keeper


def test_equal_weights_give_a_its_share_at_each_arrival() -> None:
    # At 100 A asks for 1 GPU, B for 4: weighted max-min entitles A to 1 and B to 3. A
    # holds 0: a0 starts at once on the GPU of B's latest started job (all at 0: the last
    # by id, b3), which B can spare (3 GPUs left over weight 1 >= A's 1 after). At 200
    # A asks for 2 (B still 4, b3 waiting): 2 and 2; A holds 1, so a1 starts too, on
    # b2's GPU (B 2 left >= A's 2). At 300 A asks for 3: still 2 and 2; A holds 2, and a2
    # waits. Only at arrival: when a0 ends (1,100 s) fifo starts b3 (it came first), then
    # b2, and a2 starts when B's first jobs end, at 10,000 s.
    ran, keeper = run(TenantTable((Tenant("A"), Tenant("B")), preempt_for_shares=True))
    assert [first_start(ran, f"a{i}") for i in range(3)] == [100.0, 200.0, 10000.0]
    assert ran.records["b3"].segments[0].finish == 100.0
    assert ran.records["b2"].segments[0].finish == 200.0
    assert (keeper.share_starts, keeper.share_preemptions) == (2, 2)
    assert keeper.figures()["share_preemptions"] == 2


def test_weights_decide_how_much_a_tenant_takes_back() -> None:
    # B weighs 3, A 1: of 4 GPUs A is entitled to 1 while B asks for more than 3. a0
    # starts at 100 (B keeps 3, 3/3 >= A's 1/1); a1 at 200 would take A to 2 above its 1:
    # it waits, and so does a2 (until B's jobs end, at 10,000 s).
    ran, keeper = run(TenantTable((Tenant("A"), Tenant("B", 3.0)), preempt_for_shares=True))
    assert [first_start(ran, f"a{i}") for i in range(3)] == [100.0, 10000.0, 10000.0]
    assert (keeper.share_starts, keeper.share_preemptions) == (1, 1)


def test_without_it_a_waits_for_b() -> None:
    # The same tenants without preemption for shares: fifo starts A's jobs as B's end.
    ran, keeper = run(TenantTable((Tenant("A"), Tenant("B", 3.0))))
    assert min(first_start(ran, f"a{i}") for i in range(3)) == 10000.0
    assert "share_preemptions" not in keeper.figures()


def test_a_preemption_never_makes_the_shares_less_fair() -> None:
    # A (weight 1) and B (weight 1) on 4 V100s; B runs one 4-GPU job. A's 1-GPU job
    # arriving is entitled to 1, but the only victim, B's whole gang, would leave B 0
    # GPUs below A's 1: no preemption, a0 waits.
    work = [Job("b", 0.0, "m4", 4, 10000.0, tenant="B"), Job("a", 100.0, "m", 1, 1000.0,
                                                            tenant="A")]
    model = ThroughputTable({**TABLE.entries, ("m4", "v100", 4, Placement.PACKED): 4.0})
    ran, keeper = run(TenantTable((Tenant("A"), Tenant("B")), preempt_for_shares=True),
                      work, model)
    assert first_start(ran, "a") == 2500.0
    assert keeper.share_preemptions == 0


def test_the_file_sets_it_and_refuses_it_with_quotas() -> None:
    table = tenants_from_dict({"tenants": [{"name": "A"}], "preempt_for_shares": True})
    assert table.preempt_for_shares
    with pytest.raises(InputError, match="preempt_for_shares"):
        tenants_from_dict({"tenants": [{"name": "A"}], "preempt_for_shares": "yes"})
    with pytest.raises(InputError, match="with quotas"):
        TenantTable((Tenant("A", quotas={"v100": Quota(4)}),), preempt_for_shares=True)
    with pytest.raises(InputError, match="not a tenants document"):
        tenants_from_dict({"tenants": [], "preempt": True})
