"""The ``deadline`` model on every back-end: known optima, brute force, MILP = CP-SAT."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hetsched.cli.main import cli
from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.result import Result, Schedule, Status
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.instance import load_instance
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import TICK_S
from hetsched.formulations.deadline import build_problem
from hetsched.formulations.deadline.bruteforce import solve_by_enumeration
from hetsched.formulations.deadline.cpsat import CpSatSettings, DeadlineCpSat
from hetsched.formulations.deadline.cuts import separate
from hetsched.policies.deadline.search import decode, greedy_plan, improve_plan
from hetsched.policies.fifo import fifo_schedule
from hetsched.solving import SolveOptions, solve
from tests.helpers import INSTANCES, assert_valid, random_instance

#: Every test taking ``backend`` runs on each back-end of the deadline model (tests/conftest.py).
pytestmark = pytest.mark.model("deadline")

#: A deterministic budget (work units, see formulations/budget.py), generous: never reached
#: on these instances, it only guards a hang; deterministic, so no result depends on the
#: machine's speed or load.
LIMIT = 60.0


def run(instance: Instance, backend: str, warm_start: Schedule | None = None,
        **knobs: object) -> Result:
    """Solve with the deadline model and check what every result must satisfy."""
    options = SolveOptions(backend=backend, time_limit_s=LIMIT, deterministic=True, threads=1,
                           warm_start=warm_start)
    result = solve(instance, "deadline", options, **knobs)
    assert_valid(instance, result.schedule)
    # The reported objective is the model's (grid) value; the schedule runs each job for
    # its exact time, at most one tick less: they agree within sum_j w_j x 1 ms.
    recomputed = result.metrics.total_weighted_completion_s if result.metrics else None
    assert recomputed is not None
    slack = TICK_S * sum(job.weight for job in instance.jobs)
    assert recomputed <= result.objective + 1e-6
    assert result.objective - recomputed <= slack + 1e-6
    return result


def test_tiny_optimum(backend: str) -> None:
    # tiny.json: one v100 and one k80, three single-GPU jobs, all deadlines can be met.
    # Optimum: j1 (arrives 12.3) first on the v100, 45119 / 20 = 2255.95 s (JCT 2255.95);
    # j0 next on the v100, 21875 / 8 = 2734.375 s, finishes 5002.625 (JCT 5002.625);
    # j2 on the k80 at its arrival 74.2, 17016 / 8.4 = 2025.714 s (JCT 2025.714, before its
    # deadline 2205). Sum 9284.289 s. Putting j0 first on the v100 costs 2734.375 + 4990.325
    # + 2025.714; j2 on the v100 misses nothing but delays a 20-step/s job by 1418 s; the
    # brute force below confirms the optimum independently.
    instance = load_instance(INSTANCES / "tiny.json")
    result = run(instance, backend)
    assert result.status is Status.OPTIMAL
    assert result.objective == pytest.approx(9284.29, abs=1e-3)  # 2 ticks of rounding on j2
    assert result.metrics is not None
    assert result.metrics.total_weighted_completion_s == pytest.approx(9284.2893, abs=1e-3)
    assert result.gap == pytest.approx(0.0, abs=1e-9)
    placed = result.schedule.by_job()
    assert placed["j1"].gpus == ("v100-0/0",)
    assert placed["j0"].gpus == ("v100-0/0",)
    assert placed["j2"].gpus == ("k80-0/0",)
    assert result.extra["deadline_term"] == 0
    problem = build_problem(instance)
    (missed, weighted_end), _ = solve_by_enumeration(problem)
    assert missed == 0
    assert problem.completion_seconds(weighted_end) == pytest.approx(result.objective)


def test_lexicographic_deadline_before_completion_time(backend: str) -> None:
    # One GPU; a (400 s, no deadline) and b (600 s, deadline 600) both arrive at 0.
    # Shortest first gives 400 + 1000 = 1400 s but b misses its deadline; the model must
    # meet it first: b then a, 600 + 1000 = 1600 s.
    cluster = Cluster((GpuType("g"),), (Node("n", "g", 1),))
    table = ThroughputTable.from_rows([("t", "g", 1, Placement.PACKED, 1.0)])
    instance = Instance(cluster, (Job("a", 0.0, "t", 1, 400.0),
                                  Job("b", 0.0, "t", 1, 600.0, deadline=600.0)), table)
    result = run(instance, backend)
    assert result.status is Status.OPTIMAL
    assert result.objective == pytest.approx(1600.0)
    assert result.extra["deadline_term"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_equals_brute_force_on_random_instances(backend: str, seed: int) -> None:
    instance = random_instance(seed, jobs=4 if seed % 2 else 5)
    problem = build_problem(instance)
    (missed, weighted_end), _ = solve_by_enumeration(problem)
    expected = problem.completion_seconds(weighted_end)
    result = run(instance, backend)
    assert result.status is Status.OPTIMAL, backend
    assert result.extra["deadline_term"] == missed, backend
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-6), backend


@pytest.mark.parametrize("seed", [2, 7])
def test_tardiness_objective_equals_brute_force(backend: str, seed: int) -> None:
    instance = random_instance(seed, jobs=4, weights=True)
    problem = build_problem(instance, "tardiness")
    (tardiness, weighted_end), _ = solve_by_enumeration(problem)
    result = run(instance, backend, objective="tardiness")
    assert result.status is Status.OPTIMAL
    assert result.extra["deadline_term"] == pytest.approx(
        problem.deadline_seconds(tardiness), abs=1e-6)
    assert result.objective == pytest.approx(problem.completion_seconds(weighted_end),
                                             rel=1e-9)


def test_unmeetable_deadline_is_reported_and_the_job_still_runs() -> None:
    # 'late' needs 1000 s even alone on the one GPU but its deadline is 500 s after arrival.
    cluster = Cluster((GpuType("g"),), (Node("n", "g", 1),))
    table = ThroughputTable.from_rows([("t", "g", 1, Placement.PACKED, 1.0)])
    instance = Instance(cluster, (Job("late", 0.0, "t", 1, 1000.0, deadline=500.0),
                                  Job("ok", 0.0, "t", 1, 100.0, deadline=200.0)), table)
    result = run(instance, "cpsat")
    assert result.extra["unmeetable_deadlines"] == ["late"]
    assert "late" in result.message
    assert result.extra["missed_deadlines"] == ["late"]
    assert result.objective == pytest.approx(100.0 + 1100.0)  # ok first, then late


def test_infeasible_with_reason_when_a_gang_cannot_be_packed() -> None:
    # 4-GPU gang, nodes of 2 GPUs: only a spread placement exists, which the model excludes.
    cluster = Cluster((GpuType("g"),), (Node("a", "g", 2), Node("b", "g", 2)))
    table = ThroughputTable.from_rows([("t", "g", 4, Placement.SPREAD, 1.0)])
    instance = Instance(cluster, (Job("big", 0.0, "t", 4, 100.0),), table)
    result = solve(instance, "deadline", SolveOptions(backend="cpsat"))
    assert result.status is Status.INFEASIBLE
    assert "big" in result.message
    assert "packed" in result.message
    assert len(result.schedule) == 0


@pytest.mark.slow
def test_warm_start_from_fifo_keeps_the_optimum(backend: str) -> None:
    instance = random_instance(3, jobs=5)
    warm = fifo_schedule(instance)
    cold = run(instance, backend)
    hot = run(instance, backend, warm_start=warm)
    assert hot.status is Status.OPTIMAL
    assert hot.objective == pytest.approx(cold.objective, rel=1e-9)
    assert hot.extra["warm_start_jobs"] >= 1


def test_cli_json() -> None:
    outcome = CliRunner().invoke(cli, ["solve", str(INSTANCES / "tiny.json"), "--model",
                                       "deadline", "--backend", "highs", "--json", "--seed", "3",
                                       "--deadline-objective", "tardiness"])
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.output)
    assert document["status"] == "OPTIMAL"
    assert document["objective"] == pytest.approx(9284.29, abs=1e-3)
    assert document["violations"] == []
    assert document["extra"]["deadline_objective"] == "tardiness"


def test_mean_busy_time_cut_is_exact_for_two_gangs_on_one_node() -> None:
    # One 2-GPU node, two 2-GPU gangs of 10 s (10,000 ticks) released at 0. Areas 20,000
    # GPU-ticks each, G = 2: sum a_j C_j >= sum a_j p_j / 2 + (sum a)^2 / (2G) =
    # 2e8 + 4e8, i.e. C_1 + C_2 >= 30,000 ticks: one after the other, the optimum.
    cluster = Cluster((GpuType("g"),), (Node("n", "g", 2),))
    table = ThroughputTable.from_rows([("t", "g", 2, Placement.PACKED, 1.0)])
    instance = Instance(cluster, (Job("a", 0.0, "t", 2, 10.0), Job("b", 0.0, "t", 2, 10.0)),
                        table)
    problem = build_problem(instance)
    _, bound = separate(problem)
    assert bound == pytest.approx(30_000, rel=1e-6)
    (_, weighted_end), _ = solve_by_enumeration(problem)
    assert weighted_end == 30_000


def test_cut_rounds_are_charged_to_a_deterministic_budget() -> None:
    # congested.json: unlimited separation runs many rounds and finds 182 cuts. Each round
    # charges its LP solve and its separation, so a budget of 0.002 units stops after the
    # first LP solve (a bound, no cuts), spends at least its limit, and the same budget
    # gives the same cuts on every run.
    problem = build_problem(load_instance(INSTANCES / "congested.json"))
    cuts, unlimited_bound = separate(problem)
    assert len(cuts) == 182
    small = Budget.work(0.002)
    few, first_bound = separate(problem, small)
    assert few == []
    assert 0 < first_bound < unlimited_bound
    assert small.spent() >= 0.002
    medium_cuts = [separate(problem, Budget.work(0.02))[0] for _ in range(2)]
    assert 0 < len(medium_cuts[0]) < len(cuts)
    assert medium_cuts[0] == medium_cuts[1]


@pytest.mark.parametrize("seed", range(8))
def test_mean_busy_time_cuts_are_valid(seed: int) -> None:
    # Every cut holds for the brute-force optimum and the greedy plan, and the LP bound
    # with the cuts is at most the optimum.
    instance = random_instance(seed, jobs=4 if seed % 2 else 5, weights=seed % 3 == 0)
    problem = build_problem(instance)
    cuts, bound = separate(problem)
    (_, weighted_end), best = solve_by_enumeration(problem)
    for plan in (best, greedy_plan(problem)):
        assert not problem.violations(plan)
        for cut in cuts:
            assert cut.slack(problem, plan) >= -1e-6 * max(1.0, cut.constant())
    # the lexicographic optimum may trade completion time for deadlines: compare with the
    # completion-only optimum, which is no larger
    assert bound <= weighted_end * (1 + 1e-9)
    assert bound <= problem.evaluate(greedy_plan(problem))[1] * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_cpsat_with_and_without_cuts_agree(seed: int) -> None:
    problem = build_problem(random_instance(10 + seed, jobs=5))
    values = []
    for completion_cuts in (True, False):
        plans = DeadlineCpSat(problem, Budget.work(LIMIT)).solve(
            CpSatSettings(completion_cuts=completion_cuts))
        plan = plans.completion_plan
        assert plan is not None
        assert plans.completion.outcome is Status.OPTIMAL
        values.append(problem.evaluate(plan))
    assert values[0] == values[1]


# small.json's proven optimum (CP-SAT proves it in about a second; HiGHS in under 20 s):
# 33,888.15 s of total JCT, every deadline met. The sum of each job's duration alone on its
# fastest mode is 32,255.43 s (the contention costs 5.1%), and the greedy start plan is
# 34,066.72 s; the local search reaches the optimum from it.
SMALL_OPTIMUM_S = 33_888.15


@pytest.mark.slow
def test_small_json_is_proven_optimal_by_cpsat() -> None:
    instance = load_instance(INSTANCES / "small.json")
    result = run(instance, "cpsat")
    assert result.status is Status.OPTIMAL
    assert result.gap == 0
    assert result.objective == pytest.approx(SMALL_OPTIMUM_S, abs=1e-3)
    assert result.extra["missed_deadlines"] == []


@pytest.mark.slow
def test_small_json_cbc_returns_the_same_objective() -> None:
    # CBC does not prove it in a few hundred nodes, but starts from the local search's plan
    # (which reaches the optimum with 0.23 work units; it gets 5% of 10) and returns it: a
    # solve is never worse than its start. Deterministic: the same on any machine.
    instance = load_instance(INSTANCES / "small.json")
    result = solve(instance, "deadline",
                   SolveOptions(backend="cbc", time_limit_s=10.0, deterministic=True))
    assert_valid(instance, result.schedule)
    assert result.objective == pytest.approx(SMALL_OPTIMUM_S, abs=1e-3)
    assert result.bound is not None
    assert result.bound <= result.objective


def test_local_search_reaches_small_json_optimum_and_never_worsens() -> None:
    problem = build_problem(load_instance(INSTANCES / "small.json"))
    start = greedy_plan(problem)
    better = improve_plan(problem, start, Budget.work(None))
    assert problem.violations(better) == []
    assert problem.completion_seconds(problem.evaluate(start)[1]) == pytest.approx(34_066.718)
    assert problem.completion_seconds(problem.evaluate(better)[1]) == pytest.approx(
        SMALL_OPTIMUM_S, abs=1e-3)
    # With (almost) no budget at all it is still never worse than its input.
    assert problem.evaluate(improve_plan(problem, start, Budget.work(1e-9))) <= \
        problem.evaluate(start)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_local_search_is_valid_and_never_worse_on_random_instances(seed: int) -> None:
    instance = random_instance(seed, jobs=6)
    problem = build_problem(instance)
    start = greedy_plan(problem)
    better = improve_plan(problem, start, Budget.work(None))
    assert problem.violations(better) == []
    assert problem.evaluate(better) <= problem.evaluate(start)
    # The decoder with the greedy's order and modes rebuilds a plan at least as good.
    order = sorted(range(len(problem.jobs)), key=lambda j: start[problem.jobs[j].job.id][1])
    modes = {j: start[d.job.id][0] for j, d in enumerate(problem.jobs)}
    assert problem.violations(decode(problem, order, modes)) == []
    # And it is no better than the proven optimum.
    optimum, _ = solve_by_enumeration(problem)
    assert problem.evaluate(better) >= optimum


@pytest.mark.parametrize("seed", range(6))
def test_decoding_from_a_prefix_equals_decoding_it_all(seed: int) -> None:
    # The local search re-decodes an order only from its first changed place: the steps of
    # the jobs before it, taken from an earlier decode, must be what decoding them again
    # gives, for every place, with kinds fixed or free, and for a changed tail.
    import random

    from hetsched.policies.deadline.search import decode_steps, plan_of

    problem = build_problem(random_instance(seed, jobs=9))
    rng = random.Random(seed)
    order = list(range(len(problem.jobs)))
    rng.shuffle(order)
    for modes in ({}, {j: rng.randrange(len(problem.jobs[j].modes)) for j in order}):
        full = decode_steps(problem, order, modes)
        assert plan_of(problem, full) == decode(problem, order, modes)
        for k in range(len(order) + 1):
            assert decode_steps(problem, order, modes, prefix=full[:k]) == full
            tail = order[k:]
            rng.shuffle(tail)
            changed = order[:k] + tail
            assert decode_steps(problem, changed, modes, prefix=full[:k]) == \
                decode_steps(problem, changed, modes)


def test_a_proof_hidden_by_round_off_still_counts() -> None:
    # Found by the property test: on this instance HiGHS calls its answer optimal, but
    # the answer misses feasibility by 1.4e-5 (scaled) and is dropped, so the start plan
    # (the same schedule) is returned with the engine's bound 716.504999 s, 1e-6 s below
    # its objective 716.505 s. Plans' objectives differ by whole steps of 1 ms / weight
    # scale, so nothing lies in between: it is optimal, as CP-SAT proves.
    instance = random_instance(5836, jobs=4, weights=False)
    results = {backend: run(instance, backend) for backend in ("cpsat", "highs")}
    assert {r.status for r in results.values()} == {Status.OPTIMAL}
    assert results["highs"].objective == pytest.approx(716.505, abs=1e-9)
    assert results["cpsat"].objective == pytest.approx(716.505, abs=1e-9)
    assert results["highs"].bound == pytest.approx(716.505, abs=TICK_S / 2)


def test_earliest_start_is_the_first_tick_that_fits() -> None:
    """``earliest_start`` against brute force over every tick: the first t >= release at
    which use + need <= capacity at every tick of [t, t + duration), on 3,000 random
    nodes. A hand case first: 4 GPUs, 2 booked over [0, 10) and 2 over [5, 20). A 2-GPU
    job of 5 ticks fits at 0; of 6 ticks it would overlap [5, 10), where all 4 are
    booked, so it starts when the first booking ends, at 10; a 3-GPU job fits only
    after both, at 20."""
    import random

    from hetsched.formulations.deadline.timing import earliest_start

    booked = [(0, 10, 2), (5, 20, 2)]
    assert earliest_start(0, 5, 2, 4, booked) == 0
    assert earliest_start(0, 6, 2, 4, booked) == 10
    assert earliest_start(0, 6, 3, 4, booked) == 20

    def first_fit(release: int, duration: int, need: int, capacity: int,
                  booked: list[tuple[int, int, int]]) -> int:
        def use(t: int) -> int:
            return sum(c for s, e, c in booked if s <= t < e)
        t = release
        while any(use(x) + need > capacity for x in range(t, t + duration)):
            t += 1
        return t

    rng = random.Random(7)
    for _ in range(3000):
        capacity = rng.choice([1, 2, 4, 8])
        bookings = []
        for _ in range(rng.randint(0, 7)):
            start = rng.randint(0, 25)
            bookings.append((start, start + rng.randint(1, 12), rng.randint(1, capacity)))
        args = (rng.randint(0, 25), rng.randint(1, 15), rng.randint(1, capacity), capacity,
                bookings)
        assert earliest_start(*args) == first_fit(*args), args
