"""Gavel's packed finish-time fairness, min total duration and throughput per dollar
(hetsched.formulations.gavel.packed_objectives): optima worked out by hand on one GPU,
and on random problems the same optima as scipy's simplex on the LPs written out
variable by variable (the finish-time one by bisection on the ratio)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from hetsched.formulations.gavel.packed import PackedProblem
from hetsched.formulations.gavel.packed_objectives import (
    packed_feasible,
    packed_finish_time,
    packed_min_total_duration,
    packed_throughput_per_cost,
    packed_water_filling,
)
from hetsched.formulations.gavel.problem import AllocationProblem
from tests.formulations.test_gavel_packed import random_problem, two_jobs_one_gpu

Bounds = list[tuple[float, float]]


def dense(problem: PackedProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray, Bounds]:
    """The LP written out: per job its steps/s per unit of each column (x job by job
    and type by type, then y pair by pair), its time per unit, each type's GPUs per
    unit, and the columns' bounds."""
    base = problem.alone
    jobs, types = base.throughput.shape
    pairs = len(problem.first)
    columns = jobs * types + pairs * types
    rate, time = np.zeros((jobs, columns)), np.zeros((jobs, columns))
    gpus = np.zeros((types, columns))
    bounds: Bounds = []
    for j in range(jobs):
        for k in range(types):
            rate[j, j * types + k] = base.throughput[j, k]
            time[j, j * types + k] = 1.0
            gpus[k, j * types + k] = base.scale_factors[j]
            bounds.append((0.0, 1.0 if base.throughput[j, k] > 0 else 0.0))
    for p in range(pairs):
        for k in range(types):
            col = jobs * types + p * types + k
            rate[problem.first[p], col] = problem.first_speed[p, k]
            rate[problem.second[p], col] = problem.second_speed[p, k]
            time[problem.first[p], col] = time[problem.second[p], col] = 1.0
            gpus[k, col] = 1.0
            alive = problem.first_speed[p, k] > 0 and problem.second_speed[p, k] > 0
            bounds.append((0.0, 1.0 if alive else 0.0))
    return rate, time, gpus, bounds


def feasible(problem: PackedProblem, need: np.ndarray) -> bool:
    """Whether some allocation gives every job at least ``need`` steps/s (simplex)."""
    rate, time, gpus, bounds = dense(problem)
    found = linprog(np.zeros(rate.shape[1]), A_ub=np.vstack([-rate, time, gpus]),
                    b_ub=np.concatenate([-need, np.ones(len(need)), problem.alone.capacity]),
                    bounds=bounds, method="highs-ds")
    return bool(found.status == 0)


@pytest.mark.parametrize(("factor", "makespan"), [(0.8, 1.25), (0.45, 2.0)])
def test_the_least_makespan_on_one_gpu(factor: float, makespan: float) -> None:
    # Two jobs of 10 steps at 10 steps/s alone. Apart they split the GPU, 5 steps/s
    # each: 2 s. Packed at 0.8 both run at 8 steps/s all along: 1.25 s, the least (the
    # two rates add up to at most 16 on one GPU, so one is at most 8). At 0.45 packing
    # gives 4.5 steps/s, less than apart: 2 s with the pair unused.
    problem = two_jobs_one_gpu(factor)
    answer = packed_min_total_duration(problem, np.array([10.0, 10.0]))
    assert answer is not None
    assert answer.value == pytest.approx(makespan, rel=1e-6)
    assert answer.together[0, 0] == pytest.approx(1.0 if factor > 0.5 else 0.0, abs=1e-6)
    assert problem.is_feasible(answer.alone, answer.together)


@pytest.mark.parametrize(("factor", "ratio"), [(0.8, 0.625), (0.45, 1.0)])
def test_the_least_finish_time_ratio_on_one_gpu(factor: float, ratio: float) -> None:
    # Isolated, each job has half the GPU: 5 steps/s, its 10 steps in 2 s. Packed at 0.8
    # both finish in 1.25 s: ratio 0.625, the least (as above, one rate is at most 8).
    # At 0.45 the pair is slower than apart: ratio 1.
    problem = two_jobs_one_gpu(factor)
    start = (np.array([[0.5], [0.5]]), np.zeros((1, 1)))
    answer = packed_finish_time(problem, np.zeros(2), np.array([10.0, 10.0]),
                                np.array([2.0, 2.0]), start)
    assert answer is not None
    assert answer.optimal
    assert answer.value == pytest.approx(ratio, rel=1e-5)
    assert problem.is_feasible(answer.alone, answer.together)


@pytest.mark.parametrize("seed", range(5))
def test_the_least_makespan_is_the_simplex_one(seed: int) -> None:
    problem = random_problem(seed)
    steps = np.random.default_rng(seed + 100).uniform(100.0, 5000.0, size=5)
    answer = packed_min_total_duration(problem, steps)
    assert answer is not None
    assert problem.is_feasible(answer.alone, answer.together)
    rate = problem.rates(answer.alone, answer.together)
    assert answer.value == pytest.approx(float((steps / rate).max()))
    # The least makespan T: rate_j >= steps_j / T feasible at T, not 1e-5 below it.
    assert feasible(problem, steps / (answer.value * (1 + 1e-6)))
    assert not feasible(problem, steps / (answer.value * (1 - 1e-5)))


@pytest.mark.parametrize("seed", range(5))
def test_the_least_finish_time_ratio_is_the_simplex_one(seed: int) -> None:
    problem = random_problem(seed)
    rng = np.random.default_rng(seed + 200)
    steps = rng.uniform(100.0, 5000.0, size=5)
    since = rng.uniform(0.0, 2000.0, size=5)
    base = problem.alone
    share = np.minimum(1.0, base.capacity / base.scale_factors[:, np.newaxis] / 5.0)
    start = np.where(base.throughput > 0, share / 2.0, 0.0)  # (feasible: half of 1/n)
    isolated = steps / (base.throughput * start).sum(axis=1)
    answer = packed_finish_time(problem, since, steps, isolated,
                                (start, np.zeros((len(problem.first), 2))))
    assert answer is not None
    assert answer.optimal
    assert problem.is_feasible(answer.alone, answer.together)
    # The least worst ratio z: every job within z is feasible, within z(1 - 1e-4) not.
    def within(z: float) -> bool:
        return feasible(problem, steps / (z * isolated - since))
    assert within(answer.value * (1 + 1e-6))
    assert not within(answer.value * (1 - 1e-4))


def simplex_per_cost(problem: PackedProblem, prices: np.ndarray, need: np.ndarray) -> float:
    base = problem.alone
    rate, time, gpus, bounds = dense(problem)
    types = len(base.gpu_types)
    on_type = np.array([c % types for c in range(rate.shape[1])])  # (x and y: type last)
    value = (rate / base.equal_share_throughput()[:, np.newaxis]).sum(axis=0) / prices[on_type]
    found = linprog(-value, A_ub=np.vstack([-rate, time, gpus]),
                    b_ub=np.concatenate([-need, np.ones(len(need)), base.capacity]),
                    bounds=bounds, method="highs-ds")
    assert found.status == 0
    return float(-found.fun)


@pytest.mark.parametrize("seed", range(5))
def test_the_most_throughput_per_dollar_is_the_simplex_one(seed: int) -> None:
    problem = random_problem(seed)
    rng = np.random.default_rng(seed + 300)
    prices = rng.uniform(0.1, 1.0, size=2)
    need = np.zeros(5)
    need[0] = 0.3 * problem.alone.throughput[0].max()  # (job 0 asks a rate it can get)
    answer = packed_throughput_per_cost(problem, prices, need)
    assert answer is not None
    assert problem.is_feasible(answer.alone, answer.together)
    assert problem.rates(answer.alone, answer.together)[0] >= need[0] * (1 - 1e-6)
    assert answer.value == pytest.approx(simplex_per_cost(problem, prices, need), rel=1e-5)


def test_per_dollar_the_cheap_type_and_the_rate_asked() -> None:
    # One job: 2 steps/s on type t (1 USD/h), 1 on u (0.25 USD/h): per dollar 2 against
    # 4, so all its time on u; asked 1.5 steps/s, 2 x_t + x_u >= 1.5 with x_t + x_u <= 1,
    # and 2 x_t + 4 x_u largest at x_t = x_u = 0.5. Asked 3 (more than it can get), the
    # rate is dropped, as Gavel drops its SLOs: all on u again.
    alone = AllocationProblem(("a",), ("t", "u"), np.array([[2.0, 1.0]]), np.ones(1),
                              np.array([1.0, 1.0]), np.ones(1))
    problem = PackedProblem(alone, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                            np.zeros((0, 2)), np.zeros((0, 2)))
    prices = np.array([1.0, 0.25])
    for need, expected in ((0.0, [0.0, 1.0]), (1.5, [0.5, 0.5]), (3.0, [0.0, 1.0])):
        answer = packed_throughput_per_cost(problem, prices, np.array([need]),
                                            normalized=False)
        assert answer is not None
        assert answer.alone[0] == pytest.approx(expected, abs=1e-5)  # (NEED_TOLERANCE)
        assert answer.value == pytest.approx(2 * expected[0] + 4 * expected[1], rel=1e-5)
        assert answer.solves == (2 if need > 2.0 else 1)


def test_no_finish_time_allocation_from_a_start_that_leaves_a_job_still() -> None:
    problem = two_jobs_one_gpu(0.8)
    start = (np.array([[1.0], [0.0]]), np.zeros((1, 1)))
    assert packed_finish_time(problem, np.zeros(2), np.ones(2), np.ones(2), start) is None


def test_a_point_inside_the_allocations_giving_each_job_its_rate() -> None:
    # Two jobs at 10 steps/s alone on one GPU, 8 each packed; each asked 5 steps/s (a
    # makespan of 2 s for 10 steps): 10 x_a + 8 y >= 5, 10 x_b + 8 y >= 5, x_a + x_b + y
    # <= 1 has an inside, so with no objective the interior point leaves every row
    # slack, as ECOS does on Gavel's feasibility problems: the GPU not quite full, each
    # job a little above 5. Asked 9 each (more than 16 in all) there is no point at all.
    problem = two_jobs_one_gpu(0.8)
    inside = packed_feasible(problem, np.array([5.0, 5.0]))
    assert inside is not None
    alone, together = inside
    assert problem.is_feasible(alone, together)
    assert np.all(problem.rates(alone, together) > 5.0 + 1e-3)
    assert alone.sum() + together.sum() < 1.0 - 1e-3
    assert packed_feasible(problem, np.array([9.0, 9.0])) is None


def progressive_filling(problem: PackedProblem) -> np.ndarray:
    """Each job's level (s_j r_j / E_j) by the textbook water-filling, on scipy's simplex:
    raise every rising job's level by w_j t as far as it goes, then fix each rising job
    that cannot get above its new level with every other job kept at its own (one LP
    per job, no dual prices), until none rises."""
    base = problem.alone
    rate, time, gpus, bounds = dense(problem)
    jobs = rate.shape[0]
    relative = (base.scale_factors / base.equal_share_throughput())[:, np.newaxis] * rate
    level, rising = np.zeros(jobs), np.ones(jobs, dtype=bool)
    limits = (np.vstack([time, gpus]), np.concatenate([np.ones(jobs), base.capacity]))
    while rising.any():
        lift = np.where(rising, base.weights, 0.0)[:, np.newaxis]
        found = linprog(np.concatenate([np.zeros(rate.shape[1]), [-1.0]]),
                        A_ub=np.vstack([np.hstack([-relative, lift]),
                                        np.hstack([limits[0], np.zeros((len(limits[1]), 1))])]),
                        b_ub=np.concatenate([-level, limits[1]]),
                        bounds=[*bounds, (0.0, None)], method="highs-ds")
        assert found.status == 0
        level = level + np.where(rising, base.weights * -found.fun, 0.0)
        for job in np.flatnonzero(rising):
            best = linprog(-relative[job], A_ub=np.vstack([-relative, limits[0]]),
                           b_ub=np.concatenate([-level * (1 - 1e-9), limits[1]]),
                           bounds=bounds, method="highs-ds")
            if -best.fun <= level[job] * (1 + 1e-7):
                rising[job] = False
    return level


@pytest.mark.parametrize("seed", range(6))
def test_packed_water_filling_reaches_the_textbook_levels(seed: int) -> None:
    problem = random_problem(seed)
    answer = packed_water_filling(problem)
    assert answer is not None
    assert problem.is_feasible(answer.alone, answer.together)
    base = problem.alone
    got = base.scale_factors * problem.rates(answer.alone, answer.together) \
        / base.equal_share_throughput()
    expected = progressive_filling(problem)
    # Every job at least its level (the interior point may give some a little more).
    assert np.all(got >= expected * (1 - 1e-6))
    assert answer.value == pytest.approx(float((expected / base.weights).min()), rel=1e-6)


def test_packed_water_filling_without_pairs_is_water_filling() -> None:
    from hetsched.formulations.gavel.water_filling import water_filling

    problem = random_problem(3)
    answer = packed_water_filling(PackedProblem.without_pairs(problem.alone))
    assert answer is not None
    assert answer.value == pytest.approx(water_filling(problem.alone).value, rel=1e-6)
