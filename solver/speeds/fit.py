"""Fitting the throughput model to a measured profile (:func:`fit_throughput_model`) and
choosing the measured or fitted model (:func:`throughput_model`)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.speeds.model import (
    Array,
    BlockFit,
    FitDiagnostics,
    FitSettings,
    FittedThroughputModel,
    Mode,
    Pooling,
    SeriesFit,
    SeriesKey,
)
from hetsched.speeds.profiles import Profile

log = logging.getLogger(__name__)


# --- fitting ---------------------------------------------------------------------------


@dataclass
class _Index:
    """The profile's positive and zero measurements, arranged for fitting."""

    one_gpu: dict[tuple[str, str], float]  # (job, gpu) -> steps/s on 1 GPU (geometric mean)
    multi: dict[SeriesKey, dict[int, float]]  # (job, gpu, placement) -> {n > 1: steps/s}
    zeros: dict[SeriesKey, set[int]]  # counts measured 0 steps/s

    @classmethod
    def of(cls, profile: Profile) -> _Index:
        singles: dict[tuple[str, str], list[float]] = {}
        multi: dict[SeriesKey, dict[int, float]] = {}
        zeros: dict[SeriesKey, set[int]] = {}
        for point in profile.points:
            job, gpu, n, placement = point.key
            if point.throughput > 0:
                if n == 1:
                    singles.setdefault((job, gpu), []).append(point.throughput)
                else:
                    multi.setdefault((job, gpu, placement), {})[n] = point.throughput
            elif n == 1:
                for other in Placement:
                    zeros.setdefault((job, gpu, other), set()).add(1)
            else:
                zeros.setdefault((job, gpu, placement), set()).add(n)
        one_gpu = {key: float(np.exp(np.mean(np.log(values))))
                   for key, values in singles.items()}
        return cls(one_gpu, multi, zeros)


@dataclass
class _Block:
    """The result of one NNLS fit: intercepts per job, overhead per placement."""

    intercept: dict[str, float]
    overhead: dict[Placement, tuple[Array, Array]]  # beta, gamma per feature
    scale: dict[str, float]  # s_j, seconds per step
    corrections: dict[Placement, dict[int, float]]  # family median at counts > 1
    shape_counts: dict[Placement, tuple[int, ...]]
    diagnostics: BlockFit
    one_gpu: dict[str, float] = field(default_factory=dict)  # job's own factor at 1 GPU

    def series_corrections(self, job: str, placement: Placement) -> tuple[tuple[int, float], ...]:
        """``(count, factor)`` of one series: its own at 1 GPU, the family's above."""
        own = ((1, self.one_gpu[job]),) if job in self.one_gpu else ()
        return own + tuple(self.corrections.get(placement, {}).items())

    def coefficients(self, job: str, placement: Placement, width: int) -> tuple[float, ...]:
        """``c[0..K]`` of one series of this block."""
        if placement not in self.overhead:
            return (self.intercept[job],) + (0.0,) * (width - 1)
        beta, gamma = self.overhead[placement]
        return (self.intercept[job], *(beta + gamma * self.scale[job]).tolist())


def _fit_block(group: str, gpu: str, jobs: Sequence[str], placements: Sequence[Placement],
               index: _Index, settings: FitSettings) -> _Block:
    """One NNLS over the step times of ``jobs`` on ``gpu`` (module docstring)."""
    width = len(settings.features)
    observed: list[tuple[str, Placement | None, int, float]] = []
    for job in jobs:
        if (job, gpu) in index.one_gpu:
            observed.append((job, None, 1, index.one_gpu[(job, gpu)]))
        for placement in placements:
            for n, speed in sorted(index.multi.get((job, gpu, placement), {}).items()):
                observed.append((job, placement, n, speed))
    # s_j: the step time at the job's smallest measured count (its 1-GPU step time).
    scale: dict[str, float] = {}
    for job, _, n, speed in sorted(observed, key=lambda row: (row[0], row[2])):
        scale.setdefault(job, n / speed)
    active = [p for p in placements if any(row[1] is p for row in observed)]
    per_placement = width * (2 if settings.scale_with_step_time else 1)
    job_column = {job: i for i, job in enumerate(jobs)}
    columns = len(jobs) + per_placement * len(active)
    design = np.zeros((len(observed), columns))
    target = np.empty(len(observed))
    counts = np.array([row[2] for row in observed], dtype=np.float64)
    phi = settings.feature_matrix(counts)
    for r, (job, row_placement, n, speed) in enumerate(observed):
        design[r, job_column[job]] = 1.0
        if row_placement is not None:
            start = len(jobs) + per_placement * active.index(row_placement)
            design[r, start:start + width] = phi[r]
            if settings.scale_with_step_time:
                design[r, start + width:start + 2 * width] = phi[r] * scale[job]
        target[r] = n / speed
    weight = 1.0 / target if settings.relative_weights else np.ones_like(target)
    # (imported here: scipy.optimize takes half a second to import, and a measured table,
    # what the Slurm emulator of every job reads, needs no fit)
    from scipy.optimize import nnls

    solution, _ = nnls(design * weight[:, None], target * weight)
    residual = (design @ solution - target) * weight
    intercept = {job: float(solution[job_column[job]]) for job in jobs}
    overhead: dict[Placement, tuple[Array, Array]] = {}
    for k, placement in enumerate(active):
        start = len(jobs) + per_placement * k
        beta = solution[start:start + width]
        gamma = solution[start + width:start + 2 * width] if settings.scale_with_step_time \
            else np.zeros(width)
        overhead[placement] = (beta, gamma)
    block = _Block(intercept, overhead, scale, {}, {}, BlockFit(
        group, gpu, tuple(jobs), len(observed),
        float(np.sqrt(np.mean(residual ** 2))) if len(residual) else 0.0,
        {p.value: (*overhead[p][0].tolist(), *overhead[p][1].tolist()) for p in active}))
    if settings.count_corrections:
        for job, row_placement, _, speed in observed:
            if row_placement is None and intercept[job] > 0:
                block.one_gpu[job] = speed * intercept[job]
    for placement in active:
        rows = [row for row in observed if row[1] is placement]
        block.shape_counts[placement] = tuple(sorted({1, *(row[2] for row in rows)}))
        if not settings.count_corrections:
            continue
        ratios: dict[int, list[float]] = {}
        for r, (job, row_placement, n, speed) in enumerate(observed):
            if row_placement is not placement:
                continue
            coefficients = block.coefficients(job, placement, width + 1)
            step = coefficients[0] + float(np.dot(coefficients[1:], phi[r]))
            if step > 0:
                ratios.setdefault(n, []).append(math.log(speed * step / n))
        block.corrections[placement] = {
            n: float(np.exp(np.median(values))) for n, values in sorted(ratios.items())}
    return block


def _zero_rule(own_counts: Sequence[int], zeros: set[int]) -> tuple[tuple[int, ...], int | None]:
    """Counts measured 0 below the largest positive count stay 0 alone; the first zero
    above it makes every larger count 0 too."""
    top = max(own_counts, default=0)
    below = tuple(sorted(z for z in zeros if z < top))
    above = [z for z in zeros if z > top]
    return below, (min(above) if above else None)


def _in_sample_errors(model: FittedThroughputModel, profile: Profile) -> list[float]:
    """Absolute percentage errors (%) of the model on every positive measurement."""
    errors = []
    counts = sorted({p.num_gpus for p in profile.points if p.num_gpus <= model.settings.max_gpus})
    column = {count: k for k, count in enumerate(counts)}
    row = {job: i for i, job in enumerate(model.job_types)}
    col = {gpu: j for j, gpu in enumerate(model.gpu_types)}
    for placement in Placement:
        speeds = model.matrix(model.job_types, model.gpu_types, counts, placement)
        for point in profile.points:
            if point.placement is placement and point.throughput > 0:
                predicted = speeds[row[point.job_type], col[point.gpu_type],
                                   column[point.num_gpus]] if point.num_gpus in column else 0.0
                errors.append(100.0 * abs(predicted - point.throughput) / point.throughput)
    return errors


def check_counts(profile: Profile, settings: FitSettings) -> None:
    """Raise an InputError naming the row of a measurement at more GPUs than the fitted
    model answers (``settings.max_gpus``): it would be fitted on, then never asked for."""
    for index, point in enumerate(profile.points):
        if point.num_gpus > settings.max_gpus:
            raise InputError("GPU count beyond what the fitted model answers",
                             file=profile.source or None,
                             path=f"{profile.where(index)}.num_gpus", value=point.num_gpus,
                             expected=f"an integer from 1 to {settings.max_gpus} "
                             "(the fitted model's max_gpus)")


def fit_throughput_model(profile: Profile,
                         settings: FitSettings | None = None) -> FittedThroughputModel:
    """Fit the throughput model of the module docstring to ``profile``."""
    settings = settings or FitSettings()
    started = time.perf_counter()
    check_counts(profile, settings)
    index = _Index.of(profile)
    families = dict(profile.family)
    blocks: dict[tuple[str, str, Placement], _Block] = {}  # (family or job, GPU, placement)
    for gpu in profile.gpu_types:
        if settings.pooling is Pooling.FAMILY:
            members: dict[str, list[str]] = {}
            for job in profile.job_types:
                if (job, gpu) in index.one_gpu or any(
                        (job, gpu, p) in index.multi for p in Placement):
                    members.setdefault(families[job], []).append(job)
            for family, jobs in members.items():
                family_block = _fit_block(family, gpu, jobs, tuple(Placement), index, settings)
                for placement in Placement:
                    blocks[(family, gpu, placement)] = family_block
        else:
            for job in profile.job_types:
                for placement in Placement:
                    if (job, gpu) in index.one_gpu or (job, gpu, placement) in index.multi:
                        blocks[(job, gpu, placement)] = _fit_block(
                            job, gpu, [job], (placement,), index, settings)
    width = 1 + len(settings.features)
    series: dict[SeriesKey, SeriesFit] = {}
    for job in profile.job_types:
        group = families[job] if settings.pooling is Pooling.FAMILY else job
        for gpu in profile.gpu_types:
            for placement in Placement:
                key = (job, gpu, placement)
                block = blocks.get((group, gpu, placement))
                if block is None or job not in block.intercept:
                    continue  # the model fills in "no measurement"
                own = sorted(index.multi.get(key, {}))
                measured = ([1] if (job, gpu) in index.one_gpu else []) + own
                own_zeros = set(index.zeros.get(key, set()))
                sibling = Placement.SPREAD if placement is Placement.PACKED \
                    else Placement.PACKED
                # Without a multi-GPU measurement of its own, a series does not claim
                # counts at which its other placement measured 0 (e.g. out of memory).
                inherited = set() if own else \
                    {z for z in index.zeros.get((job, gpu, sibling), set()) if z > 1}
                below, above = _zero_rule(measured, own_zeros | inherited)
                zero_counts = [*below, *([above] if above is not None else [])]
                if placement not in block.overhead:
                    above = 2 if above is None else min(above, 2)
                    what = f"family {group!r}" if settings.pooling is Pooling.FAMILY else job
                    note = f"no measurement of {what} on more than 1 {gpu} ({placement.value})"
                elif zero_counts and min(zero_counts) in own_zeros:
                    note = f"measured 0 steps/s at {min(zero_counts)} GPUs"
                elif zero_counts:
                    note = (f"no {placement.value} measurement > 1 GPU of its own; "
                            f"{sibling.value} measured 0 steps/s at {min(zero_counts)} GPUs")
                elif not own:
                    note = (f"no {placement.value} measurement > 1 GPU of its own; overhead "
                            f"from family {group!r}")
                else:
                    note = ""
                series[key] = SeriesFit(
                    job, gpu, placement, block.coefficients(job, placement, width),
                    block.series_corrections(job, placement), tuple(measured),
                    block.shape_counts.get(placement, (1,)), below, above, note)
    unique_blocks = {id(b): b for b in blocks.values()}
    model = FittedThroughputModel(
        settings, series, families, profile.gpu_types, tuple(profile.rows()), None,
        {"file": profile.source, "sha256": profile.sha256, "kind": profile.kind})
    errors = _in_sample_errors(model, profile)
    elapsed = time.perf_counter() - started
    diagnostics = FitDiagnostics(
        len(errors), float(np.median(errors)) if errors else 0.0,
        float(np.percentile(errors, 90)) if errors else 0.0,
        float(max(errors, default=0.0)), elapsed,
        tuple(sorted((b.diagnostics for b in unique_blocks.values()),
                     key=lambda d: (d.group, d.gpu_type))))
    log.info("fitted %d series of %d job types on %s in %.3f s (in-sample median APE %.2f%%)",
             len(series), len(profile.job_types), ", ".join(profile.gpu_types), elapsed,
             diagnostics.median_ape)
    return replace(model, diagnostics=diagnostics)


def throughput_model(source: Profile | FittedThroughputModel, mode: Mode | str = Mode.FITTED,
                     settings: FitSettings | None = None) -> ThroughputTable | \
        FittedThroughputModel:
    """The one way to get throughput coefficients: ``measured`` (the table, ground
    truth for a simulator) or ``fitted`` (the model, for policies)."""
    try:
        mode = Mode(mode)
    except ValueError:
        raise InputError("bad throughput mode", path="mode", value=mode,
                         expected="measured or fitted") from None
    if mode is Mode.MEASURED:
        return source.table()
    if isinstance(source, FittedThroughputModel):
        return source
    return fit_throughput_model(source, settings)


