"""The Philly job list of the Pollux artifact (``philly.csv``).

Columns ``timestamp, duration, num_gpus, gpu_time, cluster``: submission time as a
wall-clock string (``2017-10-09 07:01:55``), run time in s, GPUs, GPU-seconds and the
virtual cluster, the job's tenant. Rows are not sorted. There is no job type and no GPU
type: the job type is drawn (seeded) and work derived from the duration on the reference
GPU type (docs/traces.md). ``gpu_time`` is not used.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from hetsched.core.records import MAX_DURATION_S, MAX_GPUS_PER_JOB
from hetsched.files.traces.base import BadRowError, Options, Row, Trace, integer, number
from hetsched.files.traces.rules import read_csv

COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
_EPOCH = datetime(1970, 1, 1)
#: Philly's one time format (all 82,247 rows of the Pollux artifact's philly.csv).
_PHILLY_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}")


def wall_clock(text: str, column: str, *, or_seconds: bool = True) -> float:
    """Seconds since 1970-01-01 of a naive ``YYYY-MM-DD HH:MM:SS`` string (no time zone,
    so no daylight-saving jumps), or, with ``or_seconds``, of a number of seconds.
    Without it (Philly's ``timestamp``), the string must be exactly that format: a
    number such as ``1.5`` is a bad row, not a time in 1970."""
    if or_seconds:
        try:
            return number(text, column, low=0.0)
        except BadRowError:
            pass
    elif not _PHILLY_TIME.fullmatch(text):
        raise BadRowError(f"bad {column}", text, "a time 'YYYY-MM-DD HH:MM:SS'", column)
    try:
        if not text.isascii():
            raise ValueError(text)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadRowError(f"bad {column}", text, "a time 'YYYY-MM-DD HH:MM:SS'" + (
            " or seconds" if or_seconds else ""), column) from None
    if moment.tzinfo is not None:
        moment = moment.replace(tzinfo=None) - moment.utcoffset()  # type: ignore[operator]
    return (moment - _EPOCH).total_seconds()


def read_philly(path: Path, options: Options) -> Trace:
    """Read ``philly.csv`` into a :class:`~hetsched.files.traces.base.Trace`."""
    return read_csv(path, "philly", options, COLUMNS, _row)


def _row(line: int, cells: dict[str, str]) -> Row | str:
    """The row of one job, or why it is left out (no GPU, no run time)."""
    num_gpus = integer(cells["num_gpus"], "num_gpus", high=MAX_GPUS_PER_JOB)
    duration = number(cells["duration"], "duration", low=0.0, high=MAX_DURATION_S,
                      what=f"a time in s from 0 to {MAX_DURATION_S:g}")
    arrival = wall_clock(cells["timestamp"], "timestamp", or_seconds=False)
    if num_gpus == 0:
        return "num_gpus 0"
    if duration == 0:
        return "duration 0"
    return Row(line, arrival, num_gpus, duration=duration,
               tenant=cells["cluster"].strip() or None)
