"""The placement column model in CP-SAT: one solve, integer costs, exact lexicographic
weights (communication first, then fragmentation)."""

from __future__ import annotations

import math
import time
from typing import Any

from ortools.sat.python import cp_model

from hetsched.core.result import Status
from hetsched.formulations.budget import Budget
from hetsched.formulations.cpsat_run import run_cpsat
from hetsched.formulations.topology.problem import COST_SCALE, PlacementModel
from hetsched.formulations.topology.solution import PlacementOutcome, decode

#: Above this many columns, CP-SAT's probing and symmetry presolve cost more than they give.
LARGE_MODEL_COLUMNS = 2000


class PlacementCpSat:
    """Variables, one method per constraint family, objective, solve."""

    def __init__(self, model: PlacementModel) -> None:
        self.data = model
        self.model = cp_model.CpModel()
        self.take = [self.model.new_bool_var(f"x{i}") for i in range(len(model.columns))]
        self.spread = {g: self.model.new_bool_var(f"spread_{g}") for g in model.spread_constant}
        self.partial: dict[str, cp_model.IntVar] = {}
        self.flags: dict[str, tuple[Any, Any, Any]] = {}  # node -> (full, empty, partial)
        self.every_gang_placed()
        self.spread_pieces_add_up()
        self.one_gang_per_gpu()
        self.fragmentation()
        self.objective()

    def every_gang_placed(self) -> None:
        """sum_{whole columns of class c} x = |c|  (minus the spread flag of a spreading gang)."""
        by_class = self.data.whole_columns_by_class()
        for owner, members in enumerate(self.data.classes):
            total = sum(self.take[i] for i in by_class[owner])
            if len(members) == 1 and members[0] in self.spread:
                self.model.add(total + self.spread[members[0]] == 1)
            else:
                self.model.add(total == len(members))

    def spread_pieces_add_up(self) -> None:
        """sum_pieces |T| x = k * spread_g, and at most one piece of a gang per node."""
        for gang, flag in self.spread.items():
            by_node = self.data.pieces_by_node(gang)
            pieces = [i for members in by_node.values() for i in members]
            self.model.add(sum(len(self.data.columns[i].gpus) * self.take[i] for i in pieces)
                           == self.data.gangs[gang].num_gpus * flag)
            for members in by_node.values():
                self.model.add(sum(self.take[i] for i in members) <= flag)

    def one_gang_per_gpu(self) -> None:
        """sum_{columns using GPU g} x <= 1."""
        for members in self.data.columns_on_gpu().values():
            if len(members) > 1:
                self.model.add_at_most_one(self.take[i] for i in members)

    def fragmentation(self) -> None:
        """partial_s >= 1 - full_s - empty_s, with full_s => used_s = |free_s| and
        empty_s => used_s = 0 (empty only on a node with every GPU free)."""
        on_node = self.data.columns_on_node()
        for node, ids in self.data.free.items():
            size = self.data.cluster.node_by_name[node].num_gpus
            used = sum(len(self.data.columns[i].gpus) * self.take[i]
                       for i in on_node.get(node, []))
            full = self.model.new_bool_var(f"full_{node}")
            self.model.add(used == len(ids)).only_enforce_if(full)
            partial = self.model.new_bool_var(f"partial_{node}")
            if len(ids) == size:
                empty = self.model.new_bool_var(f"empty_{node}")
                self.model.add(used == 0).only_enforce_if(empty)
                self.model.add(partial + full + empty >= 1)
            else:
                self.model.add(partial + full >= 1)
            self.partial[node] = partial
            self.flags[node] = (full, empty if len(ids) == size else None, partial)

    def objective(self) -> None:
        """min (nodes + 1) * round(1e6 * communication cost) + partly free nodes."""
        self.weight = len(self.partial) + 1
        terms = [round(c.cost * COST_SCALE) * self.take[i]
                 for i, c in enumerate(self.data.columns)]
        terms += [round(self.data.spread_constant[g] * COST_SCALE) * flag
                  for g, flag in self.spread.items()]
        self.model.minimize(self.weight * sum(terms) + sum(self.partial.values()))

    def hint(self, placement: dict[str, tuple[str, ...]]) -> None:
        """Hint the columns that reproduce ``placement`` (job -> GPU ids)."""
        lookup = {(c.owner, c.piece, c.gpus): i for i, c in enumerate(self.data.columns)}
        job_index = {g.job: i for i, g in enumerate(self.data.gangs)}
        class_of = {g: c for c, members in enumerate(self.data.classes) for g in members}
        chosen: set[int] = set()
        for job, gpus in placement.items():
            gang = job_index.get(job)
            if gang is None:
                continue
            whole = lookup.get((class_of[gang], False, tuple(sorted(gpus))))
            if whole is not None:
                chosen.add(whole)
                if gang in self.spread:
                    self.model.add_hint(self.spread[gang], 0)
                continue
            if gang in self.spread:
                self.model.add_hint(self.spread[gang], 1)
                by_node: dict[str, list[str]] = {}
                for gpu in gpus:
                    by_node.setdefault(gpu.rpartition("/")[0], []).append(gpu)
                for piece in by_node.values():
                    index = lookup.get((gang, True, tuple(sorted(piece))))
                    if index is not None:
                        chosen.add(index)
        for i, var in enumerate(self.take):
            self.model.add_hint(var, 1 if i in chosen else 0)
        used: dict[str, int] = {}
        for i in chosen:
            column = self.data.columns[i]
            used[column.node] = used.get(column.node, 0) + len(column.gpus)
        for node, (full, empty, partial) in self.flags.items():
            count = used.get(node, 0)
            is_full = count == len(self.data.free[node])
            is_empty = empty is not None and count == 0
            self.model.add_hint(full, int(is_full))
            if empty is not None:
                self.model.add_hint(empty, int(is_empty))
            self.model.add_hint(partial, int(not (is_full or is_empty)))

    def solve(self, budget: Budget | None = None, threads: int = 1,
              seed: int = 0) -> PlacementOutcome:
        """Solve within ``budget`` and decode; ``bound`` is a proven lower bound on the
        communication cost."""
        budget = budget or Budget.unlimited()
        large = len(self.take) > LARGE_MODEL_COLUMNS

        def configure(params: Any) -> None:
            if large:
                # Measured on 64 gangs over 32 DGX-1s (benchmarks/placement.py): probing and
                # symmetry detection spend 7 s in presolve before any solution; without
                # them the optimum of the communication cost is found in under 2 s.
                params.cp_model_probing_level = 0
                params.symmetry_level = 0

        started = time.perf_counter()
        solver, code = run_cpsat(self.model, budget, threads=threads, seed=seed,
                                 configure=configure)
        wall = time.perf_counter() - started
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            chosen = [i for i, var in enumerate(self.take) if solver.value(var)]
            # FEASIBLE: CP-SAT stopped on its limit (there is no gap limit here).
            status = Status.OPTIMAL if code == cp_model.OPTIMAL else Status.TIME_LIMIT
            try:
                outcome = decode(self.data, chosen, status, wall, backend="cpsat")
            except ValueError as exc:
                return PlacementOutcome(Status.ERROR, {}, math.inf, None, 0, wall, "cpsat",
                                        message=f"solver answer rejected: {exc}")
            # objective = weight * cost + partial, partial <= #nodes < weight
            raw = solver.best_objective_bound
            lower = max(0.0, math.ceil(raw - (self.weight - 1)) / self.weight) / COST_SCALE
            outcome.bound = outcome.cost if code == cp_model.OPTIMAL else min(lower,
                                                                              outcome.cost)
            return outcome
        status = Status.INFEASIBLE if code == cp_model.INFEASIBLE else (
            Status.TIME_LIMIT if budget.limited else Status.UNKNOWN)
        return PlacementOutcome(status, {}, math.inf, None, 0, wall, "cpsat",
                                message=solver.status_name(code))
