"""Gavel (Narayanan et al., OSDI 2020): a heterogeneity-aware allocation LP over time
fractions per GPU type, realised round by round."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import numpy as np

from hetsched.baselines.common import RoundClock, SpeedBook, place
from hetsched.data import Job
from hetsched.formulations.budget import Budget
from hetsched.gpus import FreeGpuIndex, Start
from hetsched.rolling import ClusterState, Decision, PolicyHooks

if TYPE_CHECKING:
    from hetsched.formulations.gavel.problem import AllocationProblem, Array

log = logging.getLogger(__name__)

#: An LP answer may exceed a constraint by this much (GPUs, or time fractions) and be used.
FEASIBILITY_TOLERANCE = 1e-6


class Gavel(PolicyHooks):
    """Gavel's allocation ``X[job, gpu_type]`` (time fractions, an LP solved by PuLP on
    HiGHS or CBC: ``hetsched.formulations.gavel``), realised in rounds of ``round_s`` seconds.

    The LP is solved again at the first round boundary after the set of active jobs
    changed (an arrival or a completion), as Gavel's scheduler does. Each job's priority
    on each type is ``X_jk`` divided by the fraction of the time since that solve it has
    run on type k (infinite if it has not run there yet; 0 where ``X_jk = 0``, and for
    jobs that arrived after the solve). At every round boundary (every ``round_s``, the
    policy's declared round: the simulator calls it there while any job runs or waits)
    the (job, type) pairs are taken by decreasing priority, ties by larger ``X``, then
    arrival, and a job is scheduled if its type still has ``num_gpus`` GPUs unclaimed
    this round (Gavel's greedy). Jobs scheduled on the type they run on keep their GPUs;
    the other running jobs are preempted; scheduled jobs start, largest gangs first,
    packed on the fullest node that holds them, else spread. So jobs time-share the types
    as their allocation says, and migrate: a job alone after the others left gets its
    best type at the next round. A preempted job whose GPUs end up unused keeps running.
    GPUs left over, and GPUs freed between boundaries, go to waiting jobs by priority
    (Gavel's rounds are not work conserving; ours are, without preempting anybody).

    Only a feasible LP answer is used. If the LP gives none (no solution in its time
    limit, or one that over-fills a GPU type), every job gets an equal time share of each
    type it can run on (:func:`equal_shares`, feasible by construction); the decisions
    until the next solve are marked as fallbacks (counted in ``summary.json``'s
    ``fallbacks`` and ``warnings``), and the first failure is logged as a warning.

    Starvation guard: max-min fairness gives every job ``X > 0``; on top of it (and for
    max-sum throughput, which can give ``X = 0``), a job waiting ``starvation_rounds``
    rounds since it last ran goes before every pair at the next round boundary.
    """

    def __init__(self, *, objective: str = "max-min", round_s: float = 360.0,
                 backend: str = "highs", time_limit_s: float | None = None,
                 deterministic: bool = False,
                 starvation_rounds: float = 20.0) -> None:
        from hetsched.formulations.gavel import Objective

        if not round_s > 0 or not starvation_rounds > 0:
            raise ValueError("round_s and starvation_rounds must be > 0")
        if backend not in ("highs", "cbc", "scip"):
            raise ValueError(f"gavel's LP runs on highs, cbc or scip, not {backend}")
        self.objective = Objective(objective)
        self.name = "gavel" if self.objective is Objective.MAX_MIN else "gavel-max-sum"
        self.round_s = round_s
        self.backend = backend
        self.time_limit_s = time_limit_s
        #: the time limit counts deterministic work (an LP then runs to its optimum)
        self.deterministic = deterministic
        self.starvation_rounds = starvation_rounds
        self.speeds = SpeedBook()
        self.allocation: dict[str, dict[str, float]] = {}
        self.solves = 0
        self._solved_for: frozenset[str] | None = None
        self._lp_failed = ""
        self._reset_at = 0.0
        self._time_on: dict[tuple[str, str], float] = {}
        self._last_ran: dict[str, float] = {}
        self._last_now: float | None = None
        self.clock = RoundClock(round_s)
        self._warned = False

    def decide(self, state: ClusterState) -> Decision:
        """Recompute the allocation if the jobs changed; realise the round."""
        now = state.now
        elapsed = 0.0 if self._last_now is None else now - self._last_now
        self._last_now = now
        for run in state.running:  # every running job ran since the previous decision
            key = (run.job.id, run.gpu_type)
            self._time_on[key] = self._time_on.get(key, 0.0) + elapsed
            self._last_ran[run.job.id] = now
        jobs = [*state.pending, *(r.job for r in state.running)]
        active = frozenset(job.id for job in jobs)
        for job_id in [j for j in self._last_ran if j not in active]:
            del self._last_ran[job_id]
        # Rounds go on while anything runs (the simulator calls at every boundary): a
        # round can move running jobs between types even when nobody waits.
        boundary = self.clock.boundary(now)
        if not boundary and not state.pending:
            return Decision()
        if boundary and not state.pending and len(state.cluster.type_names) == 1:
            return Decision()  # one type, nobody waiting: every running job keeps its GPUs
        if boundary and active != self._solved_for:
            # As Gavel: the allocation is recomputed at the first round after jobs arrived
            # or left.
            self._solve(state, jobs)
            self._solved_for = active
        priority = self._priorities(state, jobs)
        pairs = {job.id: self._pairs(state, job, priority) for job in jobs}
        if boundary:
            decision = self._round(state, jobs, priority, pairs)
        else:
            decision = self._fill(state, list(state.pending), pairs,
                                  FreeGpuIndex(state.cluster, state.free), ())
        if self._lp_failed:
            return Decision(decision.start, decision.preempt, True, self._lp_failed)
        return decision

    def quiet_until(self, state: ClusterState) -> float:
        """Until the next event (``inf``) when nobody waits and either the cluster has one
        GPU type or the allocation, solved for the running jobs, gives every one of them
        a share of its own type only and the LP did not fail; else no promise.

        Then every boundary until a job arrives or ends is an empty decision: each job's
        only (job, type) pair is the type it holds, and its GPUs are there. What skipped
        calls would change is the time on each type (``_time_on``, only in float rounding:
        one sum instead of several) and ``_last_ran``/``_last_now``/the clock, which the
        call at the last boundary sets as they would be. ``_time_on`` is read for running
        jobs' priorities only, which cannot change a round with one pair per job, and it
        is reset by the solve at the first boundary after the jobs change."""
        if state.pending or self._lp_failed:
            return -math.inf
        if len(state.cluster.type_names) == 1:
            return math.inf
        if frozenset(r.job.id for r in state.running) != self._solved_for:
            return -math.inf
        for run in state.running:
            shares = [t for t, x in self.allocation.get(run.job.id, {}).items() if x > 1e-9]
            if shares != [run.gpu_type]:
                return -math.inf
        return math.inf

    def _solve(self, state: ClusterState, jobs: list[Job]) -> None:
        """Gavel's LP on the active jobs; resets the time each job has run."""
        from hetsched.formulations.gavel import AllocationProblem, solve_allocation

        types = state.cluster.type_names
        throughput = np.array([[self.speeds.speeds(state, job).get(t, 0.0) for t in types]
                               for job in jobs]).reshape(len(jobs), len(types))
        problem = AllocationProblem(
            tuple(job.id for job in jobs), types, throughput,
            np.array([float(job.num_gpus) for job in jobs]),
            np.array([float(state.cluster.num_gpus(t)) for t in types]),
            np.array([job.weight for job in jobs]))
        result = solve_allocation(problem, self.objective, backend=self.backend,
                                  budget=Budget(self.time_limit_s,
                                                deterministic=self.deterministic))
        self.solves += 1
        # Only a feasible allocation is used: one that over-fills a GPU type (or gives a
        # job more than all of its time, or time where it cannot run) never is.
        feasible = result.ok and problem.is_feasible(result.fractions, FEASIBILITY_TOLERANCE)
        if feasible:
            fractions = result.fractions
            self._lp_failed = ""
            if not result.optimal:
                log.info("t=%g: gavel LP not solved to optimality (%d jobs): its feasible "
                         "allocation is used", state.now, len(jobs))
        else:
            fractions = equal_shares(problem)
            over = bool(np.any(problem.scale_factors @ result.fractions
                               > problem.capacity + FEASIBILITY_TOLERANCE))
            why = "no solution" if not math.isfinite(result.value) else \
                "an allocation that over-fills a GPU type" if over else "an infeasible allocation"
            self._lp_failed = f"gavel LP failed ({why}): equal time shares instead"
            if not self._warned:
                self._warned = True
                log.warning("t=%g: %s, %d active jobs (later failures are counted in "
                            "summary.json)", state.now, self._lp_failed, len(jobs))
            else:
                log.info("t=%g: %s, %d active jobs", state.now, self._lp_failed, len(jobs))
        # Rounded: solver noise must not decide ties between equal shares.
        self.allocation = {job_id: {t: round(float(fractions[j, k]), 6)
                                    for k, t in enumerate(types)}
                           for j, job_id in enumerate(problem.job_ids)}
        self._reset_at = state.now
        self._time_on = {}

    def _priorities(self, state: ClusterState, jobs: list[Job]) -> dict[tuple[str, str], float]:
        """``X_jk / (time on k since the solve / time since the solve)``, infinite when the
        job has not run on k yet, for every pair with ``X_jk > 0``."""
        since = state.now - self._reset_at
        out = {}
        for job in jobs:
            for gpu_type, share in self.allocation.get(job.id, {}).items():
                if share <= 1e-9:
                    continue
                ran = self._time_on.get((job.id, gpu_type), 0.0)
                out[job.id, gpu_type] = math.inf if ran <= 0 or since <= 0 else \
                    share / (ran / since)
        return out

    def _pairs(self, state: ClusterState, job: Job,
               priority: dict[tuple[str, str], float]) -> list[tuple[float, float, str]]:
        """The job's usable types as (priority, share, type), best first; types with
        ``X = 0`` last, fastest first."""
        speeds = self.speeds.speeds(state, job)
        shares = self.allocation.get(job.id, {})
        pairs = [(priority.get((job.id, t), 0.0), shares.get(t, 0.0), speeds[t], t)
                 for t in speeds]
        pairs.sort(key=lambda p: (-p[0], -p[1], -p[2]))
        return [(p, s, t) for p, s, _, t in pairs]

    def _starved(self, state: ClusterState, job: Job) -> bool:
        waited = state.now - self._last_ran.get(job.id, job.arrival)
        return waited >= self.starvation_rounds * self.round_s

    def _round(self, state: ClusterState, jobs: list[Job],
               priority: dict[tuple[str, str], float],
               pairs: dict[str, list[tuple[float, float, str]]]) -> Decision:
        """A round boundary: Gavel's greedy over (job, type) pairs, then the realisation."""
        order = {t: i for i, t in enumerate(state.cluster.type_names)}
        entries = []
        running_ids = {r.job.id for r in state.running}
        for job in jobs:
            starved = job.id not in running_ids and self._starved(state, job)
            for value, share, gpu_type in pairs[job.id]:
                if value <= 0 and not starved:
                    continue
                entries.append(((0 if starved else 1, -value, -share, job.arrival, job.id,
                                 order[gpu_type]), job, gpu_type))
        entries.sort(key=lambda entry: entry[0])
        left = {t: state.cluster.num_gpus(t) for t in state.cluster.type_names}
        chosen: dict[str, str] = {}
        for _, job, gpu_type in entries:
            if job.id in chosen or left[gpu_type] < job.num_gpus:
                continue
            chosen[job.id] = gpu_type
            left[gpu_type] -= job.num_gpus
        running = {r.job.id: r for r in state.running}
        preempt = [job_id for job_id, run in running.items()
                   if chosen.get(job_id) != run.gpu_type]
        pool = FreeGpuIndex(state.cluster, state.free)
        for job_id in preempt:
            pool.release(running[job_id].gpus)
        by_id = {job.id: job for job in jobs}
        to_start = sorted((by_id[j] for j in chosen if chosen[j] != getattr(
            running.get(j), "gpu_type", None)),
            key=lambda job: (-job.num_gpus, -priority.get((job.id, chosen[job.id]), 0.0),
                             job.arrival, job.id))
        starts: list[Start] = []
        for job in to_start:
            start = place(state, job, [chosen[job.id]], job.num_gpus, pool)
            if start is not None:
                starts.append(start)
        restarted = {s.job for s in starts}
        kept = [j for j in preempt
                if j not in restarted and pool.free.issuperset(running[j].gpus)]
        for job_id in kept:  # nobody needed its GPUs: it keeps running
            pool.take(running[job_id].gpus)
        preempted = tuple(j for j in preempt if j not in kept)
        waiting = [job for job in state.pending if job.id not in restarted]
        filled = self._fill(state, waiting, pairs, pool, preempted)
        return Decision((*starts, *filled.start), preempted)

    def _fill(self, state: ClusterState, waiting: list[Job],
              pairs: dict[str, list[tuple[float, float, str]]], pool: FreeGpuIndex,
              preempted: tuple[str, ...]) -> Decision:
        """Free GPUs to waiting jobs, best priority first, without preempting (jobs that
        arrived since the last solve have no share yet: they come after, by arrival)."""
        best = pairs
        order = sorted((job for job in waiting if job.id not in preempted and best[job.id]),
                       key=lambda job: (not self._starved(state, job), -best[job.id][0][0],
                                        -best[job.id][0][1], job.arrival, job.id))
        starts = []
        for job in order:
            if not pool.free:
                break
            start = place(state, job, [t for _, _, t in best[job.id]], job.num_gpus, pool)
            if start is not None:
                starts.append(start)
        return Decision(tuple(starts))


def equal_shares(problem: AllocationProblem) -> Array:
    """A feasible allocation without an LP (the fallback when the LP fails): every job gets
    the same time share ``C_k / max(sum_j s_j, sum_k C_k)`` of each GPU type k it can run
    on (Gavel's equal share, scaled so that no type is over-filled: ``sum_j s_j X_jk <=
    C_k`` and ``sum_k X_jk <= 1``)."""
    scale = max(float(problem.scale_factors.sum()), float(problem.capacity.sum()), 1.0)
    fractions = np.where(problem.throughput > 0, problem.capacity[np.newaxis, :] / scale, 0.0)
    if not problem.is_feasible(fractions):
        raise RuntimeError("equal shares over-fill a GPU type")  # cannot happen (above)
    return np.asarray(fractions, dtype=np.float64)
