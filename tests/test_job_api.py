"""hetsched.job, the job side: the report a run writes (hetsched's checkpoint file of the
job) after start, report, stopped and completed; reports throttled; SIGTERM and SIGINT
turned into ``must_stop`` in a real process; a second run resumes from the report; no
report location, no file and no error; bad input named; the module light to import."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hetsched import job
from hetsched.core.errors import InputError
from hetsched.slurm.checkpoint import read_checkpoint

#: The environment a job is told about itself in (hetsched.job's module docstring).
VARIABLES = (job.FOLDER_VARIABLE, job.JOB_ID_VARIABLE, job.LAUNCHED_VARIABLE,
             job.JOB_VARIABLE, job.WORK_VARIABLE, "SLURM_RESTART_COUNT")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No job variables from the caller's environment; pytest's own SIGTERM and SIGINT
    handlers back after each test (job.start replaces them)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    handlers = {number: signal.getsignal(number) for number in job.STOP_SIGNALS}
    yield
    for number, handler in handlers.items():
        signal.signal(number, handler)


def _document(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


def test_the_report_after_start_report_stopped_and_completed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(job.FOLDER_VARIABLE, str(tmp_path))
    monkeypatch.setenv(job.JOB_ID_VARIABLE, "12")
    monkeypatch.setenv(job.JOB_VARIABLE, "j7")
    monkeypatch.setenv(job.WORK_VARIABLE, "10.0")
    monkeypatch.setenv(job.LAUNCHED_VARIABLE, "1000.5")
    path = tmp_path / "12.json"
    run = job.start(every_s=0)
    assert (run.path, run.resumed_steps, run.work, run.must_stop, run.exit_code) == (
        path, 0.0, 10.0, False, 0)
    started = _document(path)
    assert (started["v"], started["slurm_job_id"], started["job"], started["work"],
            started["steps"], started["state"], started["comment"]) == (
        2, "12", "j7", 10.0, 0.0, "running", "")
    (first,) = started["runs"]
    # A real job knows neither its GPUs nor its speed: those fields stay empty.
    assert {key: first[key] for key in ("nodes", "gpus", "gpu_type", "gpu_types",
                                        "num_gpus", "placement", "throughput")} == {
        "nodes": [], "gpus": [], "gpu_type": "", "gpu_types": [], "num_gpus": 0,
        "placement": "", "throughput": 0.0}
    assert (first["start"], first["steps_start"], first["restart_count"]) == (1000.5, 0.0, 0)
    assert first["resume"] >= first["start"]  # when start() was called
    assert run.report(4) is True
    run.stopped(6)
    stopped = read_checkpoint(path)
    assert stopped is not None
    assert (stopped.steps, stopped.state, stopped.done) == (6.0, "stopped", False)
    (run_record,) = stopped.runs
    assert (run_record.steps_start, run_record.steps_end, run_record.state,
            run_record.note) == (0.0, 6.0, "stopped", "")  # no signal came: no note

    # The second run: requeued by Slurm (SLURM_RESTART_COUNT), launched later.
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    monkeypatch.setenv(job.LAUNCHED_VARIABLE, "1020.0")
    again = job.start(every_s=0)
    assert (again.resumed_steps, again.work) == (6.0, 10.0)
    again.report(8)
    again.completed(10)
    done = read_checkpoint(path)
    assert done is not None
    assert (done.steps, done.state, done.done, done.job, done.work) == (
        10.0, "completed", True, "j7", 10.0)
    assert [(r.start, r.steps_start, r.steps_end, r.state, r.restart_count)
            for r in done.runs] == [(1000.5, 0.0, 6.0, "stopped", 0),
                                    (1020.0, 6.0, 10.0, "completed", 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["12.json"]  # no temporary left


def test_a_run_resumes_from_its_own_checkpoint_when_the_report_ran_ahead(
        tmp_path: Path) -> None:
    # The last run reported 150 steps, then was killed (SIGKILL) before its next
    # checkpoint: the script restores 100, and this run starts there.
    first = job.start(folder=tmp_path, job_id="3", every_s=0)
    first.report(150)
    second = job.start(100, folder=tmp_path, job_id="3")
    assert second.resumed_steps == 150.0
    found = read_checkpoint(tmp_path / "3.json")
    assert found is not None
    assert [(r.steps_start, r.steps_end, r.state) for r in found.runs] == [
        (0.0, 150.0, "running"), (100.0, 100.0, "running")]


def test_reports_are_throttled_and_an_end_is_written_at_once(tmp_path: Path) -> None:
    run = job.start(folder=tmp_path, job_id="5", every_s=3600)
    # The first record is written by start(); the next report comes an hour later.
    assert run.report(1) is False
    assert run.report(2) is False
    assert _document(tmp_path / "5.json")["steps"] == 0.0
    run.completed(3)
    assert _document(tmp_path / "5.json")["steps"] == 3.0
    every = job.start(folder=tmp_path, job_id="6", every_s=0)
    assert [every.report(step) for step in (1, 2, 3)] == [True, True, True]


def test_no_report_location_writes_nothing_and_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    run = job.start(every_s=0)
    assert (run.path, run.resumed_steps, run.work) == (None, 0.0, 0.0)
    assert run.report(5) is True
    run.completed(5)
    assert run.checkpoint.steps == 5.0  # kept in memory all the same
    # Only one of the two known (SLURM_JOB_ID in a job submitted by hand): a warning.
    monkeypatch.setenv(job.JOB_ID_VARIABLE, "9")
    with caplog.at_level(logging.WARNING, logger="hetsched.job"):
        assert job.start().path is None
    assert "the job reports nowhere: no HETSCHED_CHECKPOINTS" in caplog.text
    assert list(tmp_path.iterdir()) == []


def test_bad_input_is_named(tmp_path: Path) -> None:
    run = job.start(folder=tmp_path, job_id="1")
    for steps in (-1, float("nan"), float("inf"), "3", True):
        with pytest.raises(ValueError, match=r"bad steps \(got .*; expected a finite"):
            run.report(steps)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bad every_s"):
        job.start(folder=tmp_path, job_id="1", every_s=-1)
    with pytest.raises(ValueError, match="bad job id"):
        job.start(folder=tmp_path, job_id="../x")
    bad = tmp_path / "2.json"
    bad.write_text('{"v": 3, "runs": []}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"2\.json: not a checkpoint of hetsched's jobs"):
        job.start(folder=tmp_path, job_id="2")
    with pytest.raises(InputError, match=r"2\.json: not a checkpoint") as found:
        read_checkpoint(bad)
    assert found.value.file == str(bad)
    caught: list[BaseException] = []
    thread = threading.Thread(target=lambda: _start_catching(tmp_path, caught))
    thread.start()
    thread.join()
    assert "must be called from the main thread" in str(caught[0])


def _start_catching(folder: Path, caught: list[BaseException]) -> None:
    try:
        job.start(folder=folder, job_id="4")
    except RuntimeError as error:
        caught.append(error)


def test_a_version_1_checkpoint_of_the_emulator_is_read(tmp_path: Path) -> None:
    # As the emulator wrote it before real jobs reported (docs/slurm.md's example).
    path = tmp_path / "12.json"
    path.write_text(json.dumps({
        "v": 1, "slurm_job_id": "12", "job": "j7", "work": 5000.0, "comment": "hetsched {}",
        "steps": 2070.0, "state": "stopped", "updated": 1795742890.1,
        "runs": [{"start": 1795742878.6, "resume": 1795742878.6, "end": 1795742890.1,
                  "nodes": ["k80-0"], "gpus": ["k80-0/0", "k80-0/1"], "gpu_type": "k80",
                  "gpu_types": ["k80"], "num_gpus": 2, "placement": "packed",
                  "throughput": 15.3, "steps_start": 0.0, "steps_end": 2070.0,
                  "state": "stopped", "restart_count": 0, "note": "SIGTERM"}]}),
        encoding="utf-8")
    found = read_checkpoint(path)
    assert found is not None
    assert (found.steps, found.runs[0].gpus, found.runs[0].throughput) == (
        2070.0, ("k80-0/0", "k80-0/1"), 15.3)
    # A run of it goes on from there and writes version 2.
    run = job.start(folder=tmp_path, job_id="12")
    assert run.resumed_steps == 2070.0
    assert _document(path)["v"] == 2


#: A tiny training loop: one step every 10 ms until told to stop, a thread of its own
#: running beside it (as numpy's would), bounded at 30 s.
LOOP = """
import sys, threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
from hetsched import job
run = job.start(every_s=0)
steps = run.resumed_steps
print("ready", flush=True)
deadline = time.monotonic() + 30
while not run.must_stop and time.monotonic() < deadline:
    time.sleep(0.01)
    steps += 1
    run.report(steps)
run.stopped(steps)
sys.exit(run.exit_code)
"""


@pytest.mark.parametrize(("stop", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"),
                                                     (signal.SIGINT, 130, "SIGINT")])
def test_a_stop_signal_sets_must_stop_and_the_loop_stops_cleanly(
        tmp_path: Path, stop: signal.Signals, code: int, name: str) -> None:
    environment = {**os.environ, job.FOLDER_VARIABLE: str(tmp_path),
                   job.JOB_ID_VARIABLE: "21"}
    for run_number in (1, 2):
        loop = subprocess.Popen([sys.executable, "-c", LOOP], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=environment)
        assert loop.stdout is not None
        assert loop.stdout.readline() == "ready\n"
        time.sleep(0.2)  # some steps
        os.kill(loop.pid, stop)
        _, err = loop.communicate(timeout=30)
        assert loop.returncode == code, err
        assert "Traceback" not in err
        found = read_checkpoint(tmp_path / "21.json")
        assert found is not None
        assert len(found.runs) == run_number
        last = found.runs[-1]
        assert (last.state, last.note) == ("stopped", name)
        assert last.steps_end > last.steps_start
    assert found is not None
    first, second = found.runs
    assert second.steps_start == first.steps_end  # resumed where the first stopped


def test_importing_it_loads_nothing_heavy() -> None:
    heavy = ("numpy", "pandas", "scipy", "ortools", "highspy", "matplotlib", "click",
             "jsonschema", "networkx", "tqdm", "pulp", "hetsched.core", "hetsched.slurm",
             "hetsched.simulate", "hetsched.files")
    code = ("import sys, hetsched.job; print('\\n'.join(sorted(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert "hetsched.job" in loaded
    assert [name for name in loaded if name.split(".")[0] in heavy
            or name.startswith(tuple(h + "." for h in heavy)) or name in heavy] == []
