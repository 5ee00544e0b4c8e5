"""examples/train_digits.py, a real training script: stopped by SIGTERM mid-run it saves
its checkpoint and reports the stop, killed by SIGKILL it loses at most one checkpoint
interval, and run again it resumes and ends with the very model an uninterrupted run
trains (its random state is in its checkpoint), well above chance."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hetsched import job
from hetsched.slurm.checkpoint import read_checkpoint

pytest.importorskip("sklearn", reason="the example's data: scikit-learn (the dev and "
                    "examples extras)")

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "train_digits.py"
STEPS, EVERY = 600, 50
#: 600 minibatches of 32 reach about 96 % on the 300 held-out digits (97 % after 3,000);
#: chance is 10 % (ten classes, near-even), and a model that learned little (a broken
#: gradient, weights lost at a resume) stays far below 85 %.
ACCURACY_ABOVE = 85.0
#: A step takes at least 5 ms here, so a run lasts 3 s: time to stop it mid-run.
OPTIONS = ("--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--step-time", "0.005")


def _environment(folder: Path) -> dict[str, str]:
    """What ``hetsched slurm submit --script`` tells a job: where it reports, its id."""
    environment = {name: value for name, value in os.environ.items()
                   if name not in (job.JOB_VARIABLE, job.WORK_VARIABLE,
                                   job.LAUNCHED_VARIABLE, "SLURM_RESTART_COUNT")}
    return {**environment, job.FOLDER_VARIABLE: str(folder), job.JOB_ID_VARIABLE: "31"}


def _interrupted(folder: Path, stop: signal.Signals, after_steps: float) -> str:
    """Run the script until its report shows ``after_steps``, then send ``stop``; its
    output."""
    report = folder / "31.json"
    began = read_checkpoint(report)
    start = began.steps if began is not None else 0.0
    process = subprocess.Popen([sys.executable, str(SCRIPT), *OPTIONS], text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=_environment(folder))
    deadline = time.monotonic() + 60
    while (found := read_checkpoint(report)) is None or found.steps < start + after_steps:
        assert process.poll() is None, f"the script ended early: {process.communicate()}"
        assert time.monotonic() < deadline, f"no report of {after_steps} steps in 60 s"
        time.sleep(0.02)
    process.send_signal(stop)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == (143 if stop == signal.SIGTERM else -signal.SIGKILL), out
    return out


def _accuracy(out: str) -> str:
    found = re.search(rf"^done: {STEPS} steps, test accuracy ([0-9.]+) %$", out, re.M)
    assert found, out
    return found[1]


@pytest.mark.slow  # (four runs of the script, each importing scikit-learn)
def test_stopped_killed_and_resumed_it_trains_the_same_model(tmp_path: Path) -> None:
    alone = subprocess.run([sys.executable, str(SCRIPT), "--steps", str(STEPS),
                            "--checkpoint", str(tmp_path / "alone.npz")],
                           capture_output=True, text=True, timeout=120, check=True,
                           env=_environment(tmp_path / "alone"))
    reference = _accuracy(alone.stdout)
    assert float(reference) > ACCURACY_ABOVE
    assert "step 500: loss" in alone.stdout

    out = _interrupted(tmp_path, signal.SIGTERM, after_steps=120)
    stopped = re.search(r"^stopped by signal 15 at step (\d+); checkpoint saved$", out, re.M)
    assert stopped, out
    _interrupted(tmp_path, signal.SIGKILL, after_steps=2 * EVERY)  # no goodbye
    last = subprocess.run([sys.executable, str(SCRIPT), *OPTIONS], capture_output=True,
                          text=True, timeout=120, check=True, env=_environment(tmp_path))
    assert re.search(r"^resumed at step \d+ from .*31\.digits\.npz; its report said",
                     last.stdout, re.M), last.stdout
    assert _accuracy(last.stdout) == reference  # the same model, step for step

    report = read_checkpoint(tmp_path / "31.json")
    assert report is not None
    assert (report.state, report.steps) == ("completed", STEPS)
    terminated, killed, completed = report.runs
    assert (terminated.state, terminated.note) == ("stopped", "SIGTERM")
    assert terminated.steps_end == int(stopped[1])
    assert killed.state == "running"  # its last report; SIGKILL left no word
    # Steps lost at each restart: none after SIGTERM (saved as it stopped), at most one
    # checkpoint interval after SIGKILL (and the report was ahead of the checkpoint).
    assert killed.steps_start == terminated.steps_end
    assert 0 <= killed.steps_end - completed.steps_start <= EVERY
    assert completed.steps_start % EVERY == 0
    assert (completed.state, completed.steps_end) == ("completed", STEPS)
