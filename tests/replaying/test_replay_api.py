"""hetsched.replay: jobs, a cluster and throughput models in, a checked Replay out (a
ReplayResult, as every replay entry point returns)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched
from hetsched.bench.results import BenchRow, result_row
from hetsched.cli.main import main
from hetsched.core.errors import InputError, InvalidScheduleError
from hetsched.files.cluster_spec import parse_cluster
from hetsched.files.generate import catalogue_table
from hetsched.files.instance import load_instance
from hetsched.files.traces import read_trace
from hetsched.registry import rolling
from hetsched.replaying import run_replay
from hetsched.simulate.record import Replay
from hetsched.simulate.simulator import Simulator
from hetsched.simulate.summary import ReplaySummary
from tests.helpers import INSTANCES, ROOT

SMALL = load_instance(INSTANCES / "small.json")
SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"


def test_in_memory_replay_is_the_simulators() -> None:
    outcome = hetsched.replay(SMALL.jobs, SMALL.cluster, "srtf", throughput=SMALL.throughput)
    direct = Simulator(SMALL.cluster, SMALL.jobs, rolling("srtf"),
                       truth=SMALL.throughput).run()
    assert outcome.replay.summary() == direct.summary()
    assert outcome.summary.to_dict() == direct.summary()
    assert outcome.replay.schedule() == direct.schedule()
    # In memory: nothing rendered, nothing written; the figures are the metrics and the
    # wall-clock and CPU figures.
    assert (outcome.files, outcome.out, outcome.interrupted) == ({}, None, False)
    assert list(outcome.figures) == [*direct.summary(), *direct.timing(), "cpu_time_s"]
    # A policy object works as well as a name.
    again = hetsched.replay(SMALL.jobs, SMALL.cluster, rolling("srtf"),
                            throughput=SMALL.throughput)
    assert again.summary == outcome.summary


def test_jobs_frame_is_jobs_csv(tmp_path: Path) -> None:
    # The same replay through files (run_replay) and in memory: jobs.csv read back equals
    # the in-memory frame, value for value.
    run_replay(SAMPLE, "philly", "v100=4,k80=4", "srtf", out=tmp_path / "run",
               show_progress=False)
    cluster = parse_cluster("v100=4,k80=4")
    table = catalogue_table(list(cluster.type_names))
    jobs = read_trace(SAMPLE, "philly", throughput=table,
                      gpu_types=list(cluster.type_names)).jobs
    frame = hetsched.replay(jobs, cluster, "srtf", throughput=table).replay.jobs_frame()
    written = pd.read_csv(tmp_path / "run" / "jobs.csv")
    assert list(frame.columns) == list(written.columns)
    assert len(frame) == len(written) == 3
    # met: a nullable boolean in memory, 0/1/empty in jobs.csv
    assert str(frame["met"].dtype) == "boolean"
    frame["met"] = frame["met"].astype("Float64")
    for column in frame.columns:
        if pd.api.types.is_numeric_dtype(written[column]):  # NaN where unknown, in both
            np.testing.assert_allclose(frame[column].astype(float),
                                       written[column].astype(float), rtol=1e-15)
        else:
            assert frame[column].tolist() == written[column].tolist(), column


def test_a_job_that_cannot_run_is_named() -> None:
    stuck = dataclasses.replace(SMALL.jobs[3], allowed_gpu_types=("h100",))
    jobs = (*SMALL.jobs[:3], stuck)
    with pytest.raises(InputError) as error:
        hetsched.replay(jobs, SMALL.cluster, "fifo", throughput=SMALL.throughput)
    assert error.value.path == "jobs[3]"


def corrupted(self: Replay) -> hetsched.Schedule:
    """The replay's schedule with its first run segment 100 s too long."""
    schedule = ORIGINAL(self)
    first, *rest = schedule
    return hetsched.Schedule((dataclasses.replace(first, finish=first.finish + 100), *rest),
                             schedule.restart_penalty_s)


ORIGINAL = Replay.schedule


def test_a_replay_that_fails_the_checker_is_an_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # The simulator validates every start, so only a defect could make this happen:
    # simulate one by corrupting what the replay reports.
    monkeypatch.setattr(Replay, "schedule", corrupted)
    with pytest.raises(InvalidScheduleError, match="fails the checker: 1 violations"):
        hetsched.replay(SMALL.jobs, SMALL.cluster, "fifo", throughput=SMALL.throughput)
    # The command writes the files (to look at), then exits 1 with one line.
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(SAMPLE), "--format", "philly", "--cluster", "v100=4,k80=4",
              "--out", str(out)])
    assert exit_info.value.code == 1
    assert (out / "jobs.csv").is_file()
    assert "internal error: InvalidScheduleError" in capsys.readouterr().err


def test_replay_summary_is_typed_and_round_trips_through_csv_cells() -> None:
    # summary.json's dict and the typed record agree; a results.csv row carries the
    # same record back (every job finished, so no NaN; SRTF decides every 600 s too).
    outcome = hetsched.replay(SMALL.jobs, SMALL.cluster, "srtf", throughput=SMALL.throughput)
    record = outcome.summary
    assert record == outcome.replay.metrics()
    assert record.to_dict() == outcome.replay.summary()
    assert list(record.to_dict()) == list(outcome.replay.summary())
    assert ReplaySummary.from_cells(record.to_cells()) == record
    assert (record.completed, record.round_s, record.interval_s) == (20, 600.0, None)
    row = BenchRow.from_cells(result_row("srtf", 3, "0.5", {
        **outcome.figures, "bound_avg_jct_s": record.avg_jct_s / 2}))
    assert (row.policy, row.seed, row.load, row.run_name) == ("srtf", 3, 0.5, "srtf-s3-l0.5")
    assert row.summary == record
    assert row.avg_jct_over_bound == 2.0


def test_a_replays_metrics_are_the_schedules() -> None:
    # Metrics are defined once (completion_figures): the replay's summary and
    # compute_metrics of what it ran, on the instance from its first arrival, agree.
    from hetsched.core.records import Instance
    from hetsched.core.result import compute_metrics

    outcome = hetsched.replay(SMALL.jobs, SMALL.cluster, "srtf", throughput=SMALL.throughput)
    record = outcome.summary
    first = min(job.arrival for job in SMALL.jobs)
    metrics = compute_metrics(Instance(SMALL.cluster, SMALL.jobs, SMALL.throughput, now=first),
                              outcome.replay.schedule())
    assert (metrics.scheduled, metrics.deadline_jobs, metrics.deadline_met) == (
        record.completed, record.deadline_jobs, record.deadline_met)
    assert metrics.avg_jct_s == pytest.approx(record.avg_jct_s, rel=1e-12)
    assert metrics.p95_jct_s == pytest.approx(record.p95_jct_s, rel=1e-12)
    assert metrics.makespan_s == pytest.approx(record.makespan_s, rel=1e-12)
    assert metrics.total_tardiness_s == pytest.approx(record.total_tardiness_s, abs=1e-9)
    # Busy time: the segments' GPU-seconds are what the records charged.
    assert metrics.utilization == pytest.approx(record.utilization, rel=1e-9)


def test_jobs_frame_types_met_as_boolean_and_deadline_as_float() -> None:
    # met was a float (1.0/0.0) and a deadline-less job's deadline
    # None in an object column. Seed 0 gives the first two jobs of philly_small deadlines,
    # the third none.
    outcome = hetsched.replay_trace(SAMPLE, "philly", "v100=4,k80=4", "srtf",
                                    settings=hetsched.ReplaySettings(deadline_fraction=0.5))
    frame = outcome.replay.jobs_frame()
    assert str(frame["met"].dtype) == "boolean"
    assert frame["deadline"].dtype == np.float64
    has_deadline = frame["deadline"].notna()
    assert frame.loc[~has_deadline, "met"].isna().all()
    assert frame.loc[has_deadline, "met"].notna().all()
    assert 0 < has_deadline.sum() < len(frame)


def test_replay_trace_takes_the_replay_settings_as_keywords() -> None:
    # replay_trace(..., limit_jobs=2) is replay_trace(..., settings=ReplaySettings(
    # limit_jobs=2)); a keyword that is no setting is Python's TypeError, naming the record.
    cluster = "v100=4,k80=4"
    by_keyword = hetsched.replay_trace(SAMPLE, "philly", cluster, "srtf", limit_jobs=2)
    by_record = hetsched.replay_trace(SAMPLE, "philly", cluster, "srtf",
                                      settings=hetsched.ReplaySettings(limit_jobs=2))
    assert len(by_keyword.replay.records) == len(by_record.replay.records) == 2
    assert by_keyword.summary == by_record.summary
    # Keywords change the record given: its other fields stay.
    both = hetsched.replay_trace(SAMPLE, "philly", cluster, "srtf", limit_jobs=2,
                                 settings=hetsched.ReplaySettings(load=2.0, limit_jobs=3))
    assert len(both.replay.records) == 2
    with pytest.raises(TypeError, match=r"replay_trace\(\) got an unexpected keyword "
                       r"argument 'limit_job' .*settings=ReplaySettings\(\.\.\.\): backend, "):
        hetsched.replay_trace(SAMPLE, "philly", cluster, "srtf", limit_job=2)
    with pytest.raises(InputError, match="limit_jobs"):
        hetsched.replay_trace(SAMPLE, "philly", cluster, "srtf", limit_jobs=0)


def test_replay_takes_the_replay_settings_as_keywords() -> None:
    faster = hetsched.replay(SMALL.jobs, SMALL.cluster, "srtf", throughput=SMALL.throughput,
                             load=2.0)
    same = hetsched.replay(SMALL.jobs, SMALL.cluster, "srtf", throughput=SMALL.throughput,
                           settings=hetsched.ReplaySettings(load=2.0))
    assert faster.summary == same.summary
    assert faster.summary != hetsched.replay(SMALL.jobs, SMALL.cluster, "srtf",
                                             throughput=SMALL.throughput).summary
    with pytest.raises(TypeError, match="unexpected keyword argument 'speed'"):
        hetsched.replay(SMALL.jobs, SMALL.cluster, "srtf", throughput=SMALL.throughput,
                        speed=2.0)


def test_in_memory_settings_for_reading_a_trace_say_they_do_not_apply() -> None:
    # Jobs given as objects are not read from a trace: limit_jobs cannot cut them.
    outcome = hetsched.replay(SMALL.jobs, SMALL.cluster, "srtf", throughput=SMALL.throughput,
                              limit_jobs=1)
    assert len(outcome.replay.records) == len(SMALL.jobs) > 1
    assert outcome.summary.warnings == (
        "limit_jobs (--limit-jobs) 1 does not apply: the jobs are given as objects, not "
        "read from a trace (hetsched.replay_trace reads one)",)


def test_the_readme_shows_the_settings_record_and_its_keywords() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## In Python")[1].split("\n## ")[0]
    assert "settings=hetsched.ReplaySettings(limit_jobs=2)" in section
    assert '"v100=4,k80=4", "srtf", limit_jobs=2)' in section
    # ... and what a setting that cannot apply says, as it says it.
    said = hetsched.replay_trace(SAMPLE, "philly", "v100=4,k80=4", "fifo",
                                 time_limit_s=5).summary.warnings
    assert f"# {said!r}:" in section


def test_summary_json_records_elastic_and_the_spread_speed(tmp_path: Path) -> None:
    result = run_replay(SAMPLE, "philly", "v100=4,k80=4", "srtf", out=tmp_path / "a",
                        show_progress=False,
                        settings=hetsched.ReplaySettings(spread_speed="packed"))
    written = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert (written["elastic"], written["spread_speed"]) == (False, "packed")
    assert (result.figures["elastic"], result.figures["spread_speed"]) == (False, "packed")
    toy = ROOT / "tests" / "data" / "pollux" / "workloads" / "workload-1.csv"
    run_replay(toy, "pollux", "t4=4", "progress", out=tmp_path / "b", show_progress=False,
               settings=hetsched.ReplaySettings(elastic=True))
    written = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert (written["elastic"], written["spread_speed"]) == (True, "measured")


def test_a_jct_window_in_memory_says_where_its_figure_is() -> None:
    outcome = hetsched.replay_trace(SAMPLE, "philly", "v100=4,k80=4", "srtf", jct_window=(0, 2))
    (said,) = outcome.summary.warnings
    assert said.startswith("jct_window (--jct-window) 0:2 does not apply to a replay in "
                           "memory")


def test_every_replay_entry_point_returns_one_result(tmp_path: Path) -> None:
    # run_replay (files in, files out) and replay_trace (in memory) replay the same jobs:
    # the same typed summary; the rendered one has the files it wrote, byte for byte, and
    # summary.json's keys among its figures.
    out = tmp_path / "run"
    written = run_replay(SAMPLE, "philly", "v100=4,k80=4", "srtf", out=out,
                         show_progress=False)
    in_memory = hetsched.replay_trace(SAMPLE, "philly", "v100=4,k80=4", "srtf")
    assert isinstance(written, hetsched.ReplayResult)
    assert isinstance(in_memory, hetsched.ReplayResult)
    assert written.summary == in_memory.summary
    assert written.summary == ReplaySummary.from_dict(json.loads(
        (out / "summary.json").read_text()))
    assert (written.out, in_memory.out, in_memory.files) == (out, None, {})
    assert sorted(written.files) == ["decisions.csv", "jobs.csv", "summary.json", "timing.json"]
    for name in ("summary.json", "jobs.csv", "decisions.csv"):
        assert written.files[name] == (out / name).read_text()
    for name in ("jobs.csv", "decisions.csv"):
        assert written.files[name] == in_memory.replay.files()[name]
    summary_json = json.loads(written.files["summary.json"])
    assert set(summary_json) < set(written.figures)
    assert {"trace", "policy", "bound_avg_jct_s", "wall_time_s", "cpu_time_s"} <= set(
        written.figures)
    assert written.replay.jobs_frame().equals(in_memory.replay.jobs_frame())
