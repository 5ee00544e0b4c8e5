"""One budget per solve: the Budget object, never worse than the start plan, deterministic
solves, and CP-SAT solves that leave Ctrl-C working."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from hetsched.core.result import Status
from hetsched.formulations.budget import Budget, BudgetExhaustedError
from hetsched.formulations.common import SolverResult
from hetsched.formulations.deadline import build_problem
from hetsched.formulations.deadline.cpsat import CpSatSettings, DeadlineCpSat
from hetsched.formulations.deadline.problem import StagePlans
from hetsched.policies.deadline.planner import _search_the_rest
from hetsched.policies.deadline.search import greedy_plan, improve_plan
from hetsched.solving import SolveOptions, solve
from tests.helpers import ROOT, assert_valid, gangs_instance


class FakeClock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_wall_budget_counts_down_and_parts_never_outlast_it() -> None:
    clock = FakeClock()
    budget = Budget(10.0, clock=clock)
    assert budget.remaining() == 10.0
    # reserve: 3% of the limit, at most 0.25 s -> 0.25 s here
    assert budget.for_solver() == pytest.approx(9.75)
    part = budget.part(0.5, cap=2.0)  # min(2, 0.5 x 9.75)
    assert part.limit == pytest.approx(2.0)
    clock.now += 4.0
    assert budget.remaining() == pytest.approx(6.0)
    assert part.remaining() == 0.0
    assert part.expired()
    clock.now += 7.0
    assert budget.expired()
    with pytest.raises(BudgetExhaustedError, match="building"):
        budget.check("building the model")


def test_deterministic_budget_counts_charged_work_only() -> None:
    clock = FakeClock()
    budget = Budget.work(5.0)
    budget._clock = clock  # wall time must not matter
    clock.now += 1000.0
    assert budget.remaining() == 5.0
    assert budget.reserve() == 0.0
    part = budget.part(0.5)
    part.charge(2.0)  # charged to the part and to its parent
    assert part.remaining() == pytest.approx(0.5)
    assert budget.remaining() == pytest.approx(3.0)
    budget.charge(3.0)
    assert budget.expired()


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_budget_must_be_positive_and_finite(bad: float) -> None:
    with pytest.raises(ValueError, match="finite number > 0"):
        Budget(bad)


@pytest.mark.slow
def test_cpsat_hinted_with_a_plan_that_breaks_its_symmetry_breaking_ends_worse() -> None:
    # Why CP-SAT once returned a plan worse than the start plan it was hinted with,
    # deterministically. The four nodes are two pairs of identical nodes, and the model
    # only lets job j use the second node of a pair once an earlier job used the first.
    # The local search's plan (the start of every solve) uses them in another order, so as
    # a hint it is infeasible: CP-SAT cannot take it and, stopped after 10 work units (1 s
    # of CP-SAT deterministic time), holds a plan worse than the hint. Relabelled
    # (DeadlineCpSat.canonical: the same plan with the nodes of each pair swapped as
    # needed), the hint is feasible and is never lost.
    problem = build_problem(gangs_instance())
    start = improve_plan(problem, greedy_plan(problem), Budget.work(0.1))
    raw = DeadlineCpSat(problem, Budget.work(10.0))
    assert raw.symmetric_groups == [["f0", "f1"], ["s0", "s1"]]
    assert raw.canonical(start) != start  # the plan breaks the symmetry breaking
    assert problem.evaluate(raw.canonical(start)) == problem.evaluate(start)
    raw.canonical = lambda plan: dict(plan)  # type: ignore[method-assign]
    before = raw.solve(CpSatSettings(), start)
    assert before.completion_plan is not None
    assert problem.evaluate(before.completion_plan) > problem.evaluate(start)
    fixed = DeadlineCpSat(problem, Budget.work(10.0)).solve(CpSatSettings(), start)
    assert fixed.completion_plan is not None
    assert problem.evaluate(fixed.completion_plan) <= problem.evaluate(start)


@pytest.mark.slow
@pytest.mark.parametrize("limit", [0.05, 0.5, 1.5])
def test_a_solve_is_never_worse_than_its_start_plan(limit: float) -> None:
    # Whatever the budget, the result is at most the greedy plan's objective (the local
    # search only improves it), and extra says which plan won.
    instance = gangs_instance()
    problem = build_problem(instance)
    greedy = problem.completion_seconds(problem.evaluate(greedy_plan(problem))[1])
    result = solve(instance, "deadline",
                   SolveOptions(backend="cpsat", time_limit_s=limit, deterministic=True))
    assert_valid(instance, result.schedule)
    assert result.objective <= greedy + 1e-6
    assert result.extra["plan_source"] in ("start plan", "local search", "windows",
                                           "first stage", "solver")
    assert result.status in (Status.TIME_LIMIT, Status.FEASIBLE, Status.OPTIMAL)


def no_plan() -> StagePlans:
    """What the stages give when the first finds no plan (the second is skipped)."""
    stats = SolverResult(Status.TIME_LIMIT, hit_limit=True)
    return StagePlans(stats, deadline=stats)


@pytest.mark.slow
def test_what_the_stages_leave_goes_to_the_local_search() -> None:
    # 30 gangs: the greedy plan's weighted end is 659,870,196 model units; the local search
    # reaches 452,604,283 with 1 work unit and 443,631,909 unlimited (its local optimum,
    # after 2.65 units).
    # A deterministic budget of 1 unit left after stages that found nothing is all spent
    # on it, from the start plan, and the result is the search's with that unit.
    problem = build_problem(gangs_instance())
    start = greedy_plan(problem)
    budget = Budget.work(1.0)
    extra: dict[str, object] = {}
    outcome = _search_the_rest(problem, start, no_plan(), budget, extra)
    assert outcome is not None
    source, searched = outcome
    assert source == "local search"
    assert problem.violations(searched) == []
    assert problem.evaluate(searched) == (0, 452_604_283)
    assert problem.evaluate(searched) == problem.evaluate(
        improve_plan(problem, start, Budget.work(1.0)))
    assert budget.expired()
    assert "leftover_search_s" in extra


@pytest.mark.slow
def test_the_leftover_search_starts_from_the_best_plan_found() -> None:
    # The first stage's plan (here: the local optimum) beats the start: the search starts
    # from it, so it can only return it (nothing improves a local optimum).
    problem = build_problem(gangs_instance())
    start = greedy_plan(problem)
    optimum = improve_plan(problem, start, Budget.work(None))
    plans = no_plan()
    plans.deadline_plan = optimum
    outcome = _search_the_rest(problem, start, plans, Budget.work(1.0), {})
    assert outcome is not None
    searched = outcome[1]
    assert problem.evaluate(searched) == problem.evaluate(optimum) == (0, 443_631_909)


def test_no_leftover_search_after_a_proof_or_without_budget() -> None:
    problem = build_problem(gangs_instance())
    start = greedy_plan(problem)
    proven = StagePlans(SolverResult(Status.OPTIMAL, 1.0, 1.0), completion_plan=dict(start))
    assert _search_the_rest(problem, start, proven, Budget.work(1.0), {}) is None
    spent = Budget.work(1.0)
    spent.charge(1.0)
    assert _search_the_rest(problem, start, no_plan(), spent, {}) is None


@pytest.mark.slow
def test_deterministic_solves_repeat_exactly() -> None:
    instance = gangs_instance(20, seed=3)
    first = solve(instance, "deadline",
                  SolveOptions(backend="cpsat", time_limit_s=1.0, deterministic=True))
    second = solve(instance, "deadline",
                   SolveOptions(backend="cpsat", time_limit_s=1.0, deterministic=True))
    assert first.schedule == second.schedule
    assert first.objective == second.objective
    assert first.extra["budget"]["kind"] == "deterministic"


class TickingClock:
    """A clock that moves ``step`` seconds each time it is read: a machine so slow that
    every phase of a solve takes that long."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_a_model_that_cannot_be_built_in_time_gives_the_start_plan(backend: str) -> None:
    # A 4 s wall budget on a clock that moves 1 s per reading: it runs out while the
    # solver's model is built (the budget is read between constraint families), and the
    # start plan comes back as TIME_LIMIT, with a message saying so.
    instance = gangs_instance(40, seed=1)
    budget = Budget(4.0, clock=TickingClock(1.0))
    result = solve(instance, "deadline", SolveOptions(backend=backend, budget=budget))
    assert_valid(instance, result.schedule)
    assert len(result.schedule) == 40
    assert result.status is Status.TIME_LIMIT
    assert result.extra["plan_source"] == "start plan"
    assert "4 s wall" in result.message
    assert "start plan is returned" in result.message


SIGINT_AFTER_SOLVE = textwrap.dedent("""
    import os, signal, sys
    from ortools.sat.python import cp_model
    from hetsched.formulations.budget import Budget
    from hetsched.formulations.cpsat_run import run_cpsat
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    model.maximize(x)
    run_cpsat(model, Budget.wall(0.1))
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0.2) if hasattr(signal, "sigtimedwait") else None
    except KeyboardInterrupt:
        print("handled")
        sys.exit(0)
    print("not interrupted")
""")

SIGINT_DURING_SOLVE = textwrap.dedent("""
    import sys, time
    from ortools.sat.python import cp_model
    from hetsched.formulations.budget import Budget
    from hetsched.formulations.cpsat_run import run_cpsat
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, 200, f"x{i}") for i in range(120)]
    model.add_all_different(xs)
    for i in range(119):
        model.add(xs[i] + xs[i + 1] <= 200 + i % 11)
    model.maximize(sum((i % 17) * x for i, x in enumerate(xs)))
    began = time.monotonic()
    try:
        print("solving", flush=True)
        run_cpsat(model, Budget.wall(60.0))
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - began:.1f} s")
        sys.exit(0)
    print("finished")
""")


@pytest.mark.slow
def test_ctrl_c_after_a_cpsat_solve_reaches_python() -> None:
    # OR-Tools used to leave SIGINT at its default action after a solve: the process died
    # before Python's handler ran (and before an interrupted replay wrote anything).
    done = subprocess.run([sys.executable, "-c", SIGINT_AFTER_SOLVE], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "handled"


@pytest.mark.slow
def test_ctrl_c_during_a_cpsat_solve_stops_it_and_raises() -> None:
    process = subprocess.Popen([sys.executable, "-c", SIGINT_DURING_SOLVE], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "solving"
    os.kill(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.startswith("interrupted after"), out
    assert float(out.split()[2]) < 60.0  # stopped, not run to its 60 s limit
