"""The time-indexed LP relaxation of total weighted completion time, built as arrays
and solved by HiGHS (docs/formulations.md, "Time-indexed LP relaxation (lower bound)").

Variables (times rescaled: ``(t - first release) / unit``, ``unit`` the median isolated
duration): ``u_jbc >= 0``, the share of job ``j``'s work done on its configuration ``c``
in its block ``b`` (its dyadic blocks of grid intervals, then its catch-all
``[e_j, inf)``), and ``C_j``, its completion time. With ``T_c`` the job's duration on
``c``, ``s_c`` its GPUs, ``a_b = max(start of b, r_j)`` and ``L_b = end of b - a_b``:

- work: ``sum_{b,c} u_jbc = 1`` for every job;
- one configuration at a time: ``sum_c T_c u_jbc <= L_b`` for every block of a job
  (left out where ``L_b`` is at least the job's slowest duration: then it holds anyway);
- capacity: ``sum s_c T_c u_jbc <= G_t |B|`` for every block ``B`` some job has and
  type ``t``, over the columns of type ``t`` whose block lies in ``B`` (blocks are dyadic:
  two nest or are disjoint);
- mean busy time: ``C_j - sum a_b u_jbc >= p_j / 2``, then tangent cuts of the convex
  ``C_j >= sum a_b u_jbc + Phi_j(u)`` (:func:`cuts`);
- processing time: ``C_j - sum T_c u_jbc >= r_j``;
- ``C_j >= r_j + p_j`` (a column bound); objective ``min sum_j w_j C_j``.

The reported bound is not HiGHS's objective but a *safe* dual bound computed from its
row duals (:func:`dual_bound`): valid whatever the solver's tolerances, and for a run
stopped by the iteration limit too.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from hetsched.core.records import Cluster, Job
from hetsched.core.throughput import ThroughputModel
from hetsched.formulations.completion.problem import (
    CompletionBoundSettings,
    CompletionProblem,
    Index,
    Vector,
    completion_problem,
)
from hetsched.formulations.completion.safe import dual_bound
from hetsched.formulations.mip.highs import load_model
from hetsched.formulations.mip.model import INF, MatrixBuilder, MatrixModel

log = logging.getLogger(__name__)

#: A job whose catch-all holds more than this share of its work gets a longer window.
LATE_SHARE = 1e-6
#: A tangent cut is added when the LP's C_j is below it by more than this (scaled time).
CUT_VIOLATION = 1e-7


@dataclass(frozen=True, eq=False)
class CompletionBound:
    """A lower bound on ``sum_j w_j C_j`` over every schedule the simulator can produce,
    and how it was obtained.

    ``total_weighted_s``: the bound (s; weights as ``weighted`` says: the jobs' own or all
    1). ``avg_jct_s``: the bound on the mean of ``C_j - r_j`` it implies when every weight
    is equal (NaN otherwise: solve with ``weighted=False``). ``completion_s``: the LP's
    completion times; their weighted sum is at least the bound, but each one alone is
    *not* a bound on its job's completion. ``isolated_total_s``: ``sum_j w_j (r_j + p_j)``,
    the bound from isolated durations, which ``total_weighted_s`` never falls below.
    ``status``: ``optimal`` (some solve ended optimal), ``dual bound (iteration limit)``
    (none did; the bound is from the duals of a stopped run) or ``isolated bound
    (iteration limit)`` (those duals gave less than the isolated bound, which is kept).
    """

    jobs: int
    weighted: bool
    total_weighted_s: float
    avg_jct_s: float
    completion_s: Vector
    isolated_total_s: float
    isolated_avg_jct_s: float
    status: str
    intervals: int
    blocks: int
    columns: int
    rows: int
    cuts: int
    extensions: int
    iterations: int
    build_s: float
    lp_s: float
    lp_objective_s: float

    @property
    def avg_jct_over_isolated(self) -> float:
        """``avg_jct_s`` over the isolated bound on the average JCT (NaN if undefined)."""
        if not (math.isfinite(self.avg_jct_s) and self.isolated_avg_jct_s > 0):
            return math.nan
        return self.avg_jct_s / self.isolated_avg_jct_s


class _Lp:
    """The arrays of one relaxation (module notes): columns ``u`` (job, segment, config;
    a segment is one of the job's blocks or its catch-all), then ``C``."""

    def __init__(self, problem: CompletionProblem, origin: float, unit: float) -> None:
        self.problem = problem
        self.unit = unit
        self.origin = origin
        grid = (problem.grid - origin) / unit
        release = (problem.release - origin) / unit
        configs = problem.configs
        duration = configs.duration / unit
        first = problem.first_interval()
        seg_job: list[int] = []
        seg_start: list[float] = []
        seg_length: list[float] = []
        seg_block: list[int] = []
        blocks: dict[tuple[int, int], int] = {}
        for j in range(problem.num_jobs):
            r = float(release[j])
            for start, level in problem.blocks(j, int(first[j])):
                block = blocks.setdefault((start, level), len(blocks))
                begin = max(float(grid[start]), r)
                seg_job.append(j)
                seg_start.append(begin)
                seg_length.append(float(grid[start + (1 << level)]) - begin)
                seg_block.append(block)
            seg_job.append(j)
            seg_start.append(max(float(grid[problem.window_end[j]]), r))
            seg_length.append(INF)
            seg_block.append(-1)
        self.seg_job = np.array(seg_job, dtype=np.int64)
        self.seg_start = np.array(seg_start)
        self.seg_length = np.array(seg_length)
        self.seg_block = np.array(seg_block, dtype=np.int64)
        self.blocks = blocks
        counts = np.diff(configs.first)[self.seg_job]
        self.num_u = int(counts.sum())
        self.col_seg = np.repeat(np.arange(len(seg_job), dtype=np.int64), counts)
        seg_first_col = np.cumsum(counts) - counts
        offset = np.arange(self.num_u, dtype=np.int64) - seg_first_col[self.col_seg]
        self.col_job = self.seg_job[self.col_seg]
        self.col_config = configs.first[self.col_job] + offset
        self.col_duration = duration[self.col_config]
        self.col_start = self.seg_start[self.col_seg]
        self.release = release
        self.isolated = problem.isolated / unit
        self.slowest = duration[configs.first[1:] - 1]
        self.grid = grid
        builder = MatrixBuilder()
        length = self.seg_length[self.col_seg]
        upper = np.minimum(1.0, np.where(np.isfinite(length), length, INF) / self.col_duration)
        builder.add_columns(self.num_u, 0.0, upper)
        n = problem.num_jobs
        self.col_c = self.num_u + np.arange(n, dtype=np.int64)
        catch_all = self.seg_start[self.seg_block < 0]
        builder.add_columns(n, release + self.isolated, catch_all + self.slowest + 1.0)
        self._work(builder)
        self._one_configuration(builder)
        self._capacity(builder)
        self._mean_busy(builder)
        self._prompt_start_cut(builder)
        self._processing(builder)
        cost = np.zeros(builder.num_cols)
        cost[self.col_c] = problem.weight
        self.model = builder.build(cost)

    def _work(self, builder: MatrixBuilder) -> None:
        """sum_{b,c} u_jbc = 1 for every job j."""
        builder.add_rows(self.col_job, np.arange(self.num_u), np.ones(self.num_u), 1.0, 1.0,
                         count=self.problem.num_jobs)

    def _one_configuration(self, builder: MatrixBuilder) -> None:
        """sum_c T_c u_jbc <= L_b for every block b of job j (where L_b < max_c T_c)."""
        needed = np.isfinite(self.seg_length) & (self.seg_length
                                                 < self.slowest[self.seg_job])
        row_of = np.cumsum(needed) - 1
        cols = np.flatnonzero(needed[self.col_seg])
        builder.add_rows(row_of[self.col_seg[cols]], cols, self.col_duration[cols], -INF,
                         self.seg_length[needed], count=int(needed.sum()))

    def _capacity(self, builder: MatrixBuilder) -> None:
        """sum s_c T_c u_jbc <= G_t |B| for every used block B and type t, over the
        columns of type t in blocks inside B."""
        configs = self.problem.configs
        keys = list(self.blocks)
        # The used blocks holding each used block (itself first).
        holders: list[list[int]] = []
        top = max((level for _, level in keys), default=0)
        for start, level in keys:
            found = [self.blocks[(start, level)]]
            for upper in range(level + 1, top + 1):
                outer = self.blocks.get(((start >> upper) << upper, upper))
                if outer is not None:
                    found.append(outer)
            holders.append(found)
        sizes = np.array([len(h) for h in holders], dtype=np.int64)
        flat = np.array([b for h in holders for b in h], dtype=np.int64)
        pointer = np.cumsum(sizes) - sizes
        cols = np.flatnonzero(self.seg_block[self.col_seg] >= 0)
        block = self.seg_block[self.col_seg[cols]]
        repeat = sizes[block]
        entries = np.repeat(cols, repeat)
        step = np.arange(len(entries), dtype=np.int64) - np.repeat(np.cumsum(repeat) - repeat,
                                                                   repeat)
        holder = flat[np.repeat(pointer[block], repeat) + step]
        gpu_type = configs.gpu_type[self.col_config[entries]]
        types = len(self.problem.gpu_types)
        key, row = np.unique(holder * types + gpu_type, return_inverse=True)
        starts = np.array([s for s, _ in keys], dtype=np.int64)
        ends = starts + (1 << np.array([lv for _, lv in keys], dtype=np.int64))
        span = self.grid[ends] - self.grid[starts]
        value = configs.gpus[self.col_config[entries]] * self.col_duration[entries]
        builder.add_rows(row.reshape(-1), entries, value, -INF,
                         self.problem.capacity[key % types] * span[key // types],
                         count=len(key))

    def _mean_busy(self, builder: MatrixBuilder) -> None:
        """C_j - sum a_b u_jbc >= p_j / 2 for every job j (the cut of Phi_j at its fastest
        configuration; the tangent cuts add more)."""
        n = self.problem.num_jobs
        rows = np.concatenate([self.col_job, np.arange(n)])
        cols = np.concatenate([np.arange(self.num_u), self.col_c])
        values = np.concatenate([-self.col_start, np.ones(n)])
        builder.add_rows(rows, cols, values, self.isolated / 2, INF, count=n)

    def _prompt_start_cut(self, builder: MatrixBuilder) -> None:
        """The tangent cut of C_j >= sum a_b u_jbc + Phi_j(u) at the prompt start
        (:meth:`prompt_start`) for every job j."""
        rows, cols, values, rhs = self.tangents(self.prompt_start())
        builder.add_rows(rows, cols, values, rhs, INF, count=len(rhs))

    def _processing(self, builder: MatrixBuilder) -> None:
        """C_j - sum T_c u_jbc >= r_j for every job j."""
        n = self.problem.num_jobs
        rows = np.concatenate([self.col_job, np.arange(n)])
        cols = np.concatenate([np.arange(self.num_u), self.col_c])
        values = np.concatenate([-self.col_duration, np.ones(n)])
        builder.add_rows(rows, cols, values, self.release, INF, count=n)

    def late_jobs(self, values: Vector) -> Index:
        """Jobs whose catch-all holds work in ``values`` and whose window can grow."""
        catch_all = self.seg_block[self.col_seg] < 0
        share = np.bincount(self.col_job[catch_all], values[:self.num_u][catch_all],
                            minlength=self.problem.num_jobs)
        growable = self.problem.window_end < self.problem.num_intervals
        return np.flatnonzero((share > LATE_SHARE) & growable).astype(np.int64)

    def cuts(self, values: Vector) -> tuple[Index, Index, Vector, Vector]:
        """The tangent cuts (:meth:`tangents`) at ``values`` that ``values`` violate."""
        rows, cols, coefficients, rhs = self.tangents(values[:self.num_u])
        lhs = np.bincount(rows, coefficients * values[cols], minlength=len(rhs))
        violated = lhs < rhs - CUT_VIOLATION * (1 + np.abs(rhs))
        keep = violated[rows]
        renumber = np.cumsum(violated) - 1
        return renumber[rows[keep]], cols[keep], coefficients[keep], rhs[violated]

    def tangents(self, point: Vector) -> tuple[Index, Index, Vector, Vector]:
        """One tangent cut per job of ``C_j >= sum a_b u_jbc + Phi_j(u)`` at ``point`` (the
        ``u`` columns), as triplets (cut = job, column, value) and right-hand sides.

        ``Phi_j(u) = sum_b q_j(u_jb) + q_j(sum_b u_jb)`` with ``q_j(z) = z' S z / 2`` and
        ``S_cc' = min(T_c, T_c')`` (positive semidefinite), so ``Phi_j`` is convex and
        ``Phi_j(u) >= grad Phi_j(v) . u - Phi_j(v)`` for every ``v``."""
        u = np.maximum(point, 0.0)
        # (S z)_c over a group of columns sorted by duration (_apply_s).
        grad_seg = _apply_s(u, self.col_duration, self.col_seg)
        configs = self.problem.configs
        total = np.asarray(np.bincount(self.col_config, u, minlength=len(configs.duration)),
                           dtype=np.float64)
        grad_tot = _apply_s(total, configs.duration / self.unit, configs.job)
        gradient = grad_seg + grad_tot[self.col_config]
        n = self.problem.num_jobs
        phi = (np.bincount(self.col_job, u * grad_seg, minlength=n)
               + np.bincount(configs.job, total * grad_tot, minlength=n)) / 2
        rows = np.concatenate([self.col_job, np.arange(n)])
        columns = np.concatenate([np.arange(self.num_u), self.col_c])
        coefficients = np.concatenate([-(self.col_start + gradient), np.ones(n)])
        return rows, columns, coefficients, -phi

    def prompt_start(self) -> Vector:
        """Every job on its fastest configuration from its release, filling its blocks in
        order (the rest in its catch-all): where the first tangent cuts touch ``Phi_j``."""
        duration = self.isolated[self.seg_job]
        share = np.where(np.isfinite(self.seg_length), self.seg_length / duration, 1.0)
        done = np.cumsum(share)
        starts = np.flatnonzero(np.r_[True, self.seg_job[1:] != self.seg_job[:-1]])
        before = done - share - np.repeat(np.r_[0.0, done][starts],
                                          np.diff(np.r_[starts, len(share)]))
        filled = np.clip(1.0 - before, 0.0, share)
        point = np.zeros(self.num_u)
        fastest = self.col_config == self.problem.configs.first[self.col_job]
        point[fastest] = filled[self.col_seg[fastest]]
        return point


def _apply_s(z: Vector, duration: Vector, group: Index) -> Vector:
    """``(S z)_c = sum_c' min(T_c, T_c') z_c'`` within each group of consecutive entries
    (sorted by duration within a group)."""
    weighted = np.cumsum(duration * z)
    plain = np.cumsum(z)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    lengths = np.diff(np.r_[starts, len(z)])
    base_weighted = np.repeat(np.r_[0.0, weighted][starts], lengths)
    base_plain = np.repeat(np.r_[0.0, plain][starts], lengths)
    group_total = np.repeat(plain[np.r_[starts[1:], len(z)] - 1], lengths) - base_plain
    before = weighted - base_weighted
    after = group_total - (plain - base_plain)
    return np.asarray(before + duration * after, dtype=np.float64)


class _Run:
    """One HiGHS instance of one LP, cuts added row by row; times and iterations."""

    def __init__(self, lp: _Lp, settings: CompletionBoundSettings,
                 deadline: float | None = None) -> None:
        self.lp = lp
        #: a ``time.perf_counter()`` reading after which HiGHS stops (None: no clock)
        self.deadline = deadline
        self.model = lp.model
        self.highs = highspy.Highs()
        for name, value in {"output_flag": False, "threads": 1, "random_seed": 0,
                            "simplex_iteration_limit": settings.iteration_limit,
                            "ipm_iteration_limit": settings.ipm_iteration_limit,
                            "solver": "ipm"}.items():
            self.highs.setOptionValue(name, value)
        load_model(self.highs, self.model)
        self.iterations = 0
        self.seconds = 0.0
        self.cuts = 0
        self.interior_point = True

    def run(self) -> tuple[bool, Vector, float, float]:
        """Solve (the first time by the interior point method with crossover, then, and
        after cuts, by the dual simplex method from the last basis); whether it ended
        optimal, the column values, the safe bound and HiGHS's objective (NaN unless
        optimal). An interior point run stopped by its iteration limit leaves no duals,
        so the dual simplex method goes on from scratch under its own limit."""
        optimal = self._solve()
        if self.interior_point:
            self.interior_point = False
            self.highs.setOptionValue("solver", "simplex")
            # Without presolve, a run stopped by its limit still has the model's duals.
            self.highs.setOptionValue("presolve", "off")
            if not optimal:
                optimal = self._solve()
        solution = self.highs.getSolution()
        values = np.asarray(solution.col_value, dtype=np.float64)
        bound = -math.inf
        if solution.dual_valid:
            bound = dual_bound(self.model, np.asarray(solution.row_dual, dtype=np.float64))
        objective = float(self.highs.getInfo().objective_function_value) if optimal \
            else math.nan
        return optimal, values, bound, objective

    def _solve(self) -> bool:
        began = time.perf_counter()
        if self.deadline is not None:
            self.highs.setOptionValue("time_limit", max(1e-3, self.deadline - began))
        self.highs.run()
        spent = time.perf_counter() - began
        self.seconds += spent
        info = self.highs.getInfo()
        iterations = sum(max(0, int(count)) for count in (
            info.simplex_iteration_count, info.ipm_iteration_count,
            info.crossover_iteration_count))
        self.iterations += iterations
        status = self.highs.getModelStatus()
        log.debug("completion bound: HiGHS %s, %d rows, %d iterations, %.1f s",
                  self.highs.modelStatusToString(status), self.model.num_rows, iterations,
                  spent)
        return bool(status == highspy.HighsModelStatus.kOptimal)

    def add_cuts(self, cuts: tuple[Index, Index, Vector, Vector]) -> int:
        """Add cut rows ``>= rhs``; how many."""
        rows, cols, values, rhs = cuts
        count = len(rhs)
        if not count:
            return 0
        block = sp.csr_matrix((values, (rows, cols)), shape=(count, self.model.num_cols))
        block.sum_duplicates()
        block.sort_indices()
        self.highs.addRows(count, rhs, np.full(count, highspy.kHighsInf), int(block.nnz),
                           block.indptr.astype(np.int32), block.indices.astype(np.int32),
                           block.data)
        model = self.model
        self.model = MatrixModel(model.cost, sp.vstack([model.matrix, block], format="csr"),
                                 np.r_[model.row_lower, rhs], np.r_[model.row_upper,
                                                                     np.full(count, INF)],
                                 model.col_lower, model.col_upper, model.integer, model.offset)
        self.cuts += count
        return count


def completion_bound(jobs: Sequence[Job], cluster: Cluster, throughput: ThroughputModel, *,
                     settings: CompletionBoundSettings | None = None) -> CompletionBound:
    """A lower bound on the total weighted completion time (s) of ``jobs`` on ``cluster``
    under any schedule the simulator can produce (preemptive, migrating, any restart
    penalty), from the time-indexed LP relaxation (module notes); ``throughput`` should be
    the measured one (the simulator's truth).

    The LP is solved, solved again with longer windows for the jobs that used their
    catch-all (``settings.extensions`` times at most), then with tangent cuts
    (``settings.cut_rounds``); every solve's safe dual bound is valid, and the largest is
    kept. Deterministic: HiGHS runs single-threaded under iteration limits, never a
    clock."""
    settings = settings or CompletionBoundSettings()
    began = time.perf_counter()
    deadline = None if settings.time_limit_s is None else began + settings.time_limit_s
    problem = completion_problem(jobs, cluster, throughput, settings)
    origin = float(problem.release.min())
    unit = max(float(np.median(problem.isolated)), 1e-9)
    tracker = _Best()
    build_s = time.perf_counter() - began
    lp_s = 0.0
    iterations = 0
    extensions = 0
    while True:
        built = time.perf_counter()
        lp = _Lp(problem, origin, unit)
        run = _Run(lp, settings, deadline)
        build_s += time.perf_counter() - built
        optimal, values = tracker.take(lp, *run.run())
        late = lp.late_jobs(values) if optimal else np.zeros(0, dtype=np.int64)
        if not len(late) or extensions >= settings.extensions or _past(deadline):
            break
        lp_s += run.seconds
        iterations += run.iterations
        extensions += 1
        log.debug("completion bound: %d jobs use their catch-all; windows doubled", len(late))
        problem = problem.extended(late)
    for _ in range(settings.cut_rounds if optimal else 0):
        if _past(deadline):
            break
        built = time.perf_counter()
        added = run.add_cuts(lp.cuts(values))
        build_s += time.perf_counter() - built
        if not added:
            break
        optimal, values = tracker.take(lp, *run.run())
        if not optimal:
            break
    lp_s += run.seconds
    iterations += run.iterations
    weight = problem.weight
    isolated_total = float(math.fsum(weight * (problem.release + problem.isolated)))
    total = unit * tracker.bound + origin * float(weight.sum())
    status = tracker.status()
    if not total >= isolated_total:  # (-inf too)
        total = isolated_total
        if not tracker.optimal:
            status = "isolated bound (iteration limit)"
    n = problem.num_jobs
    equal = bool(np.all(weight == weight[0]))
    avg = (total / float(weight[0]) - math.fsum(problem.release)) / n if equal else math.nan
    return CompletionBound(
        jobs=n, weighted=settings.weighted, total_weighted_s=total, avg_jct_s=avg,
        completion_s=origin + unit * tracker.completion, isolated_total_s=isolated_total,
        isolated_avg_jct_s=float(problem.isolated.mean()), status=status,
        intervals=problem.num_intervals, blocks=len(lp.seg_job), columns=run.model.num_cols,
        rows=run.model.num_rows, cuts=run.cuts, extensions=extensions, iterations=iterations,
        build_s=build_s, lp_s=lp_s, lp_objective_s=unit * tracker.objective + origin * float(
            weight.sum()))


def _past(deadline: float | None) -> bool:
    """Whether the wall-clock ``deadline`` (a ``time.perf_counter()`` reading) is past."""
    return deadline is not None and time.perf_counter() >= deadline


class _Best:
    """The largest safe bound over the solves (scaled), whether an optimal solve gave one,
    and the completion times and objective of the last optimal solve."""

    def __init__(self) -> None:
        self.bound = -math.inf
        self.optimal = False
        self.completion = np.zeros(0)
        self.objective = math.nan

    def take(self, lp: _Lp, optimal: bool, values: Vector, bound: float,
             objective: float) -> tuple[bool, Vector]:
        """Record one solve; returns ``(optimal, values)``."""
        self.bound = max(self.bound, bound)
        if optimal:
            self.optimal = True
            self.completion = values[lp.col_c]
            self.objective = objective
        elif not len(self.completion):
            self.completion = np.full(lp.problem.num_jobs, math.nan)
        return optimal, values

    def status(self) -> str:
        """``optimal`` or ``dual bound (iteration limit)``."""
        return "optimal" if self.optimal else "dual bound (iteration limit)"
