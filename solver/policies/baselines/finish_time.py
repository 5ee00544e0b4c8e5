"""Finish-time fairness (``ftf``, ``ftf-packed``): Gavel's heterogeneity-aware
``finish_time_fairness_perf`` allocation (Themis's rho, NSDI 2020), realised in rounds as
``gavel`` realises its own, and its ``finish_time_fairness_packed``."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from hetsched.core.records import Job
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.packed import PackedProblem
from hetsched.formulations.gavel.problem import Allocation, AllocationProblem, Array
from hetsched.policies.baselines.common import steps_left
from hetsched.policies.baselines.gavel_objectives import (
    LEAST_STEPS,
    GavelObjective,
    PackedShares,
)
from hetsched.policies.rolling import ClusterState

#: ``spare="auto"``: the LP iteration up to this many active jobs, the prices above.
AUTO_LP_JOBS = 500

log = logging.getLogger(__name__)


class FinishTime(GavelObjective):
    """Gavel's finish-time-fairness allocation, recomputed as ``gavel`` recomputes its own
    (the first round boundary after the active jobs changed) and realised the same way
    (rounds of ``round_s``, priorities by share over time received, the starvation
    guard).

    Each solve minimises the largest ratio of a job's expected finish time (time since
    its arrival plus its steps left at the allocation's speed) to its isolated time
    (:mod:`hetsched.formulations.gavel.finish_time`). A job's isolated time adds up, as
    Gavel's (:class:`IsolatedTimes`): the steps it did between two solves at the isolated
    speed of the earlier one (1/n of the cluster, n the jobs active then), plus its steps
    left at today's. ``ftf-agnostic`` sees every GPU type alike (the registry's
    ``-agnostic`` variant), like Gavel's ``finish_time_fairness``, which gives every type
    the V100's throughput. The objective counts the worst job only; ``spare`` says which
    of the allocations that reach it is used
    (:class:`~hetsched.policies.baselines.gavel_params.FinishTimeParams`).
    """

    def __init__(self, spare: str = "auto") -> None:
        from hetsched.formulations.gavel.finish_time import FinishTimeSolver

        super().__init__()
        self.spare = spare
        self._finish = FinishTimeSolver("lp" if spare == "lp" else "prices")
        #: the LP iteration, for ``spare="auto"`` on few jobs
        self._finish_lp = FinishTimeSolver("lp") if spare == "auto" else self._finish
        #: each job's isolated time, as Gavel counts it
        self.isolated = IsolatedTimes()

    def alone(self, state: ClusterState, jobs: Sequence[Job], problem: AllocationProblem,
              budget: Budget) -> Allocation:
        """The finish-time-fairness allocation of ``jobs`` at ``state``."""
        from hetsched.formulations.gavel.finish_time import FinishTimeProblem, isolated_speeds

        steps = np.array(steps_left(state, jobs, LEAST_STEPS))
        isolated = self.isolated.at_solve(jobs, steps, isolated_speeds(problem))
        since = np.array([max(0.0, state.now - job.arrival) for job in jobs])
        finish = FinishTimeProblem(problem, since, steps, isolated)
        solver = self._finish_lp if len(jobs) <= AUTO_LP_JOBS else self._finish
        answer = solver.solve(finish, budget)
        if self.spare == "central" and answer.ok and answer.problem.job_ids:
            from hetsched.formulations.gavel.central import central_allocation

            central = central_allocation(finish, answer.value, budget)
            if central is not None:
                return Allocation(answer.problem, central, finish.worst(central),
                                  answer.optimal, answer.runtime_s)
            log.debug("t=%g: no central allocation; the greedy one is used", state.now)
        return answer

    def packed(self, state: ClusterState, jobs: Sequence[Job], problem: PackedProblem,
               budget: Budget) -> PackedShares:
        """Gavel's packed finish-time fairness; each job's isolated time adds up as
        :meth:`alone`'s does, its isolated speed alone with 1/n of the cluster, as
        Gavel's."""
        from hetsched.formulations.gavel.finish_time import isolated_allocation
        from hetsched.formulations.gavel.packed_objectives import packed_finish_time

        steps = np.array(steps_left(state, jobs, LEAST_STEPS))
        start = isolated_allocation(problem.alone)
        speeds = (problem.alone.throughput * start).sum(axis=1)
        isolated = self.isolated.at_solve(jobs, steps, speeds)
        if np.any(speeds <= 0):  # (a job no type with GPUs can run: no ratio for it)
            return None
        since = np.array([max(0.0, state.now - job.arrival) for job in jobs])
        answer = packed_finish_time(problem, since, steps, isolated,
                                    (start, np.zeros((len(problem.first), start.shape[1]))),
                                    budget)
        return None if answer is None else (answer.alone, answer.together)


class IsolatedTimes:
    """Each job's isolated time as Gavel's finish-time fairness counts it (its
    ``_cumulative_isolated_time``): the steps it did between two solves at the isolated
    speed of the earlier one (1/n of the cluster, n the jobs active then), plus its steps
    left at today's."""

    def __init__(self) -> None:
        #: each job's isolated time (s) for the steps it did up to the last solve
        self._done: dict[str, float] = {}
        #: each job's steps left and isolated speed (steps/s) at the last solve
        self._at_solve: dict[str, tuple[float, float]] = {}

    @property
    def done(self) -> dict[str, float]:
        """Each job's isolated time (s) for the steps it did up to the last solve."""
        return dict(self._done)

    def at_solve(self, jobs: Sequence[Job], steps: Array, speeds: Array) -> Array:
        """The isolated times (s) of ``jobs`` at a solve where they have ``steps`` left
        and isolated ``speeds`` (steps/s; a job at 0 gets ``inf``)."""
        done = self._done
        for index, job in enumerate(jobs):
            before = self._at_solve.get(job.id)
            if before is not None:
                done[job.id] = done.get(job.id, 0.0) + max(0.0, before[0] - steps[index]) \
                    / before[1]
        self._at_solve = {job.id: (float(steps[i]), float(speeds[i]))
                          for i, job in enumerate(jobs) if speeds[i] > 0}
        self._done = {job.id: done[job.id] for job in jobs if job.id in done}
        with np.errstate(divide="ignore"):
            return np.asarray(np.array([self._done.get(job.id, 0.0) for job in jobs])
                              + steps / speeds, dtype=np.float64)
