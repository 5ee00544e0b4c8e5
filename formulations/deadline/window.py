"""CP-SAT on a window of the ``deadline`` model: a few jobs free, every other job fixed.

The whole model of 200 jobs on 96 GPUs (5,712 job-modes) is too large for CP-SAT to find a
plan in seconds; a window of 8 to 12 of its jobs, the others held where a plan puts them,
is small enough to be searched well in a fraction of a second. :func:`solve_window` builds
and solves one window; the search that chooses windows is
:func:`hetsched.policies.deadline.windows.improve_by_windows`.

The window's model is the full model's restricted to its jobs: each free job ``j`` has a
start ``s_j >= r_j``, one mode among all of its modes (a node, a gang size: an optional
interval per mode; with ``keep_kinds`` only those of its GPU type and gang size in the
plan, so it may change only its node), and its end ``e_j``, at most the last end ``E`` of
a free job in the plan (the window's jobs are rearranged within the time they span). Each
node's cumulative holds the free jobs' intervals and the fixed jobs' that can meet them (a
fixed job that ends by the earliest free release, or starts at or after ``E``, is left
out). The deadline term of the free jobs may not grow (at most as many missed, or as much
weighted tardiness, as in the plan given), and the objective is the free jobs'
``sum_j w_j e_j`` (after their missed deadlines, with that objective): the other jobs'
terms are constants, so a window's optimum is the best plan that moves only its jobs
within ``E``, never worse than the plan given, which is the hint (complete: every
variable).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from hetsched.formulations.budget import Budget
from hetsched.formulations.cpsat_run import run_cpsat
from hetsched.formulations.deadline.cpsat import node_cumulatives
from hetsched.formulations.deadline.problem import DeadlineObjective, DeadlineProblem, Plan

#: CP-SAT's linearization level in windows: 0 (no LP relaxation of the constraints).
#: On ``medium.json`` the 62 and 68 windows that hit their cap in two searches gained
#: 18.5 and 21.2 million model units in 0.2 s each at level 0, 15.9 and 15.0 million at
#: the default level 1, 6.7 million at level 2 (which proved more of them optimal).
LINEARIZATION_LEVEL = 0


@dataclass(frozen=True)
class WindowOutcome:
    """What one window gave: ``plan`` (the plan given with the window's jobs moved; the
    plan given when CP-SAT found nothing better) and whether CP-SAT proved it the best
    plan that moves only them (``optimal``)."""

    plan: Plan
    optimal: bool


class WindowModel:
    """The CP-SAT model of one window: ``free`` (indices into ``problem.jobs``) move, the
    rest stay as ``plan`` has them."""

    def __init__(self, problem: DeadlineProblem, plan: Plan, free: Collection[int], *,
                 keep_kinds: bool = False) -> None:
        self.problem = problem
        self.plan = plan
        self.free = sorted(set(free))
        #: a free job keeps its kind (GPU type, gang size) and may change only its node
        self.keep_kinds = keep_kinds
        self.model = cp_model.CpModel()
        self.start: dict[int, cp_model.IntVar] = {}
        self.end: dict[int, cp_model.IntVar] = {}
        self.use: dict[int, list[cp_model.IntVar]] = {}
        self.span_end = 0
        #: the free jobs' late indicators (``missed`` objective only)
        self.missed: list[cp_model.IntVar] = []
        self.per_node: dict[str, list[tuple[cp_model.IntervalVar, int]]] = defaultdict(list)
        for family in (self._variables, self._fixed_jobs, self._node_capacity,
                       self._deadline_term, self._objective):
            family()

    def _variables(self) -> None:
        """s_j >= r_j, e_j = s_j + sum_m p_jm use_jm <= E, one mode (of the plan's kind
        with ``keep_kinds``): the free jobs. E: the last end of a free job in the plan
        (the window's jobs are rearranged within the time they span, which keeps the model
        small: a fixed job that starts after it is left out)."""
        jobs = self.problem.jobs
        for j in self.free:
            data = jobs[j]
            mode_now, start_now = self.plan[data.job.id]
            self.span_end = max(self.span_end, start_now + data.modes[mode_now].duration)
        for j in self.free:
            data = jobs[j]
            mode_now, start_now = self.plan[data.job.id]
            start = self.model.new_int_var(data.release, self.span_end, f"s_{j}")
            end = self.model.new_int_var(data.release, self.span_end, f"e_{j}")
            uses = []
            now = data.modes[mode_now]
            for index, mode in enumerate(data.modes):
                if data.release + mode.duration > self.span_end or (self.keep_kinds and (
                        mode.gpu_type, mode.num_gpus) != (now.gpu_type, now.num_gpus)):
                    uses.append(self.model.new_constant(0))
                    continue
                use = self.model.new_bool_var(f"use_{j}_{index}")
                interval = self.model.new_optional_fixed_size_interval_var(
                    start, mode.duration, use, f"iv_{j}_{index}")
                self.per_node[mode.node].append((interval, mode.num_gpus))
                self.model.add_hint(use, index == mode_now)
                uses.append(use)
            self.model.add_exactly_one(uses)
            self.model.add(end == start + sum(m.duration * use
                                              for m, use in zip(data.modes, uses, strict=True)))
            self.model.add_hint(start, start_now)
            self.model.add_hint(end, start_now + now.duration)
            self.start[j], self.end[j], self.use[j] = start, end, uses

    def _fixed_jobs(self) -> None:
        """Every other job as a fixed interval on its node, unless it ends by the earliest
        release of a free job or starts at or after E."""
        jobs = self.problem.jobs
        free = set(self.free)
        earliest = min(jobs[j].release for j in self.free)
        for j, data in enumerate(jobs):
            index, start = self.plan[data.job.id]
            mode = data.modes[index]
            if j in free or start + mode.duration <= earliest or start >= self.span_end:
                continue
            interval = self.model.new_fixed_size_interval_var(start, mode.duration, f"fix_{j}")
            self.per_node[mode.node].append((interval, mode.num_gpus))

    def _node_capacity(self) -> None:
        """A cumulative per node (a no-overlap for a node of one GPU)."""
        node_cumulatives(self.model, self.per_node, self.problem.node_capacity())

    def _deadline_term(self) -> None:
        """The free jobs' deadline term at most the plan's: missed deadlines (late_j = 0 =>
        e_j <= d_j; sum late_j <= missed now) or weighted tardiness (sum w_j T_j, T_j >=
        e_j - d_j, T_j >= 0, at most now)."""
        jobs = self.problem.jobs
        late_ones: list[cp_model.IntVar] = []
        tardy: list[cp_model.LinearExprT] = []
        now = 0
        for j in self.free:
            data = jobs[j]
            if data.deadline is None:
                continue
            mode_now, start_now = self.plan[data.job.id]
            end_now = start_now + data.modes[mode_now].duration
            if self.problem.objective is DeadlineObjective.MISSED:
                late = self.model.new_bool_var(f"late_{j}")
                self.model.add(self.end[j] <= data.deadline).only_enforce_if(~late)
                self.model.add_hint(late, end_now > data.deadline)
                late_ones.append(late)
                now += int(end_now > data.deadline)
            else:
                tardiness = self.model.new_int_var(0, max(0, self.span_end - data.deadline),
                                                   f"tard_{j}")
                self.model.add(tardiness >= self.end[j] - data.deadline)
                self.model.add_hint(tardiness, max(0, end_now - data.deadline))
                tardy.append(data.weight * tardiness)
                now += data.weight * max(0, end_now - data.deadline)
        if late_ones or tardy:
            self.model.add(cp_model.LinearExpr.sum([*late_ones, *tardy]) <= now)
        self.missed = late_ones

    def _objective(self) -> None:
        """Minimise the free jobs' sum_j w_j e_j; with the ``missed`` objective, first their
        missed deadlines: each costs more than any sum_j w_j e_j of the window (every e_j is
        at most E), so the order is lexicographic."""
        jobs = self.problem.jobs
        completion = sum(jobs[j].weight * self.end[j] for j in self.free)
        if not self.missed:
            self.model.minimize(completion)
            return
        per_miss = sum(jobs[j].weight for j in self.free) * self.span_end + 1
        self.model.minimize(per_miss * sum(self.missed) + completion)

    def solve(self, budget: Budget, *, threads: int = 1, seed: int = 0) -> WindowOutcome:
        """Solve within ``budget``; the plan with the free jobs where CP-SAT put them when
        it found a plan better than the one given, else the plan given."""
        solver, status = run_cpsat(self.model, budget, threads=threads, seed=seed,
                                   configure=_window_parameters)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return WindowOutcome(self.plan, False)
        jobs = self.problem.jobs
        moved = dict(self.plan)
        for j in self.free:
            index = next(i for i, use in enumerate(self.use[j]) if solver.boolean_value(use))
            moved[jobs[j].job.id] = (index, solver.value(self.start[j]))
        optimal = status == cp_model.OPTIMAL
        if self.problem.evaluate(moved) < self.problem.evaluate(self.plan):
            return WindowOutcome(moved, optimal)
        return WindowOutcome(self.plan, optimal)


def _window_parameters(parameters: Any) -> None:
    """CP-SAT's parameters for a window, beyond the budget, threads and seed."""
    parameters.linearization_level = LINEARIZATION_LEVEL


def solve_window(problem: DeadlineProblem, plan: Plan, free: Collection[int], budget: Budget,
                 *, threads: int = 1, seed: int = 0, keep_kinds: bool = False
                 ) -> WindowOutcome:
    """The best plan CP-SAT finds within ``budget`` that moves only the jobs ``free``
    (indices into ``problem.jobs``) of the complete ``plan``, never worse than ``plan``
    (:class:`WindowModel`; ``keep_kinds``: each on another node of its kind at most)."""
    return WindowModel(problem, plan, free, keep_kinds=keep_kinds).solve(
        budget, threads=threads, seed=seed)
