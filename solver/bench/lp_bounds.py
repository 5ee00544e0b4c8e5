"""The bench's LP lower bound on the average JCT: the time-indexed relaxation of
:mod:`hetsched.formulations.completion` (unit weights), computed once per job set and
kept in the bench folder (``lp_bounds.json``), added to every row of ``results.csv`` as
``bound_lp_avg_jct_s`` and ``avg_jct_over_lp_bound`` (docs/bench.md).

The job set of a (seed, load) cell is read as the replays read it
(:func:`hetsched.files.replay_inputs.trace_jobs`). Cells with the same jobs share one bound: the LP
ignores deadlines, so the seeds of a Gavel trace (which only draw deadlines) share one.
A cached bound is keyed by everything it depends on (the jobs, the cluster, the
throughput file's bytes, the LP's settings and :data:`VERSION`), so a changed input or
LP is computed again rather than reused. A bench of several workers solves the LPs in a
process of its own while the runs go on (:meth:`LpBounds.start`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol

from hetsched.bench.results import read_results, rewrite_results
from hetsched.core.errors import InputError
from hetsched.core.interrupts import deferred_interrupts
from hetsched.core.outputs import write_text
from hetsched.core.records import Cluster, Job
from hetsched.core.settings import ReplaySettings
from hetsched.core.throughput import ThroughputModel
from hetsched.formulations.completion import (
    CompletionBound,
    CompletionBoundSettings,
    completion_bound,
)
from hetsched.simulate.summary import cell_float, cell_text

log = logging.getLogger(__name__)

#: The cache file in the bench folder.
CACHE = "lp_bounds.json"
#: Bumped when the relaxation changes what it computes: older cached bounds are redone.
VERSION = 1
#: The columns added to results.csv.
COLUMNS = ("bound_lp_avg_jct_s", "bound_lp_status", "avg_jct_over_lp_bound")
#: The LP of the bench: unit weights (a bound on the average JCT), default discretisation.
SETTINGS = CompletionBoundSettings(weighted=False)


@dataclass(frozen=True)
class LpBoundFigures:
    """One job set's LP bound as cached: the bound on the average JCT (s), HiGHS's
    status, the isolated bound it improves on, and the LP's size and times."""

    avg_jct_s: float
    status: str
    isolated_avg_jct_s: float
    jobs: int
    intervals: int
    columns: int
    rows: int
    build_s: float
    lp_s: float


class TraceSource(Protocol):
    """What the replays of a bench read: the trace, its format, the cluster, the
    throughput file and the settings of the run of one seed and load
    (:class:`hetsched.bench.settings.BenchSettings` has them)."""

    @property
    def trace(self) -> Path: ...
    @property
    def trace_format(self) -> str: ...
    @property
    def cluster(self) -> str: ...
    @property
    def throughput(self) -> Path | None: ...
    def run_settings(self, seed: int, load: float) -> ReplaySettings: ...


def job_set_key(jobs: Sequence[Job], cluster: Cluster, throughput_bytes: bytes,
                settings: CompletionBoundSettings) -> str:
    """A digest of everything the LP bound of ``jobs`` depends on."""
    digest = hashlib.sha256()
    digest.update(f"v{VERSION} {sorted(asdict(settings).items())!r} {cluster!r}".encode())
    digest.update(hashlib.sha256(throughput_bytes).digest())
    for job in jobs:
        weight = job.weight if settings.weighted else 1.0
        digest.update(repr((job.id, job.arrival, job.job_type, job.work, job.gpu_counts,
                            job.allowed_gpu_types, job.allowed_nodes, weight)).encode())
    return digest.hexdigest()


class LpBounds:
    """The LP bounds of one bench folder's cells, computed when first needed and cached in
    ``out/lp_bounds.json``; ``note`` hears one line per bound computed."""

    def __init__(self, out: Path, source: TraceSource,
                 note: Callable[[str], None] | None = None,
                 settings: CompletionBoundSettings = SETTINGS) -> None:
        self.path = out / CACHE
        self.source = source
        self.note = note or log.info
        self.settings = settings
        self._cache = self._read()
        self._keys: dict[tuple[int, float], str] = {}
        self._failed: set[tuple[int, float]] = set()
        self._failed_keys: set[str] = set()
        #: job sets read by :meth:`figures` without computing, for :meth:`start`
        self._job_sets: dict[str, tuple[tuple[Job, ...], Cluster, ThroughputModel]] = {}
        #: the job sets being solved in the bounds' process, their cells, and the process
        self._pending: dict[str, tuple[int, float]] = {}
        self._process: multiprocessing.process.BaseProcess | None = None
        self._results: Connection | None = None

    def _read(self) -> dict[str, dict[str, object]]:
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except ValueError:
            log.warning("%s: unreadable, the LP bounds are computed again", self.path)
            return {}
        bounds = data.get("bounds") if isinstance(data, dict) else None
        return dict(bounds) if isinstance(bounds, dict) else {}

    def prepare(self, cells: Iterable[tuple[int, float]]) -> None:
        """Compute the bounds of ``cells`` (seed, load) not cached yet."""
        for seed, load in dict.fromkeys(cells):
            self.figures(seed, load)

    def start(self, cells: Iterable[tuple[int, float]], *, beside: bool) -> None:
        """The bounds of ``cells`` (seed, load) not cached yet: computed now, in this
        process (``beside`` false: a bench of one worker), or in a process of their own
        while the runs go on (the job sets are read here; the LPs are solved there, one
        after the other). Rows get a bound when it is known (:meth:`known_columns`), the
        others at the end (:meth:`finish`); :meth:`close` stops the process (an
        interrupted bench does not wait for it: a rerun adds the bounds to the rows that
        lack them)."""
        if not beside:
            self.prepare(cells)
            return
        tasks = []
        for seed, load in dict.fromkeys(cells):
            if self.figures(seed, load, compute=False) is not None:
                continue  # cached
            key = self._keys.get((seed, load))
            if key is None or key in self._pending or key in self._failed_keys:
                continue  # failed (noted), or already on its way
            self._pending[key] = (seed, load)
            tasks.append((key, *self._job_sets.pop(key)))
        if tasks:
            context = multiprocessing.get_context("spawn")
            self._results, sender = context.Pipe(duplex=False)
            self._process = context.Process(
                target=_solve_all, args=(os.getpid(), sender, tasks, self.settings),
                name="lp-bounds", daemon=True)
            self._process.start()
            sender.close()  # the process's end: when it ends, reading ends too

    def _collect(self, wait: bool) -> None:
        """Store the bounds the process has finished (all of them: ``wait``); if it ended
        without them (killed, out of memory), the rest are failed."""
        while self._pending and self._results is not None and (
                wait or self._results.poll()):
            try:
                key, bound, error = self._results.recv()
            except EOFError:
                code = None if self._process is None else self._process.exitcode
                for key, (seed, load) in self._pending.items():
                    self._failed_keys.add(key)
                    self.note(f"LP bound of seed {seed}, load {load:g} not computed: the "
                              f"bounds' process ended (exit code {code})")
                self._pending.clear()
                return
            seed, load = self._pending.pop(key)
            if bound is None:
                self._failed_keys.add(key)
                self.note(f"LP bound of seed {seed}, load {load:g} not computed: {error}")
            else:
                self._store(key, bound, seed, load)

    def finish(self, results: Path) -> list[dict[str, str]]:
        """Wait for :meth:`start`'s bounds, then fill the LP columns of the rows of
        ``results`` that lack them (written before their bound was known, or by an earlier
        bench): the rows filled."""
        self._collect(wait=True)
        self.close()
        rows = read_results(results)
        lacking = [row for row in rows if not row.get("bound_lp_avg_jct_s")]
        self.add_to_rows(results, rows, lacking)
        return [row for row in lacking if row["bound_lp_avg_jct_s"]]

    def close(self) -> None:
        """Stop the bounds' process, whatever it is doing (idempotent)."""
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._process = None
        if self._results is not None:
            self._results.close()
            self._results = None

    def known_columns(self, seed: int, load: float, row: Mapping[str, str]) -> dict[str, str]:
        """The LP columns of a row if the cell's bound is known now (empty cells if not
        yet, or if it failed); never computes it."""
        self._collect(wait=False)
        key = self._keys.get((seed, load))
        if key is None or key not in self._cache:
            return dict.fromkeys(COLUMNS, "")
        return self.columns(seed, load, row)

    def figures(self, seed: int, load: float, *, compute: bool = True
                ) -> LpBoundFigures | None:
        """The cell's bound (computed, unless not ``compute``, and cached if new); ``None``
        if it failed (told to ``note`` once; the bench goes on without it) or is not
        computed."""
        if (seed, load) in self._failed or self._keys.get((seed, load)) in self._failed_keys:
            return None
        try:
            key = self._keys.get((seed, load))
            found = self._cache.get(key) if key is not None else None
            if found is None:
                key, jobs, cluster, truth = self._job_set(seed, load)
                if any(job.gpu_share is not None for job in jobs):
                    raise ValueError("the LP counts whole GPUs; jobs asking for a share of "
                                     "a GPU would make it no bound")
                found = self._cache.get(key)
                if found is None and not compute:
                    self._job_sets[key] = (jobs, cluster, truth)
                    return None
                if found is None:
                    found = self._store(key, _solve(jobs, cluster, truth, self.settings),
                                        seed, load)
            return LpBoundFigures(**found)  # type: ignore[arg-type]
        except (InputError, TypeError, ValueError, RuntimeError) as exc:
            self._failed.add((seed, load))
            self.note(f"LP bound of seed {seed}, load {load:g} not computed: {exc}")
            return None

    def columns(self, seed: int, load: float, row: Mapping[str, str]) -> dict[str, str]:
        """The LP columns of a results.csv row of the cell (empty cells if no bound)."""
        figures = self.figures(seed, load)
        if figures is None:
            return dict.fromkeys(COLUMNS, "")
        average = cell_float(row.get("avg_jct_s"))
        ratio = average / figures.avg_jct_s if figures.avg_jct_s > 0 else math.nan
        return {"bound_lp_avg_jct_s": cell_text(figures.avg_jct_s),
                "bound_lp_status": figures.status,
                "avg_jct_over_lp_bound": cell_text(ratio)}

    def add_to_rows(self, results: Path, rows: list[dict[str, str]],
                    lacking: Sequence[dict[str, str]]) -> None:
        """Fill the LP columns of the ``lacking`` rows of ``rows`` (all of results.csv)
        and rewrite the file: rows written before their bound was known (or by a bench run
        without it, or whose bound failed) get it without their replays being done again."""
        filled = 0
        for row in lacking:
            columns = self.columns(int(row["seed"]), float(row["load"]), row)
            filled += bool(columns["bound_lp_avg_jct_s"])
            row.update(columns)
        if filled:
            with deferred_interrupts():
                rewrite_results(results, rows)

    def _job_set(self, seed: int, load: float
                 ) -> tuple[str, tuple[Job, ...], Cluster, ThroughputModel]:
        from hetsched.files.cluster_spec import parse_cluster
        from hetsched.files.replay_inputs import source_bytes, trace_jobs

        source = self.source
        cluster = parse_cluster(source.cluster)
        read = trace_jobs(source.trace, source.trace_format, cluster,
                          throughput_path=source.throughput,
                          settings=source.run_settings(seed, load))
        table = source_bytes(read.source) if read.source is not None else b"catalogue"
        key = self._keys[(seed, load)] = job_set_key(read.jobs, read.cluster, table,
                                                      self.settings)
        return key, read.jobs, read.cluster, read.truth

    def _store(self, key: str, bound: CompletionBound, seed: int, load: float
               ) -> dict[str, object]:
        """Cache a computed bound (``lp_bounds.json`` written at once) and say it."""
        figures = LpBoundFigures(
            avg_jct_s=bound.avg_jct_s, status=bound.status,
            isolated_avg_jct_s=bound.isolated_avg_jct_s, jobs=bound.jobs,
            intervals=bound.intervals, columns=bound.columns, rows=bound.rows,
            build_s=round(bound.build_s, 3), lp_s=round(bound.lp_s, 3))
        found = asdict(figures)
        self._cache[key] = found
        write_text(self.path, json.dumps({"version": VERSION, "bounds": self._cache},
                                         indent=1, sort_keys=True) + "\n", "out", CACHE)
        self.note(f"LP bound of seed {seed}, load {load:g}: average JCT >= "
                  f"{bound.avg_jct_s / 3600:,.2f} h ({bound.avg_jct_over_isolated:.2f}x the "
                  f"isolated bound; {bound.status}; {bound.columns:,} columns, "
                  f"{bound.build_s + bound.lp_s:.1f} s)")
        return found


def _solve(jobs: Sequence[Job], cluster: Cluster, truth: ThroughputModel,
           settings: CompletionBoundSettings) -> CompletionBound:
    """The LP of one job set (in the bounds' process, or in the bench's own)."""
    return completion_bound(jobs, cluster, truth, settings=settings)


def _solve_all(bench_pid: int, results: Connection,
               tasks: Sequence[tuple[str, Sequence[Job], Cluster, ThroughputModel]],
               settings: CompletionBoundSettings) -> None:
    """The bounds' process: each job set's LP in turn, sent back as ``(key, bound,
    None)``, or ``(key, None, why)`` when it fails; the process dies with the bench."""
    from hetsched.bench.workers import guard_worker

    guard_worker(bench_pid)
    for key, jobs, cluster, truth in tasks:
        try:
            results.send((key, _solve(jobs, cluster, truth, settings), None))
        except (InputError, TypeError, ValueError, RuntimeError) as exc:
            results.send((key, None, str(exc)))
    results.close()
