"""The agent (hetsched.slurm.agent) against the real local cluster: it starts held jobs
where the policy says, on nodes of the right GPU type, never touches a job without
metadata nor gives away its GPUs, leaves a job with bad metadata pending, preempts by
requeueing held, and, restarted, starts nothing twice. The jobs here sleep (the
training emulator's own tests run it); times in the metadata are at speedup 1."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hetsched.allocation.layout import Start
from hetsched.core.records import Job
from hetsched.files.replay_inputs import throughputs
from hetsched.policies.rolling import Decision
from hetsched.registry import rolling
from hetsched.slurm.agent import Agent, AgentSettings
from hetsched.slurm.control import SlurmControl
from hetsched.slurm.history import History
from hetsched.slurm.live import SlurmCluster
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.metadata import JobMeta
from tests.slurm.commands import job_record, run_slurm, wait_for_state


def submit(cluster: LocalCluster, comment: str, seconds: int = 60) -> str:
    """A held job of ``cluster``'s partition with ``comment``, no GPU request."""
    return run_slurm(cluster, "sbatch", "-H", "--parsable", f"--partition={cluster.partition}",
                     f"--comment={comment}", "--output=/dev/null", "--wrap",
                     f"sleep {seconds}")


#: Trace time 0 of every job here (speedup 1).
ORIGIN = time.time()


def meta(job_id: str, gpus: int, arrival: float = 0.0, job_type: str = "image-cnn-small",
         work: float = 1e6) -> str:
    """The metadata comment of a job (trace time from :data:`ORIGIN`, speedup 1)."""
    return JobMeta(Job(job_id, arrival, job_type, gpus, work), origin=ORIGIN,
                   speedup=1.0, restart_penalty_s=0.0).to_comment()


def agent_for(cluster: LocalCluster, policy: str, journal: Path) -> tuple[Agent, SlurmCluster]:
    live = SlurmCluster(SlurmControl(env=cluster.env(), patience_s=30), cluster.partition)
    model = throughputs(live.read().cluster, None).model
    return Agent(live, rolling(policy), model, History(journal),
                 AgentSettings(poll_s=0.1)), live


def running_on(cluster: LocalCluster, tmp_path: Path, job_id: str, first: Start,
               seconds: int = 60) -> tuple[str, Agent, SlurmCluster]:
    """A managed job of ``len(first.gpus)`` GPUs (sleeping ``seconds``) started by an
    agent (fifo) on ``first``'s GPUs and seen running by its history: its Slurm id, the
    agent, the cluster."""
    job = submit(cluster, meta(job_id, len(first.gpus)), seconds)
    agent, live = agent_for(cluster, "fifo", tmp_path / "events.jsonl")
    snapshot = live.read()
    agent.apply(Decision((first,)), snapshot, agent.state(snapshot, 0.0), time.time())
    wait_for_state(cluster, job, {"RUNNING"})
    agent.history.observe(live.read(), time.time())
    return job, agent, live


def cycle_until(agent: Agent, done: object, timeout_s: float = 60.0) -> None:
    """Run agent cycles until ``done()`` holds."""
    began = time.monotonic()
    while not done():  # type: ignore[operator]
        assert time.monotonic() - began < timeout_s, "the agent did not get there"
        agent.cycle()
        time.sleep(0.1)


def test_starts_where_the_policy_says_and_leaves_foreign_jobs_alone(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # A job without metadata holds all of k80-0 (Slurm placed it). Three managed jobs
    # of 4 GPUs and one with bad metadata wait, held. FIFO can start two (one per V100
    # node); the third must wait for a node: k80-0 is not free, whatever the policy
    # sees, and the bad one stays pending.
    foreign = run_slurm(cluster, "sbatch", "--parsable", f"--partition={cluster.partition}",
                        "--nodelist=k80-0", "--gres=gpu:4", "--output=/dev/null", "--wrap",
                        "sleep 120")
    wait_for_state(cluster, foreign, {"RUNNING"})
    managed = [submit(cluster, meta(f"m{i}", 4, arrival=float(i))) for i in range(3)]
    bad = submit(cluster, 'hetsched {"v": 1, "job": {"id": "x", "num_gpus": -2}}')
    agent, live = agent_for(cluster, "fifo", tmp_path / "events.jsonl")
    cycle_until(agent, lambda: sum(job_record(cluster, j)["job_state"] == "RUNNING"
                                   for j in managed) == 2)
    for _ in range(5):
        agent.cycle()
    records = {j: job_record(cluster, j) for j in [*managed, bad, foreign]}
    running = [records[j] for j in managed if records[j]["job_state"] == "RUNNING"]
    assert sorted(r["nodes"] for r in running) == ["v100-0", "v100-1"]
    assert all(r["gres_detail"] == ["gpu:v100:4(IDX:0-3)"] for r in running)
    assert records[managed[2]]["job_state"] == "PENDING"  # fifo: m0, m1 first
    assert records[managed[2]]["priority"] == 0  # still held: never given k80-0
    assert (records[bad]["job_state"], records[bad]["priority"]) == ("PENDING", 0)
    assert int(bad) in live.read().rejected
    assert records[foreign]["job_state"] == "RUNNING"
    assert (records[foreign]["nodes"], records[foreign]["restart_cnt"]) == ("k80-0", 0)


def test_preempts_by_requeueing_held_and_starts_again_elsewhere(
        cluster: LocalCluster, tmp_path: Path) -> None:
    job = submit(cluster, meta("p0", 2))
    agent, live = agent_for(cluster, "fifo", tmp_path / "events.jsonl")
    snapshot = live.read()
    state = agent.state(snapshot, 0.0)
    first = Start("p0", "v100", ("v100-1/2", "v100-1/3"))
    assert agent.apply(Decision((first,)), snapshot, state, time.time()) == (["p0"], [])
    record, _ = wait_for_state(cluster, job, {"RUNNING"})
    assert record["nodes"] == "v100-1"
    agent.history.observe(live.read(), time.time())
    snapshot = live.read()
    state = agent.state(snapshot, 1.0)
    assert [r.job.id for r in state.running] == ["p0"]
    started, preempted = agent.apply(Decision(preempt=("p0",)), snapshot, state, time.time())
    assert (started, preempted) == ([], ["p0"])
    record, _ = wait_for_state(cluster, job, {"PENDING"})
    assert (record["priority"], record["restart_cnt"]) == (0, 1)  # held, same job id
    # Started again on the other GPU type: k80-0.
    snapshot = live.read()
    state = agent.state(snapshot, 2.0)
    assert [j.id for j in state.pending] == ["p0"]
    moved = Start("p0", "k80", ("k80-0/0", "k80-0/1"))
    assert agent.apply(Decision((moved,)), snapshot, state, time.time()) == (["p0"], [])
    record, _ = wait_for_state(cluster, job, {"RUNNING"})
    assert record["nodes"] == "k80-0"
    assert record["gres_detail"] == ["gpu:k80:2(IDX:0-1)"]


def test_a_move_restarts_where_its_decision_put_it_with_its_gpus_kept_meanwhile(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # One decision preempts p0 (on v100-1) and starts it on k80-0, as a replay does. Slurm
    # must requeue it before it can start again; until then the policy sees it running
    # on k80-0 (those GPUs not free, p0 not waiting), so a later decision cannot give
    # them away, and the agent starts it there itself once it is held and pending.
    job, agent, live = running_on(cluster, tmp_path, "p0",
                                  Start("p0", "v100", ("v100-1/2", "v100-1/3")))
    snapshot = live.read()
    moved = Start("p0", "k80", ("k80-0/0", "k80-0/1"))
    assert agent.apply(Decision((moved,), ("p0",)), snapshot, agent.state(snapshot, 1.0),
                       time.time()) == (["p0"], ["p0"])
    state = agent.state(live.read(), 2.0)
    assert [(r.job.id, r.gpus) for r in state.running] == [("p0", moved.gpus)]
    assert not state.pending
    assert not set(moved.gpus) & state.free
    live.handed_over(["p0"])
    cycle_until(agent, lambda: job_record(cluster, job)["job_state"] == "RUNNING"
                and job_record(cluster, job)["restart_cnt"] == 1)
    record = job_record(cluster, job)
    assert (record["nodes"], record["gres_detail"]) == ("k80-0", ["gpu:k80:2(IDX:0-1)"])
    # The move's requeue-to-RUNNING is measured once (summary.json's move_latency_*).
    agent.cycle()
    moves = agent.history.move_latencies()
    assert len(moves) == 1
    assert moves[0] > 0


def test_a_released_job_that_started_since_the_reading_is_requeued_not_left_running(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # The agent read p1 released and not started, decided to stop it, and Slurm started
    # it in between. "scontrol hold" of a running job exits 0 and leaves it running with
    # its GPUs, which the agent would hand to another job; it must be requeued.
    job = submit(cluster, meta("p1", 1))
    agent, live = agent_for(cluster, "fifo", tmp_path / "events.jsonl")
    snapshot = live.read()
    agent.apply(Decision((Start("p1", "v100", ("v100-0/0",)),)), snapshot,
                agent.state(snapshot, 0.0), time.time())
    # Its begin time a few seconds ahead, so that this reading shows it not started.
    run_slurm(cluster, "scontrol", "update", f"JobId={job}", "StartTime=now+3")
    assert live.read().jobs["p1"].released
    wait_for_state(cluster, job, {"RUNNING"})
    live.preempt("p1")
    record, _ = wait_for_state(cluster, job, {"PENDING"})
    assert (record["priority"], record["restart_cnt"]) == (0, 1)  # requeued, held
    # Released and still pending when preempted: held, no requeue (Slurm refuses one).
    other = submit(cluster, meta("p2", 4))
    snapshot = live.read()
    agent.apply(Decision((Start("p2", "k80", ("k80-0/0", "k80-0/1", "k80-0/2", "k80-0/3")),)),
                snapshot, agent.state(snapshot, 1.0), time.time())
    run_slurm(cluster, "scontrol", "update", f"JobId={other}", "StartTime=now+3600")
    assert live.read().jobs["p2"].released  # released, and it cannot start before
    live.preempt("p2")
    record = job_record(cluster, other)
    assert (record["job_state"], record["priority"], record["restart_cnt"]) == \
        ("PENDING", 0, 0)


def test_a_restarted_agent_starts_nothing_twice(cluster: LocalCluster, tmp_path: Path) -> None:
    jobs = [submit(cluster, meta(f"r{i}", 4, arrival=float(i))) for i in range(4)]
    journal = tmp_path / "events.jsonl"
    agent, _ = agent_for(cluster, "fifo", journal)
    cycle_until(agent, lambda: sum(job_record(cluster, j)["job_state"] == "RUNNING"
                                   for j in jobs) == 3)
    agent.history.close()
    del agent  # killed: a new agent on the same journal
    again, live = agent_for(cluster, "fifo", journal)
    mine = {"r0", "r1", "r2", "r3"}
    assert mine <= set(again.history.jobs)  # (and the ended jobs of other tests)
    for _ in range(8):
        again.cycle()
        time.sleep(0.1)
    records = [job_record(cluster, j) for j in jobs]
    assert [r["restart_cnt"] for r in records] == [0, 0, 0, 0]
    assert sorted(r["job_state"] for r in records) == ["PENDING", "RUNNING", "RUNNING",
                                                       "RUNNING"]
    assert records[3]["job_state"] == "PENDING"  # no node left for the fourth
    assert sum(len(run.gpus) for job_id in mine for run in again.history.jobs[job_id].runs) \
        == 12
    assert live.read().free == frozenset()


def test_an_unmanaged_partition_shows_no_jobs(cluster: LocalCluster) -> None:
    live = SlurmCluster(SlurmControl(env=cluster.env(), patience_s=30), "another")
    with pytest.raises(Exception, match="no GPU nodes"):
        live.read()



def test_an_uneven_gang_runs_as_the_policy_laid_it(cluster: LocalCluster, tmp_path: Path
                                                   ) -> None:
    # The policy gives u0 three V100s of v100-0 and one of v100-1. Slurm gives every node
    # of a TresPerNode request the same count, so the agent asks for four GPUs over the
    # two nodes (TresPerJob), which Slurm splits itself: three on the first node (all it
    # may take, leaving one for the second), one on the second, as the policy laid it.
    job = submit(cluster, meta("u0", 4))
    agent, live = agent_for(cluster, "fifo", tmp_path / "events.jsonl")
    snapshot = live.read()
    state = agent.state(snapshot, 0.0)
    uneven = Start("u0", "v100", ("v100-0/0", "v100-0/1", "v100-0/2", "v100-1/0"))
    assert agent.apply(Decision((uneven,)), snapshot, state, time.time()) == (["u0"], [])
    record, _ = wait_for_state(cluster, job, {"RUNNING"})
    assert record["nodes"] == "v100-[0-1]"
    assert record["gres_detail"] == ["gpu:v100:3(IDX:0-2)", "gpu:v100:1(IDX:0)"]
    assert record["tres_per_node"] == ""
    # Read back, the agent sees the GPUs Slurm gave.
    assert live.read().jobs["u0"].gpus == uneven.gpus


def test_a_job_released_seconds_after_its_requeue_starts_and_stays(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # Released in a later wall second than its requeue, a job needs no begin time (Slurm
    # kills only a job started in the second its credential was revoked): it starts at
    # Slurm's next pass and keeps running, requeued once.
    job, agent, live = running_on(cluster, tmp_path, "q0",
                                  Start("q0", "v100", ("v100-0/0", "v100-0/1")))
    snapshot = live.read()
    agent.apply(Decision(preempt=("q0",)), snapshot, agent.state(snapshot, 1.0), time.time())
    requeued = time.time()
    wait_for_state(cluster, job, {"PENDING"})
    time.sleep(max(0.0, int(requeued) + 1.05 - time.time()))
    snapshot = live.read()
    again = Start("q0", "k80", ("k80-0/0", "k80-0/1"))
    assert agent.apply(Decision((again,)), snapshot, agent.state(snapshot, 2.0),
                       time.time()) == (["q0"], [])
    record, _ = wait_for_state(cluster, job, {"RUNNING"})
    time.sleep(1.5)
    record = job_record(cluster, job)
    assert (record["job_state"], record["nodes"], record["restart_cnt"]) == (
        "RUNNING", "k80-0", 1)
