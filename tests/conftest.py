"""Shared fixtures: the project's instances, the shared data folder, and the checker."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hetsched.check import check
from hetsched.data import Instance
from hetsched.result import Schedule

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
#: Real data measured by others lives beside the project (never copied into it).
SHARED_DATA = ROOT.parent / "shared" / "data"

# A non-interactive shell starts background commands (`pytest &`, CI runners) with SIGINT
# ignored, and child processes inherit an ignored signal: the interrupt tests' children
# would then never see Ctrl-C (Python installs its KeyboardInterrupt handler only when
# SIGINT is not ignored at startup). Catching it here gives children the default action,
# as a terminal does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def assert_valid(instance: Instance, schedule: Schedule, *, complete: bool = True) -> None:
    """Fail with the checker's violations if ``schedule`` is not valid for ``instance``."""
    violations = check(instance, schedule, complete=complete)
    assert not violations, "\n".join(map(str, violations))


def exits_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI with ``args``; it must exit 2 without a traceback; its stderr."""
    from hetsched.cli import main

    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "Traceback" not in err
    assert "internal error" not in err
    return err


@pytest.fixture
def shared_data() -> Path:
    """The shared data folder; skips the test with a reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent (it sits beside the project "
                    "in CI and on developer machines)")
    return SHARED_DATA


#: The solver back-ends; ``pytest --backends highs,cpsat`` runs the tests of those only.
SOLVER_BACKENDS = ("cpsat", "highs", "cbc", "scip")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends", default=None,
        help="comma-separated solver back-ends whose tests run (of "
             f"{', '.join(SOLVER_BACKENDS)}); tests parametrized with another back-end "
             "are deselected. Default: all.")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect tests parametrized (``backend`` or ``engine``) with a solver back-end that
    ``--backends`` leaves out; tests of no solver back-end always run."""
    chosen = config.getoption("--backends")
    if not chosen:
        return
    selected = {name.strip() for name in str(chosen).split(",") if name.strip()}
    unknown = selected - set(SOLVER_BACKENDS)
    if unknown or not selected:
        raise pytest.UsageError(f"--backends: unknown back-end {sorted(unknown)} (expected "
                                f"some of {', '.join(SOLVER_BACKENDS)})")
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        used = {params.get(key) for key in ("backend", "engine")} & set(SOLVER_BACKENDS)
        (drop if used - selected else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
