"""Ctrl-C and SIGTERM during a real model replay: what finished is written, exit 130/143."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.core.interrupts import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    Terminated,
    deferred_interrupts,
)
from tests.helpers import ROOT


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, EXIT_INTERRUPTED),
                                              (signal.SIGTERM, EXIT_TERMINATED)])
def test_an_interrupted_deadline_replay_writes_what_finished(
        shared_data: Path, tmp_path: Path, signum: int, code: int) -> None:
    # The deadline policy solves CP-SAT at every decision. Before, OR-Tools left SIGINT at
    # its default action after the first solve, so Ctrl-C killed the process with nothing
    # written, and SIGTERM (what timeout and batch schedulers send) wrote nothing either.
    out = tmp_path / "run"
    # -vv: each decision's "solving" line is DEBUG (hetsched.core.log_levels).
    command = [sys.executable, "-m", "hetsched", "-vv", "replay",
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


SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"


@pytest.mark.parametrize("where", ["hetsched.core.bounds.lower_bounds",
                                   "hetsched.simulate.record.write_folder"])
@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGTERM, Terminated),
                                                (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_during_the_bounds_or_the_write_lets_the_whole_set_land(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, signum: int,
        raised: type[BaseException]) -> None:
    # The replay has finished: a Ctrl-C or SIGTERM while its bounds are computed or its
    # folder is written (a temporary folder renamed into place) stops only after the set
    # is in place; the interrupt is raised then.
    import importlib

    from hetsched.replaying import run_replay

    module_name, name = where.rsplit(".", 1)
    module = importlib.import_module(module_name)
    real = getattr(module, name)

    def signalled(*args: object, **kwargs: object) -> object:
        signal.raise_signal(signum)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, signalled)
    out = tmp_path / "r"
    with pytest.raises(raised):
        run_replay(SAMPLE, "philly", "v100=4,k80=4", "fifo", out=out, show_progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["decisions.csv", "jobs.csv",
                                                     "summary.json", "timing.json"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["interrupted"], summary["completed"], summary["jobs"]) == (False, 3, 3)
    assert summary["bound_avg_jct_s"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["r"]  # no temporary folder left


def test_a_signal_while_a_bench_appends_keeps_the_row_and_counts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetsched.bench import runner as bench
    from hetsched.bench.results import read_results
    from hetsched.bench.runner import run_bench
    from hetsched.bench.settings import BenchSettings

    real = bench.append_result

    def signalled(path: Path, row: dict[str, str]) -> None:
        signal.raise_signal(signal.SIGINT)
        real(path, row)

    monkeypatch.setattr(bench, "append_result", signalled)
    settings = BenchSettings(trace=SAMPLE, trace_format="philly", cluster="v100=4,k80=4",
                             policies=("fifo",), seeds=(0, 1), workers=1)
    outcome = run_bench(settings, tmp_path / "b", report=False)
    # The first run's row is whole and counted; the bench stopped after it.
    assert (outcome.ran, outcome.interrupted) == (1, True)
    assert [(r["policy"], r["seed"]) for r in read_results(tmp_path / "b" / "results.csv")] \
        == [("fifo", "0")]
    monkeypatch.setattr(bench, "append_result", real)
    again = run_bench(settings, tmp_path / "b", report=False)
    assert (again.ran, again.skipped, again.interrupted) == (1, 1, False)
