"""A step-time model with communication: seconds per training iteration of a job type on a
GPU type, for any placement (GPUs used on each node) and per-GPU batch size.

The form is Pollux's (Qiao et al., OSDI'21, section 3.2; adaptdl's ``goodput.py``), with
two factors for what Pollux's own T4 measurements show and its form cannot express. For a
placement of ``n`` GPUs on ``N`` nodes, at most ``k`` of them on one node, and per-GPU
(local) batch ``b`` samples:

* compute ``T_c(b) = compute_base_s + compute_per_sample_s * b``: one forward and
  backward pass (Pollux's ``alpha_c + beta_c * b``);
* network ``T_n``: the gradient synchronisation alone, as if nothing overlapped it:

  - one GPU: ``single_sync_s``, the median sync time measured on one GPU, added to the
    compute time, not overlapped (Pollux: none; its data measures 0.3-14 ms there);
  - one node: ``node_sync_base_s + node_sync_per_gpu_s * (n - 2)`` (Pollux's
    ``alpha_r + beta_r * (n - 2)``);
  - several nodes: ``(network_sync_base_s + network_sync_per_gpu_s * (n - 2)) * (1 +
    nic_sharing * (k - 1)) * (1 + two_node_penalty * (k - 1) * [N = 2])``. The first
    factor is Pollux's ``alpha_n + beta_n * (n - 2)``. The ``nic_sharing`` factor: the GPUs
    of one node send their share of the ring through one network card, so the slowest
    node is the fullest (Pollux's bert at local batch 4: 11 0.83 s of sync, 22 1.55 s, 44
    2.09 s). The ``two_node_penalty``: on Pollux's cluster two nodes with several GPUs
    each synchronise slower than three or four nodes with as many (bert 44 2.09 s, 4444
    1.39 s; every model alike); it is measured, not explained, and fitted like the rest;
* on several GPUs a step overlaps both: ``T = (T_c^g + T_n^g)^(1/g)``, ``g = overlap``
  in [1, 10] (1: no overlap, the sum; 10: nearly the maximum). With ``a``
  gradient-accumulation passes before each synchronisation, one optimizer step takes
  ``a * T_c(b) + T`` (Pollux's form).

``sync_time`` is the part of a step not hidden by computation, ``T - T_c(b)``: what Pollux
measures as sync time. ``throughput`` is samples/s: ``n * b * (a + 1) / (a T_c + T)``.

Why not Pollux's form alone: fitted on every row of Pollux's six models, it misses their
multi-node rows by a median 6.1 % and a p90 18.6 % (16.0-21.3 % per model); with the two
factors 5.6 % and 15.7 % (10.4-18.4 %; docs/elastic.md). The names say which part of an
iteration each coefficient is (seconds, or a factor).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_GPUS_PER_JOB, MAX_THROUGHPUT, MAX_TIME_S, in_range, is_int
from hetsched.speeds.profiles import check_names
from hetsched.speeds.settings import MAX_GPUS

Array = npt.NDArray[np.float64]
#: Where a model's multi-node answers come from: its own multi-node rows (``measured``),
#: a network prior calibrated on other job types (``calibrated``), or Pollux's rule
#: (across nodes 1.1 times the within-node sync; ``pollux-rule``), which nothing measured.
CrossNodeBasis = Literal["measured", "calibrated", "pollux-rule"]
CROSS_NODE_BASES: tuple[CrossNodeBasis, ...] = ("measured", "calibrated", "pollux-rule")
#: The overlap exponent's range (Pollux's).
OVERLAP_RANGE = (1.0, 10.0)
#: The largest per-GPU batch a row or a model may name (samples).
MAX_LOCAL_BSZ = 1e9
#: The most trainable parameters a row may state (10^13: 40 TB of fp32 gradient).
MAX_MODEL_PARAMETERS = 1e13
#: The range of a measured step time (s): one step per nanosecond (the most steps/s any
#: throughput may state) to 317 years (the longest time hetsched reads).
STEP_TIME_RANGE = (1.0 / MAX_THROUGHPUT, MAX_TIME_S)
#: What a step time must be, as error messages say it.
STEP_TIME_EXPECTED = f"seconds from {STEP_TIME_RANGE[0]:g} to {STEP_TIME_RANGE[1]:g}"
#: The model's coefficients, in the order of :func:`step_times`'s parameter vector.
COEFFICIENTS = ("compute_base_s", "compute_per_sample_s", "single_sync_s",
                "node_sync_base_s", "node_sync_per_gpu_s", "network_sync_base_s",
                "network_sync_per_gpu_s", "nic_sharing", "two_node_penalty", "overlap")


def check_placement(placement: Any, max_gpus: int = MAX_GPUS_PER_JOB) -> tuple[int, ...]:
    """``placement`` as a tuple of GPUs per node (each an integer >= 1, ``max_gpus`` in all
    at most); an :class:`InputError` for anything else."""
    gpus = tuple(placement) if isinstance(placement, list | tuple) else None
    if not gpus or not all(is_int(g) and g >= 1 for g in gpus) or sum(gpus) > max_gpus:
        raise InputError("bad placement", path="placement", value=placement,
                         expected=f"a tuple of GPUs used on each node, each >= 1, at most "
                         f"{max_gpus} in all")
    return gpus


def _time(value: Any, name: str, low: float, high: float, expected: str) -> float:
    if not in_range(value, low, high):
        raise InputError(f"bad {name}", path=name, value=value, expected=expected)
    return float(value)


@dataclass(frozen=True)
class StepRow:
    """One measurement: ``step_time`` s per iteration (``sync_time`` s of it spent
    synchronising, not hidden by computation) of ``job_type`` on GPUs of ``gpu_type``
    placed ``placement`` (GPUs on each node, ``(2, 2)``) at ``local_bsz`` samples per GPU.
    ``source`` says where it was read (``"bert/placements.csv line 7"``), for reports.
    ``model_parameters``: the job type's trainable parameters, the length of the gradient
    it synchronises (``None``: not stated); a network prior then scales its multi-node
    sync by it (:mod:`hetsched.speeds.step_fit`)."""

    job_type: str
    gpu_type: str
    placement: tuple[int, ...]
    local_bsz: float
    step_time: float
    sync_time: float
    source: str = field(default="", compare=False)
    model_parameters: float | None = None

    def __post_init__(self) -> None:
        check_names(self, ("job_type", "gpu_type"))
        object.__setattr__(self, "placement", check_placement(self.placement))
        if not in_range(self.local_bsz, 0, MAX_LOCAL_BSZ, strict_low=True):
            raise InputError("bad local_bsz", path="local_bsz", value=self.local_bsz,
                             expected=f"samples per GPU, > 0 and <= {MAX_LOCAL_BSZ:g}")
        object.__setattr__(self, "local_bsz", float(self.local_bsz))
        step = _time(self.step_time, "step_time", *STEP_TIME_RANGE, STEP_TIME_EXPECTED)
        object.__setattr__(self, "step_time", step)
        sync = _time(self.sync_time, "sync_time", 0.0, MAX_TIME_S,
                     f"seconds from 0 to less than the step time {step!r}")
        if sync >= step:
            raise InputError("sync_time not below step_time", path="sync_time", value=sync,
                             expected=f"seconds from 0 to less than the step time {step!r}")
        object.__setattr__(self, "sync_time", sync)
        if not isinstance(self.source, str):
            raise InputError("bad source", path="source", value=self.source,
                             expected="a string")
        if self.model_parameters is not None:
            if not in_range(self.model_parameters, 1, MAX_MODEL_PARAMETERS):
                raise InputError("bad model_parameters", path="model_parameters",
                                 value=self.model_parameters, expected="a count from 1 to "
                                 f"{MAX_MODEL_PARAMETERS:g}, or none")
            object.__setattr__(self, "model_parameters", float(self.model_parameters))

    @property
    def num_gpus(self) -> int:
        """GPUs in all."""
        return sum(self.placement)

    @property
    def num_nodes(self) -> int:
        """Nodes used."""
        return len(self.placement)

    @property
    def compute_time(self) -> float:
        """The step without its exposed sync: ``step_time - sync_time`` (s)."""
        return self.step_time - self.sync_time

    @property
    def placement_text(self) -> str:
        """The placement as Pollux writes it (``"22"``), ``+`` between nodes of 10 GPUs or
        more (``"16+16"``)."""
        joined = "".join(map(str, self.placement))
        return joined if max(self.placement) < 10 else "+".join(map(str, self.placement))


def placement_features(placements: Sequence[Sequence[int]]) -> tuple[Array, Array, Array]:
    """GPUs ``n``, nodes ``N`` and the most GPUs on one node ``k`` of each placement."""
    return (np.array([sum(p) for p in placements], dtype=float),
            np.array([len(p) for p in placements], dtype=float),
            np.array([max(p) for p in placements], dtype=float))


def network_times(coefficients: Sequence[float] | Array, gpus: Array, nodes: Array,
                  most: Array) -> Array:
    """``T_n`` (s) of each placement, as ``n`` GPUs, ``N`` nodes and at most ``k`` GPUs
    on one node (module notes); ``coefficients`` in the order of :data:`COEFFICIENTS`."""
    (_, _, single, node_base, node_slope, net_base, net_slope, nic, two_node,
     _) = coefficients
    extra = np.maximum(gpus - 2.0, 0.0)
    within = node_base + node_slope * extra
    across = ((net_base + net_slope * extra) * (1.0 + nic * (most - 1.0))
              * (1.0 + two_node * (most - 1.0) * (nodes == 2)))
    return np.where(nodes > 1, across, np.where(gpus > 1, within, single))


def step_times(coefficients: Sequence[float] | Array, gpus: Array, nodes: Array,
               most: Array, local_bsz: Array) -> tuple[Array, Array]:
    """``(T_c, T)``: compute and step time (s) of each placement and local batch."""
    compute = coefficients[0] + coefficients[1] * local_bsz
    network = network_times(coefficients, gpus, nodes, most)
    overlap = coefficients[9]
    # (c^g + t^g)^(1/g) = m * (1 + (s/m)^g)^(1/g), m the larger of c and t, s the smaller:
    # no overflow at g = 10 however far apart the two are
    larger = np.maximum(compute, network)
    ratio = np.minimum(compute, network) / np.where(larger > 0, larger, 1.0)
    overlapped = larger * (1.0 + ratio ** overlap) ** (1.0 / overlap)
    return compute, np.where(gpus > 1, overlapped, compute + network)


@dataclass(frozen=True)
class StatedError:
    """How far the model's step times are from measured ones: the median and p90 absolute
    percentage error (%) over ``rows`` rows, and what they were measured on (``basis``)."""

    median_ape: float
    p90_ape: float
    rows: int
    basis: str

    def __post_init__(self) -> None:
        for name in ("median_ape", "p90_ape"):
            # any finite error is a true statement, however bad the model
            if not in_range(getattr(self, name), 0, math.inf):
                raise InputError(f"bad {name}", path=name, value=getattr(self, name),
                                 expected="a finite percentage >= 0")
        if not is_int(self.rows) or self.rows < 1:
            raise InputError("bad rows", path="rows", value=self.rows,
                             expected="an integer >= 1")
        if not isinstance(self.basis, str) or not self.basis:
            raise InputError("bad basis", path="basis", value=self.basis,
                             expected="a non-empty string")

    @classmethod
    def of(cls, predicted: Array, measured: Array, basis: str) -> StatedError:
        """The error of ``predicted`` against ``measured`` step times."""
        ape = np.abs(predicted - measured) / measured * 100.0
        return cls(float(np.median(ape)), float(np.percentile(ape, 90)), len(ape), basis)

    def __str__(self) -> str:
        return (f"median {self.median_ape:.1f} %, p90 {self.p90_ape:.1f} % over {self.rows} "
                f"rows ({self.basis})")


@dataclass(frozen=True)
class StepModel:
    """Fitted step times of ``job_type`` on ``gpu_type`` (module notes; seconds, samples).

    It answers for every placement of at most ``max_gpus`` GPUs and every local batch in
    ``local_bsz_range`` (the measured one); anything else is an :class:`InputError`.
    ``node_error`` is its error on the rows it was fitted on (one node and one GPU, or
    every row when they have no multi-node ones), ``network_error`` on multi-node
    placements: in-sample when ``cross_node`` is ``measured``, the prior's error on job
    types it was not calibrated on when ``calibrated``, ``None`` (unknown) under Pollux's
    rule.
    """

    job_type: str
    gpu_type: str
    compute_base_s: float
    compute_per_sample_s: float
    single_sync_s: float
    node_sync_base_s: float
    node_sync_per_gpu_s: float
    network_sync_base_s: float
    network_sync_per_gpu_s: float
    nic_sharing: float
    two_node_penalty: float
    overlap: float
    local_bsz_range: tuple[float, float]
    cross_node: CrossNodeBasis
    node_error: StatedError
    network_error: StatedError | None = None
    max_gpus: int = MAX_GPUS

    def __post_init__(self) -> None:
        check_names(self, ("job_type", "gpu_type"))
        for name in COEFFICIENTS[:-1]:
            value = getattr(self, name)
            if not in_range(value, 0, MAX_TIME_S):
                raise InputError(f"bad {name}", path=name, value=value,
                                 expected=f"a finite number from 0 to {MAX_TIME_S:g}")
            object.__setattr__(self, name, float(value))
        if not in_range(self.overlap, *OVERLAP_RANGE):
            raise InputError("bad overlap", path="overlap", value=self.overlap,
                             expected="a number from 1 to 10")
        object.__setattr__(self, "overlap", float(self.overlap))
        if self.compute_base_s + self.compute_per_sample_s <= 0:
            raise InputError("no compute time", path="compute_base_s",
                             value=self.compute_base_s,
                             expected="compute_base_s or compute_per_sample_s > 0")
        low_high = tuple(self.local_bsz_range) if isinstance(
            self.local_bsz_range, list | tuple) else ()
        if len(low_high) != 2 or not all(in_range(v, 0, MAX_LOCAL_BSZ, strict_low=True)
                                         for v in low_high) or low_high[0] > low_high[1]:
            raise InputError("bad local_bsz_range", path="local_bsz_range",
                             value=self.local_bsz_range,
                             expected="[smallest, largest] samples per GPU, 0 < smallest "
                             "<= largest")
        object.__setattr__(self, "local_bsz_range", (float(low_high[0]), float(low_high[1])))
        if self.cross_node not in CROSS_NODE_BASES:
            raise InputError("bad cross_node", path="cross_node", value=self.cross_node,
                             expected=" or ".join(CROSS_NODE_BASES))
        for name in ("node_error", "network_error"):
            value = getattr(self, name)
            if not isinstance(value, StatedError) and not (value is None and
                                                            name == "network_error"):
                raise InputError(f"bad {name}", path=name, value=value,
                                 expected="a StatedError")
        if not in_range(self.max_gpus, 1, MAX_GPUS_PER_JOB, integer=True):
            raise InputError("bad max_gpus", path="max_gpus", value=self.max_gpus,
                             expected=f"an integer from 1 to {MAX_GPUS_PER_JOB}")

    @property
    def coefficients(self) -> tuple[float, ...]:
        """The coefficients in the order of :data:`COEFFICIENTS`."""
        return tuple(getattr(self, name) for name in COEFFICIENTS)

    def _query(self, placement: Sequence[int], local_bsz: float,
               accumulation_steps: int = 0) -> tuple[float, float]:
        gpus = check_placement(placement, self.max_gpus)
        low, high = self.local_bsz_range
        if not in_range(local_bsz, low * (1 - 1e-9), high * (1 + 1e-9)):
            raise InputError("local batch outside the measured range", path="local_bsz",
                             value=local_bsz, expected=f"samples per GPU from {low:g} to "
                             f"{high:g} ({self.job_type} on {self.gpu_type})")
        if not is_int(accumulation_steps) or accumulation_steps < 0:
            raise InputError("bad accumulation_steps", path="accumulation_steps",
                             value=accumulation_steps, expected="an integer >= 0")
        n, nodes, most = placement_features([gpus])
        compute, step = step_times(self.coefficients, n, nodes, most,
                                   np.array([float(local_bsz)]))
        return float(compute[0]), float(step[0] + accumulation_steps * compute[0])

    def compute_time(self, local_bsz: float) -> float:
        """One forward and backward pass at ``local_bsz`` samples per GPU (s)."""
        return self._query((1,), local_bsz)[0]

    def step_time(self, placement: tuple[int, ...], local_bsz: float,
                  accumulation_steps: int = 0) -> float:
        """Seconds per iteration (one optimizer step, after ``accumulation_steps`` passes
        that only accumulate) on ``placement`` (GPUs per node) at ``local_bsz`` per GPU."""
        return self._query(placement, local_bsz, accumulation_steps)[1]

    def sync_time(self, placement: tuple[int, ...], local_bsz: float) -> float:
        """The part of a step spent synchronising, not hidden by computation (s)."""
        compute, step = self._query(placement, local_bsz)
        return step - compute

    def throughput(self, placement: tuple[int, ...], local_bsz: float,
                   accumulation_steps: int = 0) -> float:
        """Samples per second: ``sum(placement) * local_bsz * (accumulation_steps + 1)``
        per step time."""
        step = self.step_time(placement, local_bsz, accumulation_steps)
        return sum(placement) * local_bsz * (accumulation_steps + 1) / step

    def stated_error(self, placement: tuple[int, ...]) -> StatedError | None:
        """The error stated for step times on ``placement``: ``node_error`` on one node,
        ``network_error`` across nodes (``None``: not measured)."""
        gpus = check_placement(placement, self.max_gpus)
        return self.node_error if len(gpus) == 1 else self.network_error

    def predict_rows(self, rows: Sequence[StepRow]) -> Array:
        """Step times (s) of the placements and local batches of ``rows`` (no range
        check: for measuring the model on rows of any batch)."""
        n, nodes, most = placement_features([row.placement for row in rows])
        batch = np.array([row.local_bsz for row in rows], dtype=float)
        return step_times(self.coefficients, n, nodes, most, batch)[1]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (:meth:`from_dict` reads it back)."""
        doc = asdict(self)
        doc["local_bsz_range"] = list(self.local_bsz_range)
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> StepModel:
        """The model of :meth:`as_dict`'s dict; an :class:`InputError` naming the field."""
        if not isinstance(doc, Mapping):
            raise InputError("not a step model", value=type(doc).__name__,
                             expected="an object of StepModel fields")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(doc) - names)
        missing = sorted(f.name for f in fields(cls) if f.name not in doc and f.name not in
                         ("network_error", "max_gpus"))
        if unknown or missing:
            raise InputError(f"unknown field '{unknown[0]}'" if unknown else
                             f"missing field '{missing[0]}'",
                             value=unknown[0] if unknown else sorted(doc),
                             expected="the fields " + ", ".join(sorted(names)))
        values = dict(doc)
        for name in ("node_error", "network_error"):
            item = values.get(name)
            if isinstance(item, Mapping):
                try:
                    values[name] = StatedError(**item)
                except TypeError:
                    raise InputError(f"bad {name}", path=name, value=sorted(item),
                                     expected="median_ape, p90_ape, rows, basis") from None
                except InputError as exc:
                    raise exc.at(name) from None
        if isinstance(values.get("local_bsz_range"), list):
            values["local_bsz_range"] = tuple(values["local_bsz_range"])
        return cls(**values)


