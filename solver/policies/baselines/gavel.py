"""Gavel (Narayanan et al., OSDI 2020): a heterogeneity-aware allocation of time fractions
per GPU type, realised round by round; the objective it allocates by is one of Gavel's
family (:mod:`hetsched.policies.baselines.gavel_family`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from concurrent.futures import Executor

import numpy as np

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.records import Job
from hetsched.formulations.budget import Budget
from hetsched.formulations.gavel.problem import AllocationProblem, Array, equal_shares
from hetsched.policies.baselines.common import Misses, RoundClock, SpeedBook, place
from hetsched.policies.baselines.gavel_family import objective_of
from hetsched.policies.baselines.gavel_params import GavelParams, RoundsParams
from hetsched.policies.baselines.gavel_rounds import (
    GavelLedger,
    Pairs,
    arrival_rank,
    gavel_queue,
    whole_first,
)
from hetsched.policies.baselines.row_book import RowBook
from hetsched.policies.rolling import ClusterState, Decision, PolicyHooks, RunningJob

log = logging.getLogger(__name__)

#: An LP answer may exceed a constraint by this much (GPUs, or time fractions) and be used.
FEASIBILITY_TOLERANCE = 1e-6


def solve_key(jobs: Sequence[Job]) -> frozenset[tuple[str, tuple[str, ...] | None]]:
    """What an allocation is solved for: each job and the GPU types it may use."""
    return frozenset((job.id, job.allowed_gpu_types) for job in jobs)


class Gavel(PolicyHooks):
    """Gavel's allocation ``X[job, gpu_type]`` (time fractions) by the objective its
    parameters name (``params``: :class:`~hetsched.policies.baselines.gavel_params.
    GavelParams` for Gavel's own LP, max-min fairness or max-sum throughput, monolithic or
    split by POP, or water-filling; ``FinishTimeParams``, ``DurationParams``,
    ``CostParams``, ``IsolatedParams``, ``FifoFastestParams`` for the others of its
    family), realised in rounds of ``round_s`` seconds. An ``executor`` (a process pool,
    Ray's: ``hetsched.bench.ray_engine``) solves POP's sub-problems side by side, with the
    same allocations as solving them here in turn.

    The allocation is solved again at the first round boundary after the set of active jobs
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
    (Gavel's rounds are not work conserving; ours are, without preempting anybody; with
    ``work_conserving=False`` only the rounds start jobs and a job not chosen stops, as
    in Gavel's own scheduler).

    Only a feasible answer is used. If the objective gives none (no solution in its time
    limit, or one that over-fills a GPU type), every job gets an equal time share of each
    type it can run on (:func:`equal_shares`, feasible by construction); the decisions
    until the next solve are marked as fallbacks (counted in ``summary.json``'s
    ``fallbacks`` and ``warnings``), and the first failure is logged as a warning.

    Starvation guard: max-min fairness gives every job ``X > 0``; on top of it (and for
    max-sum throughput, which can give ``X = 0``), a job waiting ``starvation_rounds``
    rounds since it last ran goes before every pair at the next round boundary.

    ``rounds="gavel"`` realises the allocation as Gavel's own simulator does instead
    (:mod:`hetsched.policies.baselines.gavel_rounds`: half a round counted at entry,
    deficits, one queue per type, resets at most every 1,920 s, no starvation guard, not
    work conserving), to compare an allocation with Gavel's with the mechanism held equal.
    """

    def __init__(self, params: RoundsParams | None = None, *,
                 executor: Executor | None = None) -> None:
        params = GavelParams() if params is None else params
        #: the policy's parameters (its settings)
        self.params: RoundsParams = params
        self.name = params.name
        self.round_s = params.round_s
        #: how the allocation is solved
        self.objective = objective_of(params, executor)
        #: GPUs a round leaves over, and GPUs freed between rounds, go to waiting jobs
        #: (off: only the rounds start jobs, and a job not chosen stops, as in Gavel's
        #: own scheduler)
        self.work_conserving = params.work_conserving and params.rounds == "hetsched"
        #: hetsched's rounds take the jobs whose allocation is all of their time first
        self.keep_whole = isinstance(params, GavelParams) and params.keep_whole
        #: Gavel's bookkeeping, with ``rounds="gavel"`` (made at the first decision)
        self._ledger: GavelLedger | None = None
        self.speeds = SpeedBook()
        self.solves = 0
        self._solved_for: frozenset[tuple[str, tuple[str, ...] | None]] | None = None
        self._lp_failed = ""
        self._reset_at = 0.0
        #: seconds each job ran on each type (columns: the cluster's types) since the solve
        #: (Python floats, added to at every decision: the sums numpy's would be)
        self._time_on: dict[str, list[float]] = {}
        #: each job's rounded share of each type (its row of ``_share_matrix``, whose
        #: last row is zeros, columns ``_types``), and its predicted speeds
        self._share_rows: dict[str, int] = {}
        self._share_matrix: Array = np.zeros((1, 0))
        self._types: tuple[str, ...] = ()
        self._speed_rows = RowBook()
        #: the GPU types each job's row of ``_speed_rows`` was read for (a job shown with
        #: other allowed types gets its row read again)
        self._speeds_allowed: dict[str, tuple[str, ...] | None] = {}
        self._last_ran: dict[str, float] = {}
        self._last_now: float | None = None
        self.clock = RoundClock(params.round_s)
        self._warned = False
        self._pop_note = ""

    @property
    def allocation(self) -> dict[str, dict[str, float]]:
        """The last solve's time fractions: job id -> GPU type -> fraction (rounded)."""
        return {job_id: self._shares_of(job_id) for job_id in self._share_rows}

    def _shares_of(self, job_id: str) -> dict[str, float]:
        """A job's rounded share of each type in the last solve (none if not in it)."""
        row = self._share_rows.get(job_id)
        return {} if row is None else \
            dict(zip(self._types, self._share_matrix[row].tolist(), strict=True))

    def decide(self, state: ClusterState) -> Decision:
        """Recompute the allocation if the jobs changed; realise the round."""
        now = state.now
        elapsed = 0.0 if self._last_now is None else now - self._last_now
        self._last_now = now
        types = state.cluster.type_names
        # Every running job ran since the previous decision: read without building the
        # running jobs' records, which most decisions (arrivals, finishes) do not need.
        running = state.running_types()
        time_on, last_ran = self._time_on, self._last_ran
        if self.params.rounds == "gavel" and self._ledger is None:
            self._ledger = GavelLedger(len(types), self.round_s, self.params.reset_interval_s)
        ledger = self._ledger
        for job_id, gpu_type in running.items():
            ran = time_on.get(job_id)
            if ran is None:
                ran = time_on[job_id] = [0.0] * len(types)
            column = types.index(gpu_type)
            ran[column] += elapsed
            last_ran[job_id] = now
            if ledger is not None:
                ledger.ran(job_id, column, elapsed)
        # Rounds go on while anything runs (the simulator calls at every boundary): a
        # round can move running jobs between types even when nobody waits.
        boundary = self.clock.boundary(now)
        if not boundary and (not state.pending or not self.work_conserving):
            return Decision()
        if not boundary and not state.has_free():
            # Nothing to fill (an arrival on a full cluster): no time in the waiting jobs.
            return Decision((), (), True, self._lp_failed) if self._lp_failed else Decision()
        active = len(state.pending) + len(running)  # (no job both waits and runs)
        if len(self._last_ran) > active or len(self._speed_rows) > active:
            ids = frozenset(running).union(job.id for job in state.pending)
            for job_id in [j for j in self._last_ran if j not in ids]:
                del self._last_ran[job_id]
            self._speed_rows.keep_only(ids)
            self._speeds_allowed = {j: a for j, a in self._speeds_allowed.items() if j in ids}
        if boundary and not state.pending and len(state.cluster.type_names) == 1:
            return Decision()  # one type, nobody waiting: every running job keeps its GPUs
        if boundary:
            jobs = [*state.pending, *(r.job for r in state.running)]
            # As Gavel: the allocation is recomputed at the first round after jobs arrived
            # or left.
            self._solve_for(state, jobs)
            decision = self._round(state, jobs)
        else:
            decision = self._fill(state, state.pending, self._pairs(state, state.pending),
                                  state.pool())
        if self._lp_failed:
            return Decision(decision.start, decision.preempt, True, self._lp_failed)
        if self._pop_note and boundary:
            note, self._pop_note = self._pop_note, ""
            return Decision(decision.start, decision.preempt, False, note)
        return decision

    def on_stall(self, state: ClusterState) -> Decision:
        """Jobs wait on an idle cluster and none will arrive: a round now (not work
        conserving, the next boundary would come with nothing changed), else FIFO."""
        if self.work_conserving:
            return super().on_stall(state)
        jobs = [*state.pending, *(r.job for r in state.running)]
        self._solve_for(state, jobs)
        return self._round(state, jobs)

    def _solve_for(self, state: ClusterState, jobs: list[Job]) -> None:
        """Solve the LP again if ``jobs`` are not the ones it was solved for, or a job may
        run on other GPU types than then (a quota keeper narrows a waiting job's types to
        those its tenant may take now: hetsched.policies.quotas)."""
        active = frozenset(job.id for job in jobs)
        key = solve_key(jobs)
        ledger = self._ledger
        if ledger is not None:
            ledger.keep(active)
            if key == self._solved_for or not ledger.due(state.now):
                return
            ledger.reset(state.now, lambda job_id: list(self._shares_of(job_id).values()))
        if key != self._solved_for:
            self._solve(state, jobs)
            self._solved_for = key

    def figures(self) -> dict[str, object]:
        """The objective's figures (with POP partitions: their number, and the objective
        each solve reached over the monolithic optimum)."""
        return self.objective.figures()

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
        if state.pending or self._lp_failed or self._ledger is not None:
            return -math.inf  # (Gavel's rounds give left-over GPUs to any job)
        if len(state.cluster.type_names) == 1:
            return math.inf
        if solve_key([r.job for r in state.running]) != self._solved_for:
            return -math.inf
        for run in state.running:
            shares = [t for t, x in self._shares_of(run.job.id).items() if x > 1e-9]
            if shares != [run.gpu_type]:
                return -math.inf
        return math.inf

    def _solve(self, state: ClusterState, jobs: list[Job]) -> None:
        """Gavel's LP on the active jobs; resets the time each job has run."""
        types = state.cluster.type_names
        throughput = self._speeds_of(state, jobs)
        problem = AllocationProblem(
            tuple(job.id for job in jobs), types, throughput,
            np.array([float(job.num_gpus) for job in jobs]),
            np.array([float(state.cluster.num_gpus(t)) for t in types]),
            np.array([job.weight for job in jobs]))
        budget = Budget(self.params.time_limit_s, deterministic=self.params.deterministic)
        result = self.objective.alone(state, jobs, problem, budget)
        self._pop_note = self.objective.note
        self.solves += 1
        # Only a feasible allocation is used: one that over-fills a GPU type (or gives a
        # job more than all of its time, or time where it cannot run) never is.
        feasible = result.ok and problem.is_feasible(result.fractions, FEASIBILITY_TOLERANCE)
        if feasible:
            fractions = result.fractions
            self._lp_failed = ""
            if not result.optimal:
                log.debug("t=%g: gavel LP not solved to optimality (%d jobs): its feasible "
                         "allocation is used", state.now, len(jobs))
        else:
            fractions = equal_shares(problem)
            over = bool(np.any(problem.scale_factors @ result.fractions
                               > problem.capacity + FEASIBILITY_TOLERANCE))
            why = "no solution" if not math.isfinite(result.value) else \
                "an allocation that over-fills a GPU type" if over else "an infeasible allocation"
            self._lp_failed = f"{self.name} LP failed ({why}): equal time shares instead"
            if not self._warned:
                self._warned = True
                log.warning("t=%g: %s, %d active jobs (later failures are counted in "
                            "summary.json)", state.now, self._lp_failed, len(jobs))
            else:
                log.debug("t=%g: %s, %d active jobs", state.now, self._lp_failed, len(jobs))
        # Rounded (Python's correctly rounded decimal): solver noise must not decide ties.
        shares = np.array([[round(v, 6) for v in row] for row in fractions.tolist()])
        shares = shares.reshape(-1, len(types))
        self._share_rows = {job_id: row for row, job_id in enumerate(problem.job_ids)}
        self._share_matrix = np.vstack([shares, np.zeros((1, len(types)))])
        self._types = tuple(types)
        self._reset_at = state.now
        self._time_on = {}

    def _pairs(self, state: ClusterState, jobs: Sequence[Job]) -> Pairs:
        """The (job, type) pairs of ``jobs`` as arrays (rows: jobs, columns: the cluster's
        types): each pair's priority ``X_jk / (time on k since the solve / time since the
        solve)`` (infinite when the job has not run on k yet; 0 where ``X_jk = 0``), share
        and predicted speed; whether each job is starved; and each job's types in
        preference order (priority, share, speed, then cluster order; usable types only)."""
        types = state.cluster.type_names
        width = len(types)
        share_rows = self._share_rows
        if self._share_matrix.shape[1] == width:
            share = self._share_matrix[[share_rows.get(job.id, -1) for job in jobs]]
        else:  # (no solve yet)
            share = np.zeros((len(jobs), width))
        ran = np.zeros((len(jobs), width))
        time_on = self._time_on
        for row in [row for row, job in enumerate(jobs) if job.id in time_on]:
            ran[row] = time_on[jobs[row].id]
        speed = self._speeds_of(state, jobs)
        since = state.now - self._reset_at
        with np.errstate(divide="ignore", invalid="ignore"):
            unserved = (ran <= 0) | (since <= 0)
            priority = np.where(share > 1e-9,
                                np.where(unserved, math.inf, share / (ran / since)), 0.0)
        usable = speed > 0
        column = np.broadcast_to(np.arange(width), share.shape)
        preference = np.lexsort((column, -speed, -share, -priority, ~usable), axis=-1)
        limit = self.params.starvation_rounds * self.round_s
        last_ran = self._last_ran
        starved = np.asarray(state.now - np.array(
            [last_ran.get(job.id, job.arrival) for job in jobs], dtype=np.float64) >= limit,
            dtype=np.bool_)
        return Pairs(priority, share, usable, preference, starved)

    def _speeds_of(self, state: ClusterState, jobs: Sequence[Job]) -> Array:
        """The jobs' predicted steps/s on each of the cluster's types (0: cannot run), a
        row per job."""
        book = self._speed_rows
        types = state.cluster.type_names
        book.set_width(len(types))
        allowed = self._speeds_allowed
        for job in jobs:
            if job.id not in book.rows or allowed.get(job.id) != job.allowed_gpu_types:
                speeds = self.speeds.speeds(state, job)
                book.add(job.id, [speeds.get(t, 0.0) for t in types])
                allowed[job.id] = job.allowed_gpu_types
        return book.of([job.id for job in jobs], len(types))

    def _round(self, state: ClusterState, jobs: list[Job]) -> Decision:
        """A round boundary: Gavel's greedy over (job, type) pairs, then the realisation."""
        running = {r.job.id: r for r in state.running}
        pairs, rows, cols = self._queue(state, jobs, running)
        return self._realise(state, jobs, pairs, running, self._claim(state, jobs, rows, cols))

    def _queue(self, state: ClusterState, jobs: list[Job], running: dict[str, RunningJob]
               ) -> tuple[Pairs, np.ndarray, np.ndarray]:
        """The pairs of ``jobs`` and the (row, column) of each that a round may take, in
        the order it takes them: starved jobs first (waiting ones only), then by
        decreasing priority, larger share, earlier arrival, job id and cluster order
        (Gavel's queues with ``rounds="gavel"``)."""
        pairs = self._pairs(state, jobs)
        rank = arrival_rank(jobs)
        if self._ledger is not None:
            priority, deficit = self._ledger.priorities([job.id for job in jobs], pairs.share)
            pairs = Pairs(priority, pairs.share, pairs.usable, pairs.preference,
                           np.zeros(len(jobs), dtype=np.bool_))
            walked = pairs.usable if self.objective.walks_zero_priority else \
                pairs.usable & (priority > 0)
            rows, cols = gavel_queue(priority, deficit, pairs.share, walked, rank)
            return pairs, rows, cols
        starved = pairs.starved & np.array([job.id not in running for job in jobs],
                                           dtype=bool)
        rows, cols = np.nonzero(pairs.usable & ((pairs.priority > 0) | starved[:, None]))
        keys = [cols, rank[rows], -pairs.share[rows, cols], -pairs.priority[rows, cols],
                ~starved[rows]]
        if self.keep_whole:
            names = state.cluster.type_names
            whole, stay = whole_first(pairs, [names.index(running[job.id].gpu_type)
                                              if job.id in running else -1 for job in jobs])
            keys[-1:-1] = [~stay[rows, cols]]
            keys.append(~whole[rows])
        order = np.lexsort(keys)
        return pairs, rows[order], cols[order]

    def _claim(self, state: ClusterState, jobs: list[Job], rows: np.ndarray,
               cols: np.ndarray) -> dict[int, int]:
        """Gavel's greedy: each pair in turn is taken if its job has none yet and its type
        has the job's GPUs unclaimed; the row and column of each job taken."""
        types = state.cluster.type_names
        left = [state.cluster.num_gpus(t) for t in types]
        unclaimed = sum(left)
        gangs = [job.num_gpus for job in jobs]
        taken: dict[int, int] = {}
        # Gavel's rounds claim GPUs for a job the allocation has not seen yet but do not
        # start it (``scheduler.py:944``: workers go to jobs in the allocation only).
        unseen = set() if self._ledger is None else \
            {row for row, job in enumerate(jobs) if job.id not in self._share_rows}
        for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
            if row in taken or left[col] < gangs[row]:
                continue
            left[col] -= gangs[row]
            unclaimed -= gangs[row]
            taken[row] = -1 if row in unseen else col
            if not unclaimed:  # every GPU is claimed: no later pair can be taken
                break
        return {row: col for row, col in taken.items() if col >= 0}

    def _realise(self, state: ClusterState, jobs: list[Job], pairs: Pairs,
                 running: dict[str, RunningJob], taken: dict[int, int]) -> Decision:
        """The round's starts and preemptions: the jobs ``taken`` (row -> column) on
        another type than they run on start there, largest gangs first; the other
        running jobs stop unless nobody needed their GPUs; then the waiting jobs fill
        the GPUs left (work conserving)."""
        types = state.cluster.type_names
        gangs = [job.num_gpus for job in jobs]
        chosen = {jobs[row].id: types[col] for row, col in taken.items()}
        preempt = [job_id for job_id, run in running.items()
                   if chosen.get(job_id) != run.gpu_type]
        pool = state.pool()
        for job_id in preempt:
            pool.release(running[job_id].gpus, running[job_id].job)
        to_start = sorted(
            (row for row, col in taken.items()
             if types[col] != getattr(running.get(jobs[row].id), "gpu_type", None)),
            key=lambda row: (-gangs[row], -pairs.priority[row, taken[row]],
                             jobs[row].arrival, jobs[row].id))
        starts: list[Start] = []
        misses = Misses()  # (the pool only shrinks in this loop: a gang that found nothing
        # finds nothing later either)
        for row in to_start:
            job = jobs[row]
            start = place(state, job, [chosen[job.id]], job.num_gpus, pool, misses=misses)
            if start is not None:
                starts.append(start)
        restarted = {s.job for s in starts}
        kept = [j for j in preempt if self.work_conserving and j not in restarted
                and pool.can_hold(running[j].gpus, running[j].job)]
        for job_id in kept:  # nobody needed its GPUs: it keeps running
            pool.take(running[job_id].gpus, running[job_id].job)
        preempted = tuple(j for j in preempt if j not in kept)
        waiting = [row for row, job in enumerate(jobs[:len(state.pending)])
                   if job.id not in restarted and job.id not in preempted]
        if not self.work_conserving:
            return Decision(tuple(starts), preempted)
        filled = self._fill(state, [jobs[row] for row in waiting], pairs.rows(waiting), pool)
        return Decision((*starts, *filled.start), preempted)

    def _fill(self, state: ClusterState, waiting: Sequence[Job], pairs: Pairs,
              pool: FreeGpuIndex) -> Decision:
        """Free GPUs to waiting jobs (``pairs``: theirs, row by row), best priority first,
        without preempting (jobs that arrived since the last solve have no share yet: they
        come after, by arrival)."""
        if not waiting or not pool.has_free():
            return Decision()
        rows = np.arange(len(waiting))
        best = pairs.preference[:, 0]
        rank = arrival_rank(waiting)
        order = np.lexsort((rank, -pairs.share[rows, best], -pairs.priority[rows, best],
                            ~pairs.starved))
        types = state.cluster.type_names
        fits = pairs.with_room(state, waiting, pool)
        starts = []
        misses = Misses()  # (starts only take GPUs)
        for row in order[pairs.usable[order, best[order]] & fits[order]].tolist():
            if not pool.has_free():
                break
            job = waiting[row]
            choices = [types[k] for k in pairs.preference[row].tolist() if pairs.usable[row, k]]
            start = place(state, job, choices, job.num_gpus, pool, misses=misses)
            if start is not None:
                starts.append(start)
        return Decision(tuple(starts))
