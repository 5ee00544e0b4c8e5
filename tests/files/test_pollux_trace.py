"""The ``pollux`` trace format (hetsched.files.traces.pollux): Pollux's workload CSV into
jobs, bad rows naming file, line, column and value, and exit 2 from the command."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.core.errors import InputError
from hetsched.files.traces import FORMATS, read_trace
from hetsched.speeds.pollux import read_pollux
from tests.helpers import ROOT

POLLUX = ROOT / "tests" / "data" / "pollux"
HEADER = "name,time,application,num_replicas,batch_size\n"


def _workload(tmp_path: Path, rows: str) -> Path:
    """A workload beside a copy of the toy measurements (``workloads/../traces``)."""
    shutil.copytree(POLLUX / "traces", tmp_path / "traces")
    (tmp_path / "workloads").mkdir()
    path = tmp_path / "workloads" / "workload-1.csv"
    path.write_text(HEADER + rows)
    return path


def test_rows_become_jobs() -> None:
    # toy: 20 samples a step takes 100 / 1.6 + 140 / (12/7) steps to the goal
    # (tests/speeds/test_efficiency.py); arrivals shift to the first.
    trace = read_trace(POLLUX / "workloads" / "workload-1.csv", "pollux")
    assert "pollux" in FORMATS
    assert trace.format == "pollux"
    assert [job.id for job in trace.jobs] == ["toy-0", "toy-1", "toy-2"]
    assert [job.arrival for job in trace.jobs] == [0.0, 10.0, 20.0]
    assert [job.num_gpus for job in trace.jobs] == [2, 1, 2]
    assert {job.job_type for job in trace.jobs} == {"toy (batch size 20)"}
    steps = 100 / 1.6 + 140 * 7 / 12
    assert [job.work for job in trace.jobs] == pytest.approx([steps] * 3)
    assert all(job.tenant is None for job in trace.jobs)
    # The same jobs when the throughput model given is Pollux's own.
    model = read_pollux(POLLUX / "traces")
    assert read_trace(POLLUX / "workloads" / "workload-1.csv", "pollux", throughput=model,
                      gpu_types=("t4",)).jobs == trace.jobs


@pytest.mark.parametrize(("row", "where", "value"), [
    ("a,zero,toy,2,20", "line 3.time", "zero"),
    ("a,5,resnet,2,20", "line 3.application", "resnet"),
    ("a,5,toy,two,20", "line 3.num_replicas", "two"),
    ("a,5,toy,0,20", "line 3.num_replicas", "0"),
    ("a,5,toy,2,80", "line 3.batch_size", "80"),
    ("a,5,toy,4,10", "line 3.batch_size", "10"),  # 10 / 4 -> 3 samples a GPU, below 5
    ("toy-0,5,toy,2,20", "line 3.id", "toy-0"),
    (",5,toy,2,20", "line 3.name", ""),
])
def test_a_bad_row_names_file_line_column_and_value(tmp_path: Path, row: str, where: str,
                                                    value: str) -> None:
    path = _workload(tmp_path, f"toy-0,0,toy,2,20\n{row}\n")
    with pytest.raises(InputError) as error:
        read_trace(path, "pollux")
    assert error.value.file == str(path)
    assert error.value.path == where
    assert str(error.value.value) == value
    # Skipped on demand: the good row stays.
    assert len(read_trace(path, "pollux", on_bad_row="skip").jobs) == 1


def test_without_measurements_or_with_another_header(tmp_path: Path) -> None:
    alone = tmp_path / "workload.csv"
    alone.write_text(HEADER + "a,0,toy,2,20\n")
    with pytest.raises(InputError, match="no Pollux measurements"):
        read_trace(alone, "pollux")
    path = _workload(tmp_path, "")
    path.write_text("name,time,application,num_gpus\na,0,toy,2\n")
    with pytest.raises(InputError, match="missing column 'num_replicas'"):
        read_trace(path, "pollux")


def test_the_command_exits_2_on_a_bad_row(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _workload(tmp_path, "toy-0,0,toy,2,20\ntoy-1,5,toy,2,5000\n")
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(path), "--format", "pollux", "--cluster", "t4=4",
              "--policy", "fifo", "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"{path}: line 3.batch_size: bad batch_size (got '5000'" in err
    assert "Traceback" not in err
    with pytest.raises(SystemExit) as exited:
        main(["validate", "--format", "pollux", str(path)])
    assert exited.value.code == 2
    # On a cluster without T4s, no job can run: exit 2 naming the job type.
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(POLLUX / "workloads" / "workload-1.csv"), "--format", "pollux",
              "--cluster", "v100=4", "--policy", "fifo", "--out", str(tmp_path / "v100")])
    assert exited.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_measurements_folder_is_identified_by_its_files(tmp_path: Path) -> None:
    # The bench's LP bounds are cached by the throughput source's content: a folder of
    # Pollux's measurements by its applications' CSV files (a changed cell, another key).
    from hetsched.files.replay_inputs import default_throughput, source_bytes

    path = _workload(tmp_path, "toy-0,0,toy,2,20\n")
    folder = default_throughput(path, "pollux")
    assert folder == tmp_path / "traces"
    before = source_bytes(folder)
    assert b"toy/placements.csv\0placement,local_bsz" in before
    assert source_bytes(POLLUX / "traces") == before
    placements = folder / "toy" / "placements.csv"
    placements.write_text(placements.read_text().replace("1.8,0.3", "1.9,0.3"))
    assert source_bytes(folder) != before
    assert source_bytes(placements) == placements.read_bytes()
