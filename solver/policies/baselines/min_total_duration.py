"""``min-total-duration``: Gavel's ``min_total_duration_perf``, the allocation that
finishes the active jobs soonest, realised in rounds as ``gavel`` realises its own."""

from __future__ import annotations

import numpy as np

from hetsched.core.records import Job
from hetsched.core.settings import DECISION_LIMIT
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem
from hetsched.policies.backends import BACKENDS_OF
from hetsched.policies.baselines.common import steps_left
from hetsched.policies.baselines.gavel import Gavel
from hetsched.policies.rolling import ClusterState

#: A running job about to finish still has this many steps left to the LP (it needs > 0).
LEAST_STEPS = 1e-9


class MinTotalDuration(Gavel):
    """Gavel's min-total-duration allocation: the time fractions that minimise the
    makespan of the active jobs, ``max_j steps_j / sum_k T_jk X_jk`` (their steps left at
    the allocation's speeds), one LP in the rate 1/T instead of Gavel's bisection on T,
    then the makespan held, the most total relative throughput
    (:mod:`hetsched.formulations.gavel.duration`). Recomputed at the first round boundary
    after the active jobs changed and realised by ``gavel``'s rounds and starvation
    guard (jobs the makespan does not need may get ``X = 0``: the guard lets them run).
    ``min-total-duration-agnostic`` sees every type alike, like Gavel's
    ``min_total_duration``, which gives every type the V100's throughput."""

    def __init__(self, *, round_s: float = 360.0, backend: str = "highs",
                 time_limit_s: float | None = DECISION_LIMIT, deterministic: bool = True,
                 starvation_rounds: float = 20.0, work_conserving: bool = True,
                 rounds: str = "hetsched") -> None:
        if backend not in BACKENDS_OF["min-total-duration"]:
            raise ValueError("min-total-duration's LP runs on "
                             f"{', '.join(BACKENDS_OF['min-total-duration'])}, not {backend}")
        super().__init__(objective="max-min", round_s=round_s, time_limit_s=time_limit_s,
                         deterministic=deterministic, starvation_rounds=starvation_rounds,
                         work_conserving=work_conserving,
                         rounds=rounds)
        self.name = "min-total-duration"

    def _allocate(self, state: ClusterState, jobs: list[Job], problem: AllocationProblem,
                  budget: Budget) -> Allocation:
        """The least-makespan allocation of ``jobs`` at ``state``."""
        from hetsched.formulations.gavel.duration import DurationProblem, min_total_duration

        steps = np.array(steps_left(state, jobs, LEAST_STEPS))
        return min_total_duration(DurationProblem(problem, steps), budget)
