"""The placement column model in PuLP (CBC or HiGHS).

Lexicographic by two solves, because float weights large enough to separate the two
objectives would sit at the edge of a MIP solver's tolerances: first minimise the
communication cost; then minimise fragmentation with the cost held at its optimum
(plus 1e-9 relative slack).
"""

from __future__ import annotations

import math
import time
from typing import Any

import pulp

from hetsched.core.result import Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import call_word
from hetsched.formulations.mip import MipSettings
from hetsched.formulations.pulp_backend import run
from hetsched.formulations.topology.problem import PlacementModel
from hetsched.formulations.topology.solution import PlacementOutcome, decode


class PlacementMilp:
    """Variables, one method per constraint family, objective, solve."""

    def __init__(self, model: PlacementModel) -> None:
        self.data = model
        self.problem = pulp.LpProblem("placement", pulp.LpMinimize)
        self.take = [self.problem.add_variable(f"x{i}", cat="Binary")
                     for i in range(len(model.columns))]
        self.spread = {g: self.problem.add_variable(f"spread_{g}", cat="Binary")
                       for g in model.spread_constant}
        self.partial: dict[str, Any] = {}
        self.warm = False
        self.every_gang_placed()
        self.spread_pieces_add_up()
        self.one_gang_per_gpu()
        self.fragmentation()
        self.cost = pulp.lpSum(c.cost * self.take[i] for i, c in enumerate(model.columns)) + \
            pulp.lpSum(model.spread_constant[g] * flag for g, flag in self.spread.items())

    def every_gang_placed(self) -> None:
        """sum_{whole columns of class c} x = |c|  (minus the spread flag of a spreading gang)."""
        by_class = self.data.whole_columns_by_class()
        for owner, members in enumerate(self.data.classes):
            total = pulp.lpSum(self.take[i] for i in by_class[owner])
            if len(members) == 1 and members[0] in self.spread:
                self.problem += total + self.spread[members[0]] == 1, f"placed_{owner}"
            else:
                self.problem += total == len(members), f"placed_{owner}"

    def spread_pieces_add_up(self) -> None:
        """sum_pieces |T| x = k * spread_g, and at most one piece of a gang per node."""
        for gang, flag in self.spread.items():
            by_node = self.data.pieces_by_node(gang)
            pieces = [i for members in by_node.values() for i in members]
            self.problem += (pulp.lpSum(len(self.data.columns[i].gpus) * self.take[i]
                                        for i in pieces)
                             == self.data.gangs[gang].num_gpus * flag), f"pieces_{gang}"
            for node, members in by_node.items():
                self.problem += pulp.lpSum(self.take[i] for i in members) <= flag, \
                    f"one_piece_{gang}_{node}"

    def one_gang_per_gpu(self) -> None:
        """sum_{columns using GPU g} x <= 1."""
        for gpu, members in self.data.columns_on_gpu().items():
            if len(members) > 1:
                self.problem += pulp.lpSum(self.take[i] for i in members) <= 1, f"gpu_{gpu}"

    def fragmentation(self) -> None:
        """partial_s >= 1 - full_s - empty_s; |free_s| full_s <= used_s and
        used_s <= |free_s| (1 - empty_s)."""
        on_node = self.data.columns_on_node()
        for node, ids in self.data.free.items():
            size = self.data.cluster.node_by_name[node].num_gpus
            used = pulp.lpSum(len(self.data.columns[i].gpus) * self.take[i]
                              for i in on_node.get(node, []))
            full = self.problem.add_variable(f"full_{node}", cat="Binary")
            partial = self.problem.add_variable(f"partial_{node}", 0, 1)
            self.problem += len(ids) * full <= used, f"full_{node}"
            if len(ids) == size:
                empty = self.problem.add_variable(f"empty_{node}", cat="Binary")
                self.problem += used <= len(ids) * (1 - empty), f"empty_{node}"
                self.problem += partial >= 1 - full - empty, f"partial_{node}"
            else:
                self.problem += partial >= 1 - full, f"partial_{node}"
            self.partial[node] = partial

    def hint(self, placement: dict[str, tuple[str, ...]]) -> None:
        """Initial values that reproduce ``placement`` (used by CBC's warm start)."""
        lookup = {(c.owner, c.piece, c.gpus): i for i, c in enumerate(self.data.columns)}
        class_of = {g: c for c, members in enumerate(self.data.classes) for g in members}
        job_index = {g.job: i for i, g in enumerate(self.data.gangs)}
        self.warm = True
        for var in self.take:
            var.setInitialValue(0)
        for job, gpus in placement.items():
            gang = job_index.get(job)
            index = None if gang is None else lookup.get((class_of[gang], False,
                                                          tuple(sorted(gpus))))
            if index is not None:
                self.take[index].setInitialValue(1)

    def solve(self, backend: str, budget: Budget | None = None, threads: int = 1,
              seed: int = 0) -> PlacementOutcome:
        """Two solves within ``budget`` (the first on 70% of it): cost, then fragmentation
        at that cost. The outcome and bound of each come from
        :func:`hetsched.formulations.pulp_backend.run`, which reads them off the engine (a solve
        stopped by its limit is never taken as a proof)."""
        started = time.perf_counter()
        budget = budget or Budget.unlimited()
        settings = MipSettings(threads=threads, seed=seed)
        self.problem.setObjective(self.cost)
        first_stats = run(self.problem, backend, budget.part(0.7), settings,
                          warm_start=self.warm)
        if first_stats.outcome not in (Status.OPTIMAL, Status.FEASIBLE):
            wall = time.perf_counter() - started
            if first_stats.outcome is Status.INFEASIBLE:
                return PlacementOutcome(Status.INFEASIBLE, {}, math.inf, None, 0, wall, backend,
                                        message="no placement puts every gang on free GPUs")
            return PlacementOutcome(Status.UNKNOWN, {}, math.inf, None, 0, wall, backend,
                                    message=f"solver outcome {call_word(first_stats.outcome)}")
        proven = first_stats.outcome is Status.OPTIMAL
        best = pulp.value(self.cost) or 0.0  # None when every cost is 0
        first = [i for i, var in enumerate(self.take) if (var.value() or 0) > 0.5]
        for index, var in enumerate(self.take):
            var.setInitialValue(1 if index in set(first) else 0)
        slack = 1e-9 * max(1.0, abs(best)) + 1e-12
        self.problem += self.cost <= best + slack, "cost_at_optimum"
        self.problem.setObjective(pulp.lpSum(self.partial.values()))
        second_stats = run(self.problem, backend, budget, settings, warm_start=True)
        second_ok = second_stats.outcome in (Status.OPTIMAL, Status.FEASIBLE)
        chosen = [i for i, var in enumerate(self.take) if (var.value() or 0) > 0.5] \
            if second_ok else first
        wall = time.perf_counter() - started
        status = Status.OPTIMAL if proven and second_stats.outcome is Status.OPTIMAL \
            else Status.FEASIBLE
        try:
            outcome = decode(self.data, chosen, status, wall, backend)
        except ValueError:
            try:
                outcome = decode(self.data, first, Status.FEASIBLE, wall, backend)
            except ValueError as exc:
                return PlacementOutcome(Status.UNKNOWN, {}, math.inf, None, 0, wall, backend,
                                        message=f"solver answer rejected: {exc}")
        outcome.bound = outcome.cost if proven else first_stats.bound
        return outcome
