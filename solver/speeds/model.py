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

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.speeds.settings import (
    DEFAULT_FEATURES,
    FEATURES,
    FORMAT,
    MAX_GPUS,
    VERSION,
    Array,
    Basis,
    CountRange,
    FeatureFunction,
    FitSettings,
    Mode,
    Pooling,
    SeriesKey,
)

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_FEATURES",
    "FEATURES",
    "FORMAT",
    "MAX_GPUS",
    "VERSION",
    "Array",
    "Basis",
    "BlockFit",
    "CountRange",
    "FeatureFunction",
    "FitDiagnostics",
    "FitSettings",
    "FittedThroughputModel",
    "Mode",
    "Pooling",
    "Prediction",
    "SeriesFit",
    "SeriesKey",
]


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
    :class:`~hetsched.core.errors.InputError` for a job type or GPU type it has not.
    ``data`` holds the measurements it was fitted on (its measured mode).
    """

    settings: FitSettings
    series: Mapping[SeriesKey, SeriesFit]
    families: Mapping[str, str]
    gpu_types: tuple[str, ...]
    data: tuple[tuple[str, str, int, Placement, float], ...] = ()
    diagnostics: FitDiagnostics | None = None
    source: Mapping[str, str] = field(default_factory=dict)
    #: predictions already made (the model is a pure function of the arguments)
    _answers: dict[tuple[str, str, int, Placement], float] = field(
        default_factory=dict, init=False, repr=False, compare=False)

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

    def __reduce__(self) -> tuple[type[FittedThroughputModel], tuple[object, ...]]:
        """Pickled as its fields (for worker processes and Ray's object store)."""
        return type(self), (self.settings, dict(self.series), dict(self.families),
                            self.gpu_types, self.data, self.diagnostics, dict(self.source))

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
        key = (job_type, gpu_type, num_gpus, placement)
        found = self._answers.get(key)
        if found is None:  # unknown names or counts raise here, and are not remembered
            found = self._answers[key] = self.predict(job_type, gpu_type, num_gpus,
                                                      placement).throughput
        return found

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
