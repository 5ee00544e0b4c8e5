"""The benchmark harness: every policy x seed x load of one trace, side by side.

Each combination is one replay (:func:`solver.replay.run_replay`), run in worker
processes. The bench writes into its output folder:

* ``results.csv``: one row per finished run (policy, seed, load, every key of the
  replay's ``summary.json``, the lower bounds of :mod:`solver.bounds` and the ratios to
  them), appended and flushed as each run finishes, so an interrupted bench keeps its
  finished rows and a rerun skips them;
* ``runs/<policy>-s<seed>-l<load>/``: each run's ``summary.json``, ``jobs.csv``,
  ``decisions.csv`` and ``timing.json`` (wall clock; its figures are in results.csv too);
* ``bench.json``: the settings that shape the results (a rerun with other settings into
  the same folder is refused);
* ``report.md`` and the plots (PNG): see docs/bench.md.
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from solver.bench_results import KEY_COLUMNS, append_result, read_results, resume_rows
from solver.errors import InputError
from solver.interrupts import deferred_interrupts
from solver.outputs import check_output_folder, locked_folder, write_text, writing
from solver.replay import MAX_LOAD, MAX_SEED, MIN_LOAD, check_seed

log = logging.getLogger(__name__)

#: Policies that solve an exact model at each decision; every other policy (and so its
#: ``-agnostic`` variant) is a heuristic, the reference of the "vs best heuristic" ratio.
EXACT_MODELS = frozenset({"deadline", "allox", "topology"})
__all__ = ["KEY_COLUMNS", "append_result", "read_results"]  # their home: solver.bench_results

#: The settings recorded in ``bench.json``; a rerun into the same folder must match them.
SETTING_FIELDS = ("trace", "trace_format", "cluster", "limit_jobs", "time_limit_s",
                  "deterministic", "throughput", "backend", "interval_s", "deadline_fraction",
                  "restart_penalty_s", "on_bad_row")


def is_heuristic(policy: str) -> bool:
    """True unless ``policy`` (or the model it is the ``-agnostic`` variant of) is one of
    :data:`EXACT_MODELS`."""
    return policy.removesuffix("-agnostic") not in EXACT_MODELS


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
    from solver.replay import rolling_policy

    names = _split(text, "--policies")
    unknown: list[str] = []
    expected = ""
    for name in names:
        try:
            rolling_policy(name, time_limit_s=1.0)
        except InputError as exc:
            unknown.append(name)
            expected = exc.expected or ""
    if unknown:
        raise InputError("unknown policies", path="--policies", value=",".join(unknown),
                         expected=expected or "known policy names")
    return tuple(names)


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0,1,2`` -> ``(0, 1, 2)``; integers >= 0, duplicates dropped."""
    seeds = []
    for item in _split(text, "--seeds"):
        if not (item.isascii() and item.isdigit()):  # ("²".isdigit() is True)
            raise InputError("bad seed", path="--seeds", value=item,
                             expected=f"integers from 0 to {MAX_SEED:,}, e.g. 0,1,2")
        seeds.append(check_seed(int(item), "--seeds"))
    return tuple(dict.fromkeys(seeds))


def parse_loads(text: str) -> tuple[float, ...]:
    """``0.5,1,2`` -> ``(0.5, 1.0, 2.0)``: arrival-rate multipliers, finite and > 0;
    loads written alike (:func:`load_label`) are one."""
    loads: dict[str, float] = {}
    for item in _split(text, "--load"):
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not (MIN_LOAD <= value <= MAX_LOAD):  # (NaN too)
            raise InputError("bad load", path="--load", value=item,
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
    other fields are :func:`solver.replay.run_replay`'s.
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

    def __post_init__(self) -> None:
        if not self.policies:
            raise InputError("no policies", path="--policies", value="",
                             expected="at least one policy name")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int)
                                 or not 0 <= s <= MAX_SEED for s in self.seeds):
            raise InputError("bad seeds", path="--seeds", value=self.seeds,
                             expected=f"one or more integers from 0 to {MAX_SEED:,}")
        if not self.loads or any(isinstance(v, bool) or not isinstance(v, int | float)
                                 or not MIN_LOAD <= v <= MAX_LOAD for v in self.loads):
            raise InputError("bad load", path="--load", value=self.loads,
                             expected=f"one or more numbers from {MIN_LOAD:g} to "
                             f"{MAX_LOAD:g}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or \
                self.workers < 1:
            raise InputError("bad worker count", path="--workers", value=self.workers,
                             expected="an integer >= 1")
        if not (math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            raise InputError("bad time limit", path="--time-limit", value=self.time_limit_s,
                             expected="seconds > 0")
        from solver.simulate import check_interval, check_restart_penalty

        check_interval(self.interval_s)
        check_restart_penalty(self.restart_penalty_s)
        if not self.trace.is_file():
            raise InputError("no such trace file", file=str(self.trace), path="--trace")
        if self.throughput is not None and not self.throughput.is_file():
            raise InputError("no such throughput file", file=str(self.throughput),
                             path="--throughput")

    def identity(self) -> dict[str, Any]:
        """The settings that shape every run's result (``bench.json``)."""
        values = asdict(self)
        identity = {name: values[name] for name in SETTING_FIELDS}
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
        """``<policy>-s<seed>-l<load>``: the run's folder under ``runs/``."""
        return f"{self.policy}-s{self.seed}-l{load_label(self.load)}"

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
    from solver.replay import run_replay

    settings, spec = task.settings, task.spec
    return run_replay(
        settings.trace, settings.trace_format, settings.cluster, spec.policy, out=task.out,
        throughput_path=settings.throughput, backend=settings.backend,
        interval_s=settings.interval_s, time_limit_s=settings.time_limit_s, seed=spec.seed,
        limit_jobs=settings.limit_jobs, on_bad_row=settings.on_bad_row,
        deadline_fraction=settings.deadline_fraction,
        restart_penalty_s=settings.restart_penalty_s, show_progress=False, load=spec.load,
        deterministic=settings.deterministic)


# --- results.csv ------------------------------------------------------------------------


def _cell(value: object) -> str:
    """A value for results.csv: floats repr-exact, NaN/None empty, lists/dicts as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True)
    return str(value)


def result_row(spec: RunSpec, summary: dict[str, object]) -> dict[str, str]:
    """The results.csv row of a finished run: its key, the summary, ratios to the bounds."""
    row: dict[str, object] = {"policy": spec.policy, "seed": spec.seed,
                              "load": load_label(spec.load)}
    row.update({k: v for k, v in summary.items() if k not in row})
    for metric in ("avg_jct_s", "makespan_s"):
        value, bound = summary.get(metric), summary.get(f"bound_{metric}")
        ratio = math.nan
        if isinstance(value, int | float) and isinstance(bound, int | float) and bound > 0:
            ratio = value / bound
        row[f"{metric.removesuffix('_s')}_over_bound"] = ratio
    return {key: _cell(value) for key, value in row.items()}


# --- progress ---------------------------------------------------------------------------


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

    def finished(self, spec: RunSpec, row: dict[str, str], seconds: float) -> None:
        """Report a finished run: jobs, average JCT against its bound, deadlines, time."""
        self.done += 1
        ratio = _float(row.get("avg_jct_over_bound"))
        deadlines = _int(row.get("deadline_jobs"))
        text = (f"[{self.done}/{self.total}] {spec.name}: {row.get('completed')}/"
                f"{row.get('jobs')} jobs, avg JCT {_duration(_float(row.get('avg_jct_s')))}"
                + (f" ({ratio:.2f}x bound)" if math.isfinite(ratio) else "")
                + (f", deadlines met {row.get('deadline_met')}/{deadlines}" if deadlines else "")
                + f", fallbacks {row.get('fallbacks')}, {seconds:.1f} s")
        self.line(text)

    def failed(self, spec: RunSpec, error: BaseException) -> None:
        """Report a run that raised."""
        self.done += 1
        self.line(f"[{self.done}/{self.total}] {spec.name}: FAILED: "
                  f"{type(error).__name__}: {error}")

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


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 36_000:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 600:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds:,.1f} s"


def _float(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def _int(text: str | None) -> int:
    value = _float(text)
    return int(value) if math.isfinite(value) else 0


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
                             path="--out", expected="a JSON object (or a fresh --out)")
        changed = [name for name in SETTING_FIELDS if before.get(name) != identity[name]]
        if changed:
            name = changed[0]
            raise InputError("the output folder holds a bench with other settings",
                             file=str(recorded), path=name, value=identity[name],
                             expected=f"{before.get(name)!r} as before (rerunning resumes a "
                             "bench), or another --out")
    from formulations.versions import solver_versions

    write_text(recorded, json.dumps({**identity, "solver_versions": solver_versions()},
                                    indent=1) + "\n", "--out", "bench.json")


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
    (:func:`solver.bench_results.resume_rows`).
    """
    check_output_folder(out)
    with writing(out, "--out", "the output folder"):
        out.mkdir(parents=True, exist_ok=True)
    with locked_folder(out):
        return _run_locked(settings, out, stream, report)


def _run_locked(settings: BenchSettings, out: Path, stream: TextIO | None,
                report: bool) -> BenchOutcome:
    _check_folder(settings, out)
    results = out / "results.csv"
    warnings: list[str] = []
    done = {tuple(r[k] for k in KEY_COLUMNS) for r in resume_rows(results, warnings.append)}
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

    def record(spec: RunSpec, summary: dict[str, object], seconds: float) -> None:
        nonlocal ran, interrupted
        if summary.get("interrupted"):
            interrupted = True
            progress.line(f"{spec.name}: interrupted, not recorded")
            return
        row = result_row(spec, summary)
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
        context.set_forkserver_preload(["solver.bench", "solver.replay", "solver.simulate",
                                        "solver.traces", "solver.bounds", "solver.workers"])
    started: dict[Future[dict[str, object]], tuple[_Task, float]] = {}
    queue = list(tasks)
    interrupted = False
    from solver.workers import guard_worker

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


@dataclass(frozen=True)
class _Column:
    title: str
    value: Callable[[dict[str, str]], float]
    best: str  # "min" or "max"
    kind: str  # "time", "ratio", "fraction", "count", "seconds"


def _deadline_ratio(row: dict[str, str]) -> float:
    jobs = _float(row.get("deadline_jobs"))
    return _float(row.get("deadline_met")) / jobs if jobs > 0 else math.nan


COLUMNS = (
    _Column("avg JCT", lambda r: _float(r.get("avg_jct_s")), "min", "time"),
    _Column("p95 JCT", lambda r: _float(r.get("p95_jct_s")), "min", "time"),
    _Column("deadlines met", _deadline_ratio, "max", "fraction"),
    _Column("utilisation", lambda r: _float(r.get("utilization")), "max", "fraction"),
    _Column("decision p95 (s)", lambda r: _float(r.get("decision_time_p95_s")), "min",
            "seconds"),
    _Column("fallbacks", lambda r: _float(r.get("fallbacks")), "min", "count"),
    _Column("wall time (s)", lambda r: _float(r.get("wall_time_s")), "min", "seconds"),
    _Column("avg JCT / bound", lambda r: _float(r.get("avg_jct_over_bound")), "min", "ratio"),
    _Column("makespan / bound", lambda r: _float(r.get("makespan_over_bound")), "min",
            "ratio"),
)


def _number(value: float, kind: str, unit: float = 1.0) -> str:
    """A figure for the report: 3-4 significant digits, percentages for fractions."""
    if not math.isfinite(value):
        return "-"
    if kind == "fraction":
        return f"{100 * value:.1f}%"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "count":
        return f"{value:,.1f}" if value != round(value) else f"{value:,.0f}"
    value /= unit
    if kind == "seconds" and 0 < abs(value) < 0.01:
        return f"{value:.2g}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _time_unit(values: Iterable[float]) -> tuple[str, float]:
    finite = [v for v in values if math.isfinite(v)]
    largest = max(finite, default=0.0)
    if largest >= 36_000:
        return "h", 3600.0
    if largest >= 600:
        return "min", 60.0
    return "s", 1.0


def _stats(values: Sequence[float]) -> tuple[float, float, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    return float(np.mean(finite)), min(finite), max(finite)


def _by_load(rows: Sequence[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    groups: dict[str, list[dict[str, str]]] = {}
    for row in sorted(rows, key=lambda r: _float(r.get("load"))):
        groups.setdefault(row.get("load", ""), []).append(row)
    return groups


def _policies(rows: Sequence[dict[str, str]]) -> list[str]:
    return list(dict.fromkeys(row.get("policy", "") for row in rows))


def load_table(rows: Sequence[dict[str, str]]) -> list[str]:
    """The markdown table of one load: a row per policy, each column's mean over seeds
    (and min-max with several seeds), the best mean in bold, the ratio of each policy's
    mean average JCT to the best heuristic's."""
    policies = _policies(rows)
    per_policy = {p: [r for r in rows if r.get("policy") == p] for p in policies}
    seeds = max(len(v) for v in per_policy.values())
    stats = {(p, c.title): _stats([c.value(r) for r in per_policy[p]])
             for p in policies for c in COLUMNS}
    units = {c.title: _time_unit(stats[(p, c.title)][2] for p in policies)
             for c in COLUMNS if c.kind == "time"}
    heuristic = [stats[(p, "avg JCT")][0] for p in policies if is_heuristic(p)]
    heuristic = [v for v in heuristic if math.isfinite(v)]
    best_heuristic = min(heuristic) if heuristic else math.nan
    titles = []
    for column in COLUMNS:
        suffix = f" ({units[column.title][0]})" if column.title in units else ""
        titles.append(column.title + suffix)
        if column.title == "avg JCT":
            titles.append("vs best heuristic")
    lines = ["| policy | " + " | ".join(titles) + " |",
             "|---|" + "---:|" * len(titles)]
    best = {}
    for column in COLUMNS:
        means = [stats[(p, column.title)][0] for p in policies]
        finite = [m for m in means if math.isfinite(m)]
        best[column.title] = (min(finite) if column.best == "min" else max(finite)) \
            if finite else math.nan
    for policy in policies:
        cells = []
        for column in COLUMNS:
            mean, low, high = stats[(policy, column.title)]
            scale = units.get(column.title, ("", 1.0))[1]
            text = _number(mean, column.kind, scale)
            target = best[column.title]
            if math.isfinite(mean) and abs(mean - target) <= 1e-9 * max(1.0, abs(target)):
                text = f"**{text}**"
            if seeds > 1 and math.isfinite(mean) and high > low:
                text += (f" ({_number(low, column.kind, scale)}-"
                         f"{_number(high, column.kind, scale)})")
            cells.append(text)
            if column.title == "avg JCT":
                cells.append(f"{mean / best_heuristic:.2f}x"
                             if math.isfinite(mean) and math.isfinite(best_heuristic) else "-")
        name = policy if is_heuristic(policy) else f"{policy} (exact model)"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_report(out: Path) -> Path:
    """Write ``report.md`` and the plots from ``out/results.csv`` and ``out/runs/``;
    returns the report's path. They are drawn into a temporary folder in ``out`` and moved
    into place when all are done, the report last: a failure (a full disk: one clear
    error) or an interrupt leaves the previous report and plots."""
    rows = read_results(out / "results.csv")
    if not rows:
        raise InputError("no results to report", file=str(out / "results.csv"),
                         expected="a results.csv with at least one row")
    with writing(out, "--out", "the report"):
        staging = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
        try:
            _write_report(out, staging, rows)
            for name in sorted(os.listdir(staging), key=lambda n: n == "report.md"):
                os.replace(staging / name, out / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out / "report.md"


def _write_report(out: Path, staging: Path, rows: list[dict[str, str]]) -> None:
    first = rows[0]
    seeds = sorted({r.get("seed", "") for r in rows}, key=_float)
    groups = _by_load(rows)
    policies = _policies(rows)
    heuristics = [p for p in policies if is_heuristic(p)]
    lines = [
        f"# Benchmark: {Path(first.get('trace', '?')).name} ({first.get('format', '?')}) on "
        f"{first.get('cluster', '?')} ({first.get('gpus', '?')} GPUs)",
        "",
        f"- {first.get('jobs', '?')} jobs per run; throughput (truth): "
        f"{first.get('throughput', '?')}; policies see the fitted view.",
        f"- Seeds {', '.join(seeds)}; loads {', '.join(groups)} (arrival rate multiplied "
        "by the load).",
        "- Each cell: the mean over seeds" + (", then min-max over seeds" if len(seeds) > 1
                                               else "") + ". Best mean in **bold**.",
        "- *vs best heuristic*: average JCT over the lowest average JCT of the heuristics ("
        + (", ".join(heuristics) if heuristics else "none in this bench") + "); exact "
        "models: " + ", ".join(sorted(EXACT_MODELS)) + " and their -agnostic variants.",
        "- *deadlines met*: share of the jobs with a deadline that finished by it "
        "('-' when no job has one: give --deadline-fraction).",
        "- */ bound*: the policy's average JCT (makespan) over the lower bound of "
        "docs/bench.md; 1.00x would be optimal, no policy can go below.",
    ]
    figures = _plots(out, groups, staging)
    for label, group in groups.items():
        lines += ["", f"## Load {label}", ""]
        lines += load_table(group)
        bound_jct = _stats([_float(r.get("bound_avg_jct_s")) for r in group])[0]
        bound_makespan = _stats([_float(r.get("bound_makespan_s")) for r in group])[0]
        parts = [_float(r.get(f"bound_makespan_{name}_s")) for r in group[:1]
                 for name in ("longest_job", "capacity", "tail_capacity")]
        lines += ["", f"Lower bounds (mean over seeds): average JCT >= "
                  f"{_duration(bound_jct)}, makespan >= {_duration(bound_makespan)} "
                  f"(longest job {_duration(parts[0])}, capacity {_duration(parts[1])}, "
                  f"capacity after an arrival {_duration(parts[2])})."]
        offered = _stats([_float(r.get("offered_load")) for r in group])[0]
        if math.isfinite(offered):
            lines.append(f"Offered load {offered:.2f}: the least GPU time the jobs need over "
                         "the GPU time of the cluster while they arrive (above 1, queues "
                         "grow whatever the policy does).")
        incomplete = [f"{r.get('policy')}-s{r.get('seed')}" for r in group
                      if r.get("completed") != r.get("jobs")]
        if incomplete:
            lines.append(f"Not every job finished in: {', '.join(incomplete)}.")
        lines += ["", *(f"![{name}]({name})" for name in figures.get(label, []))]
    lines += ["", *(f"![{name}]({name})" for name in figures.get("", []))]
    lines += ["", f"Raw figures: results.csv ({len(rows)} runs); each run's outputs: "
              "runs/<policy>-s<seed>-l<load>/."]
    (staging / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- plots ------------------------------------------------------------------------------


def _read_csv_columns(path: Path, columns: Sequence[str]) -> dict[str, list[float]] | None:
    """Numeric columns of a CSV file (None if the file or a column is missing)."""
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not set(columns) <= set(reader.fieldnames):
            return None
        values: dict[str, list[float]] = {c: [] for c in columns}
        for row in reader:
            for column in columns:
                values[column].append(_float(row.get(column)))
    return values


def decision_times(run: Path) -> list[float]:
    """The policy's wall-clock time at each decision point of one run (s): the
    ``decision_time_s`` list of its ``timing.json`` (or, for runs written before it
    existed, the ``decision_time_s`` column of decisions.csv); empty if neither is there."""
    timing = run / "timing.json"
    if timing.is_file():
        try:
            values = json.loads(timing.read_text(encoding="utf-8")).get("decision_time_s")
        except (ValueError, AttributeError):
            values = None
        if isinstance(values, list):
            return [float(v) if isinstance(v, int | float) else math.nan for v in values]
    columns = _read_csv_columns(run / "decisions.csv", ("decision_time_s",))
    return columns["decision_time_s"] if columns else []


def busy_gpus_over_time(run: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """``(times, busy GPUs)`` of one run, a step function (each value holds from its time
    on), times in s from the first arrival.

    With a ``busy_gpus`` column in decisions.csv it is exact: between two decision points
    only completions change the busy count, and jobs.csv says when each job finished and
    on how many GPUs; at a decision point the logged count (after the decision) holds.
    Without it, each job of jobs.csv holds its GPU count from its first start to its
    finish (a preempted job's waits count as busy: an upper estimate).
    """
    jobs = _read_csv_columns(run / "jobs.csv", ("start", "finish", "num_gpus"))
    if jobs is None:
        return None
    decisions = _read_csv_columns(run / "decisions.csv", ("time", "busy_gpus"))
    if decisions is not None and decisions["time"]:
        freed: dict[float, float] = {}
        for finish, gpus in zip(jobs["finish"], jobs["num_gpus"], strict=True):
            if math.isfinite(finish):
                freed[finish] = freed.get(finish, 0.0) + gpus
        logged = dict(zip(decisions["time"], decisions["busy_gpus"], strict=True))
        busy = 0.0
        times, values = [], []
        for moment in sorted({*freed, *logged}):
            # The simulator completes jobs first, then decides at the same time.
            busy = logged.get(moment, busy - freed.get(moment, 0.0))
            times.append(moment)
            values.append(max(busy, 0.0))
        return np.array(times), np.array(values)
    changes: dict[float, float] = {}
    for start, finish, gpus in zip(jobs["start"], jobs["finish"], jobs["num_gpus"],
                                   strict=True):
        if math.isfinite(start) and math.isfinite(finish):
            changes[start] = changes.get(start, 0.0) + gpus
            changes[finish] = changes.get(finish, 0.0) - gpus
    if not changes:
        return None
    ordered = np.array(sorted(changes))
    return ordered, np.cumsum([changes[t] for t in ordered])


def _plots(out: Path, groups: dict[str, list[dict[str, str]]],
           target: Path) -> dict[str, list[str]]:
    """Draw the plots of the runs in ``out`` into ``target``; returns the file names by
    load label ("" for all-load figures)."""
    from matplotlib.figure import Figure

    figures: dict[str, list[str]] = {}
    runs = out / "runs"

    def run_dir(row: dict[str, str]) -> Path:
        return runs / f"{row.get('policy')}-s{row.get('seed')}-l{row.get('load')}"

    def save(figure: Figure, name: str, label: str) -> None:
        figure.tight_layout()
        figure.savefig(target / name, dpi=110)
        figures.setdefault(label, []).append(name)

    for label, group in groups.items():
        policies = _policies(group)
        # JCT CDF, seeds pooled.
        figure = Figure(figsize=(7, 4.5))
        ax = figure.add_subplot()
        for policy in policies:
            jct: list[float] = []
            for row in group:
                if row.get("policy") == policy:
                    jobs = _read_csv_columns(run_dir(row) / "jobs.csv", ("jct",))
                    jct += [v for v in (jobs or {"jct": []})["jct"] if math.isfinite(v)]
            if jct:
                ordered = np.sort(np.array(jct)) / 3600
                ax.step(ordered, np.arange(1, len(ordered) + 1) / len(ordered), where="post",
                        label=policy)
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h, log scale)")
        ax.set_ylabel("fraction of jobs")
        ax.set_title(f"JCT CDF, load {label} (seeds pooled)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(figure, f"jct_cdf_l{label}.png", label)
        # Utilisation over time, first seed of each policy.
        figure = Figure(figsize=(8, 4.5))
        ax = figure.add_subplot()
        for policy in policies:
            row = min((r for r in group if r.get("policy") == policy),
                      key=lambda r: _float(r.get("seed")))
            series = busy_gpus_over_time(run_dir(row))
            gpus = _float(row.get("gpus"))
            if series is None or not gpus > 0:
                continue
            times, busy = series  # s from the first arrival (traces start at 0 s)
            ax.step(times / 3600, busy / gpus, where="post", label=policy, linewidth=0.9)
        ax.set_xlabel("time since the first arrival (h)")
        ax.set_ylabel("busy GPUs / all GPUs")
        ax.set_ylim(0, 1.05)
        ax.set_title(f"Utilisation over time, load {label} (seed "
                     f"{min((r.get('seed', '') for r in group), key=_float)})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(figure, f"utilization_l{label}.png", label)
    # Deadline-met ratio, every load.
    figure = Figure(figsize=(8, 4.5))
    ax = figure.add_subplot()
    all_policies = _policies([r for g in groups.values() for r in g])
    width = 0.8 / max(1, len(groups))
    any_deadline = False
    for index, (label, group) in enumerate(groups.items()):
        means, lows, highs = [], [], []
        for policy in all_policies:
            mean, low, high = _stats([_deadline_ratio(r) for r in group
                                      if r.get("policy") == policy])
            any_deadline = any_deadline or math.isfinite(mean)
            means.append(mean if math.isfinite(mean) else 0.0)
            lows.append(mean - low if math.isfinite(mean) else 0.0)
            highs.append(high - mean if math.isfinite(mean) else 0.0)
        positions = np.arange(len(all_policies)) + (index - (len(groups) - 1) / 2) * width
        ax.bar(positions, means, width, yerr=[lows, highs], capsize=3, label=f"load {label}")
    ax.set_xticks(np.arange(len(all_policies)), all_policies, rotation=30, ha="right")
    ax.set_ylabel("deadlines met / jobs with a deadline")
    ax.set_ylim(0, 1.05)
    ax.set_title("Deadline-met ratio (mean over seeds, min-max bars)")
    if not any_deadline:
        ax.text(0.5, 0.5, "no job has a deadline (give --deadline-fraction)",
                transform=ax.transAxes, ha="center")
    ax.legend(fontsize=8)
    save(figure, "deadline_met.png", "")
    # Decision time distribution, a panel per load.
    figure = Figure(figsize=(4 + 3 * len(groups), 4.5))
    for index, (label, group) in enumerate(groups.items()):
        ax = figure.add_subplot(1, len(groups), index + 1)
        data, names = [], []
        for policy in _policies(group):
            spent: list[float] = []
            for row in group:
                if row.get("policy") == policy:
                    spent += [max(v, 1e-7) for v in decision_times(run_dir(row))
                              if math.isfinite(v)]
            if spent:
                data.append(spent)
                names.append(policy)
        if data:
            ax.boxplot(data, whis=(5, 95), showfliers=False)
            ax.set_xticks(np.arange(1, len(names) + 1), names, rotation=30, ha="right")
            ax.set_yscale("log")
        ax.set_ylabel("decision time (s, log scale)")
        ax.set_title(f"load {label}")
        ax.grid(alpha=0.3, axis="y")
    figure.suptitle("Decision time per decision point (box: quartiles, whiskers: p5-p95)")
    save(figure, "decision_times.png", "")
    return figures
