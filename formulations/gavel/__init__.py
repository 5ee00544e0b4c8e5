"""Gavel's heterogeneity-aware allocation (Narayanan et al., OSDI 2020): an LP over the
fraction of time each job spends on each GPU type, max-min fair or max-sum throughput.
The round-by-round realisation is the rolling policy ``hetsched.baselines.gavel``."""

from __future__ import annotations

from hetsched.formulations.gavel.lp import GavelLp, solve_allocation
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Objective

__all__ = ["Allocation", "AllocationProblem", "GavelLp", "Objective", "solve_allocation"]
