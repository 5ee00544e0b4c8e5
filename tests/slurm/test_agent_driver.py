"""The agent asks its policy through the simulator's driver (hetsched.simulate.driver)
against the real local cluster: the policy hears of every managed job that ends, once,
at its end (``on_finished``, as a replay tells it of every completion), and a call over
the decision timeout is cut, logged, and changes nothing that runs."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from hetsched.core.records import Job
from hetsched.files.replay_inputs import throughputs
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RollingFifo
from hetsched.slurm.agent import Agent, AgentSettings
from hetsched.slurm.control import SlurmControl
from hetsched.slurm.history import History
from hetsched.slurm.live import SlurmCluster
from hetsched.slurm.local import LocalCluster
from tests.slurm.commands import job_record, run_slurm
from tests.slurm.test_agent import cycle_until, meta, submit


class Listening(PolicyHooks):
    """FIFO that keeps what ``on_finished`` told it."""

    name = "listening-fifo"
    round_s = None

    def __init__(self) -> None:
        self.fifo = RollingFifo()
        self.finished: list[tuple[str, float]] = []

    def decide(self, state: ClusterState) -> Decision:
        return self.fifo.decide(state)

    def on_finished(self, job: Job, now: float) -> None:
        self.finished.append((job.id, now))


class Stuck(PolicyHooks):
    """A policy whose every decision takes a minute."""

    name = "stuck"
    round_s = None

    def decide(self, state: ClusterState) -> Decision:
        time.sleep(60)
        return Decision()


class StopRunError(Exception):
    """Ends an agent's run from its sleep."""


def live_agent(cluster: LocalCluster, policy: PolicyHooks, journal: Path,
               **settings: float) -> Agent:
    live = SlurmCluster(SlurmControl(env=cluster.env(), patience_s=30), cluster.partition)
    model = throughputs(live.read().cluster, None).model
    return Agent(live, policy, model, History(journal),  # type: ignore[arg-type]
                 AgentSettings(poll_s=0.1, **settings))  # type: ignore[arg-type]


def test_the_policy_hears_of_every_job_that_ends_once_at_its_end(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # Two one-GPU jobs that run 2 s, and one of 12 GPUs that no node type holds (it
    # waits, held, behind nobody: it arrives last), cancelled once the agent knows it.
    for job_id in ("f0", "f1"):
        submit(cluster, meta(job_id, 1), seconds=2)
    never = submit(cluster, meta("f2", 12, arrival=1.0))
    policy = Listening()
    agent = live_agent(cluster, policy, tmp_path / "events.jsonl")
    cycle_until(agent, lambda: all(j in agent.history.jobs and agent.history.jobs[j].runs
                                   for j in ("f0", "f1")))
    run_slurm(cluster, "scancel", never)
    ours = {"f0", "f1", "f2"}  # (jobs an earlier test left ending may be told too)
    cycle_until(agent, lambda: agent.history.ended_ids() >= ours)
    for _ in range(5):  # later readings tell it nothing again
        agent.cycle()
    heard = [(j, at) for j, at in policy.finished if j in ours]
    told = dict(heard)
    assert sorted(j for j, _ in heard) == ["f0", "f1", "f2"]  # each once
    for job_id in ("f0", "f1"):
        run = agent.history.jobs[job_id].runs[-1]
        assert run.finished
        assert run.end is not None
        # at its run's end, in trace time (speedup 1: Unix time minus the origin)
        assert told[job_id] == pytest.approx(agent.history.trace_time(run.end))
        assert told[job_id] > agent.history.trace_time(run.start)
    assert agent.history.jobs["f2"].ended == "CANCELLED"


def test_a_decision_over_its_timeout_is_cut_and_changes_nothing(
        cluster: LocalCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The policy takes a minute per decision; the agent's limit is 0.5 s: two cycles
    # end in seconds, each call logged as the policy's failure, and the job stays held.
    job = submit(cluster, meta("s0", 1))
    agent = live_agent(cluster, Stuck(), tmp_path / "events.jsonl", decision_timeout_s=0.5)
    agent._next_round = -1.0  # (a decision is due at every cycle: the queue changes not)
    sleeps = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        agent._last_seen = ()  # a reading that differs: decide again
        if len(sleeps) == 2:
            raise StopRunError

    agent.sleep = sleep
    began = time.monotonic()
    with caplog.at_level(logging.ERROR), pytest.raises(StopRunError):
        agent.run()
    assert time.monotonic() - began < 50  # two calls cut, not one minute each
    over = [r for r in caplog.records if "ran over its limit of 0.5 s" in r.getMessage()]
    assert len(over) == 2
    record = job_record(cluster, job)
    assert (record["job_state"], record["priority"]) == ("PENDING", 0)  # still held


def test_the_policy_solves_log_at_debug_as_a_replays_do(
        cluster: LocalCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # progress solves a MILP at each decision: its stages are a replay's decisions, at
    # DEBUG (``-v`` is the agent's own lines, not one solver line per decision).
    from hetsched.registry import rolling

    for index in range(4):  # 16 GPUs asked of 12: the round's MILP chooses
        submit(cluster, meta(f"d{index}", 4), seconds=30)
    agent = live_agent(cluster, rolling("progress"), tmp_path / "events.jsonl")  # type: ignore[arg-type]
    cycles = []

    def sleep(seconds: float) -> None:
        cycles.append(seconds)
        if len(cycles) == 3:
            raise StopRunError

    agent.sleep = sleep
    with caplog.at_level(logging.DEBUG), pytest.raises(StopRunError):
        agent.run()
    solver = [r for r in caplog.records if r.name.startswith("hetsched.formulations")]
    assert solver  # it solved
    assert {r.levelno for r in solver} == {logging.DEBUG}


def test_a_cancelled_or_failed_job_ends_so_not_as_a_preemption(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # Two one-GPU jobs the agent starts: one cancelled as it runs, one whose script
    # exits 1. Neither finished; neither was preempted: the outputs say how each ended.
    cancelled = submit(cluster, meta("x0", 1), seconds=60)
    run_slurm(cluster, "sbatch", "-H", "--parsable", f"--partition={cluster.partition}",
              f"--comment={meta('x1', 1)}", "--output=/dev/null", "--wrap", "sleep 1; exit 1")
    policy = Listening()
    agent = live_agent(cluster, policy, tmp_path / "events.jsonl")
    cycle_until(agent, lambda: "x0" in agent.history.jobs and agent.history.jobs["x0"].runs)
    run_slurm(cluster, "scancel", cancelled)
    cycle_until(agent, lambda: agent.history.ended_ids() >= {"x0", "x1"})
    replay = agent.history.replay(None)
    for job_id in ("x0", "x1"):
        record = replay.records[job_id]
        assert len(record.segments) == 1  # it ran once
        assert (record.finish, record.preemptions) == (None, 0)
    assert (agent.history.jobs["x0"].ended, agent.history.jobs["x1"].ended) == (
        "CANCELLED", "FAILED")
    states = agent.history.end_states()  # (and what summary.json's end_states says)
    assert states["CANCELLED"] >= 1
    assert states["FAILED"] >= 1
    assert {j for j, _ in policy.finished} >= {"x0", "x1"}
