"""``allox``: AlloX (EuroSys 2020) min-cost matching of jobs to (GPU, position) slots.

Minimises total completion time exactly when every job runs on one GPU, all jobs
are present and weights are equal; ``alpha`` < 1 (the constructor's) is AlloX's fairness
knob. Back-ends: ``matching`` (exact assignment algorithm), ``cbc`` and ``highs``
(the same matching as a PuLP model). Models in :mod:`hetsched.formulations.allox`.
"""

from __future__ import annotations

from typing import ClassVar

from hetsched.core.errors import InputError
from hetsched.core.records import Instance
from hetsched.core.result import Result
from hetsched.policies.backends import MATCHING_OR_MIP
from hetsched.policies.planner import SolveOptions, outcome_result


class AlloxPlanner:
    """The AlloX matching on an assignment algorithm or a MILP back-end."""

    name: ClassVar[str] = "allox"
    backends: ClassVar[tuple[str, ...]] = MATCHING_OR_MIP
    default_time_limit_s: ClassVar[float | None] = 60.0
    replan_preemptive: ClassVar[bool] = False

    def __init__(self, alpha: float = 1.0) -> None:
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha <= 1:
            raise InputError("bad alpha", path="alpha", value=alpha,
                             expected="a number in (0, 1]")
        #: AlloX's fairness knob: 1 is pure completion time.
        self.alpha = float(alpha)

    def unrunnable(self, instance: Instance) -> dict[str, str]:
        """The jobs that cannot run packed on one GPU (or, when some job cannot, on one
        whole node) of any type: AlloX matches jobs to such machines."""
        from hetsched.formulations.allox.problem import fastest_processing, machines_for

        whole_nodes = not all(any(c.num_gpus == 1 for c in instance.configurations(job))
                              for job in instance.jobs)
        shapes = {(m.gpu_type, len(m.gpus)) for m in machines_for(instance, whole_nodes)}
        why = "it cannot run packed on " + ("one whole node" if whole_nodes else "one GPU") + \
            " of any type (allox matches jobs to single GPUs, or whole nodes)"
        return {job.id: why for job in instance.jobs if not any(
            fastest_processing(instance, job, gpu_type, size, whole_nodes)
            for gpu_type, size in shapes)}

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job; objective = total weighted JCT (s) of the realised schedule."""
        from hetsched.formulations.allox import solve_allox

        return outcome_result(solve_allox(instance, options, alpha=self.alpha), self.name)
