"""Every malformed instance gives exit code 2 and one clear line: file, JSON path, value,
what was expected; never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from solver.cli import main

BAD = Path(__file__).parent / "data" / "bad"

#: file -> pieces the one-line message must contain (JSON path, value, expectation).
EXPECTED = {
    "not_json.json": ["not valid JSON", "line 1 column 1"],
    "truncated.json": ["not valid JSON", "truncated"],
    "empty_file.json": ["the file is empty"],
    "top_level_list.json": ["$:", "top level must be a JSON object", "'list'"],
    "missing_field.json": ["$.jobs[1]", "missing field 'work'"],
    "unknown_field.json": ["$.jobs[0]", "unknown field 'gpu_kind'", "only the fields"],
    "negative_work.json": ["$.jobs[2].work", "-500.0", "> 0"],
    "zero_work.json": ["$.jobs[0].work", "got 0", "> 0"],
    "nan_value.json": ["$.jobs[1].arrival", "not a finite number", "nan"],
    "inf_value.json": ["$.jobs[2].work", "not a finite number", "inf"],
    "unknown_gpu_type.json": ["$.nodes[1].gpu_type", "unknown GPU type", "'h100'",
                              "k80, v100"],
    "gang_too_large.json": ["$.jobs[0].num_gpus", "got 64", "at most 1 GPUs"],
    "duplicate_job_ids.json": ["$.jobs[2].id", "duplicate job id", "'j0'"],
    "deadline_before_arrival.json": ["$.jobs[1].deadline", "got 10.0", "after the arrival 12.3"],
    "zero_throughput.json": ["$.jobs[1].job_type", "no positive throughput", "'rnn-lm'"],
    "non_numeric_count.json": ["$.jobs[0].num_gpus", "'four'", "an integer"],
    "empty_cluster.json": ["$.nodes", "list is empty", "at least 1"],
    "missing_throughput_file.json": ["$.throughput", "does not exist",
                                     "tables/does-not-exist.csv"],
    "bad_placement.json": ["$.throughput[0].placement", "'diagonal'", '"packed", "spread"'],
    "allowed_counts_without_requested.json": ["$.jobs[0].allowed_gpu_counts", "[2, 4]"],
    "duplicate_node_names.json": ["$.nodes[1].name", "duplicate node name"],
    "negative_arrival.json": ["$.jobs[0].arrival", "-3.0", ">= 0"],
    "wrong_type_jobs.json": ["$.jobs", "wrong type", "a list"],
}


def test_every_bad_file_has_an_expectation() -> None:
    assert sorted(p.name for p in BAD.glob("*.json")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 15


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("command", ["validate", "solve"])
def test_bad_file_exits_2_with_one_clear_line(
    name: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = BAD / name
    with pytest.raises(SystemExit) as exited:
        main([command, str(path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}")
    for piece in EXPECTED[name]:
        assert piece in lines[0], (piece, lines[0])
    assert "Traceback" not in err


def test_validate_many_files_reports_each_and_exits_2() -> None:
    files = sorted(str(p) for p in BAD.glob("*.json"))
    good = str(Path(__file__).parent.parent / "instances" / "tiny.json")
    done = subprocess.run([sys.executable, "-m", "solver", "validate", good, *files],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == len(files)
    assert done.stdout.startswith(f"{good}: OK (3 jobs, 2 GPUs")


@pytest.mark.parametrize(
    ("args", "pieces"),
    [
        (["solve", "instances/tiny.json", "--model", "magic"],
         ["--model", "'magic'", "fifo"]),
        (["solve", "instances/tiny.json", "--backend", "cpsat"], ["--backend", "fifo"]),
        (["solve", "instances/tiny.json", "--time-limit", "-1"], ["--time-limit", "-1"]),
        (["solve", "no/such/file.json"], ["no/such/file.json", "no such file"]),
        (["generate", "--jobs", "3", "--gpus", "h100=4", "-o", "/dev/null"],
         ["--gpus", "'h100'", "k80"]),
        (["generate", "--jobs", "3", "--gpus", "v100=x", "-o", "/dev/null"],
         ["--gpus", "TYPE=COUNT"]),
        (["generate", "--jobs", "0", "--gpus", "v100=2", "-o", "/dev/null"], ["--jobs"]),
        (["generate", "--jobs", "3", "--gpus", "v100=2", "--deadline-fraction", "2",
          "-o", "/dev/null"], ["--deadline-fraction", "[0, 1]"]),
    ],
)
def test_bad_command_line_values_exit_2(
    args: list[str], pieces: list[str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(Path(__file__).parent.parent)
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    for piece in pieces:
        assert piece in err, (piece, err)


def test_click_usage_errors_also_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["solve", "instances/tiny.json", "--time-limit", "soon"])
    assert exited.value.code == 2
    assert "'soon' is not a valid float" in capsys.readouterr().err
