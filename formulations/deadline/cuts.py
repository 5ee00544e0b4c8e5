"""Mean-busy-time cuts for the ``deadline`` model: a lower bound on weighted completion.

For a *resource* R (the cluster, one GPU type, or one node) with ``G`` GPUs, a job
j in mode m on R occupies ``c_m`` GPUs for ``p_jm`` ticks: area ``a_jm = c_m p_jm``
and mean busy time ``C_j - p_jm / 2``. For any set S of jobs released at or after
``r_S``, their use of R is at most G at every instant and starts at ``r_S`` or
later, so ``integral t * use_S(t) dt >= r_S A + A^2 / (2 G)`` with ``A`` the area of
S on R (the fluid schedule that packs the area from ``r_S`` at rate G is best).
With ``e_jm = C_j`` if j runs in mode m and 0 otherwise (Queyranne 1993; Hall,
Schulz, Shmoys, Wein 1997, for gangs):

    sum_{j in S, m on R} a_jm e_jm >= sum_{j in S, m on R} (a_jm p_jm / 2 + r_S a_jm) u_jm
                                      + A(u)^2 / (2 G),     A(u) = sum a_jm u_jm.

The right side is convex in ``u``, so its tangent at any ``A_bar`` is a valid linear
cut (``A(u)^2 >= 2 A_bar A(u) - A_bar^2``). Cuts are separated on the LP relaxation
(prefix sets in order of LP completion time, one per release threshold) and the
tangent point is the LP's area; the cuts found are added to the CP-SAT model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from hetsched.core.log_levels import solve_log_level
from hetsched.formulations.budget import Budget
from hetsched.formulations.deadline.problem import DeadlineProblem, Mode

log = logging.getLogger(__name__)

#: LP data in mega-ticks, to keep the LP well scaled.
_LP_UNIT = 1e-6


@dataclass(frozen=True)
class Resource:
    """GPUs that a set of modes shares: the cluster, a GPU type, or a node."""

    name: str
    capacity: int  # GPUs

    def holds(self, mode: Mode) -> bool:
        """Whether ``mode`` runs on this resource."""
        return self.name == "*" or self.name in (mode.gpu_type, f"node:{mode.node}")


@dataclass(frozen=True)
class MeanBusyCut:
    """sum a_jm e_jm >= sum (a_jm p_jm / 2 + (r_S + A_bar / G) a_jm) u_jm - A_bar^2 / (2 G)
    over ``terms`` (job index, mode index) on ``resource``; ticks and GPU-ticks."""

    resource: Resource
    release: int  # r_S, ticks
    tangent_area: float  # A_bar, GPU-ticks
    terms: tuple[tuple[int, int], ...]

    def coefficients(self, problem: DeadlineProblem) -> list[tuple[int, int, float, float]]:
        """``(job, mode, coefficient of e_jm, coefficient of u_jm)`` of every term."""
        share = self.release + self.tangent_area / self.resource.capacity
        out = []
        for job, index in self.terms:
            mode = problem.jobs[job].modes[index]
            area = float(mode.num_gpus * mode.duration)
            out.append((job, index, area, area * mode.duration / 2 + share * area))
        return out

    def constant(self) -> float:
        """A_bar^2 / (2 G), subtracted on the right side."""
        return self.tangent_area**2 / (2 * self.resource.capacity)

    def slack(self, problem: DeadlineProblem, plan: dict[str, tuple[int, int]]) -> float:
        """Left minus right side for a complete plan (>= 0 for every feasible plan)."""
        total = self.constant()
        for job, index, on_end, on_use in self.coefficients(problem):
            data = problem.jobs[job]
            mode_index, start = plan[data.job.id]
            if mode_index == index:
                total += on_end * (start + data.modes[index].duration) - on_use
        return total


def resources(problem: DeadlineProblem) -> list[Resource]:
    """The cluster, each GPU type and each node."""
    cluster = problem.instance.cluster
    out = [Resource("*", cluster.num_gpus())]
    out += [Resource(t, cluster.num_gpus(t)) for t in sorted({n.gpu_type for n in cluster.nodes})]
    out += [Resource(f"node:{n.name}", n.num_gpus) for n in cluster.nodes]
    return out


#: Deterministic work units of one separation round, per (job, mode) pair, resource that
#: holds it (the cluster, its type, its node) and release threshold.
CUT_UNITS_PER_ITEM = 3e-7
#: Deterministic work units of one LP solve: a constant, per nonzero of the LP and per
#: simplex iteration (HiGHS's count, the same on every machine), fitted on 77 solves of
#: small to 200-job instances (1 unit is about a second here; 0.6 to 1.5 x for most).
LP_UNITS_PER_SOLVE = 5e-4
LP_UNITS_PER_NONZERO = 1.3e-7
LP_UNITS_PER_ITERATION = 3e-5


def separate(problem: DeadlineProblem, budget: Budget | None = None, max_rounds: int = 30,
             max_thresholds: int = 12) -> tuple[list[MeanBusyCut], float]:
    """Cuts found on the LP relaxation (u in [0,1], e_jm >= (r_j + p_jm) u_jm, e_jm <= H u_jm)
    and the LP bound on sum_j w_j C_j (ticks x integer weights) after the last round.

    Rounds stop when none finds a cut, after ``max_rounds``, or when ``budget`` is spent
    (wall-clock: checked between resources; deterministic: each round is charged
    :data:`CUT_UNITS_PER_ITEM` per (job, mode, resource, threshold) and each LP solve by its
    size and simplex iterations). The LP is built from arrays."""
    import highspy

    budget = budget or Budget.unlimited()
    if budget.expired():
        return [], 0.0
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    jobs = problem.jobs
    unit = _LP_UNIT
    horizon = problem.horizon * unit
    column: dict[tuple[int, int], tuple[int, int]] = {}  # (job, mode) -> (u column, e column)
    weights: list[float] = []
    earliest: list[float] = []
    for j, data in enumerate(jobs):
        for i, mode in enumerate(data.modes):
            base = 2 * len(column)
            column[j, i] = (base, base + 1)
            weights.append(float(data.weight))
            earliest.append((data.release + mode.duration) * unit)
    pairs = len(column)
    inf = highspy.kHighsInf
    cost = np.zeros(2 * pairs)
    cost[1::2] = weights
    upper = np.full(2 * pairs, inf)
    upper[0::2] = 1.0
    highs.addCols(2 * pairs, cost, np.zeros(2 * pairs), upper, 0, np.zeros(0, dtype=np.int32),
                  np.zeros(0, dtype=np.int32), np.zeros(0))
    # sum_m u_jm = 1 per job; e_jm - earliest u_jm >= 0; e_jm - H u_jm <= 0 per pair.
    u_cols = np.arange(0, 2 * pairs, 2, dtype=np.int32)
    e_cols = u_cols + 1
    counts = np.array([len(d.modes) for d in jobs], dtype=np.int32)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
    highs.addRows(len(jobs), np.ones(len(jobs)), np.ones(len(jobs)), pairs, starts, u_cols,
                  np.ones(pairs))
    pair_starts = np.arange(0, 2 * pairs, 2, dtype=np.int32)
    pair_index = np.column_stack([e_cols, u_cols]).ravel().astype(np.int32)
    highs.addRows(pairs, np.zeros(pairs), np.full(pairs, inf), 2 * pairs, pair_starts,
                  pair_index, np.column_stack([np.ones(pairs), -np.array(earliest)]).ravel())
    highs.addRows(pairs, np.full(pairs, -inf), np.zeros(pairs), 2 * pairs, pair_starts,
                  pair_index, np.column_stack([np.ones(pairs), np.full(pairs, -horizon)]).ravel())
    thresholds = sorted({data.release for data in jobs})
    if len(thresholds) > max_thresholds:
        step = len(thresholds) / max_thresholds
        thresholds = sorted({thresholds[int(k * step)] for k in range(max_thresholds)})
    cuts: list[MeanBusyCut] = []
    separation = _Separation(problem, column, thresholds)
    bound = 0.0
    separation_work = separation.work() * CUT_UNITS_PER_ITEM
    lp_work = 0.0  # units of the last LP solve: the next one's estimate
    for round_number in range(max_rounds):
        left = None if budget.deterministic else budget.remaining()
        if left is not None:
            highs.setOptionValue("time_limit", max(0.01, left))
        elif budget.limited and round_number and (budget.remaining() or 0.0) < lp_work:
            break
        highs.run()
        lp_work = (LP_UNITS_PER_SOLVE + LP_UNITS_PER_NONZERO * highs.getNumNz()
                   + LP_UNITS_PER_ITERATION * highs.getInfo().simplex_iteration_count)
        budget.charge(lp_work)
        if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            # Stopped early: the LP's value is no bound, and its solution no guide.
            log.log(solve_log_level(), "mean-busy-time cuts: LP %s after %d rounds",
                    highs.modelStatusToString(highs.getModelStatus()), round_number)
            break
        values = np.asarray(highs.getSolution().col_value)
        bound = highs.getInfo().objective_function_value / unit
        if budget.expired() or (budget.deterministic and budget.limited
                                and (budget.remaining() or 0.0) < separation_work):
            break
        budget.charge(separation_work)
        found = 0
        for cut in separation.most_violated(values, budget):
            _add_row(highs, problem, cut, column)
            cuts.append(cut)
            found += 1
        log.debug("mean-busy-time cuts: round %d, LP bound %.0f, %d new", round_number, bound,
                  found)
        if not found:
            break
    log.log(solve_log_level(), "mean-busy-time cuts: %d, LP bound %.0f (%s)",
            len(cuts), bound, budget)
    # HiGHS keeps one thread pool per process, sized by the first run: free it, or a later
    # HiGHS solve with another thread count (the MILP back-end) fails to start.
    del highs
    highspy.Highs.resetGlobalScheduler(True)
    return cuts, bound


def _add_row(highs: object, problem: DeadlineProblem, cut: MeanBusyCut,
             column: dict[tuple[int, int], tuple[int, int]]) -> None:
    unit = _LP_UNIT
    indices: list[int] = []
    values: list[float] = []
    for job, index, on_end, on_use in cut.coefficients(problem):
        u_col, e_col = column[job, index]
        # in the LP's units: areas x unit, times x unit, so the row is scaled by unit^2
        indices += [e_col, u_col]
        values += [on_end * unit, -on_use * unit * unit]
    import highspy

    highs.addRow(-cut.constant() * unit * unit, highspy.kHighsInf,  # type: ignore[attr-defined]
                 len(indices), indices, values)


class _Separation:
    """The most violated prefix cut of every (resource, release threshold) on an LP
    solution, with the pairs of each resource held as arrays (built once per problem)."""

    def __init__(self, problem: DeadlineProblem, column: dict[tuple[int, int], tuple[int, int]],
                 thresholds: list[int]) -> None:
        self.thresholds = thresholds
        self.resources = resources(problem)
        jobs = problem.jobs
        self.job_count = len(jobs)
        self.release = np.array([data.release for data in jobs], dtype=np.int64)
        # Per resource: its pairs (job, mode) with u and e columns, area a_jm (LP units)
        # and half of a_jm p_jm; pairs of a job are listed in mode order.
        self.members: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                 np.ndarray]] = []
        for resource in self.resources:
            job_index, mode_index, u_col, e_col, area, half = [], [], [], [], [], []
            for (j, i), (u, e) in column.items():
                mode = jobs[j].modes[i]
                if resource.holds(mode):
                    a = mode.num_gpus * mode.duration * _LP_UNIT
                    job_index.append(j)
                    mode_index.append(i)
                    u_col.append(u)
                    e_col.append(e)
                    area.append(a)
                    half.append(a * mode.duration * _LP_UNIT / 2)
            self.members.append((np.array(job_index, dtype=np.int64),
                                 np.array(mode_index, dtype=np.int64),
                                 np.array(u_col, dtype=np.int64), np.array(e_col, dtype=np.int64),
                                 np.array(area), np.array(half)))
        self.job_e_cols = [[column[j, i][1] for i in range(len(d.modes))]
                           for j, d in enumerate(jobs)]

    def work(self) -> int:
        """Items of one round: (pair, resource, threshold)."""
        return sum(len(m[0]) for m in self.members) * len(self.thresholds)

    def most_violated(self, values: np.ndarray, budget: Budget) -> list[MeanBusyCut]:
        """For each resource and threshold r, the prefix S (jobs released at r or later, in
        order of LP completion time) whose cut is most violated, if any is."""
        completion = [sum(values[c] for c in cols) for cols in self.job_e_cols]
        order = sorted(range(self.job_count), key=lambda j: completion[j])
        rank = np.empty(self.job_count, dtype=np.int64)
        rank[np.array(order, dtype=np.int64)] = np.arange(self.job_count)
        found: list[MeanBusyCut] = []
        for resource, (job_index, mode_index, u_col, e_col, area, half) in zip(
                self.resources, self.members, strict=True):
            if not len(job_index):
                continue
            # pairs in order of their job's rank, modes in order within a job
            sequence = np.lexsort((mode_index, rank[job_index]))
            job_index, mode_index = job_index[sequence], mode_index[sequence]
            u_value, e_value = values[u_col[sequence]], values[e_col[sequence]]
            area, half = area[sequence], half[sequence]
            capacity = float(resource.capacity)
            for release in self.thresholds:
                if not budget.deterministic and budget.expired():
                    return found
                keep = self.release[job_index] >= release
                if not keep.any():
                    continue
                jobs_kept = job_index[keep]
                a = area[keep]
                area_sum = np.cumsum(a * u_value[keep])
                lhs = np.cumsum(a * e_value[keep])
                linear = np.cumsum((half[keep] + release * _LP_UNIT * a) * u_value[keep])
                # a prefix ends where its last job's pairs end
                last = np.flatnonzero(np.append(jobs_kept[1:] != jobs_kept[:-1], True))
                violation = linear[last] + area_sum[last] ** 2 / (2 * capacity) - lhs[last]
                violated = violation > 1e-6 * np.maximum(1.0, lhs[last])
                if not violated.any():
                    continue
                best = int(np.argmax(np.where(violated, violation, -np.inf)))
                size = int(last[best]) + 1
                terms = tuple(zip(jobs_kept[:size].tolist(), mode_index[keep][:size].tolist(),
                                  strict=True))
                found.append(MeanBusyCut(resource, release, float(area_sum[last[best]]) / _LP_UNIT,
                                         terms))
        return found
