"""Weighted max-min by water-filling (hetsched.formulations.gavel.water_filling), on cases
worked out by hand, against the single-floor max-min LP."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.formulations.gavel.matrix import solve_matrix
from hetsched.formulations.gavel.water_filling import water_filling
from tests.helpers import allocation_problem


def test_weights_are_kept_above_a_held_floor() -> None:
    # 6 GPUs of one type (1 step/s) and seven 1-GPU jobs: job 0 of weight 10, jobs 1-2 of
    # weight 2, jobs 3-6 of weight 1. In proportion to the weights job 0 would get 10/18
    # of 6 GPUs, 3.3: it is held at 1 GPU (its gang), which sets the floor. Water-filling
    # goes on: the other six share 5 GPUs as 2 : 2 : 1 : 1 : 1 : 1, 1.25 GPUs for the
    # weight-2 jobs, held at 1 each; the four others share the 3 left, 0.75 each.
    case = allocation_problem([[1.0]] * 7, [1] * 7, [6], [10, 2, 2, 1, 1, 1, 1])
    filled = water_filling(case)
    assert filled.fractions[:, 0] == pytest.approx([1, 1, 1, 0.75, 0.75, 0.75, 0.75],
                                                   abs=1e-6)
    # The single-floor LP has the same floor (job 0's), then gives the rest by the
    # greatest sum of rho = s / w x rate / E, which favours the jobs of least weight:
    # a whole GPU to each of jobs 3-6 and half of one to each of the weight-2 jobs.
    single = solve_matrix(case)
    assert single.value == pytest.approx(filled.value, rel=1e-6)
    assert single.fractions[:, 0] == pytest.approx([1, 0.5, 0.5, 1, 1, 1, 1], abs=1e-6)


def test_a_job_held_on_one_type_leaves_the_other_to_the_rest() -> None:
    # 1 V100 and 1 K80. Job 0 runs on K80s only (1 step/s), jobs 1 and 2 on both (V100 2
    # steps/s, K80 1). Equal shares: E_0 = 0.5, E_1 = E_2 = 1.5. Weights 1. Job 0 can get
    # at most the whole K80: rho_0 = 1 / 0.5 = 2. Jobs 1 and 2 share the V100 and what job
    # 0 leaves of the K80. With K80 share k, job 0 has rho 2k; jobs 1 and 2, each half
    # the V100 and (1 - k) / 2 of the K80, (1 + (1 - k) / 2) / 1.5. They are equal at
    # k = 3/7, rho = 6/7 for all three: all hold the floor together, and water-filling
    # ends where max-min does.
    case = allocation_problem([[0.0, 1.0], [2.0, 1.0], [2.0, 1.0]], [1, 1, 1], [1, 1], [1, 1, 1])
    filled = water_filling(case)
    assert filled.value == pytest.approx(6 / 7, rel=1e-6)
    assert case.normalised(filled.fractions) == pytest.approx([6 / 7] * 3, rel=1e-6)
    assert case.is_feasible(filled.fractions, 1e-9)


def test_gpu_shares_count_gpus_not_rates() -> None:
    # One V100 and one K80; job A runs at 3 steps/s on the V100 and 1 on the K80 (its
    # equal-share rate E = 2), jobs B and C at 1 on either (E = 1); weights 1, one GPU each.
    # By normalised rates, A on the V100 gains most: A gets half of the V100 (rho 3 x 0.5
    # / 2 = 0.75), B and C a quarter of it and half of the K80 each (rho 0.75): GPUs held
    # 0.5, 0.75, 0.75. By GPUs held, the 2 GPUs are split evenly: 2/3 each.
    case = allocation_problem([[3.0, 1.0], [1.0, 1.0], [1.0, 1.0]], [1, 1, 1], [1, 1], [1, 1, 1])
    rates = water_filling(case)
    assert case.normalised(rates.fractions) == pytest.approx([0.75] * 3, rel=1e-6)
    assert rates.fractions.sum(axis=1) == pytest.approx([0.5, 0.75, 0.75], abs=1e-6)
    gpus = water_filling(case, share="gpus")
    assert gpus.fractions.sum(axis=1) == pytest.approx([2 / 3] * 3, abs=1e-6)
    assert gpus.value == pytest.approx(2 / 3, rel=1e-6)
    assert case.is_feasible(gpus.fractions, 1e-9)
    with pytest.raises(ValueError, match="share"):
        water_filling(case, share="rates")


def test_hierarchical_gives_a_tenant_what_its_small_job_cannot_take() -> None:
    # 10 GPUs of one type. Tenant A (weight 1) has jobs a1 (1 GPU) and a2 (8 GPUs), shown
    # with half of A's weight each; tenant B (weight 1) has b1 (8 GPUs). Flat: the levels
    # rise as 0.5 L, 0.5 L, L; a1 stops at its 1 GPU when L = 2, then a2 and b1 share the
    # 9 left as 1 : 2, 3 and 6 GPUs: A holds 4 of 10. Hierarchical: once a1 stops, its
    # half of A's weight goes to a2, which rises from 1 GPU as fast as b1 does from 2:
    # 1 + (1 + t) + (2 + t) = 10, t = 3, a2 4 and b1 5: A and B hold 5 GPUs each.
    case = allocation_problem([[1.0]] * 3, [1, 8, 8], [10], [0.5, 0.5, 1.0])
    flat = water_filling(case, share="gpus")
    assert flat.fractions[:, 0] * case.scale_factors == pytest.approx([1, 3, 6], abs=1e-6)
    tenants = water_filling(case, share="gpus", groups=[0, 0, 1])
    assert tenants.fractions[:, 0] * case.scale_factors == pytest.approx([1, 4, 5], abs=1e-6)
    assert case.is_feasible(tenants.fractions, 1e-9)
    # Jobs of no tenant (-1) keep their own weights: the flat answer.
    alone = water_filling(case, share="gpus", groups=[-1, -1, -1])
    assert alone.fractions == pytest.approx(flat.fractions, abs=1e-6)
    with pytest.raises(ValueError, match="groups"):
        water_filling(case, groups=[0, 1])


def tenant_water_fill(gangs: list[int], tenant: list[int], weight: dict[int, float],
                      capacity: float) -> list[float]:
    """GPUs per job by hierarchical max-min, computed directly: tenants by weighted
    water-filling of GPUs (demand: the sum of their gangs), then each tenant's GPUs among
    its jobs by water-filling with equal weights (demand: a job's gang)."""
    from hetsched.core.shares import water_fill

    demand: dict[str, float] = {}
    for job, t in enumerate(tenant):
        demand[str(t)] = demand.get(str(t), 0.0) + gangs[job]
    of_tenant = water_fill(demand, {str(t): w for t, w in weight.items()}, capacity)
    held = [0.0] * len(gangs)
    for t, total in of_tenant.items():
        jobs = [j for j in range(len(gangs)) if str(tenant[j]) == t]
        inner = water_fill({str(j): float(gangs[j]) for j in jobs}, {}, total)
        for j in jobs:
            held[j] = inner[str(j)]
    return held


@pytest.mark.parametrize("seed", range(12))
def test_hierarchical_matches_tenant_then_job_water_filling(seed: int) -> None:
    # One GPU type, so GPUs held are all that counts: the LP's stages must give what
    # water-filling tenants first, then each tenant's jobs, gives (computed directly).
    rng = np.random.default_rng(seed)
    jobs = int(rng.integers(3, 9))
    gangs = [int(g) for g in rng.choice([1, 2, 4, 8], size=jobs)]
    tenant = [int(t) for t in rng.integers(0, 3, size=jobs)]
    weight = {t: float(rng.choice([1.0, 2.0, 4.0])) for t in set(tenant)}
    capacity = float(rng.integers(4, sum(gangs) + 1))
    count = {t: tenant.count(t) for t in set(tenant)}
    case = allocation_problem([[1.0]] * jobs, gangs, [capacity],
                   [weight[t] / count[t] for t in tenant])
    filled = water_filling(case, share="gpus", groups=tenant)
    held = filled.fractions[:, 0] * case.scale_factors
    assert held == pytest.approx(tenant_water_fill(gangs, tenant, weight, capacity),
                                 abs=1e-5)
    assert case.is_feasible(filled.fractions, 1e-9)
