"""Leave-one-out accuracy of the fitted throughput model, its report and its plot."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement
from hetsched.speeds.fit import fit_throughput_model
from hetsched.speeds.model import Array, FitSettings, Pooling
from hetsched.speeds.profiles import PointKey, Profile, ProfilePoint

log = logging.getLogger(__name__)


# --- leave-one-out ---------------------------------------------------------------------


@dataclass(frozen=True)
class HeldOut:
    """One held-out measurement and its prediction by a model fitted without it."""

    job_type: str
    gpu_type: str
    num_gpus: int
    placement: Placement
    measured: float
    predicted: float
    flags: str

    @property
    def ape(self) -> float:
        """Absolute percentage error of the prediction, in %."""
        return 100.0 * abs(self.predicted - self.measured) / self.measured


@dataclass(frozen=True)
class LooReport:
    """Leave-one-out accuracy: every measured point with more than one GPU held out in
    turn, the model refitted without it (all of it: pooled shapes and corrections too)."""

    points: tuple[HeldOut, ...]
    settings: FitSettings
    runtime_s: float

    @property
    def apes(self) -> Array:
        """Absolute percentage errors (%), one per held-out point."""
        return np.array([p.ape for p in self.points], dtype=np.float64)

    @property
    def median_ape(self) -> float:
        """Median absolute percentage error (%); NaN without held-out points."""
        return float(np.median(self.apes)) if self.points else math.nan

    @property
    def p90_ape(self) -> float:
        """90th percentile (linear interpolation) of the absolute percentage error (%);
        NaN without held-out points."""
        return float(np.percentile(self.apes, 90)) if self.points else math.nan

    def worst(self, count: int = 10) -> list[HeldOut]:
        """The ``count`` points with the largest error, worst first."""
        return sorted(self.points, key=lambda p: (-p.ape, p.job_type, p.gpu_type,
                                                  p.num_gpus, p.placement))[:count]


def held_out_keys(profile: Profile) -> list[PointKey]:
    """The points a leave-one-out holds out: measured > 0 with more than one GPU."""
    return sorted(p.key for p in profile.points if p.num_gpus > 1 and p.throughput > 0)


#: ``progress(done, total)``: called after each held-out point.
LooProgress = Callable[[int, int], None]


def leave_one_out(profile: Profile, settings: FitSettings | None = None,
                  progress: LooProgress | None = None, *, local: bool = True) -> LooReport:
    """Hold out each point with more than one GPU, refit the model without it and
    predict it; a prediction of 0 (unsupported) counts as a 100% error.

    ``local`` (the default) refits only what the held-out point can change: a prediction
    of (job, GPU type, placement) comes from one series, fitted from the measurements of
    the job's group (its family, or the job alone with per-series pooling) on that GPU
    type and nothing else (:func:`hetsched.speeds.fit.fit_throughput_model`), so the model
    fitted on that group's points without the held-out one predicts it exactly as the
    whole profile refitted would, float for float (tests/files/test_throughput_model.py
    compares both on Gavel's table). Where the group leaves nothing of the job on that GPU
    type, the whole profile is refitted. Each refit then costs time in the group, not in
    the profile: a 5,000-row profile takes seconds, not an hour
    (benchmarks/fit_report.py). ``local=False`` refits the whole profile every time."""
    settings = settings or FitSettings()
    started = time.perf_counter()
    keys = held_out_keys(profile)
    groups: dict[tuple[str, str], list[ProfilePoint]] = {}
    for point in profile.points:
        groups.setdefault((_group(profile, settings, point.job_type), point.gpu_type),
                          []).append(point)
    points = []
    for done, key in enumerate(keys, start=1):
        job, gpu, count, placement = key
        measured = profile.by_key[key].throughput
        model = None
        if local:
            rest = [p for p in groups[(_group(profile, settings, job), gpu)] if p.key != key]
            if any(p.job_type == job for p in rest):
                model = fit_throughput_model(Profile(tuple(rest)), settings)
        if model is None:
            model = fit_throughput_model(profile.without(key), settings)
        try:
            prediction = model.predict(job, gpu, count, placement)
            predicted, flags = prediction.throughput, prediction.flags
        except InputError as exc:  # the point was all the model knew of its type
            predicted, flags = 0.0, f"unsupported ({exc.problem})"
        points.append(HeldOut(job, gpu, count, placement, measured, predicted, flags))
        if progress is not None:
            progress(done, len(keys))
        if done % max(1, len(keys) // 10) == 0:
            log.info("leave-one-out: %d of %d points (%.1f s)", done, len(keys),
                     time.perf_counter() - started)
    return LooReport(tuple(points), settings, time.perf_counter() - started)


def _group(profile: Profile, settings: FitSettings, job: str) -> str:
    """What shares one fit with ``job`` on a GPU type: its family, or itself."""
    return profile.family[job] if settings.pooling is Pooling.FAMILY else job


def report_lines(report: LooReport, worst: int = 10) -> list[str]:
    """The leave-one-out table: count, median and p90 APE lines, then the worst points."""
    lines = [
        f"leave-one-out: {len(report.points)} points with more than one GPU, each predicted "
        f"by a model fitted without it ({report.runtime_s:.2f} s)",
        f"held-out points: {len(report.points)}",
    ]
    if not report.points:
        return [*lines, "median APE: -", "p90 APE: -",
                "(the profile has no measurement with more than one GPU to hold out)"]
    lines += [
        f"median APE: {report.median_ape:.2f}%",
        f"p90 APE: {report.p90_ape:.2f}%",
        f"worst {min(worst, len(report.points))}:",
    ]
    rows = [("job type", "gpu", "gpus", "placement", "measured", "predicted", "APE", "flags")]
    for p in report.worst(worst):
        rows.append((p.job_type, p.gpu_type, str(p.num_gpus), p.placement.value,
                     f"{p.measured:.4g}", f"{p.predicted:.4g}", f"{p.ape:.1f}%", p.flags))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        cells = [c.rjust(w) if 2 <= i <= 6 and i != 3 and k else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def plot_residuals(report: LooReport, path: str | Path) -> None:
    """Write a PNG: leave-one-out predicted vs measured (log-log), and the error by
    GPU count, one colour per GPU type, filled for packed and hollow for spread."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4.5))
    FigureCanvasAgg(figure)
    scatter, errors = figure.subplots(1, 2)
    gpu_types = sorted({p.gpu_type for p in report.points})
    colours = {g: f"C{i}" for i, g in enumerate(gpu_types)}
    for gpu_type in gpu_types:
        for placement in Placement:
            chosen = [p for p in report.points
                      if p.gpu_type == gpu_type and p.placement is placement]
            if not chosen:
                continue
            face = colours[gpu_type] if placement is Placement.PACKED else "none"
            label = f"{gpu_type} {placement.value}"
            scatter.scatter([p.measured for p in chosen],
                            [max(p.predicted, 1e-3) for p in chosen], s=14, alpha=0.8,
                            facecolors=face, edgecolors=colours[gpu_type], label=label)
            jitter = {Placement.PACKED: 0.97, Placement.SPREAD: 1.03}[placement]
            errors.scatter([p.num_gpus * jitter for p in chosen], [p.ape for p in chosen],
                           s=14, alpha=0.8, facecolors=face, edgecolors=colours[gpu_type],
                           label=label)
    if report.points:
        low = min(min(p.measured for p in report.points), 1e-1)
        high = max(p.measured for p in report.points) * 1.5
        scatter.plot([low, high], [low, high], color="grey", linewidth=0.8)
    scatter.set(xscale="log", yscale="log", xlabel="measured (steps/s)",
                ylabel="predicted without the point (steps/s)",
                title="leave-one-out predictions")
    errors.set(xscale="log", xlabel="GPUs", ylabel="absolute error (%)",
               title=f"median {report.median_ape:.1f}%, p90 {report.p90_ape:.1f}%"
               if report.points else "no point with more than one GPU")
    counts = sorted({p.num_gpus for p in report.points})
    errors.set_xticks(counts, [str(c) for c in counts])
    errors.set_xticks([], minor=True)
    if report.points:
        errors.axhline(report.p90_ape, color="grey", linewidth=0.8, linestyle="--")
    if report.points:
        scatter.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(str(path), dpi=120)
