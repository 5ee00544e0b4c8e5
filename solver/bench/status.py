"""What a bench shows while it runs: one line per finished, retried or failed run, and on
a terminal or in Jupyter a bar below them (:class:`hetsched.core.bars.ProgressBar`)."""

from __future__ import annotations

import math
from typing import TextIO

from hetsched.bench.results import BenchRow, duration_text


class BenchProgress:
    """One line per finished run on ``stream`` (stderr), always; on a terminal or in
    Jupyter also a bar below them (:class:`hetsched.core.bars.ProgressBar`: runs done of
    the total, elapsed time and ETA, the runs going on), redrawn as runs finish and every
    few seconds."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        from hetsched.core.bars import ProgressBar

        self.total = total
        self.done = 0
        self.running: list[str] = []
        self.bar = ProgressBar(total, desc="bench", unit="run", stream=stream)

    def line(self, text: str) -> None:
        """Write one permanent line (above the bar when there is one)."""
        self.bar.write(text)

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
        self.status()

    def failed(self, name: str, error: BaseException) -> None:
        """Report a run that failed on its last attempt."""
        self.done += 1
        self.line(f"[{self.done}/{self.total}] {name}: FAILED: {type(error).__name__}: {error}")
        self.status()

    def retrying(self, name: str, error: BaseException) -> None:
        """Report a run that failed (or whose worker died) and is tried again."""
        self.line(f"{name}: {type(error).__name__}: {error}: trying it again")

    def status(self) -> None:
        """Redraw the bar: runs done, and which are running."""
        running = ", ".join(self.running[:3]) + (" ..." if len(self.running) > 3 else "")
        self.bar.update_to(self.done, f"running: {running}" if running else "", force=True)

    def close(self) -> None:
        """Leave the bar as it is (idempotent)."""
        self.bar.close()
