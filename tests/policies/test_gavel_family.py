"""Gavel's other policies as rolling policies: ``fifo-fastest``, ``min-total-duration``,
``max-throughput-per-cost`` and ``isolated`` (hetsched.policies.baselines): allocations
and replays worked out by hand, and replays that pass the independent checker."""

from __future__ import annotations

import pytest

from hetsched.core.check import check
from hetsched.core.prices import GAVEL_PRICES
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import ThroughputTable
from hetsched.files.instance import load_instance
from hetsched.policies.baselines import HeterogeneityAgnostic
from hetsched.policies.baselines.gavel import Gavel
from hetsched.policies.baselines.gavel_params import (
    CostParams,
    DurationParams,
    FifoFastestParams,
    IsolatedParams,
)
from hetsched.policies.baselines.throughput_per_cost import ThroughputPerCost
from hetsched.policies.rolling import ClusterState, RollingPolicy
from hetsched.registry import ENTRIES, rolling
from hetsched.simulate.simulator import Simulator
from tests.helpers import INSTANCES

NEW = ["fifo-fastest", "min-total-duration", "max-throughput-per-cost", "isolated"]


def v100_and_k80(v100: int = 1, k80: int = 1, v100_price: float | None = None,
                 k80_price: float | None = None) -> Cluster:
    """One node of each type."""
    return Cluster((GpuType("v100", price_per_hour=v100_price),
                    GpuType("k80", price_per_hour=k80_price)),
                   (Node("v", "v100", v100), Node("k", "k80", k80)))


def first_state(cluster: Cluster, table: ThroughputTable, jobs: list[Job]) -> ClusterState:
    """Every job waiting at time 0 on an idle cluster."""
    free = frozenset(f"{node.name}/{i}" for node in cluster.nodes for i in range(node.num_gpus))
    return ClusterState(now=0.0, cluster=cluster, throughput=table, pending=tuple(jobs),
                        remaining={job.id: job.work for job in jobs}, running=(), free=free)


def test_fifo_fastest_moves_the_second_job_to_the_v100_once_free() -> None:
    # One V100 and one K80; cnn at 10 and 2 steps/s; rounds of 100 s. a (1,000 steps) is
    # first: the V100; b (2,000) the K80. a ends at 100 s, b has done 200 steps; the
    # allocation re-dealt at that boundary gives b the V100: it restarts there (30 s
    # restore) and does its 1,800 steps in 180 s, ending at 310 s. fifo leaves b on the
    # K80 to 1,000 s.
    cluster = v100_and_k80()
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0),
                                       ("cnn", "k80", 1, "packed", 2.0)])
    jobs = [Job("a", 0.0, "cnn", 1, 1000.0), Job("b", 0.0, "cnn", 1, 2000.0)]
    ran = Simulator(cluster, jobs, Gavel(FifoFastestParams(round_s=100.0)), truth=table).run()
    assert ran.records["a"].finish == pytest.approx(100.0)
    assert ran.records["b"].finish == pytest.approx(310.0)
    assert ran.records["b"].preemptions == 1
    fifo = Simulator(cluster, jobs, rolling("fifo"), truth=table).run()
    assert fifo.records["b"].finish == pytest.approx(1000.0)


def test_isolated_gives_each_job_its_nth_of_every_type() -> None:
    # Four V100s and two K80s, two jobs: one of 1 GPU gets 4 / 2 = 2 and 2 / 2 = 1 of the
    # types, scaled to a sum of 1: 2/3 and 1/3; one of 4 GPUs gets 4 / 8 = 0.5 of the
    # V100s and would get 2 / 8 = 0.25 of the K80s (Gavel gives it), but two K80s cannot
    # hold its gang: 0 there (no time where a job cannot run).
    cluster = v100_and_k80(4, 2)
    table = ThroughputTable.from_rows([("cnn", t, n, "packed", 1.0) for t in ("v100", "k80")
                                       for n in (1, 2, 4)])
    policy = Gavel(IsolatedParams(round_s=100.0))
    policy.decide(first_state(cluster, table, [Job("one", 0.0, "cnn", 1, 100.0),
                                               Job("four", 0.0, "cnn", 4, 100.0)]))
    assert policy.allocation["one"] == pytest.approx({"v100": 2 / 3, "k80": 1 / 3})
    assert policy.allocation["four"] == pytest.approx({"v100": 0.5, "k80": 0.0})


#: fast at 2 and 1 steps/s on a V100 and a K80, even at 1 and 1.
FAST_AND_EVEN = ThroughputTable.from_rows([("fast", "v100", 1, "packed", 2.0),
                                           ("fast", "k80", 1, "packed", 1.0),
                                           ("even", "v100", 1, "packed", 1.0),
                                           ("even", "k80", 1, "packed", 1.0)])


def decided_min_total_duration(fast_steps: float, spare: str = "two-stage") -> Gavel:
    """``min-total-duration`` (rounds of 100 s, ``spare``) after its first decision on one
    V100 and one K80 for f (fast, ``fast_steps`` steps) and e (even, 100 steps)."""
    policy = Gavel(DurationParams(round_s=100.0, spare=spare))
    policy.decide(first_state(v100_and_k80(), FAST_AND_EVEN,
                              [Job("f", 0.0, "fast", 1, fast_steps),
                               Job("e", 0.0, "even", 1, 100.0)]))
    return policy


def test_min_total_duration_uses_the_steps_left() -> None:
    # One V100 and one K80; fast at 2 and 1 steps/s, even at 1 and 1. With 100 steps each,
    # even (at most 1 step/s) bounds the makespan at 100 s: fast on the V100, even on the
    # K80 (tests/formulations/test_gavel_family_lps.py). With fast at 400 steps instead,
    # fast bounds it: 2 a + a' >= 400 / T and b + b' >= 100 / T; fast all on the V100
    # (2 steps/s, 200 s) and even on the K80 (100 s) gives T = 200, and no allocation
    # does better (fast's best is 2 steps/s).
    for steps in (100.0, 400.0):
        policy = decided_min_total_duration(steps)
        assert policy.allocation["f"] == pytest.approx({"v100": 1.0, "k80": 0.0}, abs=1e-6)
        assert policy.allocation["e"] == pytest.approx({"v100": 0.0, "k80": 1.0}, abs=1e-6)


def test_min_total_duration_as_gavel_keeps_a_point_inside_at_its_bisections_makespan() -> None:
    # The case above with fast at 400 steps: the least makespan is 200 s, Gavel's
    # bisection stops at T_g = gavels_bisection(200) (above 200, within 5 %), and Gavel
    # keeps whatever point ECOS returns for "every job done by T_g" with no objective.
    # spare="gavel" keeps such a point found by an interior point with no objective: every
    # job at least its rate for T_g, and inside: no fraction at 0 or 1 (fast is not all on
    # the V100 as at the least makespan), so the makespan lies between 200 s and T_g.
    from hetsched.policies.baselines.min_total_duration import gavels_bisection

    policy = decided_min_total_duration(400.0, spare="gavel")
    bound = gavels_bisection(200.0)
    assert 200.0 < bound <= 210.0
    f, e = policy.allocation["f"], policy.allocation["e"]
    assert all(1e-4 < x < 1 - 1e-4 for x in (*f.values(), *e.values()))
    fast = 2.0 * f["v100"] + f["k80"]
    even = e["v100"] + e["k80"]
    assert 400.0 / fast <= bound * (1 + 1e-6)
    assert 100.0 / even <= bound * (1 + 1e-6)
    assert 400.0 / fast > 200.0


COST_TABLE = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 2.0),
                                        ("cnn", "k80", 1, "packed", 1.0)])


def cost_allocation(policy: Gavel, cluster: Cluster,
                    job: Job) -> dict[str, float]:
    policy.decide(first_state(cluster, COST_TABLE, [job]))
    return policy.allocation[job.id]


def test_the_cost_policy_reads_the_prices() -> None:
    # One job at 2 (V100) and 1 (K80) steps/s, E = 1.5. At the cluster's 3 and 1 USD/h a
    # unit of time earns 2 / 1.5 / 3 = 4/9 on the V100 and 2/3 on the K80: the K80. At
    # prices of 1 and 1 given to the policy: 4/3 against 2/3, the V100. Gavel's (0.74,
    # 0.135), given: 1.80 against 4.94, the K80. No price anywhere: an error naming one.
    job = Job("a", 0.0, "cnn", 1, 1000.0)
    priced = v100_and_k80(v100_price=3.0, k80_price=1.0)
    assert cost_allocation(Gavel(CostParams()), priced, job) == pytest.approx(
        {"v100": 0.0, "k80": 1.0}, abs=1e-6)
    assert cost_allocation(Gavel(CostParams(prices={"v100": 1.0, "k80": 1.0})), priced,
                           job) == pytest.approx({"v100": 1.0, "k80": 0.0}, abs=1e-6)
    assert cost_allocation(Gavel(CostParams(prices=GAVEL_PRICES)), v100_and_k80(),
                           job) == pytest.approx({"v100": 0.0, "k80": 1.0}, abs=1e-6)
    with pytest.raises(ValueError, match="'v100' has no price"):
        cost_allocation(Gavel(CostParams()), v100_and_k80(), job)


def test_the_cost_policy_meets_a_deadline_when_asked() -> None:
    # The same job with 2,000 steps and a deadline at 1,500 s needs 4/3 steps/s, more
    # than the K80's 1: 2 a + a' >= 4/3 with a + a' <= 1, and the K80 earns more per
    # dollar, so a = 1/3 of the V100 and 2/3 of the K80. Without meet_deadlines: the K80.
    job = Job("a", 0.0, "cnn", 1, 2000.0, deadline=1500.0)
    priced = v100_and_k80(v100_price=3.0, k80_price=1.0)
    assert cost_allocation(Gavel(CostParams(meet_deadlines=True)), priced, job) == \
        pytest.approx({"v100": 1 / 3, "k80": 2 / 3}, abs=1e-6)
    assert cost_allocation(Gavel(CostParams()), priced, job) == pytest.approx(
        {"v100": 0.0, "k80": 1.0}, abs=1e-6)


def test_a_gpu_type_without_a_price_is_named() -> None:
    cluster = Cluster((GpuType("h100"),), (Node("h", "h100", 1),))
    table = ThroughputTable.from_rows([("cnn", "h100", 1, "packed", 1.0)])
    state = first_state(cluster, table, [Job("a", 0.0, "cnn", 1, 10.0)])
    with pytest.raises(ValueError, match="'h100' has no price"):
        Gavel(CostParams()).decide(state)
    assert Gavel(CostParams(prices={"h100": 4.0})).decide(state).start


@pytest.mark.parametrize("name", NEW)
def test_each_is_registered_with_its_agnostic_variant(name: str) -> None:
    assert ENTRIES[name].summary
    policy = rolling(name)
    assert policy.name == name
    agnostic = rolling(f"{name}-agnostic")
    assert isinstance(agnostic, HeterogeneityAgnostic)
    assert type(agnostic.policy) is type(policy)


def small_replay(policy: RollingPolicy) -> None:
    """A replay of small.json (20 jobs on 16 GPUs of three types, deadlines, elastic
    jobs): every job completes, no decision falls back, and what ran (run segments and
    restart penalties included) passes the independent checker."""
    instance = load_instance(INSTANCES / "small.json")
    ran = Simulator(instance.cluster, list(instance.jobs), policy,
                    truth=instance.throughput).run()
    summary = ran.summary()
    assert summary["completed"] == 20
    assert summary["fallbacks"] == 0
    assert check(instance, ran.schedule()) == []
    assert len(ran.schedule()) == 20 + summary["preemptions"]


@pytest.mark.parametrize("name", [*NEW, *(f"{n}-agnostic" for n in NEW)])
def test_a_replay_passes_the_checker(name: str) -> None:
    small_replay(rolling(name))


def test_a_replay_meeting_deadlines_passes_the_checker() -> None:
    policy = Gavel(CostParams(meet_deadlines=True))
    small_replay(policy)
    assert isinstance(policy.objective, ThroughputPerCost)
    assert policy.figures()["deadlines_left_out"] == policy.objective.deadlines_left_out


def test_gavels_bisection_stops_within_five_percent() -> None:
    # Gavel's min_total_duration_perf bisects T on [100, 10^6] until the bounds are within
    # 5 %: for a least makespan of 600,000 s the feasible midpoints are 750,025,
    # 625,037.5 and 609,414.0625 (the infeasible ones 500,050, 562,543.75 and
    # 593,790.625), and it stops there, 1.6 % above the least.
    from hetsched.policies.baselines.min_total_duration import gavels_bisection

    assert gavels_bisection(600_000.0) == pytest.approx(609_414.0625)
    # Past 10^6 s nothing in the first range is feasible: it moves to [10^6, 10^7].
    assert 2.5e6 <= gavels_bisection(2.5e6) <= 1.05 * 2.5e6
    for least in (150.0, 5000.0, 999_999.0):
        assert least <= gavels_bisection(least) <= 1.05 * least
