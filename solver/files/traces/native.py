"""hetsched's own trace CSV: one row per job with every :class:`~hetsched.core.records.Job` field.

Columns (header required, in any order): ``id, arrival, job_type, num_gpus, work,
deadline, weight, user, allowed_gpu_counts, allowed_gpu_types``, and optionally
``gpu_share, cpus, memory_gb, tenant`` (written only when some job has one). Times in s, work in
steps; an empty ``deadline``, ``user``, ``allowed_gpu_counts`` or
``allowed_gpu_types`` means none; the two lists are joined by ``|`` (``1|2|4``,
``v100|p100``). Numbers are written with Python's ``repr`` so that reading back gives
the same floats: :func:`write_native` then :func:`read_native` round-trips a Trace.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.records import (
    MAX_CPUS,
    MAX_GPUS_PER_JOB,
    MAX_MEMORY_GB,
    MAX_TIME_S,
    MAX_WEIGHT,
    MAX_WORK,
    MIN_WEIGHT,
    Job,
)
from hetsched.files.traces.base import BadRowError, Options, Row, Trace, integer, number
from hetsched.files.traces.rules import read_csv

COLUMNS = ("id", "arrival", "job_type", "num_gpus", "work", "deadline", "weight", "user",
           "allowed_gpu_counts", "allowed_gpu_types")
#: Columns a file may have (written only when some job has a value).
OPTIONAL = ("gpu_share", "cpus", "memory_gb", "tenant")


def _row(line: int, cells: dict[str, str]) -> Row:
    """The row of one job."""
    if not cells["id"]:
        raise BadRowError("empty id", cells["id"], "a job id", "id")
    if not cells["job_type"]:
        raise BadRowError("empty job_type", cells["job_type"], "a job type", "job_type")
    counts = None
    if cells["allowed_gpu_counts"]:
        counts = tuple(integer(text, "allowed_gpu_counts", low=1, high=MAX_GPUS_PER_JOB)
                       for text in cells["allowed_gpu_counts"].split("|"))
    arrival = number(cells["arrival"], "arrival", low=0.0, high=MAX_TIME_S,
                     what=f"a time in s from 0 to {MAX_TIME_S:g}")
    deadline = number(cells["deadline"], "deadline", high=MAX_TIME_S,
                      what=f"a time in s up to {MAX_TIME_S:g}, or empty") \
        if cells["deadline"] else None
    if deadline is not None and deadline <= arrival:  # checked here, before times shift
        raise BadRowError("deadline is not after the arrival", cells["deadline"],
                          f"a time after the arrival {cells['arrival'].strip()} s", "deadline")
    types = None
    if cells["allowed_gpu_types"]:
        types = tuple(name.strip() for name in cells["allowed_gpu_types"].split("|"))
    return Row(
        line, arrival, integer(cells["num_gpus"], "num_gpus", low=1, high=MAX_GPUS_PER_JOB),
        job_type=cells["job_type"],
        work=number(cells["work"], "work", low=0.0, strict=True, high=MAX_WORK,
                    what=f"a number of steps > 0 and <= {MAX_WORK:g}"),
        deadline=deadline,
        weight=number(cells["weight"] or "1", "weight", low=MIN_WEIGHT, high=MAX_WEIGHT,
                      what=f"a weight from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}"),
        user=cells["user"] or None, id=cells["id"], allowed_gpu_counts=counts,
        allowed_gpu_types=types, gpu_share=_optional(cells, "gpu_share", 1.0),
        cpus=_optional(cells, "cpus", MAX_CPUS), memory_gb=_optional(cells, "memory_gb",
                                                                     MAX_MEMORY_GB),
        tenant=cells["tenant"] or None)


def _optional(cells: dict[str, str], column: str, high: float) -> float | None:
    """An optional number column: ``None`` when empty."""
    text = cells[column]
    return number(text, column, low=0.0, high=high, what=f"a number from 0 to {high:g}, or "
                  "empty") if text else None


def _cell(value: float | str | None) -> str:
    """An optional column's cell: empty for none, a number as ``repr`` (exact), text as is."""
    if value is None:
        return ""
    return value if isinstance(value, str) else repr(float(value))


def read_native(path: Path, options: Options) -> Trace:
    """Read a native trace CSV into a :class:`~hetsched.files.traces.base.Trace`."""
    return read_csv(path, "native", options, COLUMNS, _row, optional=OPTIONAL)


def write_native(trace_or_jobs: Trace | Iterable[Job], path: str | Path) -> None:
    """Write jobs (a Trace's, or any) as a native trace CSV, in the order given."""
    jobs = trace_or_jobs.jobs if isinstance(trace_or_jobs, Trace) else tuple(trace_or_jobs)
    path = Path(path)
    for job in jobs:  # the readers take one physical line per row
        for name, text in (("id", job.id), ("job_type", job.job_type), ("user", job.user),
                           ("tenant", job.tenant),
                           *(("allowed_gpu_types", t) for t in job.allowed_gpu_types or ())):
            if text is not None and ("\n" in text or "\r" in text):
                raise InputError("a line break in a field", file=str(path),
                                 path=f"job {job.id!r}.{name}", value=text,
                                 expected="text on one line (a trace row is one line)")
    try:
        handle = path.open("w", newline="", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the trace file ({exc.strerror})",
                         file=str(path)) from None
    extra = [name for name in OPTIONAL if any(getattr(job, name) is not None for job in jobs)]
    with handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow((*COLUMNS, *extra))
        for job in jobs:
            writer.writerow([
                job.id, repr(float(job.arrival)), job.job_type, job.num_gpus,
                repr(float(job.work)),
                "" if job.deadline is None else repr(float(job.deadline)),
                repr(float(job.weight)), job.user or "",
                "|".join(map(str, job.allowed_gpu_counts or ())),
                "|".join(job.allowed_gpu_types or ()),
                *(_cell(getattr(job, name)) for name in extra),
            ])
