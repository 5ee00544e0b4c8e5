"""The round's allocation MILP of the ``progress`` policy, built as arrays.

Variables: one binary ``x[k]`` per option (job, GPU type, gang size). Maximise
``sum_k value[k] x[k]`` (solved as the minimisation of its negation, with values scaled
so the largest is 1) subject to

* **one option per job**: ``sum_{k of job j} x[k] <= 1`` (a pair's option, two jobs
  packed on one GPU, is in the rows of both);
* **type capacity**: ``sum_{k of type t} size[k] x[k] <= capacity[t]``;
* **packed gangs**: ``sum_{k of type t, packed, size > server/2} x[k] <= servers[t]``,
  where ``servers[t]`` counts the servers of type ``t`` that can hold such a gang (two
  gangs of more than half a server never share one).

It is a multiple-choice knapsack with one knapsack per GPU type, whose LP relaxation has
at most as many fractional jobs as it has capacity rows, so HiGHS closes it in few
nodes. Each solve starts from the previous round's choice when it is still feasible,
else from the greedy choice (:func:`~hetsched.formulations.progress.problem.greedy`);
the answer is never worse than that start (the engine layer keeps the better of the
two). When every job's most valuable option fits beside the others' (a cluster with room
for everyone), that choice is optimal and no MILP is built
(:func:`~hetsched.formulations.progress.problem.best_each`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hetsched.core.result import Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.mip import solve_mip
from hetsched.formulations.mip.model import MatrixBuilder, MatrixModel
from hetsched.formulations.mip.result import MipSettings
from hetsched.formulations.progress.problem import RoundProblem, best_each, greedy

#: Relative gap at which a round's MILP may stop (the values are estimates; closing the
#: last 1e-6 buys nothing).
ROUND_GAP = 1e-6


@dataclass(frozen=True, eq=False)
class RoundPlan:
    """The options chosen for a round (``chosen[k]``), their total value, the MILP's
    bound on it (``None`` without one), how the solve ended and where the answer came
    from (``"milp"``, ``"start"`` when nothing beat the start, ``"greedy"`` when the
    engine gave nothing, ``"best"`` when every job's best option fits: optimal without a
    solve), the deterministic work it used and its wall seconds."""

    chosen: npt.NDArray[np.bool_]
    value: float
    bound: float | None
    outcome: Status
    source: str
    work: float
    wall_s: float


class RoundModel:
    """The MILP of one :class:`RoundProblem`, one method per constraint family."""

    def __init__(self, problem: RoundProblem) -> None:
        self.problem = problem
        self.builder = MatrixBuilder()
        self.x = self.builder.add_binaries(problem.num_options)

    def one_option_per_job(self) -> None:
        """At most one option per job (a pair's option counts for both its jobs)."""
        p = self.problem
        rows, columns = p.option_job, self.x
        if p.option_partner is not None:
            pairs = np.flatnonzero(p.option_partner >= 0)
            rows = np.concatenate([rows, p.option_partner[pairs]])
            columns = np.concatenate([columns, self.x[pairs]])
        self.builder.add_rows(rows, columns, np.ones(len(rows)), -np.inf, 1.0,
                              count=p.num_jobs)

    def type_capacity(self) -> None:
        """The GPUs given out of each type are at most its GPUs."""
        p = self.problem
        self.builder.add_rows(p.option_type, self.x, p.option_size.astype(np.float64),
                              -np.inf, p.capacity.astype(np.float64), count=len(p.capacity))

    def packed_gangs(self) -> None:
        """At most one packed gang of more than half a server per server that holds it."""
        p = self.problem
        big = np.flatnonzero(p.big_packed())
        if len(big) == 0:
            return
        types = np.unique(p.option_type[big])
        row_of = np.full(len(p.capacity), -1, dtype=np.int64)
        row_of[types] = np.arange(len(types))
        self.builder.add_rows(row_of[p.option_type[big]], self.x[big], np.ones(len(big)),
                              -np.inf, p.servers_over_half[types].astype(np.float64),
                              count=len(types))

    def build(self) -> MatrixModel:
        """All families, and the objective (the negated values, largest scaled to 1)."""
        self.one_option_per_job()
        self.type_capacity()
        self.packed_gangs()
        scale = max(float(self.problem.value.max(initial=0.0)), 1e-300)
        return self.builder.build(-self.problem.value / scale)


def solve_round(problem: RoundProblem, budget: Budget, engine: str = "highs",
                gap: float | None = None) -> RoundPlan:
    """The best choice of options ``engine`` finds within ``budget`` and the relative
    ``gap`` (``None``: :data:`ROUND_GAP`), never worse than the start: the previous round's
    choice if still feasible, else the greedy one."""
    if problem.num_options == 0 or not problem.value.any():  # nothing is worth anything
        return RoundPlan(np.zeros(problem.num_options, dtype=np.bool_), 0.0, 0.0,
                         Status.OPTIMAL, "start", 0.0, 0.0)
    best = best_each(problem)
    if best is not None:  # everyone's best option fits: optimal without a solve
        return RoundPlan(best, problem.worth(best), problem.worth(best), Status.OPTIMAL,
                         "best", 0.0, 0.0)
    fallback = greedy(problem)  # (a loop over the options: only when the MILP runs)
    start = fallback
    if problem.start is not None and problem.feasible(problem.start) and \
            problem.worth(problem.start) > problem.worth(fallback):
        start = problem.start
    model = RoundModel(problem).build()
    scale = max(float(problem.value.max()), 1e-300)
    settings = MipSettings(gap=ROUND_GAP if gap is None else gap, presolve=False)
    result = solve_mip(model, engine, budget, settings, start.astype(np.float64))
    if result.values is None:
        return RoundPlan(start, problem.worth(start), None, result.outcome, "greedy",
                         result.work, result.wall_s)
    chosen = result.values > 0.5
    if not problem.feasible(chosen) or problem.worth(chosen) < problem.worth(start):
        chosen = start
    source = "start" if result.detail.get("source") == "start" or chosen is start else "milp"
    bound = None if result.bound is None else -result.bound * scale
    return RoundPlan(chosen, problem.worth(chosen), bound, result.outcome, source,
                     result.work, result.wall_s)
