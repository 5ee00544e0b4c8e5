"""Gavel's packed max-min LP (hetsched.formulations.gavel.packed) and ``gavel-packed``:
hand optima, scipy's simplex on random rounds, and a replay through the checker."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

import hetsched
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.settings import ReplaySettings
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.formulations.gavel.packed import (
    PackedProblem,
    fifo_packed,
    solve_packed_max_min,
)
from hetsched.formulations.gavel.problem import AllocationProblem
from hetsched.policies.baselines.gavel_packed import GavelPacked


def two_jobs_one_gpu(factor: float) -> PackedProblem:
    """Two one-GPU jobs at 10 steps/s on one GPU, each at ``factor`` beside the other."""
    alone = AllocationProblem(("a", "b"), ("t",), np.array([[10.0], [10.0]]),
                              np.ones(2), np.array([1.0]), np.ones(2))
    return PackedProblem(alone, np.array([0]), np.array([1]), np.array([[10.0 * factor]]),
                         np.array([[10.0 * factor]]))


@pytest.mark.parametrize(("factor", "floor", "together"), [(0.8, 0.8, 1.0), (0.45, 0.5, 0.0)])
def test_the_pair_is_used_exactly_when_it_raises_the_floor(factor: float, floor: float,
                                                           together: float) -> None:
    # Each job's equal share is the whole GPU's 10 steps/s (E = 10, one GPU). Apart they
    # split the GPU: 5 steps/s each, rho 0.5. Packed at 0.8 both run at 8 all the time:
    # rho 0.8, the optimum, with all the time on the pair. At 0.45 (4.5 each, worse than
    # 5) the pair gets nothing: rho 0.5.
    problem = two_jobs_one_gpu(factor)
    answer = solve_packed_max_min(problem)
    assert answer is not None
    alone, pair = answer
    assert problem.normalised(alone, pair).min() == pytest.approx(floor, abs=1e-6)
    assert pair[0, 0] == pytest.approx(together, abs=1e-6)
    assert problem.is_feasible(alone, pair)


def random_problem(seed: int) -> PackedProblem:
    rng = np.random.default_rng(seed)
    jobs, types = 5, 2
    throughput = rng.uniform(0.5, 10.0, size=(jobs, types))
    throughput[rng.random((jobs, types)) < 0.2] = 0.0
    throughput[:, 0] = np.maximum(throughput[:, 0], 0.5)
    gangs = np.array([1.0, 1.0, 1.0, 1.0, 2.0])
    alone = AllocationProblem(tuple("abcde"), ("t", "u"), throughput, gangs,
                              np.array([2.0, 1.0]), rng.uniform(0.5, 2.0, size=jobs))
    first, second = np.triu_indices(4, 1)
    factor = rng.uniform(0.3, 0.95, size=(len(first), types, 2))
    factor[rng.random((len(first), types)) < 0.3] = 0.0
    return PackedProblem(alone, first.astype(np.int64), second.astype(np.int64),
                         throughput[first] * factor[:, :, 0],
                         throughput[second] * factor[:, :, 1])


def simplex_floor(problem: PackedProblem) -> float:
    """The LP's optimum by scipy's HiGHS simplex, the variables written out one by one."""
    return simplex_stages(problem)[0]


def simplex_stages(problem: PackedProblem) -> tuple[float, float]:
    """The LP's optimum (the floor) and, every job held at it, the greatest sum of
    normalised rates, by scipy's HiGHS simplex, the variables written out one by one."""
    base = problem.alone
    jobs, types = base.throughput.shape
    pairs = len(problem.first)
    columns = jobs * types + pairs * types + 1
    weight = base.scale_factors / (base.weights * base.equal_share_throughput())
    upper: list[float] = []
    bounds: list[tuple[float, float | None]] = []
    a_rows = []
    for j in range(jobs):
        rate, time = np.zeros(columns), np.zeros(columns)
        for k in range(types):
            rate[j * types + k] = -weight[j] * base.throughput[j, k]
            time[j * types + k] = 1.0
        for p in range(pairs):
            for k in range(types):
                col = jobs * types + p * types + k
                if problem.first[p] == j:
                    rate[col] = -weight[j] * problem.first_speed[p, k]
                    time[col] = 1.0
                if problem.second[p] == j:
                    rate[col] = -weight[j] * problem.second_speed[p, k]
                    time[col] = 1.0
        rate[-1] = 1.0
        a_rows += [rate, time]
        upper += [0.0, 1.0]
    for k in range(types):
        row = np.zeros(columns)
        for j in range(jobs):
            row[j * types + k] = base.scale_factors[j]
        for p in range(pairs):
            row[jobs * types + p * types + k] = 1.0
        a_rows.append(row)
        upper.append(base.capacity[k])
    for j in range(jobs):
        for k in range(types):
            bounds.append((0.0, 1.0 if base.throughput[j, k] > 0 else 0.0))
    for p in range(pairs):
        for k in range(types):
            alive = problem.first_speed[p, k] > 0 and problem.second_speed[p, k] > 0
            bounds.append((0.0, 1.0 if alive else 0.0))
    bounds.append((0.0, None))
    cost = np.zeros(columns)
    cost[-1] = -1.0
    found = linprog(cost, A_ub=np.array(a_rows), b_ub=np.array(upper), bounds=bounds,
                    method="highs-ds")
    assert found.status == 0
    floor = float(-found.fun)
    # Second stage: z fixed at the floor; each job's rate is -(its rate row without z).
    rates = np.array(a_rows[0:2 * jobs:2])[:, :-1] * -1.0
    bounds[-1] = (floor * (1 - 1e-9), None)
    total = np.concatenate([-rates.sum(axis=0), [0.0]])
    second = linprog(total, A_ub=np.array(a_rows), b_ub=np.array(upper), bounds=bounds,
                     method="highs-ds")
    assert second.status == 0
    return floor, float(-second.fun)


@pytest.mark.parametrize("seed", range(6))
def test_the_interior_point_reaches_the_simplex_optimum(seed: int) -> None:
    problem = random_problem(seed)
    answer = solve_packed_max_min(problem)
    assert answer is not None
    assert problem.is_feasible(*answer)
    assert problem.normalised(*answer).min() == pytest.approx(simplex_floor(problem),
                                                              rel=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_the_two_stage_answer_keeps_the_floor_and_adds_the_most(seed: int) -> None:
    # gavel-packed(spare="two-stage"): the same floor, then the greatest sum of normalised
    # rates with every job at the floor (scipy's simplex on the written-out LP); the
    # interior optimum's sum is at most that.
    problem = random_problem(seed)
    floor, most = simplex_stages(problem)
    answer = solve_packed_max_min(problem, two_stage=True)
    assert answer is not None
    assert problem.is_feasible(*answer)
    rho = problem.normalised(*answer)
    assert rho.min() == pytest.approx(floor, rel=1e-6)
    assert rho.sum() == pytest.approx(most, rel=1e-6)
    interior = solve_packed_max_min(problem)
    assert interior is not None
    assert problem.normalised(*interior).sum() <= most * (1 + 1e-6)


def test_pairs_must_be_two_different_one_gpu_jobs() -> None:
    problem = random_problem(0)
    with pytest.raises(ValueError, match="one-GPU"):
        PackedProblem(problem.alone, np.array([0]), np.array([4]), np.ones((1, 2)),
                      np.ones((1, 2)))  # job 4 runs on 2 GPUs
    with pytest.raises(ValueError, match="shape"):
        PackedProblem(problem.alone, np.array([0]), np.array([1]), np.ones((1, 3)),
                      np.ones((1, 2)))


def test_gavel_packed_packs_the_pair_worth_more_in_its_rounds() -> None:
    # A (1,000 steps) and B (2,000) arrive at 0 on one GPU, 10 steps/s alone, 0.8 beside
    # each other. The first round solves: all the time to the pair (rho 0.8 against 0.5
    # apart), whose priority 1 / (180 / 540) leads the queue (A, B and the pair each
    # enter with half a round): both start packed at 8 steps/s. A ends at 125 s; B, 1,000
    # steps left, runs on alone at 10 steps/s (no decision before the round ends) and
    # ends at 225 s. What ran passes the checker (replay() runs it).
    cluster = Cluster((GpuType("t"),), (Node("n0", "t", 1),))
    table = ThroughputTable.from_rows([("a", "t", 1, Placement.PACKED, 10.0),
                                       ("b", "t", 1, Placement.PACKED, 10.0)])
    pairs = CoLocationModel({("t", "a", "b"): 0.8, ("t", "b", "a"): 0.8})
    policy = GavelPacked()
    ran = hetsched.replay([Job("A", 0.0, "a", 1, 1000.0), Job("B", 0.0, "b", 1, 2000.0)],
                          cluster, policy, throughput=table, colocation=pairs,
                          settings=ReplaySettings(restart_penalty_s=0.0))
    assert [ran.replay.records[j].finish for j in "AB"] == pytest.approx([125.0, 225.0])
    assert all(s.packed for r in ran.replay.records.values() for s in r.segments)
    assert policy.figures()["gavel_packed_pairs_started"] == 1


def test_fifo_packed_places_in_order_then_packs_above_the_threshold() -> None:
    # Two types (t: 2 GPUs, u: 1 GPU), four one-GPU jobs in arrival order. a (t 10, u 4)
    # and b (t 10, u 4) take t; c (t 10, u 6): t is full, u is open: c takes u. d: no
    # room anywhere (ends the FIFO pass), then packs: beside a on t its pair adds up to
    # 0.9 + 0.9 = 1.8, beside b 0.8 + 0.8 = 1.6, beside c on u 0.7 + 0.7 = 1.4 (below
    # 1.5): the pair with a, on t. With a threshold of 1.9 nothing packs.
    throughput = np.array([[10.0, 4.0], [10.0, 4.0], [10.0, 6.0], [10.0, 5.0]])
    alone = AllocationProblem(tuple("abcd"), ("t", "u"), throughput, np.ones(4),
                              np.array([2.0, 1.0]), np.ones(4))
    first, second = np.array([0, 1, 2]), np.array([3, 3, 3])
    factor = np.array([[0.9, 0.9], [0.8, 0.8], [0.7, 0.7]])  # (t and u alike)
    problem = PackedProblem(alone, first, second,
                            throughput[first] * factor[:, [0]],
                            throughput[second] * factor[:, [1]])
    placed, pairs = fifo_packed(problem)
    assert placed.tolist() == [[0, 0], [1, 0], [0, 1], [0, 0]]
    assert pairs.tolist() == [[1, 0], [0, 0], [0, 0]]
    assert problem.is_feasible(placed, pairs)
    placed, pairs = fifo_packed(problem, threshold=1.9)
    assert placed.tolist() == [[1, 0], [1, 0], [0, 1], [0, 0]]
    assert not pairs.any()


def test_two_stage_is_max_mins_only() -> None:
    from hetsched.core.errors import InputError
    from hetsched.policies.baselines.gavel_params import PackedParams

    assert GavelPacked(PackedParams(spare="two-stage")).params.spare == "two-stage"
    with pytest.raises(InputError, match="spare"):
        PackedParams(objective="fifo", spare="two-stage")
    with pytest.raises(InputError, match="spare"):
        PackedParams(spare="vertex")
