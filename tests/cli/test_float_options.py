"""Every numeric option of ``replay`` and ``bench`` is finite and in range, checked before
any work (click's ranges let NaN through: ``nan < 0`` is false; a NaN limit once reached
summary.json, invalid JSON, and run.toml, ``time-limit = nan``), written in ASCII digits
(click's read ``'٣'`` as 3 and ``'1_000'`` as 1000), each range stated one way."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT, exits_2

SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"


#: Each float option and the problem its non-finite value is reported as.
PROBLEMS = {"--time-limit": "bad time limit", "--load": "bad load",
            "--interval": "bad decision interval", "--restart-penalty": "bad restart penalty",
            "--colocation-factor": "bad co-location factor",
            "--deadline-fraction": "bad deadline fraction"}


@pytest.mark.parametrize(("option", "value"), [(option, value) for option in PROBLEMS
                                               for value in ("nan", "inf")])
@pytest.mark.parametrize("command", ["replay", "bench"])
def test_a_float_option_that_is_not_finite_exits_2_before_any_work(
        command: str, option: str, value: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    head = [command, str(SAMPLE)] if command == "replay" else [command, "--trace", str(SAMPLE),
                                                               "--policies", "fifo"]
    err = exits_2([*head, "--format", "philly", "--cluster", "v100=4", option, value,
                   "--out", str(out)], capsys)
    # (once click's own range refused an infinite value of a bounded option in its words)
    assert err.startswith(f"error: {option}: {PROBLEMS[option]} (got '{value}'"), err
    assert err.count("\n") == 1, err
    assert not out.exists()


#: Every numeric option of both commands (the bench's --seeds and --load are lists, below),
#: the problem it is reported as and its range, written as everywhere else.
RANGES = {"--time-limit": ("bad time limit", "seconds > 0 and <= 1e+10"),
          "--decision-timeout": ("bad decision timeout", "seconds > 0 and <= 1e+10"),
          "--interval": ("bad decision interval", "seconds >= 1"),
          "--limit-jobs": ("bad job limit", "an integer >= 1"),
          "--restart-penalty": ("bad restart penalty", "seconds from 0 to 86,400"),
          "--start-latency": ("bad start latency", "seconds from 0 to 86,400"),
          "--deadline-fraction": ("bad deadline fraction", "a number from 0 to 1"),
          "--colocation-factor": ("bad co-location factor", "a number > 0 and <= 1")}
REPLAY_ONLY = {"--seed": ("bad seed", "an integer from 0 to 2,147,483,647"),
               "--load": ("bad load", "a number from 0.001 to 1,000"),
               "--partitions": ("bad partition count", "an integer >= 1")}
BENCH_ONLY = {"--workers": ("bad worker count", "an integer >= 1")}


def _args(command: str, out: Path) -> list[str]:
    head = [command, str(SAMPLE)] if command == "replay" else [command, "--trace", str(SAMPLE),
                                                               "--policies", "fifo"]
    return [*head, "--format", "philly", "--cluster", "v100=4", "--out", str(out)]


@pytest.mark.parametrize("value", ["\u0663", "1_000", "\uff18"])
@pytest.mark.parametrize(("command", "option"), [
    *(("replay", option) for option in (*RANGES, *REPLAY_ONLY)),
    *(("bench", option) for option in (*RANGES, *BENCH_ONLY))])
def test_a_number_in_other_than_ascii_digits_is_refused(
        command: str, option: str, value: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Once: --start-latency '٣' ran with 3 s and '1_000' with 1,000 s (click's FloatRange
    # reads with float(), which takes Unicode digits and '_' separators).
    out = tmp_path / "out"
    err = exits_2([*_args(command, out), option, value], capsys)
    problem, expected = {**RANGES, **REPLAY_ONLY, **BENCH_ONLY}[option]
    assert err == f"error: {option}: {problem} (got {value!r}; expected {expected})\n"
    assert not out.exists()


@pytest.mark.parametrize("value", ["-1", "0", "0.0", "1.5", "nan"])
def test_the_colocation_factor_states_its_range_one_way(
        value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Once: -1 was "a number from 0 to 1" and 0 "a number in (0, 1]".
    err = exits_2([*_args("replay", tmp_path / "o"), "--colocation-factor", value], capsys)
    assert err == f"error: --colocation-factor: bad co-location factor (got {value!r}; " \
        "expected a number > 0 and <= 1)\n"


@pytest.mark.parametrize("command", ["replay", "bench"])
def test_an_empty_price_list_is_an_error_not_the_default_prices(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    err = exits_2([*_args(command, out), "--prices", ""], capsys)
    assert err.startswith("error: --prices: empty price list (got ''; expected "
                          "GPU_TYPE=USD_PER_GPU_HOUR[,...], each price a number > 0 and <= "
                          "1,000,000"), err
    assert not out.exists()


@pytest.mark.parametrize("loads", ["\u0663", "1,1_0", "0.5,\uff18"])
def test_bench_loads_are_ascii_numbers(loads: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2([*_args("bench", tmp_path / "b"), "--load", loads], capsys)
    assert err.startswith("error: --load: bad load (got "), err
