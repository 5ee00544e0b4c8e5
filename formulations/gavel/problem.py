"""The data of Gavel's allocation problem: jobs x GPU types, throughputs, gang sizes,
capacities and weights, and the normalisation of each job's throughput."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


class Objective(str, Enum):
    """Gavel's policy: max-min fairness (least attained service), max-sum throughput
    relative to each job's equal share, or Gavel's own raw max-sum (steps/s summed over
    jobs, whatever their step's size: ``max_sum_throughput_perf``)."""

    MAX_MIN = "max-min"
    MAX_SUM = "max-sum"
    MAX_SUM_RAW = "max-sum-raw"


@dataclass(frozen=True, eq=False)
class AllocationProblem:
    """Jobs (rows) and GPU types (columns) of one allocation.

    ``throughput[j, k]`` is job j's steps/s on ``scale_factors[j]`` GPUs of type k (0 where
    it cannot run there), ``capacity[k]`` the number of GPUs of type k and
    ``weights[j] > 0`` job j's priority weight.
    """

    job_ids: tuple[str, ...]
    gpu_types: tuple[str, ...]
    throughput: Array
    scale_factors: Array
    capacity: Array
    weights: Array

    def __post_init__(self) -> None:
        jobs, types = len(self.job_ids), len(self.gpu_types)
        for name, value, shape in (("throughput", self.throughput, (jobs, types)),
                                   ("scale_factors", self.scale_factors, (jobs,)),
                                   ("capacity", self.capacity, (types,)),
                                   ("weights", self.weights, (jobs,))):
            array = np.asarray(value, dtype=np.float64)
            if array.shape != shape:
                raise ValueError(f"{name} has shape {array.shape}, expected {shape}")
            if not np.all(np.isfinite(array)) or np.any(array < 0):
                raise ValueError(f"{name} must be finite and >= 0")
            object.__setattr__(self, name, array)
        if np.any(self.weights <= 0) or np.any(self.scale_factors < 1):
            raise ValueError("weights must be > 0 and scale factors >= 1")
        if jobs and np.any(self.throughput.max(axis=1) <= 0):
            raise ValueError("every job needs a GPU type with throughput > 0")
        if types and self.capacity.sum() <= 0:
            raise ValueError("the cluster has no GPUs")

    def equal_share_throughput(self) -> Array:
        """``E_j = sum_k T_jk C_k / sum_k C_k``: job j's steps/s if it had an equal time share
        of every GPU of the cluster (Gavel's X^equal; a type it cannot use gives it 0)."""
        share = self.capacity / self.capacity.sum()
        return np.asarray(self.throughput @ share, dtype=np.float64)

    def normalised(self, allocation: Array) -> Array:
        """``rho_j(X) = s_j / w_j * sum_k T_jk X_jk / E_j``: each job's throughput under
        ``allocation`` relative to its equal share, per GPU of its gang, over its weight."""
        speed = (self.throughput * allocation).sum(axis=1)
        return np.asarray(self.scale_factors / self.weights * speed
                          / self.equal_share_throughput(), dtype=np.float64)

    def objective_value(self, objective: Objective, allocation: Array) -> float:
        """The objective of ``allocation``: max-min ``min_j rho_j``, max-sum
        ``sum_j sum_k T_jk X_jk / E_j``, raw max-sum ``sum_j sum_k T_jk X_jk``."""
        if objective is Objective.MAX_SUM_RAW:
            return float((self.throughput * allocation).sum())
        rho = self.normalised(allocation)
        if objective is Objective.MAX_MIN:
            return float(rho.min(initial=np.inf))
        return float((rho * self.weights / self.scale_factors).sum())

    def is_feasible(self, allocation: Array, tolerance: float = 1e-7) -> bool:
        """``X >= 0``, ``X = 0`` where ``T = 0``, ``sum_k X_jk <= 1``, ``sum_j s_j X_jk <= C_k``."""
        x = np.asarray(allocation, dtype=np.float64)
        return bool(
            x.shape == self.throughput.shape and np.all(x >= -tolerance)
            and np.all(x[self.throughput <= 0] <= tolerance)
            and np.all(x.sum(axis=1) <= 1 + tolerance)
            and np.all(self.scale_factors @ x <= self.capacity + tolerance))


@dataclass(frozen=True, eq=False)
class Allocation:
    """The solver's answer: time fractions ``fractions[j, k]`` (0 <= X <= 1), the objective
    value (min or sum of ``rho``), and whether the LP was solved to optimality."""

    problem: AllocationProblem
    fractions: Array
    value: float
    optimal: bool
    runtime_s: float = 0.0

    def by_job(self) -> dict[str, dict[str, float]]:
        """``{job: {gpu_type: fraction}}``."""
        return {job: {gpu_type: float(self.fractions[j, k])
                      for k, gpu_type in enumerate(self.problem.gpu_types)}
                for j, job in enumerate(self.problem.job_ids)}

    @property
    def ok(self) -> bool:
        """Whether the fractions are usable (finite and feasible)."""
        return math.isfinite(self.value) and self.problem.is_feasible(self.fractions, 1e-6)


def equal_shares(problem: AllocationProblem) -> Array:
    """A feasible allocation without an LP (the fallback when the LP fails): every job gets
    the same time share ``C_k / max(sum_j s_j, sum_k C_k)`` of each GPU type k it can run
    on (Gavel's equal share, scaled so that no type is over-filled: ``sum_j s_j X_jk <=
    C_k`` and ``sum_k X_jk <= 1``)."""
    scale = max(float(problem.scale_factors.sum()), float(problem.capacity.sum()), 1.0)
    fractions = np.where(problem.throughput > 0, problem.capacity[np.newaxis, :] / scale, 0.0)
    if not problem.is_feasible(fractions):
        raise RuntimeError("equal shares over-fill a GPU type")  # cannot happen (above)
    return np.asarray(fractions, dtype=np.float64)
