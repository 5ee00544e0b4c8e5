"""Issue 33, item 4: every float option of ``replay`` and ``bench`` is finite and in range,
checked before any work (click's ranges let NaN through: ``nan < 0`` is false); a NaN
limit once reached summary.json (invalid JSON) and run.toml (``time-limit = nan``)."""

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
    # click's own range refuses an infinite value of a bounded option first, naming it
    assert err.startswith((f"error: {option}: {PROBLEMS[option]} (got {value}",
                           f"error: {option}: {PROBLEMS[option]} (got '{value}'",
                           f"error: Invalid value for '{option}': {value} is not in the "
                           "range")), err
    assert err.count("\n") == 1, err
    assert not out.exists()
