"""Ctrl-C and SIGTERM during a real model replay: what finished is written, exit 130/143."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from solver.interrupts import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, deferred_interrupts
from tests.conftest import ROOT


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, EXIT_INTERRUPTED),
                                              (signal.SIGTERM, EXIT_TERMINATED)])
def test_an_interrupted_deadline_replay_writes_what_finished(
        shared_data: Path, tmp_path: Path, signum: int, code: int) -> None:
    # The deadline policy solves CP-SAT at every decision. Before, OR-Tools left SIGINT at
    # its default action after the first solve, so Ctrl-C killed the process with nothing
    # written, and SIGTERM (what timeout and batch schedulers send) wrote nothing either.
    out = tmp_path / "run"
    command = [sys.executable, "-m", "solver", "-v", "replay",
               str(shared_data / "gavel" / "traces" / "ee9e8c.trace"), "--format", "gavel",
               "--cluster", "v100=36,p100=36,k80=36", "--policy", "deadline",
               "--limit-jobs", "300", "--out", str(out)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    solves = 0
    for line in process.stderr:  # wait until a few model solves have run
        solves += "solving" in line
        if solves >= 3:
            break
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["interrupted"] is True
    assert summary["completed"] < summary["jobs"] == 300
    for name in ("jobs.csv", "decisions.csv", "timing.json"):
        assert (out / name).is_file()
    rows = (out / "jobs.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 301  # every job has a row, finished or not
    assert "interrupted" in stderr


def write_after(signum: int, done: list[str]) -> None:
    """A block that is signalled before it writes."""
    with deferred_interrupts():
        signal.raise_signal(signum)
        done.append("written")


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGTERM, Terminated),
                                                (signal.SIGINT, KeyboardInterrupt)])
def test_deferred_interrupts_finish_the_block_then_raise(
        signum: int, raised: type[BaseException]) -> None:
    done: list[str] = []
    with pytest.raises(raised):
        write_after(signum, done)
    assert done == ["written"]
