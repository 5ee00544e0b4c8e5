"""The training emulator under the real local Slurm cluster: a held job pinned to a node
runs it and completes its work; requeued mid-run and released again, it resumes from its
checkpoint after the restart penalty. Wall-clock figures are the emulator's own
arithmetic (exact); Slurm's are only bounded, generously."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hetsched.core.records import Job
from hetsched.slurm.checkpoint import Checkpoint, checkpoint_path, read_checkpoint
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.metadata import JobMeta
from hetsched.slurm.submit import Submission, batch_script, submit_one
from tests.slurm.commands import job_record, run_slurm, wait_for_state

#: 2 K80s run image-cnn-small at 15.3 steps per trace s (the built-in catalogue); at
#: X = 50 trace s per wall s that is 765 steps per wall second.
SPEEDUP = 50.0
STEPS_PER_WALL_S = 15.3 * SPEEDUP
#: Restart penalty (trace s): 1 wall s at X = 50.
PENALTY_S = 50.0
#: The most a job may take beyond its emulated time here (Python's start, Slurm's
#: cycle, a busy 2-core machine): a bound, not a figure.
SLACK_S = 30.0


def _submit_held(cluster: LocalCluster, folder: Path, job_id: str, wall_s: float) -> tuple[
        str, JobMeta, Path]:
    """A held job running the emulator, of ``wall_s`` wall seconds on 2 K80s; its Slurm
    id, metadata and checkpoint file."""
    job = Job(job_id, 0.0, "image-cnn-small", 2, STEPS_PER_WALL_S * wall_s)
    meta = JobMeta(job, time.time(), SPEEDUP, PENALTY_S)
    script = batch_script(folder / "checkpoints", None)
    submission = Submission((meta,), folder, None, script, cluster.partition, 4)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    slurm_id = submit_one(meta, submission, cluster.env())
    return slurm_id, meta, checkpoint_path(folder / "checkpoints", slurm_id)


def _pin_and_release(cluster: LocalCluster, slurm_id: str, *extra: str) -> None:
    run_slurm(cluster, "scontrol", "update", f"JobId={slurm_id}", "TresPerNode=gres:gpu:2",
              "NodeList=k80-0", *extra)
    run_slurm(cluster, "scontrol", "release", slurm_id)


def _checkpoint(path: Path) -> Checkpoint:
    found = read_checkpoint(path)
    assert found is not None, f"no checkpoint {path}"
    return found


def test_a_pinned_job_runs_the_emulator_to_its_work(cluster: LocalCluster,
                                                    tmp_path: Path) -> None:
    slurm_id, meta, path = _submit_held(cluster, tmp_path, "pinned", wall_s=2.0)
    record = job_record(cluster, slurm_id)
    assert (record["job_state"], record["state_reason"]) == ("PENDING", "JobHeldUser")
    assert JobMeta.from_comment(record["comment"]) == meta
    assert record["name"] == "hetsched-pinned"
    began = time.time()
    _pin_and_release(cluster, slurm_id)
    record, took = wait_for_state(cluster, slurm_id, {"COMPLETED", "FAILED"},
                                  timeout_s=2.0 + SLACK_S)
    assert (record["job_state"], record["exit_code"]) == ("COMPLETED", 0), \
        (tmp_path / "logs" / f"{slurm_id}.out").read_text(encoding="utf-8")
    assert took >= 2.0
    done = _checkpoint(path)
    assert (done.state, done.steps, done.work, done.job, done.comment) == (
        "completed", meta.job.work, meta.job.work, "pinned", record["comment"])
    (run,) = done.runs
    assert (run.nodes, run.gpus, run.gpu_type, run.placement) == (
        ("k80-0",), ("k80-0/0", "k80-0/1"), "k80", "packed")
    assert (run.throughput, run.steps_start, run.steps_end) == (15.3, 0.0, meta.job.work)
    assert run.resume == run.start  # a first run: no penalty
    assert abs(run.end - run.start - 2.0) < 1e-6  # 1530 steps at 765 per wall s
    assert began - 1.0 <= run.start <= began + SLACK_S
    log = (tmp_path / "logs" / f"{slurm_id}.out").read_text(encoding="utf-8")
    assert "job pinned completed its 1530 steps" in log


@pytest.mark.slow  # (waits: backoff, restart penalty; CI runs it)
def test_a_requeued_job_resumes_from_its_checkpoint_after_the_penalty(
        cluster: LocalCluster, tmp_path: Path) -> None:
    slurm_id, meta, path = _submit_held(cluster, tmp_path, "requeued", wall_s=6.0)
    _pin_and_release(cluster, slurm_id)
    wait_for_state(cluster, slurm_id, {"RUNNING"})
    seen = [0.0]
    while (found := read_checkpoint(path)) is None or found.steps < 0.2 * meta.job.work:
        seen.append(found.steps if found else 0.0)
        time.sleep(0.05)
    run_slurm(cluster, "scontrol", "requeuehold", slurm_id)
    record, _ = wait_for_state(cluster, slurm_id, {"PENDING"})
    assert record["restart_cnt"] == 1
    stopped = _checkpoint(path)
    assert stopped.state == "stopped"
    assert stopped.runs[0].note == "SIGTERM"
    assert 0.2 * meta.job.work <= stopped.steps < meta.job.work
    # Not StartTime=now: slurmd refuses a job's credential made in the same second as
    # its requeue revoked the last one ("Job credential revoked"), and the job FAILS.
    _pin_and_release(cluster, slurm_id, "StartTime=now+1")
    wait_for_state(cluster, slurm_id, {"RUNNING", "COMPLETED"})
    while (record := job_record(cluster, slurm_id))["job_state"] not in {"COMPLETED",
                                                                          "FAILED"}:
        seen.append(_checkpoint(path).steps)
        time.sleep(0.1)
    assert (record["job_state"], record["exit_code"]) == ("COMPLETED", 0)
    done = _checkpoint(path)
    seen.append(done.steps)
    assert seen == sorted(seen)  # steps never go back
    assert (done.state, done.steps) == ("completed", meta.job.work)
    first, second = done.runs
    assert (first.state, second.state) == ("stopped", "completed")
    assert (first.restart_count, second.restart_count) == (0, 1)
    assert second.steps_start == first.steps_end == stopped.steps
    assert second.start >= first.end
    assert abs(second.resume - second.start - PENALTY_S / SPEEDUP) < 1e-6
    # Its progress: the first run's steps at 765 per wall s, the rest after the penalty.
    assert abs(first.steps_end - STEPS_PER_WALL_S * (first.end - first.start)) < 1e-6
    assert abs(second.end - second.resume - (meta.job.work - first.steps_end)
               / STEPS_PER_WALL_S) < 1e-6
