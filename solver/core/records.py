"""The data model: GPU types, nodes, cluster (:mod:`hetsched.core.cluster`, re-exported
here), jobs and instance.

All records are frozen and validate themselves on construction, raising
:class:`~hetsched.core.errors.InputError` with the field's path. Units: seconds for
times, steps for work, steps/s for throughput, GB for memory.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from hetsched.core.cluster import (
    DEFAULT_LINKS,
    SWITCH,
    Cluster,
    Gpu,
    GpuType,
    Node,
    check_node_links,
    default_topology,
    gpu_id,
)
from hetsched.core.errors import InputError
from hetsched.core.ranges import (
    MAX_CLUSTER_GPUS,
    MAX_CPUS,
    MAX_DURATION_S,
    MAX_GPUS_PER_JOB,
    MAX_GPUS_PER_NODE,
    MAX_MEMORY_GB,
    MAX_NODE_LOCAL_LINKS,
    MAX_PRICE_PER_HOUR,
    MAX_THROUGHPUT,
    MAX_TIME_S,
    MAX_WEIGHT,
    MAX_WORK,
    MIN_GPU_SHARE,
    MIN_THROUGHPUT,
    MIN_WEIGHT,
    check_name,
    check_optional,
    check_range,
    in_range,
)
from hetsched.core.sharing import PACKED_SHARE, CoLocationModel
from hetsched.core.throughput import Placement, ThroughputModel

__all__ = [
    "DEFAULT_LINKS", "MAX_CLUSTER_GPUS", "MAX_CPUS", "MAX_DURATION_S", "MAX_GPUS_PER_JOB",
    "MAX_GPUS_PER_NODE", "MAX_MEMORY_GB", "MAX_NODE_LOCAL_LINKS", "MAX_PRICE_PER_HOUR",
    "MAX_THROUGHPUT", "MAX_TIME_S", "MAX_WEIGHT", "MAX_WORK", "MIN_GPU_SHARE",
    "MIN_THROUGHPUT", "MIN_WEIGHT", "SWITCH", "Cluster", "Configuration", "Gpu", "GpuType",
    "Instance", "Job", "Node", "check_node_links", "configurations", "default_topology",
    "gpu_id", "in_range", "share_milli"]

@dataclass(frozen=True)
class Job:
    """A training job: a gang of ``num_gpus`` GPUs that must do ``work`` steps.

    ``allowed_gpu_counts``, when given, are the gang sizes a scheduler may choose
    from (it includes ``num_gpus``, the requested size); ``allowed_gpu_types``, when
    given, the only GPU types it may run on (e.g. a trace's GPU constraint);
    ``allowed_nodes``, when given, the only nodes its GPUs may be on (a running job
    pinned where it runs, a node constraint). Every planner honours them and the checker
    verifies them. Times are in seconds.

    ``gpu_share``, when given, is the share of one GPU the job asks for (0 < share < 1,
    resolved to 1/1000; only for a job of one GPU): jobs whose shares add up to at most 1
    may run on one GPU at once (docs/traces.md, "GPU shares"). ``cpus`` (cores) and
    ``memory_gb`` (GB), when given, are what it needs of its node besides GPUs (a gang
    spread over nodes needs them in proportion to its GPUs on each); a start must fit
    the node's GPUs, CPUs and memory. ``tenant``, when given, is who the job is run for (a
    team, a virtual cluster; docs/fairness.md): the fairness figures and quotas count per
    tenant, jobs without one in a tenant of their own (``default``).
    """

    id: str
    arrival: float
    job_type: str
    num_gpus: int
    work: float
    deadline: float | None = None
    weight: float = 1.0
    user: str | None = None
    allowed_gpu_counts: tuple[int, ...] | None = None
    allowed_gpu_types: tuple[str, ...] | None = None
    allowed_nodes: tuple[str, ...] | None = None
    gpu_share: float | None = None
    cpus: float | None = None
    memory_gb: float | None = None
    tenant: str | None = None

    def __post_init__(self) -> None:
        check_name(self.id, "id", "job id")
        check_range(self.arrival, "arrival", f"a time in s from 0 to {MAX_TIME_S:g}", 0.0,
                    MAX_TIME_S)
        check_name(self.job_type, "job_type", "job type")
        gang = f"an integer from 1 to {MAX_GPUS_PER_JOB}"
        check_range(self.num_gpus, "num_gpus", gang, 1, MAX_GPUS_PER_JOB, integer=True)
        check_range(self.work, "work", f"a number of steps > 0 and <= {MAX_WORK:g}", 0.0, MAX_WORK,
                    strict_low=True)
        check_range(self.weight, "weight", f"a weight from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}",
                    MIN_WEIGHT, MAX_WEIGHT)
        if self.deadline is not None:
            check_range(self.deadline, "deadline", f"a time in s up to {MAX_TIME_S:g}", -math.inf,
                        MAX_TIME_S)
            if self.deadline <= self.arrival:
                raise InputError(
                    "deadline is not after the arrival", path="deadline", value=self.deadline,
                    expected=f"a time after the arrival {self.arrival!r} s",
                )
        if self.user is not None:
            check_name(self.user, "user", "user")
        if self.tenant is not None:
            check_name(self.tenant, "tenant", "tenant (a team, a virtual cluster)")
        if self.allowed_gpu_counts is not None:
            counts = tuple(self.allowed_gpu_counts)
            for index, count in enumerate(counts):
                if not in_range(count, 1, MAX_GPUS_PER_JOB, integer=True):
                    raise InputError("bad GPU count", path=f"allowed_gpu_counts[{index}]",
                                     value=count, expected=gang)
            if self.num_gpus not in counts:
                raise InputError(
                    "allowed_gpu_counts does not include num_gpus", path="allowed_gpu_counts",
                    value=list(counts), expected=f"a list that contains {self.num_gpus}",
                )
            object.__setattr__(self, "allowed_gpu_counts", tuple(sorted(set(counts))))
        self._name_list("allowed_gpu_types", "GPU type", "GPU types")
        self._name_list("allowed_nodes", "node name", "nodes")
        if self.gpu_share is not None:
            check_range(self.gpu_share, "gpu_share", "a share of one GPU from 0.001 to 0.999",
                        MIN_GPU_SHARE, 1.0 - MIN_GPU_SHARE)
            if self.gpu_counts != (1,):
                raise InputError("a GPU share for a job of more than one GPU",
                                 path="gpu_share", value=self.gpu_share,
                                 expected=f"no share for a gang of {list(self.gpu_counts)} "
                                 "GPUs (a share is of one GPU)")
            object.__setattr__(self, "gpu_share", share_milli(self.gpu_share) / 1000)
        check_optional(self.cpus, "cpus", f"cores from 0 to {MAX_CPUS}", MAX_CPUS)
        check_optional(self.memory_gb, "memory_gb", f"GB from 0 to {MAX_MEMORY_GB:g}",
                       MAX_MEMORY_GB)

    def _name_list(self, field: str, what: str, plural: str) -> None:
        """The optional list of names ``field``: non-empty, each a name, kept once each in
        order."""
        value = getattr(self, field)
        if value is None:
            return
        names = tuple(value)
        if not names:
            raise InputError(f"empty list of allowed {plural}", path=field, value=[],
                             expected=f"at least one {what}, or no field")
        for index, name in enumerate(names):
            check_name(name, f"{field}[{index}]", what)
        object.__setattr__(self, field, tuple(dict.fromkeys(names)))

    @property
    def gpu_counts(self) -> tuple[int, ...]:
        """The gang sizes this job may run with, smallest first."""
        return self.allowed_gpu_counts or (self.num_gpus,)

    def may_use(self, gpu_type: str) -> bool:
        """Whether the job may run on ``gpu_type``."""
        return self.allowed_gpu_types is None or gpu_type in self.allowed_gpu_types

    def may_use_node(self, node: str) -> bool:
        """Whether the job's GPUs may be on ``node``."""
        return self.allowed_nodes is None or node in self.allowed_nodes

    @property
    def share(self) -> float:
        """The share of each of its GPUs the job holds: ``gpu_share``, or 1 (whole)."""
        return 1.0 if self.gpu_share is None else self.gpu_share

    @property
    def needs_node_resources(self) -> bool:
        """Whether the job needs CPUs or memory of its nodes."""
        return self.cpus is not None or self.memory_gb is not None

    def node_demand(self, gpus_here: int) -> tuple[float, float]:
        """``(cores, GB)`` the job needs of a node holding ``gpus_here`` of its GPUs: its
        CPUs and memory in proportion to its GPUs there (all of them on one node)."""
        part = gpus_here / self.num_gpus
        return (self.cpus or 0.0) * part, (self.memory_gb or 0.0) * part


def packed_holder(job: Job) -> Job:
    """``job`` as its packed run holds its GPU (``Start.packed``): a share job of
    :data:`~hetsched.core.sharing.PACKED_SHARE` (how the free-GPU index, the simulator's
    sharers and the checker count it)."""
    return dataclasses.replace(job, gpu_share=PACKED_SHARE)


def share_milli(share: float) -> int:
    """A GPU share in thousandths of a GPU (the resolution shares are kept at)."""
    return round(share * 1000)


@dataclass(frozen=True)
class Configuration:
    """One way to run a job: a GPU type, a gang size, a placement and its speed."""

    gpu_type: str
    num_gpus: int
    placement: Placement
    throughput: float  # steps/s

    def duration(self, work: float) -> float:
        """Seconds to do ``work`` steps in this configuration."""
        return work / self.throughput


@dataclass(frozen=True, eq=False)
class Instance:
    """A scheduling problem: cluster, jobs, throughput and the current time (s), and how
    fast jobs sharing a GPU run (``colocation``; the default factors when ``None``)."""

    cluster: Cluster
    jobs: tuple[Job, ...]
    throughput: ThroughputModel
    now: float = 0.0
    name: str = ""
    colocation: CoLocationModel | None = None
    #: each job's configurations, asked by the checks and by every model built on it
    _configurations: dict[str, tuple[Job, list[Configuration]]] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        check_range(self.now, "now", f"a time in s from 0 to {MAX_TIME_S:g}", 0.0, MAX_TIME_S)
        seen: set[str] = set()
        for index, job in enumerate(self.jobs):
            if job.id in seen:
                raise InputError("duplicate job id", path=f"jobs[{index}].id", value=job.id,
                                 expected="unique ids")
            seen.add(job.id)
            self._check_runnable(job, index)

    def _check_runnable(self, job: Job, index: int) -> None:
        path = f"jobs[{index}]"
        for k, name in enumerate(job.allowed_nodes or ()):
            if name not in self.cluster.node_by_name:
                raise InputError("unknown node", path=f"{path}.allowed_nodes[{k}]", value=name,
                                 expected="a node of the cluster")
        configs = self.configurations(job)
        for config in configs:
            self._check_configuration(job, path, config)
        if configs:
            return
        if job.allowed_nodes is not None:
            raise InputError("no configuration with throughput > 0 fits the allowed nodes",
                             path=f"{path}.allowed_nodes", value=list(job.allowed_nodes),
                             expected="nodes of a GPU type the job may use, holding one of "
                             f"its gang sizes {list(job.gpu_counts)}")
        if not any(job.may_use(t) for t in self.cluster.type_names):
            raise InputError("none of the job's allowed GPU types is in the cluster",
                             path=f"{path}.allowed_gpu_types", value=list(job.allowed_gpu_types
                                                                           or ()),
                             expected="one of " + ", ".join(self.cluster.type_names))
        largest_type = max(self.cluster.num_gpus(t) for t in self.cluster.type_names)
        largest_node = max(node.num_gpus for node in self.cluster.nodes)
        smallest = min(job.gpu_counts)
        if smallest > largest_type:
            raise InputError(
                "gang larger than any GPU type's total", path=f"{path}.num_gpus",
                value=job.num_gpus,
                expected=f"at most {largest_type} GPUs (largest node {largest_node})",
            )
        positive = [
            t for t in self.cluster.type_names for n in job.gpu_counts for p in Placement
            if self.throughput.throughput(job.job_type, t, n, p) > 0
        ]
        if not positive:
            raise InputError(
                "job type has no positive throughput on any GPU type of the cluster",
                path=f"{path}.job_type", value=job.job_type,
                expected="a job type with throughput > 0 for one of "
                + ", ".join(f"{t} x {n}" for t in self.cluster.type_names for n in job.gpu_counts),
            )
        raise InputError(
            "no GPU type can hold this gang with a placement that has throughput > 0",
            path=f"{path}.num_gpus", value=job.num_gpus,
            expected=f"a gang that fits a node (largest {largest_node} GPUs) or a spread "
            "placement with throughput > 0",
        )

    @staticmethod
    def _check_configuration(job: Job, path: str, config: Configuration) -> None:
        """Throughput in [MIN_THROUGHPUT, MAX_THROUGHPUT] and duration <= MAX_DURATION_S."""
        where = f"{config.gpu_type} x {config.num_gpus} {config.placement}"
        if not in_range(config.throughput, MIN_THROUGHPUT, MAX_THROUGHPUT):
            raise InputError(
                f"job {job.id}: throughput of {job.job_type} on {where} out of range",
                path=f"{path}.job_type", value=config.throughput,
                expected=f"0 (cannot run) or {MIN_THROUGHPUT:g} to {MAX_THROUGHPUT:g} steps/s")
        if job.work / config.throughput > MAX_DURATION_S:
            raise InputError(
                f"job {job.id} would run {job.work / config.throughput:.3g} s on {where} "
                f"({config.throughput:g} steps/s)", path=f"{path}.work", value=job.work,
                expected=f"work / throughput <= {MAX_DURATION_S:g} s on every configuration "
                "the job can use")

    @cached_property
    def job_by_id(self) -> dict[str, Job]:
        """Job records by id."""
        return {job.id: job for job in self.jobs}

    def configurations(self, job: Job) -> list[Configuration]:
        """Every (GPU type, count, placement) this cluster can give ``job`` with throughput > 0
        (remembered per job: a copy to change)."""
        found = self._configurations.get(job.id)
        if found is None or found[0] is not job:
            found = self._configurations[job.id] = (
                job, configurations(self.cluster, self.throughput, job))
        return list(found[1])

    def replace(self, **changes: Any) -> Instance:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)



def configurations(cluster: Cluster, throughput: ThroughputModel, job: Job) -> list[Configuration]:
    """Every (GPU type, count, placement) ``cluster`` can give ``job`` with throughput > 0."""
    configs = []
    for gpu_type in cluster.type_names:
        if not job.may_use(gpu_type):
            continue
        for count in job.gpu_counts:
            for placement in Placement:
                speed = throughput.throughput(job.job_type, gpu_type, count, placement)
                if speed > 0 and cluster.can_place(gpu_type, count, placement,
                                                   job.allowed_nodes):
                    configs.append(Configuration(gpu_type, count, placement, speed))
    return configs
