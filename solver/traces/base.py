"""The internal job table every trace reader returns, and the rules they share.

A format module turns each row of its file into a :class:`Row` (what the row says,
absolute times in seconds) and hands the rows to :func:`build_trace`, which applies
the rules of docs/traces.md in one place: GPU counts the throughput model cannot run
are capped, job types are drawn for traces that have none, work is derived from
durations, SLOs and synthetic deadlines become deadlines, and the jobs are sorted,
cut to ``limit_jobs`` and shifted so the first arrival is at 0 s.
"""

from __future__ import annotations

import csv
import logging
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from hetsched.data import MAX_GPUS_PER_JOB, Job
from hetsched.errors import InputError
from hetsched.generate import GPU_TYPES, JOB_CLASSES
from hetsched.throughput import Placement, PolicyView, ThroughputModel, ThroughputTable

log = logging.getLogger(__name__)

ON_BAD_ROW = ("fatal", "skip")
#: The note counting every job whose (job type, GPU count) the throughput model cannot run.
CAPPED = "all (job type, GPU count) pairs with 0 steps/s on every GPU type: GPU count capped"


@dataclass(frozen=True)
class Trace:
    """Jobs read from a trace file, with an account of what the reader did.

    ``jobs`` are sorted by arrival (ties: file order), arrivals in s from the first
    arrival (0 s); ``skipped_rows`` counts bad rows skipped with ``on_bad_row="skip"``;
    ``excluded`` counts rows left out on purpose, by reason; ``notes`` lists the
    fallbacks used, each with its count.
    """

    jobs: tuple[Job, ...]
    source: str
    format: str
    skipped_rows: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line: how many jobs, skipped and excluded rows."""
        left_out = sum(self.excluded.values())
        return (f"{self.source} ({self.format}): {len(self.jobs)} jobs, "
                f"{self.skipped_rows} bad rows skipped, {left_out} rows excluded")


@dataclass
class Row:
    """One row of a trace: what it says, before the shared rules (times in s, absolute).

    ``work`` (steps) or ``duration`` (s on ``reference_gpu``) must be given;
    ``job_type`` None means "draw one"; ``slo`` is Gavel's multiple of the isolated
    duration; ``deadline`` an absolute deadline (native format).
    """

    line: int
    arrival: float
    num_gpus: int
    job_type: str | None = None
    work: float | None = None
    duration: float | None = None
    slo: float | None = None
    deadline: float | None = None
    weight: float = 1.0
    user: str | None = None
    id: str | None = None
    allowed_gpu_counts: tuple[int, ...] | None = None
    allowed_gpu_types: tuple[str, ...] | None = None


class BadRowError(Exception):
    """A row that cannot be read: raised by parsers, turned into an InputError with
    the file and line (or skipped) by :meth:`Reading.bad`."""

    def __init__(self, problem: str, value: Any, expected: str, column: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.value = value
        self.expected = expected
        self.column = column


@dataclass(frozen=True)
class Options:
    """The reader options of :func:`hetsched.traces.read_trace` (documented there)."""

    throughput: ThroughputModel | None = None
    gpu_types: tuple[str, ...] = ()
    reference_gpu: str = "v100"
    seed: int = 0
    on_bad_row: str = "fatal"
    limit_jobs: int | None = None
    deadline_fraction: float | None = None
    deadline_slack: tuple[float, float] = (1.2, 3.0)


class Reading:
    """The state of one read: file, options, counts of skipped and excluded rows, notes."""

    def __init__(self, path: Path, format: str, options: Options) -> None:
        self.path = path
        self.file = str(path)
        self.format = format
        self.options = options
        self.skipped_rows = 0
        self.excluded: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()

    def bad(self, line: int, problem: str, value: Any, expected: str, column: str = "") -> None:
        """A bad row: raise an InputError naming file and line, or count it (skip)."""
        where = f"line {line}" + (f".{column}" if column else "")
        if self.options.on_bad_row == "fatal":
            raise InputError(problem, file=self.file, path=where, value=value,
                             expected=expected)
        self.skipped_rows += 1
        log.debug("%s: %s: skipped bad row: %s (%r)", self.file, where, problem, value)

    def bad_row(self, line: int, error: BadRowError) -> None:
        """:meth:`bad` for a :class:`BadRowError`."""
        self.bad(line, error.problem, error.value, error.expected, error.column)

    def exclude(self, reason: str) -> None:
        """Count a row left out on purpose."""
        self.excluded[reason] += 1

    def note(self, text: str) -> None:
        """Count one use of a fallback."""
        self.notes[text] += 1


# --- file access and cell parsing ---------------------------------------------------------


def open_text(path: Path) -> TextIO:
    """Open a trace file for reading (a UTF-8 byte order mark is skipped), with clear
    errors for a missing or unreadable one, or one that is not a regular file."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise InputError("not a regular file (a device, pipe or socket)", file=str(path))
    try:
        return path.open(newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such trace file", file=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a trace file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read the trace file ({exc.strerror})",
                         file=str(path)) from None


def csv_rows(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, row)`` for each data row of a CSV file with a header that has ``columns``
    (other columns are ignored). Blank lines are passed over.

    Each physical line is parsed on its own (no trace format has fields that span
    lines): a stray double quote spoils only its own row, which comes out as a bad row
    (:func:`check_width` raises it), instead of swallowing the rows after it."""
    handle = open_text(path)
    with handle:
        line = 1
        try:
            lines = enumerate(handle, start=1)
            first = next(lines, None)
            if first is None or not first[1].strip():
                raise InputError("the file is empty" if first is None else "blank header line",
                                 file=str(path), path="line 1",
                                 expected="a header with columns " + ", ".join(columns))
            try:
                header = [name.strip() for name in _cells(first[1])]
            except csv.Error as exc:
                raise InputError(f"not valid CSV ({exc})", file=str(path), path="line 1",
                                 value=first[1].rstrip("\r\n"),
                                 expected="a header with columns " + ", ".join(columns)
                                 ) from None
            missing = [name for name in columns if name not in header]
            if missing:
                raise InputError(f"missing column '{missing[0]}'", file=str(path),
                                 path="line 1", value=header,
                                 expected="columns " + ", ".join(columns))
            index = {name: header.index(name) for name in columns}
            width = len(header)
            for line, text in lines:
                if not text.strip():
                    continue
                try:
                    cells = _cells(text)
                except csv.Error as exc:
                    yield line, {_PROBLEM: f"not valid CSV ({exc})",
                                 _VALUE: text.rstrip("\r\n"),
                                 _EXPECTED: "fields separated by commas, a double quote only "
                                 "around a whole field (doubled inside it), on one line"}
                    continue
                if len(cells) != width:
                    yield line, {_PROBLEM: "wrong number of fields", _VALUE: str(len(cells)),
                                 _EXPECTED: f"{width} fields as in the header"}
                    continue
                yield line, {name: cells[i].strip() for name, i in index.items()}
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                             file=str(path), path=f"after line {line}") from None


#: Keys of the row :func:`csv_rows` yields for a line it cannot split into fields.
_PROBLEM, _VALUE, _EXPECTED = "__problem__", "__value__", "__expected__"


def _cells(text: str) -> list[str]:
    """The fields of one physical line of CSV (``csv.Error`` for an unclosed or misplaced
    double quote, or a NUL byte)."""
    return next(csv.reader([text.rstrip("\r\n")], strict=True), [])


def check_width(row: dict[str, str]) -> None:
    """Raise :class:`BadRowError` for a line that :func:`csv_rows` could not split into
    the header's fields (wrong number of fields, a stray double quote)."""
    if _PROBLEM in row:
        value: object = row[_VALUE]
        if row[_PROBLEM] == "wrong number of fields":
            value = int(row[_VALUE])
        raise BadRowError(row[_PROBLEM], value, row[_EXPECTED])


def number(text: str, column: str, *, low: float | None = None, strict: bool = False,
           high: float = math.inf, what: str = "a finite number") -> float:
    """A finite float from a cell, optionally ``> low`` (strict) or ``>= low``, and
    ``<= high``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    ok = math.isfinite(value) and value <= high
    if ok and low is not None:
        ok = value > low if strict else value >= low
    if not ok:
        raise BadRowError(f"bad {column}", text, what, column)
    return value


def integer(text: str, column: str, *, low: int = 0, high: float = math.inf) -> int:
    """An integer from a cell (``"4"`` or ``"4.0"``) from ``low`` to ``high``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value != int(value) or not low <= value <= high:
        expected = f"an integer >= {low}" if high == math.inf else \
            f"an integer from {low} to {high:g}"
        raise BadRowError(f"bad {column}", text, expected, column)
    return int(value)


# --- throughput look-ups ------------------------------------------------------------------


def catalogue_throughput() -> ThroughputTable:
    """The built-in catalogue (hetsched.generate) as a throughput table, 1 to 8 GPUs: the
    model used to draw job types and derive work when the caller gives none."""
    rows = [(name, gpu, count, placement, job.throughput(gpu, count, placement))
            for name, job in JOB_CLASSES.items() for gpu in GPU_TYPES
            for count in range(1, 9) for placement in Placement
            if not (placement is Placement.SPREAD and count == 1)]
    return ThroughputTable.from_rows(row for row in rows if row[4] > 0)


def model_names(model: ThroughputModel, attribute: str) -> tuple[str, ...]:
    """The job types or GPU types (``attribute``) a model lists, sorted; () if none."""
    names = getattr(model, attribute, ())
    return tuple(sorted(names)) if names else ()


class Speeds:
    """Cached throughput look-ups (steps/s) on one model; 0.0 where the model raises."""

    def __init__(self, model: ThroughputModel, gpu_types: tuple[str, ...]) -> None:
        self.model = model
        self.gpu_types = gpu_types
        self.model_job_types = model_names(model, "job_types")
        self.model_gpu_types = model_names(model, "gpu_types")
        self.best = cache(self._best)
        self.one = cache(self._one)
        self.candidates = cache(self._candidates)
        self.counts = known_counts(model)

    def _one(self, job_type: str, gpu_type: str, num_gpus: int, placement: Placement) -> float:
        try:
            return float(self.model.throughput(job_type, gpu_type, num_gpus, placement))
        except InputError:
            return 0.0

    def _best(self, job_type: str, num_gpus: int,
              allowed: tuple[str, ...] | None = None) -> float:
        """The fastest steps/s of ``job_type`` on ``num_gpus`` GPUs over the GPU types
        (those in ``allowed``, if given) and both placements."""
        types = [t for t in self.gpu_types if allowed is None or t in allowed]
        return max((self.one(job_type, t, num_gpus, p) for t in types for p in Placement),
                   default=0.0)

    def _candidates(self, reference_gpu: str, num_gpus: int) -> tuple[str, ...]:
        """The job types with throughput > 0 on ``num_gpus`` GPUs of ``reference_gpu``
        (packed), sorted."""
        return tuple(job_type for job_type in self.model_job_types
                     if self.one(job_type, reference_gpu, num_gpus, Placement.PACKED) > 0)

    def counts_down_from(self, num_gpus: int) -> Iterator[int]:
        """The GPU counts <= ``num_gpus`` the model may run, largest first: those of its
        table, or every count up to the largest it answers (at most MAX_GPUS_PER_JOB)."""
        if isinstance(self.counts, tuple):
            return (count for count in self.counts if count <= num_gpus)
        return iter(range(min(num_gpus, self.counts), 0, -1))

    def largest_count(self, job_type: str, num_gpus: int,
                      allowed: tuple[str, ...] | None) -> int | None:
        """The largest count <= ``num_gpus`` with positive throughput, or None."""
        for count in self.counts_down_from(num_gpus):
            if self.best(job_type, count, allowed) > 0:
                return count
        return None


def known_counts(model: ThroughputModel) -> tuple[int, ...] | int:
    """The GPU counts at which ``model`` can give throughput > 0, largest first, when it
    lists them (a table, or a replay's view of one); else the largest count it answers
    (a fitted model's ``max_gpus``, or :data:`hetsched.data.MAX_GPUS_PER_JOB`)."""
    if isinstance(model, PolicyView):
        return known_counts(model.measured)
    if isinstance(model, ThroughputTable):
        return tuple(sorted({key[2] for key in model.entries}, reverse=True))
    largest = getattr(getattr(model, "settings", None), "max_gpus", None)
    if isinstance(largest, int) and not isinstance(largest, bool) and largest >= 1:
        return min(largest, MAX_GPUS_PER_JOB)
    return MAX_GPUS_PER_JOB


# --- the shared rules ---------------------------------------------------------------------


def build_trace(reading: Reading, rows: list[Row]) -> Trace:
    """Apply the shared rules of docs/traces.md to parsed rows and return the Trace."""
    options = reading.options
    needs_model = any(row.job_type is None or row.work is None for row in rows)
    model = options.throughput
    if model is None and needs_model:
        model = catalogue_throughput()
        reading.notes["no throughput model given: the built-in catalogue (hetsched.generate) "
                      "used for job types and work"] = len(rows)
    speeds = _speeds(reading, model) if model is not None else None
    seeds = np.random.SeedSequence(options.seed).spawn(2)
    draws = np.random.default_rng(seeds[0]).random(len(rows))
    kept: list[Row] = []
    for row, draw in zip(rows, draws, strict=True):
        try:
            if speeds is not None:
                _fit_to_model(reading, row, speeds, float(draw))
            kept.append(row)
        except BadRowError as error:
            reading.bad_row(row.line, error)
    kept.sort(key=lambda row: (row.arrival, row.line))
    if options.limit_jobs is not None and len(kept) > options.limit_jobs:
        reading.excluded["beyond limit_jobs"] += len(kept) - options.limit_jobs
        kept = kept[: options.limit_jobs]
    jobs = _jobs(reading, kept, speeds)
    excluded = {reason: count for reason, count in reading.excluded.items() if count}
    notes = tuple(f"{text}: {count} jobs" for text, count in reading.notes.items())
    trace = Trace(tuple(jobs), reading.file, reading.format, reading.skipped_rows, excluded,
                  notes)
    log.info("%s", trace.summary())
    return trace


def _speeds(reading: Reading, model: ThroughputModel) -> Speeds:
    options = reading.options
    gpu_types = options.gpu_types or model_names(model, "gpu_types")
    if not gpu_types:
        raise InputError("the throughput model does not list its GPU types",
                         path="gpu_types", value=[],
                         expected="gpu_types=... (the cluster's GPU type names)")
    return Speeds(model, tuple(gpu_types))


def _fit_to_model(reading: Reading, row: Row, speeds: Speeds, draw: float) -> None:
    """Cap an unsupported GPU count, draw a job type, derive work (docs/traces.md)."""
    options = reading.options
    if row.job_type is None:
        row.num_gpus, row.job_type = _draw_job_type(reading, speeds, row.num_gpus, draw)
    elif speeds.best(row.job_type, row.num_gpus, row.allowed_gpu_types) <= 0:
        count = speeds.largest_count(row.job_type, row.num_gpus, row.allowed_gpu_types)
        if count is None:
            raise BadRowError("job type has no positive throughput in the throughput model",
                         row.job_type, "a job type the model knows on "
                         + ", ".join(row.allowed_gpu_types or speeds.gpu_types), "job_type")
        reading.note(CAPPED)
        reading.note(f"({row.job_type}, {row.num_gpus}): 0 steps/s on every GPU type of the "
                     f"throughput model; capped at {count} GPUs")
        row.num_gpus = count
        if row.allowed_gpu_counts is not None:
            row.allowed_gpu_counts = tuple(c for c in row.allowed_gpu_counts if c <= count) \
                or (count,)
            if count not in row.allowed_gpu_counts:
                row.allowed_gpu_counts = (*row.allowed_gpu_counts, count)
    if row.work is None:
        assert row.duration is not None
        speed = speeds.one(row.job_type, options.reference_gpu, row.num_gpus, Placement.PACKED)
        row.work = row.duration * speed


def _draw_job_type(reading: Reading, speeds: Speeds, num_gpus: int,
                   draw: float) -> tuple[int, str]:
    """A job type drawn uniformly among those with throughput > 0 on the reference GPU
    at ``num_gpus`` (packed); the count is capped when no type runs at it."""
    reference = reading.options.reference_gpu
    if not speeds.model_job_types:
        raise InputError("the throughput model does not list its job types", path="throughput",
                         expected="a model with job_types (a fitted model or a table)")
    if reference not in speeds.model_gpu_types:
        raise InputError("reference GPU type unknown to the throughput model",
                         path="reference_gpu", value=reference,
                         expected="one of " + ", ".join(speeds.model_gpu_types))
    count = next((count for count in speeds.counts_down_from(num_gpus)
                  if speeds.candidates(reference, count)), 0)
    if count < 1:
        raise InputError("no job type of the throughput model runs on the reference GPU",
                         path="reference_gpu", value=reference,
                         expected="a GPU type with throughput > 0 for some job type")
    if count != num_gpus:
        reading.note(f"{num_gpus} GPUs: no job type has throughput > 0 on {reference} x "
                     f"{num_gpus}; capped at {count} GPUs")
    names = speeds.candidates(reference, count)
    return count, names[min(int(draw * len(names)), len(names) - 1)]


def _jobs(reading: Reading, rows: list[Row], speeds: Speeds | None) -> list[Job]:
    """Jobs from sorted rows: shift times to the first arrival, ids, deadlines."""
    options = reading.options
    start = rows[0].arrival if rows else 0.0
    deadline_rng = np.random.default_rng(np.random.SeedSequence(options.seed).spawn(2)[1])
    picks = deadline_rng.random(len(rows))
    slacks = deadline_rng.uniform(*options.deadline_slack, size=len(rows))
    synthesise = options.deadline_fraction is not None and options.deadline_fraction > 0
    if synthesise and speeds is None:
        raise InputError("synthetic deadlines need a throughput model", path="deadline_fraction",
                         value=options.deadline_fraction,
                         expected="read_trace(..., throughput=...) with the GPU types")
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        arrival = row.arrival - start
        job_id = row.id if row.id is not None else str(index)
        if job_id in seen:
            reading.bad(row.line, "duplicate job id", job_id,
                        f"ids unique in the file (first at line {seen[job_id]})", "id")
            continue
        assert row.work is not None
        assert row.job_type is not None
        deadline = None if row.deadline is None else row.deadline - start
        if row.slo is not None or (synthesise and deadline is None
                                   and picks[index] < (options.deadline_fraction or 0.0)):
            slack = row.slo if row.slo is not None else float(slacks[index])
            if speeds is None:
                raise InputError("an SLO needs a throughput model to become a deadline",
                                 file=reading.file, path=f"line {row.line}", value=row.slo,
                                 expected="read_trace(..., throughput=...)")
            fastest = speeds.best(row.job_type, row.num_gpus, row.allowed_gpu_types)
            if fastest > 0:
                deadline = arrival + slack * row.work / fastest
            else:
                reading.note("no allowed GPU type has throughput > 0 for the isolated "
                             "duration: no deadline set")
        try:
            job = Job(job_id, arrival, row.job_type, row.num_gpus, row.work, deadline,
                      row.weight, row.user, row.allowed_gpu_counts, row.allowed_gpu_types)
        except InputError as exc:
            reading.bad(row.line, exc.problem, exc.value, exc.expected or "", exc.path)
            continue
        seen[job_id] = row.line
        jobs.append(job)
    return jobs
