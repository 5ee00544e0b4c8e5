"""Gavel's max-min allocation with space sharing (its ``max_min_fairness_packed``,
``MaxMinFairnessPolicyWithPacking``): time fractions for every job alone *and* for every
pair of one-GPU jobs packed on one GPU, each job of a pair at its measured speed beside
the other (:class:`hetsched.core.sharing.CoLocationModel`).

With ``x[j, k]`` job j's time alone on type k and ``y[p, k]`` pair p's time together on
one GPU of type k, it solves

    max z   s.t.   s_j / (w_j E_j) * (sum_k T_jk x_jk + sum_{p of j} sum_k P_jpk y_pk) >= z,
                   sum_k x_jk + sum_{p of j} sum_k y_pk <= 1          (every job j),
                   sum_j s_j x_jk + sum_p y_pk <= C_k                  (every type k),
                   x, y >= 0,  0 where the job or the pair cannot run,

``E_j`` the job's throughput on an equal share of the cluster alone (Gavel's
proportional throughput, as in :mod:`hetsched.formulations.gavel.problem`), ``P_jpk`` job
j's steps/s beside its partner in pair p. As Gavel's code (cvxpy on ECOS, an interior
point), it is solved by HiGHS's interior-point method without crossover: of the many
optimal allocations, one in the interior of the optimal face (docs/policies.md). Every
array is built at once (no loop over jobs or pairs); pairs are of one-GPU jobs only
(hetsched packs one GPU: ``Start.packed``), where Gavel pairs any two jobs of one gang
size.
"""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np
import numpy.typing as npt

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.central import interior_point
from hetsched.formulations.gavel.lp import MAX_MIN_RELAXATION
from hetsched.formulations.gavel.matrix import run_highs
from hetsched.formulations.gavel.problem import AllocationProblem, Array
from hetsched.formulations.mip.highs import load_model
from hetsched.formulations.mip.model import INF, MatrixBuilder, MatrixModel

Index = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class PackedProblem:
    """The jobs alone (``alone``: its throughput, gangs, capacities and weights) and the
    pairs: ``first[p]``, ``second[p]`` rows of ``alone`` (one-GPU jobs), and
    ``first_speed[p, k]``, ``second_speed[p, k]`` each one's steps/s beside the other on a
    GPU of type k (0 where the pair is not measured there)."""

    alone: AllocationProblem
    first: Index
    second: Index
    first_speed: Array
    second_speed: Array

    def __post_init__(self) -> None:
        pairs, types = len(self.first), len(self.alone.gpu_types)
        for name in ("first_speed", "second_speed"):
            if getattr(self, name).shape != (pairs, types):
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected "
                                 f"{(pairs, types)}")
        if len(self.second) != pairs or (pairs and (
                np.any(self.first == self.second) or
                np.any(self.alone.scale_factors[self.first] != 1) or
                np.any(self.alone.scale_factors[self.second] != 1))):
            raise ValueError("pairs are of two different one-GPU jobs")

    @classmethod
    def without_pairs(cls, alone: AllocationProblem) -> PackedProblem:
        """``alone``'s jobs with no pair: the unpacked allocation problem."""
        none = np.zeros(0, dtype=np.int64)
        types = len(alone.gpu_types)
        return cls(alone, none, none.copy(), np.zeros((0, types)), np.zeros((0, types)))

    def rates(self, alone: Array, together: Array) -> Array:
        """Each job's steps/s under ``alone`` (jobs x types) and ``together`` (pairs x
        types) time fractions."""
        speed = (self.alone.throughput * alone).sum(axis=1)
        np.add.at(speed, self.first, (self.first_speed * together).sum(axis=1))
        np.add.at(speed, self.second, (self.second_speed * together).sum(axis=1))
        return np.asarray(speed, dtype=np.float64)

    def normalised(self, alone: Array, together: Array) -> Array:
        """``rho_j``: each job's rate over its equal share, per GPU of its gang, over its
        weight (the objective's terms)."""
        base = self.alone
        return np.asarray(base.scale_factors / base.weights * self.rates(alone, together)
                          / base.equal_share_throughput(), dtype=np.float64)

    def is_feasible(self, alone: Array, together: Array, tolerance: float = 1e-7) -> bool:
        """Nonnegative, 0 where nothing runs, each job's time <= 1, each type's GPUs."""
        base = self.alone
        time = alone.sum(axis=1)
        np.add.at(time, self.first, together.sum(axis=1))
        np.add.at(time, self.second, together.sum(axis=1))
        dead = (self.first_speed <= 0) | (self.second_speed <= 0)
        return bool(np.all(alone >= -tolerance) and np.all(together >= -tolerance)
                    and np.all(alone[base.throughput <= 0] <= tolerance)
                    and np.all(together[dead] <= tolerance)
                    and np.all(time <= 1 + tolerance)
                    and np.all(base.scale_factors @ alone + together.sum(axis=0)
                               <= base.capacity + tolerance))


def solve_packed_max_min(problem: PackedProblem, budget: Budget | None = None, *,
                         two_stage: bool = False) -> tuple[Array, Array] | None:
    """The interior max-min allocation (module notes): time fractions of the jobs alone
    and of the pairs, feasible; ``None`` if HiGHS gives none. With ``two_stage``, as
    ``gavel``'s LP: the floor by the simplex, then, every job kept at it, the greatest
    sum of normalised rates (a vertex: the pairs and types that add the most)."""
    base = problem.alone
    jobs, types = base.throughput.shape
    if jobs == 0:
        return np.zeros((0, types)), np.zeros((len(problem.first), types))
    weight = base.scale_factors / (base.weights * base.equal_share_throughput())
    columns = PackedColumns(problem)
    builder = columns.builder
    z = builder.add_columns(1, 0.0, INF)
    rows, cols, speed = columns.rate_terms()
    builder.add_rows(  # each job's normalised rate, less z, >= 0
        np.concatenate([rows, np.arange(jobs)]), np.concatenate([cols, np.repeat(z, jobs)]),
        np.concatenate([speed * weight[rows], -np.ones(jobs)]), 0.0, INF, count=jobs)
    columns.add_limits()
    cost = np.zeros(builder.num_cols)
    cost[-1] = -1.0
    if two_stage:
        found = _two_stage(builder.build(cost), int(z[0]), cols, speed * weight[rows],
                           budget or Budget(None))
    else:
        # (without presolve: it solves a small LP to "unknown", with no optimum reported)
        found = interior_point(builder.build(cost), budget, presolve=False)
    return None if found is None else columns.allocation(found)


def _two_stage(model: MatrixModel, z: int, columns: Index, rates: Array, budget: Budget
               ) -> Array | None:
    """The max-min floor of ``model`` (its column ``z``), then, z held there (less
    :data:`MAX_MIN_RELAXATION` of it), the greatest sum of ``rates`` (each ``columns``'
    normalised rate per unit) by HiGHS's simplex; ``None`` unless both end optimal."""
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", 1)
    load_model(highs, model)
    if not run_highs(highs, budget):
        return None
    floor = float(highs.getSolution().col_value[z])
    highs.changeColBounds(z, floor * (1.0 - MAX_MIN_RELAXATION), INF)
    cost = np.zeros(model.num_cols)
    np.add.at(cost, columns, -rates)
    highs.changeColsCost(model.num_cols, np.arange(model.num_cols, dtype=np.int32), cost)
    if not run_highs(highs, budget):
        return None
    return np.asarray(highs.getSolution().col_value, dtype=np.float64)


class PackedColumns:
    """The columns of a packed allocation LP, x (job by job, a column per type) then y
    (pair by pair), none above 0 where the job or the pair cannot run, and the rows every
    allocation has (:meth:`add_limits`): each job's time, alone and in its pairs, <= 1;
    each type's GPUs (a gang alone takes its GPUs, a pair one). Further columns and rows
    go in ``builder``."""

    def __init__(self, problem: PackedProblem) -> None:
        self.problem = problem
        base = problem.alone
        jobs, types = base.throughput.shape
        pairs = len(problem.first)
        self.x_jobs = np.repeat(np.arange(jobs), types)
        self.x_types = np.tile(np.arange(types), jobs)
        self.y_pairs = np.repeat(np.arange(pairs), types)
        self.y_types = np.tile(np.arange(types), pairs)
        alive = (problem.first_speed > 0) & (problem.second_speed > 0)
        builder = self.builder = MatrixBuilder()
        self.x = builder.add_columns(jobs * types, 0.0,
                                     np.where(base.throughput.ravel() > 0, 1.0, 0.0))
        self.y = builder.add_columns(pairs * types, 0.0, np.where(alive.ravel(), 1.0, 0.0))

    def add_limits(self) -> None:
        """The rows every allocation has (the class notes)."""
        problem, builder = self.problem, self.builder
        base = problem.alone
        jobs, types = base.throughput.shape
        pairs = len(problem.first)
        first, second = problem.first[self.y_pairs], problem.second[self.y_pairs]
        builder.add_rows(  # each job's time, alone and in its pairs, <= 1
            np.concatenate([self.x_jobs, first, second]),
            np.concatenate([self.x, self.y, self.y]),
            np.ones(jobs * types + 2 * pairs * types), -INF, 1.0, count=jobs)
        builder.add_rows(  # each type's GPUs
            np.concatenate([self.x_types, self.y_types]), np.concatenate([self.x, self.y]),
            np.concatenate([np.repeat(base.scale_factors, types), np.ones(pairs * types)]),
            -INF, base.capacity, count=types)

    def rate_terms(self) -> tuple[Index, Index, Array]:
        """Each job's steps/s as (job row, column, steps/s per unit of the column): its
        speed alone on each type, and beside its partner in each of its pairs."""
        problem = self.problem
        return (np.concatenate([self.x_jobs, problem.first[self.y_pairs],
                                problem.second[self.y_pairs]]),
                np.concatenate([self.x, self.y, self.y]),
                np.concatenate([problem.alone.throughput.ravel(), problem.first_speed.ravel(),
                                problem.second_speed.ravel()]))

    def allocation(self, values: Array) -> tuple[Array, Array] | None:
        """The time fractions alone (jobs x types) and together (pairs x types) of the
        column ``values``, scaled back in if rounding left them a hair outside a row;
        ``None`` if they are still not feasible."""
        problem = self.problem
        base = problem.alone
        jobs, types = base.throughput.shape
        pairs = len(problem.first)
        values = np.clip(values[:jobs * types + pairs * types], 0.0, 1.0)
        alone = values[:jobs * types].reshape(jobs, types)
        together = values[jobs * types:].reshape(pairs, types)
        time = alone.sum(axis=1)
        np.add.at(time, problem.first, together.sum(axis=1))
        np.add.at(time, problem.second, together.sum(axis=1))
        used = base.scale_factors @ alone + together.sum(axis=0)
        scale = min(1.0, 1.0 / max(1.0, float(time.max(initial=0.0))),
                    *(float(c / u) for c, u in zip(base.capacity, used, strict=True)
                      if u > c))
        alone, together = alone * scale, together * scale
        if not problem.is_feasible(alone, together, 1e-9):
            return None
        return np.asarray(alone, dtype=np.float64), np.asarray(together, dtype=np.float64)


def fifo_packed(problem: PackedProblem, threshold: float = 1.5) -> tuple[Array, Array]:
    """Gavel's ``fifo_packed`` allocation (``FIFOPolicy(mode="packing")``, 0 or 1 per job
    or pair and type): the jobs in order (rows: arrival order) each onto the type of
    most throughput with room for its gang (types in name order on ties), until one fits
    nowhere, which is dropped from the round, as Gavel pops it; a job whose best such
    type cannot run it is skipped. Then each next job is packed beside the job already
    placed alone (placement order) with which its pair's normalised rate, the two
    factors added, is largest and above ``threshold``, taking that job's type; the first
    job with no such partner ends the packing (first in, first out)."""
    base = problem.alone
    jobs, types = base.throughput.shape
    alone = np.zeros((jobs, types))
    together = np.zeros((len(problem.first), types))
    room = base.capacity.astype(np.float64).copy()
    by_name = sorted(range(types), key=lambda k: base.gpu_types[k])
    open_types = [k for k in by_name if room[k] > 0]
    queue = list(range(jobs))
    placed: dict[int, int] = {}  # job placed alone -> its type (in placement order)
    while queue and open_types:
        job = queue.pop(0)
        fitting = [k for k in open_types if room[k] >= base.scale_factors[job]]
        if not fitting:
            break
        best = max(fitting, key=lambda k: (base.throughput[job, k], -fitting.index(k)))
        if base.throughput[job, best] > 0:
            alone[job, best] = 1.0
            placed[job] = best
            room[best] -= base.scale_factors[job]
            if room[best] <= 0:
                open_types.remove(best)
    pair_of = {(int(a), int(b)): p for p, (a, b) in enumerate(zip(problem.first,
                                                                  problem.second,
                                                                  strict=True))}
    while queue:
        job = queue.pop(0)
        partner, gain, pair = -1, threshold, -1
        for other, column in placed.items():
            found = pair_of.get((min(job, other), max(job, other)))
            if found is None or base.scale_factors[other] != base.scale_factors[job]:
                continue
            rates = [speed / base.throughput[row, column]
                     for speed, row in ((problem.first_speed[found, column],
                                         problem.first[found]),
                                        (problem.second_speed[found, column],
                                         problem.second[found]))
                     if speed > 0 and base.throughput[row, column] > 0]
            if sum(rates) > gain:
                partner, gain, pair = other, sum(rates), found
        if partner < 0:
            break
        column = placed.pop(partner)
        alone[partner, column] = 0.0
        together[pair, column] = 1.0
    return alone, together
