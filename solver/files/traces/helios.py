"""Helios (SenseTime) ``cluster_log.csv``.

Columns ``job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time,
start_time, end_time, duration, queue``. Every state is kept (a failed or cancelled
job held its GPUs for ``duration`` all the same); rows with ``gpu_num`` 0 (CPU jobs)
or ``duration`` 0 are excluded with a count. The job type is drawn and work derived
from ``duration`` on the reference GPU type, as for Philly (docs/traces.md). ``vc``, the
virtual cluster, is the job's tenant.
"""

from __future__ import annotations

from pathlib import Path

from hetsched.core.records import MAX_DURATION_S, MAX_GPUS_PER_JOB
from hetsched.files.traces.base import BadRowError, Options, Row, Trace, integer, number
from hetsched.files.traces.philly import wall_clock
from hetsched.files.traces.rules import read_csv

COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time",
           "start_time", "end_time", "duration", "queue")


def read_helios(path: Path, options: Options) -> Trace:
    """Read a Helios ``cluster_log.csv`` into a :class:`~hetsched.files.traces.base.Trace`."""
    return read_csv(path, "helios", options, COLUMNS, _row)


def _row(line: int, cells: dict[str, str]) -> Row | str:
    """The row of one job, or why it is left out (a CPU job, no run time)."""
    if not cells["job_id"]:
        raise BadRowError("empty job_id", cells["job_id"], "a job id", "job_id")
    num_gpus = integer(cells["gpu_num"], "gpu_num", high=MAX_GPUS_PER_JOB)
    arrival = wall_clock(cells["submit_time"], "submit_time")
    duration = number(cells["duration"], "duration", low=0.0, high=MAX_DURATION_S,
                      what=f"a time in s from 0 to {MAX_DURATION_S:g}")
    if num_gpus == 0:
        return "gpu_num 0"
    if duration == 0:
        return "duration 0"
    return Row(line, arrival, num_gpus, duration=duration, user=cells["user"] or None,
               tenant=cells["vc"] or None, id=cells["job_id"])
