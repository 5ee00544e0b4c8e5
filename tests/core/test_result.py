"""Metrics come from the schedule alone; Result serialises to strict JSON."""

from __future__ import annotations

import json
import math

import pytest

from hetsched.core.result import Assignment, Result, Schedule, Status, compute_metrics, relative_gap
from hetsched.files.instance import load_instance
from hetsched.solving import solve
from tests.helpers import INSTANCES

TINY = load_instance(INSTANCES / "tiny.json")
# The optimal tiny schedule (see tests/policies/test_fifo.py for why it is optimal).
OPTIMAL = Schedule((
    Assignment("j1", "v100", ("v100-0/0",), 12.3, 2268.25),
    Assignment("j0", "v100", ("v100-0/0",), 2268.25, 5002.625),
    Assignment("j2", "k80", ("k80-0/0",), 74.2, 74.2 + 17016 / 8.4),
))


def test_metrics_by_hand() -> None:
    m = compute_metrics(TINY, OPTIMAL)
    jct = [2255.95, 5002.625, 17016 / 8.4]
    assert m.jobs == m.scheduled == 3
    assert m.avg_jct_s == pytest.approx(sum(jct) / 3)
    # numpy's linear interpolation: 95th percentile of 3 values = v[1] + 0.9 (v[2] - v[1]).
    ordered = sorted(jct)
    assert m.p95_jct_s == pytest.approx(ordered[1] + 0.9 * (ordered[2] - ordered[1]))
    assert m.makespan_s == pytest.approx(5002.625)
    # Deadlines: j0 5879 (met), j1 5382 (met, 2268.25), j2 2205 (met, 2099.91).
    assert (m.deadline_jobs, m.deadline_met, m.total_tardiness_s) == (3, 3, 0.0)
    busy = (5002.625 - 12.3) + 17016 / 8.4
    assert m.utilization == pytest.approx(busy / (2 * 5002.625))


def test_tardiness_counts_late_jobs() -> None:
    late = TINY.replace(jobs=tuple(
        j if j.id != "j2" else type(j)(**{**vars(j), "deadline": 1000.0}) for j in TINY.jobs
    ))
    m = compute_metrics(late, OPTIMAL)
    assert m.deadline_met == 2
    assert m.total_tardiness_s == pytest.approx(74.2 + 17016 / 8.4 - 1000.0)


def test_empty_schedule_metrics_and_json() -> None:
    result = Result(Status.INFEASIBLE, math.inf, None, 0.1, Schedule(), "x",
                    metrics=compute_metrics(TINY, Schedule()))
    document = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert document["objective"] is None
    assert document["gap"] is None
    assert document["metrics"]["avg_jct_s"] is None
    assert document["metrics"]["scheduled"] == 0
    assert not result.is_feasible()


def test_gap() -> None:
    assert relative_gap(110.0, 100.0) == pytest.approx(10 / 110)
    assert relative_gap(100.0, 100.0) == 0.0
    assert relative_gap(math.inf, 100.0) is None
    assert relative_gap(100.0, None) is None


def test_result_summary_and_frame() -> None:
    # SRTF through the simulator preempts on small.json: the frame has one row per run
    # segment of a preempted job (``work`` filled) and one per job run whole (empty);
    # the summary is one flat row with the metrics.
    instance = load_instance(INSTANCES / "small.json")
    result = solve(instance, model="srtf")
    frame = result.to_frame()
    assert list(frame.columns) == ["job", "gpu_type", "gpus", "num_gpus", "start", "finish",
                                   "work"]
    assert len(frame) == len(result.schedule) == 20 + result.extra["preemptions"]
    preempted = frame.job.value_counts()
    assert set(frame[frame.work.notna()].job) == set(preempted[preempted > 1].index)
    assert frame.job.nunique() == 20
    row = result.summary()
    assert (row["model"], row["status"], row["scheduled"]) == ("srtf", "FEASIBLE", 20)
    assert row["avg_jct_s"] == result.metrics.avg_jct_s  # type: ignore[union-attr]
    static = solve(instance, model="fifo").to_frame()
    assert static.work.isna().all()
    assert result.to_dict()["restart_penalty_s"] == 30.0
    assert "restart_penalty_s" not in solve(instance, model="fifo").to_dict()
