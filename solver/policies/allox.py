"""``allox``: AlloX (EuroSys 2020) min-cost matching of jobs to (GPU, position) slots.

Minimises total completion time exactly when every job runs on one GPU, all jobs
are present and weights are equal; ``SolveOptions.alpha`` < 1 is AlloX's fairness
knob. Back-ends: ``matching`` (exact assignment algorithm), ``cbc`` and ``highs``
(the same matching as a PuLP model). Models in :mod:`hetsched.formulations.allox`.
"""

from __future__ import annotations

from typing import ClassVar

from hetsched.data import Instance
from hetsched.policies import SolveOptions
from hetsched.result import Result, Schedule


class AlloxPolicy:
    """The AlloX matching on an assignment algorithm or a MILP back-end."""

    name: ClassVar[str] = "allox"
    backends: ClassVar[tuple[str, ...]] = ("matching", "highs", "cbc", "scip")
    default_time_limit_s: ClassVar[float | None] = 60.0

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job; objective = total weighted JCT (s) of the realised schedule."""
        from hetsched.formulations.allox import solve_allox

        outcome = solve_allox(instance, options)
        schedule = outcome.schedule if outcome.schedule is not None else Schedule()
        return Result(outcome.status, outcome.objective, outcome.bound, 0.0, schedule,
                      self.name, message=outcome.message, extra=outcome.extra)
