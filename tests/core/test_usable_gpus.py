"""GPUs of a type no job can run on count neither in utilisation nor in
the capacity bounds; every lower bound stays below what a replay achieves, at every
load the options allow; loads outside that range are refused."""

from __future__ import annotations

import math
import random

import pytest

from hetsched.core.bounds import lower_bounds, usable_gpus
from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.result import Assignment, Schedule, compute_metrics
from hetsched.core.settings import MAX_LOAD, MIN_LOAD, ReplaySettings
from hetsched.core.throughput import ThroughputTable
from hetsched.files.replay_inputs import scale_arrivals
from hetsched.replaying import rolling_policy
from hetsched.simulate.simulator import Simulator

#: Jobs run on V100s only: the 8 K80s are idle whatever a policy does.
TABLE = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 2.0),
                                   ("cnn", "v100", 2, "packed", 3.0)])
CLUSTER = Cluster((GpuType("v100"), GpuType("k80")),
                  (Node("v", "v100", 2), Node("k", "k80", 8)))


def jobs(seed: int) -> list[Job]:
    rng = random.Random(seed)
    return [Job(f"j{i}", rng.uniform(0.0, 5_000.0), "cnn", rng.choice((1, 2)),
                rng.uniform(100.0, 20_000.0)) for i in range(12)]


def test_usable_gpus_are_those_of_a_type_some_job_runs_on() -> None:
    assert usable_gpus(jobs(0), CLUSTER, TABLE) == 2
    bounds = lower_bounds(jobs(0), CLUSTER, TABLE)
    assert (bounds.gpus, bounds.usable_gpus) == (10, 2)
    # The capacity bound divides the least GPU-seconds by the 2 V100s, not by 10 GPUs.
    assert bounds.makespan_capacity_s == pytest.approx(bounds.total_gpu_seconds / 2)
    assert bounds.offered_load == pytest.approx(
        bounds.total_gpu_seconds / (2 * bounds.arrival_span_s))


@pytest.mark.parametrize("load", [MIN_LOAD, 1.0, 7.0, MAX_LOAD])
@pytest.mark.parametrize("name", ["fifo", "srtf", "tiresias", "gavel"])
def test_bounds_never_exceed_what_a_replay_achieves(name: str, load: float) -> None:
    for seed in range(2):
        work = scale_arrivals(jobs(seed), load)
        policy = rolling_policy(name, settings=ReplaySettings(backend="highs", time_limit_s=None))
        replay = Simulator(CLUSTER, work, policy, truth=TABLE).run()
        summary = replay.summary()
        bounds = lower_bounds(work, CLUSTER, TABLE)
        assert summary["completed"] == 12
        # Exact in real numbers; the replay's times carry the clock's rounding (arrivals
        # up to 5e6 s here: a few 1e-10 s), hence the 1e-12 relative slack.
        assert isinstance(summary["avg_jct_s"], float)
        assert isinstance(summary["makespan_s"], float)
        assert summary["avg_jct_s"] >= bounds.avg_jct_s * (1 - 1e-12)
        assert summary["makespan_s"] >= bounds.makespan_s * (1 - 1e-12)
        busy = sum(r.gpu_seconds for r in replay.records.values())
        assert summary["usable_gpus"] == 2
        assert summary["utilization"] == pytest.approx(busy / (2 * summary["makespan_s"]))
        assert summary["utilization_all_gpus"] == pytest.approx(
            busy / (10 * summary["makespan_s"]))
        assert 0 < summary["utilization"] <= 1 + 1e-12


@pytest.mark.parametrize("load", [1e-300, 1e-4, 1e4, math.inf, math.nan, 0.0, -1.0])
def test_loads_outside_the_range_are_refused(load: float) -> None:
    with pytest.raises(InputError, match="load: bad load"):
        scale_arrivals(jobs(0), load)


def test_a_load_that_pushes_arrivals_past_the_time_limit_is_refused() -> None:
    # Arrivals 1e8 s apart at load 1/1000: the second arrives at 1e11 s > 1e10.
    spread = [Job("a", 0.0, "cnn", 1, 10.0), Job("b", 1e8, "cnn", 1, 10.0)]
    with pytest.raises(InputError, match="load: load too small for this trace"):
        scale_arrivals(spread, MIN_LOAD)


def test_static_utilisation_counts_usable_gpus() -> None:
    # Two jobs of 100 s on the two V100s: busy 200 GPU-s over a 100 s makespan; the 8 K80s
    # nobody can use do not count: utilisation 1, not 0.2.
    work = (Job("a", 0.0, "cnn", 1, 200.0), Job("b", 0.0, "cnn", 1, 200.0))
    instance = Instance(CLUSTER, work, TABLE)
    schedule = Schedule((Assignment("a", "v100", ("v/0",), 0.0, 100.0),
                         Assignment("b", "v100", ("v/1",), 0.0, 100.0)))
    assert compute_metrics(instance, schedule).utilization == pytest.approx(1.0)
