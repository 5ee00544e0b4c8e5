"""Pollux's evaluation workloads (``workloads/workload-<k>.csv`` of its artifact).

Columns ``name, time, application, num_replicas, batch_size``: the job's name, its
arrival in s, the application (``bert``, ``cifar10``, ``deepspeech2``, ``imagenet``,
``ncf``, ``yolov3``), and the GPUs and total batch size its user asked for (the "tuned
jobs" settings, which Pollux's ``tiresias`` runs them at). Each row is one job:

* ``id`` = ``name``, ``arrival`` = ``time``, ``num_gpus`` = ``num_replicas``, no tenant;
* ``job_type`` = ``"<application> (batch size <batch_size>)"``: one job type per
  application and batch size, because the step time depends on the per-GPU batch;
* ``work`` = the steps at that batch to Pollux's completion epoch, efficiency-weighted
  (:meth:`hetsched.speeds.pollux.PolluxApplication.steps_to_goal`), so that at the
  throughput of :class:`hetsched.speeds.pollux.PolluxThroughput` (1 / Pollux's step time
  on the job's placement, nodes of 4 ``t4`` GPUs) a job alone takes the time Pollux's
  simulator gives it.

The applications' measurements are the read's throughput model when it is Pollux's (a
replay's: by default Pollux's ``traces/`` folder beside the workloads' folder,
``workloads/../traces``), else read from that folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.records import MAX_TIME_S
from hetsched.files.traces.base import (
    BadRowError,
    Options,
    Reading,
    Row,
    Trace,
    check_width,
    csv_rows,
    integer,
    number,
)
from hetsched.files.traces.rules import build_trace
from hetsched.speeds.pollux import MAX_GPUS, PolluxThroughput, job_type_name, read_pollux

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


def measurements_folder(workload: Path) -> Path:
    """Pollux's ``traces/`` folder for a workload file: beside the workload's folder
    (``workloads/workload-1.csv`` -> ``traces/``), else beside the file."""
    for folder in (workload.parent.parent / "traces", workload.parent / "traces"):
        if folder.is_dir():
            return folder
    return workload.parent.parent / "traces"


def pollux_model(model: Any) -> PolluxThroughput | None:
    """The :class:`PolluxThroughput` inside a throughput model (a replay wraps it in
    views: aliases, packed speeds, the policies' view), or ``None``."""
    for _ in range(8):  # (views wrap a model a few levels deep at most)
        if isinstance(model, PolluxThroughput):
            return model
        model = getattr(model, "measured", None) or getattr(model, "model", None)
        if model is None:
            return None
    return None


def read_pollux_workload(path: Path, options: Options) -> Trace:
    """Read a Pollux workload CSV into a :class:`~hetsched.files.traces.base.Trace`
    (module notes)."""
    reading = Reading(path, "pollux", options)
    rows_read = list(csv_rows(path, COLUMNS))  # (a missing file or header: an error first)
    model = pollux_model(options.throughput)
    if model is None:
        folder = measurements_folder(path)
        if not folder.is_dir():
            raise InputError("no Pollux measurements for this workload", file=str(path),
                             value=str(folder), expected="Pollux's traces/ folder beside "
                             "the workloads' folder (workloads/../traces)")
        model = read_pollux(folder)
    rows: list[Row] = []
    for line, cells in rows_read:
        try:
            rows.append(_row(line, cells, model))
        except BadRowError as error:
            reading.bad_row(line, error)
    return build_trace(reading, rows)


def _row(line: int, cells: dict[str, str], model: PolluxThroughput) -> Row:
    check_width(cells)
    if not cells["name"]:
        raise BadRowError("empty name", cells["name"], "a job name", "name")
    arrival = number(cells["time"], "time", low=0.0, high=MAX_TIME_S,
                     what=f"a time in s from 0 to {MAX_TIME_S:g}")
    app = model.applications.get(cells["application"])
    if app is None:
        raise BadRowError("unknown application", cells["application"],
                          "one of " + ", ".join(sorted(model.applications)), "application")
    num_gpus = integer(cells["num_replicas"], "num_replicas", low=1, high=MAX_GPUS)
    low, high = app.convergence.base_batch, app.convergence.max_batch
    batch = integer(cells["batch_size"], "batch_size", low=1)
    if not low <= batch <= high:
        raise BadRowError("bad batch_size", cells["batch_size"],
                          f"a batch size from {low} to {high} ({app.name}'s validated range)",
                          "batch_size")
    if app.batch_plan(batch, num_gpus).atomic_bsz < app.min_local_bsz:
        raise BadRowError("batch too small for its GPUs", cells["batch_size"],
                          f"at least {app.min_local_bsz} samples per GPU ({app.name}) on "
                          f"{num_gpus} GPUs", "batch_size")
    return Row(line, arrival, num_gpus, job_type=job_type_name(app.name, batch),
               work=app.steps_to_goal(batch, num_gpus), id=cells["name"])
