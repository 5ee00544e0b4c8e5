"""Every result record reads back what it writes: to_dict/from_dict, to_frame."""

from __future__ import annotations

import json
import math
from pathlib import Path

import hetsched
from hetsched.core.result import Assignment, Metrics, Result, Schedule
from hetsched.files.instance import load_instance
from hetsched.replaying import run_replay
from hetsched.simulate.summary import ReplaySummary
from tests.helpers import INSTANCES, ROOT

SMALL = load_instance(INSTANCES / "small.json")


def test_a_result_reads_back_from_its_json(tmp_path: Path) -> None:
    result = hetsched.solve(SMALL, model="srtf")  # preempts: run segments with work
    assert any(a.work is not None for a in result.schedule)
    document = json.loads(json.dumps(result.to_dict()))  # as solve --out writes it
    again = Result.from_dict(document)
    assert again.to_dict() == result.to_dict()
    assert again.schedule == result.schedule
    assert again.schedule.restart_penalty_s == 30.0
    assert again.metrics == result.metrics


def test_no_schedule_reads_back_as_an_infinite_objective() -> None:
    empty = Result(hetsched.Status.TIME_LIMIT, math.inf, None, 1.5, Schedule(), "deadline")
    again = Result.from_dict(json.loads(json.dumps(empty.to_dict())))
    assert again.objective == math.inf
    assert again.bound is None
    assert again.metrics is None
    assert not again.is_feasible()


def test_records_round_trip_through_dicts() -> None:
    segment = Assignment("j1", "v100", ("v100-0/0", "v100-0/1"), 10.0, 70.5, work=120.0)
    assert Assignment.from_dict(segment.to_dict()) == segment
    whole = Assignment("j2", "k80", ("k80-0/0",), 0.0, 5.0)
    assert "work" not in whole.to_dict()
    assert Assignment.from_dict(whole.to_dict()) == whole
    schedule = Schedule((segment, whole), restart_penalty_s=30.0)
    assert Schedule.from_dict(json.loads(json.dumps(schedule.to_dict()))) == schedule
    metrics = hetsched.compute_metrics(SMALL, hetsched.solve(SMALL).schedule)
    assert Metrics.from_dict(metrics.to_dict()) == metrics


def test_frames_have_one_row_per_assignment_and_one_row_of_metrics() -> None:
    result = hetsched.solve(SMALL, model="srtf")
    frame = result.to_frame()
    assert len(frame) == len(result.schedule)
    assert list(frame.columns) == ["job", "gpu_type", "gpus", "num_gpus", "start", "finish",
                                   "work"]
    assert frame["num_gpus"].sum() == sum(len(a.gpus) for a in result.schedule)
    assert result.metrics is not None
    metrics = result.metrics.to_frame()
    assert metrics.shape == (1, 10)
    assert metrics.loc[0, "avg_jct_s"] == result.metrics.avg_jct_s


def test_a_replay_summary_reads_back_from_summary_json(tmp_path: Path) -> None:
    sample = ROOT / "tests" / "data" / "traces" / "philly_small.csv"
    run_replay(sample, "philly", "v100=4,k80=4", "srtf", out=tmp_path / "r",
               show_progress=False)
    document = json.loads((tmp_path / "r" / "summary.json").read_text())
    summary = ReplaySummary.from_dict(document)
    assert summary.jobs == document["jobs"] == 3
    assert summary.avg_jct_s == document["avg_jct_s"]
    assert summary.round_s == 600.0
    assert summary.interval_s is None
    assert ReplaySummary.from_dict(summary.to_dict()) == summary
    frame = summary.to_frame()
    assert frame.shape == (1, len(summary.to_dict()))
    assert frame.loc[0, "completed"] == 3
    assert frame.loc[0, "warnings"] == ""
