"""Pairs in the ``progress`` round MILP (``option_partner``: two jobs packed on one GPU,
an option in the one-option rows of both): its optimum against brute force over every
subset of options, the greedy start, the best-option short cut and bad partners."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hetsched.formulations.budget import Budget
from hetsched.formulations.progress import RoundProblem, best_each, greedy, solve_round
from tests.helpers import best_worth


def paired_round(seed: int, jobs: int = 5, types: int = 2) -> RoundProblem:
    """A random round of one-GPU jobs: each has an option alone on most types, some pairs
    of jobs an option together on a type (one GPU, worth up to 1.6 times the better of
    the two alone), and job 0 runs packed alone where job 1 may join it (no GPU)."""
    rng = np.random.default_rng(seed)
    option_job, option_type, option_size, value, partner = [], [], [], [], []
    alone: dict[tuple[int, int], float] = {}
    for j in range(1, jobs):
        for t in range(types):
            if rng.random() < 0.8:
                alone[j, t] = float(rng.uniform(0.1, 10.0))
                option_job.append(j)
                option_type.append(t)
                option_size.append(1)
                value.append(alone[j, t])
                partner.append(-1)
    for a, b in itertools.combinations(range(1, jobs), 2):
        for t in range(types):
            if (a, t) in alone and (b, t) in alone and rng.random() < 0.6:
                option_job.append(a)
                option_type.append(t)
                option_size.append(1)
                value.append(max(alone[a, t], alone[b, t]) * float(rng.uniform(0.8, 1.6)))
                partner.append(b)
    option_job.append(1)  # job 1 joins job 0 on its GPU of type 0
    option_type.append(0)
    option_size.append(0)
    value.append(float(rng.uniform(0.1, 5.0)))
    partner.append(0)
    capacity = rng.integers(1, 3, size=types)
    return RoundProblem(jobs, np.array(option_job), np.array(option_type),
                        np.array(option_size), np.array(value), capacity,
                        np.zeros(len(value), dtype=np.bool_), np.full(types, 4),
                        np.zeros(types, dtype=np.int64), option_partner=np.array(partner))


def brute_force(problem: RoundProblem) -> float:
    """The best total value over every subset of options that is feasible."""
    return best_worth(problem, (np.array(pick, dtype=np.bool_) for pick in
                                itertools.product((False, True), repeat=problem.num_options)))


@pytest.mark.parametrize("seed", range(8))
def test_pairs_reach_the_brute_force_optimum(seed: int) -> None:
    problem = paired_round(seed)
    assert problem.num_options <= 18  # (2^18 subsets at most)
    plan = solve_round(problem, Budget.unlimited(deterministic=True))
    assert problem.feasible(plan.chosen)
    assert plan.value == pytest.approx(brute_force(problem), rel=1e-9)
    start = greedy(problem)
    assert problem.feasible(start)
    assert problem.worth(start) <= plan.value + 1e-9
    # No job is in two chosen options, as its own or as a partner.
    assert problem.jobs_chosen(plan.chosen).max() <= 1


def test_a_pair_counts_for_both_jobs_and_is_chosen_when_worth_more() -> None:
    # One GPU; a alone worth 1.0, b alone 0.9, the pair 1.5: the pair wins (1.5 > 1.0)
    # and takes both jobs; at 0.95 a alone wins. Every job's best option is the pair for
    # a and b alone for b: they do not fit together (b twice), so no short cut.
    def problem(pair: float) -> RoundProblem:
        return RoundProblem(2, np.array([0, 1, 0]), np.zeros(3, dtype=np.int64),
                            np.array([1, 1, 1]), np.array([1.0, 0.9, pair]), np.array([1]),
                            np.zeros(3, dtype=np.bool_), np.array([1]), np.array([0]),
                            option_partner=np.array([-1, -1, 1]))
    assert best_each(problem(1.5)) is None
    assert solve_round(problem(1.5), Budget.unlimited()).chosen.tolist() == [False, False, True]
    assert solve_round(problem(0.95), Budget.unlimited()).chosen.tolist() == [True, False, False]
    assert greedy(problem(1.5)).tolist() == [False, False, True]


def test_bad_partners_are_refused() -> None:
    base = {"num_jobs": 2, "option_job": np.array([0, 1]), "option_type": np.array([0, 0]),
            "option_size": np.array([1, 0]), "value": np.array([1.0, 1.0]),
            "capacity": np.array([1]), "packed": np.zeros(2, dtype=np.bool_),
            "server_size": np.array([1]), "servers_over_half": np.array([0])}
    with pytest.raises(ValueError, match="sizes"):  # size 0 only for a pair
        RoundProblem(**base)
    with pytest.raises(ValueError, match="own job"):
        RoundProblem(**base, option_partner=np.array([-1, 1]))
    with pytest.raises(ValueError, match="option_partner has"):
        RoundProblem(**base, option_partner=np.array([-1]))
    RoundProblem(**base, option_partner=np.array([-1, 0]))
