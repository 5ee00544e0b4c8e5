"""The ``sia`` trace format (hetsched.files.traces.sia): Sia's workload CSV into jobs by
category, its measurements found two folders up, bad rows naming file, line, column and
value, and the replay command on Sia's GPU type names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.files.replay_inputs import default_throughput
from hetsched.files.traces import ELASTIC_FORMATS, FORMATS, read_trace
from hetsched.speeds.sia import read_sia
from tests.helpers import ROOT

SIA = ROOT / "tests" / "data" / "sia"
WORKLOAD = SIA / "workloads" / "saturn" / "workload-1.csv"
HEADER = "name,time,application,num_replicas,batch_size,category\n"


def _workload(tmp_path: Path, rows: str) -> Path:
    """A workload where Sia keeps them (``SIA/workloads/saturn/``), beside a copy of the
    toy measurements (``SIA/traces``)."""
    shutil.copytree(SIA / "traces", tmp_path / "traces")
    (tmp_path / "workloads" / "saturn").mkdir(parents=True)
    path = tmp_path / "workloads" / "saturn" / "workload-1.csv"
    path.write_text(HEADER + rows)
    return path


def test_rigid_rows_and_the_measurements_two_folders_up() -> None:
    assert "sia" in FORMATS
    assert "sia" in ELASTIC_FORMATS
    assert default_throughput(WORKLOAD, "sia") == SIA / "traces"
    model = read_sia(SIA / "traces")
    rtx = model.by_type["rtx"].applications["toy"]
    trace = read_trace(WORKLOAD, "sia")
    assert trace.format == "sia"
    assert [job.id for job in trace.jobs] == ["toy-0", "toy-1", "toy-2", "toy-3"]
    assert [job.arrival for job in trace.jobs] == [0.0, 10.0, 30.0, 50.0]
    # Without --elastic every job is rigid, whatever its category: its GPUs, its batch,
    # its steps to the goal at the batch really used on rtx (the reference type).
    assert [job.job_type for job in trace.jobs] == [
        "toy (batch size 20)", "toy (batch size 10)", "toy (batch size 30)",
        "toy (batch size 20)"]
    assert [job.num_gpus for job in trace.jobs] == [2, 1, 2, 2]
    assert [job.work for job in trace.jobs] == pytest.approx(
        [rtx.steps_to_goal(20, 2), rtx.steps_to_goal(10, 1), rtx.steps_to_goal(30, 2),
         rtx.steps_to_goal(20, 2)])
    assert all(job.gpu_counts == (job.num_gpus,) for job in trace.jobs)
    # The same jobs with Sia's model given.
    assert read_trace(WORKLOAD, "sia", throughput=model, gpu_types=("aws", "rtx")).jobs \
        == trace.jobs


def test_elastic_rows_by_category() -> None:
    model = read_sia(SIA / "traces")
    rtx = model.by_type["rtx"].applications["toy"]
    jobs = read_trace(WORKLOAD, "sia", elastic=True).jobs
    rigid, adaptive, scale_gpus, default = jobs
    assert rigid.job_type == "toy (batch size 20)"
    assert rigid.gpu_counts == (2,)
    # adaptive (and a row without a category: Sia's default): the scheduler picks the
    # GPUs, the job its batch; work in base-batch steps.
    for job in (adaptive, default):
        assert job.job_type == "toy (elastic)"
        assert job.work == pytest.approx(rtx.goal_base_steps)
        assert len(job.gpu_counts) > 1
    # scale-gpus: batch 30 fixed, any count that leaves 4 samples a GPU or more on rtx
    # (1: 5 passes of 6; 2: 3 of 5; 4: 2 of 4; 6: 1 of 5; 8: 1 of 4; 12: 3 a GPU, too few).
    assert scale_gpus.job_type == "toy (batch size 30)"
    assert scale_gpus.gpu_counts == (1, 2, 4, 6, 8)
    assert scale_gpus.work == pytest.approx(rtx.steps_to_goal(30, 2))


@pytest.mark.parametrize(("row", "where", "value"), [
    ("a,zero,toy,2,20,", "line 3.time", "zero"),
    ("a,5,resnet,2,20,", "line 3.application", "resnet"),
    ("a,5,toy,0,20,", "line 3.num_replicas", "0"),
    ("a,5,toy,2,80,", "line 3.batch_size", "80"),
    ("a,5,toy,2,20,elastic", "line 3.category", "elastic"),
    ("a,5,gpt_pmp,2,20,", "line 3.application", "gpt_pmp"),
    ("toy-0,5,toy,2,20,", "line 3.id", "toy-0"),
])
def test_a_bad_row_names_file_line_column_and_value(tmp_path: Path, row: str, where: str,
                                                    value: str) -> None:
    path = _workload(tmp_path, f"toy-0,0,toy,2,20,\n{row}\n")
    with pytest.raises(InputError) as error:
        read_trace(path, "sia")
    assert error.value.file == str(path)
    assert error.value.path == where
    assert str(error.value.value) == value
    assert len(read_trace(path, "sia", on_bad_row="skip").jobs) == 1


def test_gpt_pmp_is_refused_saying_why(tmp_path: Path) -> None:
    path = _workload(tmp_path, "a,5,gpt_pmp,2,20,\n")
    with pytest.raises(InputError, match="pipeline-model-parallel"):
        read_trace(path, "sia")


def test_without_measurements(tmp_path: Path) -> None:
    alone = tmp_path / "workload.csv"
    alone.write_text(HEADER + "a,0,toy,2,20,\n")
    with pytest.raises(InputError, match="no Sia measurements"):
        read_trace(alone, "sia")


def test_the_replay_command_on_sias_type_names(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    main(["replay", str(WORKLOAD), "--format", "sia", "--cluster", "aws=8x4,rtx=8x8",
          "--policy", "progress-elastic", "--elastic", "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 4
    rows = (out / "jobs.csv").read_text().splitlines()
    assert len(rows) == 5
    assert any("rtx" in row or "aws" in row for row in rows[1:])
    path = _workload(tmp_path / "bad", "toy-0,0,toy,2,20,\ntoy-1,5,toy,2,5000,\n")
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(path), "--format", "sia", "--cluster", "aws=8x4",
              "--policy", "fifo", "--out", str(tmp_path / "bad-out")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"{path}: line 3.batch_size: bad batch_size (got '5000'" in err
    assert "Traceback" not in err


def test_the_measurements_are_found_from_deeper_folders(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    # Sia's scale workloads sit a level deeper: SIA/workloads/scale/scale_32x/.
    shutil.copytree(SIA / "traces", tmp_path / "traces")
    deep = tmp_path / "workloads" / "scale" / "scale_32x"
    deep.mkdir(parents=True)
    path = deep / "workload-1.csv"
    path.write_text(HEADER + "a,0,toy,2,20,\n")
    assert default_throughput(path, "sia") == tmp_path / "traces"
    assert len(read_trace(path, "sia").jobs) == 1
    # None anywhere: the command says so, naming where it looked, exit 2.
    alone = tmp_path / "elsewhere" / "a" / "b" / "c" / "workload.csv"
    alone.parent.mkdir(parents=True)
    alone.write_text(HEADER + "a,0,toy,2,20,\n")
    with pytest.raises(InputError, match="no Sia measurements for this workload"):
        default_throughput(alone, "sia")
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(alone), "--format", "sia", "--cluster", "aws=8x4",
              "--policy", "fifo", "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "no Sia measurements for this workload" in err
    assert "Traceback" not in err
