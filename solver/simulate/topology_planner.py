"""``topology`` as a static planner: its rolling form
(:class:`~hetsched.policies.topology.TopologyAdmission`: FIFO admission at every event,
the exact placement model for each batch) run by the simulator on the instance, so static
solves and replays share one event loop."""

from __future__ import annotations

from typing import ClassVar

from hetsched.core.records import Instance
from hetsched.core.result import Result
from hetsched.formulations.budget import Budget
from hetsched.formulations.options import SolveOptions
from hetsched.policies.backends import CPSAT_OR_MIP
from hetsched.policies.topology import TopologyAdmission
from hetsched.simulate.simulated import simulate_instance


class TopologyPlanner:
    """FIFO admission, exact topology-aware placement per batch (module docstring of
    :mod:`hetsched.policies.topology`)."""

    name: ClassVar[str] = "topology"
    backends: ClassVar[tuple[str, ...]] = CPSAT_OR_MIP
    default_time_limit_s: ClassVar[float | None] = 60.0
    replan_preemptive: ClassVar[bool] = False

    def unrunnable(self, instance: Instance) -> dict[str, str]:
        """None: every job the instance accepts is placed (spread when it must)."""
        return {}

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Schedule every job; the objective is the total communication cost (seconds per
        GB, weighted by sensitivity) of the placements, the bound the sum of the batches'
        proven bounds."""
        budget = options.budget or Budget(options.time_limit_s,
                                          deterministic=options.deterministic)
        admission = TopologyAdmission(instance, backend=options.backend or self.backends[0],
                                      budget=budget, threads=options.threads,
                                      seed=options.seed)
        return admission.result(simulate_instance(instance, admission, 0.0).schedule())
