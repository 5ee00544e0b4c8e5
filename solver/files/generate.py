"""Synthetic instances from a small built-in catalogue written for this project.

The catalogue's numbers are illustrative, chosen by the project to have the
shape real measurements have (the order of GPU types differs between job types,
multi-GPU scaling is sub-linear, spread placements are slower than packed); they
are not measurements and are not copied from any source. The distributions are
documented in docs/instance-format.md ("Synthetic instances").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetsched.core.errors import InputError
from hetsched.core.records import (
    MAX_CLUSTER_GPUS,
    MAX_DURATION_S,
    MAX_GPUS_PER_NODE,
    Cluster,
    GpuType,
    Instance,
    Job,
    Node,
    in_range,
)
from hetsched.core.throughput import Placement, ThroughputTable


@dataclass(frozen=True)
class JobClass:
    """A job type of the built-in catalogue.

    ``speed_v100`` is steps/s on one V100; ``relative`` the speed of one GPU of
    each type against a V100; ``efficiency`` the fraction of linear speed-up kept
    at each doubling of the GPU count (packed); ``spread_factor`` the speed of a
    spread gang against a packed one; ``max_gpus`` the largest gang.
    """

    name: str
    speed_v100: float
    relative: dict[str, float]
    efficiency: float
    spread_factor: float
    max_gpus: int

    def throughput(self, gpu_type: str, num_gpus: int, placement: Placement) -> float:
        """steps/s of this job class on ``num_gpus`` GPUs of ``gpu_type``."""
        if num_gpus > self.max_gpus:
            return 0.0
        speed = self.speed_v100 * self.relative[gpu_type] * num_gpus
        speed *= self.efficiency ** math.log2(num_gpus)
        if placement is Placement.SPREAD:
            speed *= self.spread_factor
        return float(f"{speed:.4g}")


GPU_TYPES: dict[str, GpuType] = {
    "k80": GpuType("k80", memory_gb=12, price_per_hour=0.45),
    "p100": GpuType("p100", memory_gb=16, price_per_hour=1.46),
    "v100": GpuType("v100", memory_gb=16, price_per_hour=2.48),
    "t4": GpuType("t4", memory_gb=16, price_per_hour=0.35),
    "a100": GpuType("a100", memory_gb=40, price_per_hour=3.67),
}

JOB_CLASSES: dict[str, JobClass] = {
    c.name: c
    for c in (
        JobClass("image-cnn-large", 8.0,
                 {"k80": 0.22, "p100": 0.55, "v100": 1.0, "t4": 0.40, "a100": 2.1}, 0.93, 0.70, 8),
        JobClass("image-cnn-small", 30.0,
                 {"k80": 0.30, "p100": 0.70, "v100": 1.0, "t4": 0.55, "a100": 1.6}, 0.85, 0.60, 8),
        JobClass("transformer-lm", 4.0,
                 {"k80": 0.15, "p100": 0.45, "v100": 1.0, "t4": 0.35, "a100": 2.6}, 0.90, 0.50, 8),
        JobClass("rnn-lm", 20.0,
                 {"k80": 0.35, "p100": 0.80, "v100": 1.0, "t4": 0.50, "a100": 1.4}, 0.88, 0.55, 8),
        # Memory-bound embedding lookups: a P100 beats a V100 here.
        JobClass("recommender", 45.0,
                 {"k80": 0.75, "p100": 1.50, "v100": 1.0, "t4": 0.80, "a100": 1.3}, 0.80, 0.40, 4),
        JobClass("rl-a3c", 12.0,
                 {"k80": 0.70, "p100": 0.95, "v100": 1.0, "t4": 0.80, "a100": 1.1}, 1.00, 1.00, 1),
    )
}
#: Probability of each job class.
CLASS_MIX = {"image-cnn-large": 0.25, "image-cnn-small": 0.25, "transformer-lm": 0.15,
             "rnn-lm": 0.15, "recommender": 0.10, "rl-a3c": 0.10}
#: Probability of each requested gang size (capped at the class's max_gpus and the
#: largest node).
GANG_MIX = {1: 0.70, 2: 0.10, 4: 0.12, 8: 0.08}
REFERENCE_GPU = "v100"


@dataclass(frozen=True)
class GeneratorSettings:
    """Parameters of :func:`generate`; documented in docs/instance-format.md."""

    jobs: int
    gpus: dict[str, int]
    seed: int = 0
    gpus_per_node: int = 4
    mean_interarrival_s: float = 120.0
    median_duration_s: float = 1800.0
    duration_sigma: float = 1.0
    deadline_fraction: float = 0.3
    elastic_fraction: float = 0.2
    users: int = 4

    def as_dict(self) -> dict[str, Any]:
        """The settings as recorded in the instance file's ``generator`` field."""
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in vars(self).items()}


def parse_gpu_counts(text: str) -> dict[str, int]:
    """``"v100=8,p100=4"`` -> ``{"v100": 8, "p100": 4}``, with clear errors."""
    counts: dict[str, int] = {}
    for part in text.split(","):
        name, sep, number = part.strip().partition("=")
        digits = number.strip()
        if not sep or not name or not (digits.isascii() and digits.isdigit()) or len(digits) > 9 \
                or not 1 <= int(digits) <= MAX_CLUSTER_GPUS:
            raise InputError("bad GPU count", path="gpus", value=part,
                             expected=f"TYPE=COUNT with COUNT an integer from 1 to "
                             f"{MAX_CLUSTER_GPUS}, e.g. v100=8")
        if name not in GPU_TYPES:
            raise InputError("unknown GPU type", path="gpus", value=name,
                             expected="one of " + ", ".join(GPU_TYPES))
        if name in counts:
            raise InputError("GPU type given twice", path="gpus", value=name,
                             expected="each type once")
        counts[name] = int(number)
    return counts


def _nodes(settings: GeneratorSettings) -> list[Node]:
    nodes = []
    for gpu_type, total in settings.gpus.items():
        index = 0
        left = total
        while left > 0:
            size = min(settings.gpus_per_node, left)
            nodes.append(Node(f"{gpu_type}-{index}", gpu_type, size, cpus=8 * size,
                              memory_gb=64.0 * size))
            left -= size
            index += 1
    return nodes


#: The most jobs, and the longest mean gap between arrivals (s), ``generate`` accepts:
#: together they keep arrivals below hetsched.core.records.MAX_TIME_S.
MAX_JOBS = 100_000
MAX_MEAN_INTERARRIVAL_S = 1e5


def _check_settings(settings: GeneratorSettings) -> None:
    """Every setting in its documented range, else an InputError naming the option."""
    total = sum(settings.gpus.values())
    checks = [
        ("jobs", settings.jobs, in_range(settings.jobs, 1, MAX_JOBS, integer=True),
         f"an integer from 1 to {MAX_JOBS:,}"),
        ("gpus", total, in_range(total, 1, MAX_CLUSTER_GPUS, integer=True),
         f"from 1 to {MAX_CLUSTER_GPUS:,} GPUs in all"),
        ("seed", settings.seed, in_range(settings.seed, 0, 2**64 - 1, integer=True),
         "an integer from 0 to 2^64 - 1"),
        ("gpus_per_node", settings.gpus_per_node,
         in_range(settings.gpus_per_node, 1, MAX_GPUS_PER_NODE, integer=True),
         f"an integer from 1 to {MAX_GPUS_PER_NODE}"),
        ("mean_interarrival_s", settings.mean_interarrival_s,
         in_range(settings.mean_interarrival_s, 0, MAX_MEAN_INTERARRIVAL_S, strict_low=True),
         f"seconds > 0 and <= {MAX_MEAN_INTERARRIVAL_S:g}"),
        ("median_duration_s", settings.median_duration_s,
         in_range(settings.median_duration_s, 0, MAX_DURATION_S, strict_low=True),
         f"seconds > 0 and <= {MAX_DURATION_S:g}"),
        ("duration_sigma", settings.duration_sigma, in_range(settings.duration_sigma, 0, 10),
         "a number from 0 to 10"),
        ("deadline_fraction", settings.deadline_fraction,
         in_range(settings.deadline_fraction, 0, 1), "a fraction in [0, 1]"),
        ("elastic_fraction", settings.elastic_fraction,
         in_range(settings.elastic_fraction, 0, 1), "a fraction in [0, 1]"),
        ("users", settings.users, in_range(settings.users, 1, 10**6, integer=True),
         "an integer from 1 to 1,000,000"),
    ]
    for option, value, ok, expected in checks:
        if not ok:
            raise InputError(f"bad {option.lstrip('-').replace('-', ' ')}", path=option,
                             value=value, expected=expected)


def generate(settings: GeneratorSettings) -> Instance:
    """A random instance drawn with ``settings`` (same seed, same instance)."""
    _check_settings(settings)
    rng = np.random.default_rng(settings.seed)
    cluster = Cluster(tuple(GPU_TYPES[t] for t in settings.gpus), tuple(_nodes(settings)))
    largest_node = max(node.num_gpus for node in cluster.nodes)
    class_names = list(CLASS_MIX)
    class_p = np.array(list(CLASS_MIX.values()))
    gang_sizes = list(GANG_MIX)
    gang_p = np.array(list(GANG_MIX.values()))

    jobs: list[Job] = []
    arrival = 0.0
    for index in range(settings.jobs):
        if index > 0:
            arrival += float(rng.exponential(settings.mean_interarrival_s))
        job_class = JOB_CLASSES[class_names[rng.choice(len(class_names), p=class_p)]]
        requested = int(gang_sizes[rng.choice(len(gang_sizes), p=gang_p)])
        num_gpus = min(requested, job_class.max_gpus, largest_node)
        duration = float(np.clip(
            settings.median_duration_s * rng.lognormal(0.0, settings.duration_sigma),
            120.0, 86400.0,
        ))
        work = round(duration * job_class.throughput(REFERENCE_GPU, num_gpus, Placement.PACKED))
        allowed = None
        if rng.random() < settings.elastic_fraction:
            options = {num_gpus // 2, num_gpus, num_gpus * 2}
            allowed = tuple(sorted(
                n for n in options if 1 <= n <= min(job_class.max_gpus, largest_node)
            ))
            if len(allowed) == 1:
                allowed = None
        deadline = None
        if rng.random() < settings.deadline_fraction:
            fastest = max(
                job_class.throughput(t, num_gpus, Placement.PACKED) for t in settings.gpus
            )
            slack = float(rng.uniform(1.5, 3.0))
            deadline = float(math.ceil(arrival + slack * work / fastest))
        jobs.append(Job(
            id=f"j{index:0{len(str(settings.jobs - 1))}d}", arrival=round(arrival, 1),
            job_type=job_class.name, num_gpus=num_gpus, work=float(max(work, 1)),
            deadline=deadline, weight=1.0, user=f"u{int(rng.integers(settings.users))}",
            allowed_gpu_counts=allowed,
        ))

    used = sorted({job.job_type for job in jobs})
    counts = sorted({n for job in jobs for n in job.gpu_counts})
    rows = []
    for name in used:
        for gpu_type in settings.gpus:
            for count in counts:
                for placement in Placement:
                    if placement is Placement.SPREAD and count == 1:
                        continue
                    speed = JOB_CLASSES[name].throughput(gpu_type, count, placement)
                    if speed > 0:
                        rows.append((name, gpu_type, count, placement, speed))
    return Instance(cluster, tuple(jobs), ThroughputTable.from_rows(rows), now=0.0)


def catalogue_table(gpu_types: Sequence[str] | Mapping[str, str],
                    counts: Sequence[int] = (1, 2, 4, 8, 16, 32, 64)) -> ThroughputTable:
    """Throughput of every catalogue job class on ``gpu_types`` (a mapping names, for each
    GPU type, the catalogue type whose speeds it takes), every count, both placements."""
    like = dict(gpu_types) if isinstance(gpu_types, Mapping) else {t: t for t in gpu_types}
    unknown = [t for t in like.values() if t not in GPU_TYPES]
    if unknown:
        raise InputError("GPU type not in the built-in catalogue", path="cluster_spec",
                         value=unknown[0], expected="one of " + ", ".join(GPU_TYPES)
                         + ", or give --throughput")
    rows = []
    for name, job_class in JOB_CLASSES.items():
        for gpu_type, source in like.items():
            for count in counts:
                for placement in Placement:
                    if placement is Placement.SPREAD and count == 1:
                        continue
                    speed = job_class.throughput(source, count, placement)
                    if speed > 0:
                        rows.append((name, gpu_type, count, placement, speed))
    return ThroughputTable.from_rows(rows)
