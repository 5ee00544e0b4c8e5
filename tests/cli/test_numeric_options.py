"""Every numeric option of every command reads ASCII digits only and states its range one
way (the options of ``replay`` and ``bench``: test_float_options.py). Once ``solve``,
``generate`` and the ``slurm`` commands read theirs with click's types, which read with
float() and int(): ``--jobs 1_000`` made 1,000 jobs, ``--threads '٣'`` ran 3 threads,
``slurm run --idle-exit nan`` never stopped and ``--poll`` wrote its range in other words.

The commands never run here (their functions are replaced by one that fails the test):
the values are refused, or read, while the command line is parsed; no solve, no file, no
Slurm daemon."""

from __future__ import annotations

from typing import Any

import click
import pytest

from hetsched.cli.main import cli
from hetsched.cli.options import FloatIn, IntIn
from tests.helpers import exits_2

#: The command line (up to the option) of each command, its required arguments given.
HEADS = {"solve": ["solve", "instances/tiny.json"],
         "generate": ["generate", "--gpus", "v100=4", "-o", "generated.json"],
         "slurm cluster start": ["slurm", "cluster", "start", "--cluster", "v100=4"],
         "slurm submit": ["slurm", "submit", "trace.csv", "--format", "philly"],
         "slurm run": ["slurm", "run", "--policy", "fifo", "--out", "agent"]}

#: Each numeric option: the problem it is reported as, its range as every message writes
#: it, a value in the range and the value it is read as.
OPTIONS: dict[tuple[str, str], tuple[str, str, str, Any]] = {
    ("solve", "--time-limit"): ("bad time limit", "seconds > 0 and <= 1e+10", "2.5", 2.5),
    ("solve", "--gap"): ("bad gap", "a number >= 0", "0.01", 0.01),
    ("solve", "--threads"): ("bad thread count", "an integer from 1 to 256", "4", 4),
    ("solve", "--seed"): ("bad seed", "an integer from 0 to 2,147,483,647", "7", 7),
    ("solve", "--alpha"): ("bad alpha", "a number > 0 and <= 1", "0.5", 0.5),
    ("generate", "--jobs"): ("bad job count", "an integer from 1 to 100,000", "1000", 1000),
    # numpy's generator takes 64-bit seeds (generate always did)
    ("generate", "--seed"): ("bad seed", "an integer from 0 to 18,446,744,073,709,551,615",
                             "18446744073709551615", 2**64 - 1),
    ("generate", "--gpus-per-node"): ("bad GPUs per node", "an integer from 1 to 1,024", "8",
                                      8),
    ("generate", "--mean-interarrival"): ("bad mean interarrival",
                                          "seconds > 0 and <= 100,000", "60", 60.0),
    ("generate", "--median-duration"): ("bad median duration", "seconds > 0 and <= 1e+10",
                                        "3600", 3600.0),
    ("generate", "--deadline-fraction"): ("bad deadline fraction", "a number from 0 to 1",
                                          "0.5", 0.5),
    ("generate", "--elastic-fraction"): ("bad elastic fraction", "a number from 0 to 1", "0",
                                         0.0),
    ("slurm cluster start", "--gpus-per-node"): ("bad GPUs per node",
                                                 "an integer from 1 to 1,024", "2", 2),
    ("slurm cluster start", "--port"): ("bad port", "an integer from 1,024 to 65,535", "7000",
                                        7000),
    ("slurm cluster start", "--epilog"): ("bad epilog length", "seconds from 0 to 60", "1.5",
                                          1.5),
    ("slurm submit", "--speedup"): ("bad speedup", "a number > 0 and <= 1,000,000", "10",
                                    10.0),
    ("slurm submit", "--limit-jobs"): ("bad job limit", "an integer >= 1", "5", 5),
    ("slurm submit", "--restart-penalty"): ("bad restart penalty", "seconds from 0 to 86,400",
                                            "60", 60.0),
    ("slurm run", "--poll"): ("bad poll interval", "seconds from 0.01 to 60", "0.5", 0.5),
    ("slurm run", "--stop-after"): ("bad job count", "an integer >= 1", "3", 3),
    ("slurm run", "--idle-exit"): ("bad idle time", "seconds from 0 to 1e+10", "30", 30.0),
    ("slurm run", "--decision-timeout"): ("bad decision timeout", "seconds > 0 and <= 1e+10",
                                          "5", 5.0),
}

#: The commands whose numeric options test_float_options.py covers.
REPLAY_COMMANDS = ("replay", "bench")


def _command(path: str) -> click.Command:
    """The command of ``hetsched PATH`` (``"slurm cluster start"``)."""
    command: click.Command = cli
    for name in path.split():
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def _args(path: str, option: str, value: str) -> list[str]:
    """The command line of ``path`` with ``option`` set to ``value``."""
    more = ["--jobs", "3"] if path == "generate" and option != "--jobs" else []
    return [*HEADS[path], *more, option, value]


def _never_run(**_: Any) -> None:
    raise AssertionError("the command ran")


@pytest.mark.parametrize("value", ["\u0663", "1_000", "nan"])
@pytest.mark.parametrize(("path", "option"), list(OPTIONS))
def test_a_number_in_other_than_ascii_digits_exits_2_naming_the_option(
        path: str, option: str, value: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # '٣' (an Arabic-Indic 3) and '1_000' were read by float() and int() as 3 and 1000;
    # 'nan' passed click's ranges (nan < 0 is false).
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_command(path), "callback", _never_run)
    problem, expected, _, _ = OPTIONS[path, option]
    err = exits_2(_args(path, option, value), capsys)
    assert err == f"error: {option}: {problem} (got {value!r}; expected {expected})\n"
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("path", "option"), list(OPTIONS))
def test_a_number_in_range_is_read_and_help_states_the_range_as_errors_do(
        path: str, option: str) -> None:
    _, expected, text, value = OPTIONS[path, option]
    command = _command(path)
    args = _args(path, option, text)[len(path.split()):]
    with command.make_context(path.split()[-1], args) as context:  # parsed, not run
        param = next(p for p in command.params if option in p.opts)
        read = context.params[param.name or ""]
        record = param.get_help_record(context)
    assert read == value
    assert type(read) is type(value)
    assert param.type.convert(text, param, None) == value
    # (click's words were "x>=0", "1<=x<=256", "0<x<=1")
    assert record is not None
    assert expected in " ".join(record[1].split()), record


def _commands(command: click.Command, path: str) -> list[tuple[str, click.Command]]:
    """``command`` and every command under it, with their paths."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _commands(sub, f"{path} {name}".strip())
    return found


def _numeric(param: click.Parameter) -> bool:
    """Whether ``param`` takes a number (alone or in a tuple); a counted flag (``-vv``)
    takes none."""
    if isinstance(param, click.Option) and param.count:
        return False
    types = param.type.types if isinstance(param.type, click.Tuple) else [param.type]
    return any(isinstance(kind, click.types.FloatParamType | click.types.IntParamType)
               for kind in types)


def test_every_numeric_parameter_of_every_command_is_read_in_ascii_digits() -> None:
    # A new option written type=float, type=int, click.FloatRange or click.IntRange would
    # read '٣' and '1_000' again and state its range in click's words.
    loose = []
    for path, command in _commands(cli, ""):
        for param in command.params:
            types = param.type.types if isinstance(param.type, click.Tuple) else [param.type]
            if _numeric(param) and not all(isinstance(kind, FloatIn | IntIn) for kind in types):
                loose.append(f"hetsched {path} {param.opts or param.name}: {param.type!r}")
    assert not loose, "\n".join(loose)


def test_every_option_read_in_ascii_digits_is_tested_here_or_with_replay() -> None:
    ours = {(path, max(param.opts, key=len)) for path, command in _commands(cli, "")
            for param in command.params
            if isinstance(param.type, FloatIn | IntIn) and path not in REPLAY_COMMANDS}
    assert ours == set(OPTIONS)
