"""``isolated``: Gavel's isolated policy, every active job an equal 1/n share of the
cluster, realised in rounds as ``gavel`` realises its allocation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hetsched.core.records import Job
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem
from hetsched.policies.baselines.gavel_objectives import GavelObjective
from hetsched.policies.rolling import ClusterState


class Isolated(GavelObjective):
    """Gavel's ``isolated`` policy: each of the n active jobs gets 1/n of every GPU type,
    ``X_jk = C_k / (n s_j)``, each row scaled down to a sum of 1 when it is more (a gang
    runs in one place at a time; :func:`hetsched.core.fairness.isolated_shares`, the
    share finish-time fairness measures against). No LP: the shares are closed form.

    Departs from Gavel on purpose: Gavel gives a job its share of a type it cannot run on
    (the time is lost); here that share is 0 (:func:`hetsched.formulations.gavel.
    finish_time.isolated_allocation`), so no round puts a job where it cannot run.
    Recomputed at the first round boundary after the jobs changed and realised by
    ``gavel``'s rounds and starvation guard."""

    def alone(self, state: ClusterState, jobs: Sequence[Job], problem: AllocationProblem,
              budget: Budget) -> Allocation:
        """1/n of the cluster for each of ``jobs``."""
        from hetsched.formulations.gavel.finish_time import isolated_allocation

        fractions = isolated_allocation(problem)
        return Allocation(problem, fractions, float(np.sum(fractions)), True)
