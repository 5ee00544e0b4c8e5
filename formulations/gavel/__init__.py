"""Gavel's heterogeneity-aware allocation (Narayanan et al., OSDI 2020): an LP over the
fraction of time each job spends on each GPU type, max-min fair or max-sum throughput.
The round-by-round realisation is the rolling policy ``hetsched.policies.baselines.gavel``.

:func:`solve_allocation` dispatches on the back-end: ``highs`` solves the LP built as
arrays (:mod:`.matrix`, over job classes), ``cbc`` and ``scip`` the readable PuLP model
(:mod:`.lp`); :mod:`.pop` splits it into POP's random partitions. Gavel's other
policies: :mod:`.finish_time` (``ftf``), :mod:`.duration` (least makespan), :mod:`.cost`
(throughput per dollar), :mod:`.fastest` (``fifo_perf``'s greedy), over the shared
columns and stages of :mod:`.class_lp`."""

from __future__ import annotations

from hetsched.formulations.gavel.lp import GavelLp, solve_allocation
from hetsched.formulations.gavel.matrix import AllocationSolver, JobClasses, solve_matrix
from hetsched.formulations.gavel.pop import PartitionedAllocation, PartitionedSolver
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Objective

__all__ = ["Allocation", "AllocationProblem", "AllocationSolver", "GavelLp", "JobClasses",
           "Objective", "PartitionedAllocation", "PartitionedSolver", "solve_allocation",
           "solve_matrix"]
