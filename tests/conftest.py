"""Fixtures (the shared data folder) and options (``--backends``); shared helpers live in
tests/helpers.py."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers import SHARED_DATA

# A non-interactive shell starts background commands (`pytest &`, CI runners) with SIGINT
# ignored, and child processes inherit an ignored signal: the interrupt tests' children
# would then never see Ctrl-C (Python installs its KeyboardInterrupt handler only when
# SIGINT is not ignored at startup). Catching it here gives children the default action,
# as a terminal does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
