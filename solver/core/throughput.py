"""Throughput: how fast a job type trains on a GPU type, GPU count and placement.

Every throughput coefficient a formulation, baseline or checker uses comes from
an object that satisfies :class:`ThroughputModel`. :class:`ThroughputTable` is the
measured form: a lookup table in steps per second where a missing entry or 0
means "cannot run there". The fitted form is
:class:`hetsched.speeds.model.FittedThroughputModel` (docs/throughput-model.md).
Both also give a whole array at once (:class:`ThroughputMatrixModel`); use
:func:`throughput_matrix` to get one from any model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from hetsched.core.errors import InputError


class Placement(str, Enum):
    """How a gang's GPUs sit: all on one node (``packed``) or over several (``spread``)."""

    PACKED = "packed"
    SPREAD = "spread"

    def __str__(self) -> str:
        return self.value


@runtime_checkable
class ThroughputModel(Protocol):
    """Anything that gives steps/s for (job type, GPU type, GPU count, placement)."""

    def throughput(
        self, job_type: str, gpu_type: str, num_gpus: int, placement: Placement
    ) -> float:
        """Training throughput in steps/s; 0.0 means the job cannot run there."""
        ...


def throughput_after(model: ThroughputModel, job_type: str, gpu_type: str, num_gpus: int,
                     placement: Placement, done: float) -> float:
    """steps/s of a job that has done ``done`` of its work: the model's
    ``throughput_after`` where it has one (a speed that depends on the job's progress: an
    elastic job's goodput over its remaining epochs, hetsched.speeds.pollux), else its
    ``throughput``. The simulator runs each run segment at this speed and the checker
    checks each segment with it: a speed that depends on progress changes only where
    :func:`speed_change_after` says, and the simulator ends a segment there."""
    after = getattr(model, "throughput_after", None)
    if after is not None:
        return float(after(job_type, gpu_type, num_gpus, placement, done))
    return model.throughput(job_type, gpu_type, num_gpus, placement)


def throughput_ahead(model: ThroughputModel, job_type: str, gpu_type: str, num_gpus: int,
                     placement: Placement, done: float, horizon_s: float) -> float:
    """steps/s over the next ``horizon_s`` seconds of a job that has done ``done`` of its
    work (the work it makes in them, each part at :func:`throughput_after`'s speed, over
    the time it runs in them): the model's ``throughput_ahead`` where it has one (an
    elastic job's goodput over its next epochs, hetsched.speeds.pollux), else its
    ``throughput``. What a policy plans a running or partly done job with over its
    horizon."""
    ahead = getattr(model, "throughput_ahead", None)
    if ahead is not None:
        return float(ahead(job_type, gpu_type, num_gpus, placement, done, horizon_s))
    return model.throughput(job_type, gpu_type, num_gpus, placement)


def speed_change_after(model: ThroughputModel, job_type: str, done: float) -> float | None:
    """The work at which the speed of a job of ``job_type`` that has done ``done``
    changes next (:func:`throughput_after`; an elastic job's next epoch), from the model's
    ``speed_change_after`` where it has one; ``None``: never."""
    after = getattr(model, "speed_change_after", None)
    if after is None:
        return None
    found = after(job_type, done)
    return None if found is None else float(found)


@runtime_checkable
class ThroughputMatrixModel(ThroughputModel, Protocol):
    """A throughput model that also answers for many jobs, GPU types and counts at once."""

    def matrix(
        self, job_types: Sequence[str], gpu_types: Sequence[str], counts: Sequence[int],
        placement: Placement,
    ) -> npt.NDArray[np.float64]:
        """steps/s as an array of shape ``(len(job_types), len(gpu_types), len(counts))``."""
        ...


def throughput_matrix(
    model: ThroughputModel, job_types: Sequence[str], gpu_types: Sequence[str],
    counts: Sequence[int], placement: Placement,
) -> npt.NDArray[np.float64]:
    """steps/s of every (job type, GPU type, GPU count) for one placement, shape
    ``(jobs, GPU types, counts)``: the model's own ``matrix`` when it has one, else one
    :meth:`ThroughputModel.throughput` call per cell."""
    if isinstance(model, ThroughputMatrixModel):
        return model.matrix(job_types, gpu_types, counts, placement)
    placement = Placement(placement)
    out = np.zeros((len(job_types), len(gpu_types), len(counts)))
    for i, job_type in enumerate(job_types):
        for j, gpu_type in enumerate(gpu_types):
            for k, count in enumerate(counts):
                out[i, j, k] = model.throughput(job_type, gpu_type, int(count), placement)
    return out


ThroughputKey = tuple[str, str, int, Placement]


@dataclass(frozen=True, eq=False)
class ThroughputTable:
    """Measured throughput (steps/s) per (job type, GPU type, GPU count, placement).

    An absent entry or a 0 means the job cannot run in that configuration.
    """

    entries: Mapping[ThroughputKey, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clean: dict[ThroughputKey, float] = {}
        for index, (key, value) in enumerate(self.entries.items()):
            job_type, gpu_type, num_gpus, placement = key
            path = f"[{index}]"
            if not isinstance(job_type, str) or not job_type:
                raise InputError("empty job type", path=f"{path}.job_type", value=job_type)
            if not isinstance(gpu_type, str) or not gpu_type:
                raise InputError("empty GPU type", path=f"{path}.gpu_type", value=gpu_type)
            if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1:
                raise InputError(
                    "bad GPU count", path=f"{path}.num_gpus", value=num_gpus,
                    expected="an integer >= 1",
                )
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise InputError(
                    "bad throughput", path=f"{path}.throughput", value=value,
                    expected="a finite number of steps/s >= 0",
                )
            clean[(job_type, gpu_type, num_gpus, Placement(placement))] = float(value)
        object.__setattr__(self, "entries", MappingProxyType(clean))

    def __reduce__(self) -> tuple[type[ThroughputTable], tuple[dict[ThroughputKey, float]]]:
        """Pickled as its entries (for worker processes and Ray's object store)."""
        return type(self), (dict(self.entries),)

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[str, str, int, Placement | str, float]]
    ) -> ThroughputTable:
        """Build a table from ``(job_type, gpu_type, num_gpus, placement, steps_per_s)`` rows."""
        entries: dict[ThroughputKey, float] = {}
        for job_type, gpu_type, num_gpus, placement, value in rows:
            entries[(job_type, gpu_type, num_gpus, Placement(placement))] = value
        return cls(entries)

    def throughput(
        self, job_type: str, gpu_type: str, num_gpus: int, placement: Placement
    ) -> float:
        """Measured steps/s, or 0.0 where the table has no entry."""
        return self.entries.get((job_type, gpu_type, num_gpus, Placement(placement)), 0.0)

    def matrix(
        self, job_types: Sequence[str], gpu_types: Sequence[str], counts: Sequence[int],
        placement: Placement,
    ) -> npt.NDArray[np.float64]:
        """Measured steps/s, shape ``(len(job_types), len(gpu_types), len(counts))``;
        0.0 where the table has no entry."""
        placement = Placement(placement)
        get = self.entries.get
        return np.array(
            [[[get((job_type, gpu_type, int(count), placement), 0.0) for count in counts]
              for gpu_type in gpu_types] for job_type in job_types],
            dtype=np.float64,
        ).reshape(len(job_types), len(gpu_types), len(counts))

    def rows(self) -> list[tuple[str, str, int, Placement, float]]:
        """All entries as sorted ``(job_type, gpu_type, num_gpus, placement, steps_per_s)``."""
        return sorted((*key, value) for key, value in self.entries.items())

    @property
    def job_types(self) -> frozenset[str]:
        """Job types that appear in the table."""
        return frozenset(key[0] for key in self.entries)

    @property
    def gpu_types(self) -> frozenset[str]:
        """GPU types that appear in the table."""
        return frozenset(key[1] for key in self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True, eq=False)
class PolicyView:
    """What a policy sees in a replay: the fitted speeds, and which configurations run at
    all as the measurements say (a configuration measured at 0, e.g. out of memory, or
    never measured, is 0 here too), so no policy puts a job where it cannot run."""

    fitted: ThroughputModel
    measured: ThroughputModel
    #: answers already given (both models are pure functions of the arguments; replays ask
    #: the same few hundred questions hundreds of thousands of times)
    _answers: dict[tuple[str, str, int, Placement], float] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def throughput(
        self, job_type: str, gpu_type: str, num_gpus: int, placement: Placement
    ) -> float:
        """The fitted steps/s where the measured throughput is positive, else 0.0."""
        key = (job_type, gpu_type, num_gpus, placement)
        found = self._answers.get(key)
        if found is None:
            found = 0.0 if self.measured.throughput(
                job_type, gpu_type, num_gpus, placement) <= 0 else \
                self.fitted.throughput(job_type, gpu_type, num_gpus, placement)
            self._answers[key] = found
        return found

    def throughput_ahead(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float, horizon_s: float) -> float:
        """The fitted steps/s over the job's next ``horizon_s`` seconds
        (:func:`throughput_ahead`) where the measured throughput is positive, else 0.0."""
        if self.throughput(job_type, gpu_type, num_gpus, placement) <= 0:
            return 0.0
        return throughput_ahead(self.fitted, job_type, gpu_type, num_gpus, placement, done,
                                horizon_s)

    def speed_change_after(self, job_type: str, done: float) -> float | None:
        """The work at which the fitted speed changes next (:func:`speed_change_after`)."""
        return speed_change_after(self.fitted, job_type, done)


@dataclass(frozen=True, eq=False)
class PackedEverywhere:
    """A throughput model in which a gang runs at its packed speed wherever its GPUs are:
    Gavel's simulator's assumption (it reads a gang's consolidated figure whatever its
    servers), not the physics, where a gang spread over servers synchronises over the
    network at the measured spread speed (``--spread-speed packed``; docs/traces.md)."""

    model: ThroughputModel

    def throughput(
        self, job_type: str, gpu_type: str, num_gpus: int, placement: Placement
    ) -> float:
        """steps/s of the gang packed, whatever ``placement`` says."""
        return self.model.throughput(job_type, gpu_type, num_gpus, Placement.PACKED)

    def matrix(
        self, job_types: Sequence[str], gpu_types: Sequence[str], counts: Sequence[int],
        placement: Placement,
    ) -> npt.NDArray[np.float64]:
        """steps/s, shape ``(len(job_types), len(gpu_types), len(counts))``, packed."""
        return throughput_matrix(self.model, job_types, gpu_types, counts, Placement.PACKED)

    @property
    def gpu_types(self) -> frozenset[str]:
        """The model's GPU types (empty if it lists none)."""
        return frozenset(getattr(self.model, "gpu_types", ()) or ())

    @property
    def job_types(self) -> frozenset[str]:
        """The model's job types (empty if it lists none)."""
        return frozenset(getattr(self.model, "job_types", ()) or ())


@dataclass(frozen=True, eq=False)
class AliasedThroughput:
    """A throughput model in which some GPU types take the speeds of others: ``aliases``
    maps a cluster's GPU type the model has no measurement of (openb's ``g3``) to one it
    has (``a100``), so ``throughput(job, "g3", n, p)`` is ``model.throughput(job, "a100",
    n, p)``. Every other type is passed through. ``gpu_types`` lists the model's types and
    the aliases (when the model lists its types)."""

    model: ThroughputModel
    aliases: Mapping[str, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "aliases", MappingProxyType(dict(self.aliases)))

    def __reduce__(self) -> tuple[type[AliasedThroughput], tuple[ThroughputModel,
                                                                 dict[str, str]]]:
        """Pickled as its model and aliases (for worker processes and Ray's object store)."""
        return type(self), (self.model, dict(self.aliases))

    def throughput(
        self, job_type: str, gpu_type: str, num_gpus: int, placement: Placement
    ) -> float:
        """steps/s of the GPU type ``gpu_type`` stands for."""
        return self.model.throughput(job_type, self.aliases.get(gpu_type, gpu_type), num_gpus,
                                     placement)

    def matrix(
        self, job_types: Sequence[str], gpu_types: Sequence[str], counts: Sequence[int],
        placement: Placement,
    ) -> npt.NDArray[np.float64]:
        """steps/s, shape ``(len(job_types), len(gpu_types), len(counts))``."""
        return throughput_matrix(self.model, job_types,
                                 [self.aliases.get(t, t) for t in gpu_types], counts, placement)

    @property
    def gpu_types(self) -> frozenset[str]:
        """The model's GPU types (empty if it lists none) and the aliases."""
        known = frozenset(getattr(self.model, "gpu_types", ()) or ())
        return known | frozenset(self.aliases) if known else frozenset()

    @property
    def job_types(self) -> frozenset[str]:
        """The model's job types (empty if it lists none)."""
        return frozenset(getattr(self.model, "job_types", ()) or ())
