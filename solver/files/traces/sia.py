"""Sia's evaluation workloads (``sia-simulator/workloads/<trace>/workload-<k>.csv`` of its
artifact: ``philly``, ``saturn`` (Helios), ``newtrace``, ``scale/...``).

Columns ``name, time, application, num_replicas, batch_size`` as Pollux's workloads
(:mod:`hetsched.files.traces.pollux`), and an optional ``category``: ``rigid`` (the GPU
count and batch size the user asked for), ``scale-gpus`` (the batch size fixed, the GPU
count the scheduler's: Sia's strong scaling) or ``adaptive`` (both the scheduler's and the
job's: Sia's default for a row without a category). Each row is one job:

* ``id`` = ``name``, ``arrival`` = ``time``, ``num_gpus`` = ``num_replicas``, no tenant;
* rigid: ``job_type`` = ``"<application> (batch size <batch_size>)"``, ``work`` the steps
  to the goal at that batch on Sia's reference GPU type
  (:data:`hetsched.speeds.sia.REFERENCE_TYPE`; :class:`~hetsched.speeds.sia.SiaThroughput`
  scales the speed on the other types so that a job takes there its own steps);
* ``scale-gpus`` (with ``--elastic``): the rigid job type and work, its allowed GPU counts
  those of :data:`~hetsched.files.traces.pollux.ELASTIC_COUNTS` its batch spreads over;
* ``adaptive`` (with ``--elastic``): ``"<application> (elastic)"``, its goal in
  base-batch steps, the allowed counts of a Pollux elastic job.

Without ``--elastic`` every job is rigid (Sia's ``--disable_bsz_tuning`` with fixed GPU
counts). An application Sia has but hetsched does not read (``gpt_pmp``:
:data:`hetsched.speeds.sia.REFUSED`) is a bad row that says why.

The measurements are the read's throughput model when it is Sia's (a replay's: by default
Sia's ``traces/`` folder, the nearest in the workload's folder or its parents:
``SIA/workloads/saturn/workload-1.csv`` -> ``SIA/traces``), else read from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetsched.core.errors import InputError
from hetsched.files.traces.base import BadRowError, Options, Row, Trace, csv_rows
from hetsched.files.traces.pollux import (
    ELASTIC_COUNTS,
    check_batch_fits,
    elastic_counts,
    model_inside,
    workload_cells,
)
from hetsched.files.traces.rules import read_csv
from hetsched.speeds.pollux import elastic_job_type_name, job_type_name
from hetsched.speeds.sia import MAX_GPUS, REFUSED, SiaThroughput, read_sia

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
OPTIONAL = ("category",)
#: Sia's job categories (its workloads' optional ``category`` column).
CATEGORIES = ("rigid", "scale-gpus", "adaptive")


def measurements_folder(workload: Path) -> Path:
    """Sia's ``traces/`` folder for a workload file: the nearest ``traces/`` folder in the
    file's folder or one of its 3 parents (``SIA/workloads/saturn/workload-1.csv`` and
    ``SIA/workloads/scale/scale_32x/workload-1.csv`` -> ``SIA/traces``); if none,
    ``SIA/traces`` for a file in ``SIA/workloads/<trace>/``."""
    folders = [workload.parent, *workload.parent.parents][:4]
    for folder in folders:
        if (folder / "traces").is_dir():
            return folder / "traces"
    return workload.parent.parent.parent / "traces"


def sia_model(model: Any) -> SiaThroughput | None:
    """The :class:`SiaThroughput` inside a throughput model (a replay wraps it in views),
    or ``None``."""
    return model_inside(model, SiaThroughput)


def read_sia_workload(path: Path, options: Options) -> Trace:
    """Read a Sia workload CSV into a :class:`~hetsched.files.traces.base.Trace` (module
    notes)."""
    lines = list(csv_rows(path, COLUMNS, OPTIONAL))  # (a missing file or header first)
    model = sia_model(options.throughput)
    if model is None:
        folder = measurements_folder(path)
        if not folder.is_dir():
            raise InputError("no Sia measurements for this workload", file=str(path),
                             value=str(folder), expected="Sia's traces/ folder (SIA/traces "
                             "for SIA/workloads/<trace>/workload-<k>.csv)")
        model = read_sia(folder)
    apps = model.applications
    return read_csv(path, "sia", options, COLUMNS,
                    lambda line, cells: _row(line, cells, apps, elastic=options.elastic),
                    optional=OPTIONAL, lines=lines)


def _row(line: int, cells: dict[str, str], apps: Any, *, elastic: bool) -> Row:
    """The row of one job (module notes), checked against its application ``apps``."""
    if cells["application"] in REFUSED:
        raise BadRowError(f"application not supported: {REFUSED[cells['application']]}",
                          cells["application"], "one of " + ", ".join(sorted(apps)),
                          "application")
    arrival, app, num_gpus, batch = workload_cells(cells, apps, MAX_GPUS)
    category = cells.get("category", "").strip() or ("adaptive" if elastic else "rigid")
    if category not in CATEGORIES:
        raise BadRowError("unknown category", category, " or ".join(CATEGORIES), "category")
    if not elastic:
        category = "rigid"
    if category == "adaptive":
        return Row(line, arrival, num_gpus, job_type=elastic_job_type_name(app.name),
                   work=app.goal_base_steps, id=cells["name"],
                   allowed_gpu_counts=elastic_counts(app, num_gpus))
    check_batch_fits(cells, app, batch, num_gpus)
    work = app.steps_to_goal(batch, num_gpus)
    if category == "rigid":
        return Row(line, arrival, num_gpus, job_type=job_type_name(app.name, batch),
                   work=work, id=cells["name"])
    counts = {n for n in ELASTIC_COUNTS
              if app.batch_plan(batch, n).atomic_bsz >= app.min_local_bsz}
    return Row(line, arrival, num_gpus, job_type=job_type_name(app.name, batch), work=work,
               id=cells["name"], allowed_gpu_counts=tuple(sorted(counts | {num_gpus})))
