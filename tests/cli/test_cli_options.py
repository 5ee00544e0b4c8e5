"""Options every command takes (-v, --debug) anywhere on the line; defaults in --help."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hetsched.cli.main import cli
from tests.helpers import ROOT, exits_2


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hetsched", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("-v", "solve", "instances/tiny.json"),
    ("solve", "instances/tiny.json", "-v"),
    ("solve", "-v", "instances/tiny.json", "--debug"),
    ("solve", "instances/tiny.json", "--verbose", "--model", "fifo"),
], ids=["before", "after", "middle-and-debug", "long-form"])
def test_verbose_works_before_and_after_the_subcommand(args: tuple[str, ...]) -> None:
    done = run(*args)
    assert done.returncode == 0, done.stderr
    assert "INFO hetsched.solving: fifo: status FEASIBLE" in done.stderr
    assert "DEBUG" not in done.stderr


@pytest.mark.slow
def test_verbose_counts_add_up_across_the_subcommand() -> None:
    # -v before and -v after make -vv: the details (DEBUG) of the deadline model's stages.
    done = run("-v", "solve", "instances/tiny.json", "--model", "deadline", "-v",
               "--time-limit", "5")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^DEBUG hetsched\.", done.stderr, flags=re.MULTILINE), done.stderr


@pytest.mark.slow
def test_without_verbose_nothing_is_logged() -> None:
    done = run("solve", "instances/tiny.json")
    assert done.returncode == 0, done.stderr
    assert "INFO" not in done.stderr


@pytest.mark.slow
def test_nested_commands_take_the_global_options_too() -> None:
    done = run("topology", "show", "tests/data/no-such-topology.txt", "-v", "--debug")
    assert "No such option" not in done.stderr
    assert done.returncode == 2  # the file is missing: bad input, not a usage error


def _help(*command: str) -> str:
    result = CliRunner().invoke(cli, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_help_shows_the_defaults() -> None:
    solve = _help("solve")
    assert "--model TEXT" in solve
    assert "[default: fifo]" in solve
    assert "60 s for deadline, allox and topology" in solve  # --time-limit: the model's own
    assert "[default: first-fit]" in solve
    replay = _help("replay")
    assert "[default: 0.1; seconds > 0 and <= 1e+10]" in replay  # --time-limit
    assert "[default: 30.0;" in replay  # --restart-penalty
    assert "[default: 1.0; a number from 0.001 to 1,000]" in replay  # --load
    generate = _help("generate")
    assert "[default: 120.0; seconds > 0 and <= 100,000]" in generate  # --mean-interarrival
    assert "[default: 4; an integer from 1 to 1,024]" in generate  # --gpus-per-node
    for command in ("solve", "replay", "bench", "fit", "generate", "validate"):
        text = _help(command)
        assert "-v, --verbose" in text, command
        assert "--debug" in text, command


@pytest.mark.parametrize(("args", "start"), [
    (["replay", "trace.csv"], "error: Missing option '--format'. Choose from: gavel, philly, "
     "helios, openb, native, continuous, pollux, sia (see hetsched replay --help)"),
    (["solve", "--nope"], "error: No such option '--nope'"),
    (["frob"], "error: No such command 'frob' (see hetsched --help)"),
    (["solve", "instances/tiny.json", "--threads", "0"],
     "error: --threads: bad thread count (got '0'; expected an integer from 1 to 256)"),
    (["solve", "instances/tiny.json", "--model"], "error: Option '--model' requires an "
     "argument"),
])
def test_clicks_usage_errors_are_one_line_like_every_other_error(
        args: list[str], start: str, capsys: pytest.CaptureFixture[str]) -> None:
    # click printed its usage, a hint and the error on four lines.
    err = exits_2(args, capsys)
    assert err.startswith(start), err
    assert err.count("\n") == 1, err
