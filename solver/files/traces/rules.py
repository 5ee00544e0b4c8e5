"""The rules every trace reader shares (docs/traces.md, "Shared rules"), applied in one
place by :func:`build_trace` to the rows a format module parsed: GPU counts the
throughput model cannot run are capped, job types are drawn for traces that have none,
work is derived from durations on the reference GPU type, SLOs and synthetic deadlines
become deadlines, and the jobs are sorted, cut to ``limit_jobs`` and shifted so the
first arrival is at 0 s. With the throughput look-ups they need (:class:`Speeds`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path

import numpy as np

from hetsched.core.errors import InputError
from hetsched.core.records import MAX_GPUS_PER_JOB, Job
from hetsched.core.throughput import (
    AliasedThroughput,
    Placement,
    PolicyView,
    ThroughputModel,
    ThroughputTable,
)
from hetsched.files.generate import GPU_TYPES, JOB_CLASSES
from hetsched.files.traces.base import (
    CAPPED,
    DEFAULT_REFERENCE_GPU,
    MAX_SKIPPED_FRACTION,
    MAX_SKIPPED_ROWS,
    BadRowError,
    Options,
    Reading,
    Row,
    Trace,
    read_rows,
)

log = logging.getLogger(__name__)


# --- throughput look-ups ------------------------------------------------------------------


def catalogue_throughput() -> ThroughputTable:
    """The built-in catalogue (hetsched.files.generate) as a throughput table, 1 to 8 GPUs: the
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
    (a fitted model's ``max_gpus``, or :data:`hetsched.core.records.MAX_GPUS_PER_JOB`)."""
    if isinstance(model, PolicyView):
        return known_counts(model.measured)
    if isinstance(model, AliasedThroughput):
        return known_counts(model.model)
    if isinstance(model, ThroughputTable):
        return tuple(sorted({key[2] for key in model.entries}, reverse=True))
    largest = getattr(getattr(model, "settings", None), "max_gpus", None)
    if isinstance(largest, int) and not isinstance(largest, bool) and largest >= 1:
        return min(largest, MAX_GPUS_PER_JOB)
    return MAX_GPUS_PER_JOB


# --- the shared rules ---------------------------------------------------------------------


def read_csv(path: Path, format: str, options: Options, columns: Sequence[str],
             parse: Callable[[int, dict[str, str]], Row | str], *,
             optional: Sequence[str] = (), types_column: str = "allowed_gpu_types",
             lines: Iterable[tuple[int, dict[str, str]]] | None = None) -> Trace:
    """The trace of the CSV file ``path`` in ``format``, a header with ``columns`` (and
    maybe ``optional`` ones): each data row made a :class:`Row` by ``parse`` (or left out,
    or bad: :func:`~hetsched.files.traces.base.read_rows`, which says what
    ``types_column`` and ``lines`` are), then the shared rules (:func:`build_trace`)."""
    return build_trace(*read_rows(path, format, options, columns, parse, optional=optional,
                                  types_column=types_column, lines=lines))


def build_trace(reading: Reading, rows: list[Row]) -> Trace:
    """Apply the shared rules of docs/traces.md to parsed rows and return the Trace."""
    options = reading.options
    in_scope = reading.skipped_rows + len(rows)  # data rows not excluded on purpose
    needs_model = any(row.job_type is None or row.work is None for row in rows)
    model = options.throughput
    if model is None and needs_model:
        model = catalogue_throughput()
    speeds = _speeds(reading, model) if model is not None else None
    # With neither a model nor the cluster's types, nothing says which GPU types exist:
    # a row's allowed types are kept as they are, not checked against the catalogue.
    check_types = options.throughput is not None or bool(options.gpu_types)
    reference = _reference_gpu(reading, speeds) if speeds is not None and needs_model \
        else None
    seeds = np.random.SeedSequence(options.seed).spawn(2)
    draws = np.random.default_rng(seeds[0]).random(len(rows))
    kept: list[Row] = []
    for row, draw in zip(rows, draws, strict=True):
        try:
            if speeds is not None:
                if check_types:
                    _check_allowed_types(reading, row, speeds)
                _fit_to_model(reading, row, speeds, float(draw), reference, check_types)
            kept.append(row)
        except BadRowError as error:
            reading.bad_row(row.line, error)
    kept.sort(key=lambda row: (row.arrival, row.line))
    if options.limit_jobs is not None and len(kept) > options.limit_jobs:
        reading.excluded["beyond limit_jobs"] += len(kept) - options.limit_jobs
        kept = kept[: options.limit_jobs]
    jobs = _jobs(reading, kept, speeds)
    if options.throughput is None and needs_model:
        reading.notes["no throughput model given: the built-in catalogue "
                      "(hetsched.files.generate) used for job types and work"] = len(jobs)
    _check_skipped(reading, in_scope, len(jobs))
    excluded = {reason: count for reason, count in reading.excluded.items() if count}
    notes = tuple(f"{text}: {count} jobs" for text, count in reading.notes.items())
    trace = Trace(tuple(jobs), reading.file, reading.format, reading.skipped_rows, excluded,
                  notes, reference if any(row.duration is not None for row in kept) else None)
    log.info("%s", trace.summary())
    return trace


def _check_skipped(reading: Reading, in_scope: int, jobs: int) -> None:
    """Raise an InputError when ``on_bad_row="skip"`` skipped more than
    :data:`MAX_SKIPPED_FRACTION` of the ``in_scope`` rows (and more than
    :data:`MAX_SKIPPED_ROWS`), or every row that was not excluded on purpose: the file is
    most likely not in the format given."""
    skipped = reading.skipped_rows
    if not skipped or (jobs and (skipped <= MAX_SKIPPED_FRACTION * in_scope
                                 or skipped <= MAX_SKIPPED_ROWS)):
        return
    raise InputError(f"{skipped} of {in_scope} rows are bad (skipped with on_bad_row skip), "
                     f"the first {reading.first_bad}", file=reading.file,
                     expected=f"at most {MAX_SKIPPED_FRACTION:.0%} (or {MAX_SKIPPED_ROWS}) "
                     f"bad rows and some job left: is it a {reading.format} file?")


def _speeds(reading: Reading, model: ThroughputModel) -> Speeds:
    options = reading.options
    gpu_types = options.gpu_types or model_names(model, "gpu_types")
    if not gpu_types:
        raise InputError("the throughput model does not list its GPU types",
                         path="gpu_types", value=[],
                         expected="gpu_types=... (the cluster's GPU type names)")
    return Speeds(model, tuple(gpu_types))


def _reference_gpu(reading: Reading, speeds: Speeds) -> str:
    """The GPU type durations are converted into work on (rule 4): ``reference_gpu`` if
    given (the model must know it); else :data:`DEFAULT_REFERENCE_GPU` if the model knows
    it; else the first of ``gpu_types`` (in the order given: ``hetsched replay`` gives the
    cluster's types from the most GPUs to the fewest) that the model knows."""
    known = speeds.model_gpu_types
    given = reading.options.reference_gpu
    if given is not None:
        if known and given not in known:
            raise InputError("reference GPU type unknown to the throughput model",
                             path="reference_gpu", value=given,
                             expected="one of " + ", ".join(known))
        return given
    if not known or DEFAULT_REFERENCE_GPU in known:
        return DEFAULT_REFERENCE_GPU
    chosen = next((t for t in speeds.gpu_types if t in known), known[0])
    log.info("%s: reference GPU %s (the throughput model has no %s)", reading.file, chosen,
             DEFAULT_REFERENCE_GPU)
    return chosen


def _check_allowed_types(reading: Reading, row: Row, speeds: Speeds) -> None:
    """A row that restricts its GPU types must allow one of the GPU types jobs run on
    (the cluster's, or the model's): else it is a bad row naming the column."""
    allowed = row.allowed_gpu_types
    if allowed is not None and not any(t in speeds.gpu_types for t in allowed):
        raise BadRowError("no GPU type it allows is in the cluster", "|".join(allowed),
                          "GPU types among " + ", ".join(speeds.gpu_types),
                          reading.types_column)


def _fit_to_model(reading: Reading, row: Row, speeds: Speeds, draw: float,
                  reference: str | None, check_types: bool = True) -> None:
    """Cap an unsupported GPU count, draw a job type, derive work (docs/traces.md); on
    the row's allowed GPU types if ``check_types``, else on any."""
    allowed = row.allowed_gpu_types if check_types else None
    if row.job_type is None:
        assert reference is not None
        row.num_gpus, row.job_type = _draw_job_type(row, speeds, row.num_gpus, draw,
                                                    reference)
    elif speeds.best(row.job_type, row.num_gpus, allowed) <= 0:
        count = speeds.largest_count(row.job_type, row.num_gpus, allowed)
        if count is None:
            raise BadRowError("job type has no positive throughput in the throughput model",
                         row.job_type, "a job type the model knows on "
                         + ", ".join(allowed or speeds.gpu_types), "job_type")
        row.rule_notes += [CAPPED, f"({row.job_type}, {row.num_gpus}): 0 steps/s on every GPU "
                           f"type of the throughput model; capped at {count} GPUs"]
        row.num_gpus = count
        if row.allowed_gpu_counts is not None:
            row.allowed_gpu_counts = tuple(c for c in row.allowed_gpu_counts if c <= count) \
                or (count,)
            if count not in row.allowed_gpu_counts:
                row.allowed_gpu_counts = (*row.allowed_gpu_counts, count)
    if row.work is None:
        assert row.duration is not None
        assert reference is not None
        speed = speeds.one(row.job_type, reference, row.num_gpus, Placement.PACKED)
        row.work = row.duration * speed


def _draw_job_type(row: Row, speeds: Speeds, num_gpus: int,
                   draw: float, reference: str) -> tuple[int, str]:
    """A job type drawn uniformly among those with throughput > 0 on the reference GPU
    at ``num_gpus`` (packed); the count is capped when no type runs at it."""
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
        row.rule_notes.append(f"{num_gpus} GPUs: no job type has throughput > 0 on "
                              f"{reference} x {num_gpus}; capped at {count} GPUs")
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
                      row.weight, row.user, row.allowed_gpu_counts, row.allowed_gpu_types,
                      gpu_share=row.gpu_share if row.num_gpus == 1 else None, cpus=row.cpus,
                      memory_gb=row.memory_gb, tenant=row.tenant)
        except InputError as exc:
            reading.bad(row.line, exc.problem, exc.value, exc.expected or "", exc.path)
            continue
        seen[job_id] = row.line
        jobs.append(job)
        for text in (*([row.note] if row.note is not None else []), *row.rule_notes):
            reading.note(text)  # counted for the jobs kept (after limit_jobs), not the rows
    return jobs
