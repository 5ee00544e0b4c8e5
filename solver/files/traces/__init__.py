"""Reading job traces: Gavel, Philly, Helios, Alibaba openb, Pollux's and Sia's workloads
and hetsched's own CSV.

One entry point, :func:`read_trace`, returns one job table, :class:`Trace`, whatever
the format; docs/traces.md gives every format's field mapping and the shared rules
(GPU counts the throughput model cannot run, drawn job types, derived work, deadlines,
bad rows).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.core.throughput import ThroughputModel
from hetsched.files.traces.base import ON_BAD_ROW, Options, Trace
from hetsched.files.traces.continuous import read_continuous
from hetsched.files.traces.gavel import read_gavel
from hetsched.files.traces.helios import read_helios
from hetsched.files.traces.native import read_native, write_native
from hetsched.files.traces.openb import openb_cluster, read_openb
from hetsched.files.traces.philly import read_philly
from hetsched.files.traces.pollux import read_pollux_workload
from hetsched.files.traces.sia import read_sia_workload

__all__ = ["FORMATS", "Trace", "openb_cluster", "read_trace", "write_native"]

#: The readers, by format name.
FORMATS: dict[str, Callable[[Path, Options], Trace]] = {
    "gavel": read_gavel,
    "philly": read_philly,
    "helios": read_helios,
    "openb": read_openb,
    "native": read_native,
    "continuous": read_continuous,
    "pollux": read_pollux_workload,
    "sia": read_sia_workload,
}
#: The formats whose jobs may be elastic (``read_trace(elastic=True)``): they name batch
#: sizes and measured step times.
ELASTIC_FORMATS = ("pollux", "sia")


def read_trace(path: str | Path, format: str, *, throughput: ThroughputModel | None = None,
               gpu_types: Sequence[str] = (), reference_gpu: str | None = None, seed: int = 0,
               on_bad_row: str = "fatal", limit_jobs: int | None = None,
               deadline_fraction: float | None = None,
               deadline_slack: tuple[float, float] = (1.2, 3.0),
               gpu_sharing: bool = True, elastic: bool = False) -> Trace:
    """Read the trace in ``path`` written in ``format`` (one of :data:`FORMATS`).

    ``throughput`` (steps/s) checks that each job can run at its GPU count (else the
    count is capped at the largest one that can), draws job types for traces without
    any (philly, helios, openb; uniformly among the model's job types with
    throughput > 0 on ``reference_gpu`` at the job's count, with ``seed``), converts
    durations (s) into work (steps) on ``reference_gpu`` (default: ``v100`` if the model
    knows it, else the first of ``gpu_types`` it knows; ``Trace.reference_gpu`` says
    which), and turns SLOs and ``deadline_fraction`` into deadlines on the fastest of
    ``gpu_types`` (default: the model's GPU types). Without it, traces that need one use
    the built-in catalogue (hetsched.files.generate). ``deadline_fraction`` of the jobs
    without a deadline of their own get ``arrival + U(deadline_slack) x isolated
    duration``. A bad row raises
    :class:`~hetsched.core.errors.InputError` naming the file and line; with
    ``on_bad_row="skip"`` it is counted in ``Trace.skipped_rows`` instead, unless more
    than :data:`~hetsched.files.traces.base.MAX_SKIPPED_FRACTION` of the rows not excluded on
    purpose (or all of them) are bad, which raises. ``limit_jobs`` keeps the earliest
    arrivals. ``gpu_sharing``: a job may ask for a share of one GPU (openb's
    ``gpu_milli``); off, every share is rounded up to a whole GPU (noted). The same
    arguments give the same Trace. ``elastic``: every job is elastic (the scheduler
    chooses its GPU count among ``Job.allowed_gpu_counts``, the job its batch size), for
    the formats with batch sizes (:data:`ELASTIC_FORMATS`).
    """
    if format not in FORMATS:
        raise InputError("unknown trace format", path="format", value=format,
                         expected="one of " + ", ".join(FORMATS))
    if on_bad_row not in ON_BAD_ROW:
        raise InputError("bad on_bad_row", path="on_bad_row", value=on_bad_row,
                         expected=" or ".join(ON_BAD_ROW))
    if limit_jobs is not None and (isinstance(limit_jobs, bool) or not isinstance(
            limit_jobs, int) or limit_jobs < 1):
        raise InputError("bad limit_jobs", path="limit_jobs", value=limit_jobs,
                         expected="an integer >= 1, or None")
    if deadline_fraction is not None and not (
            isinstance(deadline_fraction, int | float) and 0 <= deadline_fraction <= 1):
        raise InputError("bad deadline_fraction", path="deadline_fraction",
                         value=deadline_fraction, expected="a fraction from 0 to 1, or None")
    low, high = deadline_slack
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
        raise InputError("bad deadline_slack", path="deadline_slack", value=deadline_slack,
                         expected="(low, high) with 0 < low <= high (multiples of the "
                         "isolated duration)")
    if elastic and format not in ELASTIC_FORMATS:
        raise InputError("elastic jobs need a format with batch sizes", path="elastic",
                         value=format, expected="one of " + ", ".join(ELASTIC_FORMATS)
                         + " (or no --elastic)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError("bad seed", path="seed", value=seed, expected="an integer >= 0")
    options = Options(throughput, tuple(gpu_types), reference_gpu, seed, on_bad_row, limit_jobs,
                      deadline_fraction, (float(low), float(high)), bool(gpu_sharing),
                      bool(elastic))
    return FORMATS[format](Path(path), options)
