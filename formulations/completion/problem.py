"""The time-indexed completion-time relaxation as data: jobs in, arrays out.

What the LP of :mod:`hetsched.formulations.completion.highs` reads, and nothing else:

* per job ``j``: release ``r_j`` (its arrival), work ``W_j`` (steps), weight ``w_j`` and
  isolated duration ``p_j`` (its work over its best speed, s);
* per job its *configurations* ``(GPU type t, gang size s)`` with the best speed of any
  placement the cluster allows
  (:meth:`hetsched.allocation.layout.SpeedView.configurations`), held as durations
  ``T_jts = W_j / v_jts`` (s), fastest first. A configuration slower than one of
  the same type with fewer GPUs is dropped: it needs more time and more GPU-seconds for
  the same work, so the relaxation never needs it (docs/formulations.md);
* the GPUs of each type some job can use (``G_t``);
* a common *grid* ``tau_0 < ... < tau_M`` (s), and each job's *blocks*: consecutive grid
  intervals merged into dyadic blocks (aligned runs of ``2^l`` grid intervals) from the
  interval holding ``r_j`` up to the job's *window end* ``e_j``, finer near the release
  and, for long jobs, coarser (:func:`job_blocks`). After ``e_j`` the job has one
  *catch-all* block ``[e_j, inf)`` without capacity.

Times are seconds throughout; the LP rescales them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from hetsched.allocation.layout import SpeedView
from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, Job
from hetsched.core.throughput import ThroughputModel

Vector = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


@dataclass(frozen=True)
class CompletionBoundSettings:
    """How the relaxation is discretised and solved. Every choice changes the bound's size
    and tightness, never its validity.

    ``resolution_s``: the shortest grid interval (s); ``None``: ``resolution_share`` of the
    median isolated duration. ``grid_growth``: after a release, grid intervals grow to at
    most this share of the time since the latest release (a quiet stretch is cut coarser).
    ``block_share`` and ``block_growth``: a job's block starting ``d`` seconds after its
    release spans at most ``max(block_share x p_j, block_growth x d)`` seconds (at least
    one grid interval). ``window``, ``window_slack``: a job's window ends at the first grid
    point at or after ``r_j + window x p_j + window_slack x mean(p)``; ``extensions``
    times, the jobs whose solution uses the catch-all get a window twice as long and the
    LP is solved again. ``cut_rounds``: rounds of tangent cuts on the convex mean-busy
    term (docs/formulations.md). ``iteration_limit``: simplex iterations per HiGHS run
    (deterministic), ``ipm_iteration_limit`` the interior point iterations of the first
    solve; a run stopped by one gives the bound of its dual values. ``time_limit_s``: wall
    seconds for all the solves (``None``: no clock, the default; with one the bound
    depends on the machine's speed, still valid); solves stopped by it give the bound of
    their duals, or the isolated bound.
    ``weighted``: minimise ``sum_j w_j C_j`` with the jobs' weights (else every weight 1).
    """

    resolution_s: float | None = None
    resolution_share: float = 0.05
    grid_growth: float = 0.5
    block_share: float = 0.05
    block_growth: float = 0.25
    window: float = 4.0
    window_slack: float = 3.0
    extensions: int = 1
    cut_rounds: int = 4
    iteration_limit: int = 2_000_000
    ipm_iteration_limit: int = 2_000
    weighted: bool = True
    time_limit_s: float | None = None

    def __post_init__(self) -> None:
        if self.time_limit_s is not None and not (
                isinstance(self.time_limit_s, int | float) and math.isfinite(self.time_limit_s)
                and self.time_limit_s > 0):
            raise InputError("bad completion-bound setting", path="time_limit_s",
                             value=self.time_limit_s, expected="seconds > 0, or None")
        positive = ("resolution_share", "grid_growth", "block_share", "block_growth",
                    "window")
        for name in positive:
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise InputError("bad completion-bound setting", path=name, value=value,
                                 expected="a finite number > 0")
        if self.resolution_s is not None and not (
                math.isfinite(self.resolution_s) and self.resolution_s > 0):
            raise InputError("bad completion-bound setting", path="resolution_s",
                             value=self.resolution_s, expected="seconds > 0, or None")
        if not (math.isfinite(self.window_slack) and self.window_slack >= 0):
            raise InputError("bad completion-bound setting", path="window_slack",
                             value=self.window_slack, expected="a finite number >= 0")
        for name in ("extensions", "cut_rounds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError("bad completion-bound setting", path=name, value=value,
                                 expected="an integer >= 0")
        for name in ("iteration_limit", "ipm_iteration_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError("bad completion-bound setting", path=name, value=value,
                                 expected="an integer >= 1")


@dataclass(frozen=True, eq=False)
class JobConfigurations:
    """Every job's configurations, flat: ``job[c]``, ``gpu_type[c]`` (index into the
    problem's ``gpu_types``), ``gpus[c]`` and ``duration[c]`` (s: the job's work over the
    configuration's best speed). A job's configurations are contiguous, fastest first:
    ``first[j]`` to ``first[j + 1]``."""

    job: Index
    gpu_type: Index
    gpus: Index
    duration: Vector
    first: Index

    def of(self, j: int) -> slice:
        """The configurations of job ``j``."""
        return slice(int(self.first[j]), int(self.first[j + 1]))


@dataclass(frozen=True, eq=False)
class CompletionProblem:
    """The data of the relaxation (module notes). Job arrays are in the order of the jobs
    given; ``grid`` has ``M + 1`` points; ``window_end[j]`` is the grid index of ``e_j``."""

    job_ids: tuple[str, ...]
    release: Vector
    work: Vector
    weight: Vector
    isolated: Vector
    configs: JobConfigurations
    gpu_types: tuple[str, ...]
    capacity: Vector
    grid: Vector
    window_end: Index
    settings: CompletionBoundSettings

    @property
    def num_jobs(self) -> int:
        """How many jobs."""
        return len(self.job_ids)

    @property
    def num_intervals(self) -> int:
        """Grid intervals ``M``."""
        return len(self.grid) - 1

    def first_interval(self) -> Index:
        """Per job, the grid interval that holds its release (``tau_i <= r_j < tau_{i+1}``)."""
        index = np.searchsorted(self.grid, self.release, side="right") - 1
        return np.clip(index, 0, self.num_intervals - 1).astype(np.int64)

    def extended(self, jobs: Index) -> CompletionProblem:
        """The problem with the windows of ``jobs`` (indices) twice as long (at most the
        grid's end)."""
        ends = self.window_end.copy()
        if len(jobs):
            release = self.release[jobs]
            target = release + 2.0 * (self.grid[ends[jobs]] - release)
            ends[jobs] = np.minimum(np.searchsorted(self.grid, target, side="left"),
                                    self.num_intervals)
        return replace(self, window_end=ends.astype(np.int64))

    def blocks(self, j: int, first: int) -> list[tuple[int, int]]:
        """Job ``j``'s blocks as ``(first grid interval, level)``: ``2^level`` grid
        intervals from the first one, from grid interval ``first`` (the one holding its
        release, :meth:`first_interval`) to its window end (:func:`job_blocks`)."""
        return job_blocks(self.grid, float(self.release[j]), first, int(self.window_end[j]),
                          self.settings.block_share * float(self.isolated[j]),
                          self.settings.block_growth)


def job_configurations(jobs: Sequence[Job], cluster: Cluster, throughput: ThroughputModel
                       ) -> tuple[JobConfigurations, tuple[str, ...], Vector]:
    """Every job's useful configurations (module notes), the GPU types some job can use
    (cluster order) and each one's GPUs; an :class:`InputError` names a job that cannot
    run at all."""
    view = SpeedView(cluster, throughput)
    best: list[dict[tuple[str, int], float]] = []
    for job in jobs:
        speeds: dict[tuple[str, int], float] = {}
        for config in view.configurations(job):
            key = (config.gpu_type, config.num_gpus)
            speeds[key] = max(speeds.get(key, 0.0), config.throughput)
        if not speeds:
            raise InputError("job cannot run on this cluster", path=f"job {job.id}",
                             value=f"{job.num_gpus} x {job.job_type}",
                             expected="a GPU type of the cluster with throughput > 0")
        best.append(speeds)
    used = {t for speeds in best for t, _ in speeds}
    gpu_types = tuple(t for t in cluster.type_names if t in used)
    type_index = {t: i for i, t in enumerate(gpu_types)}
    columns: list[tuple[int, int, int, float]] = []
    first = [0]
    for j, (job, speeds) in enumerate(zip(jobs, best, strict=True)):
        kept = []
        for (gpu_type, gpus), speed in speeds.items():
            # Dominated: the same type with fewer GPUs is at least as fast.
            if any(t == gpu_type and n < gpus and v >= speed for (t, n), v in speeds.items()):
                continue
            kept.append((job.work / speed, type_index[gpu_type], gpus))
        kept.sort()
        columns += [(j, t, n, d) for d, t, n in kept]
        first.append(len(columns))
    table = np.array(columns, dtype=np.float64).reshape(-1, 4)
    configs = JobConfigurations(
        table[:, 0].astype(np.int64), table[:, 1].astype(np.int64),
        table[:, 2].astype(np.int64), table[:, 3].copy(), np.array(first, dtype=np.int64))
    capacity = np.array([float(cluster.num_gpus(t)) for t in gpu_types])
    return configs, gpu_types, capacity


def time_grid(release: Vector, resolution: float, growth: float, horizon: float) -> Vector:
    """The common grid (s): the release dates, those closer than ``resolution`` to the
    previous kept one merged into its interval, and between two kept releases (and after
    the last, up to ``horizon``) intervals that grow from ``resolution`` to at most
    ``growth`` times the time since the release (geometrically), the last one of a gap
    stretched rather than cut short."""
    releases = np.unique(release)
    kept = [float(releases[0])]
    for moment in releases[1:]:
        if moment - kept[-1] >= resolution:
            kept.append(float(moment))
    points: list[float] = []
    ends = [*kept[1:], max(horizon, kept[-1] + resolution)]
    for start, end in zip(kept, ends, strict=True):
        moment = start
        while True:
            points.append(moment)
            step = max(resolution, growth * (moment - start))
            if moment + step > end - 0.5 * resolution:
                break
            moment += step
    points.append(ends[-1])
    return np.array(points, dtype=np.float64)


def job_blocks(grid: Vector, release: float, first: int, end: int, share_s: float,
               growth: float) -> list[tuple[int, int]]:
    """Grid intervals ``first`` to ``end - 1`` cut into dyadic blocks ``(start, level)``:
    from ``start``, the longest run of ``2^level`` intervals with ``start`` a multiple of
    ``2^level`` that ends by ``end`` and lasts at most ``max(share_s, growth x (tau_start -
    release))`` seconds (always at least one interval). Dyadic blocks of all jobs nest or
    are disjoint, which is what the capacity rows over blocks need."""
    blocks = []
    position = first
    while position < end:
        allowed = max(share_s, growth * (grid[position] - release))
        level = 0
        while True:
            size = 2 << level
            if position % size or position + size > end or \
                    grid[position + size] - grid[position] > allowed:
                break
            level += 1
        blocks.append((position, level))
        position += 1 << level
    return blocks


def completion_problem(jobs: Sequence[Job], cluster: Cluster, throughput: ThroughputModel,
                       settings: CompletionBoundSettings | None = None) -> CompletionProblem:
    """The relaxation's data for ``jobs`` on ``cluster`` under ``throughput`` (measured
    speeds: the simulator's truth)."""
    settings = settings or CompletionBoundSettings()
    if not jobs:
        raise InputError("no jobs to bound", path="jobs", value=0, expected=">= 1 job")
    configs, gpu_types, capacity = job_configurations(jobs, cluster, throughput)
    release = np.array([job.arrival for job in jobs], dtype=np.float64)
    work = np.array([job.work for job in jobs], dtype=np.float64)
    weight = np.array([job.weight if settings.weighted else 1.0 for job in jobs],
                      dtype=np.float64)
    isolated = configs.duration[configs.first[:-1]]
    resolution = settings.resolution_s or max(
        settings.resolution_share * float(np.median(isolated)), 1e-6)
    # Past the horizon every job has its catch-all; it holds a schedule that runs every
    # job alone after the last release (valid either way, a size choice).
    horizon = float(release.max() + isolated.sum() + resolution)
    grid = time_grid(release, resolution, settings.grid_growth, horizon)
    target = release + settings.window * isolated + settings.window_slack * float(
        isolated.mean())
    first = np.clip(np.searchsorted(grid, release, side="right") - 1, 0, len(grid) - 2)
    ends = np.maximum(np.searchsorted(grid, target, side="left"), first + 1)
    return CompletionProblem(
        tuple(job.id for job in jobs), release, work, weight, isolated, configs, gpu_types,
        capacity, grid, np.minimum(ends, len(grid) - 1).astype(np.int64), settings)
