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

**Elastic** (``elastic`` in the reader options, ``--elastic``): the job type is
``"<application> (elastic)"``, ``work`` its goal in base-batch steps
(:attr:`hetsched.speeds.pollux.PolluxApplication.goal_base_steps`), its allowed GPU counts
:data:`ELASTIC_COUNTS` up to the most the application's largest batch spreads over
(with the requested count), and its speed on each count its goodput at its best batch
there; the requested GPUs are its ``num_gpus``.

The applications' measurements are the read's throughput model when it is Pollux's (a
replay's: by default Pollux's ``traces/`` folder beside the workloads' folder,
``workloads/../traces``), else read from that folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from hetsched.core.errors import InputError
from hetsched.core.records import MAX_TIME_S
from hetsched.files.traces.base import BadRowError, Options, Row, Trace, csv_rows, integer, number
from hetsched.files.traces.rules import read_csv
from hetsched.speeds.pollux import (
    MAX_GPUS,
    PolluxApplication,
    PolluxThroughput,
    elastic_job_type_name,
    job_type_name,
    read_pollux,
)

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
M = TypeVar("M")
#: The GPU counts an elastic job may be given (Pollux's simulator's configurations, and 64).
ELASTIC_COUNTS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def measurements_folder(workload: Path) -> Path:
    """Pollux's ``traces/`` folder for a workload file: beside the workload's folder
    (``workloads/workload-1.csv`` -> ``traces/``), else beside the file."""
    for folder in (workload.parent.parent / "traces", workload.parent / "traces"):
        if folder.is_dir():
            return folder
    return workload.parent.parent / "traces"


def model_inside(model: Any, kind: type[M]) -> M | None:
    """The model of class ``kind`` inside a throughput model (a replay wraps it in views:
    aliases, packed speeds, the policies' view), or ``None``."""
    for _ in range(8):  # (views wrap a model a few levels deep at most)
        if isinstance(model, kind):
            return model
        model = getattr(model, "measured", None) or getattr(model, "model", None)
        if model is None:
            return None
    return None


def pollux_model(model: Any) -> PolluxThroughput | None:
    """The :class:`PolluxThroughput` inside a throughput model, or ``None``."""
    return model_inside(model, PolluxThroughput)


def read_pollux_workload(path: Path, options: Options) -> Trace:
    """Read a Pollux workload CSV into a :class:`~hetsched.files.traces.base.Trace`
    (module notes)."""
    lines = list(csv_rows(path, COLUMNS))  # (a missing file or header: an error first)
    model = pollux_model(options.throughput)
    if model is None:
        folder = measurements_folder(path)
        if not folder.is_dir():
            raise InputError("no Pollux measurements for this workload", file=str(path),
                             value=str(folder), expected="Pollux's traces/ folder beside "
                             "the workloads' folder (workloads/../traces)")
        model = read_pollux(folder)
    return read_csv(path, "pollux", options, COLUMNS,
                    lambda line, cells: _row(line, cells, model, elastic=options.elastic),
                    lines=lines)


def elastic_counts(app: PolluxApplication, requested: int) -> tuple[int, ...]:
    """The GPU counts an elastic job of ``app`` may run on: :data:`ELASTIC_COUNTS` with a
    batch to run at (its largest batch spread over them keeps the smallest per-GPU
    batch), and the ``requested`` count."""
    counts = {n for n in ELASTIC_COUNTS if app.batch_choices(n)}
    return tuple(sorted(counts | {requested}))


def _row(line: int, cells: dict[str, str], model: PolluxThroughput, *,
         elastic: bool = False) -> Row:
    """The row of one job, run at its application's measured speeds ``model``."""
    arrival, app, num_gpus, batch = workload_cells(cells, model.applications, MAX_GPUS)
    check_batch_fits(cells, app, batch, num_gpus)
    if elastic:
        return Row(line, arrival, num_gpus, job_type=elastic_job_type_name(app.name),
                   work=app.goal_base_steps, id=cells["name"],
                   allowed_gpu_counts=elastic_counts(app, num_gpus))
    return Row(line, arrival, num_gpus, job_type=job_type_name(app.name, batch),
               work=app.steps_to_goal(batch, num_gpus), id=cells["name"])


def workload_cells(cells: dict[str, str], apps: Mapping[str, PolluxApplication],
                   max_gpus: int) -> tuple[float, PolluxApplication, int, int]:
    """The cells Pollux's and Sia's workloads share, checked: the arrival, the
    application (of ``apps``), the GPUs (1 to ``max_gpus``) and the batch (in the
    application's validated range); a :class:`BadRowError` names the cell."""
    if not cells["name"]:
        raise BadRowError("empty name", cells["name"], "a job name", "name")
    arrival = number(cells["time"], "time", low=0.0, high=MAX_TIME_S,
                     what=f"a time in s from 0 to {MAX_TIME_S:g}")
    app = apps.get(cells["application"])
    if app is None:
        raise BadRowError("unknown application", cells["application"],
                          "one of " + ", ".join(sorted(apps)), "application")
    num_gpus = integer(cells["num_replicas"], "num_replicas", low=1, high=max_gpus)
    low, high = app.convergence.base_batch, app.convergence.max_batch
    batch = integer(cells["batch_size"], "batch_size", low=1)
    if not low <= batch <= high:
        raise BadRowError("bad batch_size", cells["batch_size"],
                          f"a batch size from {low} to {high} ({app.name}'s validated range)",
                          "batch_size")
    return arrival, app, num_gpus, batch


def check_batch_fits(cells: dict[str, str], app: PolluxApplication, batch: int,
                     num_gpus: int) -> None:
    """A :class:`BadRowError` if ``batch`` on ``num_gpus`` GPUs leaves fewer samples per
    GPU than the application measured."""
    if app.batch_plan(batch, num_gpus).atomic_bsz < app.min_local_bsz:
        raise BadRowError("batch too small for its GPUs", cells["batch_size"],
                          f"at least {app.min_local_bsz} samples per GPU ({app.name}) on "
                          f"{num_gpus} GPUs", "batch_size")
