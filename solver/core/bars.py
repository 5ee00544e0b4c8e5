"""Progress bars for the long commands (``solve``, ``fit --report``, ``replay``, ``bench``),
drawn by tqdm: a count with rate and ETA on a terminal, a widget in Jupyter (with
``ipywidgets``; without it, the same text bar in the cell's output), nothing when stderr
is a file or a pipe. A bar is closed, its last state left on screen, however the block
it is in ends (Ctrl-C included); lines written through :meth:`ProgressBar.write` appear
above it without tearing it.

Library code takes plain callbacks (``progress(done, total, ...)``); the command line and
the entry points that show progress make the bars here."""

from __future__ import annotations

import importlib
import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO

#: Seconds between two redraws of a bar fed by many small updates (a replay's decisions).
REFRESH_S = 0.2


def in_jupyter() -> bool:
    """Whether this process is a Jupyter kernel (a notebook, JupyterLab, VS Code)."""
    shell = sys.modules.get("IPython")
    if shell is None or "ipykernel" not in sys.modules:
        return False
    get = getattr(shell, "get_ipython", None)
    return get is not None and type(get()).__name__ == "ZMQInteractiveShell"


def shows_progress(stream: TextIO | None = None) -> bool:
    """Whether a bar on ``stream`` (default stderr) would be seen: a terminal, or a Jupyter
    cell; not a file, a pipe or a CI log."""
    target = stream or sys.stderr
    try:
        tty = bool(target.isatty())
    except (AttributeError, ValueError):  # a closed or odd stream
        tty = False
    return tty or (stream is None and in_jupyter())


def _bar_class(stream: TextIO | None) -> Any:
    """tqdm's notebook bar in Jupyter when ipywidgets is installed, else its text bar."""
    if stream is None and in_jupyter():
        try:
            notebook = importlib.import_module("tqdm.notebook")
        except ImportError:
            notebook = None
        if notebook is not None and getattr(notebook, "IProgress", None) is not None:
            return notebook.tqdm
    from tqdm import tqdm as text_bar

    return text_bar


class ProgressBar:
    """A counted bar (``total`` units of ``unit``, e.g. jobs, runs, points) with rate and
    ETA, on ``stream`` (stderr by default); ``enabled=None`` shows it only where it would
    be seen (:func:`shows_progress`). Use it as a context manager, or call :meth:`close`."""

    def __init__(self, total: float | None, *, desc: str, unit: str,
                 stream: TextIO | None = None, enabled: bool | None = None,
                 bar_format: str | None = None) -> None:
        self.stream = stream
        self.enabled = shows_progress(stream) if enabled is None else enabled
        self._last = 0.0
        self._bar: Any = None
        if self.enabled:
            options: dict[str, Any] = {"total": total, "desc": desc, "unit": unit,
                                       "dynamic_ncols": True, "leave": True}
            if bar_format is not None:
                options["bar_format"] = bar_format
            if stream is not None or not in_jupyter():
                options["file"] = stream or sys.stderr
            self._bar = _bar_class(stream)(**options)

    def update_to(self, done: float, postfix: str | None = None, *,
                  force: bool = False) -> None:
        """Set the count to ``done`` (and the text after the bar, unless ``None``), redrawn
        at most every :data:`REFRESH_S` seconds unless ``force`` or the count reached the
        total."""
        if self._bar is None:
            return
        clock = time.monotonic()
        finished = self._bar.total is not None and done >= self._bar.total
        if not (force or finished) and clock - self._last < REFRESH_S:
            return
        self._last = clock
        self._bar.n = done
        if postfix is not None:
            self._bar.set_postfix_str(postfix, refresh=False)
        self._bar.refresh()

    def advance(self, postfix: str | None = None) -> None:
        """One more unit done (redrawn at once)."""
        if self._bar is not None:
            self.update_to(self._bar.n + 1, postfix, force=True)

    def describe(self, postfix: str) -> None:
        """Change the text after the bar (redrawn at once: also shows the elapsed time)."""
        if self._bar is not None:
            self._bar.set_postfix_str(postfix, refresh=True)

    def write(self, line: str) -> None:
        """A permanent line, above the bar when there is one, else on the stream."""
        if self._bar is not None:
            self._bar.write(line, file=self.stream or sys.stderr)
            return
        target = self.stream or sys.stderr
        target.write(line + "\n")
        target.flush()

    def close(self) -> None:
        """Leave the bar as it is on screen and stop drawing it (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


class BudgetBar:
    """Seconds spent of a time budget (``limit_s``; ``None``: no limit, elapsed time only),
    redrawn every ``tick_s`` by a background thread while the block runs: the ETA is when
    the budget runs out (a solve may end sooner, when it proves its answer). The budget
    counts from ``started`` (a ``time.monotonic()`` reading; default: entering the block)."""

    def __init__(self, limit_s: float | None, *, desc: str, stream: TextIO | None = None,
                 enabled: bool | None = None, tick_s: float = 0.5,
                 started: float | None = None) -> None:
        # The budget may count from before the bar (the command's start): tqdm's own
        # elapsed and remaining would not, so the bar says what is left itself.
        layout = ("{desc}: |{bar}| {n:.0f} of {total:g} s{postfix}" if limit_s is not None
                  else "{desc}: {elapsed}")
        self.bar = ProgressBar(limit_s, desc=desc, unit="s", stream=stream, enabled=enabled,
                               bar_format=layout)
        self.limit_s = limit_s
        self.tick_s = tick_s
        self._started = started
        self._began = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _show(self, final: bool = False) -> None:
        elapsed = time.monotonic() - self._began
        if self.limit_s is None:
            self.bar.update_to(elapsed, force=True)
            return
        left = max(0.0, self.limit_s - elapsed)
        self.bar.update_to(min(elapsed, self.limit_s), f"done in {elapsed:.1f} s" if final
                           else f"at most {left:.0f} s left", force=True)

    def _tick(self) -> None:
        while not self._stop.wait(self.tick_s):
            self._show()

    def __enter__(self) -> BudgetBar:
        self._began = self._started if self._started is not None else time.monotonic()
        if self.bar.enabled:
            self._thread = threading.Thread(target=self._tick, name="hetsched-budget-bar",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._show(final=True)  # the time it took
        self.bar.close()
