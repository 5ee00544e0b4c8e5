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
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

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
from hetsched.bench.status import BenchProgress
from hetsched.core.errors import InputError
from hetsched.core.interrupts import deferred_interrupts
from hetsched.core.outputs import check_output_folder, locked_folder, write_text, writing
from hetsched.core.settings import MAX_LOAD, MIN_LOAD, ReplaySettings
from hetsched.formulations.options import MAX_SEED

if TYPE_CHECKING:
    from hetsched.bench.references import Reference
    from hetsched.replaying import ReplayOutput

__all__ = ["BenchOutcome", "BenchSettings", "PolicyVariant", "RunSpec", "bench_settings",
           "default_workers", "load_label", "make_engine", "plan", "run_bench",
           "run_benches"]

log = logging.getLogger(__name__)


#: The settings recorded in ``bench.json`` (the bench's own, then those of its replay
#: settings); a rerun into the same folder must match them.
SETTING_FIELDS = ("trace", "trace_format", "cluster", "limit_jobs", "time_limit_s",
                  "deterministic", "throughput", "backend", "interval_s", "deadline_fraction",
                  "restart_penalty_s", "on_bad_row", "reference_gpu", "gpu_aliases",
                  "unknown_gpus", "gpu_sharing", "colocation_factor", "start_latency_s",
                  "prices", "spread_speed", "tenants", "pairs", "jct_window", "elastic")
#: The replay settings a bench runs with; each run sets its own ``seed`` and ``load``.
REPLAY_FIELDS = frozenset(f.name for f in fields(ReplaySettings)) - {"seed", "load"}
#: Settings added after benches were first recorded, and their value in a bench.json
#: written before (so that such a bench resumes).
SETTING_DEFAULTS: dict[str, Any] = {
    name: getattr(ReplaySettings(), name) for name in ("reference_gpu", "gpu_aliases",
                                                       "unknown_gpus", "gpu_sharing",
                                                       "colocation_factor",
                                                       "start_latency_s", "prices",
                                                       "spread_speed", "jct_window",
                                                       "elastic")}
SETTING_DEFAULTS.update(tenants=None, pairs=None)
#: A policy label: what results.csv's ``policy`` column and the run folders carry.
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def load_label(load: float) -> str:
    """How a load is written in results.csv and run folder names: ``0.5``, ``1``, ``2``."""
    return f"{load:g}"


# --- settings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyVariant:
    """A registered policy with settings of its own (constructor arguments such as
    ``partitions`` or ``round_s``), under a label of its own: results.csv's ``policy``
    column and the run folders carry the label, ``summary.json`` the policy's name and
    its ``policy_params``. A sweep spec's policy tables make them."""

    label: str
    policy: str
    params: tuple[tuple[str, Any], ...]

    def __post_init__(self) -> None:
        if not LABEL.fullmatch(self.label):
            raise InputError("bad policy label", path="label", value=self.label,
                             expected="1-64 letters, digits, '.', '_', '+' or '-', starting "
                             "with a letter or digit (it names run folders)")


@dataclass(frozen=True)
class BenchSettings:
    """What to run: one trace on one cluster, every policy x seed x load.

    ``seeds`` seed the trace reader (drawn job types, synthetic deadlines) and the
    policies; ``loads`` multiply the arrival rate (2 halves the inter-arrival times);
    ``replay`` are the settings every run shares (:class:`ReplaySettings`, the replay
    command's defaults: a solver limit per decision in deterministic work units, so every
    run repeats exactly), each run with its own seed and load (:meth:`run_settings`).
    :func:`bench_settings` makes one from flat values.
    """

    trace: Path
    trace_format: str
    cluster: str
    policies: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    loads: tuple[float, ...] = (1.0,)
    workers: int = field(default_factory=default_workers)
    throughput: Path | None = None
    replay: ReplaySettings = field(default_factory=ReplaySettings)
    #: add the LP bound on the average JCT to every row (hetsched.bench.lp_bounds)
    lp_bound: bool = True
    #: the policies of ``policies`` that are labels of a policy with settings
    variants: tuple[PolicyVariant, ...] = ()
    #: the tenants' weights and quotas (docs/fairness.md), kept around every policy
    tenants: Path | None = None
    #: co-location pairs measured on their own (hetsched.speeds.pairs)
    pairs: Path | None = None
    #: figures of other works to show beside the bench's (hetsched.bench.references)
    references: tuple[Reference, ...] = ()

    def __post_init__(self) -> None:
        if not self.policies:
            raise InputError("no policies", path="policies", value="",
                             expected="at least one policy name")
        labels = [variant.label for variant in self.variants]
        stray = [label for label in labels if label not in self.policies]
        if stray or len(set(labels)) < len(labels):
            raise InputError("policy labels must be listed once each in policies",
                             path="policies", value=stray or labels,
                             expected="every label in policies, none twice")
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
        if not self.trace.is_file():
            raise InputError("no such trace file", file=str(self.trace), path="trace")
        for name, path in (("throughput_path", self.throughput), ("tenants", self.tenants),
                           ("pairs", self.pairs)):
            if path is not None and not path.is_file():
                raise InputError(f"no such {name.split('_')[0]} file", file=str(path),
                                 path=name)

    def identity(self) -> dict[str, Any]:
        """The settings that shape every run's result (``bench.json``): the fields of
        :data:`SETTING_FIELDS`, and each labelled policy's name and settings."""
        identity = {name: getattr(self.replay if name in REPLAY_FIELDS else self, name)
                    for name in SETTING_FIELDS}
        identity["gpu_aliases"] = dict(self.replay.gpu_aliases)
        window = self.replay.jct_window
        identity["jct_window"] = None if window is None else list(window)
        identity["trace"] = str(self.trace.resolve())
        for name in ("throughput", "tenants", "pairs"):
            path = getattr(self, name)
            identity[name] = None if path is None else str(path.resolve())
        if self.variants:
            identity["policy_params"] = {v.label: {"policy": v.policy, **dict(v.params)}
                                         for v in self.variants}
        return identity

    def policy_of(self, label: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
        """The registered policy and its settings behind a label of ``policies``."""
        for variant in self.variants:
            if variant.label == label:
                return variant.policy, variant.params
        return label, ()

    def run_settings(self, seed: int, load: float) -> ReplaySettings:
        """The settings of the run with ``seed`` at ``load``."""
        return self.replay.replace(seed=seed, load=load)


def bench_settings(**values: Any) -> BenchSettings:
    """:class:`BenchSettings` from flat values: those named like a field of
    :class:`ReplaySettings` (``limit_jobs``, ``time_limit_s``, ...) make its replay
    settings (those of ``replay``, if given, changed), the others are the bench's own."""
    flat = {name: value for name, value in values.items() if name in REPLAY_FIELDS}
    own = {name: value for name, value in values.items() if name not in REPLAY_FIELDS}
    replay = own.pop("replay", None) or ReplaySettings()
    return BenchSettings(**own, replay=replay.replace(**flat) if flat else replay)


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
        recorded_params = before.get("policy_params") or {}
        changed += [f"policy_params.{label}" for label, params in
                    identity.get("policy_params", {}).items()
                    if label in recorded_params and recorded_params[label] != params]
        if changed:
            name = changed[0]
            now, then = _setting(identity, name), _setting(before, name)
            raise InputError("the output folder holds a bench with other settings",
                             file=str(recorded), path=name, value=now,
                             expected=f"{then!r} as before (rerunning resumes a "
                             "bench), or another --out")
    from hetsched.formulations.versions import solver_versions

    if before_params := _recorded_params(recorded):  # labels of earlier runs stay recorded
        identity["policy_params"] = {**before_params, **identity.get("policy_params", {})}
    write_text(recorded, json.dumps({**identity, "solver_versions": solver_versions()},
                                    indent=1) + "\n", "out", "bench.json")


def _setting(identity: Mapping[str, Any], name: str) -> Any:
    """A setting of ``bench.json`` by name (``policy_params.LABEL``: a label's settings)."""
    if name.startswith("policy_params."):
        return (identity.get("policy_params") or {}).get(name.split(".", 1)[1])
    return identity.get(name)


def _recorded_params(recorded: Path) -> dict[str, Any]:
    """The labelled policies recorded in ``bench.json`` (none if absent or unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        before = json.loads(recorded.read_text(encoding="utf-8"))
        found = before.get("policy_params") if isinstance(before, dict) else None
        return dict(found) if isinstance(found, dict) else {}
    return {}


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
        _check_folder(settings, out)
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

    def record(self, cell: Cell, output: ReplayOutput, seconds: float) -> None:
        """Write a finished run's folder and append its row (a Ctrl-C or SIGTERM neither
        tears nor drops them); an interrupted run is not recorded."""
        if output.interrupted:
            self.progress.line(f"{self.prefix}{cell.name}: interrupted, not recorded")
            return
        from hetsched.simulate.record import write_folder

        row = result_row(cell.label, cell.seed, load_label(cell.load), output.summary)
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

    def finished(self, cell: Cell, output: ReplayOutput, seconds: float) -> None:
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
