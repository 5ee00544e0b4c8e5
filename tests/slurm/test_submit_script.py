"""``hetsched slurm submit --script``: the user's command in the batch script instead of the
emulator, told where to report and its job's id and work; a bad --script is one line and
exit 2. No Slurm needed (the submission under Slurm: test_real_job.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.job import read_checkpoint
from hetsched.slurm.metadata import JobMeta
from hetsched.slurm.submit import Submission, batch_script, command_script, script_command
from tests.helpers import exits_2

NEEDS_SLURM = False


def test_a_python_script_runs_under_this_python_and_others_as_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("", encoding="utf-8")
    assert script_command("train.py --steps 5 'a b'", python="/py") == (
        "/py", str(tmp_path / "train.py"), "--steps", "5", "a b")
    runner = tmp_path / "train.sh"
    runner.write_text("#!/bin/sh\n", encoding="utf-8")
    runner.chmod(0o755)
    assert script_command(str(runner)) == (str(runner),)


@pytest.mark.parametrize(("text", "problem"), [
    ("", "no training script"), ("missing.py", "no such file"),
    ("'train.py", "unbalanced quotes"), ("data.txt", "not executable")])
def test_a_bad_script_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str,
                               problem: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match=f"--script: {problem}"):
        script_command(text)


def test_the_command_line_refuses_a_missing_script_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["slurm", "submit", str(tmp_path / "trace.csv"), "--format", "native",
                   "--script", str(tmp_path / "train.py")], capsys)
    assert err.strip().splitlines() == [
        f"error: --script: no such file (got '{tmp_path}/train.py'; expected a training "
        "script that reports through hetsched.job)"]


def test_each_job_s_script_exports_its_report_folder_id_and_work(tmp_path: Path) -> None:
    job = Job("j 7", 0.0, "image-cnn-small", 1, 1500.0)
    command = (sys.executable, "-c", "import os; print(os.environ['HETSCHED_WORK'])")
    submission = Submission((JobMeta(job, 1000.0, 1.0, 30.0),), tmp_path,
                            None, command_script(command, tmp_path / "checkpoints"), "gpu", 4,
                            command)
    script = submission.script_of(submission.metas[0])
    assert script.splitlines()[2:] == [
        f"export HETSCHED_CHECKPOINTS={tmp_path}/checkpoints",
        'export HETSCHED_LAUNCHED="$(date +%s.%N)"',
        "export HETSCHED_JOB='j 7'",
        "export HETSCHED_WORK=1500.0",
        f"exec {sys.executable} -c 'import os; print(os.environ['\"'\"'HETSCHED_WORK'\"'\"'])'"]
    # The script as sh runs it: the job's work reaches the command.
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True,
                          env={**os.environ, "SLURM_JOB_ID": "3"})
    assert done.stdout == "1500.0\n"
    assert read_checkpoint(tmp_path / "checkpoints" / "3.json") is None  # it reported nothing
    # Without --script the emulator's one script serves every job, as before.
    emulator = Submission(submission.metas, tmp_path, None,
                          batch_script(tmp_path / "checkpoints", None), "gpu", 4)
    assert emulator.script_of(emulator.metas[0]) == emulator.script
    assert "hetsched.slurm.emulator" in emulator.script


def test_a_job_that_hides_its_work_is_told_it_in_its_environment(tmp_path: Path) -> None:
    # --hide-work: the comment has no work; the emulator's script exports it, just before
    # the emulator starts, so the job knows how long it trains and the agent does not.
    job = Job("h1", 0.0, "image-cnn-small", 1, 1500.0)
    meta = JobMeta(job, 1000.0, 1.0, 30.0, work_hidden=True)
    assert '"work"' not in meta.to_comment()
    emulator = Submission((meta,), tmp_path, None,
                          batch_script(tmp_path / "checkpoints", None), "gpu", 4)
    script = emulator.script_of(meta).splitlines()
    shared = emulator.script.splitlines()
    assert script == [*shared[:-1], "export HETSCHED_WORK=1500.0", shared[-1]]
    assert shared[-1].startswith("exec ")
