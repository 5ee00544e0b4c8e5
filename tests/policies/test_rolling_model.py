"""The exact models as rolling policies (``hetsched.policies.replanning.Replanning``): node pinning,
preemption with hysteresis, the priority window and the work-conserving backfill."""

from __future__ import annotations

import pytest

from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.policies.replanning import Replanning
from hetsched.policies.rolling import ClusterState, Decision, RunningJob
from hetsched.registry import planner
from hetsched.simulate.simulator import Simulator
from hetsched.solving import SolveOptions, solve
from tests.helpers import assert_valid

# One job type, 1 step/s on "fast" and 0.25 step/s on "slow", one GPU each.
TABLE = ThroughputTable.from_rows([
    ("train", "fast", 1, Placement.PACKED, 1.0),
    ("train", "slow", 1, Placement.PACKED, 0.25),
])
TYPES = (GpuType("fast"), GpuType("slow"))


def state(cluster: Cluster, pending: list[Job], running: list[RunningJob], now: float
          ) -> ClusterState:
    held = {g for r in running for g in r.gpus}
    return ClusterState(
        now=now, cluster=cluster, throughput=TABLE, pending=tuple(pending),
        remaining={j.id: j.work for j in pending}, running=tuple(running),
        free=frozenset(g.id for g in cluster.gpus if g.id not in held))


@pytest.mark.parametrize("backend", ["cpsat", "cbc", "highs"])
def test_a_job_pinned_to_the_second_of_identical_nodes_is_feasible(backend: str) -> None:
    # Two identical 1-GPU nodes; job a may only use f1. Without the pin the symmetry
    # breaking would put the first job on f0; with it the optimum is both at once:
    # total JCT 100 + 200 = 300 s, a on f1 and b on f0.
    cluster = Cluster(TYPES, (Node("f0", "fast", 1), Node("f1", "fast", 1)))
    jobs = (Job("a", 0.0, "train", 1, 100.0, allowed_nodes=("f1",)),
            Job("b", 0.0, "train", 1, 200.0))
    instance = Instance(cluster, jobs, TABLE)
    result = solve(instance, "deadline",
                   SolveOptions(backend=backend, time_limit_s=20.0, deterministic=True))
    assert_valid(instance, result.schedule)
    assert result.objective == pytest.approx(300.0, abs=1e-3)
    placed = {a.job: a.gpus for a in result.schedule}
    assert placed["a"] == ("f1/0",)
    assert placed["b"] == ("f0/0",)


def decide_beside_a_long_job(short_s: float, preemptive: bool = True) -> Decision:
    """The deadline model's rolling decision at 5,000 s: one fast GPU held by "long" (10,000
    s left), "short" (``short_s`` of work) waiting; preemption hysteresis 600 s."""
    cluster = Cluster(TYPES, (Node("f0", "fast", 1),))
    long_job = Job("long", 0.0, "train", 1, 20_000.0)
    short = Job("short", 5_000.0, "train", 1, short_s)
    running = [RunningJob(long_job, "fast", ("f0/0",), 0.0, 10_000.0)]
    return Replanning(planner("deadline"), time_limit_s=5.0, preemptive=preemptive).decide(
        state(cluster, [short], running, 5_000.0))


def test_preemptive_policy_stops_a_long_job_for_a_shorter_one() -> None:
    # "short" of 1,000 s: short first gives total completion 1,000 + 11,000 against
    # 10,000 + 11,000 the other way, and delays "long" by 1,000 s >= the 600 s
    # hysteresis: "long" is preempted, "short" starts.
    decision = decide_beside_a_long_job(1_000.0)
    assert decision.preempt == ("long",)
    assert [(s.job, s.gpus) for s in decision.start] == [("short", ("f0/0",))]
    # Non-preemptive, nothing is free: nothing happens.
    decision = decide_beside_a_long_job(1_000.0, preemptive=False)
    assert decision.preempt == ()
    assert decision.start == ()


def test_no_preemption_when_the_gain_is_below_the_hysteresis() -> None:
    # The same with a 300 s pending job: the plan still puts it first, but it delays
    # "long" by only 300 s < 600 s, so nothing is preempted and "short" waits.
    decision = decide_beside_a_long_job(300.0)
    assert decision.preempt == ()
    assert decision.start == ()


def test_a_plan_voided_by_the_hysteresis_is_backfilled_on_a_free_gpu() -> None:
    # f0 (fast) frees in 100 s; s0 (slow) is free. The window (1 job) holds "tiny" (20
    # steps: 20 s fast, 80 s slow), the shortest. The model puts it first on f0 by moving
    # "holder" back 20 s (total 20 + 120 against 80 + 100), but 20 s is below the 600 s
    # hysteresis: holder keeps f0, tiny's plan is void and the backfill starts it on s0.
    # "big" (outside the window) finds nothing free.
    cluster = Cluster(TYPES, (Node("f0", "fast", 1), Node("s0", "slow", 1)))
    holder = Job("holder", 0.0, "train", 1, 1_000.0)
    big = Job("big", 0.0, "train", 1, 1_000.0)
    tiny = Job("tiny", 0.0, "train", 1, 20.0)
    running = [RunningJob(holder, "fast", ("f0/0",), 0.0, 100.0)]
    policy = Replanning(planner("deadline"), time_limit_s=5.0, window=1)  # only "big" is modelled
    decision = policy.decide(state(cluster, [big, tiny], running, 0.0))
    assert decision.preempt == ()
    assert [(s.job, s.gpus) for s in decision.start] == [("tiny", ("s0/0",))]


def test_window_puts_starving_jobs_first_then_shortest() -> None:
    cluster = Cluster(TYPES, (Node("f0", "fast", 1),))
    now = 10 * 24 * 3600.0
    old = Job("old", 0.0, "train", 1, 100.0)  # waited 10 days >> 10 x 100 s and 6 h
    jobs = [Job(f"j{k}", now - 10.0, "train", 1, 1_000.0 * (k + 1)) for k in range(4)]
    policy = Replanning(planner("deadline"), window=3)
    chosen = policy._window(state(cluster, [*jobs, old], [], now), [*jobs, old])
    assert [j.id for j in chosen] == ["old", "j0", "j1"]


def test_rolling_deadline_replay_is_checker_clean_and_preempts() -> None:
    # Three long jobs fill both GPUs; short ones arrive later. Every start the simulator
    # accepts is checked by it (free GPUs, allowed type, throughput > 0).
    cluster = Cluster(TYPES, (Node("f0", "fast", 1), Node("s0", "slow", 1)))
    jobs = [Job("l1", 0.0, "train", 1, 8_000.0), Job("l2", 0.0, "train", 1, 2_000.0),
            *[Job(f"s{k}", 100.0 + 50 * k, "train", 1, 700.0) for k in range(3)]]
    replay = Simulator(cluster, jobs, Replanning(planner("deadline"), time_limit_s=2.0),
                       truth=TABLE, restart_penalty_s=30.0).run()
    summary = replay.summary()
    assert summary["completed"] == 5
    assert summary["fallbacks"] == 0
    assert summary["preemptions"] >= 1
