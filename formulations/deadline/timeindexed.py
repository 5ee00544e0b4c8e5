"""A time-indexed LP relaxation of the ``deadline`` model's plans, solved by column
generation: a lower bound on the completion term of every plan that misses at most a
given number of deadlines, and the LP's start dates to order a plan by.

The model's plans are *non-preemptive*: a job runs once, in one mode (a GPU type and a
gang size, packed on one node), from its start to its end. The relaxation of
:mod:`hetsched.formulations.completion` holds for every schedule, preemptive ones
included, and is weaker for that; this one uses what a plan is. Time is cut into slots
of ``slot_s`` seconds from the earliest release, ``[t_0 + m D, t_0 + (m+1) D)`` (or, on
an adaptive grid, at any edges: nothing below needs the slots even). A
*column* is one way a job can run: a kind ``c = (type t, s GPUs)`` with the model's
duration ``T_jc`` (its fastest node of that kind) and a start slot ``k``, or a start at
or after the horizon (the *catch-all*: always there, so no schedule is left out). With
``lo = max(t_0 + kD, r_j)`` and ``hi = t_0 + (k+1)D``, every start in slot ``k`` runs
through ``[hi, lo + T_jc)``, so the column

* costs ``w_j (lo + T_jc)``, at most the job's weighted end;
* uses ``s`` GPUs of type ``t`` for the part of ``[hi, lo + T_jc)`` inside each slot
  (GPU-seconds), which every such start uses too;
* is *late* when ``lo + T_jc`` is after the deadline (then every such start is).

Rows: each job picks columns summing to 1; per type and slot, GPU-seconds at most
``G_t D``; per type and slot, the seconds of gangs too large to share a node (``2s`` above
the largest node of the type) at most ``N_t D`` (``N_t`` nodes); and the late columns at
most ``late_cap`` (the deadline term of a known plan; with the ``tardiness`` objective,
each column's least weighted tardiness). Every plan that misses at most ``late_cap``
deadlines maps to a 0/1 point of these rows costing at most its completion term, so the
LP optimum bounds the completion term of such plans, among them the lexicographic optimum
and every plan ``solve`` may return (never lexicographically worse than the known plan,
so with no larger deadline term). Any partition of time into slots gives a valid bound.

*Column generation.* The master LP starts from the catch-all columns, the columns of a
known plan and, on a finer grid, the coarser LP's columns of positive value (each at the
slot of its start: on ``medium.json`` the 800-slot LP then took 3.4-4.1 s, not 6.9 s).
Each round, HiGHS solves it (dual simplex from the last basis), and every job's
cheapest column per kind at the row duals ``y`` (prefix sums over the slots, every job,
kind and start at once: :mod:`~hetsched.formulations.deadline.ti_pricing`) enters if its
reduced cost is negative. Whatever the round, the Lagrangian
value ``sum_j min_col (c - y A) + y b`` (the duals of the ``<=`` rows taken ``<= 0``) is a
lower bound; the best one is kept, so a round limit or a budget only loosens the bound,
never makes it invalid. When no column prices out the bound is the LP optimum.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import highspy
import numpy as np
import numpy.typing as npt

from hetsched.allocation.layout import layout
from hetsched.core.log_levels import solve_log_level
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import TICK_S
from hetsched.formulations.deadline.problem import DeadlineObjective, DeadlineProblem, Plan
from hetsched.formulations.deadline.relaxation import LP_ITERATIONS_PER_UNIT
from hetsched.formulations.deadline.ti_pricing import ColumnPricer

log = logging.getLogger(__name__)

Vector = npt.NDArray[np.float64]

#: Share of the solver's budget the relaxation may use in ``solve``, and at most this much.
#: On ``medium.json`` in 30 s, 0.5 leaves room for 900 adaptive slots after the 400 and
#: 600 (11.5-11.7 s in all, 2.9-3.3 s to spare): bound 760,437 s and plans of 795,484-
#: 799,147 s (gap 4.41-4.84 %, 8 runs) with 16.2-16.5 s of windows. At 0.4 the 600-slot
#: bound (758,903 s) and 22-23 s of windows gave 4.84-5.05 % (14 runs), and the 900 slots,
#: when tried, sometimes ran out before their optimum (5.04-5.07 %, the windows 7 s
#: shorter for nothing).
TI_SHARE = 0.5
#: ... of which the first run (no deadline missed, for the plans' order) gets this share.
TI_FIRST_SHARE = 0.6
TI_MAX = 60.0
#: Slots over the horizon (the slot length is the horizon over this, at least a tick).
SLOTS = 400
#: Most master solves.
MAX_ROUNDS = 400
#: Deterministic budgets: each round is charged its master's simplex iterations at the LP
#: relaxation's rate (:data:`~hetsched.formulations.deadline.relaxation.LP_ITERATIONS_PER_UNIT`)
#: and its pricing at this many work units per (job, kind, slot) priced.
UNITS_PER_PRICED_SLOT = 5e-8
#: A column enters when its reduced cost is below this share of the job's cheapest cost.
ENTER_TOLERANCE = 1e-9
#: The Lagrangian bound gives up this relative amount for its own rounding.
SAFETY = 1e-9


@dataclass(frozen=True)
class Kind:
    """A way to run a job, whatever the node: ``gpus`` GPUs of ``gpu_type`` for
    ``duration_s`` (the model's duration on its fastest node of that kind) and ``mode``, the
    index of one such mode in the job's modes."""

    gpu_type: int
    gpus: int
    duration_s: float
    mode: int


@dataclass(frozen=True)
class TimeIndexedBound:
    """What the relaxation gave: ``bound_s``, a lower bound on the model's completion term
    (s) over every plan whose deadline term is at most ``late_cap``; ``status``
    (``optimal``: no column prices out; ``round limit`` or ``budget``: the best Lagrangian
    bound so far); per job (index into ``problem.jobs``) the LP's median start (s) and the
    mode of its heaviest kind, to build a plan from; size and time."""

    bound_s: float
    status: str
    late_cap: float | None
    median_start_s: tuple[float, ...]
    mode: tuple[int, ...]
    slot_s: float
    slots: int
    rounds: int
    columns: int
    rows: int
    seconds: float
    #: the LP's columns of positive value, as (job, kind index, start s): a finer grid's
    #: master starts from them (``columns`` of :class:`TimeIndexedRelaxation`)
    support: tuple[tuple[int, int, float], ...] = ()
    #: the (job, kind) pairs, each priced at every slot in a round
    pairs: int = 0

    def as_dict(self) -> dict[str, object]:
        """For ``Result.extra``."""
        return {"bound": self.bound_s, "status": self.status, "late_cap": self.late_cap,
                "slot_s": round(self.slot_s, 3), "slots": self.slots, "rounds": self.rounds,
                "columns": self.columns, "rows": self.rows, "seconds": round(self.seconds, 4)}


def job_kinds(problem: DeadlineProblem, types: Mapping[str, int]) -> list[list[Kind]]:
    """Each job's kinds: its modes grouped by (GPU type, gang size), the shortest duration
    of each group (nodes of a kind may differ in size, not in speed)."""
    kinds = []
    for data in problem.jobs:
        best: dict[tuple[str, int], tuple[int, int]] = {}
        for index, mode in enumerate(data.modes):
            key = (mode.gpu_type, mode.num_gpus)
            if key not in best or mode.duration < best[key][0]:
                best[key] = (mode.duration, index)
        kinds.append([Kind(types[t], s, ticks * TICK_S, index)
                      for (t, s), (ticks, index) in best.items()])
    return kinds


#: Adaptive grids: the share of their slots spread evenly over the horizon (the rest
#: follow the density of the times given; 0.3, 0.5 and 0.7 gave 759,775 s, 759,827 s and
#: 759,632 s on ``medium.json`` with 800 slots).
EVEN_SHARE = 0.5


def adaptive_edges(uniform: Vector, dense_s: Sequence[float]) -> Vector:
    """A grid of about as many slots as ``uniform`` (edges, s) over the same span, its
    edges at even steps of a mixed distribution: :data:`EVEN_SHARE` of it uniform over
    the span, the rest the empirical distribution of ``dense_s`` (times, s, such as the
    starts of a coarser LP's columns). The slots are finer where jobs start, so the
    columns' costs lose less there, and still cover the horizon for the capacity rows.
    Edges closer than a tick are merged; the first and last stay."""
    first, last = float(uniform[0]), float(uniform[-1])
    wanted = len(uniform) - 1
    times = np.sort(np.clip(np.asarray(dense_s, dtype=np.float64), first, last))
    fine = np.linspace(first, last, 16 * wanted + 1)
    mixed = EVEN_SHARE * (fine - first) / (last - first) + (1.0 - EVEN_SHARE) * \
        np.searchsorted(times, fine, "right") / len(times)
    edges = np.interp(np.linspace(0.0, 1.0, wanted + 1), mixed, fine)
    keep = np.concatenate([[True], np.diff(edges) >= TICK_S])
    result: Vector = np.asarray(edges[keep], dtype=np.float64)
    result[0], result[-1] = first, last
    return result


class _Master:
    """The master LP in HiGHS, its rows fixed, columns added round by round."""

    def __init__(self, problem: DeadlineProblem, kinds: list[list[Kind]], edges: Vector,
                 late_cap: float | None, even_s: float | None = None) -> None:
        self.problem = problem
        self.kinds = kinds
        #: the slots' edges (s): slot ``m`` is ``[edges[m], edges[m + 1])``
        self.edges = edges
        self.origin = float(edges[0])
        #: the slots' length when they are even (their positions are then computed, not
        #: searched), else None
        self.even_s = even_s
        self.widths: Vector = np.diff(edges) if even_s is None else np.full(
            len(edges) - 1, even_s)
        #: the longest slot (s)
        self.slot_s = float(self.widths.max())
        self.slots = slots = len(self.widths)
        self.late_cap = late_cap
        cluster = problem.instance.cluster
        where = layout(cluster)
        self.types = sorted({node.gpu_type for node in cluster.nodes})
        self.capacity = np.array([where.type_gpus[t] for t in self.types], dtype=np.float64)
        largest = [where.largest[t] for t in self.types]
        self.nodes = np.array([len(where.nodes_by_type[t]) for t in self.types],
                              dtype=np.float64)
        #: per type: the smallest gang that cannot share a node with another of its size
        self.exclusive = [largest_t // 2 + 1 for largest_t in largest]
        self.weight = np.array([data.weight / problem.weight_scale for data in problem.jobs])
        self.release = np.array([data.release * TICK_S for data in problem.jobs])
        self.deadline = np.array([math.inf if data.deadline is None else data.deadline * TICK_S
                                  for data in problem.jobs])
        jobs, per_type = len(problem.jobs), len(self.types) * slots
        self.capacity_row0 = jobs
        self.exclusive_row0 = jobs + per_type
        self.late_row = jobs + 2 * per_type if late_cap is not None else -1
        self.num_rows = jobs + 2 * per_type + (late_cap is not None)
        upper = np.concatenate([np.ones(jobs), np.outer(self.capacity, self.widths).ravel(),
                                np.outer(self.nodes, self.widths).ravel(),
                                [late_cap] if late_cap is not None else []])
        lower = np.concatenate([np.ones(jobs), np.full(upper.size - jobs, -highspy.kHighsInf)])
        self.rhs = upper
        self.highs = highspy.Highs()
        for name, value in {"output_flag": False, "threads": 1, "random_seed": 0,
                            "solver": "simplex", "simplex_strategy": 4,
                            "presolve": "off"}.items():
            self.highs.setOptionValue(name, value)
        empty = np.zeros(0, dtype=np.int32)
        self.highs.addRows(self.num_rows, lower, upper, 0, empty, empty, np.zeros(0))
        #: (job, kind index, slot or -1 for the catch-all) of each column
        self.columns: list[tuple[int, int, int]] = []
        self.starts: list[float] = []
        #: (job, kind, start slot) triples one pricing round looks at
        self.priced = slots * sum(len(choices) for choices in kinds)
        self.end = float(self.edges[-1])
        self.pricer = ColumnPricer(
            edges, [(job, kind.gpu_type, kind.gpus, kind.duration_s,
                     kind.gpus >= self.exclusive[kind.gpu_type])
                    for job, choices in enumerate(kinds) for kind in choices],
            self.weight, self.release, self.late_coefficient)
        if late_cap is not None:  # the late row's slack, so the master is always feasible
            self.highs.addCol(1e3 * (self.weight.sum() * self.end + 1.0), 0.0,
                              highspy.kHighsInf, 1, np.array([self.late_row], dtype=np.int32),
                              np.array([-1.0]))
            self.columns.append((-1, -1, -1))
            self.starts.append(math.nan)

    def slot_of(self, time_s: float) -> int:
        """The slot holding ``time_s`` (-1 before the first; ``slots`` from the end on)."""
        if self.even_s is not None:
            return int((time_s - self.origin) // self.even_s)
        return int(np.searchsorted(self.edges, time_s, "right")) - 1

    def _slot_ending(self, time_s: float) -> int:
        """The slot whose end ``time_s`` is, or in which it falls."""
        if self.even_s is not None:
            return math.ceil((time_s - self.origin) / self.even_s) - 1
        return int(np.searchsorted(self.edges, time_s, "left")) - 1

    def late_coefficient(self, job: int, end: Vector | float) -> Vector:
        """The late row's coefficient of columns of ``job`` ending no earlier than ``end``."""
        ends: Vector = np.asarray(end, dtype=np.float64)
        deadline = self.deadline[job]
        if self.late_cap is None or not math.isfinite(deadline):
            return np.zeros(ends.shape)
        if self.problem.objective is DeadlineObjective.MISSED:
            late: Vector = (ends > deadline + 1e-9).astype(np.float64)
            return late
        # Tardiness in the model's units (integer weight x ticks), never above the plan's.
        tardy: Vector = self.problem.jobs[job].weight * np.maximum(
            0.0, (ends - deadline) / TICK_S - 1e-6)
        return tardy

    def add(self, job: int, kind_index: int, slot: int) -> None:
        """Add the column of ``job`` in its kind ``kind_index`` starting in ``slot`` (-1: the
        catch-all)."""
        kind = self.kinds[job][kind_index]
        release = self.release[job]
        start = max(self.end, release) if slot < 0 else max(self.edges[slot], release)
        end = start + kind.duration_s
        rows = np.array([job], dtype=np.int32)
        values = np.ones(1)
        if slot >= 0 and end > self.edges[slot + 1]:
            spanned = np.arange(slot + 1, min(self.slots - 1, self._slot_ending(end)) + 1)
            overlap = np.minimum(end, self.edges[spanned + 1]) - self.edges[spanned]
            spanned, overlap = spanned[overlap > 0], overlap[overlap > 0]
            row = kind.gpu_type * self.slots + spanned
            rows = np.concatenate([rows, self.capacity_row0 + row])
            values = np.concatenate([values, kind.gpus * overlap])
            if kind.gpus >= self.exclusive[kind.gpu_type]:
                rows = np.concatenate([rows, self.exclusive_row0 + row])
                values = np.concatenate([values, overlap])
        late = float(self.late_coefficient(job, end))
        if late > 0:
            rows = np.append(rows, self.late_row)
            values = np.append(values, late)
        self.highs.addCol(float(self.weight[job] * end), 0.0, highspy.kHighsInf, len(rows),
                          rows.astype(np.int32), values)
        self.columns.append((job, kind_index, slot))
        self.starts.append(start)

    def solve(self) -> tuple[Vector, Vector]:
        """Solve the master; its column values and row duals."""
        self.highs.run()
        solution = self.highs.getSolution()
        return (np.asarray(solution.col_value, dtype=np.float64),
                np.asarray(solution.row_dual, dtype=np.float64))

    def price(self, duals: Vector) -> tuple[float, list[list[tuple[float, int, int]]]]:
        """The Lagrangian bound at ``duals`` (those of the ``<=`` rows taken ``<= 0``) and,
        per job and kind, the cheapest column ``(cost - y A, kind index, slot)``, the job's
        convexity dual not subtracted (:class:`ColumnPricer`)."""
        y = np.minimum(duals, 0.0)
        y[: len(self.problem.jobs)] = 0.0
        per_type = len(self.types) * self.slots
        capacity = y[self.capacity_row0:self.capacity_row0 + per_type].reshape(
            len(self.types), self.slots)
        exclusive = y[self.exclusive_row0:self.exclusive_row0 + per_type].reshape(
            len(self.types), self.slots)
        late = float(y[self.late_row]) if self.late_cap is not None else 0.0
        reduced, slot = self.pricer.cheapest(capacity, exclusive, late, self.widths)
        best: list[list[tuple[float, int, int]]] = []
        first = 0
        for kinds in self.kinds:
            best.append([(float(reduced[first + index]), index, int(slot[first + index]))
                         for index in range(len(kinds))])
            first += len(kinds)
        least = [min(c for c, _, _ in per_kind) for per_kind in best]
        total = sum(least)
        rows = math.fsum(y * self.rhs)
        value = math.fsum(least) + rows
        return value - SAFETY * (abs(value) + abs(rows) + abs(total)), best


class TimeIndexedRelaxation:
    """The relaxation of one problem, kept between runs: :meth:`run` generates columns
    within a budget; :meth:`set_late_cap` changes the late row's bound and the runs go on
    from the columns already there (the bound found so far is dropped: it held for the old
    cap); :meth:`result` reads the bound and the plan hints."""

    def __init__(self, problem: DeadlineProblem, *, late_cap: float | None = None,
                 horizon_s: float | None = None, start: Plan | None = None,
                 slots: int = SLOTS, columns: Iterable[tuple[int, int, float]] = (),
                 dense_s: Sequence[float] = ()) -> None:
        self.problem = problem
        types = {t: i for i, t in enumerate(sorted({n.gpu_type
                                                    for n in problem.instance.cluster.nodes}))}
        kinds = job_kinds(problem, types)
        origin = min(data.release for data in problem.jobs) * TICK_S
        if horizon_s is None:
            horizon_s = problem.horizon * TICK_S
            if start is not None:
                horizon_s = max((start[data.job.id][1] + data.modes[start[data.job.id][0]].duration)
                                * TICK_S for data in problem.jobs)
        slot_s = max(TICK_S, (horizon_s - origin) / slots)
        count = max(1, math.ceil((horizon_s - origin) / slot_s))
        edges = origin + slot_s * np.arange(count + 1, dtype=np.float64)
        if dense_s:
            edges = adaptive_edges(edges, dense_s)
        self.master = master = _Master(problem, kinds, edges, late_cap,
                                       None if dense_s else slot_s)
        count = master.slots
        for job, choices in enumerate(kinds):
            for index in range(len(choices)):
                master.add(job, index, -1)
        if start is not None:
            for job, data in enumerate(problem.jobs):
                mode, tick = start[data.job.id]
                chosen = data.modes[mode]
                index = next(i for i, kind in enumerate(kinds[job])
                             if master.types[kind.gpu_type] == chosen.gpu_type
                             and kind.gpus == chosen.num_gpus)
                slot = master.slot_of(tick * TICK_S)
                if 0 <= slot < count:
                    master.add(job, index, slot)
        added = set(master.columns)
        for job, index, start_s in columns:
            slot = master.slot_of(start_s)
            if 0 <= slot < count and (job, index, slot) not in added:
                added.add((job, index, slot))
                master.add(job, index, slot)
        self.best = -math.inf
        self.status = "not solved"
        self.rounds = 0
        self.seconds = 0.0
        self.values = np.zeros(0)

    def set_late_cap(self, late_cap: float) -> None:
        """Bound the late row by ``late_cap`` from now on (a relaxation made with one)."""
        master = self.master
        if master.late_cap is None:
            raise ValueError("a relaxation made without a late cap cannot be given one")
        master.late_cap = late_cap
        master.rhs[master.late_row] = late_cap
        master.highs.changeRowBounds(master.late_row, -highspy.kHighsInf, late_cap)
        self.best = -math.inf
        self.status = "not solved"

    def run(self, budget: Budget, max_rounds: int = MAX_ROUNDS) -> str:
        """Column generation until no column prices out (``optimal``), ``max_rounds``
        master solves (``round limit``) or ``budget`` is spent (``budget``)."""
        began = time.perf_counter()
        master = self.master
        status = "round limit"
        for _ in range(max_rounds):
            if budget.expired():
                status = "budget"
                break
            self.values, duals = master.solve()
            self.rounds += 1
            budget.charge(master.highs.getInfo().simplex_iteration_count
                          / LP_ITERATIONS_PER_UNIT + master.priced * UNITS_PER_PRICED_SLOT)
            bound, cheapest = master.price(duals)
            self.best = max(self.best, bound)
            entered = 0
            for job, per_kind in enumerate(cheapest):
                for reduced, index, slot in per_kind:
                    if reduced - duals[job] < -ENTER_TOLERANCE * max(1.0, abs(reduced)):
                        master.add(job, index, slot)
                        entered += 1
            if not entered:
                status = "optimal"
                break
        self.status = status
        self.seconds += time.perf_counter() - began
        return status

    def result(self) -> TimeIndexedBound:
        """The bound (s) so far and the plan hints of the last master solution."""
        master = self.master
        median, modes = _plan_hints(master, self.values)
        bound_s = self.best - self.problem.weighted_arrivals()
        log.log(solve_log_level(), "deadline: time-indexed bound %.6g (%s, late cap %s, "
                "%d rounds, %d columns, %.2f s)", bound_s, self.status, master.late_cap,
                self.rounds, len(master.columns), self.seconds)
        support = tuple((job, kind, start) for (job, kind, slot), start, value
                        in zip(master.columns, master.starts, self.values, strict=False)
                        if job >= 0 and slot >= 0 and value > 1e-9)
        return TimeIndexedBound(bound_s, self.status, master.late_cap, median, modes,
                                master.slot_s, master.slots, self.rounds, len(master.columns),
                                master.num_rows, self.seconds, support,
                                len(master.pricer.job))


def time_indexed_bound(problem: DeadlineProblem, budget: Budget, *,
                       late_cap: float | None = None, horizon_s: float | None = None,
                       start: Plan | None = None, slots: int = SLOTS,
                       max_rounds: int = MAX_ROUNDS) -> TimeIndexedBound:
    """The relaxation of ``problem`` (module notes) within ``budget``: the bound (s) on the
    completion term of every plan whose deadline term is at most ``late_cap`` (``None``:
    every plan). ``horizon_s``: the time (s) after which starts are lumped into the
    catch-all (default: the end of ``start``, else the model's horizon); ``start``: a plan
    whose columns the master begins with."""
    relaxation = TimeIndexedRelaxation(problem, late_cap=late_cap, horizon_s=horizon_s,
                                       start=start, slots=slots)
    relaxation.run(budget, max_rounds)
    return relaxation.result()


def _plan_hints(master: _Master, values: Vector) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Per job: the LP's median start (s) and the mode of its heaviest kind."""
    by_job: list[list[tuple[float, float, int]]] = [[] for _ in master.kinds]
    for (job, kind, _), start, value in zip(master.columns, master.starts, values,
                                            strict=False):
        if job >= 0 and value > 1e-9:
            by_job[job].append((start, value, kind))
    median = []
    modes = []
    for job, parts in enumerate(by_job):
        if not parts:
            median.append(math.inf)
            modes.append(master.kinds[job][0].mode)
            continue
        parts.sort()
        total = sum(value for _, value, _ in parts)
        seen = 0.0
        for start, value, _ in parts:
            seen += value
            if seen >= total / 2:
                median.append(start)
                break
        weight: dict[int, float] = {}
        for _, value, kind in parts:
            weight[kind] = weight.get(kind, 0.0) + value
        modes.append(master.kinds[job][max(weight, key=lambda k: (weight[k], -k))].mode)
    return tuple(median), tuple(modes)
