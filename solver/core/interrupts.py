"""Ctrl-C and SIGTERM: one path for both, and blocks that finish before they stop.

``timeout``, batch schedulers and container runtimes stop a process with SIGTERM; Python
ends at once on it, writing nothing. :func:`terminate_as_interrupt` turns SIGTERM into
:class:`Terminated`, a ``KeyboardInterrupt``, so that everything that saves its work on
Ctrl-C (the simulator, the bench, every solver call: :mod:`hetsched.formulations.cpsat_run`,
:mod:`hetsched.formulations.mip`) does the same on SIGTERM. :func:`deferred_interrupts` lets a
block that writes results finish first and raises the interrupt after it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: Exit codes of a process stopped by SIGINT and by SIGTERM (128 + signal number).
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be."""


_received: list[int] = []


def last_signal() -> int | None:
    """The last SIGINT or SIGTERM seen by the handlers of this module, if any."""
    return _received[-1] if _received else None


def exit_code(interrupt: BaseException | None = None) -> int:
    """130 for Ctrl-C, 143 for SIGTERM (from ``interrupt`` or the last signal seen)."""
    if isinstance(interrupt, Terminated) or last_signal() == signal.SIGTERM:
        return EXIT_TERMINATED
    return EXIT_INTERRUPTED


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise Terminated(f"signal {signum}")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (outside the main thread,
    where handlers cannot be set, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Run the block to its end even if SIGINT or SIGTERM arrives; the interrupt is raised
    when the block is done (KeyboardInterrupt or :class:`Terminated`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)
        _received.append(signum)

    previous = {sig: signal.signal(sig, remember) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pending:
        raise Terminated("signal 15") if pending[0] == signal.SIGTERM else KeyboardInterrupt


class Overrun(BaseException):
    """Raised inside a block that ran over its wall-clock limit (:func:`wall_clock_limit`);
    a ``BaseException``, so that a policy's ``except Exception`` does not swallow it."""


class WallClockLimit:
    """A wall-clock limit for calls made in a block: the ``with`` statement installs the
    handler once (a replay), :meth:`call` arms the timer for one call (a decision) and
    raises :class:`Overrun` in it once it has run ``seconds`` of wall time (a Python loop
    or a ``sleep``; code that holds the interpreter in C ends first). Only in the main
    thread, where signals arrive; elsewhere, and with ``None``, no limit."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.active = False
        self._previous: Any = None

    def __enter__(self) -> WallClockLimit:
        if self.seconds is not None and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGALRM, self._overrun)
            self.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self.active = False

    def _overrun(self, signum: int, frame: FrameType | None) -> None:
        raise Overrun(self.seconds)

    @contextmanager
    def call(self) -> Iterator[None]:
        """The limit on the block (one call)."""
        if not self.active:
            yield
            return
        assert self.seconds is not None
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


@contextmanager
def wall_clock_limit(seconds: float | None) -> Iterator[None]:
    """:class:`WallClockLimit` on one block."""
    with WallClockLimit(seconds) as limit, limit.call():
        yield
