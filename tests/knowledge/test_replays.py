"""Replays under each knowledge setting (issue 64): the registered policies finish every
job of a small trace, checked, under ``estimate`` and ``none``; ``truth`` is the replay
without the option, byte for byte; a policy blind to durations (fifo) runs the same
replay whatever it is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.replaying import replay_trace
from tests.helpers import ENGINE_CLUSTER, engine_trace

#: registered policies that read durations, or not (fifo, tiresias, gavel), and models
#: replanned (deadline, allox)
POLICIES = ["fifo", "sjf", "qssf", "srtf", "tiresias", "progress", "edf", "deadline",
            "allox", "gavel"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 generated jobs of 4 users on 4 V100s + 4 K80s, some with deadlines, some
    elastic (tests/helpers.py)."""
    return engine_trace(tmp_path_factory.mktemp("knowledge"), jobs=12)


@pytest.mark.parametrize("knowledge", ["estimate", "none"])
@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_finishes_every_job_on_estimates(trace: Path, policy: str,
                                                      knowledge: str) -> None:
    # replay_trace raises if the checker finds anything wrong with what ran
    result = replay_trace(trace, "native", ENGINE_CLUSTER, policy, knowledge=knowledge)
    assert result.summary.jobs == result.summary.completed == 12
    assert not result.interrupted
    assert {r.end_state for r in result.replay.records.values()} == {"completed"}
    estimates = result.figures["estimates"]
    assert isinstance(estimates, dict)
    assert (estimates["setting"], estimates["jobs"]) == (knowledge, 12)
    levels = estimates["levels"]
    assert isinstance(levels, dict)
    assert sum(levels.values()) == 12
    if knowledge == "none":
        assert levels == {"prior": 12}
    else:  # the first job at least had no history
        assert levels["prior"] >= 1
        assert set(levels) - {"prior"}


def test_the_truth_is_the_replay_without_the_option(trace: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    args = ["replay", str(trace), "--format", "native", "--cluster", ENGINE_CLUSTER,
            "--policy", "sjf"]
    main([*args, "--out", str(tmp_path / "default")])
    main([*args, "--knowledge", "truth", "--out", str(tmp_path / "truth")])
    capsys.readouterr()
    for name in ("summary.json", "jobs.csv", "decisions.csv"):
        assert (tmp_path / "default" / name).read_bytes() == \
            (tmp_path / "truth" / name).read_bytes(), name
    for folder in ("default", "truth"):  # (run.toml also holds its own --out)
        assert 'knowledge = "truth"\n' in (tmp_path / folder / "run.toml").read_text()
    summary = json.loads((tmp_path / "truth" / "summary.json").read_text())
    assert summary["knowledge"] == "truth"
    assert "estimates" not in summary


def test_fifo_runs_the_same_replay_whatever_it_is_shown(trace: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    args = ["replay", str(trace), "--format", "native", "--cluster", ENGINE_CLUSTER,
            "--policy", "fifo"]
    main([*args, "--out", str(tmp_path / "truth")])
    main([*args, "--knowledge", "estimate", "--out", str(tmp_path / "estimate")])
    capsys.readouterr()
    for name in ("jobs.csv", "decisions.csv"):
        assert (tmp_path / "truth" / name).read_bytes() == \
            (tmp_path / "estimate" / name).read_bytes(), name
    truth = json.loads((tmp_path / "truth" / "summary.json").read_text())
    estimate = json.loads((tmp_path / "estimate" / "summary.json").read_text())
    assert estimate.pop("knowledge") == "estimate"
    assert estimate.pop("estimates")["jobs"] == 12
    assert truth.pop("knowledge") == "truth"
    assert estimate == truth


def test_a_policy_that_reads_durations_runs_another_replay_on_estimates(trace: Path) -> None:
    # sjf on the truth and on the history's guesses: the jobs start in another order
    # (the guesses are off: the first jobs get the prior, one hour)
    def starts(knowledge: str) -> dict[str, float | None]:
        ran = replay_trace(trace, "native", ENGINE_CLUSTER, "sjf", knowledge=knowledge)
        return {job_id: r.first_start for job_id, r in ran.replay.records.items()}
    assert starts("estimate") != starts("truth")
