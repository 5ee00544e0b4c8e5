"""The central optimal allocation of finish-time fairness (and of Gavel's max-min): among
the allocations that reach the optimum, an interior one, as Gavel's conic interior-point
solver (cvxpy on ECOS) returns, instead of a vertex topped up by a second stage.

Gavel's ``finish_time_fairness_perf`` minimises only the worst ratio, so every
allocation that finishes each job within z* is optimal, and which one a solver returns
decides how the jobs far from the worst one share the cluster. An interior-point method
stopped without crossover ends near the analytic centre of the optimal face: every job
gets some time on every type it can use, and no type need be full. This solves

    max t   s.t.   sum_k T_jk x_jk >= t c_j(z*)  (every job j),
                   sum_k x_jk <= 1,   sum_j s_j x_jk <= C_k,   x >= 0

(``c_j(z*)`` the rate that finishes job j within z*; the optimum is t = 1) with HiGHS's
interior-point method and no crossover, then scales the answer down if rounding left it
a hair outside the constraints. Gavel's max-min (``max_min_fairness_perf``) is the same
with ``c_j = t* w_j E_j / s_j``, the rate that gives job j the optimal floor ``t*`` of
``rho_j = s_j / w_j T_j . x_j / E_j``. Measured beside Gavel's simulator in
docs/fairness.md and docs/policies.md.
"""

from __future__ import annotations

import highspy
import numpy as np

from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.finish_time import FinishTimeProblem
from hetsched.formulations.gavel.problem import AllocationProblem, Array
from hetsched.formulations.mip.highs import load_model
from hetsched.formulations.mip.model import INF, MatrixBuilder, MatrixModel

#: The central allocation is used if its worst ratio is within this of the optimum
#: (relative; the interior point's own tolerance is 1e-8).
CENTRAL_TOLERANCE = 1e-4


def central_allocation(problem: FinishTimeProblem, worst: float,
                       budget: Budget | None = None) -> Array | None:
    """The interior allocation whose worst ratio is ``worst`` (the optimum), or None if
    HiGHS gives none within :data:`CENTRAL_TOLERANCE` of it."""
    base = problem.allocation
    if not base.job_ids:
        return np.zeros((0, len(base.gpu_types)))
    room = worst * problem.isolated_s - problem.since_s
    if np.any(room <= 0):
        return None
    fractions = central_for_rates(base, problem.steps_left / room, budget)
    if fractions is None or problem.worst(fractions) > worst * (1.0 + CENTRAL_TOLERANCE):
        return None
    return fractions


def central_max_min(problem: AllocationProblem, floor: float,
                    budget: Budget | None = None) -> Array | None:
    """The interior allocation of Gavel's max-min whose least ``rho_j`` is ``floor`` (its
    optimum; ``rho_j = s_j / w_j T_j . x_j / E_j``), as ECOS returns for Gavel's
    ``max_min_fairness_perf``; None if HiGHS gives none within
    :data:`CENTRAL_TOLERANCE` of it."""
    if not problem.job_ids:
        return np.zeros((0, len(problem.gpu_types)))
    rates = floor * problem.weights * problem.equal_share_throughput() / problem.scale_factors
    fractions = central_for_rates(problem, rates, budget)
    if fractions is None or \
            float(problem.normalised(fractions).min()) < floor * (1.0 - CENTRAL_TOLERANCE):
        return None
    return fractions


def central_for_rates(base: AllocationProblem, need: Array,
                      budget: Budget | None = None) -> Array | None:
    """An interior allocation giving every job j at least ``need[j]`` steps/s (the LP of
    the module notes, t = 1 at the optimum), feasible; None if HiGHS gives none."""
    throughput, gangs, capacity = base.throughput, base.scale_factors, base.capacity
    jobs, types = throughput.shape
    if np.any(need <= 0):
        need = np.maximum(need, 1e-12)
    # Columns: x (job by job, a column per type; none above 0 where the job cannot run),
    # then t. Rows: the rates, one type at a time, the types' capacity.
    job_of = np.repeat(np.arange(jobs), types)
    type_of = np.tile(np.arange(types), jobs)
    pairs = np.arange(jobs * types)
    builder = MatrixBuilder()
    builder.add_columns(jobs * types, 0.0, np.where(throughput.ravel() > 0, 1.0, 0.0))
    t = builder.add_columns(1, 0.0, INF)
    builder.add_rows(np.concatenate([job_of, np.arange(jobs)]),
                     np.concatenate([pairs, np.repeat(t, jobs)]),
                     np.concatenate([(throughput / need[:, np.newaxis]).ravel(),
                                     -np.ones(jobs)]), 0.0, INF, count=jobs)
    builder.add_rows(job_of, pairs, np.ones(jobs * types), -INF, 1.0, count=jobs)
    builder.add_rows(type_of, pairs, np.repeat(gangs, types), -INF, capacity, count=types)
    cost = np.zeros(jobs * types + 1)
    cost[-1] = -1.0
    values = interior_point(builder.build(cost), budget)
    if values is None:
        return None
    fractions = np.clip(values[:-1], 0.0, 1.0)
    fractions = fractions.reshape(jobs, types)
    used = gangs @ fractions
    scale = min(1.0, 1.0 / max(1.0, float(fractions.sum(axis=1).max())),
                *(float(c / u) for c, u in zip(capacity, used, strict=True) if u > c))
    fractions = fractions * scale
    if not base.is_feasible(fractions, 1e-9):
        return None
    return np.asarray(fractions, dtype=np.float64)


def interior_point(model: MatrixModel, budget: Budget | None = None, *,
                   presolve: bool = True) -> Array | None:
    """The column values HiGHS's interior-point method ends at without crossover (a
    point inside the optimal face, as Gavel's ECOS returns), one thread; ``None`` unless
    it reports an optimum. A deterministic budget lets it run to its end; a wall-clock
    one limits it."""
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("solver", "ipm")
    highs.setOptionValue("run_crossover", "off")
    if not presolve:
        highs.setOptionValue("presolve", "off")
    highs.setOptionValue("threads", 1)
    left = None if budget is None or budget.deterministic else budget.remaining()
    if left is not None:
        highs.setOptionValue("time_limit", max(left, 0.01))
    load_model(highs, model)
    highs.run()
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return np.asarray(highs.getSolution().col_value, dtype=np.float64)
