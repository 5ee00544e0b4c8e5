"""``hetsched replay --config run.toml``: keys for flags, the command line wins, bad keys
and values exit 2 naming the file and the key, run.toml repeats a run exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hetsched.cli.main import main
from tests.helpers import ROOT, exits_2

SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_setting_from_the_file_and_the_command_line_wins(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, f'''
trace = "{SAMPLE}"
format = "philly"
cluster = "v100=4,k80=4"
policy = "fifo"
time-limit = 0.2
restart-penalty = 60
load = 2
out = "{tmp_path / 'from-file'}"
''')
    main(["replay", "--config", str(config), "--policy", "srtf", "--seed", "3"])
    summary = json.loads((tmp_path / "from-file" / "summary.json").read_text())
    assert summary["policy"] == "srtf"  # the command line over the file
    assert summary["seed"] == 3
    assert summary["load"] == 2.0  # from the file
    assert summary["restart_penalty_s"] == 60.0
    assert summary["solver_limit"]["per_decision"] == 0.2
    assert summary["completed"] == summary["jobs"] == 3
    written = (tmp_path / "from-file" / "run.toml").read_text()
    assert 'policy = "srtf"' in written
    assert "seed = 3" in written
    assert "load = 2.0" in written
    assert f'trace = "{SAMPLE}"' in written
    assert "# interval: not set" in written


def test_run_toml_repeats_the_run_exactly_from_any_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    first = tmp_path / "first"
    monkeypatch.chdir(ROOT)
    main(["replay", os.path.relpath(SAMPLE), "--format", "philly", "--cluster",
          "v100=4,k80=4", "--policy", os.path.relpath(ROOT / "examples" / "my_policy.py")
          + ":MyPolicy", "--deadline-fraction", "0.5", "--seed", "7", "--out", str(first)])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    main(["replay", "--config", str(first / "run.toml"), "--out", str(tmp_path / "again")])
    for name in ("jobs.csv", "decisions.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (first / name).read_bytes()
    before = json.loads((first / "summary.json").read_text())
    after = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert after["deadline_jobs"] == before["deadline_jobs"] > 0
    assert {k: v for k, v in after.items() if k not in ("trace", "policy")} == \
        {k: v for k, v in before.items() if k not in ("trace", "policy")}
    # The second run.toml differs from the first only in its output folder.
    lines = [(first / "run.toml").read_text().splitlines(),
             (tmp_path / "again" / "run.toml").read_text().splitlines()]
    assert [a for a, b in zip(*lines, strict=True) if a != b] == [f'out = "{first}"']


@pytest.mark.parametrize(("text", "piece"), [
    ('polcy = "srtf"\n', "key polcy: unknown key (got 'srtf'; expected one of trace, format, "),
    ('load = "fast"\n', "key load: bad value (got 'fast'; expected a number (a TOML str is "
     "not one)"),
    ('format = "csv"\n', "key format: bad value (got 'csv'; expected 'csv' is not one of"),
    ("limit-jobs = 0\n", "key limit-jobs: bad job limit (got 0; expected an integer >= 1)"),
    ("seeds = [1, 2]\n", "key seeds: unknown key"),
    ("seed = [1, 2]\n", "key seed: bad value (got [1, 2]; expected a string, a number or "
     "true/false"),
    ('policy = "srtf\n', "--config: not valid TOML"),
    # A value of the wrong TOML type is refused, never coerced.
    ("seed = 0.9\n", "key seed: bad value (got 0.9; expected an integer (a TOML float is "
     "not one)"),
    ('gpu-sharing = ""\n', "key gpu-sharing: bad value (got ''; expected true or false (a "
     "TOML str is not one)"),
    ("gpu-sharing = 1\n", "key gpu-sharing: bad value (got 1; expected true or false"),
    ("limit-jobs = true\n", "key limit-jobs: bad value (got True; expected an integer (a "
     "TOML bool is not one)"),
    ("time-limit = true\n", "key time-limit: bad value (got True; expected a number"),
    ("trace = 0\n", "key trace: bad value (got 0; expected a string (a TOML int is not one)"),
    ("seed = 1979-05-27\n", "key seed: bad value (got datetime.date(1979, 5, 27); expected "
     "an integer (a TOML date is not one)"),
    ("wall-clock = 1979-05-27T07:32:00\n", "key wall-clock: bad value"),
], ids=["unknown-key", "not-a-number", "bad-choice", "out-of-range", "unknown-list",
        "list", "syntax", "float-seed", "empty-flag", "int-flag", "bool-int", "bool-float",
        "int-path", "date", "datetime"])
def test_a_bad_config_exits_2_naming_the_file_key_and_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, piece: str) -> None:
    config = _config(tmp_path, text)
    err = exits_2(["replay", "--config", str(config), str(SAMPLE), "--format", "philly",
                   "--cluster", "v100=4", "--out", str(tmp_path / "out")], capsys)
    assert err.startswith(f"error: {config}: {piece}"), err
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_missing_config_file_exits_2(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["replay", "--config", str(tmp_path / "nope.toml")], capsys)
    assert err == f"error: {tmp_path / 'nope.toml'}: --config: no such config file\n"


def test_required_options_may_come_from_the_file_or_are_still_required(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, f'trace = "{SAMPLE}"\nformat = "philly"\n')
    with pytest.raises(SystemExit) as exited:
        main(["replay", "--config", str(config), "--out", str(tmp_path / "o")])
    assert exited.value.code == 2
    assert "Missing option '--cluster'" in capsys.readouterr().err


def test_a_value_the_library_refuses_later_names_the_file_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # load = 5000 is out of the replay's range (at most 1000), which the option's type
    # checks: the error names the file and key it came from, and --load when typed.
    config = _config(tmp_path, 'policy = "fifo"\nload = 5000\n')
    command = ["replay", "--config", str(config), str(SAMPLE), "--format", "philly",
               "--cluster", "v100=4", "--out", str(tmp_path / "out")]
    err = exits_2(command, capsys)
    assert err.startswith(f"error: {config}: key load: bad load (got 5000"), err
    command[2] = str(_config(tmp_path, 'policy = "fifo"\n'))
    typed = exits_2([*command, "--load", "2000"], capsys)
    assert typed.startswith("error: --load: bad load (got '2000'"), typed
    assert not (tmp_path / "out").exists()
