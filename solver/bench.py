"""The benchmark harness: every policy x seed x load of one trace, side by side.

Each combination is one replay (:func:`hetsched.replays.run_replay`), run in worker
processes. The bench writes into its output folder:

* ``results.csv``: one row per finished run (policy, seed, load, every key of the
  replay's ``summary.json``, the lower bounds of :mod:`hetsched.bounds` and the LP bound
  of :mod:`hetsched.bench_bounds`, and the ratios to them), appended and flushed as each
  run finishes, so an interrupted bench keeps its finished rows and a rerun skips them;
* ``lp_bounds.json``: the LP bounds, one per job set (computed before the runs);
* ``runs/<policy>-s<seed>-l<load>/``: each run's ``summary.json``, ``jobs.csv``,
  ``decisions.csv`` and ``timing.json`` (wall clock; its figures are in results.csv too);
* ``bench.json``: the settings that shape the results (a rerun with other settings into
  the same folder is refused);
* ``report.md`` and the plots (PNG): see docs/bench.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hetsched.bench_bounds import LpBounds
from hetsched.bench_report import write_report
from hetsched.bench_results import (
    KEY_COLUMNS,
    BenchRow,
    append_result,
    duration_text,
    read_results,
    result_row,
    resume_rows,
)
from hetsched.errors import InputError
from hetsched.formulations.options import MAX_SEED, check_seed
from hetsched.interrupts import deferred_interrupts
from hetsched.outputs import check_output_folder, locked_folder, write_text, writing
from hetsched.replays import MAX_LOAD, MIN_LOAD
from hetsched.sharing import DEFAULT_COLOCATION_FACTOR

log = logging.getLogger(__name__)


#: The settings recorded in ``bench.json``; a rerun into the same folder must match them.
SETTING_FIELDS = ("trace", "trace_format", "cluster", "limit_jobs", "time_limit_s",
                  "deterministic", "throughput", "backend", "interval_s", "deadline_fraction",
                  "restart_penalty_s", "on_bad_row", "reference_gpu", "gpu_aliases",
                  "unknown_gpus", "gpu_sharing", "colocation_factor")
#: Settings added after benches were first recorded, and their value in a bench.json
#: written before (so that such a bench resumes).
SETTING_DEFAULTS: dict[str, Any] = {"reference_gpu": None, "gpu_aliases": {},
                                    "unknown_gpus": "error", "gpu_sharing": True,
                                    "colocation_factor": DEFAULT_COLOCATION_FACTOR}


def load_label(load: float) -> str:
    """How a load is written in results.csv and run folder names: ``0.5``, ``1``, ``2``."""
    return f"{load:g}"


def default_workers() -> int:
    """min(2, CPUs): the replays of exact models are CPU-bound."""
    return max(1, min(2, os.cpu_count() or 1))


# --- settings ---------------------------------------------------------------------------


def _split(text: str, option: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise InputError("empty item in a list", path=option, value=text,
                         expected="comma-separated values, e.g. a,b,c")
    return list(dict.fromkeys(items))


def parse_policies(text: str) -> tuple[str, ...]:
    """``fifo,deadline`` -> ``("fifo", "deadline")``; every name must be a known rolling
    policy (an :class:`InputError` lists the unknown ones and the known ones)."""
    from hetsched.replays import rolling_policy

    names = _split(text, "policies")
    unknown: list[str] = []
    expected = ""
    for name in names:
        try:
            rolling_policy(name, time_limit_s=1.0)
        except InputError as exc:
            unknown.append(name)
            expected = exc.expected or ""
    if unknown:
        raise InputError("unknown policies", path="policies", value=",".join(unknown),
                         expected=expected or "known policy names")
    return tuple(names)


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0,1,2`` -> ``(0, 1, 2)``; integers >= 0, duplicates dropped."""
    seeds = []
    for item in _split(text, "seeds"):
        if not (item.isascii() and item.isdigit()):  # ("²".isdigit() is True)
            raise InputError("bad seed", path="seeds", value=item,
                             expected=f"integers from 0 to {MAX_SEED:,}, e.g. 0,1,2")
        seeds.append(check_seed(int(item), "seeds"))
    return tuple(dict.fromkeys(seeds))


def parse_loads(text: str) -> tuple[float, ...]:
    """``0.5,1,2`` -> ``(0.5, 1.0, 2.0)``: arrival-rate multipliers, finite and > 0;
    loads written alike (:func:`load_label`) are one."""
    loads: dict[str, float] = {}
    for item in _split(text, "load"):
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not (MIN_LOAD <= value <= MAX_LOAD):  # (NaN too)
            raise InputError("bad load", path="load", value=item,
                             expected=f"numbers from {MIN_LOAD:g} to {MAX_LOAD:g} "
                             "(arrival-rate multipliers), e.g. 0.5,1,2")
        loads.setdefault(load_label(value), value)
    return tuple(loads.values())


@dataclass(frozen=True)
class BenchSettings:
    """What to run: one trace on one cluster, every policy x seed x load.

    ``seeds`` seed the trace reader (drawn job types, synthetic deadlines) and the
    policies; ``loads`` multiply the arrival rate (2 halves the inter-arrival times);
    ``time_limit_s`` is the solver limit per decision, in deterministic work units with
    ``deterministic`` (the default: every run repeats exactly) or in wall seconds; the
    other fields are :func:`hetsched.replays.run_replay`'s.
    """

    trace: Path
    trace_format: str
    cluster: str
    policies: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    loads: tuple[float, ...] = (1.0,)
    workers: int = field(default_factory=default_workers)
    limit_jobs: int | None = None
    time_limit_s: float = 1.0
    deterministic: bool = True
    throughput: Path | None = None
    backend: str | None = None
    interval_s: float | None = None
    deadline_fraction: float | None = None
    restart_penalty_s: float = 30.0
    on_bad_row: str = "fatal"
    reference_gpu: str | None = None
    gpu_aliases: Mapping[str, str] = field(default_factory=dict)
    unknown_gpus: str = "error"
    gpu_sharing: bool = True
    colocation_factor: float = DEFAULT_COLOCATION_FACTOR
    #: add the LP bound on the average JCT to every row (hetsched.bench_bounds)
    lp_bound: bool = True

    def __post_init__(self) -> None:
        if not self.policies:
            raise InputError("no policies", path="policies", value="",
                             expected="at least one policy name")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int)
                                 or not 0 <= s <= MAX_SEED for s in self.seeds):
            raise InputError("bad seeds", path="seeds", value=self.seeds,
                             expected=f"one or more integers from 0 to {MAX_SEED:,}")
        if not self.loads or any(isinstance(v, bool) or not isinstance(v, int | float)
                                 or not MIN_LOAD <= v <= MAX_LOAD for v in self.loads):
            raise InputError("bad load", path="load", value=self.loads,
                             expected=f"one or more numbers from {MIN_LOAD:g} to "
                             f"{MAX_LOAD:g}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or \
                self.workers < 1:
            raise InputError("bad worker count", path="workers", value=self.workers,
                             expected="an integer >= 1")
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            raise InputError("bad time limit", path="time_limit_s", value=self.time_limit_s,
                             expected="seconds > 0")
        from hetsched.simulate import check_interval, check_restart_penalty

        check_interval(self.interval_s)
        check_restart_penalty(self.restart_penalty_s)
        if not self.trace.is_file():
            raise InputError("no such trace file", file=str(self.trace), path="trace")
        if self.throughput is not None and not self.throughput.is_file():
            raise InputError("no such throughput file", file=str(self.throughput),
                             path="throughput_path")

    def identity(self) -> dict[str, Any]:
        """The settings that shape every run's result (``bench.json``)."""
        values = asdict(self)
        identity = {name: values[name] for name in SETTING_FIELDS}
        identity["gpu_aliases"] = dict(self.gpu_aliases)
        identity["trace"] = str(self.trace.resolve())
        identity["throughput"] = None if self.throughput is None else \
            str(self.throughput.resolve())
        return identity


@dataclass(frozen=True)
class RunSpec:
    """One combination: a policy, a seed, a load."""

    policy: str
    seed: int
    load: float

    @property
    def name(self) -> str:
        """``<policy>-s<seed>-l<load>``: the run's folder under ``runs/`` (a policy class
        of yours by its :func:`hetsched.plugins.label`, ``my_policy.MyPolicy``)."""
        from hetsched.plugins import label

        return f"{label(self.policy)}-s{self.seed}-l{load_label(self.load)}"

    @property
    def key(self) -> tuple[str, str, str]:
        """The run's key in ``results.csv``."""
        return (self.policy, str(self.seed), load_label(self.load))


@dataclass(frozen=True)
class _Task:
    """What a worker process needs to run one replay."""

    settings: BenchSettings
    spec: RunSpec
    out: Path


def _replay(task: _Task) -> dict[str, object]:
    """Run one replay (in a worker process) and return its summary."""
    from hetsched.replays import run_replay

    settings, spec = task.settings, task.spec
    return run_replay(
        settings.trace, settings.trace_format, settings.cluster, spec.policy, out=task.out,
        throughput_path=settings.throughput, backend=settings.backend,
        interval_s=settings.interval_s, time_limit_s=settings.time_limit_s, seed=spec.seed,
        limit_jobs=settings.limit_jobs, on_bad_row=settings.on_bad_row,
        deadline_fraction=settings.deadline_fraction,
        restart_penalty_s=settings.restart_penalty_s, show_progress=False, load=spec.load,
        deterministic=settings.deterministic, reference_gpu=settings.reference_gpu,
        gpu_aliases=settings.gpu_aliases, unknown_gpus=settings.unknown_gpus,
        gpu_sharing=settings.gpu_sharing, colocation_factor=settings.colocation_factor)


# --- progress ---------------------------------------------------------------------------


class BenchProgress:
    """One line per finished run on ``stream`` (stderr), always; on a terminal or in
    Jupyter also a bar below them (:class:`hetsched.progress.ProgressBar`: runs done of
    the total, elapsed time and ETA, the runs going on), redrawn as runs finish and every
    few seconds."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        from hetsched.progress import ProgressBar

        self.total = total
        self.done = 0
        self.running: list[str] = []
        self.bar = ProgressBar(total, desc="bench", unit="run", stream=stream)

    def line(self, text: str) -> None:
        """Write one permanent line (above the bar when there is one)."""
        self.bar.write(text)

    def finished(self, spec: RunSpec, row: dict[str, str], seconds: float) -> None:
        """Report a finished run: jobs, average JCT against its bound, deadlines, time."""
        self.done += 1
        typed = BenchRow.from_cells(row)
        summary, ratio = typed.summary, typed.avg_jct_over_bound
        text = (f"[{self.done}/{self.total}] {spec.name}: {summary.completed}/"
                f"{summary.jobs} jobs, avg JCT {duration_text(summary.avg_jct_s)}"
                + (f" ({ratio:.2f}x bound)" if math.isfinite(ratio) else "")
                + (f", deadlines met {summary.deadline_met}/{summary.deadline_jobs}"
                   if summary.deadline_jobs else "")
                + f", fallbacks {summary.fallbacks}, {seconds:.1f} s")
        self.line(text)
        self.status()

    def failed(self, spec: RunSpec, error: BaseException) -> None:
        """Report a run that raised."""
        self.done += 1
        self.line(f"[{self.done}/{self.total}] {spec.name}: FAILED: "
                  f"{type(error).__name__}: {error}")
        self.status()

    def status(self) -> None:
        """Redraw the bar: runs done, and which are running."""
        running = ", ".join(self.running[:3]) + (" ..." if len(self.running) > 3 else "")
        self.bar.update_to(self.done, f"running: {running}" if running else "", force=True)

    def close(self) -> None:
        """Leave the bar as it is (idempotent)."""
        self.bar.close()


# --- the bench --------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchOutcome:
    """What a bench did: runs finished now, skipped (already in results.csv), failed."""

    out: Path
    ran: int
    skipped: int
    failed: tuple[str, ...]
    interrupted: bool
    report: Path | None


def plan(settings: BenchSettings) -> list[RunSpec]:
    """Every combination, loads outermost, then policies, then seeds."""
    return [RunSpec(policy, seed, load) for load in settings.loads
            for policy in settings.policies for seed in settings.seeds]


def _check_folder(settings: BenchSettings, out: Path) -> None:
    """Refuse an output folder that holds a bench of other settings; else record ours."""
    recorded = out / "bench.json"
    identity = settings.identity()
    if recorded.is_file():
        try:
            before = json.loads(recorded.read_text(encoding="utf-8"))
        except ValueError:
            before = None
        if not isinstance(before, dict):
            raise InputError("unreadable bench.json in the output folder", file=str(recorded),
                             path="out", expected="a JSON object (or a fresh --out)")
        changed = [name for name in SETTING_FIELDS
                   if before.get(name, SETTING_DEFAULTS.get(name)) != identity[name]]
        if changed:
            name = changed[0]
            raise InputError("the output folder holds a bench with other settings",
                             file=str(recorded), path=name, value=identity[name],
                             expected=f"{before.get(name)!r} as before (rerunning resumes a "
                             "bench), or another --out")
    from hetsched.formulations.versions import solver_versions

    write_text(recorded, json.dumps({**identity, "solver_versions": solver_versions()},
                                    indent=1) + "\n", "out", "bench.json")


def run_bench(settings: BenchSettings, out: Path, *, stream: TextIO | None = None,
              report: bool = True) -> BenchOutcome:
    """Run every combination of ``settings`` not yet in ``out/results.csv``, appending each
    row as its run finishes, then write the report and plots (``report=True``).

    Runs go to ``settings.workers`` processes (in this process with one worker). Bad
    input raises :class:`InputError` (before any run, or from the first run that meets
    it); a run that fails otherwise is reported and left out of results.csv (a rerun
    retries it); Ctrl-C stops the bench, keeping the finished rows. The folder is checked
    first (writable) and locked for the bench (a second bench into it is refused); a torn
    last row of results.csv is dropped and its run done again
    (:func:`hetsched.bench_results.resume_rows`).
    """
    check_output_folder(out)
    with writing(out, "out", "the output folder"):
        out.mkdir(parents=True, exist_ok=True)
    with locked_folder(out):
        return _run_locked(settings, out, stream, report)


def _run_locked(settings: BenchSettings, out: Path, stream: TextIO | None,
                report: bool) -> BenchOutcome:
    _check_folder(settings, out)
    results = out / "results.csv"
    warnings: list[str] = []
    kept = resume_rows(results, warnings.append)
    done = {tuple(r[k] for k in KEY_COLUMNS) for r in kept}
    todo = [spec for spec in plan(settings) if spec.key not in done]
    skipped = len(plan(settings)) - len(todo)
    progress = BenchProgress(len(todo), stream)
    for warning in warnings:
        progress.line(f"warning: {warning}")
    if skipped:
        progress.line(f"{skipped} runs already in {results}: skipped")
    failed: list[str] = []
    ran = 0
    interrupted = False
    lacking = [row for row in kept if not row.get("bound_lp_avg_jct_s")]
    lp_bounds = (LpBounds(out, settings, progress.line)
                 if settings.lp_bound and (todo or lacking) else None)
    if lp_bounds is not None:  # before the runs: computed once per job set, cached
        lp_bounds.prepare((spec.seed, spec.load) for spec in todo)
        if lacking:  # rows of an earlier bench (or a failed bound) get it now
            lp_bounds.add_to_rows(results, kept, lacking)

    def record(spec: RunSpec, summary: dict[str, object], seconds: float) -> None:
        nonlocal ran, interrupted
        if summary.get("interrupted"):
            interrupted = True
            progress.line(f"{spec.name}: interrupted, not recorded")
            return
        row = result_row(spec.policy, spec.seed, load_label(spec.load), summary)
        if lp_bounds is not None:
            row.update(lp_bounds.columns(spec.seed, spec.load, row))
        with deferred_interrupts():  # a Ctrl-C or SIGTERM neither tears nor drops the row
            append_result(results, row)
            ran += 1
            progress.finished(spec, row, seconds)

    tasks = [_Task(settings, spec, out / "runs" / spec.name) for spec in todo]
    try:
        if settings.workers == 1 or len(tasks) <= 1:
            for task in tasks:
                progress.running = [task.spec.name]
                progress.status()
                began = time.monotonic()
                try:
                    summary = _replay(task)
                except InputError:
                    raise
                except Exception as exc:
                    log.debug("run %s failed", task.spec.name, exc_info=True)
                    failed.append(task.spec.name)
                    progress.failed(task.spec, exc)
                    continue
                record(task.spec, summary, time.monotonic() - began)
                if interrupted:
                    break
        else:
            interrupted = _run_parallel(tasks, settings.workers, progress, record, failed)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        progress.running = []
        progress.close()
    if interrupted:
        progress.line(f"interrupted: {ran} runs recorded in {results}; run the same command "
                      "again to resume")
    written = write_report(out) if report and read_results(results) else None
    return BenchOutcome(out, ran, skipped, tuple(failed), interrupted, written)


def _run_parallel(tasks: Sequence[_Task], workers: int, progress: BenchProgress,
                  record: Callable[[RunSpec, dict[str, object], float], None],
                  failed: list[str]) -> bool:
    """Run ``tasks`` in ``workers`` processes; returns whether the bench was interrupted."""
    # Fresh processes (not fork: the parent may hold solver thread pools); the fork
    # server imports the replay once, and every worker forks from it.
    if sys.platform == "win32":
        context = multiprocessing.get_context("spawn")
    else:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["hetsched.bench", "hetsched.replays", "hetsched.simulate",
                                        "hetsched.traces", "hetsched.bounds", "hetsched.workers"])
    started: dict[Future[dict[str, object]], tuple[_Task, float]] = {}
    queue = list(tasks)
    interrupted = False
    from hetsched.workers import guard_worker

    # Workers die with this process, even when it is killed (solver/workers.py).
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=context,
                             initializer=guard_worker, initargs=(os.getpid(),)) as pool:
        try:
            while queue or started:
                # Keep exactly ``workers`` runs submitted, so "running" is true.
                while queue and len(started) < workers:
                    task = queue.pop(0)
                    started[pool.submit(_replay, task)] = (task, time.monotonic())
                progress.running = [task.spec.name for task, _ in started.values()]
                progress.status()
                finished, _ = wait(started, timeout=5.0, return_when=FIRST_COMPLETED)
                for future in finished:
                    task, began = started.pop(future)
                    try:
                        summary = future.result()
                    except InputError:
                        raise
                    except BrokenProcessPool:
                        raise
                    except Exception as exc:
                        failed.append(task.spec.name)
                        progress.failed(task.spec, exc)
                        continue
                    record(task.spec, summary, time.monotonic() - began)
                    if summary.get("interrupted"):
                        interrupted = True
                if interrupted:
                    break
        except (KeyboardInterrupt, BrokenProcessPool):
            interrupted = True
        finally:
            for future in started:
                future.cancel()
            if interrupted:
                # Runs still going were interrupted too (Ctrl-C reaches every worker):
                # keep what they finished with, record nothing partial.
                for future, (task, began) in list(started.items()):
                    with contextlib.suppress(Exception, KeyboardInterrupt):
                        summary = future.result(timeout=60)
                        record(task.spec, summary, time.monotonic() - began)
            pool.shutdown(wait=True, cancel_futures=True)
    return interrupted


# --- the report -------------------------------------------------------------------------
