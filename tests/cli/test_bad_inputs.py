"""Every malformed instance gives exit code 2 and one clear line: file, JSON path, value,
what was expected; never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.cli.main import main
from tests.helpers import ROOT, raises_input_error

BAD = ROOT / "tests" / "data" / "bad"

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
    # Numbers out of their documented range (docs/instance-format.md, "Ranges").
    "tiny_throughput.json": ["$.throughput[3].throughput", "got 5e-324",
                             "0 (cannot run) or a number of steps/s from 1e-09 to 1e+09"],
    "huge_throughput.json": ["$.throughput[3].throughput", "1000000000000.0", "<= 1e+09"],
    "huge_work.json": ["$.jobs[1].work", "got 1e+308", "> 0 and <= 1e+12"],
    "huge_arrival.json": ["$.jobs[0].arrival", "got 1e+308", "<= 1e+10"],
    "huge_deadline.json": ["$.jobs[0].deadline", "got 1.7e+18", "<= 1e+10"],
    "huge_now.json": ["$.now", "got 1e+308", "<= 1e+10"],
    "huge_weight.json": ["$.jobs[2].weight", "got 1e+308", ">= 0.001 and <= 1000"],
    "tiny_weight.json": ["$.jobs[2].weight", "got 1e-09", ">= 0.001 and <= 1000"],
    "huge_gang.json": ["$.jobs[1].num_gpus", "got 100000000", "<= 100000"],
    "huge_node.json": ["$.nodes[1].num_gpus", "got 100000", "<= 1024"],
    "job_too_slow.json": ["$.jobs[0].work", "job j0 would run 1e+18 s on k80 x 1 packed",
                          "1e-09 steps/s", "work / throughput <= 1e+10 s"],
    "long_integer.json": ["$.jobs[1].work", "number too long", "(5000 digits)",
                          "at most 30 digits"],
    "deep_nesting.json": ["JSON nested too deeply", "at most 64 levels"],
    # The last of two keys won silently.
    "duplicate_key.json": ["$.jobs[1].work", "a key given twice in one object",
                           "each key once"],
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


@pytest.mark.slow
def test_validate_many_files_reports_each_and_exits_2() -> None:
    files = sorted(str(p) for p in BAD.glob("*.json"))
    good = str(ROOT / "instances" / "tiny.json")
    done = subprocess.run([sys.executable, "-m", "hetsched", "validate", good, *files],
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
          "-o", "/dev/null"], ["--deadline-fraction", "a number from 0 to 1"]),
        (["generate", "--jobs", "3", "--gpus", "v100=2", "--seed", "-1", "-o", "/dev/null"],
         ["--seed", "got '-1'", "0 to 18,446,744,073,709,551,615"]),
        (["generate", "--jobs", "3", "--gpus", "v100=2", "--mean-interarrival", "nan",
          "-o", "/dev/null"], ["--mean-interarrival", "nan", "> 0"]),
        (["generate", "--jobs", "3", "--gpus", "v100=2", "--median-duration", "inf",
          "-o", "/dev/null"], ["--median-duration", "inf"]),
        (["generate", "--jobs", "3", "--gpus", "v100=100000000", "-o", "/dev/null"],
         ["--gpus", "from 1 to 100000"]),
        (["generate", "--jobs", "3", "--gpus", "v100=" + "9" * 5000, "-o", "/dev/null"],
         ["--gpus", "from 1 to 100000"]),
        (["generate", "--jobs", "10000000", "--gpus", "v100=2", "-o", "/dev/null"],
         ["--jobs", "from 1 to 100,000"]),
        (["validate", "instances/tiny.json", "--model", "magic"],
         ["--model", "'magic'", "deadline"]),
        (["solve", "instances/tiny.json", "--gap", "nan"], ["--gap", "nan", "a number >= 0"]),
        (["solve", "instances/tiny.json", "--model", "allox", "--alpha", "nan"],
         ["--alpha", "nan", "a number > 0 and <= 1"]),
    ],
)
def test_bad_command_line_values_exit_2(
    args: list[str], pieces: list[str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
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
    assert "--time-limit: bad time limit (got 'soon'; expected seconds > 0" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # CP-SAT takes a 32-bit seed
        main(["solve", "instances/tiny.json", "--seed", "99999999999"])
    assert exited.value.code == 2
    assert "--seed: bad seed (got '99999999999'; expected an integer from 0 to " \
        "2,147,483,647)" in capsys.readouterr().err


@pytest.mark.parametrize(("spec", "pieces"), [
    ("v100=100000000", ["'v100=100000000'", "at most 100000 GPUs in all, 1024 per server"]),
    ("v100=" + "9" * 5000, ["GPU count too large"]),
    ("v100=64x2048", ["1024 per server"]),
    ("v100=60000,k80=60000", ["'k80=60000'", "at most 100000 GPUs"]),
])
def test_cluster_specs_with_absurd_gpu_counts_fail_at_once(spec: str,
                                                           pieces: list[str]) -> None:
    from hetsched.files.cluster_spec import parse_cluster

    # v100=100000000 used to build 25 million nodes and every pair of their GPUs.
    error = raises_input_error(lambda: parse_cluster(spec), "", pieces)
    assert error.path == "cluster_spec"  # the parameter; the CLI shows --cluster


def test_profile_json_nesting_and_long_numbers(tmp_path: Path) -> None:
    from hetsched.core.errors import InputError
    from hetsched.speeds.profiles import read_profile

    path = tmp_path / "p.json"
    path.write_text('{"v100": ' + "[" * 3000 + "]" * 3000 + "}")
    with pytest.raises(InputError, match=r"p.json: JSON nested too deeply"):
        read_profile(path)
    path.write_text('{"v100": {"(\'cnn\', 1)": {"null": ' + "1" * 5000 + "}}}")
    with pytest.raises(InputError, match=r"p.json: \$.v100.\('cnn', 1\).null: number too long"):
        read_profile(path)
    path.write_text('{"v100": {"(\'cnn\', 1)": {"null": 5e-324}}}')
    with pytest.raises(InputError, match=r"bad throughput \(got 5e-324"):
        read_profile(path)
