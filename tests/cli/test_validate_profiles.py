"""``hetsched validate --format profile`` reads step profiles as ``hetsched fit`` does: a
tidy CSV with step columns and a folder of Pollux's measurements."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import exit_code, exits_2

STEPS = ("job_type,gpu_type,num_gpus,placement,local_batch_size,step_time,sync_time\n"
         "a,t4,1,packed,4,0.4,0.01\na,t4,2,packed,4,0.5,0.1\na,t4,2,spread,4,0.9,0.5\n"
         "b,v100,4,packed,8,0.3,0.1\n")


def validated(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``hetsched validate --format profile PATH`` says of it after ``PATH: OK (step
    profile: `` (it must exit 0 and say that first)."""
    assert exit_code(["validate", "--format", "profile", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: OK (step profile: "), out
    return out.removeprefix(f"{path}: OK (step profile: ")


def test_a_tidy_step_profile_is_valid(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "missing column 'throughput'" for a file hetsched fit reads.
    path = tmp_path / "steps.csv"
    path.write_text(STEPS)
    assert validated(path, capsys) == ("4 step rows, 2 job types, GPU types t4, v100, 1-4 GPUs, "
                                       "1 row on several nodes)\n")


def test_a_folder_of_pollux_measurements_is_valid(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # Before: click refused it ("is a directory").
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "placements.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n1,4,0.45,0.01\n22,4,1.9,1.5\n")
    assert validated(tmp_path, capsys) == ("2 step rows, 1 job type, GPU types t4, 1-4 GPUs, "
                                           "1 row on several nodes)\n")


def test_pollux_measurements_are_valid(shared_data: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert validated(shared_data / "pollux" / "traces", capsys) == (
        "7,103 step rows, 6 job types, GPU types t4, 1-64 GPUs, 6,884 rows on several nodes)\n")


def test_a_bad_step_profile_names_its_line(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(STEPS + "b,v100,4,packed,8,0,0\n")
    err = exits_2(["validate", "--format", "profile", str(path)], capsys)
    assert err == (f"error: {path}: line 6.step_time: bad step_time (got '0'; expected "
                   "seconds from 1e-09 to 1e+10)\n")


def test_a_folder_is_only_a_profile(tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["validate", str(tmp_path)], capsys)
    assert err == (f"error: {tmp_path}: is a folder (expected a file (a folder of Pollux's "
                   "measurements is a step profile: --format profile))\n")
