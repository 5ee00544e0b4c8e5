"""The agent under faults, against the real local cluster (hetsched.slurm.recovery): a job
requeued by someone else is held and placed by the policy again; a job that completed
is never requeued by a preemption; a node that loses its power takes no job with it (the
job runs again from its checkpoint and completes once, the outputs say so and pass the
checker); GPUs Slurm counts used that no job holds are seen."""

from __future__ import annotations

import csv
import json
import logging
import subprocess
import time
from pathlib import Path

import pytest

from hetsched.allocation.layout import Start
from hetsched.core.throughput import Placement
from hetsched.files.cluster_spec import parse_cluster
from hetsched.files.generate import catalogue_table
from hetsched.slurm.checkpoint import checkpoint_path, read_checkpoint
from hetsched.slurm.control import SlurmRefusedError
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.state import phantom_gpus, read_cluster
from hetsched.slurm.submit import submitted_rows
from tests.helpers import exit_code
from tests.slurm.commands import (
    agent_command,
    free_port,
    job_record,
    run_slurm,
    running,
    wait_for_state,
)
from tests.slurm.test_agent import cycle_until, running_on
from tests.slurm.test_submit import HEADER


def test_a_job_requeued_by_someone_else_is_held_for_the_policy_to_place(
        cluster: LocalCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # An operator requeues a running managed job without holding it (scontrol requeue):
    # pending and released, Slurm would start it again on its pinned node by itself,
    # behind the policy's back. The agent holds it (logged, counted) and the policy
    # starts it again: it runs a second time, seen by the history as two runs.
    job, agent, _live = running_on(cluster, tmp_path, "r0",
                                   Start("r0", "v100", ("v100-0/0",)))
    run_slurm(cluster, "scontrol", "requeue", job)
    record, _ = wait_for_state(cluster, job, {"PENDING"})
    assert record["priority"] != 0  # released: Slurm's to start
    with caplog.at_level(logging.WARNING, logger="hetsched.slurm.recovery"):
        cycle_until(agent, lambda: job_record(cluster, job)["job_state"] == "RUNNING"
                    and len(agent.history.jobs["r0"].runs) == 2)
    assert "released or requeued by Slurm or someone else" in caplog.text
    assert agent.recovery.figures()["held_again"] == 1
    assert job_record(cluster, job)["restart_cnt"] == 1


def test_a_preemption_never_requeues_a_job_that_completed(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # The job's script ended (it slept 1 s): Slurm shows it COMPLETING while its node's
    # epilog waits for the agent's hand-over. A preemption decided on a reading from
    # before is refused (requeued, a finished job would run again), and the job ends
    # COMPLETED, never restarted.
    job, agent, live = running_on(cluster, tmp_path, "c0",
                                  Start("c0", "v100", ("v100-0/0",)), seconds=1)
    wait_for_state(cluster, job, {"COMPLETING", "COMPLETED"})
    with pytest.raises(SlurmRefusedError, match="not running"):
        live.preempt("c0")
    cycle_until(agent, lambda: job_record(cluster, job)["job_state"] == "COMPLETED")
    assert job_record(cluster, job)["restart_cnt"] == 0


def test_gpus_slurm_counts_used_that_no_job_holds_are_phantoms() -> None:
    # sinfo says v100-0 uses GPUs 0-3 and v100-1 GPUs 0-1; the one running job holds
    # v100-0's 0-1. v100-0's 2-3 are held by nobody: phantoms. v100-1 runs a COMPLETING
    # job (Slurm 22.05 lists its GPUs for no job): not counted.
    nodes = [{"name": "v100-0", "gres": "gpu:v100:4", "gres_used": "gpu:v100:4(IDX:0-3)",
              "state": "mixed", "cpus": 8},
             {"name": "v100-1", "gres": "gpu:v100:4", "gres_used": "gpu:v100:2(IDX:0-1)",
              "state": "mixed", "cpus": 8}]
    jobs = [{"job_id": 1, "job_state": "RUNNING", "nodes": "v100-0",
             "gres_detail": ["gpu:v100:2(IDX:0-1)"]},
            {"job_id": 2, "job_state": "COMPLETING", "nodes": "v100-1", "gres_detail": []}]
    cluster, _ = read_cluster(nodes)
    assert phantom_gpus(nodes, jobs, cluster) == {"v100-0/2", "v100-0/3"}


#: Two jobs of one GPU, 6,000 trace s apart on arrival at X = 100, each of about 30 wall
#: s on a V100 (the catalogue's image-cnn-small speed, times 3,000 trace s).
SPEEDUP = 100.0
WALL_S = 30.0


@pytest.mark.slow  # (a node dies and Slurm notices within SlurmdTimeout: about 2 min)
def test_a_job_whose_node_loses_its_power_runs_again_from_its_checkpoint(
        tmp_path: Path) -> None:
    # v100=2,k80=2, one GPU a node. FIFO starts job a on a V100 node; 10 s into its run
    # that node loses its power (slurmd and the job's processes SIGKILLed) and comes back
    # 45 s later. Slurm finds the node dead within SlurmdTimeout (30 s) and the job
    # failed with it; the agent has the job placed by the policy again, it resumes from
    # its last checkpoint, and both jobs complete exactly once: nothing lost, nothing run
    # twice, every end state "completed", the outputs written and passing the checker.
    speed = catalogue_table(["v100"]).throughput("image-cnn-small", "v100", 1,
                                                 Placement.PACKED)
    work = round(speed * WALL_S * SPEEDUP)
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + f"a,0,image-cnn-small,1,{work},,,,,\n"
                     f"b,0,image-cnn-small,1,{work},,,,,\n", encoding="utf-8")
    local = LocalCluster.from_cluster(parse_cluster("v100=2,k80=2"), gpus_per_node=1,
                                      state_dir=tmp_path / "cluster",
                                      port=free_port("faults", 4))
    with running(local) as cluster:
        out = tmp_path / "agent"
        command, env = agent_command(cluster, out, "--stop-after", "2", "--checkpoints",
                                     str(tmp_path / "state" / "checkpoints"))
        log_file = (tmp_path / "agent.log").open("w")
        agent = subprocess.Popen(command, env=env, stdout=log_file, stderr=log_file)
        try:
            assert exit_code(["slurm", "submit", str(trace), "--format", "native",
                              "--cluster-dir", str(cluster.state_dir), "--state-dir",
                              str(tmp_path / "state"), "--speedup", str(SPEEDUP)]) == 0
            rows = {r["job"]: r["slurm_job_id"] for r in
                    submitted_rows(tmp_path / "state" / "submitted.csv")}
            record, _ = wait_for_state(cluster, rows["a"], {"RUNNING"}, timeout_s=60)
            node = record["nodes"]
            time.sleep(10.0)
            cluster.kill_node(node)
            time.sleep(45.0)
            cluster.start_node(node)
            agent.wait(timeout=240)
        finally:
            if agent.poll() is None:
                agent.kill()
            log_file.close()
        said = (tmp_path / "agent.log").read_text()
        assert agent.returncode == 0, said
        jobcomp = (cluster.state_dir / "log" / "jobcomp.txt").read_text().splitlines()
    completed = [line.split("Name=")[1].split()[0] for line in jobcomp
                 if "JobState=COMPLETED" in line]
    assert sorted(completed) == ["hetsched-a", "hetsched-b"]  # each once
    assert any("JobState=NODE_FAIL" in line and "Name=hetsched-a" in line
               for line in jobcomp), jobcomp
    report = read_checkpoint(checkpoint_path(tmp_path / "state" / "checkpoints", rows["a"]))
    assert report is not None
    assert report.state == "completed"
    killed, resumed = report.runs[0], report.runs[-1]
    assert killed.state == "running"  # no last word: its node lost power
    assert 0 < resumed.steps_start == killed.steps_end  # resumed from the checkpoint
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["checker_violations"]) == (2, 0)
    with (out / "jobs.csv").open() as file:
        assert [row["end_state"] for row in csv.DictReader(file)] == ["completed"] * 2
