"""Progress bars (hetsched.core.bars): counts, ETA, lines above the bar, clean ends."""

from __future__ import annotations

import io
import threading

import pytest

from hetsched.core.bars import BudgetBar, ProgressBar, in_jupyter, shows_progress


def test_a_bar_counts_with_rate_and_eta_and_ends_on_a_line_of_its_own() -> None:
    stream = io.StringIO()
    with ProgressBar(10, desc="replay", unit="job", stream=stream, enabled=True) as bar:
        bar.update_to(4, "t = 1.5 h", force=True)
        bar.write("a line above the bar")
        bar.advance()
    text = stream.getvalue()
    frames = text.split("\r")
    assert "replay:   0%" in frames[1]
    shown = [frame for frame in frames if "4/10" in frame]
    assert shown
    assert "t = 1.5 h" in shown[0]
    assert "job/s" in shown[0]
    assert "<" in shown[0]  # [elapsed<remaining]: the ETA
    assert "a line above the bar\n" in text
    assert "5/10" in frames[-1]
    assert text.endswith("\n")


def test_a_bar_is_throttled_but_shows_the_last_count() -> None:
    stream = io.StringIO()
    with ProgressBar(1000, desc="replay", unit="job", stream=stream, enabled=True) as bar:
        for done in range(1, 1001):
            bar.update_to(done)
    frames = [f for f in stream.getvalue().split("\r") if f.strip()]
    assert len(frames) < 100  # redrawn at most every 0.2 s, not 1,000 times
    assert "1000/1000" in frames[-1]


def test_no_bar_where_nobody_sees_it() -> None:
    stream = io.StringIO()
    assert not shows_progress(stream)
    assert not in_jupyter()
    with ProgressBar(3, desc="bench", unit="run", stream=stream) as bar:
        assert not bar.enabled
        bar.update_to(2, "x", force=True)
        bar.write("run 1 finished")
    assert stream.getvalue() == "run 1 finished\n"  # the lines, without a bar


def test_ctrl_c_closes_the_bar_and_leaves_it_on_screen() -> None:
    stream = io.StringIO()
    bar = ProgressBar(10, desc="replay", unit="job", stream=stream, enabled=True)

    def interrupted() -> None:
        with bar:
            bar.update_to(3, force=True)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert bar._bar is None
    assert "3/10" in stream.getvalue().split("\r")[-1]
    assert stream.getvalue().endswith("\n")
    bar.close()  # idempotent


def test_budget_bar_ticks_in_the_background_and_reports_the_time_taken() -> None:
    stream = io.StringIO()
    ticked = threading.Event()
    budget = BudgetBar(60, desc="solve (deadline)", stream=stream, enabled=True, tick_s=0.01)
    original = budget.bar.update_to

    def update_to(done: float, postfix: str | None = None, *, force: bool = False) -> None:
        original(done, postfix, force=force)
        ticked.set()

    budget.bar.update_to = update_to  # type: ignore[method-assign]
    with budget:
        assert ticked.wait(30)  # the thread redrew the bar while the block ran
    frames = stream.getvalue().split("\r")
    assert any("at most" in frame and "s left" in frame for frame in frames)
    assert "of 60 s" in frames[-1]
    assert "done in" in frames[-1]
    assert budget._thread is not None
    assert not budget._thread.is_alive()


def test_budget_bar_without_a_limit_shows_the_elapsed_time() -> None:
    stream = io.StringIO()
    with BudgetBar(None, desc="solve (fifo)", stream=stream, enabled=True, tick_s=0.01):
        pass
    assert "solve (fifo): 00:00" in stream.getvalue()
