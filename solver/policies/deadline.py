"""``deadline``: deadline-aware heterogeneous assignment (Hydra-style), exact models.

Each job gets a GPU type, a gang size among its allowed sizes and a start time;
the objective is lexicographic, first the deadline term (missed deadlines or
total weighted tardiness, the constructor's ``objective``), then total
weighted completion time (s). Solved in CP-SAT (``cpsat``) or as a MILP
(``cbc``, ``highs``); the mathematics is in docs/formulations.md and the models in
:mod:`hetsched.formulations.deadline`.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from hetsched.data import Instance
from hetsched.errors import InputError
from hetsched.policies import SolveOptions, outcome_result
from hetsched.result import Result

log = logging.getLogger(__name__)


class DeadlinePolicy:
    """The ``deadline`` model on CP-SAT or a MILP back-end."""

    name: ClassVar[str] = "deadline"
    backends: ClassVar[tuple[str, ...]] = ("cpsat", "highs", "cbc", "scip")
    default_time_limit_s: ClassVar[float | None] = 60.0
    #: Replanned in a replay, it sees the running jobs (pinned to their nodes) and may
    #: preempt them (:class:`~hetsched.replanning.Replanning`).
    replan_preemptive: ClassVar[bool] = True

    def __init__(self, objective: str = "missed") -> None:
        if objective not in ("missed", "tardiness"):
            raise InputError("unknown deadline objective", path="objective", value=objective,
                             expected="missed or tardiness")
        #: The first objective term: deadlines missed, or total weighted tardiness (s).
        self.objective = objective

    def unrunnable(self, instance: Instance) -> dict[str, str]:
        """The gangs with no packed configuration: the model runs every gang on one node."""
        from hetsched.formulations.deadline.problem import build_problem

        why = ("no packed configuration (all its GPUs on one node) has throughput > 0; the "
               "deadline model runs gangs packed")
        return dict.fromkeys(build_problem(instance).unplaceable, why)

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job; objective = total weighted JCT (s) once the deadline term
        is at its best value (see :func:`hetsched.formulations.deadline.solve_deadline`)."""
        from hetsched.formulations.deadline import solve_deadline

        return outcome_result(solve_deadline(instance, options, first_term=self.objective),
                              self.name)

