"""Property tests: random small instances are solved, checker-clean, and MILP = CP-SAT."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched.core.result import Status
from hetsched.solving import SolveOptions, solve
from tests.helpers import assert_valid, random_instance


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 5), weights=st.booleans(),
       objective=st.sampled_from(["missed", "tardiness"]))
def test_deadline_milp_equals_cpsat(seed: int, jobs: int, weights: bool, objective: str) -> None:
    instance = random_instance(seed, jobs=jobs, weights=weights)
    results = {
        backend: solve(instance, "deadline",
                       SolveOptions(backend=backend, time_limit_s=60.0, deterministic=True),
                       objective=objective)
        for backend in ("cpsat", "highs")
    }
    for result in results.values():
        assert result.status is Status.OPTIMAL
        assert_valid(instance, result.schedule)
    cpsat, highs = results["cpsat"], results["highs"]
    assert highs.extra["deadline_term"] == pytest.approx(cpsat.extra["deadline_term"],
                                                         abs=1e-6)
    assert highs.objective == pytest.approx(cpsat.objective, rel=1e-9, abs=1e-6)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 12), alpha=st.sampled_from([1.0, 0.5]))
def test_allox_matching_equals_milp(seed: int, jobs: int, alpha: float) -> None:
    instance = random_instance(seed, jobs=jobs, gangs=False, elastic=False)
    matching = solve(instance, "allox", SolveOptions(backend="matching"), alpha=alpha)
    milp = solve(instance, "allox", SolveOptions(backend="highs"), alpha=alpha)
    for result in (matching, milp):
        assert result.is_feasible()
        assert_valid(instance, result.schedule)
    if alpha == 1.0:
        # One round: both solve the same matching exactly. (With rounds, ties in one round
        # may be broken differently and change the machines' free times for the next.)
        assert milp.extra["model_objective"] == pytest.approx(
            matching.extra["model_objective"], rel=1e-9)
    else:
        assert milp.extra["rounds"] == matching.extra["rounds"]
