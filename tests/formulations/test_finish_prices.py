"""Finish-time fairness through capacity prices (hetsched.formulations.gavel.finish_prices):
on random instances of a few hundred jobs, the same worst ratio as the LP iteration (or a
better one, where that stops early), no allocation doing better (a feasibility LP over
scipy), and feasible allocations."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sparse
from scipy.optimize import linprog

from hetsched.formulations.gavel import finish_prices
from hetsched.formulations.gavel.finish_prices import spare_by_value
from hetsched.formulations.gavel.finish_time import (
    RELATIVE_GAP,
    FinishTimeProblem,
    FinishTimeSolver,
    isolated_allocation,
    isolated_speeds,
)
from hetsched.formulations.gavel.problem import AllocationProblem


def random_case(seed: int, jobs: int = 200, types: int = 3) -> FinishTimeProblem:
    """Random throughputs (some types unusable), gangs of 1 to 8 and 4 to 32 GPUs a type;
    isolated times from the isolated speeds. Seeds 0 mod 3 have no job waiting (the GPUs
    bind: the optimum is above every job's best alone), others jobs that waited (often one
    job's best alone is the optimum)."""
    draw = np.random.default_rng(seed)
    throughput = draw.uniform(0.5, 20.0, (jobs, types)) * (draw.random((jobs, types)) < 0.85)
    throughput[np.arange(jobs), draw.integers(0, types, jobs)] += draw.uniform(1.0, 5.0, jobs)
    gangs = draw.choice([1.0, 2.0, 4.0, 8.0], jobs, p=[0.7, 0.1, 0.1, 0.1])
    capacity = draw.choice([4.0, 8.0, 16.0, 32.0], types)
    base = AllocationProblem(tuple(f"j{i}" for i in range(jobs)),
                             tuple(f"t{k}" for k in range(types)), throughput, gangs,
                             capacity, np.ones(jobs))
    steps = draw.uniform(100.0, 1e5, jobs)
    done = draw.uniform(0.0, 1e4, jobs) * draw.random(jobs) * (draw.random(jobs) < 0.5)
    isolated = steps / isolated_speeds(base) + done
    waited = done * draw.uniform(0.5, 3.0, jobs) \
        + draw.uniform(0.0, 1000.0, jobs) * (draw.random(jobs) < draw.random())
    since = waited * (0.0 if seed % 3 == 0 else 0.3 if seed % 3 == 1 else 1.0)
    return FinishTimeProblem(base, since, steps, isolated)


def reachable(case: FinishTimeProblem, target: float) -> bool:
    """Whether an allocation finishes every job within ``target`` (a sparse LP)."""
    base = case.allocation
    jobs, types = base.throughput.shape
    room = target * case.isolated_s - case.since_s
    if np.any(room <= 0):
        return False
    need = case.steps_left / room
    rows, cols = np.repeat(np.arange(jobs), types), np.arange(jobs * types)
    matrix = sparse.vstack([
        sparse.csr_matrix((-base.throughput.ravel(), (rows, cols)), (jobs, jobs * types)),
        sparse.csr_matrix((np.ones(jobs * types), (rows, cols)), (jobs, jobs * types)),
        sparse.csr_matrix((np.repeat(base.scale_factors, types), (np.tile(np.arange(types),
                                                                          jobs), cols)),
                          (types, jobs * types))]).tocsr()
    bounds = np.column_stack([np.zeros(jobs * types),
                              (base.throughput.ravel() > 0).astype(float)])
    found = linprog(np.zeros(jobs * types), A_ub=matrix,
                    b_ub=np.concatenate([-need, np.ones(jobs), base.capacity]),
                    bounds=bounds, method="highs")
    return bool(found.status == 0)


@pytest.mark.parametrize("seed", range(6))
def test_prices_reach_the_lp_iterations_optimum(seed: int) -> None:
    case = random_case(seed)
    prices = FinishTimeSolver().solve(case)
    lp_solver = FinishTimeSolver("lp")
    lp = lp_solver.solve(case)
    assert prices.optimal
    assert case.allocation.is_feasible(prices.fractions, 1e-9)
    assert prices.value == pytest.approx(case.worst(prices.fractions), rel=1e-12)
    # never worse than the LP iteration; as good unless that ran out of solves (it
    # converges slowly on some of these: then the prices' optimum is lower)
    assert prices.value <= lp.value * (1 + RELATIVE_GAP)
    if lp_solver.last_solves < 10:
        assert prices.value == pytest.approx(lp.value, rel=RELATIVE_GAP)
    # and nothing does better by more than the gap
    assert not reachable(case, prices.value * (1 - RELATIVE_GAP))


def test_spare_gpus_keep_the_needs_and_fit() -> None:
    case = random_case(0, jobs=50)
    base = case.allocation
    needs = isolated_allocation(base) * 0.5
    filled = spare_by_value(needs, case.steps_left / case.isolated_s, base.throughput,
                            base.scale_factors, base.capacity)
    assert np.all(filled >= needs)
    assert base.is_feasible(filled, 1e-12)
    # every GPU is given out (each type has jobs with time left)
    assert base.scale_factors @ filled == pytest.approx(base.capacity)


def test_the_lp_iteration_takes_over_what_the_prices_do_not_settle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    case = random_case(3, jobs=40)
    monkeypatch.setattr(finish_prices, "MAX_ROUNDS", 0)
    solver = FinishTimeSolver()
    answer = solver.solve(case)
    assert solver.last_tests == 0
    assert solver.last_solves >= 1
    assert answer.optimal
    assert case.allocation.is_feasible(answer.fractions, 1e-7)
