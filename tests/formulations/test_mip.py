"""hetsched.formulations.mip: HiGHS, CBC and SCIP on array models, against hand-derived optima,
brute force and each other; starts, deterministic limits, crashes and Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pulp
import pytest
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from hetsched.core.result import Status
from hetsched.formulations.budget import HIGHS_NODES_PER_UNIT, Budget
from hetsched.formulations.mip import (
    ENGINES,
    MatrixBuilder,
    MatrixModel,
    MipSettings,
    available_engines,
    solve_mip,
)
from hetsched.formulations.mip.pulp_io import from_pulp, set_pulp_values, solve_pulp
from tests.helpers import ROOT

INF = np.inf
ENGINE = [pytest.param(e, marks=pytest.mark.skipif(
    e not in available_engines(), reason=f"the {e} engine's package is not installed"))
    for e in ENGINES]


def model(cost: list[float], rows: list[list[float]], lower: list[float], upper: list[float],
          col_lower: list[float], col_upper: list[float], integer: list[bool],
          offset: float = 0.0) -> MatrixModel:
    """A small dense model."""
    matrix = sp.csr_matrix(np.array(rows, dtype=float).reshape(len(rows), len(cost)))
    return MatrixModel(np.array(cost, dtype=float), matrix, np.array(lower, dtype=float),
                       np.array(upper, dtype=float), np.array(col_lower, dtype=float),
                       np.array(col_upper, dtype=float), np.array(integer), offset)


def knapsack(offset: float = 0.0) -> MatrixModel:
    # Values (10, 13, 7, 8, 4), weights (5, 6, 3, 4, 2), capacity 9. Sets that fit and are
    # maximal: {1,2} w9 v20, {0,3} w9 v18, {2,3,4} w9 v19, {0,2} v17, {1,4} v17, {0,4} v14;
    # so the optimum is {1, 2} with value 20, unique. Minimise -value (+ offset).
    return model([-10, -13, -7, -8, -4], [[5, 6, 3, 4, 2]], [-INF], [9], [0] * 5, [1] * 5,
                 [True] * 5, offset)


def multi_knapsack(n: int, seed: int) -> MatrixModel:
    """max value s.t. five knapsack rows at half their total weight (hard for its size)."""
    rng = np.random.default_rng(seed)
    weights = rng.integers(20, 100, size=(5, n)).astype(float)
    values = weights.sum(axis=0) + rng.integers(0, 30, size=n)
    return MatrixModel(-values, sp.csr_matrix(weights), np.full(5, -INF),
                       weights.sum(axis=1) / 2, np.zeros(n), np.ones(n), np.ones(n, bool))


def market_split(seed: int, rows: int = 4) -> MatrixModel:
    """Cornuejols-Dawande: sum_j a_ij x_j = floor(sum_j a_ij / 2), x binary; branch and
    bound finds no solution in a few nodes."""
    rng = np.random.default_rng(seed)
    n = 10 * (rows - 1)
    a = rng.integers(0, 100, size=(rows, n)).astype(float)
    d = np.floor(a.sum(axis=1) / 2)
    return MatrixModel(np.zeros(n), sp.csr_matrix(a), d, d, np.zeros(n), np.ones(n),
                       np.ones(n, bool))


def brute_force(m: MatrixModel) -> tuple[float, np.ndarray] | None:
    """The optimum of a pure 0-1 model by enumeration (``None`` if infeasible)."""
    n = m.num_cols
    dense = m.matrix.toarray()
    best: tuple[float, np.ndarray] | None = None
    for first in range(0, 2**n, 1 << 15):
        index = np.arange(first, min(2**n, first + (1 << 15)))
        points = ((index[:, None] >> np.arange(n)) & 1).astype(float)
        activity = points @ dense.T
        ok = np.all((activity >= m.row_lower - 1e-9) & (activity <= m.row_upper + 1e-9), axis=1)
        if ok.any():
            values = points[ok] @ m.cost + m.offset
            k = int(np.argmin(values))
            if best is None or values[k] < best[0]:
                best = (float(values[k]), points[ok][k])
    return best


def random_binary(seed: int, n: int = 10, rows: int = 4) -> MatrixModel:
    """Random 0-1 model with <=, >= and ranged rows around a random point (feasible)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 10, size=(rows, n)).astype(float)
    a[rng.random((rows, n)) < 0.3] = 0.0
    point = rng.integers(0, 2, size=n).astype(float)
    activity = a @ point
    kind = rng.integers(0, 3, size=rows)
    lower = np.where(kind >= 1, activity - rng.integers(0, 6, size=rows), -INF)
    upper = np.where(kind != 1, activity + rng.integers(0, 6, size=rows), INF)
    return MatrixModel(rng.integers(-10, 11, size=n).astype(float), sp.csr_matrix(a), lower,
                       upper, np.zeros(n), np.ones(n), np.ones(n, bool), float(seed))


# -- known optima ------------------------------------------------------------------------
@pytest.mark.parametrize("offset", [0.0, 100.0])
@pytest.mark.parametrize("engine", ENGINE)
def test_knapsack_optimum_with_offset(engine: str, offset: float) -> None:
    # The knapsack's optimum is -20; the offset is in the objective and the bound.
    result = solve_mip(knapsack(offset), engine, Budget.unlimited())
    assert result.outcome is Status.OPTIMAL
    assert result.objective == pytest.approx(offset - 20.0, abs=1e-9)
    assert result.bound == result.objective
    assert result.values is not None
    np.testing.assert_array_equal(result.values, [0, 1, 1, 0, 0])
    assert not result.hit_limit


@pytest.mark.parametrize("engine", ENGINE)
def test_assignment_equals_linear_sum_assignment(engine: str) -> None:
    # 3x3 by hand: rows (4 1 3), (2 0 5), (3 2 2): 0->1, 1->0, 2->2 costs 1 + 2 + 2 = 5.
    # Then a 7x7 random one against scipy's Hungarian method.
    for cost in (np.array([[4.0, 1, 3], [2, 0, 5], [3, 2, 2]]),
                 np.random.default_rng(5).integers(0, 50, size=(7, 7)).astype(float)):
        n = len(cost)
        b = MatrixBuilder()
        x = b.add_binaries(n * n).reshape(n, n)
        b.add_rows(np.repeat(np.arange(n), n), x.ravel(), np.ones(n * n), 1.0, 1.0)
        b.add_rows(np.repeat(np.arange(n), n), x.T.ravel(), np.ones(n * n), 1.0, 1.0)
        result = solve_mip(b.build(cost.ravel()), engine, Budget.unlimited())
        rows, cols = linear_sum_assignment(cost)
        assert result.outcome is Status.OPTIMAL
        assert result.objective == pytest.approx(cost[rows, cols].sum(), abs=1e-9)


@pytest.mark.parametrize("engine", ENGINE)
def test_infeasible(engine: str) -> None:
    # 2 x + 2 y = 3 has no integer solution (the left side is even); an LP with x >= 2 and
    # x <= 1 has no solution either.
    parity = model([1, 0], [[2, 2]], [3], [3], [0, 0], [10, 10], [True, True])
    crossing = model([1], [[1], [1]], [2, -INF], [INF, 1], [0], [INF], [False])
    for m in (parity, crossing):
        result = solve_mip(m, engine, Budget.unlimited())
        assert result.outcome is Status.INFEASIBLE
        assert result.values is None
        assert result.objective is None
        assert result.bound is None


@pytest.mark.parametrize("engine", ENGINE)
def test_unbounded_is_an_error_without_values(engine: str) -> None:
    # min -x - y with x >= 1 integer and y >= 0 unbounded above.
    m = model([-1, -1], [[1, 0]], [1], [INF], [0, 0], [INF, INF], [True, False])
    result = solve_mip(m, engine, Budget.unlimited())
    assert result.outcome is Status.ERROR
    assert result.detail["unbounded"] is True
    assert result.values is None


@pytest.mark.parametrize("engine", ENGINE)
def test_models_without_rows_or_columns(engine: str) -> None:
    # No rows: min x0 - x1 + 10, x0 integer in [2.5, 7] -> 3, x1 in [0, 3.5] -> 3.5.
    free = model([1, -1], [], [], [], [2.5, 0], [7, 3.5], [True, False], offset=10.0)
    result = solve_mip(free, engine, Budget.unlimited())
    assert result.outcome is Status.OPTIMAL
    assert result.objective == pytest.approx(9.5, abs=1e-9)
    assert result.values is not None
    np.testing.assert_allclose(result.values, [3.0, 3.5], atol=1e-9)
    # No columns: every row's activity is 0; the objective is the offset.
    empty = MatrixModel(np.zeros(0), sp.csr_matrix((1, 0)), np.array([-1.0]), np.array([2.0]),
                        np.zeros(0), np.zeros(0), np.zeros(0, bool), 4.5)
    result = solve_mip(empty, engine, Budget.unlimited())
    assert result.outcome is Status.OPTIMAL
    assert result.objective == 4.5
    impossible = empty.with_row(np.zeros(0), 1.0, 2.0)
    assert solve_mip(impossible, engine, Budget.unlimited()).outcome is Status.INFEASIBLE


@pytest.mark.parametrize("seed", range(8))
def test_engines_agree_with_brute_force(seed: int) -> None:
    m = random_binary(seed)
    best = brute_force(m)
    assert best is not None  # feasible by construction
    for engine in available_engines():
        result = solve_mip(m, engine, Budget.unlimited(), MipSettings(seed=seed))
        assert result.outcome is Status.OPTIMAL, engine
        assert result.objective == pytest.approx(best[0], abs=1e-9), engine
        assert result.values is not None
        assert m.violation(result.values) <= 1e-9


# -- starts and limits -------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINE)
def test_optimal_start_is_returned_at_one_node(engine: str) -> None:
    m = multi_knapsack(16, seed=1)
    best = brute_force(m)
    assert best is not None
    budget = Budget.work(1 / HIGHS_NODES_PER_UNIT)  # one node
    result = solve_mip(m, engine, budget, start=best[1])
    assert result.objective == pytest.approx(best[0], abs=1e-9)
    assert result.detail["source"] == "engine"  # the engine took it, not the fallback
    assert result.outcome in (Status.OPTIMAL, Status.FEASIBLE)
    assert result.bound is not None
    assert result.bound <= best[0] + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINE)
def test_deterministic_budget_repeats_exactly(engine: str) -> None:
    m = multi_knapsack(40, seed=2)
    runs = []
    for _ in range(2):
        budget = Budget.work(0.05)  # 10 nodes
        r = solve_mip(m, engine, budget)
        assert r.values is not None
        runs.append((r.outcome, r.hit_limit, r.objective, r.bound, r.values.tobytes(), r.work,
                     budget.spent(), r.detail["nodes"]))
    assert runs[0] == runs[1]
    outcome, hit_limit, objective, bound, _, work, spent, nodes = runs[0]
    assert outcome is Status.FEASIBLE
    assert hit_limit
    assert bound is not None
    assert objective is not None
    assert bound <= objective
    assert work == spent == nodes / HIGHS_NODES_PER_UNIT


@pytest.mark.parametrize("engine", ENGINE)
def test_gap_stop_is_feasible_with_its_bound(engine: str) -> None:
    # A 5 % gap on a 40-item five-row knapsack: the engine may stop early; the answer is
    # OPTIMAL only if its bound proves it, else FEASIBLE (not a limit) within the gap.
    result = solve_mip(multi_knapsack(40, seed=2), engine, Budget.unlimited(),
                       MipSettings(gap=0.05))
    assert result.gap is not None  # objective and bound are known
    assert result.gap <= 0.05 + 1e-9
    assert not result.hit_limit
    assert result.outcome is (Status.OPTIMAL if result.gap == 0 else Status.FEASIBLE)


@pytest.mark.parametrize("engine", ENGINE)
def test_node_limit_without_solution(engine: str) -> None:
    result = solve_mip(market_split(0), engine, Budget.work(1 / HIGHS_NODES_PER_UNIT))
    assert result.outcome is Status.TIME_LIMIT
    assert result.hit_limit
    assert result.values is None
    assert result.objective is None


@pytest.mark.parametrize("engine", ENGINE)
def test_bad_starts(engine: str) -> None:
    m = knapsack()
    # Every item taken weighs 20 > 9: infeasible; the engine still solves (once).
    result = solve_mip(m, engine, Budget.unlimited(), start=np.ones(5))
    assert result.outcome is Status.OPTIMAL
    assert result.objective == pytest.approx(-20.0)
    assert result.detail["start_feasible"] is False
    with pytest.raises(ValueError, match="all 5 columns"):
        solve_mip(m, engine, Budget.unlimited(), start=np.ones(4))
    with pytest.raises(ValueError, match="finite"):
        solve_mip(m, engine, Budget.unlimited(), start=np.full(5, np.nan))


def test_unknown_engine_and_bad_settings() -> None:
    with pytest.raises(ValueError, match="unknown MILP engine"):
        solve_mip(knapsack(), "gurobi", Budget.unlimited())
    with pytest.raises(ValueError, match="gap"):
        MipSettings(gap=-0.1)


# -- CBC as a process --------------------------------------------------------------------
def fake_cbc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> list[int]:
    """Replace the CBC binary with ``script``; returns the list of process launches."""
    path = tmp_path / "fake-cbc"
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    import hetsched.formulations.mip.cbc as cbc

    monkeypatch.setattr(cbc, "binary", lambda: str(path))
    launches: list[int] = []
    real = subprocess.Popen

    def counting(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        launches.append(1)
        return real(*args, **kwargs)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(subprocess, "Popen", counting)
    return launches


@pytest.mark.slow
@pytest.mark.skipif("cbc" not in available_engines(), reason="cbcbox is not installed")
@pytest.mark.parametrize(("script", "outcome", "key", "value"), [
    # What PuLP's CBC 2.10.3 did while reading a start: die from SIGSEGV. An error, once.
    ("kill -SEGV $$", Status.ERROR, "signal", "SIGSEGV"),
    # A CBC that ignores its time limit is killed by the watchdog: the (optimal) start is
    # all there is, unproven.
    ("exec sleep 60", Status.FEASIBLE, "watchdog", True),
])
def test_cbc_crash_or_overrun_ends_one_solve(script: str, outcome: Status, key: str,
                                             value: object, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    launches = fake_cbc(tmp_path, monkeypatch, script)
    result = solve_mip(knapsack(), "cbc", Budget.wall(0.3), start=np.array([0, 1, 1, 0, 0.0]))
    assert result.outcome is outcome
    assert result.detail[key] == value
    assert result.hit_limit is (result.values is not None) is (outcome is Status.FEASIBLE)
    assert result.detail["source"] == ("start" if result.hit_limit else None)
    assert result.wall_s < 50  # killed, not waited for
    assert launches == [1]


@pytest.mark.skipif("cbc" not in available_engines(), reason="cbcbox is not installed")
def test_cbc_bound_is_rounded_down() -> None:
    from hetsched.formulations.mip.cbc import _last_digit

    assert _last_digit("-13085.3") == pytest.approx(0.1)
    assert _last_digit("45594.3") == pytest.approx(0.1)
    assert _last_digit("3") == pytest.approx(1e-5)
    assert _last_digit("1.5e-07") == pytest.approx(1e-12)
    assert _last_digit("0") == 0.0


def test_watchdog_stops_an_engine_and_gives_up_on_a_stuck_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from hetsched.formulations.mip import engine

    monkeypatch.setattr(engine, "STOP_WAIT_S", 0.2)
    obeys, stopper = threading.Event(), engine.Stopper()

    def polite() -> str:  # stops when asked, like HiGHS's callback or interruptSolve
        obeys.wait(30)
        return "stopped"

    kill_at = time.monotonic() + 0.1
    assert engine.run_in_thread(polite, obeys.set, stopper, kill_at, "polite") == "stopped"
    assert stopper.by_watchdog
    stuck = threading.Event()
    with pytest.raises(engine.EngineStuckError, match="did not stop"):
        engine.run_in_thread(lambda: stuck.wait(30), lambda: None, engine.Stopper(),
                             time.monotonic() + 0.1, "stuck")
    stuck.set()


# -- Ctrl-C --------------------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import os, signal, sys, time
    import numpy as np, scipy.sparse as sp
    from hetsched.formulations.budget import Budget
    from hetsched.formulations.mip import MatrixModel, solve_mip
    engine, how = sys.argv[1], sys.argv[2]
    if how == "SIGTERM":
        def stop(number, frame):
            raise KeyboardInterrupt("SIGTERM")
        signal.signal(signal.SIGTERM, stop)
    before = signal.getsignal(signal.SIGINT)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 100, size=(6, 50)).astype(float)  # market split, 6 rows: hours
    d = np.floor(a.sum(axis=1) / 2)
    model = MatrixModel(np.zeros(50), sp.csr_matrix(a), d, d, np.zeros(50), np.ones(50),
                        np.ones(50, bool))
    print("solving", flush=True)
    try:
        solve_mip(model, engine, Budget.wall(600.0))
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print("handler intact", signal.getsignal(signal.SIGINT) is before, flush=True)
    try:
        os.waitpid(-1, os.WNOHANG)
        print("child process left", flush=True)
    except ChildProcessError:
        print("no child process", flush=True)
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
    except KeyboardInterrupt:
        print("handler ran", flush=True)
""")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("engine", ENGINE)
def test_interrupt_stops_the_solve(engine: str, how: str, tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, str(script), engine, how], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "solving"
    # Let the engine start (the budget is 600 s: the solve cannot end by itself).
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=1.5)
    child.send_signal(getattr(signal, how))
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert out.split("\n")[:4] == ["interrupted", "handler intact True", "no child process",
                                   "handler ran"], out + err


# -- PuLP models ---------------------------------------------------------------------------
def pulp_highs_optimum(problem: pulp.LpProblem) -> float:
    problem.solve(pulp.HiGHS(msg=False))
    assert problem.status == pulp.LpStatusOptimal
    return float(pulp.value(problem.objective))


@pytest.mark.parametrize("engine", ENGINE)
def test_pulp_maximisation_round_trip(engine: str) -> None:
    def build() -> pulp.LpProblem:
        problem = pulp.LpProblem("knapsack", pulp.LpMaximize)
        take = [problem.add_variable(f"take{i}", cat="Binary") for i in range(5)]
        problem += pulp.lpSum(v * t for v, t in zip([10, 13, 7, 8, 4], take, strict=True)) + 5
        problem += pulp.lpSum(w * t for w, t in zip([5, 6, 3, 4, 2], take, strict=True)) <= 9
        return problem

    problem = build()
    m, variables = from_pulp(problem)
    np.testing.assert_array_equal(m.cost, [-10, -13, -7, -8, -4])  # negated
    assert m.offset == -5.0
    result = solve_mip(m, engine, Budget.unlimited())
    assert result.objective == pytest.approx(-25.0)  # the knapsack's 20 plus 5, negated
    set_pulp_values(variables, result.values, problem, result.outcome)
    assert pulp.value(problem.objective) == pytest.approx(25.0)
    assert [v.varValue for v in variables] == [0, 1, 1, 0, 0]
    assert problem.status == pulp.LpStatusOptimal
    assert pulp_highs_optimum(build()) == pytest.approx(25.0)
    # The same in one call, from a feasible start ({0, 3}: value 18 + 5).
    again = build()
    for var in again.variables():
        var.setInitialValue(1 if var.name in ("take0", "take3") else 0)
    result = solve_pulp(again, engine, Budget.unlimited(), warm_start=True)
    assert result.detail["start_feasible"] is True
    assert pulp.value(again.objective) == pytest.approx(25.0)
    with pytest.raises(ValueError, match="4 values for 5 variables"):
        set_pulp_values(variables, np.zeros(4))


@pytest.mark.parametrize("engine", ENGINE)
def test_placement_milp_round_trip(engine: str) -> None:
    from hetsched.core.records import Cluster, GpuType, Node
    from hetsched.formulations.topology.milp import PlacementMilp
    from hetsched.formulations.topology.problem import Gang, build

    # tests/files/test_topology.py: a 6-GPU gang spread (3, 3) over n1 and n2 costs 6/32 + 9/5.
    cluster = Cluster((GpuType("t4"),), tuple(Node(f"n{i}", "t4", 4) for i in range(3)))
    busy = frozenset({"n0/0", "n0/1", "n1/0", "n2/0"})
    gangs = (Gang("big", "t4", 6, allow_spread=True), Gang("one", "t4", 1, 0.5))

    def problem() -> pulp.LpProblem:
        milp = PlacementMilp(build(cluster, busy, gangs))
        milp.problem.setObjective(milp.cost)
        return milp.problem

    expected = pulp_highs_optimum(problem())
    assert expected == pytest.approx(6 / 32 + 9 / 5)  # the 1-GPU gang fits for free
    m, _ = from_pulp(problem())
    result = solve_mip(m, engine, Budget.unlimited())
    assert result.outcome is Status.OPTIMAL
    assert result.objective == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("engine", ENGINE)
def test_allox_and_gavel_round_trip(engine: str) -> None:
    from hetsched.formulations.allox.matching import solve_assignment
    from hetsched.formulations.allox.milp import AlloxMilp
    from hetsched.formulations.allox.problem import build_matching, machines_for
    from hetsched.formulations.gavel.lp import GavelLp
    from hetsched.formulations.gavel.problem import AllocationProblem
    from tests.helpers import random_instance

    # tests/formulations/test_allox.py: 8 one-GPU jobs present at 0; the assignment is optimal.
    instance = random_instance(1, jobs=8, arrivals=False, gangs=False, elastic=False,
                               deadlines=False)
    matching = build_matching(instance, instance.jobs, machines_for(instance, False), False)
    value = matching.matching_value(solve_assignment(matching))
    assert pulp_highs_optimum(AlloxMilp(matching).lp) == pytest.approx(value, rel=1e-9)
    m, _ = from_pulp(AlloxMilp(matching).lp)
    result = solve_mip(m, engine, Budget.unlimited())
    assert result.outcome is Status.OPTIMAL
    assert result.objective == pytest.approx(value, rel=1e-9)
    # Gavel's max-min LP (tests/policies/test_baselines.py): t = 1 at the optimum, so -t = -1.
    allocation = AllocationProblem(("A", "B"), ("v100", "k80"),
                                   np.array([[3.0, 1.0], [1.0, 1.0]]), np.ones(2), np.ones(2),
                                   np.ones(2))
    assert pulp_highs_optimum(GavelLp(allocation, "max-min").lp) == pytest.approx(-1.0)
    lp, _ = from_pulp(GavelLp(allocation, "max-min").lp)
    assert not lp.integer.any()
    result = solve_mip(lp, engine, Budget.work(0.001))  # an LP: no limit even so
    assert result.outcome is Status.OPTIMAL
    assert result.objective == pytest.approx(-1.0, abs=1e-9)


# -- the MPS file --------------------------------------------------------------------------
def test_mps_file_holds_the_arrays(tmp_path: Path) -> None:
    import highspy

    from hetsched.formulations.mip.mps import write_mps

    # Every kind of row (<=, >=, =, ranged, free: left out) and column bound (free, fixed,
    # integer without upper bound, negative lower, default [0, inf)).
    m = model([1, -2.5, 0, 3, 1 / 3], [[1, 2, 0, 0, 0], [0, 1, 1, 0, 0], [1, 1, 1, 1, 0],
                                       [0, 0, 0, 1, 1], [0.1, 0, 0, 0, 1]],
              [-INF, 1, 2, -INF, -4], [4, 1, 5, INF, INF], [-INF, -3, 0, 2, 0],
              [INF, 7, INF, 2, INF], [True, False, True, False, False])
    path = tmp_path / "m.mps"
    write_mps(m, path)
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    assert highs.readModel(str(path)) == highspy.HighsStatus.kOk
    lp = highs.getLp()
    order = np.array([int(name[1:]) for name in lp.col_names_])
    rows = np.array([int(name[1:]) for name in lp.row_names_])
    for name, mine, theirs in (("cost", m.cost, lp.col_cost_), ("lower", m.col_lower,
                                                                 lp.col_lower_),
                               ("upper", m.col_upper, lp.col_upper_)):
        np.testing.assert_array_equal(np.asarray(theirs), mine[order], err_msg=name)
    integer = np.array(lp.integrality_) == highspy.HighsVarType.kInteger
    np.testing.assert_array_equal(integer, m.integer[order])
    assert sorted(rows.tolist()) == [0, 1, 2, 4]  # row 3 has no finite bound
    np.testing.assert_array_equal(np.asarray(lp.row_lower_), m.row_lower[rows])
    np.testing.assert_array_equal(np.asarray(lp.row_upper_), m.row_upper[rows])
    a = sp.csc_matrix((lp.a_matrix_.value_, lp.a_matrix_.index_, lp.a_matrix_.start_),
                      shape=(len(rows), len(order))).toarray()
    np.testing.assert_array_equal(a, m.matrix.toarray()[np.ix_(rows, order)])
