"""The agent shows its policy what a replay's would see under ``--knowledge`` (issue 64):
not the metadata's steps but a guess from the jobs it saw complete (QSSF's history rule,
hetsched.knowledge), against the real local cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.records import Job
from hetsched.files.replay_inputs import throughputs
from hetsched.knowledge import PRIOR_S, knowledge_view
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RollingFifo
from hetsched.slurm.agent import Agent, AgentSettings
from hetsched.slurm.control import SlurmControl
from hetsched.slurm.history import History
from hetsched.slurm.live import SlurmCluster
from hetsched.slurm.local import LocalCluster
from tests.slurm.test_agent import cycle_until, meta, submit

#: The metadata's steps of every job here: never shown to the policy under a guess.
SECRET = 777_777.0


class Seeing(PolicyHooks):
    """FIFO that keeps the work and the steps left it was shown, by job id."""

    name = "seeing-fifo"
    round_s = None

    def __init__(self) -> None:
        self.fifo = RollingFifo()
        self.work: dict[str, set[float]] = {}
        self.left: dict[str, set[float]] = {}

    def decide(self, state: ClusterState) -> Decision:
        for job in state.pending:
            self.work.setdefault(job.id, set()).add(job.work)
            self.left.setdefault(job.id, set()).add(state.remaining[job.id])
        for run in state.running:
            self.work.setdefault(run.job.id, set()).add(run.job.work)
            self.left.setdefault(run.job.id, set()).add(run.remaining)
        return self.fifo.decide(state)


def knowing_agent(cluster: LocalCluster, policy: PolicyHooks, journal: Path,
                  knowledge: str) -> Agent:
    live = SlurmCluster(SlurmControl(env=cluster.env(), patience_s=30), cluster.partition)
    first = live.read().cluster
    model = throughputs(first, None).model
    return Agent(live, policy, model, History(journal),  # type: ignore[arg-type]
                 AgentSettings(poll_s=0.1), knowledge=knowledge_view(knowledge, first, model))


@pytest.mark.parametrize("knowledge", ["none", "estimate"])
def test_the_policy_sees_guesses_not_the_metadatas_steps(
        cluster: LocalCluster, tmp_path: Path, knowledge: str) -> None:
    # k0 (SECRET steps) runs 2 s and completes; k1 (twice as many) arrives (is first
    # seen) after it completed. Under "none" both are guessed at PRIOR_S ideal seconds;
    # under "estimate" k0 at the prior (nothing had completed) and k1 at k0's true ideal
    # duration (its metadata's steps over its fastest speed, learned at its completion;
    # the geometric mean of one job), times k1's fastest speed (the same type and count):
    # SECRET steps, to 1e-12 (the mean goes through log and exp). k1's own steps never
    # reach the policy, nor k0's under "none".
    policy = Seeing()
    agent = knowing_agent(cluster, policy, tmp_path / "events.jsonl", knowledge)
    submit(cluster, meta("k0", 1, work=SECRET), seconds=2)
    cycle_until(agent, lambda: "k0" in agent.history.ended_ids())
    submit(cluster, meta("k1", 1, arrival=1.0, work=2 * SECRET), seconds=2)
    cycle_until(agent, lambda: "k1" in agent.history.ended_ids())
    assert agent.knowledge is not None
    speed = agent.knowledge.speeds.fastest(Job("k", 0.0, "image-cnn-small", 1, SECRET))
    prior = PRIOR_S * speed
    assert policy.work["k0"] == {prior}  # shown while it waited and ran (doubled never:
    # a 2-s run does not pass an hour's guess)
    (k1,) = policy.work["k1"]  # one figure: a 2-s run does not pass its guess either
    assert k1 == (prior if knowledge == "none" else pytest.approx(SECRET, rel=1e-12))
    seen = {value for values in (*policy.work.values(), *policy.left.values())
            for value in values}
    assert 2 * SECRET not in seen
    if knowledge == "none":
        assert SECRET not in seen
    accuracy = agent.knowledge.accuracy()
    assert accuracy["jobs"] == 2
    assert accuracy["levels"] == ({"prior": 2} if knowledge == "none"
                                  else {"prior": 1, "type": 1})

