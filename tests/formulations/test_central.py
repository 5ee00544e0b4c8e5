"""The central optimal allocation of finish-time fairness
(hetsched.formulations.gavel.central): an interior optimum where the optimum is not a
single point, the unique one where it is."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetsched.formulations.gavel.central import central_allocation
from hetsched.formulations.gavel.finish_time import FinishTimeSolver
from tests.formulations.test_finish_time import problem


def test_two_alike_jobs_get_time_on_both_types() -> None:
    # One V100 (10 steps/s for either job) and one K80 (2 steps/s), two jobs of 600 steps
    # that just arrived, isolated time 100 s each (half of each type: 6 steps/s). The best
    # worst ratio is 1: rates 6 and 6 use all 12 steps/s the two GPUs give. Many
    # allocations reach it (A 0.6 of the V100 alone, B the rest and the K80; or half of
    # each type each); the central one gives both jobs time on both types.
    case = problem([[10.0, 2.0], [10.0, 2.0]], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0],
                   [600.0, 600.0], [100.0, 100.0])
    best = FinishTimeSolver().solve(case)
    assert best.value == pytest.approx(1.0, rel=1e-6)
    central = central_allocation(case, best.value)
    assert central is not None
    assert case.allocation.is_feasible(central, 1e-9)
    assert case.worst(central) == pytest.approx(1.0, rel=1e-4)
    assert np.all(central > 1e-3)


def test_a_unique_optimum_is_returned_as_it_is() -> None:
    # test_finish_time's case: two jobs on one GPU, the optimum is unique (the job that
    # waited 10 s gets (sqrt 5 - 1) / 2 of the GPU, the other the rest), so the central
    # allocation is it.
    case = problem([[10.0], [10.0]], [1, 1], [1], [10.0, 0.0], [100.0, 100.0], [20.0, 20.0])
    best = FinishTimeSolver().solve(case)
    central = central_allocation(case, best.value)
    assert central is not None
    golden = (math.sqrt(5) - 1) / 2
    assert central[:, 0] == pytest.approx([golden, 1 - golden], abs=1e-4)


def test_gavels_max_min_central_optimum_keeps_the_floor() -> None:
    # The case above as Gavel's max-min: one V100 (10 steps/s) and one K80 (2), two alike
    # 1-GPU jobs of weight 1; equal shares give each E = 6 steps/s, and the best floor is
    # rho = 1 for both (12 steps/s split evenly). The central optimum keeps the floor and
    # gives both jobs time on both types.
    from hetsched.formulations.gavel.central import central_max_min
    from hetsched.formulations.gavel.matrix import solve_matrix

    case = problem([[10.0, 2.0], [10.0, 2.0]], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0],
                   [600.0, 600.0], [100.0, 100.0]).allocation
    floor = solve_matrix(case).value
    assert floor == pytest.approx(1.0, rel=1e-6)
    central = central_max_min(case, floor)
    assert central is not None
    assert case.is_feasible(central, 1e-9)
    assert case.normalised(central) == pytest.approx([1.0, 1.0], rel=1e-4)
    assert np.all(central > 1e-3)
