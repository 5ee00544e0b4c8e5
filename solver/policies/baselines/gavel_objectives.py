"""Gavel's objectives, one family: each says how an allocation of time fractions is solved
for the active jobs alone (:meth:`GavelObjective.alone`, realised by
:class:`~hetsched.policies.baselines.gavel.Gavel`'s rounds) and, where Gavel has a packed
form, for the jobs alone and the pairs of one-GPU jobs packed on one GPU
(:meth:`GavelObjective.packed`, realised by
:class:`~hetsched.policies.baselines.gavel_packed.GavelPacked`). Here: the objective
class's interface, Gavel's own LP (max-min fairness or max-sum throughput) and max-min by
water-filling; the others beside their notes (``finish_time``, ``min_total_duration``,
``throughput_per_cost``, ``isolated``, ``fifo_fastest``); each policy's parameters record
is mapped to its objective once, in :mod:`hetsched.policies.baselines.gavel_family`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import ClassVar

from hetsched.core.fairness import tenant_of
from hetsched.core.records import Job
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.packed import PackedProblem
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Array
from hetsched.policies.backends import DEFAULT_BACKEND, HIGHS_ONLY
from hetsched.policies.rolling import ClusterState

#: A running job about to finish still has this many steps left to the LPs (they need > 0).
LEAST_STEPS = 1e-9

#: What a packed objective gives: time fractions of the jobs alone and of the pairs, or
#: ``None`` when it found none.
PackedShares = tuple[Array, Array] | None


class GavelObjective:
    """One of Gavel's objectives: its allocation of the active jobs at a solve."""

    #: Gavel's rounds (``rounds="gavel"``, and the packed rounds) walk the entries of
    #: priority 0 too (its ``_schedule_jobs_on_workers_helper``), except for its FIFO
    #: policies (``scheduler.py:829-831``)
    walks_zero_priority: ClassVar[bool] = True

    def __init__(self) -> None:
        #: a line for decisions.csv about the last solve (empty: none)
        self.note = ""

    def alone(self, state: ClusterState, jobs: Sequence[Job], problem: AllocationProblem,
              budget: Budget) -> Allocation:
        """The allocation of ``jobs`` (``problem``'s rows) at ``state``."""
        raise NotImplementedError(f"{type(self).__name__} allocates packed jobs only")

    def packed(self, state: ClusterState, jobs: Sequence[Job], problem: PackedProblem,
               budget: Budget) -> PackedShares:
        """The packed allocation of ``jobs`` and their pairs (``problem``) at ``state``."""
        raise NotImplementedError(f"Gavel has no packed form of {type(self).__name__}")

    def figures(self) -> dict[str, object]:
        """Figures for ``summary.json`` (none by default)."""
        return {}


class MaxMinOrSum(GavelObjective):
    """Gavel's allocation LP (:mod:`hetsched.formulations.gavel`): max-min fairness,
    max-sum throughput relative to each job's equal share, or Gavel's raw max-sum, built
    as arrays and solved by HiGHS, each solve warm-started from the previous one (or
    PuLP's model on CBC or SCIP). With ``partitions`` k > 1 the LP is split into POP's k
    random sub-problems (:mod:`hetsched.formulations.gavel.pop`), which an ``executor``
    solves side by side; each solve's note gives the objective it reached over the
    monolithic optimum. ``spare``: max-min's slack above the floor by the greatest sum of
    rho (``two-stage``), or an interior optimum (``central``,
    :func:`hetsched.formulations.gavel.central.central_max_min`); packed, ``two-stage``
    is the floor then the greatest sum of normalised rates, else Gavel's interior one."""

    def __init__(self, objective: str, *, backend: str = DEFAULT_BACKEND, partitions: int = 1,
                 spare: str = "two-stage", executor: Executor | None = None) -> None:
        from hetsched.formulations.gavel import AllocationSolver, Objective, PartitionedSolver

        super().__init__()
        self.objective = Objective(objective)
        self.backend = backend
        self.partitions = partitions
        self.spare = spare
        #: the LP kept between solves (warm starts), when it runs on HiGHS
        self._solver = AllocationSolver(self.objective) if partitions == 1 else \
            PartitionedSolver(self.objective, partitions, executor=executor)
        #: POP: each solve's objective over the monolithic optimum
        self.pop_ratios: list[float] = []

    def alone(self, state: ClusterState, jobs: Sequence[Job], problem: AllocationProblem,
              budget: Budget) -> Allocation:
        """The LP's answer (POP's, with partitions), or its interior optimum."""
        from hetsched.formulations.gavel import PartitionedSolver, solve_allocation

        self.note = ""
        if self.backend not in HIGHS_ONLY:
            return solve_allocation(problem, self.objective, backend=self.backend,
                                    budget=budget)
        if isinstance(self._solver, PartitionedSolver):
            split = self._solver.solve(problem, budget)
            if split.allocation.ok:
                self.pop_ratios.append(split.ratio)
                self.note = (f"POP k={self.partitions}: objective {split.ratio:.6f} of "
                             "the monolithic optimum")
            return split.allocation
        answer = self._solver.solve(problem, budget)
        if self.spare == "central" and answer.ok:
            from hetsched.formulations.gavel.central import central_max_min

            central = central_max_min(problem, answer.value, budget)
            if central is not None:
                return Allocation(problem, central, problem.objective_value(
                    self.objective, central), answer.optimal, answer.runtime_s)
        return answer

    def packed(self, state: ClusterState, jobs: Sequence[Job], problem: PackedProblem,
               budget: Budget) -> PackedShares:
        """Gavel's ``max_min_fairness_packed``."""
        from hetsched.formulations.gavel.packed import solve_packed_max_min

        return solve_packed_max_min(problem, budget, two_stage=self.spare == "two-stage")

    def figures(self) -> dict[str, object]:
        """With POP partitions: their number, and the objective each solve reached over
        the monolithic optimum (solves, min, mean); nothing without."""
        if self.partitions == 1:
            return {}
        ratios = self.pop_ratios
        return {"partitions": self.partitions, "pop_solves": len(ratios),
                "pop_objective_ratio_min": min(ratios, default=math.nan),
                "pop_objective_ratio_mean": sum(ratios) / len(ratios) if ratios else math.nan}


class WaterFilling(GavelObjective):
    """Weighted max-min by water-filling (:mod:`hetsched.formulations.gavel.water_filling`)
    of normalised rates (``share="throughput"``) or of GPUs held (``"gpus"``); with
    ``hierarchical``, over tenants, then their jobs: a job that cannot take more leaves its
    part of its tenant's weight to the tenant's other jobs (Gavel's
    ``entity_to_job_mapping``); off: every job keeps the weight it is shown with. Packed:
    Gavel's ``max_min_fairness_water_filling_packed``."""

    def __init__(self, share: str = "throughput", *, hierarchical: bool = True) -> None:
        super().__init__()
        self.share = share
        self.hierarchical = hierarchical

    def alone(self, state: ClusterState, jobs: Sequence[Job], problem: AllocationProblem,
              budget: Budget) -> Allocation:
        """The water-filling allocation of ``jobs``."""
        from hetsched.formulations.gavel.water_filling import groups_of, water_filling

        groups = groups_of([tenant_of(job) for job in jobs]) if self.hierarchical else None
        return water_filling(problem, budget, share="gpus" if self.share == "gpus"
                             else "throughput", groups=groups)

    def packed(self, state: ClusterState, jobs: Sequence[Job], problem: PackedProblem,
               budget: Budget) -> PackedShares:
        """Water-filling over the jobs alone and the pairs."""
        from hetsched.formulations.gavel.packed_objectives import packed_water_filling

        answer = packed_water_filling(problem, budget)
        return None if answer is None else (answer.alone, answer.together)
