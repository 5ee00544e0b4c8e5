"""The ``deadline`` model as a MILP built from arrays (solved by HiGHS, CBC or SCIP).

A per-GPU disjunctive model in continuous time (seconds, on the same rounded data as
CP-SAT): ``mode[j, m]`` chooses a node and a gang size, ``gpu[j, g]`` the concrete GPUs
of that node, ``before[i, j]`` orders two jobs that may share a GPU, and big-M
disjunctions keep two jobs on one GPU apart. Holding concrete GPUs for the whole run is
no restriction: any schedule that respects node capacities can be given such GPUs (see
hetsched.allocation.realise), so this model and the per-node cumulative of CP-SAT have the same
optimum. ``end[j]`` is a variable defined by one row, so each disjunction has five
coefficients, not one per mode.

The model is assembled with :class:`~hetsched.formulations.mip.MatrixBuilder`, one call per
constraint family, from numpy index arrays; its size is estimated before it is built,
and a model the budget cannot even hand to a solver is not built (the caller keeps its
start plan).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from hetsched.core.result import Status
from hetsched.formulations.budget import Budget, BudgetExhaustedError
from hetsched.formulations.common import TICK_S, seconds
from hetsched.formulations.deadline.problem import (
    DEADLINE_STAGE_SHARE,
    DeadlineObjective,
    DeadlineProblem,
    Plan,
    StagePlans,
)
from hetsched.formulations.deadline.timing import left_justify
from hetsched.formulations.mip import (
    MatrixBuilder,
    MatrixModel,
    MipSettings,
    SolverResult,
    solve_mip,
)
from hetsched.formulations.mip.model import Vector

log = logging.getLogger(__name__)

#: The largest model (nonzeros) handed to a MILP engine per second (or work unit) of
#: budget: beyond it the engine could not even finish its presolve in time.
NONZEROS_PER_SECOND = 400_000
#: The mean-busy-time cuts get this share of the budget, at most ``CUTS_MAX`` (only with a
#: budget of at least ``CUTS_MIN_BUDGET``).
CUTS_SHARE = 0.1
CUTS_MAX = 5.0
CUTS_MIN_BUDGET = 1.0


@dataclass(frozen=True)
class _Pairs:
    """Job pairs (first < second) that can share a GPU, and the GPUs they can share."""

    first: np.ndarray
    second: np.ndarray
    #: per (pair, shared GPU) entry: the pair's index and the GPU's global index
    entry_pair: np.ndarray
    entry_gpu: np.ndarray


class DeadlineMilp:
    """Builds the array model of a :class:`DeadlineProblem` and solves it in two stages."""

    def __init__(self, problem: DeadlineProblem, budget: Budget | None = None,
                 cuts: bool = True) -> None:
        self.problem = problem
        self.budget = budget or Budget.unlimited()
        self.big_m = seconds(problem.horizon)
        jobs = problem.jobs
        self.gpu_names = [g for node in problem.instance.cluster.nodes for g in node.gpu_ids()]
        first_gpu: dict[str, int] = {}
        position = 0
        for node in problem.instance.cluster.nodes:
            first_gpu[node.name] = position
            position += node.num_gpus
        self.first_gpu = first_gpu
        self.nodes_of_job = [sorted({m.node for m in data.modes}) for data in jobs]
        estimate = self.estimated_nonzeros()
        allowed = self.budget.remaining()
        if allowed is not None and estimate > NONZEROS_PER_SECOND * allowed:
            raise BudgetExhaustedError(
                f"the MILP would have about {estimate:,} nonzeros, more than the budget "
                f"({self.budget.describe()}) allows a solver to read "
                f"({NONZEROS_PER_SECOND:,} per second)")
        self.pairs = self._pairs()
        self.builder = MatrixBuilder()
        self.lp_bound: float | None = None
        self.cut_rows = 0
        self._variables()
        for family in (self._end_definition, self._one_mode_per_job, self._gpus_match_mode,
                       self._no_overlap_per_gpu, self._deadlines):
            self.budget.check("building the MILP")
            family()
        if cuts and (self.budget.remaining() is None or
                     (self.budget.remaining() or 0.0) >= CUTS_MIN_BUDGET):
            self.add_completion_cuts(self.budget.part(CUTS_SHARE, CUTS_MAX))
        self.model = self.builder.build()

    # -- sizes -----------------------------------------------------------------------------
    def _pairs(self) -> _Pairs:
        """Pairs of jobs that both have modes on some node, with every GPU they share."""
        jobs_on: dict[str, list[int]] = defaultdict(list)
        for j, nodes in enumerate(self.nodes_of_job):
            for node in nodes:
                jobs_on[node].append(j)
        n = len(self.problem.jobs)
        entries_pair_key: list[np.ndarray] = []
        entries_gpu: list[np.ndarray] = []
        for cluster_node in self.problem.instance.cluster.nodes:
            members = np.array(jobs_on.get(cluster_node.name, []), dtype=np.int64)
            if len(members) < 2:
                continue
            a, b = np.triu_indices(len(members), k=1)
            keys = members[a] * n + members[b]
            size = cluster_node.num_gpus
            gpus = self.first_gpu[cluster_node.name] + np.arange(size, dtype=np.int64)
            entries_pair_key.append(np.repeat(keys, size))
            entries_gpu.append(np.tile(gpus, len(keys)))
        if not entries_pair_key:
            empty = np.zeros(0, dtype=np.int64)
            return _Pairs(empty, empty, empty, empty)
        pair_keys = np.concatenate(entries_pair_key)
        unique, inverse = np.unique(pair_keys, return_inverse=True)
        return _Pairs(unique // n, unique % n, inverse.astype(np.int64),
                      np.concatenate(entries_gpu))

    def estimated_nonzeros(self) -> int:
        """Nonzeros of the model without cuts, counted before anything is built: the
        disjunctions (10 per pair of jobs and GPU they may share) dominate."""
        cluster = self.problem.instance.cluster
        jobs_on: dict[str, int] = defaultdict(int)
        for nodes in self.nodes_of_job:
            for node in nodes:
                jobs_on[node] += 1
        shared = sum(cluster.node_by_name[node].num_gpus * count * (count - 1) // 2
                     for node, count in jobs_on.items())
        modes = sum(len(d.modes) for d in self.problem.jobs)
        gpus = sum(cluster.node_by_name[node].num_gpus * count
                   for node, count in jobs_on.items())
        return 10 * shared + 3 * modes + 2 * gpus

    # -- variables -------------------------------------------------------------------------
    def _variables(self) -> None:
        """s_j in [r_j, H], end_j in [r_j, H] (s); mode_jm, gpu_jg, before_ij, late_j binary;
        tardiness_j >= 0."""
        b = self.builder
        jobs = self.problem.jobs
        releases = np.array([seconds(d.release) for d in jobs])
        self.start = b.add_columns(len(jobs), releases, self.big_m)
        self.end = b.add_columns(len(jobs), releases, self.big_m)
        counts = [len(d.modes) for d in jobs]
        modes = b.add_binaries(sum(counts))
        bounds = np.concatenate([[0], np.cumsum(counts)])
        self.mode = [modes[bounds[j]:bounds[j + 1]] for j in range(len(jobs))]
        # gpu[j] maps global GPU index -> column, for the GPUs of the job's nodes
        self.gpu: list[dict[int, int]] = []
        for nodes in self.nodes_of_job:
            indices = [self.first_gpu[node] + k for node in nodes
                       for k in range(self.problem.instance.cluster.node_by_name[node].num_gpus)]
            columns = b.add_binaries(len(indices))
            self.gpu.append(dict(zip(indices, columns.tolist(), strict=True)))
        self.before = b.add_binaries(len(self.pairs.first))
        with_deadline = [j for j, d in enumerate(jobs) if d.deadline is not None]
        self.deadline_jobs = np.array(with_deadline, dtype=np.int64)
        self.late = b.add_binaries(len(with_deadline))
        self.tardiness = b.add_columns(len(with_deadline), 0.0)
        self.end_in_mode: list[np.ndarray] = []

    # -- constraint families ---------------------------------------------------------------
    def _end_definition(self) -> None:
        """end_j - s_j - sum_m p_jm mode_jm = 0 for every job j."""
        rows, cols, values = [], [], []
        for j, data in enumerate(self.problem.jobs):
            rows += [j] * (2 + len(data.modes))
            cols += [int(self.end[j]), int(self.start[j]), *self.mode[j].tolist()]
            values += [1.0, -1.0, *(-seconds(m.duration) for m in data.modes)]
        self.builder.add_rows(np.array(rows), np.array(cols), np.array(values), 0.0, 0.0,
                              count=len(self.problem.jobs))

    def _one_mode_per_job(self) -> None:
        """sum_m mode_jm = 1 for every job j."""
        cols = np.concatenate(self.mode) if self.mode else np.zeros(0, dtype=np.int64)
        rows = np.repeat(np.arange(len(self.mode)), [len(m) for m in self.mode])
        self.builder.add_rows(rows, cols, np.ones(len(cols)), 1.0, 1.0, count=len(self.mode))

    def _gpus_match_mode(self) -> None:
        """sum_{g in n} gpu_jg = sum_{m on n} c_m mode_jm for every job j and node n."""
        rows, cols, values = [], [], []
        row = 0
        cluster = self.problem.instance.cluster
        for j, data in enumerate(self.problem.jobs):
            for node in self.nodes_of_job[j]:
                first = self.first_gpu[node]
                for k in range(cluster.node_by_name[node].num_gpus):
                    rows.append(row)
                    cols.append(self.gpu[j][first + k])
                    values.append(1.0)
                for i, mode in enumerate(data.modes):
                    if mode.node == node:
                        rows.append(row)
                        cols.append(int(self.mode[j][i]))
                        values.append(-float(mode.num_gpus))
                row += 1
        self.builder.add_rows(np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64),
                              np.array(values), 0.0, 0.0, count=row)

    def _no_overlap_per_gpu(self) -> None:
        """For every pair (i, j) and GPU g they may share:
        s_j - end_i - M before_ij - M gpu_ig - M gpu_jg >= -3M and
        s_i - end_j + M before_ij - M gpu_ig - M gpu_jg >= -2M."""
        pairs = self.pairs
        count = len(pairs.entry_pair)
        if count == 0:
            return
        first = pairs.first[pairs.entry_pair]
        second = pairs.second[pairs.entry_pair]
        gpu_first = np.array([self.gpu[i][g] for i, g in zip(first.tolist(),
                                                              pairs.entry_gpu.tolist(),
                                                              strict=True)], dtype=np.int64)
        gpu_second = np.array([self.gpu[j][g] for j, g in zip(second.tolist(),
                                                               pairs.entry_gpu.tolist(),
                                                               strict=True)], dtype=np.int64)
        before = self.before[pairs.entry_pair]
        big_m = self.big_m
        rows = np.repeat(np.arange(count), 5)
        after_cols = np.column_stack([self.start[second], self.end[first], before, gpu_first,
                                      gpu_second]).ravel()
        after_values = np.tile([1.0, -1.0, -big_m, -big_m, -big_m], count)
        self.builder.add_rows(rows, after_cols, after_values, -3 * big_m, np.inf, count=count)
        before_cols = np.column_stack([self.start[first], self.end[second], before, gpu_first,
                                       gpu_second]).ravel()
        before_values = np.tile([1.0, -1.0, big_m, -big_m, -big_m], count)
        self.builder.add_rows(rows, before_cols, before_values, -2 * big_m, np.inf, count=count)

    def _deadlines(self) -> None:
        """end_j - M late_j <= d_j; tardiness_j - end_j >= -d_j."""
        count = len(self.deadline_jobs)
        if count == 0:
            return
        deadlines = np.array([seconds(self.problem.jobs[j].deadline or 0)
                              for j in self.deadline_jobs])
        rows = np.repeat(np.arange(count), 2)
        ends = self.end[self.deadline_jobs]
        self.builder.add_rows(rows, np.column_stack([ends, self.late]).ravel(),
                              np.tile([1.0, -self.big_m], count), -np.inf, deadlines, count=count)
        self.builder.add_rows(rows, np.column_stack([self.tardiness, ends]).ravel(),
                              np.tile([1.0, -1.0], count), -deadlines, np.inf, count=count)

    def add_completion_cuts(self, budget: Budget) -> int:
        """e_jm = end_j if mode_jm else 0 (e_jm >= (r_j + p_jm) mode_jm, e_jm <= H mode_jm,
        end_j = sum_m e_jm) and the mean-busy-time cuts of :func:`cuts.separate` (in the
        LP's units: mega-ticks). Returns the number of cuts; ``lp_bound`` is the LP bound
        on sum_j w_j C_j (ticks x integer weights)."""
        from hetsched.formulations.deadline.cuts import _LP_UNIT, separate

        found, self.lp_bound = separate(self.problem, budget)
        if not found:
            return 0
        b = self.builder
        for j, data in enumerate(self.problem.jobs):
            ends = b.add_columns(len(data.modes), 0.0)
            self.end_in_mode.append(ends)
            count = len(data.modes)
            earliest = np.array([seconds(data.release + m.duration) for m in data.modes])
            rows = np.repeat(np.arange(count), 2)
            b.add_rows(rows, np.column_stack([ends, self.mode[j]]).ravel(),
                       np.column_stack([np.ones(count), -earliest]).ravel(), 0.0, np.inf,
                       count=count)
            b.add_rows(rows, np.column_stack([ends, self.mode[j]]).ravel(),
                       np.column_stack([np.ones(count), np.full(count, -self.big_m)]).ravel(),
                       -np.inf, 0.0, count=count)
            b.add_rows(np.zeros(count + 1, dtype=np.int64),
                       np.concatenate([[self.end[j]], ends]),
                       np.concatenate([[1.0], -np.ones(count)]), 0.0, 0.0, count=1)
        unit = _LP_UNIT
        per_second = unit / TICK_S  # mega-ticks per second
        for cut in found:
            cols, values = [], []
            for j, i, on_end, on_use in cut.coefficients(self.problem):
                cols += [int(self.end_in_mode[j][i]), int(self.mode[j][i])]
                values += [on_end * unit * per_second, -on_use * unit * unit]
            b.add_rows(np.zeros(len(cols), dtype=np.int64), np.array(cols), np.array(values),
                       -cut.constant() * unit * unit, np.inf, count=1)
        self.cut_rows = len(found)
        return len(found)

    # -- objective -------------------------------------------------------------------------
    def deadline_cost(self) -> Vector:
        """Missed: sum_j late_j. Tardiness: sum_j w_j tardiness_j (s)."""
        cost = np.zeros(self.model.num_cols)
        if self.problem.objective is DeadlineObjective.MISSED:
            cost[self.late] = 1.0
        else:
            scale = self.problem.weight_scale
            cost[self.tardiness] = [self.problem.jobs[j].weight / scale
                                    for j in self.deadline_jobs]
        return cost

    def completion_cost(self) -> tuple[Vector, float]:
        """sum_j w_j (end_j - a_j) (s): total weighted job completion time, as (cost,
        offset)."""
        cost = np.zeros(self.model.num_cols)
        scale = self.problem.weight_scale
        weights = np.array([d.weight / scale for d in self.problem.jobs])
        cost[self.end] = weights
        offset = -float(sum(w * d.job.arrival for w, d in zip(weights, self.problem.jobs,
                                                              strict=True)))
        return cost, offset

    # -- starts and plans ------------------------------------------------------------------
    def start_values(self, plan: Plan) -> Vector | None:
        """Every variable's value for a complete ``plan`` (a MIP start), or ``None``."""
        if any(d.job.id not in plan for d in self.problem.jobs):
            return None
        values = np.zeros(self.model.num_cols)
        schedule = self.problem.realise(plan)
        gpu_index = {name: k for k, name in enumerate(self.gpu_names)}
        gpus = {a.job: {gpu_index[g] for g in a.gpus} for a in schedule}
        starts = np.zeros(len(self.problem.jobs))
        for j, data in enumerate(self.problem.jobs):
            mode_index, start = plan[data.job.id]
            end = start + data.modes[mode_index].duration
            starts[j] = start
            values[self.start[j]] = seconds(start)
            values[self.end[j]] = seconds(end)
            values[self.mode[j][mode_index]] = 1.0
            for g in gpus[data.job.id]:
                values[self.gpu[j][g]] = 1.0
            if self.end_in_mode:
                values[self.end_in_mode[j][mode_index]] = seconds(end)
        values[self.before] = (starts[self.pairs.first] <= starts[self.pairs.second])
        for k, j in enumerate(self.deadline_jobs.tolist()):
            data = self.problem.jobs[j]
            end = plan[data.job.id][1] + data.modes[plan[data.job.id][0]].duration
            assert data.deadline is not None
            values[self.late[k]] = float(end > data.deadline)
            values[self.tardiness[k]] = max(0.0, seconds(end - data.deadline))
        return values

    def plan_of(self, values: Vector) -> Plan:
        """A solution's modes and GPUs, left-justified on the grid in the order of its
        starts."""
        modes: dict[str, int] = {}
        gpus: dict[str, tuple[str, ...]] = {}
        starts: dict[str, float] = {}
        for j, data in enumerate(self.problem.jobs):
            jid = data.job.id
            modes[jid] = int(np.argmax(values[self.mode[j]]))
            gpus[jid] = tuple(self.gpu_names[g] for g, col in self.gpu[j].items()
                              if values[col] > 0.5)
            starts[jid] = float(values[self.start[j]])
        order = sorted(starts, key=lambda job: (starts[job], job))
        return left_justify(self.problem, modes, gpus, order)

    # -- solving ---------------------------------------------------------------------------
    def solve(self, engine: str, settings: MipSettings, warm_start: Plan | None = None
              ) -> StagePlans:
        """Two stages, like the CP-SAT model: the deadline term on a share of the budget,
        then the weighted completion (s) with the first term held at its best value. Each
        stage starts from the best complete plan known. Objective and bound of the
        completion stage in seconds of weighted JCT, of the deadline stage in its unit."""
        budget = self.budget
        start = None if warm_start is None else self.start_values(warm_start)
        plans = StagePlans(SolverResult(Status.TIME_LIMIT))
        model = self.model
        if self.problem.has_deadlines:
            budget.check("the deadline stage")
            result = solve_mip(model.with_objective(self.deadline_cost()), engine,
                               budget.part(DEADLINE_STAGE_SHARE), settings, start)
            plans.deadline = _stats(result)
            if result.values is None:
                plans.completion = plans.deadline
                return plans
            first = plans.deadline_plan = self.plan_of(result.values)
            best = self.problem.evaluate(first)[0]
            if warm_start is not None and start is not None and \
                    self.problem.evaluate(warm_start) < self.problem.evaluate(first):
                first = dict(warm_start)
            if self.problem.objective is DeadlineObjective.MISSED:
                limit = float(best)
            else:
                limit = self.problem.deadline_seconds(best) + TICK_S
            model = model.with_row(self.deadline_cost(), -np.inf, limit, "stage1")
            start = self.start_values(first)
        budget.check("the completion stage")
        cost, offset = self.completion_cost()
        result = solve_mip(model.with_objective(cost, offset), engine, budget, settings, start)
        stats = _stats(result)
        if self.lp_bound is not None:
            # The cuts' LP bound holds for every schedule (floored against LP round-off).
            lp_bound = self.problem.completion_seconds(self.lp_bound * (1 - 1e-9))
            if stats.bound is None or stats.bound < lp_bound:
                stats = dataclasses.replace(stats, bound=lp_bound)
        plans.completion = stats
        if result.values is not None:
            plans.completion_plan = self.plan_of(result.values)
        return plans

    def size(self) -> dict[str, int]:
        """Variables, constraints and nonzeros of the model."""
        return {"variables": self.model.num_cols, "constraints": self.model.num_rows,
                "nonzeros": int(self.model.matrix.nnz)}


def _stats(result: SolverResult) -> SolverResult:
    """The result without its column values (the plan is read out of them already)."""
    return dataclasses.replace(result, values=None, detail=dict(result.detail))


def size_summary(model: MatrixModel) -> str:
    """``"V variables, R rows, N nonzeros"``."""
    return f"{model.num_cols:,} variables, {model.num_rows:,} rows, {model.matrix.nnz:,} nonzeros"
