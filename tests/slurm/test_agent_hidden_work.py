"""Jobs that do not say how long they train (``slurm submit --hide-work``: no ``work`` in
the comment), against the real local cluster: the agent schedules them on a guess from
the jobs it saw complete (QSSF's history rule, as ``--knowledge estimate``), never shows
the placeholder its records hold, learns each one's steps when it completes, and its
outputs pass the checker."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hetsched.core.records import Job
from hetsched.files.replay_inputs import throughputs
from hetsched.knowledge import PRIOR_S
from hetsched.replaying import check_replay
from hetsched.slurm.agent import Agent, AgentSettings
from hetsched.slurm.checkpoint import read_checkpoint
from hetsched.slurm.control import SlurmControl
from hetsched.slurm.history import History
from hetsched.slurm.live import SlurmCluster
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.metadata import HIDDEN_WORK, JobMeta
from tests.slurm.commands import job_record, run_agent
from tests.slurm.test_agent import ORIGIN, cycle_until, submit
from tests.slurm.test_agent_knowledge import Seeing
from tests.slurm.test_submit import _submit


def hidden(job_id: str, arrival: float = 0.0) -> str:
    """The comment of a one-GPU image-cnn-small job that does not say its work."""
    return JobMeta(Job(job_id, arrival, "image-cnn-small", 1, 5.0), origin=ORIGIN,
                   speedup=1.0, restart_penalty_s=0.0, work_hidden=True).to_comment()


def test_a_job_without_its_steps_is_shown_a_guess_and_its_steps_are_learned(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # h0 sleeps 2 s and completes; h1 (the same type and size) is first seen after it.
    # Neither comment gives the work and the agent runs without --knowledge. h0 is shown
    # the prior guess (PRIOR_S ideal seconds at its fastest speed); when it completes,
    # its steps are what it ran (no report: its seconds at the model's speed), and h1 is
    # guessed at those steps (the history of one job of its type: its ideal duration
    # times the same fastest speed). The placeholder the records hold is never shown.
    policy = Seeing()
    live = SlurmCluster(SlurmControl(env=cluster.env(), patience_s=30), cluster.partition)
    model = throughputs(live.read().cluster, None).model
    agent = Agent(live, policy, model, History(tmp_path / "events.jsonl"),
                  AgentSettings(poll_s=0.1))
    submit(cluster, hidden("h0"), seconds=2)
    cycle_until(agent, lambda: "h0" in agent.history.ended_ids())
    submit(cluster, hidden("h1", arrival=1.0), seconds=2)
    cycle_until(agent, lambda: "h1" in agent.history.ended_ids())
    assert agent.guesses is not None
    speed = agent.guesses.speeds.fastest(Job("k", 0.0, "image-cnn-small", 1, 1.0))
    assert policy.work["h0"] == {PRIOR_S * speed}
    replay = agent.history.replay(agent.truth)
    done = {job_id: record.job.work for job_id, record in replay.records.items()}
    # about 2 s at the speed (Slurm's times are whole seconds)
    assert 0.5 * speed < done["h0"] < 4.5 * speed
    (h1,) = policy.work["h1"]
    assert h1 == pytest.approx(done["h0"], rel=1e-9)
    shown = {v for values in (*policy.work.values(), *policy.left.values()) for v in values}
    assert max(shown) < HIDDEN_WORK / 1e3
    assert check_replay(replay, [r.job for r in replay.records.values()], agent.truth) == []
    accuracy = agent.hidden_accuracy()
    assert (accuracy["jobs"], accuracy["jobs_without_work"], accuracy["levels"]) == \
        (2, 2, {"prior": 1, "type": 1})


@pytest.mark.slow  # (the agent runs four emulated jobs to completion: about 20 s)
def test_emulated_jobs_that_hide_their_work_run_to_their_own_end(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # submit --hide-work: the comments carry no work, each emulator is told its own in
    # its environment. The agent (progress, which weighs jobs by their work left) runs
    # all four on guesses; each trains exactly its trace's steps (its checkpoint), the
    # outputs pass the checker, and summary.json says how good the guesses were.
    rows = _submit(cluster, tmp_path, "--hide-work")
    for row in rows:
        assert '"work"' not in job_record(cluster, row["slurm_job_id"])["comment"]
    out = tmp_path / "agent"
    ran = run_agent(cluster, out, "--policy", "progress", "--stop-after", "4",
                    "--checkpoints", str(tmp_path / "checkpoints"), timeout_s=300)
    assert ran.returncode == 0, ran.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["checker_violations"]) == (4, 0)
    assert summary["work_guesses"]["jobs"] == 4
    assert summary["work_guesses"]["jobs_without_work"] == 4
    steps = {}
    for row in rows:
        checkpoint = read_checkpoint(tmp_path / "checkpoints" / f"{row['slurm_job_id']}.json")
        assert checkpoint is not None
        steps[row["job"]] = checkpoint.steps
    assert steps == {"a": 1500.0, "b": 2500.0, "c": 1500.0, "d": 1500.0}
    with (out / "jobs.csv").open(newline="") as handle:
        assert all(row["finish"] for row in csv.DictReader(handle))
