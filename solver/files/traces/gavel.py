"""Gavel's TSV traces (``*.trace``): one job a line, tab-separated, no header.

Two layouts, told apart by the number of fields of the first line; every line of a
file has the same layout (a line of the other one is a bad row):

* 7 fields: ``job_type, command, num_steps_arg, needs_data_dir, total_steps,
  arrival_time_s, scale_factor``;
* 10 fields: ``job_type, command, working_directory, num_steps_arg, needs_data_dir,
  total_steps, scale_factor, priority_weight, SLO, arrival_time`` (SLO a multiple of
  the isolated duration, -1 for none).

``work`` = ``total_steps`` (steps), ``num_gpus`` = ``scale_factor``; the 10-field
``priority_weight`` is the job's weight. Mapping and fallbacks in docs/traces.md.
"""

from __future__ import annotations

from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.records import MAX_GPUS_PER_JOB, MAX_TIME_S, MAX_WEIGHT, MAX_WORK, MIN_WEIGHT
from hetsched.files.traces.base import (
    BadRowError,
    Options,
    Reading,
    Row,
    Trace,
    integer,
    number,
    open_text,
)
from hetsched.files.traces.rules import build_trace

SHORT = ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps",
         "arrival_time_s", "scale_factor")
LONG = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
        "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time")


def _row(line: int, fields: list[str], layout: tuple[int, int] | None) -> Row:
    """The row of one line; ``layout`` is ``(fields, first line)`` of the file's layout
    (``None`` before a line of either width): a line of the other layout is bad, never
    re-read in it (a 10-field line cut to 7 fields is not a 7-field job)."""
    if layout is not None and len(fields) in (len(SHORT), len(LONG)) and \
            len(fields) != layout[0]:
        raise BadRowError("a line of the other layout", len(fields),
                          f"{layout[0]} tab-separated fields, as on line {layout[1]} "
                          "(one layout per file)")
    if len(fields) == len(SHORT):
        cells = dict(zip(SHORT, fields, strict=True))
        arrival_column, weight, slo = "arrival_time_s", 1.0, None
    elif len(fields) == len(LONG):
        cells = dict(zip(LONG, fields, strict=True))
        arrival_column = "arrival_time"
        weight = number(cells["priority_weight"], "priority_weight", low=MIN_WEIGHT,
                        high=MAX_WEIGHT, what=f"a weight from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}")
        slo = number(cells["SLO"], "SLO", what="-1 (none) or a multiple > 0 of the isolated "
                     "duration")
        if slo == -1:
            slo = None
        elif slo <= 0:
            raise BadRowError("bad SLO", cells["SLO"],
                              "-1 (none) or a multiple > 0 of the isolated duration", "SLO")
    else:
        raise BadRowError("wrong number of tab-separated fields", len(fields),
                     "7 (job_type ... scale_factor) or 10 (job_type ... arrival_time)")
    job_type = cells["job_type"].strip()
    if not job_type:
        raise BadRowError("empty job type", cells["job_type"], "a job type name", "job_type")
    total_steps = integer(cells["total_steps"], "total_steps", low=1, high=MAX_WORK)
    arrival = number(cells[arrival_column], arrival_column, low=0.0, high=MAX_TIME_S,
                     what=f"a time in s from 0 to {MAX_TIME_S:g}")
    scale_factor = integer(cells["scale_factor"], "scale_factor", low=1, high=MAX_GPUS_PER_JOB)
    return Row(line, arrival, scale_factor, job_type=job_type, work=float(total_steps),
               slo=slo, weight=weight)


def read_gavel(path: Path, options: Options) -> Trace:
    """Read a Gavel trace (either layout) into a :class:`~hetsched.files.traces.base.Trace`."""
    reading = Reading(path, "gavel", options)
    rows: list[Row] = []
    layout: tuple[int, int] | None = None
    with open_text(path) as handle:
        try:
            for line, text in enumerate(handle, start=1):
                text = text.rstrip("\r\n")
                if not text.strip():
                    continue
                fields = text.split("\t")
                if layout is None and len(fields) in (len(SHORT), len(LONG)):
                    layout = (len(fields), line)  # the file's layout: its first line's
                try:
                    rows.append(_row(line, fields, layout))
                except BadRowError as error:
                    reading.bad_row(line, error)
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                             file=str(path)) from None
    if not rows and not reading.skipped_rows:  # (under "fatal" a bad line has raised)
        raise InputError("the file is empty" if path.stat().st_size == 0 else
                         "no job line in the file (only blank lines)", file=str(path),
                         path="line 1", expected="tab-separated lines of 7 (job_type ... "
                         "scale_factor) or 10 (job_type ... arrival_time) fields")
    return build_trace(reading, rows)
