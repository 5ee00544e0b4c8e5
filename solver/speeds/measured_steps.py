"""Step times measured per placement and per-GPU batch size (Pollux's ``placements.csv``
and ``scalability.csv``), answered for any placement and batch in range by interpolation,
as Pollux's simulator answers them (adaptdl's ``simulator/applications.py``,
``Application.get_throughput``; this project's own code after it):

* a placement is the GPUs used on each node (``(2, 2)``: two nodes, two GPUs each); it
  is read as the smallest of its rotations (``(4, 2)`` as ``(2, 4)``: Pollux's files name
  each placement once, by that rotation);
* a placement measured in ``placements.csv``: linear in the per-GPU batch between its
  measured batches;
* any other (more nodes than ``placements.csv`` has): piecewise linear in (nodes, GPUs,
  per-GPU batch) over the Delaunay triangulation of the placements' means per (nodes,
  GPUs, per-GPU batch) followed by the rows of ``scalability.csv`` (scipy's
  ``LinearNDInterpolator``, the points in that order), nodes capped at the most measured.

Outside the measured ranges there is no answer (an :class:`InputError`). Times in
seconds per step (one forward and backward pass of every GPU's local batch and the
gradient synchronisation), ``sync_time`` the part spent synchronising.

This is the interpolation of measured points that Pollux's simulator takes as the truth;
it does not extrapolate (``hetsched.speeds.steps``, the fitted step model, is meant to).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hetsched.core.errors import InputError
from hetsched.speeds.measured_csv import cell_number, csv_rows

PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")


def canonical_placement(placement: Sequence[int]) -> tuple[int, ...]:
    """The placement without empty nodes, as the smallest of its rotations."""
    used = tuple(int(gpus) for gpus in placement if gpus)
    return min((used[i:] + used[:i] for i in range(len(used))), default=())


def _check_times(step_time: float, sync_time: float) -> None:
    if isinstance(step_time, bool) or not isinstance(step_time, int | float) or \
            not (math.isfinite(step_time) and step_time > 0):
        raise InputError("bad step_time", path="step_time", value=step_time,
                         expected="seconds > 0")
    if isinstance(sync_time, bool) or not isinstance(sync_time, int | float) or \
            not (math.isfinite(sync_time) and 0 <= sync_time <= step_time):
        raise InputError("bad sync_time", path="sync_time", value=sync_time,
                         expected=f"seconds from 0 to the step time {step_time!r}")


def _check_count(value: Any, name: str, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"bad {name}", path=name, value=value,
                         expected=f"an integer >= {low}")


@dataclass(frozen=True)
class StepMeasurement:
    """One row of ``placements.csv``: ``step_time`` s per step (``sync_time`` of it
    synchronising) on ``placement`` (GPUs per node) at ``local_bsz`` samples per GPU."""

    placement: tuple[int, ...]
    local_bsz: int
    step_time: float
    sync_time: float

    def __post_init__(self) -> None:
        if not self.placement or any(isinstance(g, bool) or not isinstance(g, int) or g < 1
                                     for g in self.placement):
            raise InputError("bad placement", path="placement", value=self.placement,
                             expected="GPUs on each node used, each >= 1")
        _check_count(self.local_bsz, "local_bsz")
        _check_times(self.step_time, self.sync_time)


@dataclass(frozen=True)
class ScaleMeasurement:
    """One row of ``scalability.csv``: ``num_replicas`` GPUs over ``num_nodes`` nodes."""

    num_nodes: int
    num_replicas: int
    local_bsz: int
    step_time: float
    sync_time: float

    def __post_init__(self) -> None:
        _check_count(self.num_nodes, "num_nodes")
        _check_count(self.num_replicas, "num_replicas", self.num_nodes)
        _check_count(self.local_bsz, "local_bsz")
        _check_times(self.step_time, self.sync_time)


@dataclass(frozen=True, eq=False)
class MeasuredSteps:
    """One application's measured step times (module notes), with the interpolation of
    Pollux's simulator. ``step_time(placement, local_bsz)`` and ``sync_time(...)`` in s."""

    name: str
    placements: tuple[StepMeasurement, ...]
    scalability: tuple[ScaleMeasurement, ...] = ()
    _by_placement: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=dict, init=False, repr=False)
    _spread: list[Any] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.placements:
            raise InputError("no step times", path="placements", value=[],
                             expected="rows of placements.csv")
        rows: dict[tuple[int, ...], dict[int, tuple[float, float]]] = defaultdict(dict)
        for index, row in enumerate(self.placements):
            key = canonical_placement(row.placement)
            if row.local_bsz in rows[key]:
                raise InputError("placement and local_bsz measured twice",
                                 path=f"placements[{index}]",
                                 value=("".join(map(str, key)), row.local_bsz),
                                 expected="one row per placement and local_bsz")
            rows[key][row.local_bsz] = (row.step_time, row.sync_time)
        for key, measured in rows.items():
            batches = sorted(measured)
            self._by_placement[key] = (np.array(batches, dtype=float),
                                       np.array([measured[b][0] for b in batches]),
                                       np.array([measured[b][1] for b in batches]))

    def __reduce__(self) -> tuple[type[MeasuredSteps], tuple[Any, ...]]:
        """Pickled as its measurements (the interpolators are rebuilt)."""
        return type(self), (self.name, self.placements, self.scalability)

    @property
    def local_bsz_range(self) -> tuple[int, int]:
        """The smallest and largest per-GPU batch measured (samples)."""
        return (min(row.local_bsz for row in self.placements),
                max(row.local_bsz for row in self.placements))

    def times(self, placement: Sequence[int], local_bsz: float) -> tuple[float, float]:
        """``(step_time, sync_time)`` in s of ``placement`` (GPUs per node) at
        ``local_bsz`` samples per GPU; an InputError outside the measured ranges."""
        key = canonical_placement(placement)
        if not key:
            raise InputError("empty placement", path="placement", value=tuple(placement),
                             expected="GPUs on one node or more")
        measured = self._by_placement.get(key)
        if measured is not None:
            batches, steps, syncs = measured
            if not batches[0] <= local_bsz <= batches[-1]:
                raise self._outside(key, local_bsz, f"{batches[0]:g} to {batches[-1]:g}")
            return (float(np.interp(local_bsz, batches, steps)),
                    float(np.interp(local_bsz, batches, syncs)))
        interpolator, most_nodes = self._spread_interpolator()
        if interpolator is None:
            raise self._outside(key, local_bsz, "a placement measured (too few distinct "
                                "(nodes, GPUs, per-GPU batch) points to interpolate others)")
        point = [min(len(key), most_nodes), sum(key), float(local_bsz)]
        step, sync = (float(v) for v in interpolator([point])[0])
        if not (math.isfinite(step) and math.isfinite(sync)):
            raise self._outside(key, local_bsz, "inside the measured (nodes, GPUs, "
                                "per-GPU batch) points")
        return step, sync

    def step_time(self, placement: Sequence[int], local_bsz: float) -> float:
        """Seconds per step of ``placement`` at ``local_bsz`` samples per GPU."""
        return self.times(placement, local_bsz)[0]

    def sync_time(self, placement: Sequence[int], local_bsz: float) -> float:
        """Seconds of a step spent synchronising gradients."""
        return self.times(placement, local_bsz)[1]

    def _outside(self, key: tuple[int, ...], local_bsz: float, expected: str) -> InputError:
        return InputError("outside the measured step times", path=self.name,
                          value=("".join(map(str, key)), local_bsz), expected=expected)

    def _spread_interpolator(self) -> tuple[Any, int]:
        """The interpolator over the placements' means and the scalability rows, built
        once, and the most nodes measured."""
        if not self._spread:
            from scipy.interpolate import LinearNDInterpolator
            from scipy.spatial import QhullError

            sums: dict[tuple[int, int, int], list[float]] = {}
            for row in self.placements:
                key = (len(row.placement), sum(row.placement), row.local_bsz)
                acc = sums.setdefault(key, [0.0, 0.0, 0.0])
                acc[0] += row.step_time
                acc[1] += row.sync_time
                acc[2] += 1
            points = sorted(sums)
            values = [(sums[key][0] / sums[key][2], sums[key][1] / sums[key][2])
                      for key in points]
            points += [(row.num_nodes, row.num_replicas, row.local_bsz)
                       for row in self.scalability]
            values += [(row.step_time, row.sync_time) for row in self.scalability]
            try:
                interpolator = LinearNDInterpolator(np.array(points, dtype=float),
                                                    np.array(values, dtype=float))
            except (ValueError, QhullError):  # points on a plane (one node count...)
                interpolator = None
            self._spread.append((interpolator, max(p[0] for p in points)))
        return self._spread[0]  # type: ignore[no-any-return]


def placement_cell(cells: dict[str, str], where: tuple[str, int]) -> tuple[int, ...]:
    """The GPUs per node of a ``placement`` cell (``"22"``: 2 on each of two nodes); an
    InputError naming the file and line (``where``) of a bad one."""
    text = cells["placement"]
    if not text.isascii() or not text.isdigit() or "0" in text:
        file, line = where
        raise InputError("bad placement", file=file, path=f"line {line}.placement",
                         value=text, expected="one digit 1-9 per node used (\"22\": "
                         "2 GPUs on each of two nodes)")
    return tuple(int(digit) for digit in text)


def read_measured_steps(folder: str | Path, gpu_type: str = "") -> MeasuredSteps:
    """``placements.csv`` and ``scalability.csv`` (optional) of one application's folder
    (with ``gpu_type``: Sia's ``placements-<gpu_type>.csv`` and
    ``scalability-<gpu_type>.csv``, its measurements on that GPU type); an InputError
    names the file, the line, the column and the value of a bad cell."""
    folder = Path(folder)
    suffix = f"-{gpu_type}" if gpu_type else ""
    placements: list[StepMeasurement] = []
    path = first = folder / f"placements{suffix}.csv"
    for line, cells in csv_rows(path, PLACEMENT_COLUMNS):
        where = (str(path), line)
        placements.append(_record(where, StepMeasurement, placement_cell(cells, where),
                                  _integer(cells, "local_bsz", where), *_times(cells, where)))
    scalability: list[ScaleMeasurement] = []
    path = folder / f"scalability{suffix}.csv"
    if path.is_file():
        for line, cells in csv_rows(path, SCALABILITY_COLUMNS):
            where = (str(path), line)
            scalability.append(_record(
                where, ScaleMeasurement, _integer(cells, "num_nodes", where),
                _integer(cells, "num_replicas", where), _integer(cells, "local_bsz", where),
                *_times(cells, where)))
    try:
        return MeasuredSteps(folder.name, tuple(placements), tuple(scalability))
    except InputError as exc:
        raise exc.in_file(str(first)) from None


def _integer(cells: dict[str, str], column: str, where: tuple[str, int]) -> int:
    return int(cell_number(cells, column, where, low=1.0, integer=True,
                           expected="an integer >= 1"))


def _times(cells: dict[str, str], where: tuple[str, int]) -> tuple[float, float]:
    return (cell_number(cells, "step_time", where, low=0.0, strict=True,
                        expected="seconds > 0"),
            cell_number(cells, "sync_time", where, low=0.0, expected="seconds >= 0"))


def _record(where: tuple[str, int], build: Any, *fields: Any) -> Any:
    """``build(*fields)``, an InputError from the record naming the file and line."""
    try:
        return build(*fields)
    except InputError as exc:
        file, line = where
        raise InputError(exc.problem, file=file, path=f"line {line}.{exc.path}",
                         value=exc.value, expected=exc.expected) from None
