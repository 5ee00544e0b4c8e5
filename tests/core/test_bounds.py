"""Lower bounds on average JCT and makespan: hand-computed cases, and replays that never
beat them (and meet them where the bound is tight)."""

from __future__ import annotations

import math

import pytest

from hetsched.core.bounds import Bounds, isolated_duration, least_gpu_seconds, lower_bounds
from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.policies.rolling import RollingFifo
from hetsched.simulate.simulator import Simulator

PACKED, SPREAD = Placement.PACKED, Placement.SPREAD

# One V100 server of 4 GPUs, two K80 servers of 4: 12 GPUs.
CLUSTER = Cluster((GpuType("v100"), GpuType("k80")),
                  (Node("v", "v100", 4), Node("k0", "k80", 4), Node("k1", "k80", 4)))
TABLE = ThroughputTable.from_rows([
    ("a", "v100", 1, PACKED, 10.0), ("a", "k80", 1, PACKED, 5.0),
    ("a", "v100", 2, PACKED, 16.0), ("a", "k80", 2, PACKED, 12.0),
    # 8 GPUs: the V100 server is too small; K80 only spread over both servers.
    ("a", "v100", 8, PACKED, 100.0), ("a", "k80", 8, PACKED, 60.0),
    ("a", "k80", 8, SPREAD, 40.0),
    ("b", "k80", 1, PACKED, 4.0),
])


def test_isolated_duration_takes_the_fastest_configuration_that_fits() -> None:
    # 2 GPUs of "a": V100 packed, 160 steps at 16 steps/s = 10 s (K80: 13.3 s).
    assert isolated_duration(Job("B", 0, "a", 2, 160.0), CLUSTER, TABLE) == 10.0
    # 8 GPUs: 100 steps/s needs 8 V100 (there are 4), 60 needs 8 K80 in one server (4
    # per server): only K80 spread fits, 800 / 40 = 20 s.
    assert isolated_duration(Job("D", 0, "a", 8, 800.0), CLUSTER, TABLE) == 20.0
    # A job confined to K80 runs at 5 steps/s: 100 / 5 = 20 s, not 10.
    confined = Job("k", 0, "a", 1, 100.0, allowed_gpu_types=("k80",))
    assert isolated_duration(confined, CLUSTER, TABLE) == 20.0
    # An elastic job may take 2 GPUs: 16 > 10 steps/s, 160 / 16 = 10 s.
    elastic = Job("e", 0, "a", 1, 160.0, allowed_gpu_counts=(1, 2))
    assert isolated_duration(elastic, CLUSTER, TABLE) == 10.0
    # ...but its least GPU-seconds come from 1 V100: 10 steps/s per GPU -> 16 GPU-s
    # (2 V100: 8 steps/s per GPU -> 20 GPU-s).
    assert least_gpu_seconds(elastic, CLUSTER, TABLE) == 16.0


def test_lower_bounds_by_hand() -> None:
    jobs = [Job("A", 0.0, "a", 1, 100.0), Job("B", 5.0, "a", 2, 160.0),
            Job("C", 20.0, "b", 1, 40.0), Job("D", 30.0, "a", 8, 800.0)]
    bounds = lower_bounds(jobs, CLUSTER, TABLE)
    # Isolated: A 100/10 = 10, B 160/16 = 10, C 40/4 = 10, D 800/40 = 20 s.
    assert bounds.avg_jct_s == pytest.approx((10 + 10 + 10 + 20) / 4)
    # Longest job: D arrives at 30 s and needs 20 s.
    assert bounds.makespan_longest_job_s == pytest.approx(50.0)
    # GPU-seconds at the best throughput per GPU: A 100/10 = 10, B 160/8 = 20 (2 V100
    # give 8 per GPU), C 40/4 = 10, D 800/5 = 160 (8 K80 spread give 5 per GPU);
    # 200 GPU-s over 12 GPUs.
    assert bounds.total_gpu_seconds == pytest.approx(200.0)
    assert bounds.makespan_capacity_s == pytest.approx(200 / 12)
    # Tails: t=30: 30 + 160/12 = 43.33; t=20: 20 + 170/12 = 34.17; t=5: 5 + 190/12;
    # t=0: 200/12.
    assert bounds.makespan_tail_capacity_s == pytest.approx(30 + 160 / 12)
    assert bounds.makespan_s == pytest.approx(50.0)
    assert (bounds.gpus, bounds.jobs) == (12, 4)
    assert set(bounds.as_dict()) == {
        "bound_avg_jct_s", "bound_makespan_s", "bound_makespan_longest_job_s",
        "bound_makespan_capacity_s", "bound_makespan_tail_capacity_s",
        "bound_total_gpu_seconds", "offered_load"}
    # 200 GPU-s offered over 30 s of arrivals on 12 GPUs.
    assert bounds.arrival_span_s == 30.0
    assert bounds.offered_load == pytest.approx(200 / (12 * 30))


ONE_GPU = Cluster((GpuType("v100"),), (Node("v", "v100", 1),))


def _fifo_replay(jobs: list[Job], cluster: Cluster) -> dict[str, float | int | bool]:
    return Simulator(cluster, jobs, RollingFifo(), truth=TABLE).run().summary()


def test_capacity_bound_is_tight_on_one_gpu() -> None:
    # Three 10 s jobs at once on one GPU: any order ends at 30 s (capacity), the best
    # average JCT is (10 + 20 + 30) / 3 = 20, above the isolated bound of 10.
    jobs = [Job(str(i), 0.0, "a", 1, 100.0) for i in range(3)]
    bounds = lower_bounds(jobs, ONE_GPU, TABLE)
    assert (bounds.avg_jct_s, bounds.makespan_longest_job_s) == (10.0, 10.0)
    assert bounds.makespan_capacity_s == bounds.makespan_s == 30.0
    assert bounds.offered_load == math.inf  # all at once
    summary = _fifo_replay(jobs, ONE_GPU)
    assert summary["makespan_s"] == pytest.approx(bounds.makespan_s)
    assert summary["avg_jct_s"] == pytest.approx(20.0)


def test_tail_capacity_bound_counts_late_arrivals() -> None:
    # One 10 s job at 0, two at 100 s: whatever runs first, the last ends at 120 s; the
    # plain capacity bound says 30 s and the longest job 110 s.
    jobs = [Job("0", 0.0, "a", 1, 100.0), Job("1", 100.0, "a", 1, 100.0),
            Job("2", 100.0, "a", 1, 100.0)]
    bounds = lower_bounds(jobs, ONE_GPU, TABLE)
    assert bounds.makespan_capacity_s == 30.0
    assert bounds.makespan_longest_job_s == 110.0
    assert bounds.makespan_tail_capacity_s == bounds.makespan_s == 120.0
    assert _fifo_replay(jobs, ONE_GPU)["makespan_s"] == pytest.approx(120.0)


def test_replays_never_beat_the_bounds() -> None:
    # Every third job is "b" (1 K80 only); the others alternate 1 and 2 GPUs of "a".
    jobs = [Job(f"j{i}", 7.0 * i, "a", 1 + (i % 2), 40.0 + 30 * i) if i % 3 else
            Job(f"j{i}", 7.0 * i, "b", 1, 40.0 + 30 * i) for i in range(12)]
    bounds = lower_bounds(jobs, CLUSTER, TABLE)
    summary = _fifo_replay(jobs, CLUSTER)
    assert summary["completed"] == 12
    assert summary["avg_jct_s"] >= bounds.avg_jct_s - 1e-9
    assert summary["makespan_s"] >= bounds.makespan_s - 1e-9


def test_bad_bounds_and_jobs_are_input_errors() -> None:
    with pytest.raises(InputError, match="cannot run"):
        lower_bounds([Job("x", 0.0, "b", 2, 10.0)], CLUSTER, TABLE)
    with pytest.raises(InputError, match="no jobs"):
        lower_bounds([], CLUSTER, TABLE)
    with pytest.raises(InputError, match="bad bound"):
        Bounds(1, math.nan, 1.0, 1.0, 1.0, 1.0, 1.0, 1)
