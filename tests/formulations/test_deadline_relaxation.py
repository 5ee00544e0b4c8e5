"""The LP relaxation inside the ``deadline`` model: a bound on the completion term that
holds for every plan (brute force), reported at 200 jobs where the solver gives none, a
start from the LP's order, and off in replays."""

from __future__ import annotations

import pytest

from hetsched.core.result import Status
from hetsched.files.instance import load_instance
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import TICK_S
from hetsched.formulations.deadline import build_problem
from hetsched.formulations.deadline import relaxation as relaxation_module
from hetsched.formulations.deadline.bruteforce import solve_by_enumeration
from hetsched.formulations.deadline.relaxation import relax, relaxation_settings
from hetsched.policies.deadline.search import decode, greedy_plan
from hetsched.solving import SolveOptions, solve
from tests.helpers import INSTANCES, assert_valid, random_instance


def isolated_term(problem: object) -> float:
    """sum_j w'_j (release_j + shortest mode) - sum_j w_j a_j: the isolated bound."""
    from hetsched.formulations.deadline.problem import DeadlineProblem

    assert isinstance(problem, DeadlineProblem)
    return sum(d.weight / problem.weight_scale * (max(d.job.arrival, problem.instance.now)
                                                  + d.job.work / max(m.throughput
                                                                     for m in d.modes))
               for d in problem.jobs) - problem.weighted_arrivals()


@pytest.mark.parametrize("seed", range(8))
def test_bound_holds_for_every_plan(seed: int) -> None:
    # Brute force over every order and mode: the least completion term of any plan (the
    # instance without deadlines, so the completion term alone decides), and the
    # lexicographic optimum with them. The LP bound is at most both, and at least the
    # isolated bound (it never reports less).
    weights = seed % 2 == 1
    free = random_instance(seed, jobs=4 if seed % 3 else 5, deadlines=False, weights=weights)
    problem = build_problem(free)
    (_, weighted_end), _ = solve_by_enumeration(problem)
    least = problem.completion_seconds(weighted_end)
    relaxed = relax(problem, Budget.unlimited())
    assert relaxed.status == "optimal"
    assert isolated_term(problem) - 1e-6 <= relaxed.bound_s <= least + 1e-6
    with_deadlines = random_instance(seed, jobs=4 if seed % 3 else 5, weights=weights)
    problem = build_problem(with_deadlines)
    (_, weighted_end), _ = solve_by_enumeration(problem)
    assert relax(problem, Budget.unlimited()).bound_s <= \
        problem.completion_seconds(weighted_end) + 1e-6


def test_the_bound_is_tighter_than_isolated_when_jobs_compete() -> None:
    # congested.json: 20 jobs within 15 minutes on a small cluster; they queue, so the
    # LP's capacity rows lift the bound above the isolated one.
    problem = build_problem(load_instance(INSTANCES / "congested.json"))
    relaxed = relax(problem, Budget.unlimited())
    assert relaxed.bound_s > 1.05 * isolated_term(problem)


@pytest.mark.slow
def test_medium_bound_and_lp_order_start() -> None:
    # medium.json: 200 jobs on 96 GPUs, where neither CP-SAT nor the MILP gives a bound in
    # a minute. The LP (no clock: deterministic) bounds the completion term at about
    # 698,817 s; the isolated bound is 538,941 s. Decoding the LP's order beats the
    # greedy start plan lexicographically (measured: 6 deadlines missed against 22) and
    # is, as every plan, above the bound.
    problem = build_problem(load_instance(INSTANCES / "medium.json"))
    relaxed = relax(problem, Budget.unlimited())
    assert relaxed.status == "optimal"
    assert relaxed.bound_s == pytest.approx(698_816.5, rel=1e-3)
    assert isolated_term(problem) == pytest.approx(538_940.8, rel=1e-6)
    order = list(relaxed.order)
    assert sorted(order) == list(range(len(problem.jobs)))
    ordered = decode(problem, order, dict.fromkeys(order))
    assert not problem.violations(ordered)
    assert problem.evaluate(ordered) < problem.evaluate(greedy_plan(problem))
    assert problem.completion_seconds(problem.evaluate(ordered)[1]) > relaxed.bound_s


@pytest.mark.slow
def test_solve_reports_the_relaxations_bound_and_never_claims_more() -> None:
    # congested.json with a deterministic budget: the time-indexed relaxation of the
    # model's own plans converges; its bound (for plans missing no more deadlines than the
    # returned one) is part of the result's, which is at most the objective. It is above
    # the preemptive LP's, which is then not run; without lp_bound neither runs.
    instance = load_instance(INSTANCES / "congested.json")
    result = solve(instance, "deadline", SolveOptions(time_limit_s=20.0, deterministic=True))
    assert_valid(instance, result.schedule)
    timed = result.extra["time_indexed"]
    assert timed["status"] == "optimal"
    assert timed["late_cap"] >= result.extra["deadline_term"]
    assert result.bound is not None
    assert timed["bound"] <= result.bound <= result.objective + TICK_S
    assert "lp_relaxation" not in result.extra
    preemptive = relax(build_problem(instance), Budget.unlimited())
    assert preemptive.status == "optimal"
    assert preemptive.bound_s < timed["bound"]
    assert result.gap is not None
    assert result.gap == pytest.approx((result.objective - result.bound) / result.objective)
    without = solve(instance, "deadline",
                    SolveOptions(time_limit_s=20.0, deterministic=True, lp_bound=False))
    assert "lp_relaxation" not in without.extra
    assert "time_indexed" not in without.extra


@pytest.mark.slow
def test_the_preemptive_lp_runs_when_the_time_indexed_one_does_not_converge(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # One round of column generation leaves the time-indexed relaxation unconverged (its
    # Lagrangian bound may be weak): the preemptive LP runs after it, and the result's
    # bound is at least both.
    from hetsched.formulations.deadline.timeindexed import TimeIndexedRelaxation

    original = TimeIndexedRelaxation.run
    monkeypatch.setattr(TimeIndexedRelaxation, "run",
                        lambda self, budget, max_rounds=1: original(self, budget, 1))
    instance = load_instance(INSTANCES / "congested.json")
    result = solve(instance, "deadline", SolveOptions(time_limit_s=20.0, deterministic=True))
    assert_valid(instance, result.schedule)
    assert result.extra["time_indexed"]["status"] == "round limit"
    lp = result.extra["lp_relaxation"]
    assert lp["status"] == "optimal"
    assert result.bound is not None
    assert lp["bound"] <= result.bound <= result.objective + TICK_S
    assert result.extra["time_indexed"]["bound"] <= result.bound


def test_tiny_stays_optimal_with_the_relaxation() -> None:
    # tiny.json's optimum 9,284.29 s (tests/formulations/test_deadline.py) is proven; the
    # relaxation's bound is below it and does not change the answer.
    instance = load_instance(INSTANCES / "tiny.json")
    result = solve(instance, "deadline", SolveOptions(time_limit_s=20.0, deterministic=True))
    assert result.status is Status.OPTIMAL
    assert result.objective == pytest.approx(9284.29, abs=1e-3)
    assert result.extra["time_indexed"]["bound"] <= result.objective + 1e-6


def test_deterministic_budgets_limit_iterations() -> None:
    settings = relaxation_settings(Budget.work(0.5))
    assert settings.iteration_limit == 1000
    assert settings.ipm_iteration_limit == 10
    assert settings.time_limit_s is None
    wall = relaxation_settings(Budget.wall(4.0))
    assert wall.time_limit_s is not None
    assert 0 < wall.time_limit_s <= 4.0
    assert relaxation_settings(Budget.unlimited()).time_limit_s is None


def test_a_replay_does_not_run_the_relaxation(monkeypatch: pytest.MonkeyPatch) -> None:
    # A replay's decisions report no bound: the deadline policy's re-solves skip the LP.
    from hetsched.registry import rolling
    from hetsched.simulate.simulator import Simulator

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the LP relaxation ran in a replay")

    monkeypatch.setattr(relaxation_module, "completion_bound", fail)
    instance = random_instance(3, jobs=5)
    policy = rolling("deadline", time_limit_s=1.0, deterministic=True)
    replay = Simulator(instance.cluster, instance.jobs, policy, truth=instance.throughput).run()
    assert replay.summary()["completed"] == 5


@pytest.mark.parametrize("seed", range(4))
def test_solve_refines_the_time_indexed_grid_while_its_budget_lasts(seed: int) -> None:
    # Deterministic budgets: with 0.2 work units the time-indexed relaxation keeps its 400
    # even slots; with 5 units its part of the budget covers finer, adaptive grids (seeds
    # 0-3: 659, 501, 666 and 571 slots; seed 0: bound 1,208.46 s on 400 slots, 1,212.24 s
    # on 659; the optimum, by brute force, 1,264.13 s). A finer grid is kept only when its
    # bound is higher, and every grid's bound holds for the same plans: never above the
    # brute-force optimum.
    instance = random_instance(seed, jobs=5)
    problem = build_problem(instance)
    (_, weighted_end), _ = solve_by_enumeration(problem)
    optimum = problem.completion_seconds(weighted_end)
    coarse = solve(instance, "deadline", SolveOptions(time_limit_s=0.2, deterministic=True))
    fine = solve(instance, "deadline", SolveOptions(time_limit_s=5.0, deterministic=True))
    assert coarse.extra["time_indexed"]["slots"] == 400
    assert fine.extra["time_indexed"]["slots"] == [659, 501, 666, 571][seed]
    assert coarse.extra["time_indexed"]["bound"] < fine.extra["time_indexed"]["bound"] \
        <= optimum + 1e-6
    for result in (coarse, fine):
        assert_valid(instance, result.schedule)
        assert result.bound is not None
        assert result.bound <= optimum + 1e-6
