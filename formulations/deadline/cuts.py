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

from formulations.budget import Budget
from formulations.deadline.problem import DeadlineProblem, Mode

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


#: Deterministic work units of one separation round, per (job, mode) pair and release
#: threshold (each pair sits on three resources: the cluster, its type, its node).
CUT_UNITS_PER_ITEM = 3e-7


def separate(problem: DeadlineProblem, budget: Budget | None = None, max_rounds: int = 30,
             max_thresholds: int = 12) -> tuple[list[MeanBusyCut], float]:
    """Cuts found on the LP relaxation (u in [0,1], e_jm >= (r_j + p_jm) u_jm, e_jm <= H u_jm)
    and the LP bound on sum_j w_j C_j (ticks x integer weights) after the last round.

    Rounds stop when none finds a cut, after ``max_rounds``, or when ``budget`` is spent
    (wall-clock: checked between resources; deterministic: each round is charged
    :data:`CUT_UNITS_PER_ITEM` per (job, mode, threshold)). The LP is built from arrays."""
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
    all_resources = resources(problem)
    bound = 0.0
    round_work = pairs * len(thresholds) * CUT_UNITS_PER_ITEM
    for round_number in range(max_rounds):
        left = None if budget.deterministic else budget.remaining()
        if left is not None:
            highs.setOptionValue("time_limit", max(0.01, left))
        highs.run()
        if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            # Stopped early: the LP's value is no bound, and its solution no guide.
            log.info("mean-busy-time cuts: LP %s after %d rounds",
                     highs.modelStatusToString(highs.getModelStatus()), round_number)
            break
        values = list(highs.getSolution().col_value)
        bound = highs.getInfo().objective_function_value / unit
        if budget.expired() or (budget.deterministic and budget.limited
                                and (budget.remaining() or 0.0) < round_work):
            break
        budget.charge(round_work)
        completion = [sum(values[column[j, i][1]] for i in range(len(d.modes)))
                      for j, d in enumerate(jobs)]
        order = sorted(range(len(jobs)), key=lambda j: completion[j])
        found = 0
        for resource in all_resources:
            capacity = float(resource.capacity)
            for release in thresholds:
                if not budget.deterministic and budget.expired():
                    break
                members: list[tuple[int, int]] = []
                area = lhs = linear = 0.0
                best: tuple[float, int, float] | None = None  # (violation, size, area)
                for j in order:
                    data = jobs[j]
                    if data.release < release:
                        continue
                    for i, mode in enumerate(data.modes):
                        if not resource.holds(mode):
                            continue
                        members.append((j, i))
                        u_value = values[column[j, i][0]]
                        e_value = values[column[j, i][1]]
                        a = mode.num_gpus * mode.duration * unit
                        area += a * u_value
                        lhs += a * e_value
                        linear += (a * mode.duration * unit / 2 + release * unit * a) * u_value
                    violation = linear + area * area / (2 * capacity) - lhs
                    if violation > 1e-6 * max(1.0, lhs) and (best is None or violation > best[0]):
                        best = (violation, len(members), area)
                if best is not None:
                    _, size, tangent = best
                    cut = MeanBusyCut(resource, release, tangent / unit, tuple(members[:size]))
                    _add_row(highs, problem, cut, column)
                    cuts.append(cut)
                    found += 1
        log.debug("mean-busy-time cuts: round %d, LP bound %.0f, %d new", round_number, bound,
                  found)
        if not found:
            break
    log.info("mean-busy-time cuts: %d, LP bound %.0f (%s)", len(cuts), bound, budget)
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
