"""``fifo-fastest`` and ``fifo-packed``: Gavel's ``fifo_perf``, first in first out onto the
fastest GPU type with room, realised in rounds as ``gavel`` realises its allocation, and
its ``fifo_packed``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hetsched.core.records import Job
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.packed import PackedProblem
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem
from hetsched.policies.baselines.gavel_objectives import GavelObjective, PackedShares
from hetsched.policies.rolling import ClusterState


class FifoFastest(GavelObjective):
    """Gavel's heterogeneity-aware FIFO (``fifo_perf``): jobs in arrival order, each given
    all of its time on the fastest GPU type that still has GPUs for its gang, until a job
    finds none (:mod:`hetsched.formulations.gavel.fastest`; no backfilling). Recomputed,
    as ``gavel`` recomputes its allocation, at the first round boundary after the jobs
    changed, so a running job moves to a faster type once one frees up, ahead of the jobs
    that came after it. ``fifo`` is type-agnostic (first fit in the cluster's order);
    ``fifo-fastest-agnostic`` sees every type alike, which makes it ``fifo`` in rounds.

    Realised by ``gavel``'s rounds (``round_s``): every job the allocation gives a type
    runs there, the others wait or are preempted. No starvation guard (FIFO has none: a
    waiting job is overtaken by nobody who came after it, but by the allocation's
    re-deal; ``starvation_rounds`` is infinite by default). Work conserving by default,
    as ``gavel``: GPUs left over go to waiting jobs between rounds; with
    ``work_conserving=False`` only the rounds start jobs, as in Gavel's scheduler.

    Packed (``fifo_packed``: :func:`~hetsched.formulations.gavel.packed.fifo_packed`): the
    same onto the fastest type with room, then the next jobs packed beside placed ones
    whose pair's rates add up to more than ``packing_threshold``."""

    walks_zero_priority = False

    def __init__(self, packing_threshold: float = 1.5) -> None:
        super().__init__()
        self.packing_threshold = packing_threshold

    def alone(self, state: ClusterState, jobs: Sequence[Job], problem: AllocationProblem,
              budget: Budget) -> Allocation:
        """The greedy allocation of ``jobs`` in arrival order (then by id)."""
        from hetsched.formulations.gavel.fastest import fastest_free

        order = np.lexsort((np.array([job.id for job in jobs]),
                            np.array([job.arrival for job in jobs], dtype=np.float64)))
        fractions = fastest_free(problem, order)
        return Allocation(problem, fractions, float(fractions.sum()), True)

    def packed(self, state: ClusterState, jobs: Sequence[Job], problem: PackedProblem,
               budget: Budget) -> PackedShares:
        """Gavel's ``fifo_packed``."""
        from hetsched.formulations.gavel.packed import fifo_packed

        return fifo_packed(problem, self.packing_threshold)
