"""The AlloX matching: jobs x (machine class, position-from-last) slots.

A *machine* is one GPU (every job runs on one GPU) or, in the gang extension, one
whole node. Machines of one GPU type and size that become free at the same time
are identical and form a *class*; slot (c, k) stands for "the k-th job from the
end on one machine of class c" and can be taken by up to ``m_c`` jobs. A job in
slot (c, k) costs ``f_c + k p_jc``: it and the k - 1 jobs after it wait for its
processing time ``p_jc``, and it waits for the machine's free time ``f_c``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hetsched.core.records import Instance, Job
from hetsched.core.throughput import Placement


@dataclass(frozen=True)
class Machine:
    """One GPU (``gpus`` has one id) or one whole node, free from ``free_at`` (s)."""

    name: str
    gpu_type: str
    gpus: tuple[str, ...]
    free_at: float


@dataclass(frozen=True)
class MachineClass:
    """Identical machines: same GPU type, same size, same free time; ``levels`` slots."""

    gpu_type: str
    size: int
    free_at: float
    machines: tuple[Machine, ...]
    levels: int


@dataclass(frozen=True)
class Processing:
    """How a job runs on a class: ``num_gpus`` GPUs for ``duration`` s (its processing
    time ``p_jc``)."""

    num_gpus: int
    duration: float


@dataclass(frozen=True, eq=False)
class MatchingProblem:
    """Jobs, machine classes, and each job's processing on each class it can use."""

    jobs: tuple[Job, ...]
    classes: tuple[MachineClass, ...]
    processing: Mapping[tuple[int, int], Processing]  # by (job index, class index)

    def slots(self) -> list[tuple[int, int]]:
        """All (class index, level k >= 1) slots."""
        return [(c, k) for c, cls in enumerate(self.classes) for k in range(1, cls.levels + 1)]

    def cost(self, job: int, slot: tuple[int, int]) -> float | None:
        """``f_c + k p_jc`` (s), or ``None`` if the job cannot run on class c."""
        c, k = slot
        run = self.processing.get((job, c))
        if run is None:
            return None
        return self.classes[c].free_at + k * run.duration

    def matching_value(self, matching: Mapping[int, tuple[int, int]]) -> float:
        """Sum of the costs of a matching (s of completion time, from time 0)."""
        total = 0.0
        for job, slot in matching.items():
            cost = self.cost(job, slot)
            if cost is None:
                raise ValueError(f"job {job} cannot use slot {slot}")
            total += cost
        return total


def machines_for(instance: Instance, whole_nodes: bool,
                 free_at: Mapping[str, float] | None = None) -> list[Machine]:
    """Every GPU (or every node, if ``whole_nodes``) as a machine; free at ``now`` unless
    ``free_at`` (by machine name) says later."""
    free_at = free_at or {}
    machines = []
    for node in instance.cluster.nodes:
        if whole_nodes:
            machines.append(Machine(node.name, node.gpu_type, tuple(node.gpu_ids()),
                                    free_at.get(node.name, instance.now)))
        else:
            for gid in node.gpu_ids():
                machines.append(Machine(gid, node.gpu_type, (gid,),
                                        free_at.get(gid, instance.now)))
    return machines


def fastest_processing(instance: Instance, job: Job, gpu_type: str, size: int,
                       whole_nodes: bool) -> Processing | None:
    """The fastest way for ``job`` to run on a machine of ``size`` GPUs of ``gpu_type``:
    one GPU, or (whole nodes) any allowed gang that fits the node, packed."""
    counts = [c for c in job.gpu_counts if c <= size] if whole_nodes else [1] if (
        1 in job.gpu_counts) else []
    best: Processing | None = None
    if not job.may_use(gpu_type):
        return None
    for count in counts:
        speed = instance.throughput.throughput(job.job_type, gpu_type, count, Placement.PACKED)
        if speed > 0 and (best is None or job.work / speed < best.duration):
            best = Processing(count, job.work / speed)
    return best


def build_matching(instance: Instance, jobs: Sequence[Job], machines: Sequence[Machine],
                   whole_nodes: bool) -> MatchingProblem:
    """Group machines into classes and give each class as many levels as an optimal
    matching can use.

    Levels: for a machine g, let P be the other machines of its type and size that are
    free no later. An optimal matching gives g at most ``(n + |P|) / (|P| + 1)`` jobs,
    since moving g's first job to the front of an h in P with two fewer jobs
    would make it cheaper (docs/formulations.md).

    Jobs with ``allowed_nodes``: the machines on a node some job names form classes of
    their own (one node each), which only the jobs allowed there, and every job without
    such a list, may use. The bound above needs jobs that can move, so those classes
    get a level per job.
    """
    named = {name for job in jobs for name in (job.allowed_nodes or ())}
    node_of = instance.cluster.gpu_by_id
    groups: dict[tuple[str, int, float, str], list[Machine]] = defaultdict(list)
    for machine in machines:
        node = node_of[machine.gpus[0]].node
        groups[machine.gpu_type, len(machine.gpus), machine.free_at,
               node if node in named else ""].append(machine)
    n = len(jobs)
    classes = []
    class_nodes = []
    for (gpu_type, size, free, node), members in sorted(groups.items()):
        no_later = sum(len(ms) for (t, s, f, _), ms in groups.items()
                       if t == gpu_type and s == size and f <= free) - 1
        levels = max(1, min(n, math.floor((n + no_later) / (no_later + 1)))) if not node \
            else max(1, n)
        classes.append(MachineClass(gpu_type, size, free, tuple(members), levels))
        class_nodes.append(node)
    processing: dict[tuple[int, int], Processing] = {}
    for j, job in enumerate(jobs):
        for c, cls in enumerate(classes):
            if job.allowed_nodes is not None and class_nodes[c] not in job.allowed_nodes:
                continue
            run = fastest_processing(instance, job, cls.gpu_type, cls.size, whole_nodes)
            if run is not None:
                processing[j, c] = run
    return MatchingProblem(tuple(jobs), tuple(classes), processing)


def sequences(problem: MatchingProblem, matching: Mapping[int, tuple[int, int]]
              ) -> dict[str, list[int]]:
    """Each machine's jobs (job indices) in run order, from a matching.

    Level-k jobs of a class go to its first machines; a machine runs its jobs from
    the highest level down. In an optimal matching a class's levels fill from
    level 1 up (no machine misses a level below one it has).
    """
    by_level: dict[tuple[int, int], list[int]] = defaultdict(list)
    for job, slot in matching.items():
        by_level[slot].append(job)
    order: dict[str, list[int]] = {}
    for c, cls in enumerate(problem.classes):
        stacks: list[list[int]] = [[] for _ in cls.machines]
        for k in range(1, cls.levels + 1):
            # longest first on the lowest machine index: any order is optimal within a level
            for position, job in enumerate(sorted(by_level.get((c, k), []))):
                stacks[position].append(job)
        for machine, stack in zip(cls.machines, stacks, strict=True):
            order[machine.name] = list(reversed(stack))
    return order
