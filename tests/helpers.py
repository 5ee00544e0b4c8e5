"""What the tests share: the project's paths, the checker as an assertion, the CLI's exit
2, and the instances and profiles several test modules build (imported from here, never
from another test module or from conftest)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hetsched.check import check
from hetsched.data import Cluster, GpuType, Instance, Job, Node
from hetsched.profiles import Profile, ProfilePoint
from hetsched.result import Schedule
from hetsched.throughput import Placement, ThroughputTable

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
#: Real data measured by others lives beside the project (never copied into it).
SHARED_DATA = ROOT.parent / "shared" / "data"


def assert_valid(instance: Instance, schedule: Schedule, *, complete: bool = True) -> None:
    """Fail with the checker's violations if ``schedule`` is not valid for ``instance``."""
    violations = check(instance, schedule, complete=complete)
    assert not violations, "\n".join(map(str, violations))


def exits_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI with ``args``; it must exit 2 without a traceback; its stderr."""
    from hetsched.cli import main

    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "Traceback" not in err
    assert "internal error" not in err
    return err


# --- random small instances (formulation properties, replays) -------------------------

JOB_TYPES = ("cnn", "lm", "rl")


def random_instance(seed: int, jobs: int = 4, *, deadlines: bool = True, arrivals: bool = True,
                    elastic: bool = True, weights: bool = False, gangs: bool = True
                    ) -> Instance:
    """A small random instance: a 2-GPU fast node, a 1-GPU fast node and a 2-GPU slow node;
    jobs of 1 or 2 GPUs with times of a few hundred seconds."""
    rng = np.random.default_rng(seed)
    cluster = Cluster((GpuType("fast"), GpuType("slow")),
                      (Node("f0", "fast", 2), Node("f1", "fast", 1), Node("s0", "slow", 2)))
    rows = []
    for job_type in JOB_TYPES:
        fast = float(rng.integers(5, 20))
        slow = float(rng.integers(2, 15))  # for some job types "slow" is as fast
        for gpu_type, speed in (("fast", fast), ("slow", slow)):
            rows.append((job_type, gpu_type, 1, Placement.PACKED, speed))
            rows.append((job_type, gpu_type, 2, Placement.PACKED, round(speed * 1.7, 2)))
            rows.append((job_type, gpu_type, 2, Placement.SPREAD, round(speed * 1.2, 2)))
    table = ThroughputTable.from_rows(rows)
    job_list = []
    for index in range(jobs):
        arrival = float(rng.integers(0, 200)) if arrivals else 0.0
        gang = int(rng.integers(1, 3)) if gangs else 1
        counts = (1, 2) if elastic and rng.random() < 0.3 else None
        if counts is not None:
            gang = 1
        work = float(rng.integers(1000, 6000))
        deadline = arrival + float(rng.integers(150, 900)) if deadlines and rng.random() < 0.5 \
            else None
        weight = float(rng.integers(1, 4)) if weights else 1.0
        job_list.append(Job(f"j{index}", arrival, str(rng.choice(JOB_TYPES)), gang, work,
                            deadline=deadline, weight=weight, user=f"u{index % 2}",
                            allowed_gpu_counts=counts))
    return Instance(cluster, tuple(job_list), table, name=f"random-{seed}")


# --- instance documents ------------------------------------------------------------------

#: Two single-GPU nodes: the 2-GPU job "wide" runs only spread, which fifo can do and the
#: deadline and allox models cannot (they run gangs packed on one node).
SPREAD_ONLY = {
    "gpu_types": [{"name": "v100"}],
    "nodes": [{"name": "a", "gpu_type": "v100", "num_gpus": 1},
              {"name": "b", "gpu_type": "v100", "num_gpus": 1}],
    "jobs": [{"id": "small", "arrival": 0, "job_type": "cnn", "num_gpus": 1, "work": 100},
             {"id": "wide", "arrival": 0, "job_type": "cnn", "num_gpus": 2, "work": 150}],
    "throughput": [
        {"job_type": "cnn", "gpu_type": "v100", "num_gpus": 1, "placement": "packed",
         "throughput": 10},
        {"job_type": "cnn", "gpu_type": "v100", "num_gpus": 2, "placement": "spread",
         "throughput": 15}],
}


# --- a profile generated exactly by the throughput model ----------------------------------

PACKED, SPREAD = Placement.PACKED, Placement.SPREAD
COUNTS = (1, 2, 4, 8, 16)

#: Compute time per step (s) of three batch sizes of one network on one GPU type.
COMPUTE = {"net (batch size 16)": 0.10, "net (batch size 32)": 0.18, "net (batch size 64)": 0.35}
#: Family overhead per placement: beta (s) and gamma (s per s of step time) for the
#: features log2 n and (n-1)/n.
BETA = {PACKED: (0.004, 0.010), SPREAD: (0.020, 0.050)}
GAMMA = {PACKED: (0.030, 0.000), SPREAD: (0.100, 0.200)}


def step_time(job: str, count: int, placement: Placement) -> float:
    """The generating model: seconds per step of ``job`` on ``count`` GPUs of "g"."""
    phi = (math.log2(count), (count - 1) / count)
    a = COMPUTE[job]
    return a + sum((b + c * a) * f for b, c, f in
                   zip(BETA[placement], GAMMA[placement], phi, strict=True))


def synthetic_profile(counts: tuple[int, ...] = COUNTS,
                      drop: set[tuple[str, int, Placement]] | None = None) -> Profile:
    """Throughputs generated exactly by the model (no noise, no count anomalies)."""
    drop = drop or set()
    points = []
    for job in COMPUTE:
        points.append(ProfilePoint(job, "g", 1, PACKED, 1 / step_time(job, 1, PACKED)))
        for placement in Placement:
            for n in counts:
                if n > 1 and (job, n, placement) not in drop:
                    points.append(ProfilePoint(job, "g", n, placement,
                                               n / step_time(job, n, placement)))
    return Profile(tuple(points))
