"""A real training job under the real local Slurm cluster: examples/train_digits.py
submitted with ``hetsched slurm submit --script``, started pinned on a K80, requeued
(``scontrol requeuehold``, as the agent preempts) and released pinned on a V100, requeued
again and released on the other V100 node, where it completes. Its report (hetsched's
checkpoint file, written through hetsched.job) shows every run, what each did and lost."""

from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path

import pytest

from hetsched.job import Checkpoint
from hetsched.slurm.checkpoint import checkpoint_path, read_checkpoint
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.submit import submitted_rows
from tests.helpers import exit_code
from tests.slurm.commands import (
    agent_command,
    job_record,
    run_slurm,
    start_pinned,
    wait_for_state,
)

pytest.importorskip("sklearn", reason="the example's data: scikit-learn (the dev and "
                    "examples extras)")

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"
#: The job's work in the trace (its script trains that many steps, told HETSCHED_WORK),
#: a step of at least 10 ms (about 100 steps per wall second), a checkpoint every 50.
STEPS, EVERY = 1200, 50
COMMAND = f"{SCRIPT} --step-time 0.01 --checkpoint-every {EVERY}"
TRACE = ("id,arrival,job_type,num_gpus,work,deadline,weight,user,allowed_gpu_counts,"
         f"allowed_gpu_types\ndigits,0,image-cnn-small,1,{STEPS},,,,,\n")


def _report(path: Path) -> Checkpoint:
    found = read_checkpoint(path)
    assert found is not None, f"no report {path}"
    return found


def _run_then_requeue(cluster: LocalCluster, slurm_id: str, path: Path) -> None:
    """Wait until the running job reported 100 steps more than its run started from,
    then requeue it held (SIGTERM) and wait until it is pending and its run stopped."""
    deadline = time.monotonic() + 120
    while True:
        found = read_checkpoint(path)
        run = found.runs[-1] if found is not None and found.runs else None
        if run is not None and run.state == "running" and \
                run.steps_end >= run.steps_start + 100:
            break
        assert time.monotonic() < deadline, (found, job_record(cluster, slurm_id))
        time.sleep(0.05)
    run_slurm(cluster, "scontrol", "requeuehold", slurm_id)
    wait_for_state(cluster, slurm_id, {"PENDING"}, timeout_s=60)
    assert _report(path).state == "stopped"


def _release_on(cluster: LocalCluster, slurm_id: str, node: str) -> None:
    """Pin the requeued job to one GPU of ``node`` and release it (the agent's way:
    untyped, StartTime a second ahead, or Slurm kills a job released within the second
    of its requeue)."""
    run_slurm(cluster, "scontrol", "update", f"JobId={slurm_id}", "TresPerNode=gres:gpu:1",
              f"NodeList={node}", "StartTime=now+1")
    run_slurm(cluster, "scontrol", "release", slurm_id)


@pytest.mark.slow  # (three runs of a real training script, two requeues)
def test_a_real_job_is_requeued_twice_across_gpu_types_and_completes(
        cluster: LocalCluster, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE, encoding="utf-8")
    assert exit_code(["slurm", "submit", str(trace), "--format", "native", "--cluster-dir",
                      str(cluster.state_dir), "--state-dir", str(tmp_path), "--speedup",
                      "100", "--script", COMMAND]) == 0
    (row,) = submitted_rows(tmp_path / "submitted.csv")
    slurm_id, path = row["slurm_job_id"], checkpoint_path(tmp_path / "checkpoints",
                                                          row["slurm_job_id"])
    record = job_record(cluster, slurm_id)
    assert (record["job_state"], record["state_reason"]) == ("PENDING", "JobHeldUser")

    start_pinned(cluster, slurm_id, "gres:gpu:1", "k80-0")
    _run_then_requeue(cluster, slurm_id, path)
    _release_on(cluster, slurm_id, "v100-0")
    wait_for_state(cluster, slurm_id, {"RUNNING"}, timeout_s=60)
    _run_then_requeue(cluster, slurm_id, path)
    _release_on(cluster, slurm_id, "v100-1")
    record, _ = wait_for_state(cluster, slurm_id, {"COMPLETED", "FAILED"}, timeout_s=180)
    log = (tmp_path / "logs" / f"{slurm_id}.out").read_text(encoding="utf-8")
    assert (record["job_state"], record["exit_code"]) == ("COMPLETED", 0), log
    assert (record["nodes"], record["restart_cnt"]) == ("v100-1", 2)

    report = _report(path)
    # What the job knew of itself: its id and work from the batch script's environment.
    assert (report.slurm_job_id, report.job, report.work) == (slurm_id, "digits", STEPS)
    assert (report.state, report.steps) == ("completed", STEPS)
    assert [(r.state, r.note, r.restart_count) for r in report.runs] == [
        ("stopped", "SIGTERM", 0), ("stopped", "SIGTERM", 1), ("completed", "", 2)]
    assert report.runs[0].steps_start == 0
    for before, after in zip(report.runs, report.runs[1:], strict=False):
        # Steps lost to a preemption: at most one checkpoint interval (none here: the
        # script saves its checkpoint as it stops).
        assert 0 <= before.steps_end - after.steps_start <= EVERY
        assert after.start >= before.end  # one run at a time
        assert before.steps_end > before.steps_start  # each did some training
    # The GPUs are not the job's to know: left empty in its runs.
    assert {(r.gpu_type, r.gpus, r.throughput) for r in report.runs} == {("", (), 0.0)}
    assert log.count("resumed at step") == 2, log
    assert f"done: {STEPS} steps, test accuracy" in log


def _wait_running_on(cluster: LocalCluster, slurm_id: str, nodes: set[str], path: Path,
                     runs: int) -> None:
    """Wait until the job runs on one of ``nodes`` in its ``runs``-th run and has
    trained 100 steps there."""
    deadline = time.monotonic() + 120
    while True:
        record = job_record(cluster, slurm_id)
        found = read_checkpoint(path) if path.exists() else None
        run = found.runs[-1] if found is not None and len(found.runs) == runs else None
        if record["job_state"] == "RUNNING" and record["nodes"] in nodes and \
                run is not None and run.steps_end >= run.steps_start + 100:
            return
        assert time.monotonic() < deadline, (record, found)
        time.sleep(0.05)


@pytest.mark.slow  # (the agent runs a real training script three times)
def test_the_agent_runs_a_real_job_resumed_across_gpu_types(
        cluster: LocalCluster, tmp_path: Path) -> None:
    # The agent (fifo, learning from the catalogue) schedules examples/train_digits.py on
    # a V100. The operator drains both V100 nodes and requeues the job: the agent holds
    # it and starts it on the K80 node, where it resumes from its checkpoint; then the
    # V100s come back, the K80 node is drained, the job requeued again, and the agent
    # resumes it on a V100, where it completes. jobs.csv has its three runs (two
    # preemptions, V100 -> K80 -> V100), its end state and its reported throughput, which
    # lies between what was learned on each GPU type (a mean of the two, weighted by time).
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE, encoding="utf-8")
    out = tmp_path / "agent"
    command, env = agent_command(cluster, out, "--stop-after", "1", "--checkpoints",
                                 str(tmp_path / "checkpoints"), "--learn", "catalogue")
    log_file = (tmp_path / "agent.log").open("w")
    agent = subprocess.Popen(command, env=env, stdout=log_file, stderr=log_file)
    v100s, k80 = "NodeName=v100-0,v100-1", "NodeName=k80-0"
    try:
        assert exit_code(["slurm", "submit", str(trace), "--format", "native",
                          "--cluster-dir", str(cluster.state_dir), "--state-dir",
                          str(tmp_path), "--speedup", "100", "--script", COMMAND]) == 0
        (row,) = submitted_rows(tmp_path / "submitted.csv")
        slurm_id = row["slurm_job_id"]
        path = checkpoint_path(tmp_path / "checkpoints", slurm_id)
        _wait_running_on(cluster, slurm_id, {"v100-0", "v100-1"}, path, runs=1)
        run_slurm(cluster, "scontrol", "update", v100s, "State=DRAIN", "Reason=test")
        run_slurm(cluster, "scontrol", "requeue", slurm_id)
        _wait_running_on(cluster, slurm_id, {"k80-0"}, path, runs=2)
        run_slurm(cluster, "scontrol", "update", v100s, "State=RESUME")
        run_slurm(cluster, "scontrol", "update", k80, "State=DRAIN", "Reason=test")
        run_slurm(cluster, "scontrol", "requeue", slurm_id)
        agent.wait(timeout=180)
    finally:
        if agent.poll() is None:
            agent.kill()
        log_file.close()
        for nodes in (v100s, k80):  # (refused for a node not drained: no matter)
            subprocess.run(["scontrol", "update", nodes, "State=RESUME"], env=cluster.env(),
                           capture_output=True, check=False, timeout=30)
    said = (tmp_path / "agent.log").read_text()
    assert agent.returncode == 0, said
    report = _report(path)
    assert [r.state for r in report.runs] == ["stopped", "stopped", "completed"]
    for before, after in zip(report.runs, report.runs[1:], strict=False):
        assert 0 <= before.steps_end - after.steps_start <= EVERY  # lost: one interval
    with (out / "jobs.csv").open() as file:
        (job,) = csv.DictReader(file)
    assert (job["gpu_types"], job["preemptions"], job["end_state"]) == (
        "v100|k80", "2", "completed")
    learned = {(r["gpu_type"], r["num_gpus"]): float(r["throughput"])
               for r in csv.DictReader((out / "learned_throughput.csv").open())
               if r["job_type"] == "image-cnn-small"}
    assert set(learned) == {("v100", "1"), ("k80", "1")}
    assert min(learned.values()) <= float(job["reported_throughput"]) <= max(learned.values())
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["held_again"], summary["learned_keys"]) == (1, 2, 2)
    # Its runs go at its own speed, not the catalogue's: the checker leaves it out.
    assert (summary["checker_violations"], summary["checker_left_out_real_jobs"]) == (0, 1)
