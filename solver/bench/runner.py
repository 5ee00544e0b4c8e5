"""The benchmark harness: every policy x seed x load of one trace, side by side.

Each combination is one replay (a *cell*), run by an engine
(:mod:`hetsched.bench.engine`: this process, a process pool, or Ray's
:mod:`hetsched.bench.ray_engine`); the cells' inputs are read once, here. The bench writes
into its output folder:

* ``results.csv``: one row per finished run (policy, seed, load, every key of the
  replay's ``summary.json``, the lower bounds of :mod:`hetsched.core.bounds` and the LP bound
  of :mod:`hetsched.bench.lp_bounds`, and the ratios to them), appended and flushed as each
  run finishes, so an interrupted bench keeps its finished rows and a rerun skips them;
* ``lp_bounds.json``: the LP bounds, one per job set (computed beside the runs);
* ``runs/<policy>-s<seed>-l<load>/``: each run's ``summary.json``, ``jobs.csv``,
  ``decisions.csv`` and ``timing.json`` (wall clock; its figures are in results.csv too),
  handed back by the worker and written here as one set;
* ``bench.json``: the settings that shape the results (a rerun with other settings into
  the same folder is refused);
* ``report.md`` and the plots (PNG): see docs/bench.md.

Several benches (a sweep spec's traces and clusters, :mod:`hetsched.bench.spec`) run
together on one engine (:func:`run_benches`), each into its own folder.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from hetsched.bench.engine import (
    Cell,
    Engine,
    default_workers,
    likely_longest_first,
    run_cells,
)
from hetsched.bench.engines import make_engine
from hetsched.bench.inputs import Prefetched, prefetch
from hetsched.bench.local_engine import LocalEngine
from hetsched.bench.lp_bounds import LpBounds
from hetsched.bench.report import write_report
from hetsched.bench.results import (
    KEY_COLUMNS,
    append_result,
    read_results,
    result_row,
    resume_rows,
)
from hetsched.bench.settings import BenchSettings, load_label, plan, record_settings
from hetsched.bench.status import BenchProgress
from hetsched.core.interrupts import deferred_interrupts
from hetsched.core.outputs import check_output_folder, locked_folder, writing

if TYPE_CHECKING:
    from hetsched.replaying import ReplayResult

__all__ = ["BenchOutcome", "default_workers", "make_engine", "run_bench", "run_benches"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchOutcome:
    """What a bench did: runs finished now, skipped (already in results.csv), failed."""

    out: Path
    ran: int
    skipped: int
    failed: tuple[str, ...]
    interrupted: bool
    report: Path | None


def run_bench(settings: BenchSettings, out: Path, *, engine: Engine | None = None,
              stream: TextIO | None = None, report: bool = True) -> BenchOutcome:
    """Run every combination of ``settings`` not yet in ``out/results.csv``, appending each
    row as its run finishes, then write the report and plots (``report=True``).

    Runs go to ``engine`` (default: :class:`~hetsched.bench.engine.LocalEngine` with
    ``settings.workers`` processes, this process with one). Bad input raises
    :class:`InputError` (before any run, or from the first run that meets it); a run
    that fails otherwise, or whose worker dies, is tried once more, then reported and
    left out of results.csv (a rerun retries it); Ctrl-C stops the bench, keeping the
    finished rows. The folder is checked first (writable) and locked for the bench (a
    second bench into it is refused); a torn last row of results.csv is dropped and its
    run done again (:func:`hetsched.bench.results.resume_rows`).
    """
    return run_benches([(settings, out)], engine=engine, stream=stream, report=report)[0]


def run_benches(benches: Sequence[tuple[BenchSettings, Path]], *, engine: Engine | None = None,
                stream: TextIO | None = None, report: bool = True,
                names: Sequence[str] | None = None,
                prefetched: Sequence[Prefetched | None] | None = None) -> list[BenchOutcome]:
    """:func:`run_bench` for several benches (settings, folder) at once, their runs in one
    queue on one engine; ``names`` prefix each bench's progress lines; ``prefetched``:
    each bench's inputs if already read (:func:`prefetch`; a sweep spec's check reads
    them), else read here."""
    folders = [out for _, out in benches]
    for out in folders:
        check_output_folder(out)
        with writing(out, "out", "the output folder"):
            out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as locks:
        for out in folders:
            locks.enter_context(locked_folder(out))
        return _run_locked(benches, names or [""] * len(benches), engine, stream, report,
                           prefetched or [None] * len(benches))


class _Bench:
    """One bench folder at work: its settings, what it still has to run, its LP bounds;
    it records each finished run (the run's folder, its row, the progress line)."""

    #: the bench's progress, shared by every bench of the queue (set once all are read)
    progress: BenchProgress

    def __init__(self, index: int, settings: BenchSettings, out: Path, name: str,
                 note: Callable[[str], None], prefetched: Prefetched | None = None) -> None:
        self.index, self.settings, self.out = index, settings, out
        self.prefetched = prefetched
        self.prefix = f"{name}/" if name else ""
        self.results = out / "results.csv"
        record_settings(settings, out)
        warnings: list[str] = []
        self.kept = resume_rows(self.results, warnings.append)
        for warning in warnings:
            note(f"warning: {warning}")
        self.kept_keys = {tuple(r[k] for k in KEY_COLUMNS) for r in self.kept}
        self.todo = [spec for spec in plan(settings) if spec.key not in self.kept_keys]
        self.skipped = len(plan(settings)) - len(self.todo)
        if self.skipped:
            note(f"{self.skipped} runs already in {self.results}: skipped")
        self.ran = 0
        self.failed: list[str] = []
        self.lp_bounds: LpBounds | None = None

    def prepare(self, inputs: dict[str, object]) -> list[Cell]:
        """The LP bounds started (in the background, while the runs go on: once per job
        set, cached), the inputs of the runs still to do (read once, added to
        ``inputs``), and their cells."""
        lacking = [row for row in self.kept if not row.get("bound_lp_avg_jct_s")]
        if self.settings.lp_bound and (self.todo or lacking):
            self.lp_bounds = LpBounds(self.out, self.settings, self.progress.line)
            self.lp_bounds.start([*((spec.seed, spec.load) for spec in self.todo),
                                  *((int(row["seed"]), float(row["load"])) for row in lacking)],
                                 beside=self.settings.workers > 1)
        if not self.todo:
            return []
        settings, key = self.settings, str(self.index)
        read = self.prefetched or prefetch(
            settings.trace, settings.trace_format, settings.cluster, settings.replay,
            tuple(dict.fromkeys(spec.seed for spec in self.todo)),
            throughput=settings.throughput, tenants=settings.tenants, pairs=settings.pairs)
        inputs[key] = read.inputs
        for seed in dict.fromkeys(spec.seed for spec in self.todo):
            inputs[f"{key}/s{seed}"] = read.traces[seed]
        return [Cell(spec.name, spec.policy, self.index, key, f"{key}/s{spec.seed}",
                     *settings.policy_of(spec.policy),
                     settings.run_settings(spec.seed, spec.load), settings.pairs)
                for spec in self.todo]

    def record(self, cell: Cell, output: ReplayResult, seconds: float) -> None:
        """Write a finished run's folder and append its row (a Ctrl-C or SIGTERM neither
        tears nor drops them); an interrupted run is not recorded."""
        if output.interrupted:
            self.progress.line(f"{self.prefix}{cell.name}: interrupted, not recorded")
            return
        from hetsched.simulate.record import write_folder

        row = result_row(cell.label, cell.seed, load_label(cell.load), output.figures)
        if cell.policy != cell.label:
            row["policy_name"] = cell.policy
        if self.lp_bounds is not None:  # else filled in by finish_bounds
            row.update(self.lp_bounds.known_columns(cell.seed, cell.load, row))
        folder = self.out / "runs" / cell.name
        with deferred_interrupts():
            with writing(folder, "out", "the run's folder"):
                write_folder(folder, output.files)
            append_result(self.results, row)
            self.ran += 1
            self.progress.finished(self.prefix + cell.name, row, seconds)

    def finish_bounds(self) -> None:
        """Wait for the LP bounds and fill the rows written before theirs was known, and
        those of an earlier bench that lacked it (said once)."""
        if self.lp_bounds is None:
            return
        filled = self.lp_bounds.finish(self.results)
        earlier = sum(tuple(row[k] for k in KEY_COLUMNS) in self.kept_keys for row in filled)
        if earlier:
            self.progress.line(f"LP bound added to {earlier} earlier rows of {self.results}")

    def outcome(self, interrupted: bool, report: bool) -> BenchOutcome:
        """What this bench did; its report drawn (``report``) if it has rows."""
        if report and self.settings.references:
            from hetsched.bench.references import write_references

            write_references(self.out, self.settings.references)
        written = write_report(self.out) if report and read_results(self.results) else None
        return BenchOutcome(self.out, self.ran, self.skipped, tuple(self.failed), interrupted,
                            written)


class _Sink:
    """Hears the engine's cells and hands each to its bench."""

    def __init__(self, benches: Sequence[_Bench], progress: BenchProgress) -> None:
        self.benches, self.progress = benches, progress

    def _name(self, cell: Cell) -> str:
        return self.benches[cell.bench].prefix + cell.name

    def running(self, cells: Sequence[Cell]) -> None:
        self.progress.running = [self._name(cell) for cell in cells]
        self.progress.status()

    def finished(self, cell: Cell, output: ReplayResult, seconds: float) -> None:
        self.benches[cell.bench].record(cell, output, seconds)

    def retrying(self, cell: Cell, error: BaseException) -> None:
        self.progress.retrying(self._name(cell), error)

    def failed(self, cell: Cell, error: BaseException) -> None:
        self.benches[cell.bench].failed.append(cell.name)
        self.progress.failed(self._name(cell), error)


def _run_locked(benches: Sequence[tuple[BenchSettings, Path]], names: Sequence[str],
                engine: Engine | None, stream: TextIO | None,
                report: bool, prefetched: Sequence[Prefetched | None]) -> list[BenchOutcome]:
    notes: list[str] = []
    running = [_Bench(index, settings, out, name, notes.append, read)
               for index, ((settings, out), name, read) in enumerate(zip(
                   benches, names, prefetched, strict=True))]
    progress = BenchProgress(sum(len(bench.todo) for bench in running), stream)
    for text in notes:
        progress.line(text)
    for bench in running:
        bench.progress = progress
    if engine is None:
        engine = LocalEngine(max(settings.workers for settings, _ in benches))
    inputs: dict[str, object] = {}
    interrupted = False
    try:
        # The LP bounds are computed beside the runs (hetsched.bench.lp_bounds).
        cells = [cell for bench in running for cell in bench.prepare(inputs)]
        interrupted = run_cells(engine, inputs, likely_longest_first(cells),
                                _Sink(running, progress))
        if not interrupted:  # an interrupted bench does not wait: a rerun fills them
            for bench in running:
                bench.finish_bounds()
    except KeyboardInterrupt:  # while waiting for the bounds: the runs are recorded
        interrupted = True
    finally:
        for bench in running:
            if bench.lp_bounds is not None:
                bench.lp_bounds.close()
        progress.close()
    if interrupted:
        ran = sum(bench.ran for bench in running)
        progress.line(f"interrupted: {ran} runs recorded in "
                      + ", ".join(str(bench.results) for bench in running)
                      + "; run the same command again to resume")
    return [bench.outcome(interrupted, report) for bench in running]
