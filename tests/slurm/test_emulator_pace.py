"""The training emulator without Slurm: its step arithmetic, how it reads the GPUs Slurm
gave it, its speed on them, its checkpoint file, a run stopped and resumed; and the
sbatch command lines of ``hetsched slurm submit``. No Slurm needed."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.core.throughput import Placement
from hetsched.files.generate import catalogue_table
from hetsched.slurm.checkpoint import (
    Checkpoint,
    EmulatedRun,
    checkpoint_path,
    read_checkpoint,
    write_checkpoint,
)
from hetsched.slurm.emulator import (
    EXIT_CANNOT_RUN,
    EXIT_DONE,
    Emulator,
    SlurmAllocation,
    allocation_of,
    gang_speed,
    hidden_work_of,
    plan_run,
)
from hetsched.slurm.metadata import JobMeta
from hetsched.slurm.submit import Submission, batch_script, gpu_request, sbatch_arguments

NEEDS_SLURM = False

CATALOGUE = catalogue_table(["v100", "k80"])


def test_a_first_run_ends_after_its_work_at_its_speed_times_x() -> None:
    # 600 steps at 10 steps per trace s, 20 trace s per wall s: 200 steps per wall s.
    pace = plan_run(1000.0, 0.0, 600.0, 10.0, 20.0)
    assert (pace.resume, pace.end) == (1000.0, 1003.0)
    assert pace.steps_at(999.0) == 0.0
    assert pace.steps_at(1001.5) == 300.0
    assert pace.steps_at(1003.0) == 600.0
    assert pace.steps_at(2000.0) == 600.0


def test_a_restart_waits_the_penalty_over_x_then_resumes_from_its_steps() -> None:
    # 300 of 600 steps done; 40 trace s of penalty at X = 20 is 2 wall s.
    pace = plan_run(1000.0, 300.0, 600.0, 10.0, 20.0, restart_penalty_s=40.0)
    assert pace.resume == 1002.0
    assert pace.steps_at(1001.9) == 300.0  # no progress during the penalty
    assert pace.end == 1003.5  # 300 steps at 200 per wall s after it
    assert pace.steps_at(1003.0) == 500.0


def test_the_end_is_the_work_exactly() -> None:
    pace = plan_run(1795743146.6878445, 0.0, 200.0, 36.04, 20.0)
    assert pace.steps_at(pace.end) == 200.0


def test_no_progress_is_refused() -> None:
    with pytest.raises(ValueError, match="no progress"):
        plan_run(0.0, 0.0, 10.0, 0.0, 20.0)


def test_an_allocation_is_read_from_nodes_and_gres_detail() -> None:
    allocation = allocation_of(["k80-0", "v100-0", "v100-1"],
                               ["gpu:k80:4(IDX:0-3)", "gpu:v100:2(IDX:0,2)",
                                "gpu:v100:1(IDX:3)"])
    assert allocation.gpus == ("k80-0/0", "k80-0/1", "k80-0/2", "k80-0/3", "v100-0/0",
                               "v100-0/2", "v100-1/3")
    assert allocation.gpu_types == ("k80",) * 4 + ("v100",) * 3
    assert allocation.types == ("k80", "v100")
    assert allocation.placement is Placement.SPREAD
    packed = allocation_of(["k80-0"], ["gpu:2(IDX:0-1)"])  # untyped: the node's name
    assert (packed.gpus, packed.types, packed.placement) == (
        ("k80-0/0", "k80-0/1"), ("k80",), Placement.PACKED)


@pytest.mark.parametrize(("nodes", "detail", "path"), [
    (["k80-0"], [], "gres_detail"),
    (["k80-0"], ["cpu:2"], "gres_detail"),
    (["gpunode"], ["gpu:2(IDX:0-1)"], "nodes"),
])
def test_an_unreadable_allocation_is_an_error(nodes: list[str], detail: list[str],
                                              path: str) -> None:
    with pytest.raises(InputError) as raised:
        allocation_of(nodes, detail)
    assert raised.value.path == path


def _job(**fields: Any) -> Job:
    return Job(**{"id": "j", "arrival": 0.0, "job_type": "image-cnn-small", "num_gpus": 2,
                  "work": 100.0, **fields})


def test_the_speed_is_the_catalogue_s_and_a_mixed_gang_runs_at_its_slowest_type() -> None:
    two_k80 = allocation_of(["k80-0"], ["gpu:k80:2(IDX:0-1)"])
    assert gang_speed(_job(), CATALOGUE, two_k80) == (15.3, "k80", "")
    assert CATALOGUE.throughput("image-cnn-small", "k80", 2, Placement.PACKED) == 15.3
    mixed = allocation_of(["k80-0", "v100-0"], ["gpu:k80:4(IDX:0-3)", "gpu:v100:4(IDX:0-3)"])
    # spread over 8: 26.53 steps/s on K80s, 88.43 on V100s: the K80s set the pace.
    assert gang_speed(_job(num_gpus=8), CATALOGUE, mixed) == (26.53, "k80", "")


@pytest.mark.parametrize(("fields", "problem"), [
    ({"num_gpus": 1}, "2 GPUs; it may run on [1]"),
    ({"allowed_gpu_types": ("v100",)}, "GPU type k80 is not one of its allowed types"),
    ({"job_type": "rl-a3c"}, "no measured throughput of rl-a3c on 2 x k80 (packed)"),
])
def test_a_gang_it_cannot_run_on_has_no_speed(fields: dict[str, Any], problem: str) -> None:
    speed, _, found = gang_speed(_job(**fields), CATALOGUE,
                                 allocation_of(["k80-0"], ["gpu:k80:2(IDX:0-1)"]))
    assert (speed, found) == (0.0, problem)


def test_a_checkpoint_round_trips_and_a_bad_one_is_an_error(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path / "checkpoints", "12")
    assert path == tmp_path / "checkpoints" / "12.json"
    assert read_checkpoint(path) is None
    run = EmulatedRun(10.0, 11.0, 12.5, ("k80-0",), ("k80-0/0",), "k80", ("k80",), 1, "packed", 9.0,
              0.0, 27.0, "stopped", 0, "SIGTERM")
    checkpoint = Checkpoint("12", "a", 300.0, "hetsched {}").with_run(run, 12.6)
    write_checkpoint(path, checkpoint)
    assert read_checkpoint(path) == checkpoint
    assert (checkpoint.steps, checkpoint.state, checkpoint.done) == (27.0, "stopped", False)
    assert [p.name for p in path.parent.iterdir()] == ["12.json"]  # no temporary left
    path.write_text('{"v": 1, "job": "a"}', encoding="utf-8")
    with pytest.raises(InputError, match="not a checkpoint"):
        read_checkpoint(path)


class _Signals:
    """Stands in for ``signal.sigtimedwait``: sleeps the timeout, or "receives" SIGTERM
    once ``after`` wall seconds have passed since it was made."""

    def __init__(self, after: float = float("inf")) -> None:
        self.at = time.time() + after

    def __call__(self, signals: Any, timeout: float) -> Any:
        if time.time() + timeout >= self.at:
            time.sleep(max(0.0, self.at - time.time()))
            return SimpleNamespace(si_signo=signal.SIGTERM)
        time.sleep(timeout)
        return None


def test_a_run_stopped_by_sigterm_resumes_after_the_penalty(tmp_path: Path) -> None:
    # 2 K80s: 15.3 steps per trace s, at X = 100: 1530 steps per wall s; 918 steps take
    # 0.6 wall s. Stopped after about 0.2 s; the restart waits 10 trace s = 0.1 wall s.
    meta = JobMeta(_job(work=918.0), time.time(), 100.0, 10.0)
    allocation = allocation_of(["k80-0"], ["gpu:k80:2(IDX:0-1)"])
    path = tmp_path / "7.json"
    first = Emulator(meta, "7", allocation, CATALOGUE, path, time.time())
    assert first.run(_Signals(after=0.2)) == 128 + signal.SIGTERM
    stopped = read_checkpoint(path)
    assert stopped is not None
    assert stopped.state == "stopped"
    assert JobMeta.from_comment(stopped.comment) == meta  # the metadata travels with it
    assert 0 < stopped.steps < 918.0
    (run,) = stopped.runs
    assert (run.gpus, run.gpu_type, run.num_gpus, run.placement, run.throughput) == (
        ("k80-0/0", "k80-0/1"), "k80", 2, "packed", 15.3)
    assert run.steps_end == pytest.approx(1530.0 * (run.end - run.start))
    launched = time.time()
    second = Emulator(meta, "7", allocation, CATALOGUE, path, launched)
    assert second.run(_Signals()) == EXIT_DONE
    done = read_checkpoint(path)
    assert done is not None
    assert (done.state, done.steps) == ("completed", 918.0)
    assert [r.state for r in done.runs] == ["stopped", "completed"]
    again = done.runs[1]
    assert again.resume == pytest.approx(launched + 0.1)
    assert again.steps_start == run.steps_end
    assert again.end == pytest.approx(again.resume + (918.0 - run.steps_end) / 1530.0)
    # Started once more after it was done: nothing to do, recorded as a run.
    assert Emulator(meta, "7", allocation, CATALOGUE, path, time.time()).run() == EXIT_DONE
    assert len(read_checkpoint(path).runs) == 3  # type: ignore[union-attr]


def test_a_run_on_gpus_it_cannot_use_is_refused_and_says_why(tmp_path: Path) -> None:
    meta = JobMeta(_job(allowed_gpu_types=("v100",)), time.time(), 100.0, 10.0)
    path = tmp_path / "8.json"
    emulator = Emulator(meta, "8", allocation_of(["k80-0"], ["gpu:k80:2(IDX:0-1)"]),
                        CATALOGUE, path, time.time())
    assert emulator.run(_Signals()) == EXIT_CANNOT_RUN
    refused = read_checkpoint(path)
    assert refused is not None
    assert (refused.state, refused.steps) == ("refused", 0.0)
    assert refused.runs[0].note == "GPU type k80 is not one of its allowed types"


def _submission(slurm_schedules: bool) -> tuple[JobMeta, Submission]:
    meta = JobMeta(_job(id="a7", num_gpus=6, allowed_gpu_counts=(2, 6)), 1000.0, 20.0,
                   30.0, slurm_schedules)
    script = batch_script(Path("/s/checkpoints"), None, python="/venv/bin/python")
    return meta, Submission((meta,), Path("/s"), None, script, "gpu", 4)


def test_the_batch_script_execs_the_emulator() -> None:
    assert batch_script(Path("/s/checkpoints"), Path("/data/t p.json"),
                        python="/venv/bin/python") == (
        "#!/bin/sh\n# hetsched's training emulator (hetsched slurm submit; docs/slurm.md)\n"
        "exec /venv/bin/python -m hetsched.slurm.emulator --checkpoints /s/checkpoints "
        "--throughput '/data/t p.json' --launched \"$(date +%s.%N)\"\n")


def test_sbatch_arguments_held_for_the_agent() -> None:
    meta, submission = _submission(slurm_schedules=False)
    assert sbatch_arguments(meta, submission)[1:] == [
        "-H", "--parsable", "--partition=gpu", "--job-name=hetsched-a7",
        f"--comment={meta.to_comment()}", "--output=/s/logs/%j.out", "--requeue",
        "--open-mode=append"]


def test_sbatch_arguments_for_slurm_s_own_scheduler() -> None:
    meta, submission = _submission(slurm_schedules=True)
    arguments = sbatch_arguments(meta, submission)
    assert "-H" not in arguments
    assert arguments[-2:] == ["--nodes=2", "--gpus=6"]
    assert next(a for a in arguments if a.startswith("--comment=")).startswith(
        "--comment=hetsched-slurm {")


@pytest.mark.parametrize(("fields", "request_"), [
    ({"num_gpus": 1}, ["--nodes=1", "--gres=gpu:1"]),
    ({"num_gpus": 4}, ["--nodes=1", "--gres=gpu:4"]),
    ({"num_gpus": 5}, ["--nodes=2", "--gpus=5"]),
    ({"num_gpus": 8}, ["--nodes=2", "--gpus=8"]),
    ({"num_gpus": 2, "allowed_gpu_types": ("k80",)}, ["--nodes=1", "--gres=gpu:k80:2"]),
    ({"num_gpus": 8, "allowed_gpu_types": ("k80",)}, ["--nodes=2", "--gpus=k80:8"]),
    ({"num_gpus": 2, "allowed_gpu_types": ("k80", "v100")}, ["--nodes=1", "--gres=gpu:2"]),
])
def test_gpu_requests(fields: dict[str, Any], request_: list[str]) -> None:
    assert gpu_request(_job(**fields), 4) == request_


def test_an_allocation_of_one_node_is_packed() -> None:
    assert SlurmAllocation(("v100-1",), ("v100-1/3",), ("v100",)).placement is Placement.PACKED


def test_run_as_a_job_every_thread_blocks_the_stop_signals() -> None:
    # numpy starts a thread when imported; a thread with SIGTERM unblocked would take a
    # requeue's SIGTERM while the main thread writes its checkpoint, and end the job
    # unwritten (6 runs in three 100-job runs of `progress`, found in their checkpoints).
    # Run as `python -m hetsched.slurm.emulator` (here with no job id: it exits at once),
    # every thread of the process blocks SIGINT (bit 1) and SIGTERM (bit 14) of SigBlk.
    import subprocess
    import sys

    probe = (
        "import atexit, os, runpy, sys\n"
        "def masks():\n"
        "    for task in os.listdir('/proc/self/task'):\n"
        "        for line in open(f'/proc/self/task/{task}/status'):\n"
        "            if line.startswith('SigBlk'):\n"
        "                print(line.split()[1])\n"
        "atexit.register(masks)\n"
        "sys.argv = ['emulator', '--checkpoints', 'none', '--job-id', '']\n"
        "runpy.run_module('hetsched.slurm.emulator', run_name='__main__', alter_sys=True)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2, done.stderr  # EXIT_INPUT: no job id
    masks = [int(line, 16) for line in done.stdout.split()]
    assert len(masks) >= 2  # the main thread and numpy's
    stop = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    assert [mask & stop for mask in masks] == [stop] * len(masks)


def test_the_emulator_reads_the_replays_measured_throughput_without_fitting(
        shared_data: Path) -> None:
    # The emulator runs each job at the replay's truth, read without the fit (and without
    # importing scipy's solver: half a second at every start of every job).
    import subprocess
    import sys

    from hetsched.core.throughput import ThroughputTable
    from hetsched.files.replay_inputs import throughput_pair
    from hetsched.slurm.emulator import truth_model

    table = shared_data / "gavel" / "simulation_throughputs.json"
    truth, replay_truth = truth_model(table, ["v100"]), throughput_pair(table)[0]
    assert isinstance(truth, ThroughputTable)
    assert isinstance(replay_truth, ThroughputTable)
    assert len(truth.entries) > 400
    assert dict(truth.entries) == dict(replay_truth.entries)
    probe = ("import sys; from pathlib import Path; from hetsched.slurm.emulator import "
             f"truth_model; truth_model(Path({str(table)!r}), ['v100']); "
             "print('scipy.optimize' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["False"]


def test_a_job_that_hides_its_work_reads_it_from_its_environment() -> None:
    meta = JobMeta(Job("h", 0.0, "image-cnn-small", 1, 1500.0), 1000.0, 1.0, 30.0,
                   work_hidden=True)
    read = JobMeta.from_comment(meta.to_comment())  # what the emulator reads: no work
    assert hidden_work_of(read, {"HETSCHED_WORK": "1500.0"}).job.work == 1500.0
    known = JobMeta(meta.job, 1000.0, 1.0, 30.0)
    assert hidden_work_of(known, {}) is known  # a comment with its work: as it is
    for text in ("", "-3", "nan", "many"):
        with pytest.raises(InputError, match="HETSCHED_WORK: a job whose comment gives no "
                           "work needs its steps"):
            hidden_work_of(read, {"HETSCHED_WORK": text} if text else {})
