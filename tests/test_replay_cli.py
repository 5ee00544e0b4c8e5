"""``hetsched replay`` end to end: on the real Gavel trace (when the data is present) and on
the project's own sample traces; bad input gives exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from solver.cli import main
from tests.conftest import ROOT

SAMPLES = ROOT / "tests" / "data" / "traces"


def test_replay_gavel_trace_with_fifo(shared_data: Path, tmp_path: Path) -> None:
    trace = shared_data / "gavel" / "traces" / "ee9e8c.trace"
    done = subprocess.run(
        [sys.executable, "-m", "solver", "replay", str(trace), "--format", "gavel",
         "--cluster", "v100=36,p100=36,k80=36", "--policy", "fifo", "--limit-jobs", "400",
         "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["jobs"] == summary["completed"] == 400
    assert summary["fallbacks"] == 0
    assert summary["throughput"].endswith("simulation_throughputs.json")
    # Strict FIFO is work-conserving only up to its head job: the cluster is never
    # more than fully used, and somebody waits.
    assert 0 < summary["utilization"] <= 1
    assert summary["avg_queue_s"] > 0
    assert "jobs: 400" in done.stdout
    assert "Traceback" not in done.stderr


def test_replay_philly_sample_with_a_model_policy(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    native = SAMPLES / "philly_small.csv"
    main(["replay", str(native), "--format", "philly", "--cluster", "v100=8,k80=8",
          "--policy", "allox", "--out", str(tmp_path / "r")])
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["completed"] == summary["jobs"] > 0
    assert summary["throughput"] == "built-in catalogue"
    assert (tmp_path / "r" / "jobs.csv").read_text().count("\n") == summary["jobs"] + 1


@pytest.mark.parametrize(
    ("args", "piece"),
    [
        (["--cluster", "h100=8"], "h100"),
        (["--cluster", "v100=8", "--policy", "magic"], "unknown policy"),
        (["--cluster", "v100=eight"], "--cluster"),
    ],
)
def test_replay_bad_input_exits_2(tmp_path: Path, args: list[str], piece: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    native = SAMPLES / "philly_small.csv"
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(native), "--format", "philly", *args, "--out", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert piece in err
    assert "Traceback" not in err
