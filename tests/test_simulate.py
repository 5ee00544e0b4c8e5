"""The event-driven simulator: exact completion times, preemption with a restart penalty,
measured truth against the fitted view, the stall guard, and policies through it."""

from __future__ import annotations

import pytest

from solver.check import check
from solver.data import Cluster, GpuType, Instance, Job, Node
from solver.instance_file import load_instance
from solver.policies.fifo import fifo_schedule
from solver.result import Assignment, Schedule
from solver.rolling import ClusterState, Decision, ModelPolicy, RollingFifo, Start
from solver.simulate import Replay, Simulator
from solver.throughput import ThroughputTable
from tests.conftest import INSTANCES, assert_valid


def as_schedule(replay: Replay) -> Schedule:
    """Jobs that ran in one piece, as a schedule the checker can read."""
    return Schedule(tuple(
        Assignment(r.job.id, r.gpu_types[-1], r.gpus, r.first_start or 0.0, r.finish or 0.0)
        for r in replay.records.values()))


def one_gpu() -> tuple[Cluster, ThroughputTable]:
    cluster = Cluster((GpuType("v100"),), (Node("n", "v100", 1),))
    return cluster, ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0)])


@pytest.mark.parametrize("name", ["small.json", "medium.json"])
def test_rolling_fifo_equals_the_static_fifo_schedule(name: str) -> None:
    # Two independent implementations of strict FIFO first fit: the list scheduler that
    # plans every start in advance, and the simulator taking decisions at events.
    instance = load_instance(INSTANCES / name)
    replay = Simulator(instance.cluster, instance.jobs, RollingFifo(),
                       truth=instance.throughput).run()
    static = fifo_schedule(instance).by_job()
    for job_id, record in replay.records.items():
        assert record.first_start == pytest.approx(static[job_id].start)
        assert record.finish == pytest.approx(static[job_id].finish)
    assert_valid(instance, as_schedule(replay))
    summary = replay.summary()
    assert summary["completed"] == len(instance.jobs)
    assert summary["preemptions"] == 0
    assert summary["fallbacks"] == 0


def test_completion_at_exact_times_with_an_interval() -> None:
    # Job a: 1000 steps at 10 steps/s, arrives 0 -> finishes 100 s exactly; b arrives 30,
    # waits, runs 100..150. A 7 s re-solve interval must not round anything up.
    cluster, table = one_gpu()
    jobs = [Job("a", 0.0, "cnn", 1, 1000.0), Job("b", 30.0, "cnn", 1, 500.0)]
    replay = Simulator(cluster, jobs, RollingFifo(), truth=table, interval_s=7.0).run()
    assert replay.records["a"].finish == pytest.approx(100.0)
    assert replay.records["b"].first_start == pytest.approx(100.0)
    assert replay.records["b"].finish == pytest.approx(150.0)
    summary = replay.summary()
    assert summary["avg_jct_s"] == pytest.approx((100 + 120) / 2)
    assert summary["utilization"] == pytest.approx(1.0)
    assert summary["avg_queue_s"] == pytest.approx((0 + 70) / 2)


class PreemptOnce:
    """Starts a at 0; at b's arrival (40 s) preempts a for b; restarts a when b ends."""

    name = "preempt-once"

    def decide(self, state: ClusterState) -> Decision:
        pending = {j.id for j in state.pending}
        if "b" in pending and any(r.job.id == "a" for r in state.running):
            return Decision((Start("b", "v100", ("n/0",)),), ("a",))
        if state.free and state.pending:
            return Decision((Start(state.pending[0].id, "v100", ("n/0",)),))
        return Decision()


def test_preemption_keeps_progress_and_pays_the_restart_penalty() -> None:
    cluster, table = one_gpu()
    jobs = [Job("a", 0.0, "cnn", 1, 1000.0), Job("b", 40.0, "cnn", 1, 200.0)]
    replay = Simulator(cluster, jobs, PreemptOnce(), truth=table, restart_penalty_s=30).run()
    # a: 400 steps done by 40 s; b runs 40..60 (a first start: no penalty); a restarts at
    # 60, restores for 30 s, then 600 steps at 10/s: finishes 60 + 30 + 60 = 150.
    assert replay.records["b"].finish == pytest.approx(60.0)
    assert replay.records["a"].finish == pytest.approx(150.0)
    assert replay.records["a"].preemptions == 1
    assert replay.records["a"].gpu_seconds == pytest.approx(40 + 90)
    assert replay.summary()["preemptions"] == 1


def test_jobs_advance_at_the_measured_speed_not_the_fitted_one() -> None:
    cluster, truth = one_gpu()
    fitted = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 20.0)])
    replay = Simulator(cluster, [Job("a", 0.0, "cnn", 1, 1000.0)], RollingFifo(),
                       truth=truth, model=fitted).run()
    assert replay.records["a"].finish == pytest.approx(100.0)  # 1000 / 10, not 1000 / 20


class NeverStarts:
    name = "lazy"

    def decide(self, state: ClusterState) -> Decision:
        return Decision()


def test_a_policy_that_starts_nothing_cannot_stall_the_replay() -> None:
    cluster, table = one_gpu()
    jobs = [Job("a", 0.0, "cnn", 1, 100.0), Job("b", 5.0, "cnn", 1, 100.0)]
    replay = Simulator(cluster, jobs, NeverStarts(), truth=table).run()
    assert all(r.finish is not None for r in replay.records.values())
    assert replay.summary()["fallbacks"] >= 1


class Cheater:
    name = "cheater"

    def decide(self, state: ClusterState) -> Decision:
        return Decision(tuple(Start(j.id, "v100", ("n/0",)) for j in state.pending))


def test_invalid_decisions_are_refused() -> None:
    cluster, table = one_gpu()
    jobs = [Job("a", 0.0, "cnn", 1, 100.0), Job("b", 0.0, "cnn", 1, 100.0)]
    with pytest.raises(RuntimeError, match="not free"):
        Simulator(cluster, jobs, Cheater(), truth=table).run()


@pytest.mark.parametrize("model", ["fifo", "topology", "allox", "deadline"])
def test_models_as_rolling_policies(model: str) -> None:
    instance = load_instance(INSTANCES / "small.json")
    replay = Simulator(instance.cluster, instance.jobs, ModelPolicy(model, time_limit_s=2),
                       truth=instance.throughput).run()
    summary = replay.summary()
    assert summary["completed"] == 20
    assert summary["preemptions"] == 0
    # No preemption, so each job ran in one piece: the whole replay is a valid schedule.
    assert check(instance, as_schedule(replay)) == []


def test_model_policy_only_sees_free_gpus() -> None:
    # Two single-GPU nodes, one busy: a pending job must be placed on the free one.
    cluster = Cluster((GpuType("v100"),), (Node("a", "v100", 1), Node("b", "v100", 1)))
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0)])
    instance = Instance(cluster, (Job("x", 0.0, "cnn", 1, 100.0),), table)
    state = ClusterState(now=5.0, cluster=cluster, throughput=table, pending=instance.jobs,
                         remaining={"x": 100.0}, running=(), free=frozenset({"b/0"}))
    decision = ModelPolicy("fifo").decide(state)
    assert decision.start == (Start("x", "v100", ("b/0",)),)


def test_outputs_are_written_and_reproducible(tmp_path: object) -> None:
    import json
    from pathlib import Path

    folder = Path(str(tmp_path))
    instance = load_instance(INSTANCES / "medium.json")
    for run in ("a", "b"):
        Simulator(instance.cluster, instance.jobs, RollingFifo(),
                  truth=instance.throughput).run().write(folder / run)
    for name in ("jobs.csv",):
        assert (folder / "a" / name).read_bytes() == (folder / "b" / name).read_bytes()
    summary = json.loads((folder / "a" / "summary.json").read_text())
    keys = {"jobs", "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s",
            "avg_queue_s", "deadline_jobs", "deadline_met", "total_tardiness_s", "utilization",
            "preemptions", "decisions", "decision_time_p50_s", "decision_time_p95_s",
            "decision_time_max_s", "fallbacks", "wall_time_s"}
    assert keys <= set(summary)
    timing = {"decision_time_p50_s", "decision_time_p95_s", "decision_time_max_s",
              "wall_time_s"}
    other = json.loads((folder / "b" / "summary.json").read_text())
    assert {k: v for k, v in summary.items() if k not in timing} == {
        k: v for k, v in other.items() if k not in timing}
    lines = (folder / "a" / "jobs.csv").read_text().splitlines()
    assert len(lines) == 201
    assert lines[0].startswith("job,arrival,start,finish,jct")
    decisions = (folder / "a" / "decisions.csv").read_text().splitlines()
    assert len(decisions) == summary["decisions"] + 1
    assert not list(folder.glob("**/*.tmp"))


def test_an_interrupted_replay_keeps_what_finished() -> None:
    cluster, table = one_gpu()
    jobs = [Job(f"j{i}", float(i), "cnn", 1, 100.0) for i in range(5)]

    def stop_after_two(done: int, total: int, now: float, decisions: int) -> None:
        if done >= 2:
            raise KeyboardInterrupt

    replay = Simulator(cluster, jobs, RollingFifo(), truth=table,
                       progress=stop_after_two).run()
    summary = replay.summary()
    assert summary["interrupted"] is True
    assert summary["completed"] == 2


def test_model_policy_commits_starts_rounded_up_to_the_grid() -> None:
    # now = 1601071.0004 s is not on the models' 1 ms grid: the deadline model returns a
    # start one tick later, which must still count as "now" (else the GPUs idle).
    cluster = Cluster((GpuType("v100"),), (Node("a", "v100", 2),))
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 10.0)])
    jobs = (Job("x", 0.0, "cnn", 1, 100.0), Job("y", 0.0, "cnn", 1, 100.0))
    state = ClusterState(now=1601071.0004, cluster=cluster, throughput=table, pending=jobs,
                         remaining={"x": 100.0, "y": 100.0}, running=(),
                         free=frozenset({"a/0", "a/1"}))
    decision = ModelPolicy("deadline", time_limit_s=5).decide(state)
    assert sorted(s.job for s in decision.start) == ["x", "y"]
    assert not decision.fallback
