"""Finish-time fairness allocations (hetsched.formulations.gavel.finish_time): an optimum
worked out by hand, and agreement with a bisection over scipy's LP on random instances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetsched.formulations.gavel.finish_time import (
    FinishTimeProblem,
    FinishTimeSolver,
    isolated_speeds,
)
from tests.helpers import allocation_problem, least_feasible


def problem(throughput: list[list[float]], gangs: list[float], capacity: list[float],
            since: list[float], steps: list[float], isolated: list[float]
            ) -> FinishTimeProblem:
    return FinishTimeProblem(allocation_problem(throughput, gangs, capacity),
                             np.array(since, dtype=float), np.array(steps, dtype=float),
                             np.array(isolated, dtype=float))


def test_two_jobs_on_one_gpu_share_it_by_the_golden_ratio() -> None:
    # One GPU at 10 steps/s; both jobs have 100 steps left and an isolated time of 20 s;
    # the first has waited 10 s. The worst ratio is least when both are equal:
    # 10 + 100 / r1 = 100 / r2 with r1 + r2 = 10, so r1^2 + 10 r1 - 100 = 0,
    # r1 = 5 (sqrt 5 - 1) = 6.18 steps/s, and the ratio is 100 / r2 / 20 = (3 + sqrt 5) / 4.
    case = problem([[10.0], [10.0]], [1, 1], [1], [10.0, 0.0], [100.0, 100.0], [20.0, 20.0])
    answer = FinishTimeSolver().solve(case)
    assert answer.optimal
    assert answer.value == pytest.approx((3 + math.sqrt(5)) / 4, rel=1e-6)
    assert answer.fractions[0, 0] == pytest.approx((math.sqrt(5) - 1) / 2, rel=1e-5)
    assert case.allocation.is_feasible(answer.fractions, 1e-7)


def test_isolated_speeds_split_every_type_among_the_jobs() -> None:
    # Two jobs on 4 + 4 GPUs: job 0 (gang 2) gets 4 / (2 x 2) = 1 of each type, scaled to
    # 0.5 + 0.5; job 1 (gang 8) 4 / (2 x 8) = 0.25 of each.
    case = problem([[10.0, 2.0], [40.0, 0.0]], [2, 8], [4, 4], [0, 0], [1, 1], [1, 1])
    assert isolated_speeds(case.allocation) == pytest.approx([0.5 * 10 + 0.5 * 2, 0.25 * 40])


def bisection(case: FinishTimeProblem) -> float:
    """The least worst ratio by bisection on z: z is reached if an allocation gives every
    job at least steps / (z iso - since) steps/s (an LP feasibility problem)."""

    def need(z: float) -> np.ndarray | None:
        room = z * case.isolated_s - case.since_s
        return None if np.any(room <= 0) else case.steps_left / room

    return least_feasible(case.allocation, need, 60)


@pytest.mark.parametrize("seed", range(8))
def test_agrees_with_a_bisection_over_scipy(seed: int) -> None:
    draw = np.random.default_rng(seed)
    jobs, types = int(draw.integers(2, 7)), int(draw.integers(1, 4))
    throughput = draw.uniform(1.0, 20.0, (jobs, types)) * (draw.random((jobs, types)) < 0.8)
    throughput[:, 0] = np.maximum(throughput[:, 0], 1.0)  # every job runs somewhere
    gangs = draw.choice([1.0, 2.0, 4.0], jobs)
    capacity = draw.choice([2.0, 4.0, 8.0], types)
    since = draw.uniform(0.0, 500.0, jobs)
    steps = draw.uniform(100.0, 5000.0, jobs)
    isolated = draw.uniform(50.0, 2000.0, jobs)
    case = problem(throughput.tolist(), gangs.tolist(), capacity.tolist(), since.tolist(),
                   steps.tolist(), isolated.tolist())
    answer = FinishTimeSolver().solve(case)
    assert answer.optimal
    assert case.allocation.is_feasible(answer.fractions, 1e-7)
    assert answer.value == pytest.approx(case.worst(answer.fractions))
    assert answer.value == pytest.approx(bisection(case), rel=1e-5)
