"""Shared fixtures: the project's instances, the shared data folder, and the checker."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from solver.check import check
from solver.data import Instance
from solver.result import Schedule

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


@pytest.fixture
def shared_data() -> Path:
    """The shared data folder; skips the test with a reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent (it sits beside the project "
                    "in CI and on developer machines)")
    return SHARED_DATA
