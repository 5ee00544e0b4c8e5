"""Fixtures (the shared data folder) and options (``--backends``); shared helpers live in
tests/helpers.py."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hypothesis import settings

from hetsched.registry import BACKENDS
from tests.helpers import SHARED_DATA

# Property tests draw the same examples on every run (derived from each test's name), so
# a run's outcome depends on the code alone; HYPOTHESIS_PROFILE=explore draws at random
# (how the round-off case in test_deadline.py was found).
settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

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


#: The solver back-ends (the registry's table, less AlloX's own matching); ``pytest
#: --backends highs,cpsat`` runs the tests of those only.
SOLVER_BACKENDS = tuple(b for b in BACKENDS if b != "matching")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends", default=None,
        help="comma-separated solver back-ends whose tests run (of "
             f"{', '.join(SOLVER_BACKENDS)}); tests parametrized with another back-end "
             "are deselected. Default: all.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "model(name): the registered model whose back-ends the ``backend`` "
        "fixture runs through (hetsched.registry)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``backend`` without parametrizing it runs once per back-end of
    its model (``@pytest.mark.model("deadline")``, on the test or its module), as the
    registry declares them, each a test case of its own (so ``--backends`` selects
    them); without the mark, once per solver back-end."""
    if "backend" not in metafunc.fixturenames or any(
            "backend" in mark.args[0] for mark in metafunc.definition.iter_markers("parametrize")
            if mark.args and isinstance(mark.args[0], str)):
        return
    marker = metafunc.definition.get_closest_marker("model")
    if marker is None:
        backends: tuple[str, ...] = SOLVER_BACKENDS
    else:
        from hetsched.registry import entry

        backends = entry(str(marker.args[0])).backends
    metafunc.parametrize("backend", backends)


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
