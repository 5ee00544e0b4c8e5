"""Handing GPUs over during the epilog (hetsched.slurm.state, docs/slurm.md): a managed
job COMPLETING (its node's epilog runs) frees its GPUs for the policy; the agent releases
the next job onto them and writes the job's hand-over file, the epilog ends, and Slurm
starts the next job then, never sooner. Real daemons: a cluster of its own whose epilog
waits up to 30 s for the agent, so that the agent's polls (0.1 s) see the job COMPLETING
however loaded the machine is."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hetsched.files.replay_inputs import throughputs
from hetsched.registry import rolling
from hetsched.slurm.agent import Agent, AgentSettings
from hetsched.slurm.config import epilog_path
from hetsched.slurm.control import SlurmControl
from hetsched.slurm.history import History
from hetsched.slurm.live import SlurmCluster
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.state import Snapshot
from tests.slurm.commands import free_port, job_record, run_slurm, running, skip_reason
from tests.slurm.test_agent import meta

EPILOG_S = 30.0


@pytest.fixture(scope="module")
def slow_epilog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """k80-0 (4 K80s) whose epilog lasts :data:`EPILOG_S`."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with running(LocalCluster.from_gpus({"k80": 4}, state_dir=tmp_path_factory.mktemp("ho"),
                                        port=free_port("handover", 1),
                                        epilog_s=EPILOG_S)) as cluster:
        yield cluster


@dataclass
class Watched(SlurmCluster):
    """The Slurm binding, keeping every snapshot it reads."""

    seen: list[Snapshot] = field(default_factory=list)

    def read(self) -> Snapshot:
        snapshot = super().read()
        self.seen.append(snapshot)
        return snapshot


def test_the_next_job_is_released_during_the_epilog_and_starts_after_it(
        slow_epilog: LocalCluster, tmp_path: Path) -> None:
    cluster = slow_epilog
    conf = cluster.conf_path.read_text(encoding="utf-8")
    assert f"Epilog={epilog_path(cluster)}" in conf
    # h0 (all four K80s) sleeps 1 s; h1 waits for them, held.
    first = run_slurm(cluster, "sbatch", "-H", "--parsable", f"--comment={meta('h0', 4)}",
                      "--output=/dev/null", "--wrap", "sleep 1")
    second = run_slurm(cluster, "sbatch", "-H", "--parsable",
                       f"--comment={meta('h1', 4, arrival=1.0)}", "--output=/dev/null",
                       "--wrap", "sleep 1")
    live = Watched(SlurmControl(env=cluster.env(), patience_s=30), cluster.partition,
                   handover=cluster.handover_dir)
    agent = Agent(live, rolling("fifo"), throughputs(live.read().cluster, None).model,
                  History(tmp_path / "events.jsonl"), AgentSettings(poll_s=0.1))
    began = time.monotonic()
    while job_record(cluster, second)["job_state"] != "COMPLETED":
        # Without the agent's files each epilog would wait 30 s: 60 s in all.
        assert time.monotonic() - began < 45, "h1 did not complete"
        agent.cycle()
        time.sleep(0.1)
    # Some reading saw h0 COMPLETING with h1 still held: h0's GPUs were free then ...
    at = next(i for i, s in enumerate(live.seen)
              if s.jobs["h0"].handing_over and s.jobs["h1"].waiting)
    assert live.seen[at].free == frozenset(f"k80-0/{i}" for i in range(4))
    # ... and the agent released h1 onto them: the next reading shows h1 released
    # (pending, not held, its GPUs booked) or already running.
    after = live.seen[at + 1]
    assert after.jobs["h1"].released or after.jobs["h1"].state == "RUNNING"
    # Slurm started h1 on the same GPUs once the epilog ended, not before.
    h0, h1 = job_record(cluster, first), job_record(cluster, second)
    assert h1["start_time"] >= h0["end_time"]
    running_now = next(s for s in live.seen[at + 1:] if s.jobs["h1"].state == "RUNNING")
    assert running_now.jobs["h0"].state == "COMPLETED"
    assert running_now.jobs["h1"].gpus == tuple(f"k80-0/{i}" for i in range(4))
    # The runs never overlap in the agent's record either.
    h0_run, h1_run = (agent.history.jobs[job].runs[0] for job in ("h0", "h1"))
    assert h0_run.end is not None
    assert h1_run.start >= h0_run.end
    # Each epilog found its file and removed it.
    assert list(cluster.handover_dir.iterdir()) == []
    run_slurm(cluster, "scancel", f"--partition={cluster.partition}")
