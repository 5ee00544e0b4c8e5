"""The ``deadline`` model as a MILP in PuLP (solved by CBC or HiGHS).

A per-GPU disjunctive model in continuous time (seconds, on the same rounded data
as CP-SAT): ``mode[j, m]`` chooses a node and a gang size, ``gpu[j, g]`` the
concrete GPUs of that node, ``before[i, j]`` orders two jobs, and big-M
disjunctions keep two jobs that share a GPU apart. Holding concrete GPUs for the
whole run is no restriction: any schedule that respects node capacities can be
given such GPUs (see solver.placement), so this model and the per-node cumulative
of CP-SAT have the same optimum.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

import pulp

from formulations.common import TICK_S, Outcome, SolveStats, seconds
from formulations.deadline.problem import (
    DeadlineObjective,
    DeadlineProblem,
    Plan,
    left_justify,
)
from formulations.pulp_backend import MipSettings, run

log = logging.getLogger(__name__)


class DeadlineMilp:
    """Builds the PuLP model of a :class:`DeadlineProblem` and solves it in two stages."""

    def __init__(self, problem: DeadlineProblem) -> None:
        self.problem = problem
        self.lp = pulp.LpProblem("deadline", pulp.LpMinimize)
        self.big_m = seconds(problem.horizon)
        self.gpus_of_node = {n.name: n.gpu_ids() for n in problem.instance.cluster.nodes}
        self.start: dict[str, pulp.LpVariable] = {}
        self.end: dict[str, pulp.LpAffineExpression] = {}
        self.mode: dict[tuple[str, int], pulp.LpVariable] = {}
        self.gpu: dict[tuple[str, str], pulp.LpVariable] = {}
        self.before: dict[tuple[str, str], pulp.LpVariable] = {}
        self.late: dict[str, pulp.LpVariable] = {}
        self.tardiness: dict[str, pulp.LpVariable] = {}
        self.end_in_mode: dict[tuple[str, int], pulp.LpVariable] = {}
        self.lp_bound: float | None = None
        self._variables()
        self._one_mode_per_job()
        self._gpus_match_mode()
        self._no_overlap_per_gpu()
        self._horizon()
        self._deadlines()

    def _name(self, *parts: object) -> str:
        return "_".join(str(p) for p in parts).replace("/", "-").replace("-", "_")

    # -- variables -------------------------------------------------------------------------
    def _variables(self) -> None:
        """s_j >= r_j (s); mode_jm, gpu_jg, before_ij binary; end_j = s_j + sum_m p_jm mode_jm."""
        for data in self.problem.jobs:
            jid = data.job.id
            self.start[jid] = self.lp.add_variable(self._name("s", jid),
                                                   lowBound=seconds(data.release))
            for index in range(len(data.modes)):
                self.mode[jid, index] = self.lp.add_variable(self._name("x", jid, index),
                                                             cat="Binary")
            for node in sorted({m.node for m in data.modes}):
                for g in self.gpus_of_node[node]:
                    self.gpu[jid, g] = self.lp.add_variable(self._name("y", jid, g), cat="Binary")
            self.end[jid] = self.start[jid] + pulp.lpSum(
                seconds(m.duration) * self.mode[jid, i] for i, m in enumerate(data.modes))
        jobs = self.problem.jobs
        for a, first in enumerate(jobs):
            for second in jobs[a + 1:]:
                if self._shared_gpus(first.job.id, second.job.id):
                    self.before[first.job.id, second.job.id] = self.lp.add_variable(
                        self._name("o", first.job.id, second.job.id), cat="Binary")

    def _shared_gpus(self, first: str, second: str) -> list[str]:
        return sorted({g for (j, g) in self.gpu if j == first} &
                      {g for (j, g) in self.gpu if j == second})

    # -- constraint families ---------------------------------------------------------------
    def _one_mode_per_job(self) -> None:
        """sum_m mode_jm = 1 for every job j."""
        for data in self.problem.jobs:
            jid = data.job.id
            self.lp += (pulp.lpSum(self.mode[jid, i] for i in range(len(data.modes))) == 1,
                        self._name("one_mode", jid))

    def _gpus_match_mode(self) -> None:
        """sum_{g in n} gpu_jg = sum_{m on n} c_m mode_jm for every job j and node n."""
        for data in self.problem.jobs:
            jid = data.job.id
            for node in sorted({m.node for m in data.modes}):
                self.lp += (
                    pulp.lpSum(self.gpu[jid, g] for g in self.gpus_of_node[node])
                    == pulp.lpSum(m.num_gpus * self.mode[jid, i]
                                  for i, m in enumerate(data.modes) if m.node == node),
                    self._name("gpus", jid, node))

    def _no_overlap_per_gpu(self) -> None:
        """start_j >= end_i - M (3 - before_ij - gpu_ig - gpu_jg) and
        start_i >= end_j - M (2 + before_ij - gpu_ig - gpu_jg) for every pair and shared GPU g."""
        big_m = self.big_m
        for (first, second), before in self.before.items():
            for g in self._shared_gpus(first, second):
                both = self.gpu[first, g] + self.gpu[second, g]
                self.lp += (self.start[second] >= self.end[first] - big_m * (3 - before - both),
                            self._name("after", first, second, g))
                self.lp += (self.start[first] >= self.end[second] - big_m * (2 + before - both),
                            self._name("before", first, second, g))

    def _horizon(self) -> None:
        """end_j <= H: every active schedule ends by the horizon."""
        for data in self.problem.jobs:
            self.lp += self.end[data.job.id] <= self.big_m, self._name("horizon", data.job.id)

    def _deadlines(self) -> None:
        """end_j <= d_j + M late_j; tardiness_j >= end_j - d_j, tardiness_j >= 0."""
        for data in self.problem.jobs:
            if data.deadline is None:
                continue
            jid = data.job.id
            deadline = seconds(data.deadline)
            self.late[jid] = self.lp.add_variable(self._name("late", jid), cat="Binary")
            self.lp += (self.end[jid] <= deadline + self.big_m * self.late[jid],
                        self._name("deadline", jid))
            self.tardiness[jid] = self.lp.add_variable(self._name("tard", jid), lowBound=0)
            self.lp += (self.tardiness[jid] >= self.end[jid] - deadline,
                        self._name("tardiness", jid))

    def add_completion_cuts(self, time_limit_s: float = 5.0) -> int:
        """e_jm = end_j if mode_jm else 0 (e_jm >= (r_j + p_jm) mode_jm, e_jm <= H mode_jm,
        end_j = sum_m e_jm) and the mean-busy-time cuts of :func:`cuts.separate`, the same
        rows as in the CP-SAT model (in the LP's units: mega-ticks). Returns the number of
        cuts; ``lp_bound`` is the LP bound on sum_j w_j C_j (ticks x integer weights)."""
        from formulations.deadline.cuts import _LP_UNIT, separate

        found, self.lp_bound = separate(self.problem, time_limit_s=time_limit_s)
        if not found:
            return 0
        for data in self.problem.jobs:
            jid = data.job.id
            for index, mode in enumerate(data.modes):
                end = self.lp.add_variable(self._name("e", jid, index), lowBound=0)
                self.lp += (end >= seconds(data.release + mode.duration) * self.mode[jid, index],
                            self._name("e_low", jid, index))
                self.lp += (end <= self.big_m * self.mode[jid, index],
                            self._name("e_up", jid, index))
                self.end_in_mode[jid, index] = end
            self.lp += (self.end[jid] == pulp.lpSum(
                self.end_in_mode[jid, i] for i in range(len(data.modes))),
                self._name("e_sum", jid))
        unit = _LP_UNIT
        per_second = unit / TICK_S  # mega-ticks per second
        for number, cut in enumerate(found):
            row = pulp.lpSum(
                on_end * unit * per_second * self.end_in_mode[self.problem.jobs[j].job.id, i]
                - on_use * unit * unit * self.mode[self.problem.jobs[j].job.id, i]
                for j, i, on_end, on_use in cut.coefficients(self.problem))
            self.lp += row >= -cut.constant() * unit * unit, f"mean_busy_{number}"
        return len(found)

    # -- objective -------------------------------------------------------------------------
    def deadline_term(self) -> pulp.LpAffineExpression:
        """Missed: sum_j late_j. Tardiness: sum_j w_j tardiness_j (s)."""
        if self.problem.objective is DeadlineObjective.MISSED:
            return pulp.lpSum(self.late.values())
        weights = {d.job.id: d.weight / self.problem.weight_scale for d in self.problem.jobs}
        return pulp.lpSum(weights[j] * t for j, t in self.tardiness.items())

    def completion_term(self) -> pulp.LpAffineExpression:
        """sum_j w_j (end_j - a_j) (s): total weighted job completion time."""
        scale = self.problem.weight_scale
        return pulp.lpSum(d.weight / scale * (self.end[d.job.id] - d.job.arrival)
                          for d in self.problem.jobs)

    # -- solving ---------------------------------------------------------------------------
    def set_start(self, plan: Mapping[str, tuple[int, int]]) -> bool:
        """Give every variable the value of a complete ``plan`` (a MIP start)."""
        if any(d.job.id not in plan for d in self.problem.jobs):
            return False
        schedule = self.problem.realise(plan)
        gpus = {a.job: set(a.gpus) for a in schedule}
        for data in self.problem.jobs:
            jid = data.job.id
            mode_index, start = plan[jid]
            self.start[jid].setInitialValue(seconds(start))
            for index in range(len(data.modes)):
                self.mode[jid, index].setInitialValue(int(index == mode_index))
                if (jid, index) in self.end_in_mode:
                    self.end_in_mode[jid, index].setInitialValue(
                        seconds(start + data.modes[index].duration) if index == mode_index
                        else 0.0)
            for (j, g), var in self.gpu.items():
                if j == jid:
                    var.setInitialValue(int(g in gpus[jid]))
            end = start + data.modes[mode_index].duration
            if jid in self.late:
                assert data.deadline is not None
                self.late[jid].setInitialValue(int(end > data.deadline))
                self.tardiness[jid].setInitialValue(max(0.0, seconds(end - data.deadline)))
        for (first, second), var in self.before.items():
            var.setInitialValue(int(plan[first][1] <= plan[second][1]))
        return True

    def _plan(self) -> Plan:
        """The solution, left-justified on the grid in the order of the MILP's starts."""
        modes: dict[str, int] = {}
        gpus: dict[str, tuple[str, ...]] = {}
        starts: dict[str, float] = {}
        for data in self.problem.jobs:
            jid = data.job.id
            modes[jid] = max(range(len(data.modes)),
                             key=lambda i: self.mode[jid, i].varValue or 0.0)
            gpus[jid] = tuple(g for (j, g), var in self.gpu.items()
                              if j == jid and (var.varValue or 0.0) > 0.5)
            starts[jid] = self.start[jid].varValue or 0.0
        order = sorted(starts, key=lambda j: (starts[j], j))
        return left_justify(self.problem, modes, gpus, order)

    def solve(self, backend: str, settings: MipSettings, warm_start: Plan | None = None
              ) -> tuple[Plan | None, SolveStats, SolveStats | None]:
        """Two stages, like the CP-SAT model; objective and bound of the completion stage
        in seconds of weighted JCT, of the deadline stage in its own unit."""
        if settings.time_limit_s is None or settings.time_limit_s >= 1.0:
            budget = 5.0 if settings.time_limit_s is None else min(5.0, settings.time_limit_s / 10)
            self.add_completion_cuts(budget)
        warm = bool(warm_start) and warm_start is not None and self.set_start(warm_start)
        deadline_stats: SolveStats | None = None
        time_left = settings.time_limit_s
        if self.problem.has_deadlines:
            self.lp.setObjective(self.deadline_term())
            deadline_stats = run(self.lp, backend, _with(settings, time_left, warm))
            if deadline_stats.outcome not in (Outcome.OPTIMAL, Outcome.FEASIBLE):
                return None, deadline_stats, deadline_stats
            if time_left is not None:
                time_left = max(0.1, time_left - deadline_stats.wall_s)
            best = self.problem.evaluate(self._plan())[0]
            if self.problem.objective is DeadlineObjective.MISSED:
                self.lp += self.deadline_term() <= best, "stage1"
            else:
                self.lp += self.deadline_term() <= self.problem.deadline_seconds(best) + TICK_S,\
                    "stage1"
            # Start the second stage from the better (lexicographically) of the first stage's
            # plan and the caller's start.
            first = self._plan()
            if warm_start is not None and len(warm_start) == len(self.problem.jobs) and \
                    self.problem.evaluate(warm_start) < self.problem.evaluate(first):
                first = dict(warm_start)
            warm = self.set_start(first)
        self.lp.setObjective(self.completion_term())
        stats = run(self.lp, backend, _with(settings, time_left, warm))
        if self.lp_bound is not None:
            # The cuts' LP bound holds for every schedule (floored against LP round-off).
            lp_bound = self.problem.completion_seconds(self.lp_bound * (1 - 1e-9))
            if stats.bound is None or stats.bound < lp_bound:
                stats = dataclasses.replace(stats, bound=lp_bound)
        plan = self._plan() if stats.outcome in (Outcome.OPTIMAL, Outcome.FEASIBLE) else None
        return plan, stats, deadline_stats

    def size(self) -> dict[str, int]:
        """Variables and constraints of the model."""
        return {"variables": len(self.lp.variables()), "constraints": len(self.lp.constraints())}


def _with(settings: MipSettings, time_left: float | None, warm: bool) -> MipSettings:
    return MipSettings(time_left, settings.gap, settings.threads, settings.seed, warm)

