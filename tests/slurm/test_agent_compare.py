"""The documented workflow against the real local cluster: a trace submitted, run by the
agent, replayed, and the two set side by side with ``hetsched compare``, which finds
them alike (the agent's summary.json names the trace its jobs came from and the GPUs it
ran on) and warns only where they differ."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.slurm.local import LocalCluster
from tests.helpers import exit_code
from tests.slurm.test_submit import SPEEDUP, _submit


@pytest.mark.slow  # (the agent runs four jobs to completion: about 20 s; CI runs it)
def test_compare_finds_an_agent_run_and_its_replay_alike(
        cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _submit(cluster, tmp_path)
    agent = tmp_path / "agent"
    ran = subprocess.run(
        [sys.executable, "-m", "hetsched", "slurm", "run", "--policy", "fifo", "--out",
         str(agent), "--cluster-dir", str(cluster.state_dir), "--poll", "0.1",
         "--stop-after", "4", "--checkpoints", str(tmp_path / "checkpoints")],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "SLURM_CONF": str(cluster.conf_path)}, check=False)
    assert ran.returncode == 0, ran.stderr
    summary = json.loads((agent / "summary.json").read_text())
    # the trace's file name (from the jobs' metadata) and the GPUs found in Slurm
    assert (summary["trace"], summary["cluster"], summary["jobs"]) == (
        "trace.csv", "v100=8,k80=4", 4)
    replayed = tmp_path / "replay"
    assert exit_code(["replay", str(tmp_path / "trace.csv"), "--format", "native",
                      "--cluster", "k80=4,v100=8", "--policy", "fifo", "--restart-penalty",
                      "12", "--out", str(replayed)]) == 0
    capsys.readouterr()
    assert exit_code(["compare", str(agent), str(replayed)]) == 0
    said = capsys.readouterr()
    assert "compare with care" not in said.out + said.err
    assert "different" not in said.out + said.err
    # A replay on another cluster is still told apart.
    other = tmp_path / "other"
    assert exit_code(["replay", str(tmp_path / "trace.csv"), "--format", "native",
                      "--cluster", "v100=8,k80=8", "--policy", "fifo", "--restart-penalty",
                      "12", "--out", str(other)]) == 0
    capsys.readouterr()
    assert exit_code(["compare", str(agent), str(other)]) == 0
    said = capsys.readouterr()
    assert "the runs replayed different clusters" in said.out + said.err
    assert SPEEDUP == 100.0  # (the agent's times are trace times at this speedup)
