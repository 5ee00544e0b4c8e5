"""CP-SAT on windows of a ``deadline`` plan: a window of every job finds the brute-force
optimum, a window never worsens the plan nor its deadline term, the window search is
deterministic, and ``solve`` uses it when the whole model is too large."""

from __future__ import annotations

import random

import pytest

from hetsched.files.instance import load_instance
from hetsched.formulations.budget import Budget
from hetsched.formulations.deadline import build_problem
from hetsched.formulations.deadline.bruteforce import solve_by_enumeration
from hetsched.formulations.deadline.problem import DeadlineProblem, Plan
from hetsched.formulations.deadline.window import solve_window
from hetsched.policies.deadline import planner as deadline_policy
from hetsched.policies.deadline.search import greedy_plan, improve_plan
from hetsched.policies.deadline.windows import (
    improve_by_windows,
    merge_windows,
    node_groups,
    windows,
)
from hetsched.solving import SolveOptions, solve
from tests.helpers import INSTANCES, assert_valid, gangs_instance, random_instance


def serial_plan(problem: DeadlineProblem) -> Plan:
    """Every job in its slowest mode, one after another from the last release: a plan whose
    span holds every left-shifted plan (each ends by the last release plus the sum of the
    slowest durations), so a window of all its jobs may reach the optimum."""
    plan: Plan = {}
    clock = max(data.release for data in problem.jobs)
    for data in problem.jobs:
        index = max(range(len(data.modes)), key=lambda i: data.modes[i].duration)
        plan[data.job.id] = (index, clock)
        clock += data.modes[index].duration
    return plan


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_a_window_of_every_job_is_the_brute_force_optimum(seed: int) -> None:
    # Without deadlines the completion term alone decides: CP-SAT on a window of all the
    # jobs, from a plan that spans every left-shifted plan, proves the least completion
    # term of any plan, which enumeration over every order and mode finds too.
    instance = random_instance(seed, jobs=4 if seed % 3 else 5, deadlines=False,
                               weights=seed % 2 == 1)
    problem = build_problem(instance)
    plan = serial_plan(problem)
    assert problem.violations(plan) == []
    outcome = solve_window(problem, plan, range(len(problem.jobs)), Budget.unlimited())
    assert outcome.optimal
    optimum, _ = solve_by_enumeration(problem)
    assert problem.evaluate(outcome.plan) == optimum
    assert problem.violations(outcome.plan) == []
    assert_valid(instance, problem.realise(outcome.plan))


@pytest.mark.parametrize("objective", ["missed", "tardiness"])
@pytest.mark.parametrize("seed", range(6))
def test_a_window_keeps_the_deadline_term_and_never_worsens_the_plan(seed: int,
                                                                     objective: str) -> None:
    # With deadlines, the window may not miss more of them than the plan: its result is at
    # most the plan lexicographically, and its completion term at least the brute-force
    # least completion term among plans missing no more deadlines (the lexicographic
    # optimum's when the plan misses as few as it); the same with weighted tardiness.
    instance = random_instance(seed, jobs=5)
    problem = build_problem(instance, objective)
    plan = greedy_plan(problem)
    for free in ([0, 1, 2], [2, 3, 4], range(5)):
        outcome = solve_window(problem, plan, free, Budget.unlimited())
        assert outcome.optimal
        assert problem.violations(outcome.plan) == []
        assert problem.evaluate(outcome.plan) <= problem.evaluate(plan)
        assert problem.evaluate(outcome.plan)[0] <= problem.evaluate(plan)[0]
        moved = [jid for jid in plan if plan[jid] != outcome.plan[jid]]
        assert {problem.jobs[j].job.id for j in free} >= set(moved)
    optimum, _ = solve_by_enumeration(problem)
    whole = solve_window(problem, plan, range(5), Budget.unlimited()).plan
    if problem.evaluate(plan)[0] == optimum[0]:
        assert problem.evaluate(whole)[1] >= optimum[1]


def test_windows_cover_every_place_and_overlap_by_half() -> None:
    assert windows(5, 8) == [(0, 5)]
    assert windows(8, 8) == [(0, 8)]
    assert windows(20, 8) == [(0, 8), (4, 12), (8, 16), (12, 20)]
    assert windows(21, 8) == [(0, 8), (4, 12), (8, 16), (12, 20), (13, 21)]


def test_node_groups_cover_every_node_once_within_a_type_when_asked() -> None:
    # 5 V100 nodes and 3 K80 nodes in groups of 2: mixed, 4 groups of 2 (any types);
    # within types, 3 V100 groups (2, 2, 1) and 2 K80 groups (2, 1), in a shuffled order.
    nodes = [f"v{i}" for i in range(5)] + [f"k{i}" for i in range(3)]
    gpu_type = {node: "v100" if node[0] == "v" else "k80" for node in nodes}
    mixed = node_groups(nodes, random.Random(1), 2)
    assert sorted(len(group) for group in mixed) == [2, 2, 2, 2]
    assert sorted(node for group in mixed for node in group) == sorted(nodes)
    typed = node_groups(nodes, random.Random(1), 2, gpu_type)
    assert sorted(len(group) for group in typed) == [1, 1, 2, 2, 2]
    assert sorted(node for group in typed for node in group) == sorted(nodes)
    assert all(len({gpu_type[node] for node in group}) == 1 for group in typed)
    orders = {tuple(map(tuple, node_groups(nodes, random.Random(seed), 2, gpu_type)))
              for seed in range(20)}
    assert len(orders) > 1
    assert any(gpu_type[order[0][0]] == "k80" for order in orders)


@pytest.mark.slow
def test_the_window_search_takes_the_local_search_further_and_repeats_exactly() -> None:
    # medium.json (200 jobs, 96 GPUs): the greedy plan after 1 unit of local search misses
    # 7 deadlines, weighted end 1,528,178,610 model units; 1 unit of windows (the jobs of
    # two nodes at a time) moves it to 4 missed, 1,519,281,806 (each window first meets
    # deadlines, then ends its jobs earlier). The same deterministic budget and seed give
    # the same plan twice.
    problem = build_problem(load_instance(INSTANCES / "medium.json"))
    local = improve_plan(problem, greedy_plan(problem), Budget.work(1.0))
    first = improve_by_windows(problem, local, Budget.work(1.0))
    second = improve_by_windows(problem, local, Budget.work(1.0))
    assert first == second
    assert problem.violations(first) == []
    assert problem.evaluate(first) < problem.evaluate(local)
    assert problem.evaluate(first)[0] < problem.evaluate(local)[0]


@pytest.mark.slow
def test_windows_never_worsen_a_plan() -> None:
    # 30 gangs of 4 GPUs: windows improve the greedy plan (659,870,196 model units) and
    # leave the local search's optimum (443,631,909) no worse.
    problem = build_problem(gangs_instance())
    greedy = greedy_plan(problem)
    better = improve_by_windows(problem, greedy, Budget.work(1.0))
    assert problem.violations(better) == []
    assert problem.evaluate(better) < problem.evaluate(greedy)
    local = improve_plan(problem, greedy, Budget.work(None))
    assert problem.evaluate(improve_by_windows(problem, local, Budget.work(1.0))) <= \
        problem.evaluate(local)


@pytest.mark.slow
def test_solve_uses_windows_when_the_whole_model_is_too_large(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # With the whole model's limit at 0 job-modes every CP-SAT solve goes to windows: the
    # result says so, passes the checker, is never worse than the start and repeats.
    monkeypatch.setattr(deadline_policy, "WHOLE_MODEL_MAX_MODES", 0)
    instance = gangs_instance(20, seed=3)
    options = SolveOptions(backend="cpsat", time_limit_s=2.0, deterministic=True)
    results = [solve(instance, "deadline", options) for _ in range(2)]
    first = results[0]
    assert "windows" in first.extra["whole_model"]
    assert first.extra["plan_source"] in ("windows", "local search", "start plan")
    assert "stages" not in first.extra
    assert_valid(instance, first.schedule)
    assert first.schedule == results[1].schedule
    problem = build_problem(instance)
    assert first.objective <= problem.completion_seconds(
        problem.evaluate(greedy_plan(problem))[1]) + 1e-6
    assert first.bound is not None
    assert first.bound <= first.objective + 1e-6


def test_windows_searched_at_once_merge_only_when_the_plan_stays_valid() -> None:
    # 30 gangs of 4 GPUs, each filling a node: two windows solved from the same greedy plan
    # (659,870,196 model units), one on its first 4 jobs in start order (649,541,252), one
    # on jobs 21-24 (652,949,618), move different jobs into different room, so both merge
    # and their gains add up: 642,620,674. A plan that puts another job on the node and
    # start that the first window gave one of its jobs would run two gangs on one node at
    # once: merged after the first window it is dropped.
    problem = build_problem(gangs_instance())
    base = greedy_plan(problem)
    order = sorted(range(len(problem.jobs)), key=lambda j: base[problem.jobs[j].job.id][1])
    early = solve_window(problem, base, order[0:4], Budget.unlimited()).plan
    late = solve_window(problem, base, order[20:24], Budget.unlimited()).plan
    both = merge_windows(problem, base, [early, late])
    assert problem.violations(both) == []
    assert problem.evaluate(both) == (0, 642_620_674)
    moved = [jid for jid in base if early[jid] != base[jid]]
    index = {data.job.id: j for j, data in enumerate(problem.jobs)}
    clash = None
    for jid in moved:
        mode, start = early[jid]
        node = problem.jobs[index[jid]].modes[mode].node
        for data in problem.jobs:
            if data.job.id in moved or data.release > start or \
                    base[data.job.id][1] <= start:
                continue
            same = [i for i, m in enumerate(data.modes) if m.node == node]
            if same:
                clash = {**base, data.job.id: (same[0], start)}
                break
        if clash is not None:
            break
    assert clash is not None
    assert problem.evaluate(clash) < problem.evaluate(base)  # it would gain, alone
    assert merge_windows(problem, base, [early, clash]) == early


@pytest.mark.slow
def test_windows_on_two_threads_never_worsen_a_plan() -> None:
    # Wall-clock budget, 2 threads: pairs of nodes searched at once, their moves merged;
    # however far the search gets, the plan is valid and no worse than the greedy one.
    problem = build_problem(gangs_instance())
    greedy = greedy_plan(problem)
    better = improve_by_windows(problem, greedy, Budget.wall(1.0), threads=2)
    assert problem.violations(better) == []
    assert problem.evaluate(better) <= problem.evaluate(greedy)


@pytest.mark.parametrize("seed", range(6))
def test_a_window_that_keeps_kinds_moves_jobs_between_nodes_only(seed: int) -> None:
    # keep_kinds: each free job stays on its GPU type with its gang size, on any node of
    # them. Its optimum is a plan the window in any mode may also reach, so it is never
    # better than that one's optimum, and never worse than the plan.
    problem = build_problem(random_instance(seed, jobs=6))
    plan = greedy_plan(problem)
    free = range(len(problem.jobs))
    kept = solve_window(problem, plan, free, Budget.unlimited(), keep_kinds=True)
    free_modes = solve_window(problem, plan, free, Budget.unlimited())
    assert kept.optimal
    assert free_modes.optimal
    assert problem.violations(kept.plan) == []
    for data in problem.jobs:
        before = data.modes[plan[data.job.id][0]]
        after = data.modes[kept.plan[data.job.id][0]]
        assert (after.gpu_type, after.num_gpus) == (before.gpu_type, before.num_gpus)
    assert problem.evaluate(free_modes.plan) <= problem.evaluate(kept.plan) <= \
        problem.evaluate(plan)
