"""A managed job that can never run (hetsched.slurm.runnable) against the real local
cluster: the agent says so once, with why, leaves it held and out of every decision, so
the jobs behind it run, and writes its outputs at the end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from hetsched.files.replay_inputs import throughputs
from hetsched.slurm.control import SlurmControl
from hetsched.slurm.live import SlurmCluster
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.runnable import why_never_runs
from tests.slurm.commands import job_record, run_agent
from tests.slurm.test_agent import meta, submit


def test_a_job_that_can_never_run_is_said_once_and_holds_nobody_up(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # First in the queue: a type no throughput source knows, and a gang of 64 GPUs (the
    # cluster has 8 V100s and 4 K80s); then a one-GPU job of 2 s. FIFO, shown the first
    # two, would wait for them for ever.
    unknown = submit(cluster, meta("u0", 1, arrival=0.0, job_type="no-such-model"))
    huge = submit(cluster, meta("h0", 64, arrival=0.5))
    submit(cluster, meta("g0", 1, arrival=1.0), seconds=2)
    out = tmp_path / "agent"
    ran = run_agent(cluster, out, "--stop-after", "1", "--checkpoints",
                    str(tmp_path / "checkpoints"))
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr
    said = [line for line in ran.stderr.splitlines() if "can never run" in line]
    assert len(said) == 2, ran.stderr  # once each, over many cycles
    assert "job u0" in said[0]
    assert "no positive throughput" in said[0]
    assert "job h0" in said[1]
    assert "gang larger than any GPU type's total" in said[1]
    for job in (unknown, huge):  # still held
        assert (job_record(cluster, job)["job_state"], job_record(cluster, job)["priority"]
                ) == ("PENDING", 0)
    with (out / "jobs.csv").open(newline="") as handle:
        rows = {row["job"]: row for row in csv.DictReader(handle)}
    assert rows["g0"]["finish"] != ""
    assert (rows["u0"]["start"], rows["h0"]["start"]) == ("", "")
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["jobs"], summary["completed"]) == (3, 1)
    # The checker ran over what ran (g0 here sleeps rather than trains, so it finds its
    # steps too quick) and left the two that never could out.
    assert isinstance(summary["checker_violations"], int)
    assert not [line for line in ran.stderr.splitlines()
                if "checker: u0" in line or "checker: h0" in line]


def test_why_never_runs_names_the_cause(cluster: LocalCluster) -> None:
    live = SlurmCluster(SlurmControl(env=cluster.env(), patience_s=30), cluster.partition)
    found = live.read().cluster
    model = throughputs(found, None).model
    from hetsched.core.records import Job

    assert why_never_runs(Job("a", 0.0, "image-cnn-small", 4, 100.0), found, model) == ""
    assert "no positive throughput" in why_never_runs(
        Job("b", 0.0, "no-such-model", 1, 100.0), found, model)
    assert "gang larger" in why_never_runs(Job("c", 0.0, "image-cnn-small", 16, 100.0),
                                           found, model)
