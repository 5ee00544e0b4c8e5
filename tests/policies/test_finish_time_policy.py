"""The ``ftf`` rolling policy: its isolated times add up as Gavel's do, and its rounds
realise the allocation that evens out finish-time ratios."""

from __future__ import annotations

import pytest

from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import ThroughputTable
from hetsched.policies.baselines import HeterogeneityAgnostic
from hetsched.policies.baselines.finish_time import FinishTime
from hetsched.policies.baselines.gavel import Gavel
from hetsched.policies.baselines.gavel_params import FinishTimeParams
from hetsched.policies.rolling import ClusterState, RunningJob
from hetsched.registry import rolling
from hetsched.simulate.simulator import Simulator

CLUSTER = Cluster((GpuType("v100"),), (Node("n", "v100", 1),))
TABLE = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 1.0)])


def test_isolated_time_adds_up_over_solves() -> None:
    a, b = Job("A", 0.0, "cnn", 1, 2000.0), Job("B", 500.0, "cnn", 1, 2000.0)
    policy = Gavel(FinishTimeParams(round_s=100.0))
    first = policy.decide(ClusterState(now=0.0, cluster=CLUSTER, throughput=TABLE,
                                       pending=(a,), remaining={"A": 2000.0}, running=(),
                                       free=frozenset({"n/0"})))
    assert [s.job for s in first.start] == ["A"]
    policy.decide(ClusterState(now=500.0, cluster=CLUSTER, throughput=TABLE, pending=(b,),
                               remaining={"B": 2000.0},
                               running=(RunningJob(a, "v100", ("n/0",), 0.0, 1500.0),),
                               free=frozenset()))
    # A did 500 steps alone, at its isolated speed then (the whole GPU, 1 step/s): 500 s.
    # Now two jobs share the GPU, 0.5 step/s each: A's isolated time is 500 + 1500 / 0.5
    # = 3500 s, B's 2000 / 0.5 = 4000 s. max((500 + 1500 / rA) / 3500, 2000 / rB / 4000)
    # with rA + rB = 1 is least at rA = rB = 1/2 (both ratios 1). Without the 500 s A
    # already had, rA^2 + 5 rA - 3 = 0 would give A 0.541.
    assert isinstance(policy.objective, FinishTime)
    assert policy.objective.isolated.done == {"A": pytest.approx(500.0)}
    assert policy.allocation["A"]["v100"] == pytest.approx(0.5, abs=1e-6)
    assert policy.allocation["B"]["v100"] == pytest.approx(0.5, abs=1e-6)


def test_a_replay_gives_the_late_job_its_share() -> None:
    # The case above as a replay, rounds of 100 s: from 500 s A and B alternate round by
    # round, so B, which arrived when A was a quarter done, does not wait for A's end.
    jobs = [Job("A", 0.0, "cnn", 1, 2000.0), Job("B", 500.0, "cnn", 1, 2000.0)]
    ran = Simulator(CLUSTER, jobs, Gavel(FinishTimeParams(round_s=100.0)), truth=TABLE).run()
    assert ran.records["B"].first_start == pytest.approx(600.0)
    assert ran.records["A"].preemptions > 0
    assert ran.summary()["completed"] == 2
    # Both end close to 4000 s, when the GPU has done 4000 steps (restarts cost 30 s each).
    assert max(r.finish or 0.0 for r in ran.records.values()) >= 4000.0


def test_the_agnostic_variant_is_registered() -> None:
    policy = rolling("ftf-agnostic")
    assert isinstance(policy, HeterogeneityAgnostic)
    assert isinstance(policy.policy, Gavel)
    assert isinstance(policy.policy.params, FinishTimeParams)
    assert policy.policy.name == "ftf"


@pytest.mark.parametrize("name", ["gavel", "ftf"])
def test_gavels_own_rounds_start_jobs_only_at_boundaries(name: str) -> None:
    # One GPU at 1 step/s, rounds of 100 s: a (50 steps) ends at 50; b arrives at 10 (c at
    # 5,000, so the cluster idle at 50 is no stall). Work conserving (the default), b
    # takes the GPU a frees at 50; as Gavel's own scheduler (work_conserving=False), only
    # the round at 100 starts it.
    jobs = [Job("a", 0.0, "cnn", 1, 50.0), Job("b", 10.0, "cnn", 1, 1000.0),
            Job("c", 5000.0, "cnn", 1, 10.0)]
    for conserving, start in ((True, 50.0), (False, 100.0)):
        policy = rolling(name, round_s=100.0, work_conserving=conserving)
        ran = Simulator(CLUSTER, jobs, policy, truth=TABLE).run()
        assert ran.records["b"].first_start == pytest.approx(start)
        assert ran.records["b"].finish == pytest.approx(start + 1000.0)


def test_auto_spare_solves_few_jobs_by_the_lp_and_many_by_the_prices(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import hetsched.policies.baselines.finish_time as module

    a, b = Job("A", 0.0, "cnn", 1, 2000.0), Job("B", 0.0, "cnn", 1, 2000.0)
    state = ClusterState(now=0.0, cluster=CLUSTER, throughput=TABLE, pending=(a, b),
                         remaining={"A": 2000.0, "B": 2000.0}, running=(),
                         free=frozenset({"n/0"}))
    for threshold, lps, tests in ((500, True, False), (1, False, True)):
        monkeypatch.setattr(module, "AUTO_LP_JOBS", threshold)
        policy = Gavel(FinishTimeParams(round_s=100.0))
        policy.decide(state)
        objective = policy.objective
        assert isinstance(objective, FinishTime)
        assert (objective._finish_lp.last_solves > 0) is lps
        assert (objective._finish.last_tests > 0) is tests
        # Either way the two alike jobs share the GPU half and half (both ratios 1).
        assert policy.allocation["A"]["v100"] == pytest.approx(0.5, abs=1e-6)
