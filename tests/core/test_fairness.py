"""Finish-time fairness (rho) and Jain's index (hetsched.core.fairness) against values
worked out by hand, a brute force of the contention average, and a replay's summary."""

from __future__ import annotations

import csv
import io
import math
import random

import pytest

from hetsched.core.fairness import (
    average_contention,
    fairness_figures,
    finish_time_fairness,
    isolated_speed,
    jain_index,
    quota_violations,
    type_speeds,
)
from hetsched.core.records import Job
from hetsched.core.result import Assignment
from hetsched.core.tenants import Quota, Tenant, TenantTable
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.replaying import replay

#: A gang of 2 runs 10 steps/s on V100s, 2 on K80s; one GPU 5 and 1.
TABLE = ThroughputTable({("m", "v100", 2, Placement.PACKED): 10.0,
                         ("m", "k80", 2, Placement.PACKED): 2.0,
                         ("m", "v100", 1, Placement.PACKED): 5.0,
                         ("m", "k80", 1, Placement.PACKED): 1.0})
CLUSTER = parse_cluster("v100=4,k80=4")


def job(name: str, arrival: float = 0.0, gpus: int = 2, work: float = 600.0, *,
        types: tuple[str, ...] | None = None, tenant: str | None = None) -> Job:
    return Job(name, arrival, "m", gpus, work, allowed_gpu_types=types, tenant=tenant)


def test_contention_is_the_time_average_of_active_jobs() -> None:
    # Active jobs: [0,5) 1, [5,10) 2, [10,15) 1, [15,20) 0, [20,30) 1.
    spans = {"a": (0.0, 10.0), "b": (5.0, 15.0), "c": (20.0, 30.0)}
    assert average_contention(spans) == pytest.approx({"a": 1.5, "b": 1.5, "c": 1.0})
    # A job that never finishes stays active: b shares [12, 15) with it (5x2 + 2x1 + 3x2
    # over 10 s), c all of [20, 30); it gets no figure itself.
    spans["d"] = (12.0, math.inf)
    assert average_contention(spans) == pytest.approx({"a": 1.5, "b": 1.8, "c": 2.0})


def test_contention_agrees_with_a_brute_force_over_pairs() -> None:
    # N_j = sum over every job i (j included) of the overlap of i's span with j's, / j's.
    draw = random.Random(5)
    for _ in range(30):
        spans: dict[str, tuple[float, float]] = {}
        for index in range(draw.randint(1, 12)):
            start = float(draw.randint(0, 20))  # integers: ties between events are common
            spans[f"j{index}"] = (start, start + draw.randint(1, 15))
        for name, (start, end) in spans.items():
            overlap = sum(max(0.0, min(end, e) - max(start, s)) for s, e in spans.values())
            assert average_contention(spans)[name] == pytest.approx(overlap / (end - start))


def test_isolated_speed_is_gavels_equal_split_of_each_type() -> None:
    speeds = type_speeds(job("x"), CLUSTER, TABLE)
    assert speeds == {"v100": 10.0, "k80": 2.0}
    # N = 8: a gang of 2 gets 4 / (8 x 2) = 0.25 of the time on each type (0.5 in all).
    assert isolated_speed(job("x"), CLUSTER, speeds, 8) == pytest.approx(0.25 * 10 + 0.25 * 2)
    # N = 2: 1 + 1 is more than all the time, scaled to 0.5 + 0.5.
    assert isolated_speed(job("x"), CLUSTER, speeds, 2) == pytest.approx(0.5 * 10 + 0.5 * 2)
    # A job kept off V100s loses that share: 0.25 x 2.
    only_k80 = job("y", types=("k80",))
    assert isolated_speed(only_k80, CLUSTER, type_speeds(only_k80, CLUSTER, TABLE),
                          8) == pytest.approx(0.5)


def test_rho_of_a_job_alone_on_v100s_is_below_one() -> None:
    # Alone (N = 1) its fair share is half its time on V100s and half on K80s: 6 steps/s,
    # 100 s for 600 steps; on V100s from its arrival it takes 60 s: rho = 0.6.
    assert finish_time_fairness([job("x")], {"x": 60.0}, CLUSTER, TABLE) == \
        pytest.approx({"x": 0.6})


def test_two_jobs_one_after_the_other_on_one_gpu() -> None:
    # One V100 at 5 steps/s; a and b (600 steps, 120 s alone) arrive at 0; a runs first.
    # a: [0, 120) with 2 jobs active, half the GPU: 240 s isolated, rho 0.5.
    # b: [0, 240), 2 then 1 active, N = 1.5: 180 s isolated, rho 240 / 180 = 4/3.
    cluster = parse_cluster("v100=1")
    jobs = [job("a", gpus=1), job("b", gpus=1)]
    ran = replay(jobs, cluster, "fifo", throughput=TABLE)
    assert ran.summary.max_rho == pytest.approx(4 / 3)
    assert ran.summary.mean_rho == pytest.approx((0.5 + 4 / 3) / 2)
    assert ran.summary.rho_above_1 == pytest.approx(0.5)
    assert finish_time_fairness(jobs, {"a": 120.0, "b": 240.0}, cluster, TABLE) == \
        pytest.approx({"a": 0.5, "b": 4 / 3})
    assert ran.summary.tenant_jain_index == 1.0  # one tenant
    # jobs.csv has each job's tenant (none: empty) and rho.
    rows = list(csv.DictReader(io.StringIO(ran.replay.files()["jobs.csv"])))
    assert [(r["job"], r["tenant"], float(r["rho"])) for r in rows] == \
        [("a", "", pytest.approx(0.5)), ("b", "", pytest.approx(4 / 3))]


def test_tenants_in_a_replay() -> None:
    # Two tenants' jobs side by side on two V100s, 120 s each: equal GPU time.
    cluster = parse_cluster("v100=2")
    jobs = [job("a", gpus=1, tenant="x"), job("b", gpus=1, tenant="y")]
    ran = replay(jobs, cluster, "fifo", throughput=TABLE)
    assert ran.summary.tenant_jain_index == 1.0
    rows = list(csv.DictReader(io.StringIO(ran.replay.files()["jobs.csv"])))
    # Both alone on a GPU each with 2 jobs over 2 GPUs: a whole GPU is their 1/2 share.
    assert [(r["tenant"], float(r["rho"])) for r in rows] == [("x", 1.0), ("y", 1.0)]


def test_jain_index() -> None:
    assert jain_index([3.0, 3.0, 3.0]) == 1.0
    assert jain_index([1.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain_index([1.0, 2.0]) == pytest.approx(9 / 10)
    assert jain_index([0.0, 0.0]) == 1.0
    assert math.isnan(jain_index([]))
    with pytest.raises(ValueError, match="finite values >= 0"):
        jain_index([1.0, -1.0])


def run(name: str, start: float, end: float, gpus: int = 1, gpu_type: str = "v100"
        ) -> Assignment:
    return Assignment(name, gpu_type, tuple(f"{gpu_type}-{i}" for i in range(gpus)), start, end,
                      1.0)


def test_tenant_index_weighs_gpu_time() -> None:
    jobs = [job("a1", tenant="a"), job("b1", tenant="b"), job("b2", tenant="b"), job("c1")]
    ran = [run("a1", 0, 10), run("b1", 0, 10), run("b2", 0, 10, gpus=2)]
    # c1 (tenant "default") got none: x = (10, 30, 0), 40^2 / (3 x 1,000).
    figures = fairness_figures(jobs, {}, ran, CLUSTER, TABLE)
    assert figures.tenant_jain_index == pytest.approx(1600 / 3000)
    assert math.isnan(figures.max_rho)
    assert figures.quota_violation_gpu_s == 0.0  # no quotas
    # b weighs 3 and default is left out of the jobs: (10, 10), equal.
    weighted = fairness_figures(jobs[:3], {}, ran, CLUSTER, TABLE,
                                TenantTable((Tenant("b", 3.0),)))
    assert weighted.tenant_jain_index == pytest.approx(1.0)


QUOTAS = TenantTable((Tenant("a", quotas={"v100": Quota(2)}),
                      Tenant("b", quotas={"v100": Quota(2)})))


def test_gpus_held_beyond_a_quota_while_the_owner_waits_are_violations() -> None:
    # 4 V100s, 2 each. b's 4-GPU job runs from 0 to 100, 2 beyond its quota; a's 2-GPU job
    # arrives at 10 and waits to 100: 2 GPUs owed for 90 s, 180 GPU-s.
    jobs = [job("b1", 0.0, gpus=4, tenant="b"), job("a1", 10.0, gpus=2, tenant="a")]
    ran = [run("b1", 0, 100, gpus=4), run("a1", 100, 150, gpus=2)]
    finish = {"b1": 100.0, "a1": 150.0}
    runs_on = {"b1": ["v100"], "a1": ["v100"]}
    assert quota_violations(jobs, ran, finish, runs_on, QUOTAS) == pytest.approx(180.0)
    # A 1-GPU job of a's is owed 1 GPU only: 90 GPU-s.
    small = [jobs[0], job("a1", 10.0, gpus=1, tenant="a")]
    assert quota_violations(small, [ran[0], run("a1", 100, 150)], finish, runs_on,
                            QUOTAS) == pytest.approx(90.0)
    # Nothing is owed for a type the waiting job cannot run on, nor to a tenant without a
    # quota there, nor when b's quota covers what it holds.
    assert quota_violations(jobs, ran, finish, {"b1": ["v100"], "a1": ["k80"]},
                            QUOTAS) == 0.0
    assert quota_violations(jobs, ran, finish, runs_on,
                            TenantTable((Tenant("b", quotas={"v100": Quota(2)}),))) == 0.0
    assert quota_violations(jobs, ran, finish, runs_on,
                            TenantTable((Tenant("b", quotas={"v100": Quota(4)}),
                                         Tenant("a", quotas={"v100": Quota(2)})))) == 0.0


def test_a_preempted_job_waits_again_and_a_finished_one_does_not() -> None:
    # b1 holds 3 of the 4 V100s from 0 to 100, 1 beyond b's quota. a1 (1 GPU) runs 0-20
    # and 50-80: it waits from 20 to 50 (preempted), owed 1 GPU: 30 GPU-s; at 80 it is done.
    jobs = [job("b1", 0.0, gpus=3, tenant="b"), job("a1", 0.0, gpus=1, tenant="a")]
    ran = [run("b1", 0, 100, gpus=3), run("a1", 0, 20), run("a1", 50, 80)]
    finish = {"b1": 100.0, "a1": 80.0}
    runs_on = {"b1": ["v100"], "a1": ["v100"]}
    assert quota_violations(jobs, ran, finish, runs_on, QUOTAS) == pytest.approx(30.0)


def test_a_replay_counts_violations_with_the_tenant_table() -> None:
    # fifo on 4 V100s, 2-GPU jobs of 60 s: b1 and b2 start at 0, a1 arrives at 10. With
    # the quotas not kept, a1 waits until 60 while b holds 2 GPUs beyond its quota:
    # 2 GPUs x 50 s. Kept (the default), b2, started last, gives its GPUs back at 10.
    cluster = parse_cluster("v100=4")
    jobs = [job("b1", 0.0, tenant="b"), job("b2", 0.0, tenant="b"),
            job("a1", 10.0, tenant="a")]
    loose = replay(jobs, cluster, "fifo", throughput=TABLE, tenants=QUOTAS, keep_tenants=False)
    assert loose.summary.quota_violation_gpu_s == pytest.approx(100.0)
    assert replay(jobs, cluster, "fifo", throughput=TABLE).summary.quota_violation_gpu_s \
        == 0.0  # no table, no quotas
    kept = replay(jobs, cluster, "fifo", throughput=TABLE, tenants=QUOTAS)
    assert kept.summary.quota_violation_gpu_s == 0.0
    assert kept.replay.records["a1"].first_start == 10.0
    assert kept.replay.records["b2"].preemptions == 1
    assert kept.replay.records["b1"].preemptions == 0
