"""The lean install (``pip install -e .``) has HiGHS and CP-SAT; CBC
and SCIP are extras. A back-end whose package is missing is a clear error naming the
extra to install (exit 2), never an internal error."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from hetsched.policies import backends
from tests.helpers import INSTANCES, ROOT, exits_2


@pytest.fixture
def lean(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if only the lean install's engines were there (cbcbox and pyscipopt absent)."""
    monkeypatch.setattr(backends, "available_engines", lambda: ("highs",))


@pytest.mark.usefixtures("lean")
@pytest.mark.parametrize("backend", ["cbc", "scip"])
def test_solve_with_a_missing_backend_names_the_extra(
        backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["solve", str(INSTANCES / "tiny.json"), "--model", "deadline",
                   "--backend", backend], capsys)
    assert err.startswith(f"error: --backend: the {backend} back-end is not installed (got "
                          f"'{backend}'; expected pip install 'hetsched[{backend}]'"), err
    assert "another back-end: cpsat, highs, matching" in err


@pytest.mark.usefixtures("lean")
def test_replay_with_a_missing_backend_names_the_extra(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = exits_2(["replay", str(ROOT / "tests" / "data" / "traces" / "philly_small.csv"),
                   "--format", "philly", "--cluster", "v100=4", "--policy", "gavel",
                   "--backend", "cbc", "--out", f"{tmp_path}/out"], capsys)
    assert "--backend: the cbc back-end is not installed" in err
    assert "pip install 'hetsched[cbc]'" in err


def test_the_lean_install_needs_no_cbc_scip_jupyter_or_dev_tool() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    required = config["options"]["install_requires"]
    for heavy in ("cbcbox", "pyscipopt", "jupyterlab", "ray", "mypy", "pytest"):
        assert heavy not in required
    extras = config["options.extras_require"]
    assert "cbcbox==" in extras["cbc"]
    assert "pyscipopt" in extras["scip"]
    assert "jupyterlab" in extras["notebooks"]
    for package in ("cbcbox", "pyscipopt", "pytest", "nbmake"):  # CI installs dev
        assert package in extras["dev"]
