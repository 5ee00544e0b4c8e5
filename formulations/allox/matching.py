"""Exact min-cost matching for the AlloX problem: scipy's assignment solver, or OR-Tools
min-cost flow over the (class, level) slots with capacity ``m_c`` each.

``linear_sum_assignment`` works on floats (exact up to rounding of the costs in
double precision); it sees each slot (c, k) as ``m_c`` identical columns. The flow
keeps one node per slot (it exploits that machines of a class are identical) and
works on integer costs in microseconds.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.optimize import linear_sum_assignment

from hetsched.formulations.allox.problem import MatchingProblem

log = logging.getLogger(__name__)

#: Integer cost unit of the min-cost flow, in seconds.
FLOW_COST_UNIT_S = 1e-6


class MatchingInfeasibleError(ValueError):
    """Some job has no slot it can use."""


def solve_assignment(problem: MatchingProblem) -> dict[int, tuple[int, int]]:
    """Minimum-cost matching of every job to a slot, by ``linear_sum_assignment``."""
    n = len(problem.jobs)
    if n == 0:
        return {}
    columns: list[tuple[int, int]] = []
    for slot in problem.slots():
        columns += [slot] * len(problem.classes[slot[0]].machines)
    cost = np.full((n, len(columns)), np.inf)
    # fill a column block per slot: the same cost for each of its m_c copies
    start = 0
    for slot in problem.slots():
        width = len(problem.classes[slot[0]].machines)
        for job in range(n):
            value = problem.cost(job, slot)
            if value is not None:
                cost[job, start:start + width] = value
        start += width
    finite = np.isfinite(cost)
    if not finite.any(axis=1).all():
        raise MatchingInfeasibleError("a job can run on no machine")
    big = (np.nanmax(np.where(finite, cost, np.nan)) + 1.0) * (n + 1)
    rows, cols = linear_sum_assignment(np.where(finite, cost, big))
    matching = {int(r): columns[int(c)] for r, c in zip(rows, cols, strict=True)}
    if any(problem.cost(job, slot) is None for job, slot in matching.items()):
        raise MatchingInfeasibleError("no matching gives every job a machine it can use")
    return matching


def solve_flow(problem: MatchingProblem) -> dict[int, tuple[int, int]]:
    """Minimum-cost matching by OR-Tools min-cost flow: source -> job -> slot -> sink,
    slot capacity ``m_c``, integer costs in :data:`FLOW_COST_UNIT_S`."""
    from ortools.graph.python import min_cost_flow

    n = len(problem.jobs)
    if n == 0:
        return {}
    slots = problem.slots()
    flow = min_cost_flow.SimpleMinCostFlow()
    source, sink = 0, 1 + n + len(slots)
    tails, heads, caps, costs = [], [], [], []
    for job in range(n):
        tails.append(source)
        heads.append(1 + job)
        caps.append(1)
        costs.append(0)
    arc_slot: dict[int, tuple[int, int]] = {}
    for index, slot in enumerate(slots):
        for job in range(n):
            value = problem.cost(job, slot)
            if value is None:
                continue
            arc_slot[len(tails)] = slot
            tails.append(1 + job)
            heads.append(1 + n + index)
            caps.append(1)
            costs.append(round(value / FLOW_COST_UNIT_S))
        tails.append(1 + n + index)
        heads.append(sink)
        caps.append(len(problem.classes[slot[0]].machines))
        costs.append(0)
    flow.add_arcs_with_capacity_and_unit_cost(np.array(tails), np.array(heads),
                                              np.array(caps), np.array(costs))
    flow.set_node_supply(source, n)
    flow.set_node_supply(sink, -n)
    status = flow.solve()
    if status != flow.OPTIMAL:
        raise MatchingInfeasibleError(f"min-cost flow ended with status {status}")
    matching: dict[int, tuple[int, int]] = {}
    for arc, slot in arc_slot.items():
        if flow.flow(arc) > 0:
            matching[tails[arc] - 1] = slot
    return matching


def greedy_matching(problem: MatchingProblem) -> dict[int, tuple[int, int]]:
    """A quick matching (the start plan of the MILP back-ends): jobs by decreasing shortest
    duration, each in the slot of least cost ``f_c + k p_jc`` among the lowest level with
    room on every class it can use (long jobs take the low levels, which count them
    fewest times). Raises :class:`MatchingInfeasibleError` if a job finds no slot."""
    used: dict[tuple[int, int], int] = {}
    level = [1] * len(problem.classes)
    shortest: dict[int, float] = {}
    for (job, _), run in problem.processing.items():
        shortest[job] = min(shortest.get(job, run.duration), run.duration)
    matching: dict[int, tuple[int, int]] = {}
    for job in sorted(range(len(problem.jobs)), key=lambda j: (-shortest.get(j, 0.0), j)):
        best: tuple[float, int] | None = None
        for c, cls in enumerate(problem.classes):
            if (job, c) not in problem.processing or level[c] > cls.levels:
                continue
            cost = problem.cost(job, (c, level[c]))
            if cost is not None and (best is None or cost < best[0]):
                best = (cost, c)
        if best is None:
            raise MatchingInfeasibleError(f"job {job} finds no free slot")
        c = best[1]
        slot = (c, level[c])
        matching[job] = slot
        used[slot] = used.get(slot, 0) + 1
        if used[slot] >= len(problem.classes[c].machines):
            level[c] += 1
    return matching
