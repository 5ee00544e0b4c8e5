"""How loudly a solve logs: its stages (model built, bounds, solver status) at INFO when it
is the command's one solve (``hetsched solve -v``), at DEBUG when it is one of a replay's
hundreds of decisions (``hetsched replay -v`` logs the replay, ``-vv`` every decision).

The simulator runs a replay inside :func:`per_decision_logs`; code that logs a solve's
stages asks :func:`solve_log_level` for its level. A context variable, so threads and
worker processes each have their own."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_IN_REPLAY: ContextVar[bool] = ContextVar("hetsched_in_replay", default=False)


def solve_log_level() -> int:
    """INFO for a solve of its own, DEBUG inside a replay (:func:`per_decision_logs`)."""
    return logging.DEBUG if _IN_REPLAY.get() else logging.INFO


@contextmanager
def per_decision_logs() -> Iterator[None]:
    """Within this block, solves are a replay's decisions: their stages log at DEBUG."""
    token = _IN_REPLAY.set(True)
    try:
        yield
    finally:
        _IN_REPLAY.reset(token)
