"""The settings of the fitted throughput model: the file format's name and version, the
features of the speed curve, how fits are pooled, and :class:`FitSettings`
(docs/throughput-model.md). :mod:`hetsched.speeds.model` re-exports them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement

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


