"""The ``allox`` model: brute force, assignment = flow = LP = MILP, total unimodularity."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hetsched.core.records import Instance
from hetsched.core.result import Result, Status
from hetsched.core.throughput import Placement
from hetsched.files.instance import load_instance
from hetsched.formulations.allox.matching import solve_assignment, solve_flow
from hetsched.formulations.allox.milp import AlloxMilp
from hetsched.formulations.allox.problem import MatchingProblem, build_matching, machines_for
from hetsched.formulations.pulp_backend import MipSettings
from hetsched.solving import SolveOptions, solve
from tests.helpers import INSTANCES, assert_valid, random_instance

#: Every test taking ``backend`` runs on each back-end of the allox model (tests/conftest.py).
pytestmark = pytest.mark.model("allox")



def run(instance: Instance, backend: str, **knobs: object) -> Result:
    """Solve with allox; the checker passes and the objective is the schedule's."""
    result = solve(instance, "allox",
                   SolveOptions(backend=backend, time_limit_s=60.0, deterministic=True), **knobs)
    assert_valid(instance, result.schedule)
    assert result.metrics is not None
    assert result.objective == pytest.approx(result.metrics.total_weighted_completion_s,
                                             rel=1e-12)
    return result


def brute_force_total_completion(instance: Instance) -> float:
    """Minimum total JCT over every job order and every GPU per job (one GPU each),
    each GPU running its jobs back to back from time now (all jobs present)."""
    gpus = [(g.id, g.gpu_type) for g in instance.cluster.gpus]
    jobs = instance.jobs
    best = float("inf")
    durations = {
        (job.id, gpu_type): job.work / speed
        for job in jobs for _, gpu_type in gpus
        if (speed := instance.throughput.throughput(job.job_type, gpu_type, 1,
                                                    Placement.PACKED)) > 0
    }
    for order in itertools.permutations(range(len(jobs))):
        for choice in itertools.product(range(len(gpus)), repeat=len(jobs)):
            clock = dict.fromkeys(range(len(gpus)), instance.now)
            total = 0.0
            for j in order:
                key = (jobs[j].id, gpus[choice[j]][1])
                if key not in durations:
                    total = float("inf")
                    break
                clock[choice[j]] += durations[key]
                total += clock[choice[j]] - jobs[j].arrival
            best = min(best, total)
    return best


def present_instance(seed: int, jobs: int = 4) -> Instance:
    """Single-GPU jobs all present at time 0, equal weights: where AlloX is exact."""
    return random_instance(seed, jobs=jobs, arrivals=False, gangs=False, elastic=False,
                           deadlines=False)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_equals_brute_force(backend: str, seed: int) -> None:
    instance = present_instance(seed, jobs=4 if seed % 2 else 5)
    expected = brute_force_total_completion(instance)
    result = run(instance, backend)
    assert result.status is Status.OPTIMAL, backend
    assert result.objective == pytest.approx(expected, rel=1e-9), backend
    assert result.gap == pytest.approx(0.0, abs=1e-9)


def matching_problem(instance: Instance) -> MatchingProblem:
    return build_matching(instance, instance.jobs, machines_for(instance, False), False)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_assignment_flow_lp_and_milp_agree(backend: str, seed: int) -> None:
    instance = present_instance(seed, jobs=8)
    problem = matching_problem(instance)
    value = problem.matching_value(solve_assignment(problem))
    assert problem.matching_value(solve_flow(problem)) == pytest.approx(value, rel=1e-9)
    relaxation = AlloxMilp(problem, relax=True)
    _, stats = relaxation.solve("highs", MipSettings())
    # Totally unimodular constraints: the LP optimum is integral and equals the matching.
    assert stats.objective == pytest.approx(value, rel=1e-9)
    assert relaxation.fractional() == []
    matching, stats = AlloxMilp(problem).solve(backend, MipSettings())
    assert matching is not None
    assert problem.matching_value(matching) == pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_arrays_are_the_readable_models_matrix_and_reach_its_optimum(seed: int) -> None:
    from hetsched.formulations.allox.arrays import AlloxArrays
    from hetsched.formulations.budget import Budget
    from hetsched.formulations.mip import solve_mip

    problem = matching_problem(present_instance(seed, jobs=8))
    value = problem.matching_value(solve_assignment(problem))
    arrays = AlloxArrays.of(problem)
    # The same model: the PuLP one's rows (job rows, then slot rows) and columns (by
    # job, class, level) hold the same 0/1 entries and costs.
    reference = AlloxMilp(problem)
    _, _, dense = reference.matrix()
    order = list(range(len(reference.assign)))
    keys = list(reference.assign)
    by_key = {(j, c, k): i for i, (j, (c, k)) in enumerate(keys)}
    ours = [by_key[int(j), int(c), int(k)]
            for j, c, k in zip(arrays.job, arrays.machine_class, arrays.level, strict=True)]
    assert sorted(ours) == order
    np.testing.assert_array_equal(arrays.model.matrix.toarray(), np.array(dense)[:, ours])
    np.testing.assert_allclose(arrays.model.cost,
                               [problem.cost(keys[i][0], keys[i][1]) for i in ours])
    for engine in ("highs", "cbc"):
        result = solve_mip(arrays.model, engine, Budget.unlimited())
        assert result.objective == pytest.approx(value, rel=1e-9)
        assert result.values is not None
        assert problem.matching_value(arrays.matching(result.values)) == pytest.approx(value)
    start = arrays.start(solve_assignment(problem))
    assert arrays.model.objective(start) == pytest.approx(value)


def test_level_bound_does_not_cut_off_the_optimum() -> None:
    # Levels per class are capped by an exchange argument (docs/formulations.md); with
    # every class given n levels the optimum must be the same.
    instance = present_instance(5, jobs=9)
    capped = matching_problem(instance)
    assert max(c.levels for c in capped.classes) < 9
    uncapped = MatchingProblem(capped.jobs, tuple(
        type(c)(c.gpu_type, c.size, c.free_at, c.machines, 9) for c in capped.classes),
        capped.processing)
    assert capped.matching_value(solve_assignment(capped)) == pytest.approx(
        uncapped.matching_value(solve_assignment(uncapped)), rel=1e-12)


def test_constraint_matrix_is_totally_unimodular() -> None:
    instance = present_instance(0, jobs=3)  # 6 rows x 9 columns: 5005 square submatrices
    model = AlloxMilp(matching_problem(instance))
    rows, _, dense = model.matrix()
    matrix = np.array(dense)
    # Heller-Tompkins: entries in {0, 1}, every column has one 1 in a job row and one in
    # a slot row (two row classes) -> the incidence matrix of a bipartite graph, TU.
    assert set(np.unique(matrix)) <= {0, 1}
    job_rows = np.array([name.startswith("job_") for name in rows])
    assert (matrix[job_rows].sum(axis=0) == 1).all()
    assert (matrix[~job_rows].sum(axis=0) == 1).all()
    # And directly: every square submatrix has determinant -1, 0 or 1.
    n_rows, n_cols = matrix.shape
    for size in range(1, min(n_rows, n_cols) + 1):
        for chosen_rows in itertools.combinations(range(n_rows), size):
            for chosen_cols in itertools.combinations(range(n_cols), size):
                det = round(np.linalg.det(matrix[np.ix_(chosen_rows, chosen_cols)]))
                assert det in (-1, 0, 1)


def test_tiny_matching_bound_and_schedule(backend: str) -> None:
    # The matching puts j1 then j0 on the v100 and j2 on the k80; it ignores arrivals:
    # cost 2 x 2255.95 + 2734.375 + 2025.714 = 9271.989 s from time 0, minus the arrivals
    # (86.5 s) = 9185.489 s, a lower bound on any one-GPU-per-job schedule. Realised with
    # arrivals, j1 waits until 12.3 s: total JCT 9284.289 s (the deadline model's optimum).
    instance = load_instance(INSTANCES / "tiny.json")
    result = run(instance, backend)
    assert result.status is Status.FEASIBLE
    assert result.bound == pytest.approx(9185.489, abs=1e-3)
    assert result.objective == pytest.approx(9284.289, abs=1e-3)


def test_alpha_runs_users_in_rounds() -> None:
    instance = present_instance(4, jobs=6)  # users u0 and u1
    result = run(instance, "matching", alpha=0.5)
    assert result.extra["rounds"] == 2
    assert result.status is Status.FEASIBLE  # rounds are not an exact method
    first = {a.job for a in result.schedule if instance.job_by_id[a.job].user == "u0"}
    starts = result.schedule.by_job()
    # u0 (tied at zero service, first by name) is matched first: on every GPU, its jobs
    # come before u1's
    for gpu in {g for a in result.schedule for g in a.gpus}:
        on_gpu = sorted((a for a in result.schedule if gpu in a.gpus), key=lambda a: a.start)
        users = [instance.job_by_id[a.job].user or "" for a in on_gpu]
        assert users == sorted(users)
    assert first
    assert all(starts[j].start >= 0 for j in first)
    full = run(instance, "matching", alpha=1.0)
    assert full.objective <= result.objective + 1e-9  # fairness costs completion time


def test_gang_jobs_use_whole_node_machines(backend: str) -> None:
    instance = random_instance(6, jobs=5, gangs=True, elastic=False)
    assert any(job.num_gpus == 2 for job in instance.jobs)
    result = run(instance, backend)
    assert result.status is Status.FEASIBLE
    assert result.extra["machines"] == "whole nodes"


def test_medium_instance_runs_fast_and_clean() -> None:
    instance = load_instance(INSTANCES / "medium.json")
    result = run(instance, "matching")
    assert result.status is Status.FEASIBLE
    assert len(result.schedule) == len(instance.jobs)


def test_no_bound_that_an_elastic_job_beats(backend: str) -> None:
    # One V100 node of 2 GPUs; job "e" (100 steps) may run on 1 GPU (1 step/s) or 2
    # (1.8 steps/s packed). The matching puts every job on one GPU: JCT 100 s, and it
    # used to report 100 s as a bound (status OPTIMAL). But on both GPUs the job ends at
    # 100 / 1.8 = 55.6 s, a schedule the checker accepts: 100 s bounds nothing.
    from hetsched.core.records import Cluster, GpuType, Job, Node
    from hetsched.core.result import Assignment, Schedule
    from hetsched.core.throughput import ThroughputTable

    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 1.0),
                                       ("cnn", "v100", 2, "packed", 1.8)])
    instance = Instance(Cluster((GpuType("v100"),), (Node("n", "v100", 2),)),
                        (Job("e", 0.0, "cnn", 1, 100.0, allowed_gpu_counts=(1, 2)),), table)
    faster = Schedule((Assignment("e", "v100", ("n/0", "n/1"), 0.0, 100.0 / 1.8),))
    assert_valid(instance, faster)
    result = run(instance, backend)
    assert result.objective == pytest.approx(100.0)  # the one-GPU run
    assert result.bound is None or result.bound <= 100.0 / 1.8 + 1e-9, backend
    assert result.status is not Status.OPTIMAL, backend
