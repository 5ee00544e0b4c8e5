"""The ``progress`` policy's round MILP (hetsched.formulations.progress): its optimum against
brute force on small random rounds, the packed-gang rows, the start it never falls below,
and the back-ends agreeing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hetsched.formulations.budget import Budget
from hetsched.formulations.mip import available_engines
from hetsched.formulations.progress import (
    RoundModel,
    RoundProblem,
    best_each,
    greedy,
    solve_round,
)
from tests.helpers import best_worth


def round_problem(seed: int, jobs: int = 5, types: int = 2) -> RoundProblem:
    """A random round: each job has an option on each type (its size fixed, some packed),
    types of 4 to 8 GPUs on servers of 4."""
    rng = np.random.default_rng(seed)
    option_job, option_type, option_size, value, packed = [], [], [], [], []
    for j in range(jobs):
        size = int(rng.choice([1, 1, 2, 3, 4]))
        must_pack = bool(rng.integers(0, 2)) and size > 1
        for t in range(types):
            if rng.random() < 0.8:
                option_job.append(j)
                option_type.append(t)
                option_size.append(size)
                value.append(float(rng.uniform(0.1, 10.0)))
                packed.append(must_pack)
    capacity = rng.integers(4, 9, size=types)
    server = np.full(types, 4)
    return RoundProblem(jobs, np.array(option_job), np.array(option_type),
                        np.array(option_size), np.array(value), capacity,
                        np.array(packed, dtype=np.bool_), server,
                        capacity // 4)


def brute_force(problem: RoundProblem) -> float:
    """The best total value over every choice of at most one option per job."""
    per_job: list[list[int | None]] = [[None] for _ in range(problem.num_jobs)]
    for k in range(problem.num_options):
        per_job[int(problem.option_job[k])].append(k)
    options = np.arange(problem.num_options)
    return best_worth(problem, (np.isin(options, [k for k in pick if k is not None])
                                for pick in itertools.product(*per_job)))


@pytest.mark.parametrize("seed", range(12))
def test_the_milp_finds_the_brute_force_optimum(seed: int) -> None:
    problem = round_problem(seed)
    plan = solve_round(problem, Budget.unlimited(deterministic=True))
    assert problem.feasible(plan.chosen)
    assert plan.value == pytest.approx(brute_force(problem), rel=1e-9)
    assert plan.bound is not None
    assert plan.bound >= plan.value * (1 - 1e-6)
    # The greedy start is feasible and no better.
    start = greedy(problem)
    assert problem.feasible(start)
    assert problem.worth(start) <= plan.value + 1e-9


def packed_round(servers_over_half: int) -> RoundProblem:
    """Three packed gangs of 5 GPUs (worth 3 each) and two single GPUs (worth 1 each) on one
    type of 16 GPUs on two servers of 8."""
    return RoundProblem(5, np.arange(5), np.zeros(5, dtype=np.int64),
                        np.array([5, 5, 5, 1, 1]), np.array([3.0, 3.0, 3.0, 1.0, 1.0]),
                        np.array([16]), np.array([True, True, True, False, False]),
                        np.array([8]), np.array([servers_over_half]))


def test_packed_gangs_of_more_than_half_a_server_take_a_server_each() -> None:
    # Capacity alone would take the three gangs (15 GPUs, worth 9) and a single (16, 10).
    # Two servers of 8 hold only two gangs of 5: the best is two gangs and both singles
    # (12 GPUs, worth 8).
    plan = solve_round(packed_round(2), Budget.unlimited(deterministic=True))
    assert plan.value == pytest.approx(8.0)
    assert plan.chosen[:3].sum() == 2
    assert plan.chosen[3:].all()
    model = RoundModel(packed_round(2)).build()
    assert model.num_rows == 5 + 1 + 1  # one per job, the type's capacity, its servers
    unlimited = solve_round(packed_round(3), Budget.unlimited(deterministic=True))
    assert unlimited.value == pytest.approx(10.0)


def test_a_feasible_start_is_never_lost() -> None:
    # A budget of one branch-and-bound node: whatever the engine returns, the plan is at
    # least as good as the start (here the optimum, given as the previous round's choice).
    problem = round_problem(3, jobs=8, types=3)
    best = solve_round(problem, Budget.unlimited(deterministic=True))
    warm = RoundProblem(problem.num_jobs, problem.option_job, problem.option_type,
                        problem.option_size, problem.value, problem.capacity, problem.packed,
                        problem.server_size, problem.servers_over_half, best.chosen)
    plan = solve_round(warm, Budget.work(1 / 200))
    assert plan.value >= best.value - 1e-9


def test_an_empty_round_chooses_nothing() -> None:
    empty = RoundProblem(0, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                         np.zeros(0, dtype=np.int64), np.zeros(0), np.array([4]),
                         np.zeros(0, dtype=np.bool_), np.array([4]), np.array([1]))
    plan = solve_round(empty, Budget.unlimited())
    assert plan.value == 0.0
    assert not plan.chosen.any()


def test_bad_rounds_are_refused() -> None:
    with pytest.raises(ValueError, match="values"):
        RoundProblem(1, np.array([0]), np.array([0]), np.array([1]), np.array([-1.0]),
                     np.array([1]), np.array([False]), np.array([1]), np.array([1]))
    with pytest.raises(ValueError, match="option_job"):
        RoundProblem(1, np.array([1]), np.array([0]), np.array([1]), np.array([1.0]),
                     np.array([1]), np.array([False]), np.array([1]), np.array([1]))


@pytest.mark.parametrize("engine", [e for e in ("cbc", "scip") if e in available_engines()])
@pytest.mark.parametrize("seed", range(4))
def test_back_ends_agree(engine: str, seed: int) -> None:
    problem = round_problem(seed, jobs=7, types=3)
    highs = solve_round(problem, Budget.unlimited(deterministic=True), "highs")
    other = solve_round(problem, Budget.unlimited(deterministic=True), engine)
    assert other.value == pytest.approx(highs.value, rel=1e-6)


@pytest.mark.parametrize("seed", range(12))
def test_when_every_jobs_best_option_fits_it_is_the_optimum_without_a_solve(
        seed: int) -> None:
    # The random rounds above with capacities of 40 GPUs (10 servers of 4) per type: room
    # for everyone, so each job takes its most valuable option and nothing is solved;
    # brute force agrees. Tied values keep the previous round's option.
    tight = round_problem(seed)
    roomy = RoundProblem(tight.num_jobs, tight.option_job, tight.option_type,
                         tight.option_size, tight.value, np.full(len(tight.capacity), 40),
                         tight.packed, tight.server_size, np.full(len(tight.capacity), 10))
    plan = solve_round(roomy, Budget.unlimited(deterministic=True))
    assert (plan.source, plan.work) == ("best", 0.0)
    assert plan.value == pytest.approx(brute_force(roomy), rel=1e-12)
    assert plan.bound == plan.value
    per_job = np.bincount(roomy.option_job[plan.chosen], minlength=roomy.num_jobs)
    assert per_job.max() == 1
    # Where the best options do not fit, the MILP decides (the seeds whose tight round
    # the brute-force test covers).
    if best_each(tight) is None:
        assert solve_round(tight, Budget.unlimited(deterministic=True)).source != "best"


def test_ties_keep_the_previous_rounds_option() -> None:
    # One job of one GPU worth 2 on either of two types: last round it ran on type 1.
    tie = RoundProblem(1, np.array([0, 0]), np.array([0, 1]), np.array([1, 1]),
                       np.array([2.0, 2.0]), np.array([4, 4]), np.array([False, False]),
                       np.array([4, 4]), np.array([1, 1]), np.array([False, True]))
    chosen = best_each(tie)
    assert chosen is not None
    assert chosen.tolist() == [False, True]
    fresh = RoundProblem(1, tie.option_job, tie.option_type, tie.option_size, tie.value,
                         tie.capacity, tie.packed, tie.server_size, tie.servers_over_half)
    again = best_each(fresh)
    assert again is not None
    assert again.tolist() == [True, False]
