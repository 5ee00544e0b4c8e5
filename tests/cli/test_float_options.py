"""Issue 33, item 4: every float option of ``replay`` and ``bench`` is finite and in range,
checked before any work (click's ranges let NaN through: ``nan < 0`` is false); a NaN
limit once reached summary.json (invalid JSON) and run.toml (``time-limit = nan``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT, exits_2

SAMPLE = ROOT / "tests" / "data" / "traces" / "philly_small.csv"


@pytest.mark.parametrize(("option", "value", "problem"), [
    ("--time-limit", "nan", "bad time limit"),
    ("--time-limit", "inf", "bad time limit"),
    ("--load", "nan", "bad load"),
    ("--load", "inf", "bad load"),
    ("--interval", "nan", "bad decision interval"),
    ("--interval", "inf", "bad decision interval"),
    ("--restart-penalty", "nan", "bad restart penalty"),
    ("--colocation-factor", "nan", "bad co-location factor"),
    ("--deadline-fraction", "nan", "bad deadline fraction"),
])
@pytest.mark.parametrize("command", ["replay", "bench"])
def test_a_float_option_that_is_not_finite_exits_2_before_any_work(
        command: str, option: str, value: str, problem: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    head = [command, str(SAMPLE)] if command == "replay" else [command, "--trace", str(SAMPLE),
                                                               "--policies", "fifo"]
    err = exits_2([*head, "--format", "philly", "--cluster", "v100=4", option, value,
                   "--out", str(out)], capsys)
    assert err.startswith(f"error: {option}: "), err
    assert err.count("\n") == 1, err
    assert problem in err, err
    assert not out.exists()
