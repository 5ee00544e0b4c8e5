"""Statistical efficiency: how much of a step's work a larger batch wastes, from the
gradient noise scale measured while training (Pollux's ``validation-<B>.csv``).

Pollux (Qiao et al., OSDI'21, section 3.1; adaptdl's ``simulator/goodput.py``,
``GoodputFunction.efficiency``, and ``simulator/simulator.py``, ``Job.step``) measures, over
each epoch of training at a total batch size ``B``, the squared norm of the gradient
(``grad_sqr``, |g|^2) and its variance (``grad_var``, tr Sigma). With the job's base
batch ``B0`` (the smallest batch size validated) and the scale ``s = B / B0``:

* the gradient noise scale (Pollux's "PGNS") is ``phi = B0 * grad_var / grad_sqr``
  (samples; infinite where ``grad_sqr`` is 0);
* the **efficiency** of ``B`` relative to ``B0`` is ``E(B) = (phi + B0) / (phi + B)``, in
  (0, 1], 1 at ``B0``: the fraction of a sample's worth a sample at ``B`` still has;
* the **gain** of one step at ``B`` is ``s * E(B) = (grad_var + grad_sqr) / (grad_var / s
  + grad_sqr)`` base-batch steps (1 when both statistics are 0, as Pollux sets it).

Progress is counted as Pollux counts it: in **base-batch steps** (samples weighted by
efficiency, divided by ``B0``; a row's ``progress``). A job completes when its progress
reaches the goal of its completion epoch, ``P(epochs)``, where ``P(e)`` is the smallest
progress any validated batch size had reached at the end of epoch ``e`` (Pollux's
``get_progress``). During epoch ``e`` a step at ``B`` gains ``s * E(B)`` with the
statistics of that epoch, linearly interpolated between the two validated batch sizes
around ``B`` (Pollux's ``get_grad_stats``). So the **steps to the goal** at a fixed
``B``, which make a larger batch that needs more samples look no faster than it is, are::

    steps(B) = sum over e < epochs of (P(e + 1) - P(e)) / gain_e(B)

This module is this project's own code after those formulas.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from hetsched.core.errors import InputError
from hetsched.speeds.measured_csv import cell_number, csv_rows

#: The columns of a validation file.
VALIDATION_COLUMNS = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
_VALIDATION_NAME = re.compile(r"^validation-([0-9]+)\.csv$")


def noise_scale(grad_sqr: float, grad_var: float, base_batch: float) -> float:
    """The gradient noise scale ``B0 * grad_var / grad_sqr`` (samples): ``inf`` when
    ``grad_sqr`` is 0 and ``grad_var`` is not, 0 when ``grad_var`` is 0."""
    if grad_var == 0:
        return 0.0
    return math.inf if grad_sqr == 0 else base_batch * grad_var / grad_sqr


def gain(batch_size: float, base_batch: float, grad_sqr: float, grad_var: float) -> float:
    """Base-batch steps one step at ``batch_size`` is worth: ``(grad_var + grad_sqr) /
    (grad_var / s + grad_sqr)``, ``s = batch_size / base_batch`` (1 if both are 0)."""
    scale = batch_size / base_batch
    denominator = grad_var / scale + grad_sqr
    return (grad_var + grad_sqr) / denominator if denominator > 0 else 1.0


def efficiency(batch_size: float, base_batch: float, grad_sqr: float,
               grad_var: float) -> float:
    """The statistical efficiency of ``batch_size`` relative to ``base_batch``:
    ``(phi + B0) / (phi + B)`` with ``phi`` the gradient noise scale (module notes),
    ``gain / s``; 1 at the base batch."""
    return gain(batch_size, base_batch, grad_sqr, grad_var) * base_batch / batch_size


@dataclass(frozen=True)
class EpochRecord:
    """One row of ``validation-<B>.csv``: the state at the end of one epoch of training
    at ``B``. ``progress`` in base-batch steps done by then, ``iteration`` the steps at
    ``B`` done by then, ``metric`` the validation metric, ``grad_sqr`` and ``grad_var``
    the gradient statistics measured over the epoch (>= 0)."""

    progress: float
    iteration: int
    metric: float
    grad_sqr: float
    grad_var: float

    def __post_init__(self) -> None:
        for name in ("progress", "metric", "grad_sqr", "grad_var"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value):
                raise InputError(f"bad {name}", path=name, value=value,
                                 expected="a finite number")
        if not self.progress > 0:
            raise InputError("bad progress", path="progress", value=self.progress,
                             expected="base-batch steps > 0")
        if isinstance(self.iteration, bool) or not isinstance(self.iteration, int) or \
                self.iteration < 0:
            raise InputError("bad iteration", path="iteration", value=self.iteration,
                             expected="an integer >= 0")
        for name in ("grad_sqr", "grad_var"):
            if getattr(self, name) < 0:
                raise InputError(f"bad {name}", path=name, value=getattr(self, name),
                                 expected="a number >= 0")


@dataclass(frozen=True)
class ValidationRun:
    """Training at one total batch size ``batch_size`` (samples), epoch by epoch: progress
    strictly increasing, iterations never decreasing."""

    batch_size: int
    epochs: tuple[EpochRecord, ...]

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or \
                self.batch_size < 1:
            raise InputError("bad batch size", path="batch_size", value=self.batch_size,
                             expected="an integer >= 1 (samples)")
        if not self.epochs:
            raise InputError("no epochs", path="epochs", value=[], expected="one row or more")
        for index in range(1, len(self.epochs)):
            before, now = self.epochs[index - 1], self.epochs[index]
            if now.progress <= before.progress:
                raise InputError("progress does not increase", path=f"epochs[{index}].progress",
                                 value=now.progress,
                                 expected=f"more than the epoch before's {before.progress!r}")
            if now.iteration < before.iteration:
                raise InputError("iteration decreases", path=f"epochs[{index}].iteration",
                                 value=now.iteration,
                                 expected=f"at least the epoch before's {before.iteration}")


@dataclass(frozen=True)
class Convergence:
    """One application's validation runs at several batch sizes (sorted, distinct) and
    its completion: ``epochs`` epochs (Pollux's ``max_epochs``; at most the shortest
    run). The base batch is the smallest batch size validated; batch sizes from it to
    the largest are answered, interpolated (module notes)."""

    name: str
    runs: tuple[ValidationRun, ...]
    epochs: int

    def __post_init__(self) -> None:
        if not self.name:
            raise InputError("empty application name", path="name", value=self.name)
        if not self.runs:
            raise InputError("no validation runs", path="runs", value=[],
                             expected="one validation-<B>.csv or more")
        sizes = [run.batch_size for run in self.runs]
        if sizes != sorted(set(sizes)):
            raise InputError("batch sizes not sorted and distinct", path="runs", value=sizes,
                             expected="increasing batch sizes")
        shortest = min(len(run.epochs) for run in self.runs)
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or \
                not 1 <= self.epochs <= shortest:
            raise InputError("bad completion epoch", path="epochs", value=self.epochs,
                             expected=f"an integer from 1 to {shortest} (the shortest run's "
                             "epochs)")

    @property
    def base_batch(self) -> int:
        """The base batch ``B0`` (samples): the smallest batch size validated."""
        return self.runs[0].batch_size

    @property
    def max_batch(self) -> int:
        """The largest batch size validated (samples)."""
        return self.runs[-1].batch_size

    @cached_property
    def _goals(self) -> tuple[float, ...]:
        return (0.0, *(min(run.epochs[epoch].progress for run in self.runs)
                       for epoch in range(self.epochs)))

    def goal_progress(self, epoch: int) -> float:
        """``P(epoch)``: base-batch steps to finish ``epoch`` epochs (0 at 0): the least any
        validated batch size had made by then."""
        return self._goals[epoch]

    def gradient(self, batch_size: float, epoch: int) -> tuple[float, float]:
        """``(grad_sqr, grad_var)`` during ``epoch`` at ``batch_size``, linear between
        the validated batch sizes around it."""
        if not self.base_batch <= batch_size <= self.max_batch:
            raise InputError("batch size outside the validated range", path="batch_size",
                             value=batch_size, expected=f"{self.base_batch} to "
                             f"{self.max_batch} samples ({self.name})")
        upper = next(run for run in self.runs if run.batch_size >= batch_size)
        lower = next(run for run in reversed(self.runs) if run.batch_size <= batch_size)
        low, high = lower.epochs[epoch], upper.epochs[epoch]
        if upper is lower:
            return low.grad_sqr, low.grad_var
        weight = (batch_size - lower.batch_size) / (upper.batch_size - lower.batch_size)
        return (low.grad_sqr + weight * (high.grad_sqr - low.grad_sqr),
                low.grad_var + weight * (high.grad_var - low.grad_var))

    def gain(self, batch_size: float, epoch: int) -> float:
        """Base-batch steps one step at ``batch_size`` makes during ``epoch``."""
        return gain(batch_size, self.base_batch, *self.gradient(batch_size, epoch))

    def efficiency(self, batch_size: float, epoch: int) -> float:
        """The statistical efficiency of ``batch_size`` during ``epoch`` (module notes)."""
        return efficiency(batch_size, self.base_batch, *self.gradient(batch_size, epoch))

    def noise_scale(self, epoch: int) -> float:
        """The gradient noise scale (samples) during ``epoch``, from the base batch's
        statistics."""
        return noise_scale(*self.gradient(self.base_batch, epoch), self.base_batch)

    def steps_to_goal(self, batch_size: float) -> float:
        """Steps at ``batch_size`` to complete the job: the sum over its epochs of the
        epoch's base-batch steps divided by the gain of one step (module notes)."""
        return math.fsum((self.goal_progress(epoch + 1) - self.goal_progress(epoch))
                         / self.gain(batch_size, epoch) for epoch in range(self.epochs))


def read_validation(path: str | Path) -> ValidationRun:
    """Read ``validation-<B>.csv`` (columns ``progress, iteration, metric, grad_sqr,
    grad_var``; ``B`` from the file's name); an InputError names the file, the line, the
    column, the value and what was expected."""
    path = Path(path)
    file = str(path)
    match = _VALIDATION_NAME.match(path.name)
    if match is None or int(match.group(1)) < 1:
        raise InputError("not a validation file name", file=file, path="name", value=path.name,
                         expected="validation-<B>.csv, B the total batch size (>= 1)")
    records: list[EpochRecord] = []
    lines: list[int] = []
    for line, cells in csv_rows(path, VALIDATION_COLUMNS):
        where = (file, line)
        records.append(EpochRecord(
            progress=cell_number(cells, "progress", where, low=0.0, strict=True,
                                 expected="base-batch steps > 0"),
            iteration=int(cell_number(cells, "iteration", where, low=0.0, integer=True,
                                      expected="an integer >= 0 (steps)")),
            metric=cell_number(cells, "metric", where),
            grad_sqr=cell_number(cells, "grad_sqr", where, low=0.0,
                                 expected="a number >= 0"),
            grad_var=cell_number(cells, "grad_var", where, low=0.0,
                                 expected="a number >= 0")))
        lines.append(line)
    try:
        return ValidationRun(int(match.group(1)), tuple(records))
    except InputError as exc:
        epoch = re.match(r"^epochs\[([0-9]+)\]\.(.*)$", exc.path)
        if epoch is not None:  # name the line of the row
            line = lines[int(epoch.group(1))]
            raise InputError(exc.problem, file=file, path=f"line {line}.{epoch.group(2)}",
                             value=exc.value, expected=exc.expected) from None
        raise exc.in_file(file) from None


def read_convergence(folder: str | Path, epochs: int | None = None) -> Convergence:
    """The validation runs of one application in ``folder`` (every ``validation-*.csv``),
    named after the folder, completing after ``epochs`` epochs (default: the shortest
    run's, Pollux's default ``max_epochs``)."""
    folder = Path(folder)
    paths = sorted(folder.glob("validation-*.csv"))
    if not paths:
        raise InputError("no validation files", file=str(folder),
                         expected="validation-<B>.csv files (Pollux's traces/<model>/)")
    runs = sorted((read_validation(path) for path in paths), key=lambda run: run.batch_size)
    try:
        return Convergence(folder.name, tuple(runs),
                           epochs if epochs is not None else min(len(r.epochs) for r in runs))
    except InputError as exc:
        raise exc.in_file(str(folder)) from None
