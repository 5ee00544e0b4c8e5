"""Finish-time fairness by Sia's rule (hetsched.core.elastic_fairness): the job alone on
its share C / N_avg of each type's GPUs, interpolated between whole GPUs, averaged over
the types by their GPUs; each case worked out by hand."""

from __future__ import annotations

import math

import pytest

from hetsched.core.elastic_fairness import AloneTimes, elastic_finish_time_fairness
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import Placement

E = "e (elastic)"
# 16 GPUs of a (4 nodes of 4) and 16 of b (2 nodes of 8): C = 32.
CLUSTER = Cluster((GpuType("a"), GpuType("b")),
                  tuple(Node(f"a{i}", "a", 4) for i in range(4))
                  + tuple(Node(f"b{i}", "b", 8) for i in range(2)))
COUNTS = tuple(range(1, 33))


class Linear:
    """``e`` at 10 n steps/s on a and 5 n on b, on any placement; after 400 steps, half
    that (its second epoch)."""

    def throughput(self, job_type: str, gpu_type: str, num_gpus: int,
                   placement: Placement) -> float:
        return {"a": 10.0, "b": 5.0}[gpu_type] * num_gpus if job_type == E else 0.0

    def throughput_after(self, job_type: str, gpu_type: str, num_gpus: int,
                         placement: Placement, done: float) -> float:
        speed = self.throughput(job_type, gpu_type, num_gpus, placement)
        return speed / 2 if done >= 400 else speed

    def speed_change_after(self, job_type: str, done: float) -> float | None:
        return 400.0 if done < 400 else None


def _job(name: str, work: float = 800.0) -> Job:
    return Job(name, 0.0, E, 1, work, allowed_gpu_counts=COUNTS)


def test_alone_each_epoch_at_its_best_count_within_the_type() -> None:
    alone = AloneTimes(CLUSTER, Linear())
    # 800 steps on at most 10 GPUs of a: 400 at 100/s, then 400 at 50/s: 4 + 8 = 12 s.
    assert alone.seconds(_job("j"), "a", 10) == pytest.approx(12.0)
    # At most 40 GPUs of b: b has 16; 400 / 80 + 400 / 40 = 15 s.
    assert alone.seconds(_job("j"), "b", 40) == pytest.approx(15.0)
    # A job of 300 steps ends in its first epoch: 300 / 10 on one GPU of a.
    assert alone.seconds(_job("k", 300.0), "a", 1) == pytest.approx(30.0)


def test_the_share_is_interpolated_and_averaged_over_the_types() -> None:
    # Three jobs active together over [0, 100]: N_avg = 3, share 32 / 3 = 10.667 GPUs.
    # On a: 10 GPUs 4 + 8 = 12 s, 11 GPUs 400/110 + 400/55 = 10.909 s: 12 - 1.091 x
    # 0.667 = 11.273 s; on b: 24 and 21.818 s: 22.545 s; each type 16 GPUs: the mean,
    # 16.909 s, plus one start of 5 s: 21.909 s. rho = 100 / 21.909.
    jobs = [_job(f"j{i}") for i in range(3)]
    rho = elastic_finish_time_fairness(jobs, {j.id: 100.0 for j in jobs}, CLUSTER,
                                       Linear(), start_s=5.0)
    a = 12.0 + (400 / 110 + 400 / 55 - 12.0) * (32 / 3 - 10)
    b = 24.0 + (400 / 55 + 800 / 55 - 24.0) * (32 / 3 - 10)
    assert rho["j0"] == pytest.approx(100.0 / ((a + b) / 2 + 5.0))
    assert a == pytest.approx(11.2727, abs=1e-4)


def test_under_one_gpu_the_share_stretches_one_gpus_time() -> None:
    # 40 jobs over [0, 100]: share 0.8 GPU. One GPU: a 40 + 80 = 120 s, b 240 s; over
    # 0.8: 150 and 300 s, mean 225 s: rho 100 / 225.
    jobs = [_job(f"j{i}") for i in range(40)]
    rho = elastic_finish_time_fairness(jobs, {j.id: 100.0 for j in jobs}, CLUSTER, Linear())
    assert rho["j0"] == pytest.approx(100.0 / 225.0)


def test_a_job_that_did_not_finish_has_no_rho_and_stays_active() -> None:
    # j0 ends at 100, j1 never: j0's contention is 2, share 16 GPUs: a 400/160 + 400/80
    # = 7.5 s, b 15 s; mean 11.25 s.
    jobs = [_job("j0"), _job("j1")]
    rho = elastic_finish_time_fairness(jobs, {"j0": 100.0}, CLUSTER, Linear())
    assert set(rho) == {"j0"}
    assert rho["j0"] == pytest.approx(100.0 / 11.25)
    # A type the job may not use is left out of the mean.
    only_b = Job("j2", 0.0, E, 1, 800.0, allowed_gpu_counts=COUNTS, allowed_gpu_types=("b",))
    rho = elastic_finish_time_fairness([only_b], {"j2": 15.0}, CLUSTER, Linear())
    assert rho["j2"] == pytest.approx(1.0)
    assert math.isfinite(rho["j2"])
