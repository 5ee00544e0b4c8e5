"""benchmarks/sia_side.py reads Sia's simulator's output: a hand-written run of three jobs in
Sia's format (one JSON record a 60-s round, as ``Cluster.step_log`` writes them), its
figures worked out by hand below. No Sia checkout, no network."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sia_side", ROOT / "benchmarks" / "sia_side.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sia_side"] = module
    spec.loader.exec_module(module)
    return module


sia = _load()


def _job(name: str, submitted: float, allocation: list[object], restarts: int | None,
         completed: float | None = None) -> dict[str, object]:
    return {"name": name, "epoch": 0, "progress": 0.0, "num_restarts": restarts,
            "cluster": allocation[0] if allocation else None, "allocation": allocation,
            "placement": [], "batch_size": 0, "accum_steps": 0, "stages": 1,
            "submission_time": submitted, "start_time": None, "completion_time": completed,
            "n_avg": 2.0, "category": None}


#: cifar10-0 (submitted at 0) holds 2 aws GPUs in the rounds of t=60 and t=120 and ends at
#: 150; bert-1 (at 30) holds 4 rtx GPUs at t=60, moves to 1 dgx-ext GPU (a restart) at
#: t=120 and t=180, ends at 200; yolov3-2 (at 100) waits at t=120, holds 1 aws GPU at t=180,
#: ends at 230. A round counts allocation x 60 s while the job has not completed.
RECORDS = [
    (60, [_job("cifar10-0", 0, ["aws", [0, 0]], 0), _job("bert-1", 30, ["rtx", [0] * 4], 0)]),
    (120, [_job("cifar10-0", 0, ["aws", [0, 0]], 0), _job("bert-1", 30, ["dgx-ext", [0]], 1),
           _job("yolov3-2", 100, [], None)]),
    (180, [_job("cifar10-0", 0, [], 0, 150.0), _job("bert-1", 30, ["dgx-ext", [0]], 1),
           _job("yolov3-2", 100, ["aws", [1]], 0)]),
    (240, [_job("cifar10-0", 0, [], 0, 150.0), _job("bert-1", 30, [], 1, 200.0),
           _job("yolov3-2", 100, [], 0, 230.0)]),
]
WORKLOAD = ("name,time,application,num_replicas,batch_size\ncifar10-0,0.0,cifar10,2,2048\n"
            "bert-1,30.0,bert,4,384\nyolov3-2,100.0,yolov3,1,64\n")
#: Sia's stdout: one line a round with the policy's time (10, 20, 30, 40 ms), other noise.
STDOUT = "".join(f"Job Step time: 1.0ms\nPolicy optimization took {ms:.2f}ms, "
                 "reallocating+migrating jobs took 0.05ms\nGPU utilization: {}\n"
                 for ms in (10, 20, 30, 40))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    out = tmp_path / "runs" / "saturn" / "sia" / "workload-1.log"
    out.parent.mkdir(parents=True)
    out.write_text("".join(json.dumps({"timestamp": t, "num_nodes": {"aws": 6},
                                       "submitted_jobs": jobs}) + "\n" for t, jobs in RECORDS))
    out.with_suffix(".stdout").write_text(STDOUT)
    (tmp_path / "workload-1.csv").write_text(WORKLOAD)
    out.with_suffix(".meta.json").write_text(json.dumps(
        {"wall_s": 12.5, "sia_commit": sia.SIA_COMMIT, "workload": "workload-1.csv"}))
    return out


def test_jobs_read_from_the_last_record_with_gpu_seconds_by_type(run: Path) -> None:
    jobs = {job.name: job for job in sia.read_results(run)}
    assert list(jobs) == ["cifar10-0", "bert-1", "yolov3-2"]
    # cifar10-0: 2 aws GPUs x 60 s in two rounds = 240; bert-1: 4 x 60 on rtx, then 1 x 60
    # on dgx-ext twice; yolov3-2: 1 x 60 on aws (its waiting round counts nothing)
    assert jobs["cifar10-0"].gpu_seconds_by_type == {"aws": 240.0}
    assert jobs["bert-1"].gpu_seconds_by_type == {"dgx-ext": 120.0, "rtx": 240.0}
    assert jobs["bert-1"].gpu_seconds == 360.0
    assert jobs["yolov3-2"].gpu_seconds == 60.0
    assert [job.jct_s for job in jobs.values()] == [150.0, 170.0, 130.0]
    assert [job.num_restarts for job in jobs.values()] == [0, 1, 0]
    assert jobs["bert-1"].application == "bert"
    assert jobs["bert-1"].submission_s == 30.0
    assert jobs["bert-1"].completion_s == 200.0


def test_run_figures_computed_by_hand(run: Path) -> None:
    _, summary = sia.read_run(run)
    # JCTs 150, 170, 130: mean 150; numpy's p99 at rank 0.99 x 2 = 1.98 of (130, 150, 170)
    # = 150 + 0.98 x 20 = 169.6; Sia's p99 is sorted[int(0.99 x 3)] = sorted[2] = 170
    assert summary.jobs == 3
    assert summary.avg_jct_s == pytest.approx(150.0)
    assert summary.p99_jct_s == pytest.approx(169.6)
    assert summary.p99_jct_sia_s == 170.0
    # makespan: last completion 230 - first submission 0
    assert summary.makespan_s == 230.0
    # GPU-seconds 240 + 360 + 60 = 660: 660 / 3600 / 3 jobs GPU-hours a job
    assert summary.gpu_hours_per_job == pytest.approx(660 / 3600 / 3)
    assert summary.restarts_per_job == pytest.approx(1 / 3)
    # decision times 10, 20, 30, 40 ms: p50 25 ms, p95 at rank 2.85 = 30 + 0.85 x 10 ms
    assert summary.decision_rounds == 4
    assert summary.decision_p50_s == pytest.approx(0.025)
    assert summary.decision_p95_s == pytest.approx(0.0385)


def test_decision_times_of_pollux_s_simulator(tmp_path: Path) -> None:
    log = tmp_path / "pollux.stdout"
    log.write_text("policy.optimize(): 1204ms\nActive jobs:\npolicy.optimize(): 96ms\n")
    assert sia.read_decision_times(log) == [1.204, 0.096]


def test_complete_only_with_every_job_finished(run: Path, tmp_path: Path) -> None:
    workload = tmp_path / "workload-1.csv"
    assert sia.is_complete(run, workload)
    lines = run.read_text().splitlines(keepends=True)
    torn = tmp_path / "torn.log"
    torn.write_text("".join(lines[:-1]) + lines[-1][:40])
    assert not sia.is_complete(torn)
    unfinished = tmp_path / "unfinished.log"
    unfinished.write_text("".join(lines[:-1]))
    assert not sia.is_complete(unfinished)
    (tmp_path / "more.csv").write_text(WORKLOAD + "ncf-3,300.0,ncf,1,32768\n")
    assert not sia.is_complete(run, tmp_path / "more.csv")
    assert not sia.is_complete(tmp_path / "absent.log")
    with pytest.raises(ValueError, match="has not completed"):
        sia.read_results(unfinished)


def test_record_run_writes_rows_and_replaces_the_same_run(run: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    sia.record_run(run, "saturn", 1, "sia", results)
    sia.record_run(run, "saturn", 1, "sia", results)
    sia.record_run(run, "saturn", 2, "gavel", results)
    with (results / "sia_runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["workload"], r["policy"]) for r in rows] == [("1", "sia"), ("2", "gavel")]
    assert float(rows[0]["avg_jct_s"]) == 150.0
    assert float(rows[0]["makespan_s"]) == 230.0
    assert rows[0]["wall_s"] == "12.5"
    assert rows[0]["sia_commit"] == sia.SIA_COMMIT
    with (results / "jobs-saturn-1-sia.csv").open() as handle:
        jobs = list(csv.DictReader(handle))
    assert [float(j["jct_s"]) for j in jobs] == [150.0, 170.0, 130.0]
    assert float(jobs[1]["gpu_seconds_rtx"]) == 240.0
    assert float(jobs[0]["gpu_seconds_dgx-ext"]) == 0.0


def test_probe_specs_use_each_application_s_most_common_batch(tmp_path: Path) -> None:
    workload = tmp_path / "w.csv"
    workload.write_text(WORKLOAD + "cifar10-3,5.0,cifar10,8,4096\ncifar10-4,6.0,cifar10,8,4096\n")
    batches = sia.common_batch_sizes(workload)
    assert batches["cifar10"] == 4096
    assert batches["bert"] == 384
    assert batches["ncf"] == sia.NCF_BATCH
    specs = sia.probe_specs(batches)
    assert len(specs) == 6 * 3 * 5 * 2
    assert {s["mode"] for s in specs} == {"rigid", "adaptive"}
    assert {s["gpu_type"] for s in specs} == {"aws", "rtx", "dgx-ext"}
