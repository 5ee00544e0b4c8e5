"""Reading step rows: a made-up folder of Pollux's measurements, the tidy CSV with step
columns, and bad input naming the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.speeds.step_profiles import (
    even_placement,
    has_step_columns,
    read_pollux_profile,
    read_step_profile_csv,
)
from tests.helpers import raises_input_error

PLACEMENTS = ("placement,local_bsz,step_time,sync_time\n"
              "1,4,0.45,0.01\n"
              "22,4,1.9,1.5\n")
SCALABILITY = ("num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
               "6,7,4,1.4,1.1\n")


def pollux_folder(root: Path, placements: str = PLACEMENTS,
                  scalability: str = SCALABILITY) -> Path:
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "placements.csv").write_text(placements)
    (root / "toy" / "scalability.csv").write_text(scalability)
    (root / "philly.csv").write_text("not a model\n")  # files beside the models: passed over
    return root


def test_a_pollux_folder(tmp_path: Path) -> None:
    rows = read_pollux_profile(pollux_folder(tmp_path))
    assert [(r.job_type, r.gpu_type, r.placement, r.local_bsz, r.step_time, r.sync_time)
            for r in rows] == [("toy", "t4", (1,), 4.0, 0.45, 0.01),
                               ("toy", "t4", (2, 2), 4.0, 1.9, 1.5),
                               ("toy", "t4", (2, 1, 1, 1, 1, 1), 4.0, 1.4, 1.1)]
    assert [r.source for r in rows] == ["toy/placements.csv line 2",
                                        "toy/placements.csv line 3",
                                        "toy/scalability.csv line 2"]
    # one model's own folder reads the same
    assert read_pollux_profile(tmp_path / "toy") == rows
    assert has_step_columns(tmp_path)


def test_even_placements() -> None:
    assert even_placement(6, 7) == (2, 1, 1, 1, 1, 1)
    assert even_placement(16, 64) == (4,) * 16
    assert even_placement(12, 40) == (4,) * 4 + (3,) * 8


@pytest.mark.parametrize(("placements", "scalability", "where", "message"), [
    (PLACEMENTS + "2a,4,1.0,0.5\n", SCALABILITY, "placements.csv: line 4.placement",
     "bad placement (got '2a'; expected one digit 1-9 per node used"),
    (PLACEMENTS + "20,4,1.0,0.5\n", SCALABILITY, "placements.csv: line 4.placement",
     "bad placement (got '20'"),
    (PLACEMENTS + "2,4,-1,0.5\n", SCALABILITY, "placements.csv: line 4.step_time",
     "bad step_time (got '-1'; expected seconds from 1e-09 to 1e+10)"),
    (PLACEMENTS + "2,4,1.0,1.5\n", SCALABILITY, "placements.csv: line 4.sync_time",
     "sync_time not below step_time (got 1.5; expected seconds from 0 to less than the "
     "step time 1.0)"),
    (PLACEMENTS + "2,x,1.0,0.5\n", SCALABILITY, "placements.csv: line 4.local_bsz",
     "bad local_bsz (got 'x'; expected samples per GPU > 0)"),
    ("placement,local_bsz,step_time\n1,4,0.4\n", SCALABILITY, "placements.csv: line 1",
     "missing column 'sync_time'"),
    (PLACEMENTS, SCALABILITY + "6,5,4,1.0,0.5\n", "scalability.csv: line 3.num_replicas",
     "fewer replicas than nodes (got '5'; expected an integer >= num_nodes (6))"),
    (PLACEMENTS, SCALABILITY + "0,5,4,1.0,0.5\n", "scalability.csv: line 3.num_nodes",
     "bad num_nodes (got '0'; expected an integer >= 1)"),
])
def test_bad_pollux_files_name_file_line_and_field(
        tmp_path: Path, placements: str, scalability: str, where: str, message: str) -> None:
    folder = pollux_folder(tmp_path, placements, scalability)
    raises_input_error(lambda: read_pollux_profile(folder), f"{folder / 'toy'}/{where}: ",
                       [message])


def test_a_folder_without_measurements(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no placements\.csv in the folder"):
        read_pollux_profile(tmp_path)
    with pytest.raises(InputError, match="no such folder"):
        read_pollux_profile(tmp_path / "absent")


TIDY = ("job_type,gpu_type,num_gpus,placement,throughput,local_batch_size,step_time,"
        "sync_time,node_gpus\n"
        "net,t4,1,packed,2.0,8,0.5,0.01,\n"
        "net,t4,4,packed,7.0,8,0.57,0.05,\n"
        "net,t4,4,spread,5.0,8,0.8,0.3,2+2\n"
        "net,t4,3,spread,4.0,8,0.7,0.25,\n"
        "net,v100,1,packed,9.0,,,,\n")


def test_tidy_rows_with_step_columns(tmp_path: Path) -> None:
    path = tmp_path / "profile.csv"
    path.write_text(TIDY)
    rows = read_step_profile_csv(path)
    assert [(r.placement, r.local_bsz, r.step_time, r.sync_time) for r in rows] == [
        ((1,), 8.0, 0.5, 0.01), ((4,), 8.0, 0.57, 0.05), ((2, 2), 8.0, 0.8, 0.3),
        ((1, 1, 1), 8.0, 0.7, 0.25)]  # spread without node_gpus: one GPU per node
    assert rows[2].source == "profile.csv line 4"
    assert has_step_columns(path)


@pytest.mark.parametrize(("line", "where", "message"), [
    ("net,t4,4,spread,5.0,8,0.8,0.3,3+3", "line 7.node_gpus",
     "node_gpus does not match num_gpus and placement (got '3+3'; expected 4 GPUs in all"),
    ("net,t4,4,packed,5.0,8,0.8,0.3,2+2", "line 7.node_gpus",
     "node_gpus does not match num_gpus and placement"),
    ("net,t4,4,spread,5.0,8,0.8,0.3,2+x", "line 7.node_gpus", "bad node_gpus"),
    ("net,t4,4,spread,5.0,,0.8,0.3,", "line 7.local_batch_size", "bad local_batch_size"),
    ("net,t4,4,spread,5.0,8,0.8,,", "line 7.sync_time", "bad sync_time"),
    ("net,t4,4,sideways,5.0,8,0.8,0.3,", "line 7.placement", "bad placement"),
    (",t4,4,spread,5.0,8,0.8,0.3,", "line 7.job_type", "empty job_type"),
])
def test_bad_tidy_step_rows_name_file_line_and_field(
        tmp_path: Path, line: str, where: str, message: str) -> None:
    path = tmp_path / "profile.csv"
    path.write_text(TIDY + line + "\n")
    raises_input_error(lambda: read_step_profile_csv(path), f"{path}: {where}: ", [message])


def test_a_tidy_profile_without_step_times(tmp_path: Path) -> None:
    path = tmp_path / "profile.csv"
    path.write_text("job_type,gpu_type,num_gpus,placement,throughput\nnet,t4,1,packed,2\n")
    assert not has_step_columns(path)
    with pytest.raises(InputError, match="missing column 'local_batch_size'"):
        read_step_profile_csv(path)
