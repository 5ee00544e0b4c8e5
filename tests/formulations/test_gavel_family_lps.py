"""The allocations of Gavel's other policies (hetsched.formulations.gavel: duration, cost,
fastest): optima worked out by hand, and agreement with scipy's LP on per-job models
(Gavel's bisection for the makespan) on random instances."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from hetsched.formulations.gavel.cost import CostProblem, max_throughput_per_cost
from hetsched.formulations.gavel.duration import DurationProblem, min_total_duration
from hetsched.formulations.gavel.fastest import fastest_free
from hetsched.formulations.gavel.problem import AllocationProblem
from tests.helpers import allocation_problem, least_feasible, per_job_rows, speed_rows


def random_base(seed: int) -> AllocationProblem:
    draw = np.random.default_rng(seed)
    jobs, types = int(draw.integers(2, 8)), int(draw.integers(1, 4))
    throughput = draw.uniform(1.0, 20.0, (jobs, types)) * (draw.random((jobs, types)) < 0.8)
    throughput[:, 0] = np.maximum(throughput[:, 0], 1.0)  # every job runs somewhere
    if jobs > 3:  # two identical jobs: one class of two
        throughput[1] = throughput[0]
    gangs = draw.choice([1.0, 2.0, 4.0], jobs)
    gangs[1] = gangs[0]
    return allocation_problem(throughput.tolist(), gangs.tolist(),
                              draw.choice([2.0, 4.0, 8.0], types).tolist())


# --- min total duration ----------------------------------------------------------------


def test_two_jobs_that_both_want_the_v100_share_both_types() -> None:
    # One V100 and one K80; two identical jobs at 4 and 1 steps/s, 400 steps each. Their
    # speeds add up to at most 4 + 1 = 5 steps/s (both GPUs full), so the slower gets at
    # most 2.5: T >= 400 / 2.5 = 160 s, reached by half of each type each. (Each alone
    # on the V100 would take 100 s: the LP's T_lb, not reachable here.)
    case = DurationProblem(allocation_problem([[4.0, 1.0], [4.0, 1.0]], [1, 1], [1, 1]),
                           np.array([400.0, 400.0]))
    answer = min_total_duration(case)
    assert answer.optimal
    assert case.lower_bound() == pytest.approx(100.0)
    assert answer.value == pytest.approx(160.0, rel=1e-7)
    np.testing.assert_allclose(answer.fractions, 0.5, atol=1e-7)


def test_the_fast_job_gets_the_v100_and_the_other_the_k80() -> None:
    # A: 2 (V100) and 1 (K80) steps/s, B: 1 and 1, 100 steps each, one GPU of each. B
    # runs at most 1 step/s (all of its time), so T >= 100 s; A on the V100 (2 steps/s)
    # and B on the K80 (1) reach it. With the makespan held, any split with B at full
    # time keeps T = 100, but the second stage (most sum of T X / E: E_A = 1.5, E_B = 1)
    # gives A all of the V100: 2 a + a' with a <= 1 - b, a' <= b is 2 - b, best at b = 0.
    case = DurationProblem(allocation_problem([[2.0, 1.0], [1.0, 1.0]], [1, 1], [1, 1]),
                           np.array([100.0, 100.0]))
    answer = min_total_duration(case)
    assert answer.value == pytest.approx(100.0, rel=1e-7)
    np.testing.assert_allclose(answer.fractions, [[1, 0], [0, 1]], atol=1e-7)


def test_the_time_the_last_job_cannot_use_goes_to_the_others() -> None:
    # Two GPUs of one type at 1 step/s; A has 100 steps left, B 10. A takes 100 s at best
    # (all of its time on one GPU); B needs only 0.1 of its time to finish by then. The
    # first stage alone leaves B anywhere from 0.1 to 1; the second gives it all (1).
    case = DurationProblem(allocation_problem([[1.0], [1.0]], [1, 1], [2]), np.array([100.0, 10.0]))
    answer = min_total_duration(case)
    assert answer.value == pytest.approx(100.0, rel=1e-7)
    np.testing.assert_allclose(answer.fractions, [[1.0], [1.0]], atol=1e-7)


def bisection(case: DurationProblem) -> float:
    """The least makespan by Gavel's method: bisection on T, each T an LP feasibility
    problem (every job at least steps / T steps/s), here to 1e-9 instead of 5 %."""
    return least_feasible(case.allocation, lambda makespan: case.steps_left / makespan, 80)


@pytest.mark.parametrize("seed", range(8))
def test_min_total_duration_agrees_with_gavels_bisection(seed: int) -> None:
    problem = random_base(seed)
    steps = np.random.default_rng(100 + seed).uniform(100.0, 5000.0, len(problem.job_ids))
    case = DurationProblem(problem, steps)
    answer = min_total_duration(case)
    assert answer.optimal
    assert problem.is_feasible(answer.fractions, 1e-7)
    assert answer.value == pytest.approx(case.makespan(answer.fractions))
    assert answer.value == pytest.approx(bisection(case), rel=1e-6)


# --- throughput per cost ---------------------------------------------------------------


def test_gavels_own_cost_case() -> None:
    # Gavel's test (scheduler/tests/policies_tests.py, test_throughput_sum_normalized_by_
    # cost): A at 2, 1, 0.5 and B at 3, 2, 1 steps/s on one V100, P100 and K80 at 3.1,
    # 2.0 and 0.8 USD/h. E_A = 3.5 / 3, E_B = 2, so T / (E p) is A: 0.5530, 0.4286,
    # 0.5357; B: 0.4839, 0.5, 0.625. Each job has one unit of time and each GPU one: the
    # LP's vertices are matchings, the best A on the V100 and B on the K80,
    # 12 / (7 x 3.1) + 0.625 = 1.17800 (next: A on the P100 and B on the K80, 1.0536).
    # The P100 stays idle.
    problem = allocation_problem([[2.0, 1.0, 0.5], [3.0, 2.0, 1.0]], [1, 1], [1, 1, 1])
    case = CostProblem(problem, np.array([3.1, 2.0, 0.8]), np.zeros(2))
    answer = max_throughput_per_cost(case)
    assert answer.allocation.optimal
    assert answer.allocation.value == pytest.approx(12 / (7 * 3.1) + 0.625, rel=1e-7)
    np.testing.assert_allclose(answer.allocation.fractions, [[1, 0, 0], [0, 0, 1]], atol=1e-7)


def two_alike(need: list[float]) -> CostProblem:
    """One V100 (3 USD/h) and one K80 (1 USD/h); two jobs at 2 and 1 steps/s. E = 1.5, so
    a unit of time earns 2 / 1.5 / 3 = 4/9 on the V100 and 1 / 1.5 / 1 = 2/3 on the K80:
    both GPUs full give 4/9 + 2/3 = 10/9 however the jobs split them."""
    return CostProblem(allocation_problem([[2.0, 1.0], [2.0, 1.0]], [1, 1], [1, 1]),
                       np.array([3.0, 1.0]), np.array(need))


def test_a_deadline_is_met_and_costs_nothing_here() -> None:
    # Without deadlines the jobs are one class: half of each GPU each. A needing 1.8
    # steps/s must have 2 a + a' >= 1.8 with a + a' <= 1: a >= 0.8; both GPUs stay full
    # (B gets the rest), so the value is still 10/9.
    free = max_throughput_per_cost(two_alike([0.0, 0.0]))
    np.testing.assert_allclose(free.allocation.fractions, 0.5, atol=1e-7)
    case = two_alike([1.8, 0.0])
    kept = max_throughput_per_cost(case)
    assert kept.kept == ("j0",)
    assert kept.allocation.value == pytest.approx(10 / 9, rel=1e-7)
    assert not case.missed(kept.allocation.fractions).any()
    assert kept.allocation.fractions[0, 0] >= 0.8 - 1e-7


def test_deadlines_that_cannot_be_met_are_left_out() -> None:
    # A needs 2.5 steps/s, above its 2 alone on the V100: left out, B's (1.2) kept. Both
    # needing 1.8 would need a, b >= 0.8 of the one V100: infeasible together, so (as
    # Gavel) every deadline is dropped and the split is the one without deadlines.
    alone = max_throughput_per_cost(two_alike([2.5, 1.2]))
    assert alone.kept == ("j1",)
    assert 2 * alone.allocation.fractions[1, 0] + alone.allocation.fractions[1, 1] \
        >= 1.2 - 1e-7
    together = max_throughput_per_cost(two_alike([1.8, 1.8]))
    assert together.allocation.ok
    assert together.kept == ()
    np.testing.assert_allclose(together.allocation.fractions, 0.5, atol=1e-7)


@pytest.mark.parametrize("seed", range(8))
def test_the_cost_lp_agrees_with_scipy_per_job(seed: int) -> None:
    # Per job (no classes), scipy's HiGHS on the same objective, with deadlines that the
    # equal shares meet (so the LP is feasible) on about half the jobs.
    problem = random_base(seed)
    draw = np.random.default_rng(200 + seed)
    prices = draw.uniform(0.1, 3.0, len(problem.gpu_types))
    equal_speed = (problem.throughput * np.where(problem.throughput > 0, problem.capacity
                                                 / max(problem.scale_factors.sum(),
                                                       problem.capacity.sum()), 0)).sum(axis=1)
    need = np.where(draw.random(len(problem.job_ids)) < 0.5, 0.9 * equal_speed, 0.0)
    case = CostProblem(problem, prices, need)
    answer = max_throughput_per_cost(case)
    assert answer.allocation.optimal
    assert len(answer.kept) == int(np.count_nonzero(need))
    assert problem.is_feasible(answer.allocation.fractions, 1e-7)
    assert not case.missed(answer.allocation.fractions).any()
    rows, bounds, upper = per_job_rows(problem)
    speed, floor = speed_rows(problem, need)
    objective = -(problem.throughput / problem.equal_share_throughput()[:, None]
                  / prices[None, :]).ravel()
    found = linprog(objective, A_ub=np.vstack([rows, speed]),
                    b_ub=np.concatenate([bounds, floor]), bounds=upper, method="highs")
    assert found.status == 0
    assert answer.allocation.value == pytest.approx(-found.fun, rel=1e-7)


# --- fastest free (fifo-fastest) -------------------------------------------------------


def test_fifo_fastest_deals_types_in_order_and_stops_at_the_first_misfit() -> None:
    # Two V100s and four K80s; every job faster on the V100. a (1 GPU) takes a V100; b (2
    # GPUs) finds one V100 left and takes two K80s; c (1) the last V100; d (4) fits on no
    # type now: the queue stops, and e (1 GPU, room on the K80s) waits behind d.
    problem = allocation_problem([[10.0, 2.0]] * 5, [1, 2, 1, 4, 1], [2, 4])
    fractions = fastest_free(problem, np.arange(5))
    np.testing.assert_array_equal(fractions, [[1, 0], [0, 1], [1, 0], [0, 0], [0, 0]])
    # In another order (e first) e takes a V100 and c is the one sent to a K80.
    fractions = fastest_free(problem, np.array([4, 0, 1, 2, 3]))
    np.testing.assert_array_equal(fractions, [[1, 0], [0, 1], [0, 1], [0, 0], [1, 0]])


def test_fifo_fastest_stops_at_a_job_whose_only_type_is_full() -> None:
    # One V100, two K80s; a runs on the V100 only and takes it; b, also V100-only, finds
    # it full and stops the queue, although c could run on the free K80s (Gavel would
    # skip b and start c: docs/policies.md).
    problem = allocation_problem([[10.0, 0.0], [10.0, 0.0], [10.0, 2.0]], [1, 1, 1], [1, 2])
    np.testing.assert_array_equal(fastest_free(problem, np.arange(3)),
                                  [[1, 0], [0, 0], [0, 0]])


def test_the_raw_cost_objective_is_gavels() -> None:
    # One V100 (0.74 USD/h) and one K80 (0.135); A: 20 and 1 steps/s (E_A = 10.5), B: 100
    # and 10 (E_B = 55). Normalised, per dollar: A on the V100 and B on the K80 earn
    # 20/10.5/0.74 + 10/55/0.135 = 3.92, the other way 1/10.5/0.135 + 100/55/0.74 = 3.16.
    # Raw steps/s per dollar (Gavel's code): 20/0.74 + 10/0.135 = 101.1 against
    # 1/0.135 + 100/0.74 = 142.5, so B takes the V100.
    prices = np.array([0.74, 0.135])
    problem = AllocationProblem(("A", "B"), ("v100", "k80"),
                                np.array([[20.0, 1.0], [100.0, 10.0]]), np.ones(2),
                                np.ones(2), np.ones(2))
    for normalized, expected, value in ((True, [[1, 0], [0, 1]], 3.9208),
                                        (False, [[0, 1], [1, 0]], 142.5425)):
        answer = max_throughput_per_cost(CostProblem(problem, prices, np.zeros(2), normalized))
        np.testing.assert_allclose(answer.allocation.fractions, expected, atol=1e-9)
        assert answer.allocation.value == pytest.approx(value, abs=1e-3)
