"""Gavel's ``fifo_perf`` allocation: jobs in arrival order, each given all of its time on
the fastest GPU type that still has GPUs for its gang, until a job finds none.

Gavel's ``FIFOPolicy(mode='perf')`` (``scheduler/policies/fifo.py``) recomputes this
from scratch whenever the jobs change, so a job that was given a slow type moves to a
faster one that frees up, and a later job loses its GPUs to an earlier one that moved
(its types re-dealt in arrival order). Ties between equally fast types go to the first
in the cluster's order (Gavel: the first by name).

Departs from Gavel on purpose: Gavel stops at the first job whose gang fits on no type,
but *skips* a job whose fastest type with room cannot run it at all (a job only the
full V100s can run lets later jobs take the K80s ahead of it). Here such a job stops the
queue as well: first in, first out, no backfilling, like ``fifo``.
"""

from __future__ import annotations

import numpy as np

from hetsched.formulations.gavel.problem import AllocationProblem, Array
from hetsched.formulations.mip.model import Index


def fastest_free(problem: AllocationProblem, order: Index) -> Array:
    """The allocation (jobs x types, each row all 0 or a single 1) of ``problem``'s jobs
    taken in ``order`` (row indices, first in first), each onto its fastest type with at
    least its gang's GPUs left, until one finds none where it can run.

    The walk is sequential (each job takes GPUs from the next), but it allocates at
    least one GPU per job it passes, so it takes at most as many steps as the cluster
    has GPUs, however long the queue."""
    fractions = np.zeros(problem.throughput.shape)
    left = problem.capacity.copy()
    for row in np.asarray(order, dtype=np.int64).tolist():
        speed = np.where(left >= problem.scale_factors[row], problem.throughput[row], 0.0)
        best = int(np.argmax(speed))  # (the first of equal ones)
        if speed[best] <= 0:
            break
        fractions[row, best] = 1.0
        left[best] -= problem.scale_factors[row]
    return fractions
