"""The ``deadline`` model in CP-SAT: optional interval variables, one per (job, mode).

Variables: ``start[j]`` (ticks), ``use[j, m]`` (job j runs in mode m), an optional
fixed-size interval per (j, m), ``late[j]`` / ``tardiness[j]`` for jobs with a
deadline. Constraints: one mode per job; a cumulative per node (capacity = its
GPUs; a no-overlap when the node has one GPU); a redundant cumulative per GPU
type; deadline indicators; mean-busy-time cuts on ``e_jm`` (= end_j if j runs in
mode m, else 0) that bound the weighted completion time from below
(:mod:`formulations.deadline.cuts`). The objective is lexicographic and solved in
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

from formulations.common import Outcome, SolveStats
from formulations.deadline.problem import DeadlineObjective, DeadlineProblem, Plan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CpSatSettings:
    """Search settings: time limit (s, for both stages together), gap, threads, seed."""

    time_limit_s: float | None = None
    gap: float = 0.0
    threads: int = 1
    seed: int = 0
    #: add mean-busy-time cuts separated on the LP relaxation (a few seconds at most)
    completion_cuts: bool = True


class DeadlineCpSat:
    """Builds the CP-SAT model of a :class:`DeadlineProblem` and solves it."""

    def __init__(self, problem: DeadlineProblem) -> None:
        self.problem = problem
        self.model = cp_model.CpModel()
        self.start: dict[str, cp_model.IntVar] = {}
        self.end: dict[str, cp_model.IntVar] = {}
        self.use: dict[tuple[str, int], cp_model.IntVar] = {}
        self.interval: dict[tuple[str, int], cp_model.IntervalVar] = {}
        self.late: dict[str, cp_model.IntVar] = {}
        self.tardiness: dict[str, cp_model.IntVar] = {}
        self.end_in_mode: dict[tuple[str, int], cp_model.IntVar] = {}
        self.lp_bound: float | None = None
        self._variables()
        self._one_mode_per_job()
        self._node_capacity()
        self._type_capacity()
        self._deadlines()
        self._identical_nodes()

    # -- variables -------------------------------------------------------------------------
    def _variables(self) -> None:
        """s_j in [r_j, H]; use_jm in {0,1}; interval_jm = [start_j, start_j + p_jm) if use_jm."""
        horizon = self.problem.horizon
        for data in self.problem.jobs:
            jid = data.job.id
            shortest = min(m.duration for m in data.modes)
            self.start[jid] = self.model.new_int_var(data.release, horizon - shortest, f"s_{jid}")
            self.end[jid] = self.model.new_int_var(data.release + shortest, horizon, f"e_{jid}")
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
        capacity = self.problem.node_capacity()
        for node, items in per_node.items():
            if capacity[node] == 1:
                self.model.add_no_overlap([iv for iv, _ in items])
            else:
                self.model.add_cumulative([iv for iv, _ in items], [c for _, c in items],
                                          capacity[node])

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
        (k >= 2) only if a job i < j uses n_(k-1): on_(j,k) <= sum_(i<j) on_(i,k-1)."""
        # Nodes are interchangeable only if they offer every job the same modes (a job
        # pinned to one node breaks the symmetry).
        jobs = self.problem.jobs
        offers: dict[str, list[tuple[tuple[int, int], ...]]] = {
            n.name: [] for n in self.problem.instance.cluster.nodes}
        for data in jobs:
            for name, offered in offers.items():
                offered.append(tuple(sorted((m.num_gpus, m.duration) for m in data.modes
                                            if m.node == name)))
        groups: dict[tuple[str, int, tuple[tuple[tuple[int, int], ...], ...]], list[str]] = \
            defaultdict(list)
        for cluster_node in self.problem.instance.cluster.nodes:
            groups[cluster_node.gpu_type, cluster_node.num_gpus,
                   tuple(offers[cluster_node.name])].append(cluster_node.name)
        for nodes in groups.values():
            if len(nodes) < 2:
                continue
            # identical nodes must offer identical modes to every job for the swap to be valid
            on: dict[tuple[int, str], cp_model.LinearExpr] = {}
            for position, data in enumerate(jobs):
                for node in nodes:
                    on[position, node] = sum(
                        (self.use[data.job.id, i] for i, m in enumerate(data.modes)
                         if m.node == node), cp_model.LinearExpr.constant(0))
            for previous, node in itertools.pairwise(nodes):
                for position in range(len(jobs)):
                    earlier = sum((on[i, previous] for i in range(position)),
                                  cp_model.LinearExpr.constant(0))
                    self.model.add(on[position, node] <= earlier)

    def add_completion_cuts(self, time_limit_s: float = 5.0) -> int:
        """e_jm = end_j if use_jm else 0, e_jm >= (r_j + p_jm) use_jm, end_j = sum_m e_jm, and
        the cuts sum a_jm e_jm >= sum b_jm use_jm - g of :func:`cuts.separate` (integer
        coefficients rounded so that each cut stays valid). Returns the number of cuts."""
        from formulations.deadline.cuts import separate

        found, self.lp_bound = separate(self.problem, time_limit_s=time_limit_s)
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
            wait = self.model.new_int_var(0, self.problem.horizon, f"wait_{jid}")
            self.model.add(wait == self.start[jid] - d.release)
            terms.append(d.weight * wait)
            terms += [d.weight * m.duration * self.use[jid, i] for i, m in enumerate(d.modes)]
        constant = sum(d.weight * d.release for d in self.problem.jobs)
        return sum(terms, cp_model.LinearExpr.constant(constant))

    # -- solving ---------------------------------------------------------------------------
    def add_hint(self, plan: Mapping[str, tuple[int, int]]) -> None:
        """Hint a (possibly partial) plan: its modes and start ticks."""
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        for data in self.problem.jobs:
            jid = data.job.id
            if jid not in plan:
                continue
            mode_index, start = plan[jid]
            self.model.add_hint(self.start[jid], start)
            for index in range(len(data.modes)):
                self.model.add_hint(self.use[jid, index], int(index == mode_index))
                if (jid, index) in self.end_in_mode:
                    self.model.add_hint(self.end_in_mode[jid, index], 0 if index != mode_index
                                        else start + data.modes[index].duration)

    def _run(self, settings: CpSatSettings, time_left: float | None) -> tuple[
            cp_model.CpSolver, Any]:
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.num_workers = max(1, settings.threads)
        params.random_seed = settings.seed
        params.relative_gap_limit = settings.gap
        params.linearization_level = 2
        if time_left is not None:
            params.max_time_in_seconds = max(0.01, time_left)
        status = solver.solve(self.model)
        return solver, status

    def _plan(self, solver: cp_model.CpSolver) -> Plan:
        plan: Plan = {}
        for data in self.problem.jobs:
            jid = data.job.id
            mode_index = next(i for i in range(len(data.modes)) if solver.value(self.use[jid, i]))
            plan[jid] = (mode_index, solver.value(self.start[jid]))
        return plan

    def solve(self, settings: CpSatSettings, warm_start: Plan | None = None) -> tuple[
            Plan | None, SolveStats, SolveStats | None]:
        """Two stages: minimise the deadline term, then, with it fixed at its best value,
        the weighted completion time. Returns the plan and each stage's statistics
        (objective and bound in model units; ``None`` for a skipped first stage)."""
        began = time.perf_counter()
        deadline_stats: SolveStats | None = None
        if settings.completion_cuts:
            budget = 5.0 if settings.time_limit_s is None else min(5.0, settings.time_limit_s / 10)
            self.add_completion_cuts(budget)
        if warm_start:
            self.add_hint(warm_start)
        if self.problem.has_deadlines:
            self.model.minimize(self.deadline_term())
            time_left = None
            if settings.time_limit_s is not None:
                time_left = settings.time_limit_s - (time.perf_counter() - began)
            solver, status = self._run(settings, time_left)
            deadline_stats = _stats(solver, status, settings, began)
            log.info("cpsat deadline stage: %s %s (bound %s)", deadline_stats.outcome,
                     deadline_stats.objective, deadline_stats.bound)
            if deadline_stats.outcome is not Outcome.OPTIMAL and deadline_stats.outcome is not \
                    Outcome.FEASIBLE:
                return None, deadline_stats, deadline_stats
            assert deadline_stats.objective is not None
            # Hint the better (lexicographically) of the first stage's plan and the start.
            first = self._plan(solver)
            if warm_start is not None and len(warm_start) == len(self.problem.jobs) and \
                    self.problem.evaluate(warm_start) < self.problem.evaluate(first):
                first = dict(warm_start)
            self.add_hint(first)
            self.model.add(self.deadline_term() <= round(deadline_stats.objective))
        self.model.minimize(self.completion_term())
        time_left = None
        if settings.time_limit_s is not None:
            time_left = settings.time_limit_s - (time.perf_counter() - began)
        second_began = time.perf_counter()
        solver, status = self._run(settings, time_left)
        stats = _stats(solver, status, settings, second_began)
        if self.lp_bound is not None:
            # The cuts' LP bound holds for every schedule, so also for this stage; it can be
            # the only bound when CP-SAT stops early (floored against LP round-off).
            lp_bound = math.floor(self.lp_bound * (1 - 1e-9))
            if stats.bound is None or stats.bound < lp_bound:
                stats = dataclasses.replace(stats, bound=float(lp_bound))
        log.info("cpsat completion stage: %s %s (bound %s)", stats.outcome, stats.objective,
                 stats.bound)
        plan = self._plan(solver) if stats.outcome in (Outcome.OPTIMAL, Outcome.FEASIBLE) \
            else None
        return plan, stats, deadline_stats


def _stats(solver: cp_model.CpSolver, status: Any, settings: CpSatSettings,
           began: float) -> SolveStats:
    wall = time.perf_counter() - began
    if status == cp_model.OPTIMAL:
        # OPTIMAL in CP-SAT means proven within relative_gap_limit, which may be > 0.
        proven = settings.gap == 0 or solver.objective_value == solver.best_objective_bound
        return SolveStats(Outcome.OPTIMAL if proven else Outcome.FEASIBLE,
                          solver.objective_value, solver.best_objective_bound, wall)
    if status == cp_model.FEASIBLE:
        return SolveStats(Outcome.FEASIBLE, solver.objective_value, solver.best_objective_bound,
                          wall, hit_time_limit=True)
    if status == cp_model.INFEASIBLE:
        return SolveStats(Outcome.INFEASIBLE, wall_s=wall)
    if status == cp_model.MODEL_INVALID:
        return SolveStats(Outcome.ERROR, wall_s=wall,
                          detail={"message": solver.response_proto.solution_info})
    return SolveStats(Outcome.NO_SOLUTION, wall_s=wall, hit_time_limit=True)
