"""The network prior: a cluster's network across nodes, for the step model of a job type
measured on one node only (:mod:`hetsched.speeds.step_fit` calibrates it and says why).

Its multi-node sync base for a job type whose within-node sync at its fullest node is
``w`` s: ``seconds_per_parameter * model_parameters + node_sync_weight * w`` when the job
type states its trainable parameters and the prior was calibrated so, else
``cross_ratio * w``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.ranges import in_range
from hetsched.speeds.steps import OVERLAP_RANGE, StatedError

#: The largest value of a prior's ratios, factors and per-parameter seconds (its fit is
#: bounded by it: beyond it a factor only says its base is 0).
MAX_PRIOR_VALUE = 1e6

@dataclass(frozen=True)
class NetworkPrior:
    """A cluster's network, for job types measured on one node only (module notes).

    ``cross_ratio``: multi-node sync base over within-node sync at the fullest node
    measured; ``retrogression``: the multi-node per-GPU slope over its base (1/GPU);
    ``overlap``, ``nic_sharing``, ``two_node_penalty`` as in the model. ``job_types``: what
    it was calibrated on; ``transfer_error``: its step-time error on job types it was not
    calibrated on (leave one job type out; ``None``: not measured).
    ``seconds_per_parameter`` and ``node_sync_weight``: the multi-node sync base per
    trainable parameter and per second of within-node sync, for job types that state
    their parameters (0 and 0: a job type it was calibrated on stated none).
    """

    cross_ratio: float
    retrogression: float
    overlap: float
    nic_sharing: float
    two_node_penalty: float
    job_types: tuple[str, ...]
    transfer_error: StatedError | None = None
    seconds_per_parameter: float = 0.0
    node_sync_weight: float = 0.0

    def __post_init__(self) -> None:
        for name in ("cross_ratio", "retrogression", "nic_sharing", "two_node_penalty",
                     "seconds_per_parameter", "node_sync_weight"):
            if not in_range(getattr(self, name), 0, MAX_PRIOR_VALUE):
                raise InputError(f"bad {name}", path=name, value=getattr(self, name),
                                 expected=f"a finite number from 0 to {MAX_PRIOR_VALUE:g}")
        if not in_range(self.overlap, *OVERLAP_RANGE):
            raise InputError("bad overlap", path="overlap", value=self.overlap,
                             expected="a number from 1 to 10")
        if not self.job_types or not all(isinstance(j, str) and j for j in self.job_types):
            raise InputError("bad job_types", path="job_types", value=self.job_types,
                             expected="the job types it was calibrated on")

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (:meth:`from_dict` reads it back)."""
        return {"cross_ratio": self.cross_ratio, "retrogression": self.retrogression,
                "overlap": self.overlap, "nic_sharing": self.nic_sharing,
                "two_node_penalty": self.two_node_penalty, "job_types": list(self.job_types),
                "transfer_error": None if self.transfer_error is None else
                vars(self.transfer_error),
                "seconds_per_parameter": self.seconds_per_parameter,
                "node_sync_weight": self.node_sync_weight}

    @property
    def sized(self) -> bool:
        """Whether it scales the multi-node sync by the model's parameters."""
        return self.seconds_per_parameter > 0 or self.node_sync_weight > 0

    def network_base(self, within_node_s: float, model_parameters: float | None) -> float:
        """The multi-node sync base (s) of a job type whose within-node sync at its
        fullest node is ``within_node_s`` (module notes)."""
        return network_base(vars(self), within_node_s, model_parameters)

    @classmethod
    def from_dict(cls, doc: Any) -> NetworkPrior:
        """The prior of :meth:`as_dict`'s dict; an InputError naming the field. Without
        ``seconds_per_parameter`` and ``node_sync_weight`` (files written before them):
        0 and 0."""
        names = ("cross_ratio", "retrogression", "overlap", "nic_sharing",
                 "two_node_penalty", "job_types", "transfer_error", "seconds_per_parameter",
                 "node_sync_weight")
        if isinstance(doc, Mapping) and not set(names[-2:]) & set(doc):
            doc = {**doc, "seconds_per_parameter": 0.0, "node_sync_weight": 0.0}
        if not isinstance(doc, Mapping) or set(doc) != set(names):
            raise InputError("not a network prior", value=sorted(doc) if isinstance(
                doc, Mapping) else type(doc).__name__, expected="the fields " +
                ", ".join(names))
        error = doc["transfer_error"]
        if error is not None:
            if not isinstance(error, Mapping):
                raise InputError("bad transfer_error", path="transfer_error", value=error,
                                 expected="an object or null")
            try:
                error = StatedError(**error)
            except TypeError:
                raise InputError("bad transfer_error", path="transfer_error",
                                 value=sorted(error),
                                 expected="median_ape, p90_ape, rows, basis") from None
            except InputError as exc:
                raise exc.at("transfer_error") from None
        jobs = doc["job_types"]
        return cls(doc["cross_ratio"], doc["retrogression"], doc["overlap"],
                   doc["nic_sharing"], doc["two_node_penalty"],
                   tuple(jobs) if isinstance(jobs, list) else jobs, error,
                   doc["seconds_per_parameter"], doc["node_sync_weight"])


def network_base(network: Mapping[str, Any], within_node_s: float,
                  model_parameters: float | None) -> float:
    """The multi-node sync base (s) of a network prior's values (module notes)."""
    per_parameter = network.get("seconds_per_parameter", 0.0)
    weight = network.get("node_sync_weight", 0.0)
    if model_parameters is not None and (per_parameter > 0 or weight > 0):
        return float(per_parameter * model_parameters + weight * within_node_s)
    return float(network["cross_ratio"] * within_node_s)
