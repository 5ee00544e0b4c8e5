"""The documented workflow against the real local cluster: a trace submitted, run by the
agent, replayed, and the two set side by side with ``hetsched compare``, which finds
them alike (the agent's summary.json names the trace its jobs came from and the GPUs it
ran on) and warns only where they differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.slurm.local import LocalCluster
from tests.helpers import exit_code
from tests.slurm.commands import run_agent
from tests.slurm.test_submit import SPEEDUP, _submit


@pytest.mark.slow  # (the agent runs four jobs to completion: about 20 s; CI runs it)
def test_compare_finds_an_agent_run_and_its_replay_alike(
        cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _submit(cluster, tmp_path)
    agent = tmp_path / "agent"
    ran = run_agent(cluster, agent, "--stop-after", "4", "--checkpoints",
                    str(tmp_path / "checkpoints"), timeout_s=300)
    assert ran.returncode == 0, ran.stderr
    summary = json.loads((agent / "summary.json").read_text())
    # the trace's file name (from the jobs' metadata) and the GPUs found in Slurm
    assert (summary["trace"], summary["cluster"], summary["jobs"]) == (
        "trace.csv", "v100=8,k80=4", 4)

    def compared_with_replay_on(spec: str) -> str:
        """What ``compare`` says of the agent's run beside a replay of the trace on
        ``spec``."""
        replayed = tmp_path / spec.replace(",", "_")
        assert exit_code(["replay", str(tmp_path / "trace.csv"), "--format", "native",
                          "--cluster", spec, "--policy", "fifo", "--restart-penalty", "12",
                          "--out", str(replayed)]) == 0
        capsys.readouterr()
        assert exit_code(["compare", str(agent), str(replayed)]) == 0
        said = capsys.readouterr()
        return said.out + said.err

    said = compared_with_replay_on("k80=4,v100=8")  # the same GPUs, named otherwise
    assert "compare with care" not in said
    assert "different" not in said
    # A replay on another cluster is still told apart.
    assert "the runs replayed different clusters" in compared_with_replay_on("v100=8,k80=8")
    assert SPEEDUP == 100.0  # (the agent's times are trace times at this speedup)
