"""The fitted throughput model: steps/s for any GPU count, from a measured profile.

The model (docs/throughput-model.md has the measurements behind every choice).
Job type ``j`` on ``n`` GPUs of type ``g`` with placement ``p`` takes

    t(n) = c[0] + sum_k c[k] * phi_k(n)        seconds per step, every c >= 0

per GPU and step (the synchronous iteration), so its throughput is ``n / t(n)``
steps/s (a step of each GPU counts, as in Gavel's tables). The features ``phi``
are 0 at ``n = 1``; the default ``log2 n`` and ``(n - 1) / n`` were picked by
leave-one-out error on Gavel's table (benchmarks/fit_gavel.py).

One series (job type, GPU type, placement) has few points, so the coefficients
are fitted per *family* (one network at several batch sizes, which shares its
gradient size and hence its communication overhead) and GPU type:

    c[0] = a_j                                  compute time of job type j
    c[k] = beta[p, k] + gamma[p, k] * s_j       family overhead, partly growing
                                                with s_j, j's measured step time

``a``, ``beta`` and ``gamma`` come from one non-negative least-squares fit
(``scipy.optimize.nnls``) of ``t = n / throughput`` with rows weighted by
``1 / t`` (relative error). The smooth curve is then multiplied by a *count
correction*: at 1 GPU, the job's own measured / smooth ratio (so a measured
1-GPU throughput is returned as measured: ``a_j`` describes the multi-GPU
regime, which may scale super-linearly from one GPU); at every larger count the
family measured, the median ratio measured / smooth over the family's
measurements at that count. Counts the family did not measure use the smooth
curve alone.

Predictions are flagged (:class:`Prediction`): ``own-data`` or ``family-shape``
(the series has no multi-GPU measurement of its own and borrows its family's
overhead), ``unsupported`` (0.0: the family has no multi-GPU measurement on
that GPU type and placement, or the job measured 0 at that many GPUs or fewer),
and ``measured`` / ``interpolated`` / ``extrapolated`` for the count.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import nnls

from solver.errors import InputError
from solver.instance_file import read_json
from solver.profiles import PointKey, Profile
from solver.throughput import Placement, ThroughputTable

log = logging.getLogger(__name__)

FORMAT = "hetsched-throughput-model"
VERSION = 1
#: The largest GPU count a fitted model answers for (by default).
MAX_GPUS = 64

Array = npt.NDArray[np.float64]
FeatureFunction = Callable[[Array], Array]

#: Features of the GPU count n (each 0 at n = 1) and what they stand for.
FEATURES: Mapping[str, tuple[FeatureFunction, str]] = MappingProxyType({
    "log2n": (np.log2, "log2(n): rounds of a tree or recursive-doubling all-reduce"),
    "ring": (lambda n: (n - 1.0) / n, "(n-1)/n: bytes each GPU sends in a ring all-reduce"),
    "multi": (lambda n: (n > 1).astype(np.float64), "1 if n > 1: a fixed synchronisation cost"),
    "linear": (lambda n: n - 1.0, "n-1: a cost per extra GPU (a parameter server)"),
})
DEFAULT_FEATURES = ("log2n", "ring")

SeriesKey = tuple[str, str, Placement]


class Pooling(str, Enum):
    """What shares one overhead curve: a model ``family`` or each ``series`` alone."""

    FAMILY = "family"
    SERIES = "series"


class Basis(str, Enum):
    """Where a prediction comes from."""

    OWN_DATA = "own-data"
    FAMILY_SHAPE = "family-shape"
    UNSUPPORTED = "unsupported"


class CountRange(str, Enum):
    """How the GPU count of a prediction relates to the counts that were measured."""

    MEASURED = "measured"
    INTERPOLATED = "interpolated"
    EXTRAPOLATED = "extrapolated"


class Mode(str, Enum):
    """``measured``: the profile as a lookup table; ``fitted``: the model."""

    MEASURED = "measured"
    FITTED = "fitted"


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"bad {name}", path=name, value=value, expected="true or false")
    return value


@dataclass(frozen=True)
class FitSettings:
    """How to fit: features, pooling, weights, the step-time covariate, count corrections.

    The defaults are the model of the module docstring; :meth:`naive` gives the
    per-series baseline (no pooling, unweighted, no covariate, no corrections).
    """

    features: tuple[str, ...] = DEFAULT_FEATURES
    pooling: Pooling = Pooling.FAMILY
    relative_weights: bool = True
    scale_with_step_time: bool = True
    count_corrections: bool = True
    max_gpus: int = MAX_GPUS

    def __post_init__(self) -> None:
        if isinstance(self.features, str) or not isinstance(self.features, Sequence):
            raise InputError("bad features", path="features", value=self.features,
                             expected="a list of feature names")
        object.__setattr__(self, "features", tuple(self.features))
        for index, name in enumerate(self.features):
            if name not in FEATURES:
                raise InputError("unknown feature", path=f"features[{index}]", value=name,
                                 expected="one of " + ", ".join(FEATURES))
        if len(set(self.features)) != len(self.features):
            raise InputError("repeated feature", path="features", value=list(self.features),
                             expected="distinct names")
        try:
            object.__setattr__(self, "pooling", Pooling(self.pooling))
        except ValueError:
            raise InputError("bad pooling", path="pooling", value=self.pooling,
                             expected="family or series") from None
        for name in ("relative_weights", "scale_with_step_time", "count_corrections"):
            _bool(getattr(self, name), name)
        if isinstance(self.max_gpus, bool) or not isinstance(self.max_gpus, int) \
                or self.max_gpus < 1:
            raise InputError("bad max_gpus", path="max_gpus", value=self.max_gpus,
                             expected="an integer >= 1")

    @classmethod
    def naive(cls, features: Sequence[str]) -> FitSettings:
        """The baseline: each series fitted alone by plain NNLS on its step time."""
        return cls(tuple(features), Pooling.SERIES, relative_weights=False,
                   scale_with_step_time=False, count_corrections=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"features": list(self.features), "pooling": self.pooling.value,
                "relative_weights": self.relative_weights,
                "scale_with_step_time": self.scale_with_step_time,
                "count_corrections": self.count_corrections, "max_gpus": self.max_gpus}

    def feature_matrix(self, counts: Array) -> Array:
        """``[phi_1(n), ..., phi_K(n)]`` for each count, shape ``(len(counts), K)``."""
        counts = np.asarray(counts, dtype=np.float64)
        return np.stack([FEATURES[name][0](counts) for name in self.features], axis=-1)


@dataclass(frozen=True)
class Prediction:
    """A throughput (steps/s) and how much to trust it."""

    throughput: float
    basis: Basis
    count_range: CountRange
    note: str = ""

    @property
    def flags(self) -> str:
        """``"own-data, measured"``, ``"family-shape, extrapolated"``, ``"unsupported"``..."""
        if self.basis is Basis.UNSUPPORTED:
            return str(self.basis.value)
        return f"{self.basis.value}, {self.count_range.value}"


def _counts(values: Iterable[Any], path: str, *, low: int = 1) -> tuple[int, ...]:
    counts = tuple(values)
    for index, count in enumerate(counts):
        if isinstance(count, bool) or not isinstance(count, int) or count < low:
            raise InputError("bad GPU count", path=f"{path}[{index}]", value=count,
                             expected=f"an integer >= {low}")
    return tuple(sorted(set(counts)))


@dataclass(frozen=True)
class SeriesFit:
    """The fitted speed function of one (job type, GPU type, placement).

    ``coefficients`` are ``c[0], c[1..K]`` in seconds per step (module docstring);
    ``corrections`` ``(count, factor)`` pairs; ``measured_counts`` the counts this
    series measured > 0 itself; ``shape_counts`` the counts its overhead was fitted
    on; counts in ``unsupported_counts`` or from ``unsupported_from`` on get 0.0,
    for the reason in ``note``.
    """

    job_type: str
    gpu_type: str
    placement: Placement
    coefficients: tuple[float, ...]
    corrections: tuple[tuple[int, float], ...] = ()
    measured_counts: tuple[int, ...] = ()
    shape_counts: tuple[int, ...] = ()
    unsupported_counts: tuple[int, ...] = ()
    unsupported_from: int | None = None
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "placement", Placement(self.placement))
        coefficients = tuple(self.coefficients)
        for index, value in enumerate(coefficients):
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value < 0:
                raise InputError("bad coefficient", path=f"coefficients[{index}]", value=value,
                                 expected="a finite number of seconds >= 0")
        if not coefficients:
            raise InputError("no coefficients", path="coefficients", value=[],
                             expected="c[0] and one coefficient per feature")
        object.__setattr__(self, "coefficients", tuple(float(c) for c in coefficients))
        corrections = []
        for index, pair in enumerate(self.corrections):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise InputError("bad correction", path=f"corrections[{index}]", value=pair,
                                 expected="[GPU count, factor]")
            count, factor = pair
            _counts([count], f"corrections[{index}][0]")
            if isinstance(factor, bool) or not isinstance(factor, int | float) \
                    or not math.isfinite(factor) or factor <= 0:
                raise InputError("bad correction factor", path=f"corrections[{index}][1]",
                                 value=factor, expected="a finite number > 0")
            corrections.append((count, float(factor)))
        object.__setattr__(self, "corrections", tuple(sorted(corrections)))
        for name in ("measured_counts", "shape_counts", "unsupported_counts"):
            object.__setattr__(self, name, _counts(getattr(self, name), name))
        if self.unsupported_from is not None:
            _counts([self.unsupported_from], "unsupported_from")

    @property
    def key(self) -> SeriesKey:
        """``(job_type, gpu_type, placement)``."""
        return (self.job_type, self.gpu_type, self.placement)

    def supports(self, count: int) -> bool:
        """Whether the model gives ``count`` GPUs a throughput > 0 (before step time)."""
        if count in self.unsupported_counts:
            return False
        return self.unsupported_from is None or count < self.unsupported_from

    def step_time(self, count: int, settings: FitSettings) -> float:
        """The smooth step time t(n) in seconds (no count correction)."""
        phi = settings.feature_matrix(np.array([float(count)]))[0]
        return float(self.coefficients[0] + np.dot(self.coefficients[1:], phi))

    def predict(self, count: int, settings: FitSettings) -> Prediction:
        """steps/s on ``count`` GPUs, with its flags."""
        known = set(self.measured_counts) | set(self.shape_counts)
        if count in self.measured_counts:
            count_range = CountRange.MEASURED
        elif known and min(known) <= count <= max(known):
            count_range = CountRange.INTERPOLATED
        else:
            count_range = CountRange.EXTRAPOLATED
        if not self.supports(count):
            return Prediction(0.0, Basis.UNSUPPORTED, count_range, self.note)
        step = self.step_time(count, settings)
        if not step > 0:
            return Prediction(0.0, Basis.UNSUPPORTED, count_range, "fitted step time is 0")
        factor = dict(self.corrections).get(count, 1.0)
        own = any(n > 1 for n in self.measured_counts) or (count == 1
                                                            and bool(self.measured_counts))
        basis = Basis.OWN_DATA if own else Basis.FAMILY_SHAPE
        return Prediction(count / step * factor, basis, count_range, self.note)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"job_type": self.job_type, "gpu_type": self.gpu_type,
                "placement": self.placement.value, "coefficients": list(self.coefficients),
                "corrections": [list(pair) for pair in self.corrections],
                "measured_counts": list(self.measured_counts),
                "shape_counts": list(self.shape_counts),
                "unsupported_counts": list(self.unsupported_counts),
                "unsupported_from": self.unsupported_from, "note": self.note}


@dataclass(frozen=True)
class BlockFit:
    """Diagnostics of one NNLS fit: a family (or a series) on one GPU type.

    ``overhead[placement]`` holds ``beta`` then ``gamma`` per feature (seconds, and
    seconds per second of step time); ``relative_rms`` is the root mean square of
    the weighted residuals (relative step-time error when weights are relative).
    """

    group: str
    gpu_type: str
    jobs: tuple[str, ...]
    rows: int
    relative_rms: float
    overhead: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"group": self.group, "gpu_type": self.gpu_type, "jobs": list(self.jobs),
                "rows": self.rows, "relative_rms": self.relative_rms,
                "overhead": {p: list(v) for p, v in self.overhead.items()}}


@dataclass(frozen=True)
class FitDiagnostics:
    """In-sample fit quality (absolute percentage errors of the throughput, %) and time."""

    points: int
    median_ape: float
    p90_ape: float
    max_ape: float
    fit_time_s: float
    blocks: tuple[BlockFit, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (per-block diagnostics included)."""
        return {"points": self.points, "median_ape": self.median_ape,
                "p90_ape": self.p90_ape, "max_ape": self.max_ape,
                "fit_time_s": self.fit_time_s, "blocks": [b.as_dict() for b in self.blocks]}


def _name_list(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:8])
    return f"one of {shown}" + (f" (and {len(names) - 8} more)" if len(names) > 8 else "")


@dataclass(frozen=True, eq=False)
class FittedThroughputModel:
    """The fitted mode of the throughput interface (steps/s); see the module docstring.

    Unlike a measured table it answers every GPU count from 1 to
    ``settings.max_gpus`` of a job type and GPU type it has seen, and raises
    :class:`~solver.errors.InputError` for a job type or GPU type it has not.
    ``data`` holds the measurements it was fitted on (its measured mode).
    """

    settings: FitSettings
    series: Mapping[SeriesKey, SeriesFit]
    families: Mapping[str, str]
    gpu_types: tuple[str, ...]
    data: tuple[tuple[str, str, int, Placement, float], ...] = ()
    diagnostics: FitDiagnostics | None = None
    source: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_types", tuple(sorted(set(self.gpu_types))))
        object.__setattr__(self, "families", MappingProxyType(dict(self.families)))
        object.__setattr__(self, "source", MappingProxyType(dict(self.source)))
        width = 1 + len(self.settings.features)
        series: dict[SeriesKey, SeriesFit] = {}
        for key, fit in self.series.items():
            if key != fit.key:
                raise InputError("series stored under another key", path="series",
                                 value=key, expected=str(fit.key))
            if fit.job_type not in self.families or fit.gpu_type not in self.gpu_types:
                raise InputError("series of an unknown job type or GPU type", path="series",
                                 value=[fit.job_type, fit.gpu_type],
                                 expected="job types and GPU types the model lists")
            if len(fit.coefficients) != width:
                raise InputError("wrong number of coefficients", path="series",
                                 value=list(fit.coefficients),
                                 expected=f"{width} (c[0] and one per feature)")
            series[key] = fit
        for job_type in self.families:
            for gpu_type in self.gpu_types:
                for placement in Placement:
                    if (job_type, gpu_type, placement) not in series:
                        series[(job_type, gpu_type, placement)] = SeriesFit(
                            job_type, gpu_type, placement, (0.0,) * width,
                            unsupported_from=1,
                            note=f"no measurement of {job_type} on {gpu_type}")
        object.__setattr__(self, "series", MappingProxyType(series))
        object.__setattr__(self, "data", tuple(self.data))

    @property
    def job_types(self) -> tuple[str, ...]:
        """The job types the model knows, sorted."""
        return tuple(sorted(self.families))

    def _check_job(self, job_type: str) -> None:
        if job_type not in self.families:
            raise InputError("unknown job type for the fitted throughput model",
                             path="job_type", value=job_type,
                             expected=_name_list(self.job_types))

    def _check_gpu(self, gpu_type: str) -> None:
        if gpu_type not in self.gpu_types:
            raise InputError("unknown GPU type for the fitted throughput model",
                             path="gpu_type", value=gpu_type,
                             expected=_name_list(self.gpu_types))

    def _check_count(self, num_gpus: int) -> None:
        if isinstance(num_gpus, bool) or not isinstance(num_gpus, int | np.integer) \
                or not 1 <= num_gpus <= self.settings.max_gpus:
            raise InputError("GPU count outside the fitted model's range", path="num_gpus",
                             value=num_gpus,
                             expected=f"an integer from 1 to {self.settings.max_gpus}")

    def predict(self, job_type: str, gpu_type: str, num_gpus: int,
                placement: Placement) -> Prediction:
        """steps/s of ``job_type`` on ``num_gpus`` GPUs of ``gpu_type``, with its flags."""
        self._check_job(job_type)
        self._check_gpu(gpu_type)
        self._check_count(num_gpus)
        fit = self.series[(job_type, gpu_type, Placement(placement))]
        return fit.predict(int(num_gpus), self.settings)

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        """Predicted steps/s; 0.0 where the model does not support the configuration."""
        return self.predict(job_type, gpu_type, num_gpus, placement).throughput

    @cached_property
    def _dense(self) -> dict[Placement, tuple[Array, Array]]:
        """Per placement: coefficients (job, GPU type, 1+K) and the factor by count
        (job, GPU type, 0..max_gpus): count correction, or 0 where unsupported."""
        jobs, gpus, top = self.job_types, self.gpu_types, self.settings.max_gpus
        dense = {}
        for placement in Placement:
            coef = np.zeros((len(jobs), len(gpus), 1 + len(self.settings.features)))
            factor = np.ones((len(jobs), len(gpus), top + 1))
            factor[:, :, 0] = 0.0
            for i, job_type in enumerate(jobs):
                for j, gpu_type in enumerate(gpus):
                    fit = self.series[(job_type, gpu_type, placement)]
                    coef[i, j] = fit.coefficients
                    for count, value in fit.corrections:
                        if count <= top:
                            factor[i, j, count] = value
                    for count in fit.unsupported_counts:
                        if count <= top:
                            factor[i, j, count] = 0.0
                    if fit.unsupported_from is not None:
                        factor[i, j, min(fit.unsupported_from, top + 1):] = 0.0
            dense[placement] = (coef, factor)
        return dense

    def matrix(self, job_types: Sequence[str], gpu_types: Sequence[str],
               counts: Sequence[int], placement: Placement) -> Array:
        """Predicted steps/s, shape ``(len(job_types), len(gpu_types), len(counts))``."""
        job_index = {name: i for i, name in enumerate(self.job_types)}
        gpu_index = {name: i for i, name in enumerate(self.gpu_types)}
        for job_type in job_types:
            self._check_job(job_type)
        for gpu_type in gpu_types:
            self._check_gpu(gpu_type)
        for count in counts:
            self._check_count(count)
        coef, factor = self._dense[Placement(placement)]
        rows = np.array([job_index[name] for name in job_types], dtype=np.intp)
        cols = np.array([gpu_index[name] for name in gpu_types], dtype=np.intp)
        n = np.array(counts, dtype=np.intp)
        phi = np.concatenate(
            [np.ones((len(n), 1)), self.settings.feature_matrix(n.astype(np.float64))], axis=1)
        picked = coef[np.ix_(rows, cols)]  # (J, G, 1+K)
        step = picked @ phi.T  # (J, G, C)
        scale = factor[np.ix_(rows, cols, n)]
        with np.errstate(divide="ignore", invalid="ignore"):
            speed = np.where((scale > 0) & (step > 0), n / step * scale, 0.0)
        return np.asarray(speed, dtype=np.float64).reshape(len(rows), len(cols), len(n))

    def table(self) -> ThroughputTable:
        """The measured mode: the measurements the model was fitted on."""
        return ThroughputTable.from_rows(self.data)

    def as_dict(self) -> dict[str, Any]:
        """The model file's document (format in docs/throughput-model.md)."""
        return {
            "format": FORMAT, "version": VERSION,
            "units": {"throughput": "steps/s", "coefficients": "seconds per step"},
            "model": "t(n) = c[0] + sum_k c[k] * feature_k(n); "
                     "throughput(n) = n / t(n) * correction(n)",
            "settings": self.settings.as_dict(),
            "feature_meaning": {name: FEATURES[name][1] for name in self.settings.features},
            "source": dict(self.source),
            "gpu_types": list(self.gpu_types),
            "families": dict(sorted(self.families.items())),
            "diagnostics": None if self.diagnostics is None else self.diagnostics.as_dict(),
            "series": [self.series[key].as_dict() for key in sorted(self.series)],
            "data": [{"job_type": j, "gpu_type": g, "num_gpus": n, "placement": p.value,
                      "throughput": v} for j, g, n, p, v in self.data],
        }

    def summary(self) -> dict[str, int]:
        """How many series the model fits from their own data, from their family's
        shape, only at 1 GPU, or not at all."""
        counts = {"own-data": 0, "family-shape": 0, "single-gpu-only": 0, "no-data": 0}
        for fit in self.series.values():
            if not fit.supports(1):
                counts["no-data"] += 1
            elif not fit.supports(2):
                counts["single-gpu-only"] += 1
            elif any(n > 1 for n in fit.measured_counts):
                counts["own-data"] += 1
            else:
                counts["family-shape"] += 1
        return counts


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


def fit_throughput_model(profile: Profile,
                         settings: FitSettings | None = None) -> FittedThroughputModel:
    """Fit the throughput model of the module docstring to ``profile``."""
    settings = settings or FitSettings()
    started = time.perf_counter()
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


# --- persistence -----------------------------------------------------------------------


def save_model(model: FittedThroughputModel, path: str | Path) -> None:
    """Write ``model`` as a model file (JSON)."""
    Path(path).write_text(json.dumps(model.as_dict(), indent=1, allow_nan=False) + "\n",
                          encoding="utf-8")


def _field(doc: Mapping[str, Any], name: str, kind: type | tuple[type, ...], path: str,
           expected: str) -> Any:
    if name not in doc:
        raise InputError(f"missing field '{name}'", path=path, expected=expected)
    value = doc[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InputError("wrong type", path=f"{path}.{name}", value=value, expected=expected)
    return value


def model_from_dict(doc: Any, *, file: str = "<model>") -> FittedThroughputModel:
    """Build a model from a parsed model file, with errors naming file and JSON path."""
    try:
        return _model_from_dict(doc)
    except InputError as exc:
        raise exc.in_file(file) from None


def _model_from_dict(doc: Any) -> FittedThroughputModel:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError("not a throughput model file", path="$.format",
                         value=doc.get("format") if isinstance(doc, dict) else type(doc).__name__,
                         expected=f'"{FORMAT}" (a file written by hetsched fit)')
    if doc.get("version") != VERSION:
        raise InputError("unsupported model file version", path="$.version",
                         value=doc.get("version"), expected=str(VERSION))
    raw = _field(doc, "settings", dict, "$", "an object of fit settings")
    try:
        settings = FitSettings(**raw)
    except TypeError:
        raise InputError("unknown settings field", path="$.settings", value=sorted(raw),
                         expected="fields of FitSettings: " + ", ".join(FitSettings().as_dict())
                         ) from None
    except InputError as exc:
        raise exc.at("$.settings") from None
    gpu_types = _field(doc, "gpu_types", list, "$", "a list of GPU type names")
    families = _field(doc, "families", dict, "$", "an object job type -> family")
    for name in [*gpu_types, *families, *families.values()]:
        if not isinstance(name, str) or not name:
            raise InputError("bad name", path="$", value=name, expected="non-empty strings")
    series = {}
    for i, item in enumerate(_field(doc, "series", list, "$", "a list of series")):
        where = f"$.series[{i}]"
        if not isinstance(item, dict):
            raise InputError("wrong type", path=where, value=item, expected="an object")
        try:
            fit = SeriesFit(
                _field(item, "job_type", str, where, "a job type"),
                _field(item, "gpu_type", str, where, "a GPU type"),
                Placement(_field(item, "placement", str, where, "packed or spread")),
                tuple(_field(item, "coefficients", list, where, "a list of seconds")),
                tuple(tuple(p) if isinstance(p, list) else p
                      for p in item.get("corrections", [])),
                tuple(item.get("measured_counts", [])), tuple(item.get("shape_counts", [])),
                tuple(item.get("unsupported_counts", [])), item.get("unsupported_from"),
                str(item.get("note", "")))
        except ValueError as exc:
            error = exc if isinstance(exc, InputError) else InputError(
                "bad placement", path="placement", value=item.get("placement"),
                expected="packed or spread")
            raise error.at(where) from None
        if fit.key in series:
            raise InputError("duplicate series", path=where, value=list(fit.key),
                             expected="one series per (job_type, gpu_type, placement)")
        series[fit.key] = fit
    rows = []
    for i, row in enumerate(doc.get("data", [])):
        try:
            rows.append((row["job_type"], row["gpu_type"], row["num_gpus"],
                         Placement(row["placement"]), row["throughput"]))
        except (KeyError, TypeError, ValueError):
            raise InputError("bad data row", path=f"$.data[{i}]", value=row,
                             expected="{job_type, gpu_type, num_gpus, placement, throughput}"
                             ) from None
    ThroughputTable.from_rows(rows)  # validates the measurements
    source = doc.get("source") or {}
    return FittedThroughputModel(settings, series, families, tuple(gpu_types), tuple(rows),
                                 None, {str(k): str(v) for k, v in source.items()})


def load_model(path: str | Path) -> FittedThroughputModel:
    """Read a model file written by :func:`save_model` (``hetsched fit``)."""
    path = Path(path)
    return model_from_dict(read_json(path), file=str(path))


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


def leave_one_out(profile: Profile, settings: FitSettings | None = None) -> LooReport:
    """Hold out each point with more than one GPU, refit the whole model on the rest
    and predict it; a prediction of 0 (unsupported) counts as a 100% error."""
    settings = settings or FitSettings()
    started = time.perf_counter()
    points = []
    for key in held_out_keys(profile):
        job, gpu, count, placement = key
        measured = profile.by_key[key].throughput
        model = fit_throughput_model(profile.without(key), settings)
        try:
            prediction = model.predict(job, gpu, count, placement)
            predicted, flags = prediction.throughput, prediction.flags
        except InputError as exc:  # the point was all the model knew of its type
            predicted, flags = 0.0, f"unsupported ({exc.problem})"
        points.append(HeldOut(job, gpu, count, placement, measured, predicted, flags))
    return LooReport(tuple(points), settings, time.perf_counter() - started)


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
