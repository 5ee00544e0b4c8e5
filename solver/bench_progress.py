"""What a bench shows while it runs: one line per finished run, and on a terminal a
status line."""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from hetsched.bench_results import BenchRow, duration_text


class BenchProgress:
    """One line per finished run on ``stream`` (stderr); on a terminal also a status line
    (runs done, running, elapsed) refreshed as runs finish and every few seconds."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.done = 0
        self.running: list[str] = []
        self.began = time.monotonic()
        self.tty = self.stream.isatty()

    def line(self, text: str) -> None:
        """Write one permanent line (above the status line on a terminal)."""
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.status()

    def finished(self, name: str, row: dict[str, str], seconds: float) -> None:
        """Report a finished run: jobs, average JCT against its bound, deadlines, time."""
        self.done += 1
        typed = BenchRow.from_cells(row)
        summary, ratio = typed.summary, typed.avg_jct_over_bound
        text = (f"[{self.done}/{self.total}] {name}: {summary.completed}/"
                f"{summary.jobs} jobs, avg JCT {duration_text(summary.avg_jct_s)}"
                + (f" ({ratio:.2f}x bound)" if math.isfinite(ratio) else "")
                + (f", deadlines met {summary.deadline_met}/{summary.deadline_jobs}"
                   if summary.deadline_jobs else "")
                + f", fallbacks {summary.fallbacks}, {seconds:.1f} s")
        self.line(text)

    def failed(self, name: str, error: BaseException) -> None:
        """Report a run that failed on its last attempt."""
        self.done += 1
        self.line(f"[{self.done}/{self.total}] {name}: FAILED: {type(error).__name__}: {error}")

    def retrying(self, name: str, error: BaseException) -> None:
        """Report a run that failed (or whose worker died) and is tried again."""
        self.line(f"{name}: {type(error).__name__}: {error}: trying it again")

    def status(self) -> None:
        """Refresh the status line (terminals only)."""
        if not self.tty:
            self.stream.flush()
            return
        elapsed = time.monotonic() - self.began
        running = ", ".join(self.running[:3]) + (" ..." if len(self.running) > 3 else "")
        self.stream.write(f"\r\033[K{self.done}/{self.total} runs done, "
                          f"{len(self.running)} running ({running}), "
                          f"{elapsed / 60:.0f} min {elapsed % 60:02.0f} s")
        self.stream.flush()

    def close(self) -> None:
        """End the status line."""
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
