"""The ``deadline`` model in CP-SAT: optional interval variables, one per (job, mode).

Variables: ``start[j]`` (ticks), ``use[j, m]`` (job j runs in mode m), an optional
fixed-size interval per (j, m), ``late[j]`` / ``tardiness[j]`` for jobs with a
deadline. Constraints: one mode per job; a cumulative per node (capacity = its
GPUs; a no-overlap when the node has one GPU); a redundant cumulative per GPU
type; deadline indicators; mean-busy-time cuts on ``e_jm`` (= end_j if j runs in
mode m, else 0) that bound the weighted completion time from below
(:mod:`hetsched.formulations.deadline.cuts`). The objective is lexicographic and solved in
two stages (see docs/formulations.md).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from hetsched.core.log_levels import solve_log_level
from hetsched.core.result import Status
from hetsched.formulations.budget import Budget, BudgetExhaustedError
from hetsched.formulations.common import SolverResult
from hetsched.formulations.cpsat_run import run_cpsat
from hetsched.formulations.deadline.problem import (
    DEADLINE_STAGE_SHARE,
    DeadlineObjective,
    DeadlineProblem,
    Plan,
    StagePlans,
)

log = logging.getLogger(__name__)


#: The mean-busy-time cuts get this share of the budget, at most ``CUTS_MAX``.
CUTS_SHARE = 0.1
CUTS_MAX = 5.0
#: Seconds to build (and later free) the CP-SAT model per (job, mode) pair, measured on
#: 2,000 jobs x 116 modes (5.5 s to build, 2 s to free): a model that would take longer
#: than what is left of a wall-clock budget is not built (the start plan is returned).
BUILD_S_PER_MODE = 3.5e-5
#: Deterministic budgets: a CP-SAT stage needs at least this many work units per
#: (job, mode) pair to load its model and hint and search at all (200 jobs, 5,712 pairs:
#: 0.05 units spent 0.3 to 0.7 s of wall time in presolve and found nothing). A budget
#: whose first stage would get less is not spent on CP-SAT: the start plan is returned.
MIN_STAGE_UNITS_PER_MODE = 1e-4
#: Node symmetry breaking costs two rows per (job, pair of identical nodes): beyond this
#: many, building them costs more than CP-SAT's own symmetry detection would gain
#: (2,000 jobs on 3 x 32 identical nodes: 186,000 rows, 6 s in Python).
SYMMETRY_MAX_ROWS = 50_000


def node_cumulatives(model: cp_model.CpModel,
                     per_node: Mapping[str, list[tuple[cp_model.IntervalVar, int]]],
                     capacity: Mapping[str, int]) -> None:
    """A cumulative per node over its (interval, GPUs) pairs, at most its GPUs (a
    no-overlap for a node of one GPU)."""
    for node, items in per_node.items():
        if capacity[node] == 1:
            model.add_no_overlap([iv for iv, _ in items])
        else:
            model.add_cumulative([iv for iv, _ in items], [c for _, c in items], capacity[node])


@dataclass(frozen=True)
class CpSatSettings:
    """Search settings: gap, threads, seed (the budget is passed on its own)."""

    gap: float = 0.0
    threads: int = 1
    seed: int = 0
    #: add mean-busy-time cuts separated on the LP relaxation (a share of the budget)
    completion_cuts: bool = True


class DeadlineCpSat:
    """Builds the CP-SAT model of a :class:`DeadlineProblem` and solves it.

    Building checks ``budget`` between constraint families (and every few hundred jobs):
    a model that cannot be built in time raises
    :class:`~hetsched.formulations.budget.BudgetExhaustedError`, and the caller keeps its
    start plan."""

    def __init__(self, problem: DeadlineProblem, budget: Budget | None = None) -> None:
        self.problem = problem
        self.budget = budget or Budget.unlimited()
        modes = sum(len(data.modes) for data in problem.jobs)
        if self.budget.deterministic and self.budget.limited:
            needed = modes * MIN_STAGE_UNITS_PER_MODE / DEADLINE_STAGE_SHARE
            if (self.budget.remaining() or 0.0) < needed:
                raise BudgetExhaustedError(
                    f"{self.budget.describe()} is too small for CP-SAT on {modes:,} job-modes "
                    f"(a stage needs {needed:.3g} units)")
        left = None if self.budget.deterministic else self.budget.remaining()
        if left is not None and modes * BUILD_S_PER_MODE > left:
            raise BudgetExhaustedError(
                f"the CP-SAT model ({modes:,} job-modes, about {modes * BUILD_S_PER_MODE:.1f} s "
                f"to build) does not fit what is left of the budget ({self.budget.describe()}:"
                f" {left:.1f} s left)")
        self.model = cp_model.CpModel()
        self.start: dict[str, cp_model.IntVar] = {}
        self.end: dict[str, cp_model.IntVar] = {}
        self.use: dict[tuple[str, int], cp_model.IntVar] = {}
        self.interval: dict[tuple[str, int], cp_model.IntervalVar] = {}
        self.late: dict[str, cp_model.IntVar] = {}
        self.tardiness: dict[str, cp_model.IntVar] = {}
        self.end_in_mode: dict[tuple[str, int], cp_model.IntVar] = {}
        self.wait: dict[str, cp_model.IntVar] = {}
        #: groups of interchangeable nodes, in the order the symmetry breaking uses them
        self.symmetric_groups: list[list[str]] = []
        self.lp_bound: float | None = None
        for family in (self._variables, self._one_mode_per_job, self._node_capacity,
                       self._type_capacity, self._deadlines, self._identical_nodes):
            family()
            self.budget.check("building the CP-SAT model")

    # -- variables -------------------------------------------------------------------------
    def _variables(self) -> None:
        """s_j in [r_j, H]; use_jm in {0,1}; interval_jm = [start_j, start_j + p_jm) if use_jm."""
        horizon = self.problem.horizon
        for position, data in enumerate(self.problem.jobs):
            if position % 200 == 199:
                self.budget.check("building the CP-SAT model")
            jid = data.job.id
            shortest = min(m.duration for m in data.modes)
            self.start[jid] = self.model.new_int_var(data.release, horizon - shortest, f"s_{jid}")
            self.end[jid] = self.model.new_int_var(data.release + shortest, horizon, f"e_{jid}")
            self.wait[jid] = self.model.new_int_var(0, horizon, f"wait_{jid}")
            self.model.add(self.wait[jid] == self.start[jid] - data.release)
            for index, mode in enumerate(data.modes):
                use = self.model.new_bool_var(f"use_{jid}_{index}")
                self.use[jid, index] = use
                self.interval[jid, index] = self.model.new_optional_fixed_size_interval_var(
                    self.start[jid], mode.duration, use, f"iv_{jid}_{index}")

    # -- constraint families ---------------------------------------------------------------
    def _one_mode_per_job(self) -> None:
        """sum_m use_jm = 1 and end_j = start_j + sum_m p_jm use_jm for every job j."""
        for data in self.problem.jobs:
            jid = data.job.id
            uses = [self.use[jid, i] for i in range(len(data.modes))]
            self.model.add_exactly_one(uses)
            self.model.add(self.end[jid] == self.start[jid] + sum(
                mode.duration * self.use[jid, i] for i, mode in enumerate(data.modes)))

    def _node_capacity(self) -> None:
        """sum_{j,m on n: start_j <= t < end_j} c_m use_jm <= G_n for every node n and time t."""
        per_node: dict[str, list[tuple[cp_model.IntervalVar, int]]] = defaultdict(list)
        for data in self.problem.jobs:
            for index, mode in enumerate(data.modes):
                per_node[mode.node].append((self.interval[data.job.id, index], mode.num_gpus))
        node_cumulatives(self.model, per_node, self.problem.node_capacity())

    def _type_capacity(self) -> None:
        """Redundant: sum over the nodes of type k of the node constraint, <= G_k."""
        per_type: dict[str, list[tuple[cp_model.IntervalVar, int]]] = defaultdict(list)
        nodes_per_type: dict[str, set[str]] = defaultdict(set)
        for data in self.problem.jobs:
            for index, mode in enumerate(data.modes):
                per_type[mode.gpu_type].append((self.interval[data.job.id, index],
                                                mode.num_gpus))
                nodes_per_type[mode.gpu_type].add(mode.node)
        for gpu_type, items in per_type.items():
            if len(nodes_per_type[gpu_type]) > 1:
                self.model.add_cumulative([iv for iv, _ in items], [c for _, c in items],
                                          self.problem.instance.cluster.num_gpus(gpu_type))

    def _deadlines(self) -> None:
        """late_j = 0 => end_j <= d_j; tardiness_j >= end_j - d_j, tardiness_j >= 0."""
        for data in self.problem.jobs:
            if data.deadline is None:
                continue
            jid = data.job.id
            late = self.model.new_bool_var(f"late_{jid}")
            self.model.add(self.end[jid] <= data.deadline).only_enforce_if(~late)
            self.model.add(self.end[jid] >= data.deadline + 1).only_enforce_if(late)
            self.late[jid] = late
            tardiness = self.model.new_int_var(0, max(0, self.problem.horizon - data.deadline),
                                               f"tard_{jid}")
            self.model.add(tardiness >= self.end[jid] - data.deadline)
            self.tardiness[jid] = tardiness

    def _identical_nodes(self) -> None:
        """Symmetry: of nodes n_1, n_2, ... with the same type and size, job j may use n_k
        (k >= 2) only if a job i < j uses n_(k-1): on_(j,k) <= seen_(j,k-1), with
        seen_(j,k-1) <= seen_(j-1,k-1) + on_(j-1,k-1) (seen: some earlier job uses n_(k-1);
        linear in the jobs, where summing every earlier job per row was quadratic). Jobs
        with no mode on a group leave its chain as it is."""
        # Nodes are interchangeable only if they offer every job the same modes (a job
        # pinned to one node breaks the symmetry).
        jobs = self.problem.jobs
        names = [n.name for n in self.problem.instance.cluster.nodes]
        offers: dict[str, list[tuple[tuple[int, int], ...]]] = {name: [] for name in names}
        uses: list[dict[str, list[cp_model.IntVar]]] = []  # per job: node -> its mode uses
        for data in jobs:
            by_node: dict[str, list[tuple[int, int]]] = defaultdict(list)
            on_node: dict[str, list[cp_model.IntVar]] = defaultdict(list)
            for i, m in enumerate(data.modes):
                by_node[m.node].append((m.num_gpus, m.duration))
                on_node[m.node].append(self.use[data.job.id, i])
            uses.append(on_node)
            for name, offered in offers.items():
                offered.append(tuple(sorted(by_node[name])) if name in by_node else ())
        groups: dict[tuple[str, int, tuple[tuple[tuple[int, int], ...], ...]], list[str]] = \
            defaultdict(list)
        for cluster_node in self.problem.instance.cluster.nodes:
            groups[cluster_node.gpu_type, cluster_node.num_gpus,
                   tuple(offers[cluster_node.name])].append(cluster_node.name)
        chains = [(nodes, [position for position in range(len(jobs))
                           if nodes[0] in uses[position]])
                  for nodes in groups.values() if len(nodes) >= 2]
        rows = sum(len(members) * (len(nodes) - 1) for nodes, members in chains)
        if rows > SYMMETRY_MAX_ROWS:
            log.log(solve_log_level(), "cpsat: no node symmetry breaking (%d rows > %d)",
                    rows, SYMMETRY_MAX_ROWS)
            return
        for nodes, members in chains:
            self.symmetric_groups.append(nodes)
            for previous, node in itertools.pairwise(nodes):
                self.budget.check("building the CP-SAT model")
                seen: cp_model.LinearExpr = cp_model.LinearExpr.constant(0)
                for count, position in enumerate(members):
                    self.model.add(cp_model.LinearExpr.sum(uses[position][node]) <= seen)
                    if count + 1 < len(members):
                        flag = self.model.new_bool_var(f"seen_{previous}_{position}")
                        self.model.add(flag <= seen + cp_model.LinearExpr.sum(
                            uses[position][previous]))
                        seen = cp_model.LinearExpr.sum([flag])

    def add_completion_cuts(self, budget: Budget | None = None) -> int:
        """e_jm = end_j if use_jm else 0, e_jm >= (r_j + p_jm) use_jm, end_j = sum_m e_jm, and
        the cuts sum a_jm e_jm >= sum b_jm use_jm - g of :func:`cuts.separate` (integer
        coefficients rounded so that each cut stays valid). Returns the number of cuts."""
        from hetsched.formulations.deadline.cuts import separate

        found, self.lp_bound = separate(self.problem, budget)
        if not found:
            return 0
        horizon = self.problem.horizon
        for data in self.problem.jobs:
            jid = data.job.id
            for index, mode in enumerate(data.modes):
                end = self.model.new_int_var(0, horizon, f"e_{jid}_{index}")
                self.model.add(end == self.end[jid]).only_enforce_if(self.use[jid, index])
                self.model.add(end == 0).only_enforce_if(~self.use[jid, index])
                self.model.add(end >= (data.release + mode.duration) * self.use[jid, index])
                self.end_in_mode[jid, index] = end
            self.model.add(self.end[jid] == sum(
                self.end_in_mode[jid, i] for i in range(len(data.modes))))
        for cut in found:
            terms = cut.coefficients(self.problem)
            # Divide by a power of ten so that the row fits in 64 bits, rounding the left
            # side's coefficients up and the right side's down: the cut only gets weaker.
            size = sum(a * horizon + b for _, _, a, b in terms) + cut.constant()
            scale = 10 ** max(0, math.ceil(math.log10(max(1.0, size / 1e15))))
            left = [math.ceil(a / scale) * self.end_in_mode[self.problem.jobs[j].job.id, i]
                    for j, i, a, _ in terms]
            right = [math.floor(b / scale) * self.use[self.problem.jobs[j].job.id, i]
                     for j, i, _, b in terms]
            self.model.add(sum(left, cp_model.LinearExpr.constant(0)) >= sum(
                right, cp_model.LinearExpr.constant(-math.ceil(cut.constant() / scale))))
        return len(found)

    # -- objective -------------------------------------------------------------------------
    def deadline_term(self) -> cp_model.LinearExpr:
        """Missed: sum_j late_j. Tardiness: sum_j w_j tardiness_j (integer weights)."""
        if self.problem.objective is DeadlineObjective.MISSED:
            return sum(self.late.values(), cp_model.LinearExpr.constant(0))
        weights = {d.job.id: d.weight for d in self.problem.jobs}
        return sum((weights[j] * t for j, t in self.tardiness.items()),
                   cp_model.LinearExpr.constant(0))

    def completion_term(self) -> cp_model.LinearExpr:
        """sum_j w_j end_j (the constant sum_j w_j a_j is added when reporting)."""
        terms = []
        for d in self.problem.jobs:
            jid = d.job.id
            terms.append(d.weight * self.wait[jid])
            terms += [d.weight * m.duration * self.use[jid, i] for i, m in enumerate(d.modes)]
        constant = sum(d.weight * d.release for d in self.problem.jobs)
        return sum(terms, cp_model.LinearExpr.constant(constant))

    # -- solving ---------------------------------------------------------------------------
    def canonical(self, plan: Mapping[str, tuple[int, int]]) -> Plan:
        """The same plan with interchangeable nodes relabelled so that it satisfies the
        symmetry breaking (:meth:`_identical_nodes`): in each group, the k-th node to be
        used (in job order) becomes the group's k-th node. Same objective; a hint that
        broke the symmetry constraints was infeasible, and CP-SAT stopped early could then
        hold a plan worse than its hint."""
        relabel: dict[str, str] = {}
        for nodes in self.symmetric_groups:
            members = set(nodes)
            taken = 0
            for data in self.problem.jobs:
                if data.job.id not in plan:
                    continue
                node = data.modes[plan[data.job.id][0]].node
                if node in members and node not in relabel:
                    relabel[node] = nodes[taken]
                    taken += 1
            for node in nodes:  # unused nodes: any one-to-one completion
                if node not in relabel:
                    relabel[node] = next(n for n in nodes if n not in relabel.values())
        out: Plan = {}
        for data in self.problem.jobs:
            if data.job.id not in plan:
                continue
            index, start = plan[data.job.id]
            mode = data.modes[index]
            target = relabel.get(mode.node, mode.node)
            if target != mode.node:
                index = next(i for i, m in enumerate(data.modes) if m.node == target and
                             (m.num_gpus, m.duration) == (mode.num_gpus, mode.duration))
            out[data.job.id] = (index, start)
        return out

    def add_hint(self, plan: Mapping[str, tuple[int, int]]) -> None:
        """Hint a (possibly partial) plan, relabelled to satisfy the symmetry breaking:
        every variable it determines (start, end, wait, modes, ends per mode, lateness,
        tardiness), so that CP-SAT takes a complete, feasible plan as its first solution
        instead of trying to repair it."""
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        plan = self.canonical(plan)
        for data in self.problem.jobs:
            jid = data.job.id
            if jid not in plan:
                continue
            mode_index, start = plan[jid]
            end = start + data.modes[mode_index].duration
            self.model.add_hint(self.start[jid], start)
            self.model.add_hint(self.end[jid], end)
            self.model.add_hint(self.wait[jid], start - data.release)
            for index in range(len(data.modes)):
                self.model.add_hint(self.use[jid, index], int(index == mode_index))
                if (jid, index) in self.end_in_mode:
                    self.model.add_hint(self.end_in_mode[jid, index],
                                        end if index == mode_index else 0)
            if jid in self.late:
                assert data.deadline is not None
                self.model.add_hint(self.late[jid], int(end > data.deadline))
                self.model.add_hint(self.tardiness[jid], max(0, end - data.deadline))

    def _plan(self, solver: cp_model.CpSolver) -> Plan:
        plan: Plan = {}
        for data in self.problem.jobs:
            jid = data.job.id
            mode_index = next(i for i in range(len(data.modes)) if solver.value(self.use[jid, i]))
            plan[jid] = (mode_index, solver.value(self.start[jid]))
        return plan

    def solve(self, settings: CpSatSettings, warm_start: Plan | None = None) -> StagePlans:
        """Two stages: minimise the deadline term (a share of the budget), then, with it
        fixed at its best value, the weighted completion time (the rest). Each stage is
        hinted with the best complete plan known (the start, then the better of it and the
        first stage's plan). Building the cuts and each stage check the budget."""
        budget = self.budget
        budget.check("the mean-busy-time cuts")
        if settings.completion_cuts:
            self.add_completion_cuts(budget.part(CUTS_SHARE, CUTS_MAX))
        complete = warm_start is not None and len(warm_start) == len(self.problem.jobs)
        if warm_start:
            self.add_hint(warm_start)
        plans = StagePlans(SolverResult(Status.TIME_LIMIT))
        if self.problem.has_deadlines:
            budget.check("the deadline stage")
            self.model.minimize(self.deadline_term())
            solver, status = self._run(settings, budget.part(DEADLINE_STAGE_SHARE))
            plans.deadline = _stats(solver, status, settings)
            log.log(solve_log_level(), "cpsat deadline stage: %s %s (bound %s)",
                    plans.deadline.outcome, plans.deadline.objective, plans.deadline.bound)
            if plans.deadline.outcome not in (Status.OPTIMAL, Status.FEASIBLE):
                plans.completion = plans.deadline
                return plans
            assert plans.deadline.objective is not None
            plans.deadline_plan = first = self._plan(solver)
            # Hint the better (lexicographically) of the first stage's plan and the start.
            if complete and warm_start is not None and \
                    self.problem.evaluate(warm_start) < self.problem.evaluate(first):
                first = dict(warm_start)
            self.add_hint(first)
            self.model.add(self.deadline_term() <= round(plans.deadline.objective))
        budget.check("the completion stage")
        self.model.minimize(self.completion_term())
        solver, status = self._run(settings, budget)
        stats = _stats(solver, status, settings)
        if self.lp_bound is not None:
            # The cuts' LP bound holds for every schedule, so also for this stage; it can be
            # the only bound when CP-SAT stops early (floored against LP round-off).
            lp_bound = math.floor(self.lp_bound * (1 - 1e-9))
            if stats.bound is None or stats.bound < lp_bound:
                stats = dataclasses.replace(stats, bound=float(lp_bound))
        log.log(solve_log_level(), "cpsat completion stage: %s %s (bound %s)",
                stats.outcome, stats.objective, stats.bound)
        plans.completion = stats
        if stats.outcome in (Status.OPTIMAL, Status.FEASIBLE):
            plans.completion_plan = self._plan(solver)
        return plans

    def _run(self, settings: CpSatSettings, budget: Budget) -> tuple[cp_model.CpSolver, Any]:
        began = time.perf_counter()

        def configure(params: Any) -> None:
            params.linearization_level = 2

        solver, status = run_cpsat(self.model, budget, threads=settings.threads,
                                   seed=settings.seed, gap=settings.gap, configure=configure)
        log.debug("cpsat: %s in %.3f s", solver.status_name(status),
                  time.perf_counter() - began)
        return solver, status


def _stats(solver: cp_model.CpSolver, status: Any, settings: CpSatSettings) -> SolverResult:
    wall = solver.wall_time
    if status == cp_model.OPTIMAL:
        # OPTIMAL in CP-SAT means proven within relative_gap_limit, which may be > 0.
        proven = settings.gap == 0 or solver.objective_value == solver.best_objective_bound
        return SolverResult(Status.OPTIMAL if proven else Status.FEASIBLE,
                            solver.objective_value, solver.best_objective_bound, wall_s=wall)
    if status == cp_model.FEASIBLE:
        return SolverResult(Status.FEASIBLE, solver.objective_value,
                            solver.best_objective_bound, wall_s=wall, hit_limit=True)
    if status == cp_model.INFEASIBLE:
        return SolverResult(Status.INFEASIBLE, wall_s=wall)
    if status == cp_model.MODEL_INVALID:
        return SolverResult(Status.ERROR, wall_s=wall,
                            detail={"message": solver.response_proto.solution_info})
    return SolverResult(Status.TIME_LIMIT, wall_s=wall, hit_limit=True)
