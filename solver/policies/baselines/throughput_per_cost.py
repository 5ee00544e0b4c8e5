"""``max-throughput-per-cost`` (and ``-raw``, ``-packed``): Gavel's
``max_sum_throughput_normalized_by_cost_perf`` (and, with ``meet_deadlines``, its ``_SLOs``
version), realised in rounds as ``gavel`` realises its allocation, and its
``max_sum_throughput_normalized_by_cost_packed_SLOs``."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np

from hetsched.core.prices import prices_for
from hetsched.core.records import Job
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.packed import PackedProblem
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem
from hetsched.policies.baselines.common import deadline_rates
from hetsched.policies.baselines.gavel_objectives import GavelObjective, PackedShares
from hetsched.policies.rolling import ClusterState

log = logging.getLogger(__name__)


class ThroughputPerCost(GavelObjective):
    """Gavel's cost policy: the time fractions of most throughput per dollar,
    ``max sum_j sum_k T_jk X_jk / (E_j p_k)`` (each job's throughput relative to its
    equal share, over the price of a GPU of the type per hour;
    :mod:`hetsched.formulations.gavel.cost`). With ``meet_deadlines`` (Gavel's SLOs), a
    job with a deadline must get at least ``steps_left / (deadline - now)`` steps/s.

    ``prices``: USD per GPU-hour by GPU type, over the cluster's own prices (a replay's
    ``--prices`` sets those; :func:`hetsched.core.prices.prices_for`); a type of the
    cluster without a price is a :class:`ValueError` naming it, at the first solve.

    Recomputed at the first round boundary after the active jobs changed and realised by
    ``gavel``'s rounds and starvation guard (the LP gives ``X = 0`` to jobs that earn
    little per dollar: the guard lets them run). ``max-throughput-per-cost-agnostic``
    sees every type alike: it then puts jobs on the cheapest types. ``normalized=False``
    (``max-throughput-per-cost-raw``) sums raw steps/s, as Gavel's code does."""

    def __init__(self, prices: Mapping[str, float], *, meet_deadlines: bool = False,
                 normalized: bool = True) -> None:
        super().__init__()
        #: USD per GPU-hour given by the caller (over the cluster's and the defaults)
        self.prices = prices
        #: each job with a deadline must get the speed that meets it
        self.meet_deadlines = meet_deadlines
        #: each job's throughput over its equal share (off: Gavel's raw steps/s)
        self.normalized = normalized
        #: deadlines the LP was not made to meet, summed over the solves
        self.deadlines_left_out = 0

    def alone(self, state: ClusterState, jobs: Sequence[Job], problem: AllocationProblem,
              budget: Budget) -> Allocation:
        """The allocation of most throughput per dollar of ``jobs`` at ``state``."""
        from hetsched.formulations.gavel.cost import CostProblem, max_throughput_per_cost

        prices = np.array(prices_for(state.cluster.gpu_types, self.prices))
        need = deadline_rates(state, jobs) if self.meet_deadlines else np.zeros(len(jobs))
        answer = max_throughput_per_cost(CostProblem(problem, prices, need, self.normalized),
                                         budget)
        left_out = int(np.count_nonzero(need > 0)) - len(answer.kept)
        if left_out and answer.allocation.ok:
            self.deadlines_left_out += left_out
            log.debug("t=%g: %d of %d deadlines left out of the cost LP", state.now,
                      left_out, int(np.count_nonzero(need > 0)))
        return answer.allocation

    def packed(self, state: ClusterState, jobs: Sequence[Job], problem: PackedProblem,
               budget: Budget) -> PackedShares:
        """The packed allocation of most throughput per dollar."""
        from hetsched.formulations.gavel.packed_objectives import packed_throughput_per_cost

        prices = np.array(prices_for(state.cluster.gpu_types, self.prices))
        need = deadline_rates(state, jobs) if self.meet_deadlines else np.zeros(len(jobs))
        answer = packed_throughput_per_cost(problem, prices, need, self.normalized, budget)
        return None if answer is None else (answer.alone, answer.together)

    def figures(self) -> dict[str, object]:
        """With ``meet_deadlines``: the deadlines left out of the LP, over the solves."""
        return {"deadlines_left_out": self.deadlines_left_out} if self.meet_deadlines else {}
