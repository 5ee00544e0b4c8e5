"""The data of the ``deadline`` model, shared by its back-ends, and its solutions.

A *mode* is one way to run a job: ``num_gpus`` GPUs packed on one node, with the
throughput the throughput model gives that (job type, GPU type, count, packed)
configuration. A *plan* gives each job a mode and a start tick. Everything is on
the time grid of :mod:`formulations.common`.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from formulations.common import TICK_S, integer_weights, seconds, ticks_down, ticks_up
from solver.data import Instance, Job
from solver.placement import NodeBooking, place_on_nodes
from solver.result import Assignment, Schedule
from solver.throughput import Placement

log = logging.getLogger(__name__)

#: job id -> (mode index, start tick)
Plan = dict[str, tuple[int, int]]


class DeadlineObjective(str, Enum):
    """The first, dominant term of the lexicographic objective."""

    MISSED = "missed"  # number of jobs that finish after their deadline
    TARDINESS = "tardiness"  # total weighted tardiness, sum of w_j max(0, C_j - d_j)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Mode:
    """Run on ``num_gpus`` GPUs of ``node`` (packed) for ``duration`` ticks."""

    node: str
    gpu_type: str
    num_gpus: int
    throughput: float  # steps/s
    duration: int  # ticks, rounded up


@dataclass(frozen=True)
class JobData:
    """One job as the model sees it; times in ticks, weight scaled to an integer."""

    job: Job
    release: int
    modes: tuple[Mode, ...]
    deadline: int | None  # met iff the end tick <= deadline
    weight: int


@dataclass(frozen=True, eq=False)
class DeadlineProblem:
    """The ``deadline`` model's data for one instance."""

    instance: Instance
    jobs: tuple[JobData, ...]
    objective: DeadlineObjective
    weight_scale: int
    weights_exact: bool
    horizon: int  # ticks; every active schedule ends by then
    unplaceable: tuple[str, ...]  # jobs with no packed configuration: the model cannot run them
    unmeetable: tuple[str, ...]  # jobs that miss their deadline even alone on their fastest config

    @property
    def has_deadlines(self) -> bool:
        """Whether any job has a deadline (else the first stage is skipped)."""
        return any(j.deadline is not None for j in self.jobs)

    def node_capacity(self) -> dict[str, int]:
        """GPUs per node."""
        return {node.name: node.num_gpus for node in self.instance.cluster.nodes}

    def weighted_arrivals(self) -> float:
        """Sum of w_j x arrival_j (s), the constant between completion time and JCT."""
        return sum(j.job.weight * j.job.arrival for j in self.jobs)

    def completion_seconds(self, weighted_end_ticks: float) -> float:
        """Total weighted JCT (s) from sum of (integer weight x end tick)."""
        return weighted_end_ticks * TICK_S / self.weight_scale - self.weighted_arrivals()

    def deadline_seconds(self, value: float) -> float:
        """The first objective term in its unit: jobs (missed) or weighted seconds."""
        if self.objective is DeadlineObjective.MISSED:
            return value
        return value * TICK_S / self.weight_scale

    def evaluate(self, plan: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
        """``(deadline term, sum of w_int x end tick)`` of a complete plan, in model units."""
        deadline_term = 0
        completion = 0
        for data in self.jobs:
            mode_index, start = plan[data.job.id]
            end = start + data.modes[mode_index].duration
            completion += data.weight * end
            if data.deadline is not None and end > data.deadline:
                if self.objective is DeadlineObjective.MISSED:
                    deadline_term += 1
                else:
                    deadline_term += data.weight * (end - data.deadline)
        return deadline_term, completion

    def violations(self, plan: Mapping[str, tuple[int, int]]) -> list[str]:
        """What is wrong with ``plan`` on the grid: releases and node capacities."""
        problems = []
        events: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for data in self.jobs:
            mode_index, start = plan[data.job.id]
            if start < data.release:
                problems.append(f"{data.job.id} starts at tick {start} before {data.release}")
            mode = data.modes[mode_index]
            events[mode.node] += [(start, mode.num_gpus), (start + mode.duration, -mode.num_gpus)]
        capacity = self.node_capacity()
        for node, node_events in events.items():
            level = 0
            for tick, change in sorted(node_events, key=lambda e: (e[0], e[1])):
                level += change
                if level > capacity[node]:
                    problems.append(f"node {node} holds {level} GPUs at tick {tick}")
        return problems

    def realise(self, plan: Mapping[str, tuple[int, int]]) -> Schedule:
        """Concrete GPUs for ``plan`` (greedy in start order, see :mod:`solver.placement`);
        each job starts at its start tick and runs for its exact duration."""
        bookings = []
        for data in self.jobs:
            mode_index, start = plan[data.job.id]
            mode = data.modes[mode_index]
            bookings.append(NodeBooking(data.job.id, mode.node, mode.num_gpus, start,
                                        start + mode.duration))
        gpus = place_on_nodes(self.instance, bookings)
        assignments = []
        for data in self.jobs:
            mode_index, start = plan[data.job.id]
            mode = data.modes[mode_index]
            begin = seconds(start)
            assignments.append(Assignment(data.job.id, mode.gpu_type, gpus[data.job.id], begin,
                                          begin + data.job.work / mode.throughput))
        return Schedule(tuple(assignments))

    def plan_from_schedule(self, schedule: Schedule) -> Plan:
        """The modes and start ticks of a (possibly partial) schedule, for a warm start.

        Jobs whose GPUs are not all on one node, or whose mode the model lacks, are
        left out; starts are rounded up to the grid and to the release.
        """
        plan: Plan = {}
        by_id = {data.job.id: data for data in self.jobs}
        for assignment in schedule:
            data = by_id.get(assignment.job)
            if data is None or not assignment.gpus:
                continue
            nodes = {self.instance.cluster.gpu_by_id[g].node for g in assignment.gpus
                     if g in self.instance.cluster.gpu_by_id}
            if len(nodes) != 1:
                continue
            node = nodes.pop()
            for index, mode in enumerate(data.modes):
                if mode.node == node and mode.num_gpus == len(assignment.gpus):
                    plan[data.job.id] = (index, max(data.release, ticks_up(assignment.start)))
                    break
        return plan


def build_problem(
    instance: Instance, objective: DeadlineObjective | str = DeadlineObjective.MISSED,
    pinned_nodes: Mapping[str, str] | None = None,
) -> DeadlineProblem:
    """The ``deadline`` model's data: modes (packed on each node), grid times, weights.
    A job in ``pinned_nodes`` gets only the modes on its node."""
    pinned_nodes = pinned_nodes or {}
    objective = DeadlineObjective(objective)
    scale, weights, exact = integer_weights(job.weight for job in instance.jobs)
    jobs = []
    unplaceable = []
    unmeetable = []
    for job, weight in zip(instance.jobs, weights, strict=True):
        release_s = max(job.arrival, instance.now)
        modes = []
        for node in instance.cluster.nodes:
            if not job.may_use(node.gpu_type) or pinned_nodes.get(job.id, node.name) != \
                    node.name:
                continue
            for count in job.gpu_counts:
                if count > node.num_gpus:
                    continue
                speed = instance.throughput.throughput(job.job_type, node.gpu_type, count,
                                                       Placement.PACKED)
                if speed > 0:
                    modes.append(Mode(node.name, node.gpu_type, count, speed,
                                      max(1, ticks_up(job.work / speed))))
        if not modes:
            unplaceable.append(job.id)
        fastest = max((c.throughput for c in instance.configurations(job)), default=0.0)
        if job.deadline is not None and fastest > 0 and (
            release_s + job.work / fastest > job.deadline + 1e-9
        ):
            unmeetable.append(job.id)
        deadline = None if job.deadline is None else ticks_down(job.deadline)
        jobs.append(JobData(job, ticks_up(release_s), tuple(modes), deadline, weight))
    horizon = max((j.release for j in jobs), default=0) + sum(
        max((m.duration for m in j.modes), default=0) for j in jobs
    )
    return DeadlineProblem(instance, tuple(jobs), objective, scale, exact, horizon,
                           tuple(unplaceable), tuple(unmeetable))


def left_justify(problem: DeadlineProblem, modes: Mapping[str, int],
                 gpus: Mapping[str, tuple[str, ...]], order: list[str]) -> Plan:
    """Start ticks for jobs with fixed modes and GPU sets, taken in ``order``: each as
    early as its release and the GPUs it shares with earlier jobs allow."""
    free: dict[str, int] = defaultdict(int)
    by_id = {data.job.id: data for data in problem.jobs}
    plan: Plan = {}
    for job_id in order:
        data = by_id[job_id]
        mode = data.modes[modes[job_id]]
        start = max([data.release, *(free[g] for g in gpus[job_id])])
        for g in gpus[job_id]:
            free[g] = start + mode.duration
        plan[job_id] = (modes[job_id], start)
    return plan


def earliest_start(release: int, duration: int, need: int, capacity: int,
                   booked: list[tuple[int, int, int]]) -> int:
    """Earliest tick >= ``release`` at which ``need`` of ``capacity`` GPUs are free for
    ``duration`` ticks, given ``booked`` (start, end, GPUs) intervals; gaps may be used."""
    candidates = sorted({release, *(end for _, end, _ in booked if end > release)})
    for start in candidates:
        finish = start + duration
        # Peak use in [start, finish): check at start and at every booking start inside.
        points = [start, *(s for s, _, _ in booked if start < s < finish)]
        if all(sum(c for s, e, c in booked if s <= t < e) + need <= capacity for t in points):
            return start
    raise AssertionError("unreachable: after the last end the node is empty")


def greedy_plan(problem: DeadlineProblem) -> Plan:
    """A quick complete plan (a MIP start / hint): jobs by release, then earliest
    deadline; each in the mode that finishes first, in the earliest gap of its node."""
    order = sorted(range(len(problem.jobs)), key=lambda j: (
        problem.jobs[j].release, problem.jobs[j].deadline is None,
        problem.jobs[j].deadline or 0, problem.jobs[j].job.id))
    return decode(problem, order, dict.fromkeys(order))


def decode(problem: DeadlineProblem, order: list[int],
           modes: Mapping[int, int | None]) -> Plan:
    """Serial schedule generation: jobs (indices into ``problem.jobs``) in ``order``, each
    at the earliest start (gaps allowed) that the jobs before it leave. A job's mode in
    ``modes`` fixes its GPU type and gang size, and the node among those offering that
    (type, size) where it ends first is taken; ``None`` lets it take any mode, the one
    that ends first."""
    capacity = problem.node_capacity()
    booked: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    plan: Plan = {}
    for j in order:
        data = problem.jobs[j]
        fixed = modes.get(j)
        if fixed is None:
            candidates = list(range(len(data.modes)))
        else:
            kind = (data.modes[fixed].gpu_type, data.modes[fixed].num_gpus)
            candidates = [i for i, m in enumerate(data.modes) if (m.gpu_type, m.num_gpus) == kind]
        best: tuple[int, int, int] | None = None  # (end, mode index, start)
        for index in candidates:
            mode = data.modes[index]
            start = earliest_start(data.release, mode.duration, mode.num_gpus,
                                   capacity[mode.node], booked[mode.node])
            if best is None or start + mode.duration < best[0]:
                best = (start + mode.duration, index, start)
        assert best is not None
        end, index, start = best
        mode = data.modes[index]
        booked[mode.node].append((start, end, mode.num_gpus))
        plan[data.job.id] = (index, start)
    return plan


def improve_plan(problem: DeadlineProblem, plan: Plan, time_limit_s: float = 1.0) -> Plan:
    """Local search from ``plan`` (a primal heuristic for the warm start of every back-end).

    A solution is a priority order and a mode per job, decoded by :func:`decode`. Moves,
    first improvement, until none improves or the time is up: give one job another mode;
    move one job to another place in the order. Starting points: ``plan``'s own order
    (by start) and modes, and the weighted-shortest-processing-time order with each job in
    the mode that ends first. The lexicographic objective (deadline term, then weighted completion)
    decides; the result is never worse than ``plan``."""
    began = time.perf_counter()
    jobs = problem.jobs
    index = {data.job.id: j for j, data in enumerate(jobs)}

    def value(candidate: Plan) -> tuple[int, int]:
        return problem.evaluate(candidate)

    def out_of_time() -> bool:
        return time.perf_counter() - began > time_limit_s

    starts: list[tuple[list[int], dict[int, int | None]]] = []
    own_modes: dict[int, int | None] = {index[jid]: mode for jid, (mode, _) in plan.items()}
    starts.append((sorted(own_modes, key=lambda j: (plan[jobs[j].job.id][1], j)), own_modes))
    shortest = {j: min(m.duration for m in d.modes) for j, d in enumerate(jobs)}
    starts.append((sorted(range(len(jobs)), key=lambda j: (
        jobs[j].release + shortest[j] / max(jobs[j].weight, 1),
        jobs[j].deadline is None, jobs[j].deadline or 0, j)), dict.fromkeys(range(len(jobs)))))
    best_plan, best_value = plan, value(plan)
    decoded = []
    for order, start_modes in starts:
        current = decode(problem, order, start_modes)
        chosen: dict[int, int | None] = {index[jid]: m for jid, (m, _) in current.items()}
        decoded.append((value(current), list(order), chosen, current))
    # Search from the better starting point first.
    for current_value, order, modes, current in sorted(decoded, key=lambda d: d[0]):
        improved = True
        while improved and not out_of_time():
            improved = False
            for j in list(order):
                for mode in range(len(jobs[j].modes)):
                    if mode == modes[j]:
                        continue
                    trial_modes = {**modes, j: mode}
                    trial = decode(problem, order, trial_modes)
                    trial_value = value(trial)
                    if trial_value < current_value:
                        modes, current, current_value, improved = (trial_modes, trial,
                                                                   trial_value, True)
                if out_of_time():
                    break
            for position in range(1, len(order)):
                if out_of_time():
                    break
                for target in range(len(order)):
                    if target == position:
                        continue
                    rest = order[:position] + order[position + 1:]
                    trial_order = [*rest[:target], order[position], *rest[target:]]
                    trial = decode(problem, trial_order, modes)
                    trial_value = value(trial)
                    if trial_value < current_value:
                        order, current, current_value, improved = (trial_order, trial,
                                                                   trial_value, True)
                        break
        if current_value < best_value:
            best_plan, best_value = current, current_value
        if out_of_time():
            break
    log.debug("local search: %s -> %s in %.2f s", value(plan), best_value,
              time.perf_counter() - began)
    return best_plan


def is_finite(value: float | None) -> bool:
    """Whether ``value`` is a finite number."""
    return value is not None and math.isfinite(value)
