"""The data of the ``deadline`` model, shared by its back-ends, and its solutions.

A *mode* is one way to run a job: ``num_gpus`` GPUs packed on one node, with the
throughput the throughput model gives that (job type, GPU type, count, packed)
configuration. A *plan* gives each job a mode and a start tick. Everything is on
the time grid of :mod:`hetsched.formulations.common`.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from hetsched.allocation.realise import NodeBooking, place_on_nodes
from hetsched.core.records import Instance, Job
from hetsched.core.result import Assignment, Schedule
from hetsched.core.throughput import Placement
from hetsched.formulations.common import (
    TICK_S,
    SolverResult,
    integer_weights,
    seconds,
    ticks_down,
    ticks_up,
)

log = logging.getLogger(__name__)

#: job id -> (mode index, start tick)
Plan = dict[str, tuple[int, int]]
#: The first (deadline) stage of a solve gets this share of what is left of the budget;
#: the second stage the rest.
DEADLINE_STAGE_SHARE = 0.5


class DeadlineObjective(str, Enum):
    """The first, dominant term of the lexicographic objective."""

    MISSED = "missed"  # number of jobs that finish after their deadline
    TARDINESS = "tardiness"  # total weighted tardiness, sum of w_j max(0, C_j - d_j)

    def __str__(self) -> str:
        return self.value


class Mode(NamedTuple):
    """Run on ``num_gpus`` GPUs of ``node`` (packed) for ``duration`` ticks (a named tuple:
    a 5,000-job problem on 192 nodes has a million of them)."""

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
        """Concrete GPUs for ``plan`` (greedy in start order, see
        :mod:`hetsched.allocation.realise`); each job starts at its start tick and runs for its
        exact duration."""
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


@dataclass
class StagePlans:
    """What the two stages found: each stage's plan (``None`` if it found none) and
    statistics (objective and bound in model units; ``deadline`` is ``None`` when the
    first stage is skipped)."""

    completion: SolverResult
    deadline: SolverResult | None = None
    completion_plan: Plan | None = None
    deadline_plan: Plan | None = None


def build_problem(
    instance: Instance, objective: DeadlineObjective | str = DeadlineObjective.MISSED,
) -> DeadlineProblem:
    """The ``deadline`` model's data: modes (packed on each node the job may use), grid
    times, weights."""
    objective = DeadlineObjective(objective)
    scale, weights, exact = integer_weights(job.weight for job in instance.jobs)
    jobs = []
    unplaceable = []
    unmeetable = []
    speeds: dict[tuple[str, str, int], float] = {}  # (job type, GPU type, count) -> steps/s
    nodes = instance.cluster.nodes
    for job, weight in zip(instance.jobs, weights, strict=True):
        release_s = max(job.arrival, instance.now)
        modes: list[Mode] = []
        # (GPU type, node size) -> the job's (count, speed, duration) there: computed once
        # per kind of node, then one mode per node (in node order, counts in job order).
        offers: dict[tuple[str, int], list[tuple[int, float, int]]] = {}
        for node in nodes:
            if not job.may_use_node(node.name):
                continue
            kind = (node.gpu_type, node.num_gpus)
            offer = offers.get(kind)
            if offer is None:
                offer = offers[kind] = _offer(instance, job, node.gpu_type, node.num_gpus,
                                              speeds)
            modes += [Mode(node.name, node.gpu_type, count, speed, duration)
                      for count, speed, duration in offer]
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


def _offer(instance: Instance, job: Job, gpu_type: str, node_gpus: int,
           speeds: dict[tuple[str, str, int], float]) -> list[tuple[int, float, int]]:
    """``(count, steps/s, ticks)`` of every gang size ``job`` can run packed on a node of
    ``node_gpus`` GPUs of ``gpu_type`` (``speeds`` caches the throughput model)."""
    if not job.may_use(gpu_type):
        return []
    out = []
    for count in job.gpu_counts:
        if count > node_gpus:
            continue
        key = (job.job_type, gpu_type, count)
        speed = speeds.get(key)
        if speed is None:
            speed = speeds[key] = instance.throughput.throughput(
                job.job_type, gpu_type, count, Placement.PACKED)
        if speed > 0:
            out.append((count, speed, max(1, ticks_up(job.work / speed))))
    return out


def is_finite(value: float | None) -> bool:
    """Whether ``value`` is a finite number."""
    return value is not None and math.isfinite(value)
