"""The time-indexed relaxation of the ``deadline`` model's non-preemptive plans: never above
the brute-force optimum of the plans it covers, the LP optimum of every column when no
column prices out, and tighter than the preemptive relaxation on medium.json (its use in
``solve``: tests/formulations/test_deadline_relaxation.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.instance import load_instance
from hetsched.formulations.budget import Budget
from hetsched.formulations.common import TICK_S
from hetsched.formulations.deadline import build_problem, ti_pricing
from hetsched.formulations.deadline.bruteforce import solve_by_enumeration
from hetsched.formulations.deadline.timeindexed import (
    TimeIndexedRelaxation,
    adaptive_edges,
    time_indexed_bound,
)
from hetsched.policies.deadline.search import greedy_plan, guided_plans
from tests.helpers import INSTANCES, random_instance


@pytest.mark.parametrize("seed", range(10))
def test_bound_holds_for_every_plan_it_covers(seed: int) -> None:
    # Brute force over every order and mode. Without deadlines: the least completion term
    # of any plan. With them: the lexicographic optimum (D*, completion*); the relaxation
    # capped at D* (or at any larger cap, e.g. the greedy plan's) covers that plan, so its
    # bound is at most completion*. Both bounds are at least the isolated bound (every
    # column costs at least the job's release plus its shortest duration).
    weights = seed % 2 == 1
    jobs = 4 if seed % 3 else 5
    problem = build_problem(random_instance(seed, jobs=jobs, deadlines=False,
                                            weights=weights))
    (_, weighted_end), _ = solve_by_enumeration(problem)
    least = problem.completion_seconds(weighted_end)
    bound = time_indexed_bound(problem, Budget.unlimited(), slots=60)
    assert bound.status == "optimal"
    # (the bound gives up a few 1e-9 of its sums for rounding: hence the 1e-7)
    assert isolated(problem) * (1 - 1e-7) <= bound.bound_s <= least + 1e-6
    problem = build_problem(random_instance(seed, jobs=jobs, weights=weights))
    (missed, weighted_end), _ = solve_by_enumeration(problem)
    optimum = problem.completion_seconds(weighted_end)
    greedy = problem.evaluate(greedy_plan(problem))[0]
    for cap in {missed, greedy}:
        capped = time_indexed_bound(problem, Budget.unlimited(), late_cap=cap, slots=60)
        assert capped.status == "optimal"
        assert capped.bound_s <= optimum + 1e-6


def test_two_jobs_on_one_gpu_by_hand() -> None:
    # One GPU; jobs of 100 s and 200 s released at 0. Every plan runs them one after the
    # other: the shorter first ends them at 100 and 300 (400 s in all), the other order at
    # 200 and 300 (500 s). With 10 s slots a column counts its GPU time only from the end
    # of its start slot and its cost from the slot's start, so the LP may gain up to a
    # slot per job: e.g. the short job in slot 0 (cost 100, GPU busy over [10, 100)) and
    # the long one in slot 9 (cost 290, busy over [100, 290)) make 390. The bound lies in
    # [400 - 2 x 10, 400].
    cluster = Cluster((GpuType("g"),), (Node("n0", "g", 1),))
    table = ThroughputTable.from_rows([("t", "g", 1, Placement.PACKED, 1.0)])
    jobs = (Job("a", 0.0, "t", 1, 100.0), Job("b", 0.0, "t", 1, 200.0))
    problem = build_problem(Instance(cluster, jobs, table))
    bound = time_indexed_bound(problem, Budget.unlimited(), horizon_s=400.0, slots=40)
    assert bound.slot_s == pytest.approx(10.0)
    assert 380.0 - 1e-6 <= bound.bound_s <= 400.0 + 1e-6
    # The LP runs the short job first: its median start is before the long one's.
    assert bound.median_start_s[0] < bound.median_start_s[1]


def test_non_preemption_lifts_the_bound_above_the_preemptive_one() -> None:
    # One GPU; a 1,000 s job released at 0 and a 10 s job released at 500. Preemptive
    # optimum: the long job steps aside for the short one, 1,010 + 10 = 1,020 s of JCT,
    # and no preemptive relaxation can say more. Run once each, the best plan is the long
    # job first and the short one at 1,000 (JCT 510): 1,510 s (starting the long one
    # after the short one gives 1,510 + 10). The time-indexed LP lies in between: with
    # 1 s slots its optimum runs 10/11 of the long job from 0 and 1/11 from 599, and the
    # short job in 11 shares from 500 to 590 in the gaps that leaves (measured 1,109.45 s),
    # the known weakness of time-indexed LPs on a few jobs; on many jobs the shares
    # average out (medium.json below).
    cluster = Cluster((GpuType("g"),), (Node("n0", "g", 1),))
    table = ThroughputTable.from_rows([("t", "g", 1, Placement.PACKED, 1.0)])
    jobs = (Job("long", 0.0, "t", 1, 1000.0), Job("short", 500.0, "t", 1, 10.0))
    problem = build_problem(Instance(cluster, jobs, table))
    (_, weighted_end), _ = solve_by_enumeration(problem)
    assert problem.completion_seconds(weighted_end) == pytest.approx(1510.0)
    bound = time_indexed_bound(problem, Budget.unlimited(), horizon_s=1100.0, slots=1100)
    assert bound.status == "optimal"
    assert bound.bound_s == pytest.approx(1109.4545, abs=1e-3)
    assert 1020.0 < bound.bound_s <= 1510.0


def test_column_generation_reaches_the_lp_of_every_column() -> None:
    # On a random instance with 30 slots, the master with every column (job x kind x start
    # slot, and the catch-alls) solved once gives the LP optimum; column generation, which
    # prices all of them at every round, ends at the same value.
    problem = build_problem(random_instance(4, jobs=6))
    cap = float(problem.evaluate(greedy_plan(problem))[0])
    generated = TimeIndexedRelaxation(problem, late_cap=cap, slots=30)
    assert generated.run(Budget.unlimited()) == "optimal"
    full = TimeIndexedRelaxation(problem, late_cap=cap, slots=30)
    master = full.master
    for job, kinds in enumerate(master.kinds):
        first = max(0, int((master.release[job] - master.origin) // master.slot_s))
        for index in range(len(kinds)):
            for slot in range(first, master.slots):
                master.add(job, index, slot)
    values, _ = master.solve()
    objective = float(master.highs.getInfo().objective_function_value)
    assert values[0] == pytest.approx(0.0, abs=1e-9)  # the late row's slack is not used
    expected = objective - problem.weighted_arrivals()
    assert generated.result().bound_s == pytest.approx(expected, rel=1e-7)


def test_a_finer_grid_from_the_coarser_columns_reaches_the_same_lp() -> None:
    # Columns only speed column generation up: the 60-slot master started from the
    # 30-slot LP's columns of positive value ends at the LP optimum a cold start reaches
    # (column generation stops only when no column prices out), here in 5 rounds, not 7.
    problem = build_problem(random_instance(5, jobs=8))
    cap = float(problem.evaluate(greedy_plan(problem))[0])
    coarse = TimeIndexedRelaxation(problem, late_cap=cap, slots=30)
    assert coarse.run(Budget.unlimited()) == "optimal"
    support = coarse.result().support
    assert support
    assert all(job >= 0 and start >= 0 for job, _, start in support)
    cold = TimeIndexedRelaxation(problem, late_cap=cap, slots=60)
    warm = TimeIndexedRelaxation(problem, late_cap=cap, slots=60, columns=support)
    assert cold.run(Budget.unlimited()) == warm.run(Budget.unlimited()) == "optimal"
    assert warm.result().bound_s == pytest.approx(cold.result().bound_s, rel=1e-7)
    assert warm.result().bound_s >= coarse.result().bound_s - 1e-6
    assert (warm.rounds, cold.rounds) == (5, 7)


def test_a_lower_cap_never_lowers_the_bound() -> None:
    # Capping the deadlines missed removes plans, so the bound can only rise; changing the
    # cap of a relaxation keeps its columns and gives what a fresh one with that cap gives.
    problem = build_problem(random_instance(6, jobs=6))
    loose = TimeIndexedRelaxation(problem, late_cap=float(len(problem.jobs)), slots=40)
    loose.run(Budget.unlimited())
    first = loose.result().bound_s
    loose.set_late_cap(0.0)
    loose.run(Budget.unlimited())
    fresh = time_indexed_bound(problem, Budget.unlimited(), late_cap=0.0, slots=40)
    assert loose.result().bound_s >= first - 1e-6
    assert loose.result().bound_s == pytest.approx(fresh.bound_s, rel=1e-7)


@pytest.mark.slow
def test_medium_bound_and_guided_plans() -> None:
    # medium.json: 200 jobs on 96 GPUs. The preemptive relaxation bounds the completion
    # term at 698,817 s (tests/formulations/test_deadline_relaxation.py); plans that run
    # each job once, packed, cannot do as well, and the time-indexed relaxation (400
    # slots of 62.7 s) says how much: 746,856 s with every deadline free to be missed,
    # 753,183 s with none. Plans decoded from the start dates of the latter meet every
    # deadline at 859,198 s (the greedy start misses 22; the preemptive LP's order 6) and
    # stay above the bound.
    problem = build_problem(load_instance(INSTANCES / "medium.json"))
    start = greedy_plan(problem)
    # A cap of every job is no cap: the bound of all plans.
    relaxation = TimeIndexedRelaxation(problem, late_cap=float(len(problem.jobs)), start=start)
    assert relaxation.run(Budget.unlimited()) == "optimal"
    free = relaxation.result()
    assert free.slots == 400
    assert free.bound_s == pytest.approx(746_856, rel=1e-3)
    relaxation.set_late_cap(0.0)
    relaxation.run(Budget.unlimited())
    hints = relaxation.result()
    assert hints.bound_s == pytest.approx(753_183, rel=1e-3)
    plans = guided_plans(problem, hints.median_start_s, hints.mode)
    best = min(plans, key=problem.evaluate)
    assert not problem.violations(best)
    assert problem.evaluate(start)[0] == 22
    missed, weighted_end = problem.evaluate(best)
    assert missed == 0
    assert problem.completion_seconds(weighted_end) == pytest.approx(859_198, rel=1e-3)
    relaxation.set_late_cap(float(missed))
    relaxation.run(Budget.unlimited())
    bound = relaxation.result().bound_s
    assert free.bound_s - 1e-6 <= bound < problem.completion_seconds(weighted_end)


def isolated(problem: object) -> float:
    """sum_j w'_j (release_j + shortest mode duration) - sum_j w_j a_j."""
    from hetsched.formulations.deadline.problem import DeadlineProblem

    assert isinstance(problem, DeadlineProblem)
    return math.fsum(d.weight / problem.weight_scale * (d.release + min(
        m.duration for m in d.modes)) * TICK_S for d in problem.jobs) - \
        problem.weighted_arrivals()


def test_isolated_helper_matches_the_model() -> None:
    # The helper above on a 1-job instance: release 5 s, 100 steps at 2 steps/s -> 55 s;
    # JCT 50 s.
    cluster = Cluster((GpuType("g"),), (Node("n0", "g", 1),))
    table = ThroughputTable.from_rows([("t", "g", 1, Placement.PACKED, 2.0)])
    problem = build_problem(Instance(cluster, (Job("a", 5.0, "t", 1, 100.0),), table))
    assert isolated(problem) == pytest.approx(50.0)
    assert np.isclose(time_indexed_bound(problem, Budget.unlimited(), slots=10).bound_s, 50.0)


def test_adaptive_edges_follow_the_starts_and_keep_the_span() -> None:
    # 100 even slots over [0, 1000) s and every start in [100, 200): half the mass of the
    # mixed distribution lies there, so about half the edges (54 of 101) fall in that
    # tenth of the span, the other half evenly over all of it; first and last edges stay.
    uniform = np.linspace(0.0, 1000.0, 101)
    edges = adaptive_edges(uniform, list(np.linspace(100.0, 199.0, 40)))
    assert edges[0] == 0.0
    assert edges[-1] == 1000.0
    assert np.all(np.diff(edges) >= TICK_S)
    assert len(edges) == 101
    inside = int(np.sum((edges >= 100.0) & (edges <= 200.0)))
    assert 50 <= inside <= 56
    assert np.max(np.diff(edges)) == pytest.approx(20.0, rel=0.05)


@pytest.mark.parametrize("seed", range(6))
def test_an_adaptive_grid_bounds_every_plan_too(seed: int) -> None:
    # The relaxation holds for any partition of time into slots: on a grid following the
    # starts of the even grid's LP, the bound stays at most the brute-force optimum.
    problem = build_problem(random_instance(seed, jobs=5))
    optimum, _ = solve_by_enumeration(problem)
    cap = float(optimum[0])
    even = TimeIndexedRelaxation(problem, late_cap=cap, slots=40)
    assert even.run(Budget.unlimited()) == "optimal"
    support = even.result().support
    adaptive = TimeIndexedRelaxation(problem, late_cap=cap, slots=60, columns=support,
                                     dense_s=[start for _, _, start in support])
    assert adaptive.run(Budget.unlimited()) == "optimal"
    assert adaptive.master.even_s is None
    assert adaptive.result().bound_s <= problem.completion_seconds(optimum[1]) + 1e-6


@pytest.mark.parametrize(("seed", "adaptive", "block"),
                         [(0, False, 1 << 18), (1, True, 1 << 18), (2, False, 30), (3, True, 30)])
def test_arrays_price_every_column_as_its_own_coefficients_do(
        seed: int, adaptive: bool, block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The pricer's reduced cost of every (job, kind, start slot) against c - y A computed
    # from the column itself (added to the master, read back from HiGHS), at random duals
    # <= 0 on the GPU, exclusive and late rows; its least per (job, kind) is the least of
    # those, at that slot (or the catch-all's, when lower). Blocks of 30 columns: the
    # (job, kind) pairs are priced 2 at a time (11 or 12 slots each), in several blocks.
    monkeypatch.setattr(ti_pricing, "BLOCK_ELEMENTS", block)
    problem = build_problem(random_instance(seed, jobs=5, gangs=True))
    relaxation = TimeIndexedRelaxation(
        problem, late_cap=1.0, slots=12, dense_s=[0.0, 50.0, 55.0, 60.0] if adaptive else ())
    master = relaxation.master
    pairs = len(master.pricer.job)
    assert (master.pricer.block * 2 < pairs) if block == 30 else master.pricer.block >= pairs
    rng = np.random.default_rng(seed)
    duals = -rng.random(master.num_rows) * (rng.random(master.num_rows) < 0.6)
    _, cheapest = master.price(duals)
    y = np.minimum(duals, 0.0)
    y[: len(problem.jobs)] = 0.0
    for job, kinds in enumerate(master.kinds):
        for index in range(len(kinds)):
            reduced = {}
            for slot in [-1, *range(master.slots)]:
                if 0 <= slot < master.slot_of(master.release[job]):
                    continue
                master.add(job, index, slot)
                lp = master.highs.getLp()
                column = lp.num_col_ - 1
                begin, end = lp.a_matrix_.start_[column], lp.a_matrix_.start_[column + 1]
                rows = np.asarray(lp.a_matrix_.index_[begin:end])
                values = np.asarray(lp.a_matrix_.value_[begin:end])
                reduced[slot] = lp.col_cost_[column] - float(y[rows] @ values)
            value, kind, slot = cheapest[job][index]
            assert kind == index
            assert value == pytest.approx(min(reduced.values()), rel=1e-9, abs=1e-9)
            assert reduced[slot] == pytest.approx(value, rel=1e-9, abs=1e-9)
