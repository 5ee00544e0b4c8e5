"""The boundaries of ``hetsched slurm run`` against real daemons: Ctrl-C stops the
agent with its files written (exit 130), and a slurmctld that stops answering is retried
with backoff, said in the log, until it answers again (or the patience runs out)."""

from __future__ import annotations

import csv
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hetsched.slurm.control import SlurmControl, SlurmUnreachableError
from hetsched.slurm.local import LocalCluster
from tests.slurm.commands import free_port, running, wait_for_state
from tests.slurm.test_agent import meta, submit


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell without job control ignores it


def test_ctrl_c_stops_the_agent_with_its_files_written(cluster: LocalCluster,
                                                       tmp_path: Path) -> None:
    job = submit(cluster, meta("c0", 4), seconds=120)
    out = tmp_path / "run"
    agent = subprocess.Popen(
        [sys.executable, "-m", "hetsched", "slurm", "run", "--policy", "fifo", "--out",
         str(out), "--cluster-dir", str(cluster.state_dir), "--poll", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint, env={**os.environ, "SLURM_CONF": str(cluster.conf_path)})
    try:
        record, _ = wait_for_state(cluster, job, {"RUNNING"})
        assert record["nodes"].startswith("v100")  # fifo's first fit: the first node
        deadline = time.monotonic() + 30
        while '"event": "run"' not in (out / "events.jsonl").read_text():
            assert time.monotonic() < deadline, "the agent never saw its job run"
            time.sleep(0.1)
        agent.send_signal(signal.SIGINT)
        _, stderr = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "0 of 1 jobs completed" in stderr
    with (out / "jobs.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    # Its run had not ended: as in an interrupted replay, jobs.csv has the job, unfinished,
    # and only runs that ended as segments; events.jsonl has the run that was going on.
    assert [(r["job"], r["finish"], r["jct"]) for r in rows] == [("c0", "", "")]
    runs = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [(e["job"], e["gpus"]) for e in runs if e["event"] == "run"] == [
        ("c0", ["v100-0/0", "v100-0/1", "v100-0/2", "v100-0/3"])]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "fifo"
    assert summary["interrupted"] is True
    with (out / "decisions.csv").open(newline="") as handle:
        assert [row["started"] for row in csv.DictReader(handle)][:1] == ["1"]


@pytest.fixture
def outage_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster of its own (one node), whose slurmctld a test may kill."""
    with running(LocalCluster.from_gpus({"k80": 4}, state_dir=tmp_path_factory.mktemp("outage"),
                                        port=free_port("outage", 1))) as local:
        yield local


def _kill_slurmctld(local: LocalCluster) -> None:
    pid = local.daemon_pids()["slurmctld"]
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while local.daemon_pids()["slurmctld"] is not None:
        assert time.monotonic() < deadline, "slurmctld outlived SIGKILL"
        time.sleep(0.05)


@pytest.mark.slow  # (waits: backoff, restart penalty; CI runs it)
def test_slurmctld_down_is_retried_with_backoff_until_it_answers(
        outage_cluster: LocalCluster, caplog: pytest.LogCaptureFixture) -> None:
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # the second wait brings slurmctld back
        waits.append(seconds)
        if len(waits) == 2:
            outage_cluster.start()

    control = SlurmControl(env=outage_cluster.env(), patience_s=300, sleep=sleep)
    assert [n["name"] for n in control.nodes()] == ["k80-0"]
    _kill_slurmctld(outage_cluster)
    with caplog.at_level(logging.INFO, logger="hetsched.slurm.control"):
        nodes = control.nodes()
    # With slurmctld down, sinfo --json exits 0 with "errors" and no nodes: that is no
    # answer (taken for the cluster, it would end every job). Tried three times, with
    # waits of 0.5 s and 1 s (doubling); the third try, after the restart, answers.
    assert [n["name"] for n in nodes] == ["k80-0"]
    assert waits == [0.5, 1.0]
    messages = [r.getMessage() for r in caplog.records]
    assert sum("does not answer" in m and "retrying with backoff" in m
               for m in messages) == 1  # said once per outage
    assert any("answers again" in m for m in messages)
    assert control.outages == 1


@pytest.mark.slow  # (waits: backoff, restart penalty; CI runs it)
def test_slurmctld_down_past_the_patience_is_an_error(outage_cluster: LocalCluster) -> None:
    waits: list[float] = []
    control = SlurmControl(env=outage_cluster.env(), patience_s=1.0, sleep=waits.append)
    _kill_slurmctld(outage_cluster)
    # One try of sinfo (its own connection attempts take about 9 s) spends the patience.
    with pytest.raises(SlurmUnreachableError, match=r"did not answer for \d+ s \(sinfo"):
        control.nodes()
    assert waits == []
