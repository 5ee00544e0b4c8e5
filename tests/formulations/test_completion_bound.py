"""The time-indexed LP lower bound on total weighted completion time
(hetsched.formulations.completion): exact values on hand-made cases, never above the
fluid optimum of tiny instances (brute force over event orders), never above what a
replay achieves on real data, never below the isolated bound."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Job, Node, configurations
from hetsched.core.throughput import ThroughputModel, ThroughputTable
from hetsched.formulations.completion import (
    CompletionBoundSettings,
    completion_bound,
    completion_problem,
    dual_bound,
)
from hetsched.formulations.completion.problem import job_blocks, time_grid
from hetsched.formulations.mip.model import MatrixBuilder

ONE_GPU = Cluster((GpuType("a"),), (Node("n0", "a", 1),))
#: One job type "m" at 1 step/s on "a".
UNIT_SPEED = ThroughputTable.from_rows([("m", "a", 1, "packed", 1.0)])
#: Grid intervals of exactly 5 s, every block a single interval.
FIVE_SECOND_GRID = CompletionBoundSettings(resolution_s=5.0, grid_growth=1e-9,
                                           block_share=1e-9, block_growth=1e-9)


def two_types_cluster() -> tuple[Cluster, ThroughputTable]:
    """A fast node of 2 GPUs and a slow node of 2 GPUs; job types with 1 and 2 GPU speeds
    (spread is impossible: one node per type)."""
    cluster = Cluster((GpuType("fast"), GpuType("slow")),
                      (Node("f", "fast", 2), Node("s", "slow", 2)))
    rows = [("cnn", "fast", 1, "packed", 2.0), ("cnn", "slow", 1, "packed", 1.0),
            ("cnn", "fast", 2, "packed", 3.0), ("cnn", "slow", 2, "packed", 1.5),
            ("lm", "fast", 1, "packed", 1.0), ("lm", "slow", 1, "packed", 1.0),
            ("lm", "fast", 2, "packed", 1.8), ("lm", "slow", 2, "packed", 0.9)]
    return cluster, ThroughputTable.from_rows(rows)


# --- brute force: the fluid optimum over every order of events ---------------------------


def fluid_optimum(jobs: list[Job], cluster: Cluster, throughput: ThroughputModel) -> float:
    """The least sum_j w_j C_j of any *fluid* schedule: jobs preempted and migrated at
    will, a job on one configuration at a time (or time-sharing several, at most one
    in total), GPUs of a type shared fractionally. Every schedule the simulator can run is
    one, so this is at most its optimum; the LP relaxes the fluid model too, so its bound
    must be at most this.

    For each order of the events (releases fixed in time, completions variable), one LP
    over the event times t_e and the seconds x_jci that job j runs on configuration c
    between events i-1 and i: sum_c x_jci <= t_i - t_{i-1}, sum s_c x_jci <= G_t (t_i -
    t_{i-1}) per type, sum v_c x_jci = W_j; a fluid schedule in that order exists iff the
    LP is feasible (constant intensities x / (t_i - t_{i-1}) realise it)."""
    configs = {job.id: [(c.gpu_type, c.num_gpus, c.throughput)
                        for c in configurations(cluster, throughput, job)] for job in jobs}
    releases = sorted({job.arrival for job in jobs})
    events = [("release", r) for r in releases] + [("done", job.id) for job in jobs]
    best = math.inf
    for order in set(itertools.permutations(range(len(events)))):
        sequence = [events[k] for k in order]
        released = [e[1] for e in sequence if e[0] == "release"]
        if released != releases or sequence[0][0] != "release":
            continue
        position = {e: i for i, e in enumerate(sequence)}
        if any(position[("done", job.id)] < position[("release", job.arrival)]
               for job in jobs):
            continue
        value = _fluid_lp(jobs, configs, cluster, sequence)
        best = min(best, value)
    return best


def _fluid_lp(jobs: list[Job], configs: dict[str, list[tuple[str, int, float]]],
              cluster: Cluster, sequence: list[tuple[str, object]]) -> float:
    count = len(sequence)
    time_of = list(range(count))  # column of each event's time
    columns = count
    index: dict[tuple[str, int, int], int] = {}
    start = {job.id: next(i for i, e in enumerate(sequence) if e == ("release", job.arrival))
             for job in jobs}
    end = {job.id: next(i for i, e in enumerate(sequence) if e == ("done", job.id))
           for job in jobs}
    for job in jobs:
        for interval in range(start[job.id] + 1, end[job.id] + 1):
            for c in range(len(configs[job.id])):
                index[(job.id, c, interval)] = columns
                columns += 1
    upper_rows: list[tuple[dict[int, float], float]] = []
    equal_rows: list[tuple[dict[int, float], float]] = []
    for i in range(1, count):  # event times nondecreasing: t_{i-1} - t_i <= 0
        upper_rows.append(({time_of[i - 1]: 1.0, time_of[i]: -1.0}, 0.0))
    for i, event in enumerate(sequence):
        if event[0] == "release":
            equal_rows.append(({time_of[i]: 1.0}, float(event[1])))  # type: ignore[arg-type]
    for i in range(1, count):
        for job in jobs:
            cols = {index[(job.id, c, i)]: 1.0 for c in range(len(configs[job.id]))
                    if (job.id, c, i) in index}
            if cols:
                upper_rows.append(({**cols, time_of[i]: -1.0, time_of[i - 1]: 1.0}, 0.0))
        for gpu_type in cluster.type_names:
            cols = {}
            for job in jobs:
                for c, (t, n, _) in enumerate(configs[job.id]):
                    if t == gpu_type and (job.id, c, i) in index:
                        cols[index[(job.id, c, i)]] = float(n)
            if cols:
                g = float(cluster.num_gpus(gpu_type))
                upper_rows.append(({**cols, time_of[i]: -g, time_of[i - 1]: g}, 0.0))
    for job in jobs:
        cols = {index[key]: configs[job.id][key[1]][2] for key in index if key[0] == job.id}
        equal_rows.append((cols, job.work))
    cost = np.zeros(columns)
    for job in jobs:
        cost[time_of[end[job.id]]] += job.weight

    def matrix(rows: list[tuple[dict[int, float], float]]) -> tuple[np.ndarray, np.ndarray]:
        a = np.zeros((len(rows), columns))
        for r, (entries, _) in enumerate(rows):
            for col, value in entries.items():
                a[r, col] += value
        return a, np.array([rhs for _, rhs in rows])

    a_ub, b_ub = matrix(upper_rows)
    a_eq, b_eq = matrix(equal_rows)
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq,
                     bounds=[(0, None)] * columns, method="highs")
    return float(result.fun) if result.status == 0 else math.inf


# --- hand-made cases --------------------------------------------------------------------


def test_two_identical_jobs_on_one_gpu() -> None:
    # Two jobs of 10 s at time 0 on one GPU: the optimum runs one then the other,
    # 10 + 20 = 30; the isolated bound says 10 + 10 = 20.
    jobs = [Job("a", 0.0, "m", 1, 10.0), Job("b", 0.0, "m", 1, 10.0)]
    assert fluid_optimum(jobs, ONE_GPU, UNIT_SPEED) == pytest.approx(30.0)
    # On 5 s intervals [0,5], [5,10], ... (catch-all from 25 s), the first LP (rows p/2,
    # the prompt-start tangent and processing time; no further cuts): by symmetry (the LP
    # is convex and symmetric in the two jobs) both jobs share every interval, at most
    # u_k = 1/4 of a job per interval (capacity 5 s per 10 s job, for two jobs), so the
    # best is u = 1/4 in each of the first four intervals: sum a u = (0+5+10+15)/4 = 7.5,
    # and the rows give C >= 7.5 + 5 (p/2), C >= (15 + 20 + 20 + 25)/4 - 7.5 = 12.5 (the
    # tangent at u = (1/2, 1/2): slope a_k + T (u_k + 1), intercept -T/2 (1/2 + 1)),
    # C >= 10 (processing time): 12.5 each, 25 in all.
    first = completion_bound(jobs, ONE_GPU, UNIT_SPEED,
                             settings=replace(FIVE_SECOND_GRID, cut_rounds=0))
    assert first.status == "optimal"
    assert first.intervals == 5
    assert first.total_weighted_s == pytest.approx(25.0, abs=1e-6)
    assert first.total_weighted_s <= 25.0 + 1e-9
    assert first.avg_jct_s == pytest.approx(12.5, abs=1e-6)
    assert first.isolated_total_s == pytest.approx(20.0)
    # With the convex term Phi exact (C >= sum a u + (T/2)(sum_k u_k^2 + 1)) the symmetric
    # u = 1/4 gives 7.5 + 5 (1/4 + 1) = 13.75 per job, 27.5 in all: the tangent cuts
    # approach it from below and never pass it.
    cut = completion_bound(jobs, ONE_GPU, UNIT_SPEED,
                           settings=replace(FIVE_SECOND_GRID, cut_rounds=40))
    assert 25.0 + 1.0 < cut.total_weighted_s <= 27.5 + 1e-6
    assert cut.cuts > 0


def test_a_fast_and_a_slow_gpu() -> None:
    # Two jobs of 10 steps at 0; a fast GPU (2 steps/s) and a slow one (1 step/s). The
    # optimum: a on fast [0, 5], b on slow [0, 5] (5 steps) then fast [5, 7.5]: 12.5. No
    # schedule does better: the first completion C1 >= 5 (rate <= 2), by then at most
    # 3 C1 steps are done, the rest at rate <= 2: C2 >= C1 + (20 - 3 C1) / 2, so
    # C1 + C2 >= 10 + C1 / 2 >= 12.5.
    cluster = Cluster((GpuType("fast"), GpuType("slow")),
                      (Node("f", "fast", 1), Node("s", "slow", 1)))
    table = ThroughputTable.from_rows([("m", "fast", 1, "packed", 2.0),
                                       ("m", "slow", 1, "packed", 1.0)])
    jobs = [Job("a", 0.0, "m", 1, 10.0), Job("b", 0.0, "m", 1, 10.0)]
    assert fluid_optimum(jobs, cluster, table) == pytest.approx(12.5)
    bound = completion_bound(jobs, cluster, table)
    assert bound.status == "optimal"
    assert 10.0 < bound.total_weighted_s <= 12.5 + 1e-9


def test_dominated_configurations_are_dropped() -> None:
    # "lm" on 2 slow GPUs (0.9 steps/s) is slower than on 1 (1.0): never needed.
    cluster, table = two_types_cluster()
    job = Job("x", 0.0, "lm", 1, 10.0, allowed_gpu_counts=(1, 2))
    problem = completion_problem([job], cluster, table)
    configs = problem.configs
    kept = {(problem.gpu_types[t], int(n)) for t, n in zip(configs.gpu_type, configs.gpus,
                                                           strict=True)}
    assert kept == {("fast", 1), ("fast", 2), ("slow", 1)}
    assert list(configs.duration) == sorted(configs.duration)  # fastest first
    assert configs.duration[0] == pytest.approx(10.0 / 1.8)


# --- brute force on random tiny instances -------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_never_above_the_fluid_optimum(seed: int) -> None:
    # 2-3 jobs, gangs of 1 or 2 GPUs, some allowed either size, releases 0-6 s, weights.
    cluster, table = two_types_cluster()
    rng = np.random.default_rng(seed)
    jobs = []
    for index in range(int(rng.integers(2, 4))):
        size = int(rng.integers(1, 3))
        elastic = rng.random() < 0.5
        jobs.append(Job(f"j{index}", float(rng.integers(0, 4)) * 2.0,
                        str(rng.choice(["cnn", "lm"])), size, float(rng.integers(4, 16)),
                        weight=float(rng.integers(1, 4)),
                        allowed_gpu_counts=(1, 2) if elastic else None))
    optimum = fluid_optimum(jobs, cluster, table)
    for settings in (CompletionBoundSettings(), FIVE_SECOND_GRID,
                     CompletionBoundSettings(resolution_s=0.5, cut_rounds=10)):
        bound = completion_bound(jobs, cluster, table, settings=settings)
        assert bound.status == "optimal"
        assert bound.total_weighted_s <= optimum + 1e-6, (seed, settings)
        assert bound.total_weighted_s >= bound.isolated_total_s - 1e-9
    # A fine grid with cuts is strictly tighter than the isolated bound whenever the
    # jobs compete (checked on the seeds where the fluid optimum is above it).
    if optimum > bound.isolated_total_s + 1.0:
        assert bound.total_weighted_s > bound.isolated_total_s + 1e-3


def test_weights_and_the_unweighted_average() -> None:
    cluster, table = two_types_cluster()
    jobs = [Job("a", 0.0, "cnn", 2, 30.0, weight=3.0), Job("b", 1.0, "lm", 1, 8.0),
            Job("c", 1.0, "cnn", 1, 8.0, weight=2.0)]
    weighted = completion_bound(jobs, cluster, table)
    assert weighted.weighted
    assert math.isnan(weighted.avg_jct_s)  # weights differ: solve unweighted for that
    plain = completion_bound(jobs, cluster, table,
                             settings=CompletionBoundSettings(weighted=False))
    assert not plain.weighted
    assert plain.avg_jct_s == pytest.approx((plain.total_weighted_s - 2.0) / 3)
    assert plain.total_weighted_s <= fluid_optimum(
        [Job(j.id, j.arrival, j.job_type, j.num_gpus, j.work) for j in jobs], cluster,
        table) + 1e-6
    assert weighted.total_weighted_s <= fluid_optimum(jobs, cluster, table) + 1e-6


def test_an_iteration_limit_gives_a_weaker_valid_bound() -> None:
    cluster, table = two_types_cluster()
    rng = np.random.default_rng(7)
    jobs = [Job(f"j{i}", float(rng.integers(0, 50)), str(rng.choice(["cnn", "lm"])),
                int(rng.integers(1, 3)), float(rng.integers(20, 200))) for i in range(40)]
    full = completion_bound(jobs, cluster, table)
    assert full.status == "optimal"
    assert full.total_weighted_s > full.isolated_total_s
    stopped = completion_bound(jobs, cluster, table, settings=CompletionBoundSettings(
        ipm_iteration_limit=2, iteration_limit=5))
    assert stopped.status in ("dual bound (iteration limit)",
                              "isolated bound (iteration limit)")
    assert stopped.isolated_total_s <= stopped.total_weighted_s <= full.total_weighted_s
    assert math.isnan(stopped.lp_objective_s)


def test_the_safe_dual_bound() -> None:
    # min x + 2y, x + y >= 1, x - y <= 0.5, 0 <= x, y <= 10: optimum 1.25 at (0.75, 0.25),
    # duals (1.5, -0.5). Any duals give a bound at most the optimum.
    builder = MatrixBuilder()
    builder.add_columns(2, 0.0, 10.0)
    builder.add_rows(np.array([0, 0]), np.array([0, 1]), np.array([1.0, 1.0]), 1.0, math.inf)
    builder.add_rows(np.array([0, 0]), np.array([0, 1]), np.array([1.0, -1.0]), -math.inf,
                     0.5)
    model = builder.build(np.array([1.0, 2.0]))
    assert dual_bound(model, np.array([1.5, -0.5])) == pytest.approx(1.25)
    rng = np.random.default_rng(0)
    for _ in range(50):
        assert dual_bound(model, rng.normal(size=2) * 3) <= 1.25 + 1e-12
    # A column without upper bound and a negative reduced cost: no bound.
    free = MatrixBuilder()
    free.add_columns(1, 0.0, math.inf)
    free.add_rows(np.array([0]), np.array([0]), np.array([1.0]), 1.0, math.inf)
    assert dual_bound(free.build(np.array([1.0])), np.array([2.0])) == -math.inf


def test_grid_and_blocks() -> None:
    release = np.array([0.0, 0.2, 3.0, 10.0])
    grid = time_grid(release, 1.0, 0.5, 20.0)
    assert grid[0] == 0.0
    assert grid[-1] == 20.0
    assert 3.0 in grid
    assert 10.0 in grid
    assert 0.2 not in grid
    assert np.all(np.diff(grid) >= 1.0 - 1e-12)
    # After the release at 10 s the intervals grow: 1, 1, 1, 1.5, ...
    after = np.diff(grid[grid >= 10.0])
    assert after[0] == pytest.approx(1.0)
    assert after[-1] > 1.0
    # Blocks are aligned dyadic runs, cover the window exactly, and grow with distance.
    uniform = np.arange(0.0, 65.0)
    blocks = job_blocks(uniform, 3.0, 3, 64, 1.0, 0.5)
    covered = [i for start, level in blocks for i in range(start, start + (1 << level))]
    assert covered == list(range(3, 64))
    assert all(start % (1 << level) == 0 for start, level in blocks)
    assert blocks[0] == (3, 0)
    assert blocks[-1][1] >= 3


def test_bad_settings_are_input_errors() -> None:
    for changes in ({"window": 0.0}, {"cut_rounds": -1}, {"iteration_limit": 0},
                    {"resolution_s": -1.0}, {"grid_growth": math.inf},
                    {"window_slack": -1.0}, {"extensions": True}):
        with pytest.raises(InputError):
            CompletionBoundSettings(**changes)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="no jobs"):
        completion_bound([], ONE_GPU, UNIT_SPEED)
    with pytest.raises(InputError, match="cannot run"):
        completion_bound([Job("x", 0.0, "other", 1, 1.0)], ONE_GPU, UNIT_SPEED)


# --- real data: never above what the policies achieve ---------------------------------------


@pytest.mark.slow
def test_below_every_replay_on_a_gavel_trace(shared_data: Path) -> None:
    # The first 60 jobs of ee9e8c on 8 V100 + 8 P100 + 8 K80 (two 4-GPU servers a type:
    # 8-GPU jobs run spread; on 4 GPUs a type they could not run), measured throughput:
    # the LP bound on sum C_j is at most each replay's sum of completion times, and
    # above the isolated bound.
    from hetsched.core.throughput import PolicyView
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.files.replay_inputs import throughput_pair
    from hetsched.files.traces import read_trace
    from hetsched.replaying import replay

    data = shared_data / "gavel"
    truth, fitted = throughput_pair(data / "simulation_throughputs.json")
    cluster = parse_cluster("v100=8,p100=8,k80=8")
    jobs = read_trace(data / "traces" / "ee9e8c.trace", "gavel", throughput=truth,
                      gpu_types=list(cluster.type_names), limit_jobs=60).jobs
    assert {job.num_gpus for job in jobs} >= {1, 8}
    bound = completion_bound(jobs, cluster, truth,
                             settings=CompletionBoundSettings(weighted=False))
    assert bound.status == "optimal"
    assert bound.total_weighted_s > 1.05 * bound.isolated_total_s
    assert bound.avg_jct_s > bound.isolated_avg_jct_s
    for policy in ("fifo", "srtf", "gavel"):
        outcome = replay(jobs, cluster, policy, throughput=truth,
                         model=PolicyView(fitted, truth))
        finished = [record.finish for record in outcome.replay.records.values()]
        assert all(f is not None for f in finished)
        total = math.fsum(float(f) for f in finished if f is not None)
        assert bound.total_weighted_s <= total, policy
        assert bound.avg_jct_s <= outcome.summary.avg_jct_s, policy
