"""``hetsched slurm submit`` against the real local cluster: a tiny native trace at a large
speedup is submitted held with its metadata, or with --slurm-schedules run to completion
by Slurm's own scheduler; Ctrl-C stops it with what was submitted written; bad input is
one line and exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hetsched.files.generate import catalogue_table
from hetsched.slurm.checkpoint import checkpoint_path, read_checkpoint
from hetsched.slurm.emulator import SlurmAllocation, gang_speed
from hetsched.slurm.local import LocalCluster
from hetsched.slurm.metadata import JobMeta, is_managed
from hetsched.slurm.submit import submitted_rows
from tests.helpers import exit_code
from tests.slurm.commands import job_record, wait_for_state

HEADER = ("id,arrival,job_type,num_gpus,work,deadline,weight,user,allowed_gpu_counts,"
          "allowed_gpu_types\n")
#: Four jobs over 15 trace s (0.15 wall s at X = 100), each of 0.4 to 2.5 wall s of
#: training at X = 100 on V100s or K80s (the catalogue's speeds): 1, 2 and 4 GPUs on one
#: node, 8 over two (v100-0, v100-1, k80-0: maybe of both types).
TRACE = HEADER + "\n".join([
    "a,0,image-cnn-small,1,1500,,,,,",
    "b,5,rnn-lm,2,2500,500,2,alice,1|2,",
    "c,10,image-cnn-large,4,1500,,,,,",
    "d,15,image-cnn-large,8,1500,,,,,v100|k80",
]) + "\n"
SPEEDUP = 100.0


def _submit(cluster: LocalCluster, folder: Path, *extra: str) -> list[dict[str, str]]:
    trace = folder / "trace.csv"
    trace.write_text(TRACE, encoding="utf-8")
    began = time.time()
    assert exit_code(["slurm", "submit", str(trace), "--format", "native", "--cluster-dir",
                       str(cluster.state_dir), "--state-dir", str(folder), "--speedup",
                       str(SPEEDUP), "--restart-penalty", "12", *extra]) == 0
    rows = submitted_rows(folder / "submitted.csv")
    assert [row["job"] for row in rows] == ["a", "b", "c", "d"]
    origin = float(rows[0]["planned_unix_s"])
    assert began < origin <= began + 3.0  # trace time 0: 2 s after the start
    for row, arrival in zip(rows, (0, 5, 10, 15), strict=True):
        assert float(row["planned_unix_s"]) == pytest.approx(origin + arrival / SPEEDUP)
        assert float(row["submitted_unix_s"]) >= float(row["planned_unix_s"])
    return rows


def test_submit_holds_every_job_with_its_metadata(cluster: LocalCluster, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    rows = _submit(cluster, tmp_path)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("submitting 4 jobs to partition gpu (held for the agent): "
                             "trace time 0 = Unix ")
    assert out[-1] == (f"submitted 4 of 4 jobs (Slurm jobs {rows[0]['slurm_job_id']} to "
                       f"{rows[-1]['slurm_job_id']}); wrote {tmp_path}/submitted.csv; "
                       f"checkpoints in {tmp_path}/checkpoints, logs in {tmp_path}/logs")
    origin = float(rows[0]["planned_unix_s"])
    for row in rows:
        record = job_record(cluster, row["slurm_job_id"])
        assert (record["job_state"], record["state_reason"], record["priority"]) == (
            "PENDING", "JobHeldUser", 0)
        assert record["name"] == f"hetsched-{row['job']}"
        assert record["tres_per_node"] == ""  # no GPU request: the agent pins it
        assert record["partition"] == "gpu"
        assert is_managed(record["comment"])
        meta = JobMeta.from_comment(record["comment"])
        assert (meta.job.id, meta.origin, meta.speedup, meta.restart_penalty_s) == (
            row["job"], origin, SPEEDUP, 12.0)
        assert meta.unix_time(meta.job.arrival) == float(row["planned_unix_s"])
    b = JobMeta.from_comment(job_record(cluster, rows[1]["slurm_job_id"])["comment"]).job
    assert (b.job_type, b.num_gpus, b.work, b.deadline, b.weight, b.user,
            b.allowed_gpu_counts) == ("rnn-lm", 2, 2500.0, 500.0, 2.0, "alice", (1, 2))


@pytest.mark.slow  # (waits: backoff, restart penalty; CI runs it)
def test_slurm_schedules_runs_every_job_to_completion(cluster: LocalCluster,
                                                       tmp_path: Path) -> None:
    rows = _submit(cluster, tmp_path, "--slurm-schedules")
    catalogue = catalogue_table(["v100", "k80"])
    for row in rows:
        record = job_record(cluster, row["slurm_job_id"])
        assert record["comment"].startswith("hetsched-slurm {")
        assert not is_managed(record["comment"])
        record, _ = wait_for_state(cluster, row["slurm_job_id"],
                                   {"COMPLETED", "FAILED", "CANCELLED"}, timeout_s=120)
        log = (tmp_path / "logs" / f"{row['slurm_job_id']}.out").read_text(encoding="utf-8")
        assert (record["job_state"], record["exit_code"]) == ("COMPLETED", 0), log
        meta = JobMeta.from_comment(record["comment"])
        done = read_checkpoint(checkpoint_path(tmp_path / "checkpoints",
                                               row["slurm_job_id"]))
        assert done is not None
        assert (done.state, done.steps, done.job) == ("completed", meta.job.work, row["job"])
        (run,) = done.runs
        # The GPUs Slurm chose: the job's count, on the nodes it reported, at the speed of
        # the slowest type among them.
        assert run.num_gpus == meta.job.num_gpus == len(run.gpus)
        assert run.placement == ("spread" if meta.job.num_gpus > 4 else "packed")
        assert set(run.gpu_types) == {node.rsplit("-", 1)[0] for node in run.nodes}
        assert all(gpu.split("/")[0] in run.nodes for gpu in run.gpus)
        allocation = SlurmAllocation(run.nodes, run.gpus, tuple(
            gpu.split("/")[0].rsplit("-", 1)[0] for gpu in run.gpus))
        assert gang_speed(meta.job, catalogue, allocation)[:2] == (run.throughput,
                                                                   run.gpu_type)
        assert abs(run.end - run.start - meta.job.work / (run.throughput * SPEEDUP)) < 1e-6


def test_ctrl_c_stops_submitting_and_keeps_what_was_submitted(cluster: LocalCluster,
                                                              tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"  # the second job 100 wall s after the first
    trace.write_text(HEADER + "a,0,rnn-lm,1,100,,,,,\nb,1000,rnn-lm,1,100,,,,,\n",
                     encoding="utf-8")
    command = [sys.executable, "-m", "hetsched", "slurm", "submit", str(trace), "--format",
               "native", "--cluster-dir", str(cluster.state_dir), "--state-dir",
               str(tmp_path), "--speedup", "10"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while not (tmp_path / "submitted.csv").exists() or len(
            submitted_rows(tmp_path / "submitted.csv")) < 1:
        assert time.monotonic() < deadline
        assert process.poll() is None
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted: submitted 1 of 2 jobs"
    assert "submitted 1 of 2 jobs (Slurm jobs " in out
    (row,) = submitted_rows(tmp_path / "submitted.csv")
    assert job_record(cluster, row["slurm_job_id"])["name"] == "hetsched-a"


@pytest.mark.parametrize(("argv", "pieces"), [
    (["--partition", "nope"], ["--partition: no such partition", "'nope'", "gpu"]),
    (["--speedup", "0"], ["--speedup"]),
    (["--format", "gavel"], ["trace.csv"]),
    (["--limit-jobs", "0"], ["--limit-jobs"]),
    (["--throughput", "/none.json"], ["/none.json", "no such throughput file"]),
])
def test_bad_input_is_one_line_and_exit_2(cluster: LocalCluster, tmp_path: Path,
                                          argv: list[str], pieces: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE, encoding="utf-8")
    options = {"--format": "native", "--cluster-dir": str(cluster.state_dir),
               "--state-dir": str(tmp_path)}
    options.update(dict(zip(argv[::2], argv[1::2], strict=True)))
    assert exit_code(["slurm", "submit", str(trace),
                       *(part for pair in options.items() for part in pair)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for piece in pieces:
        assert piece in err[0], err[0]
    assert not (tmp_path / "submitted.csv").exists()


def test_a_folder_without_a_cluster_is_bad_input(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE, encoding="utf-8")
    assert exit_code(["slurm", "submit", str(trace), "--format", "native",
                       "--cluster-dir", str(tmp_path / "none")]) == 2
    assert "--dir: no local cluster there" in capsys.readouterr().err
