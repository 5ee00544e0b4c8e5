"""What a live Slurm cluster looks like to the agent, read from ``sinfo --json`` and
``squeue --json`` (Slurm 22.05, openapi v0.0.38) in one :class:`Snapshot`: the GPU
nodes as a hetsched :class:`~hetsched.core.records.Cluster`, the jobs the agent manages
(those whose comment carries hetsched's metadata, :mod:`hetsched.slurm.metadata`) with
their state and GPUs, and every GPU some job holds, managed or not.

GPU ids are hetsched's, ``NODE/INDEX`` with Slurm's GPU index (``gres_detail``'s
``IDX``). A GPU is busy when a running job of the partition holds it, when a job the
agent released has not started yet (its GPUs are booked on its pinned nodes), or when
its node is down, drained or not responding; jobs without metadata are never touched,
and the GPUs they hold are never given away.

A managed job that is COMPLETING (it ended, or is being requeued, and its node's epilog
runs) hands its GPUs over: they are not busy, so the agent may release the next job onto
them, and Slurm starts that job when the epilog ends. slurmctld starts a pending job at
once only then; a job released after the epilog waits for its next pass, up to a second
(docs/slurm.md, "Handing GPUs over"). Slurm itself never gives a GPU twice. (Slurm 22.05
lists no ``gres_detail`` for a COMPLETING job; should it, a managed job's GPUs are still
handed over, a foreign job's still busy.)
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Node, gpu_id
from hetsched.slurm.control import expand_nodes, gpu_indices
from hetsched.slurm.metadata import JobMeta, is_managed

log = logging.getLogger(__name__)

#: ``sinfo``'s GPU GRES of a node: ``gpu:v100:4`` (possibly followed by ``(S:0-1)``).
NODE_GRES = re.compile(r"(?:^|,)gpu:(?P<type>[^:,(]+):(?P<count>\d+)")
#: Node states whose GPUs nobody may be given.
UNUSABLE = ("down", "drain", "drained", "draining", "fail", "failing", "future",
            "not_responding", "unknown", "power_down", "powered_down")
#: Job states of a job holding (or about to hold) its GPUs.
HOLDING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED"})
#: Job states of a job that ended for good.
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                   "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT"})


@dataclass(frozen=True)
class SlurmJob:
    """A managed job as Slurm shows it: its Slurm id, metadata, state, whether held
    (waiting for the agent), its nodes and GPUs (hetsched ids) while it holds them, and
    Slurm's times (Unix seconds) and restart count."""

    slurm_id: int
    meta: JobMeta
    state: str
    held: bool
    nodes: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    start_unix: float | None = None
    end_unix: float | None = None
    restarts: int = 0

    @property
    def job_id(self) -> str:
        """The hetsched job id."""
        return self.meta.job.id

    @property
    def waiting(self) -> bool:
        """Pending and held: the agent's to start."""
        return self.state == "PENDING" and self.held

    @property
    def released(self) -> bool:
        """Pending, released by the agent onto its nodes, not started yet."""
        return self.state == "PENDING" and not self.held and bool(self.nodes)

    @property
    def handing_over(self) -> bool:
        """Ended or being requeued, its node's epilog running: its GPUs pass to the
        next job as the epilog ends."""
        return self.state == "COMPLETING"

    @property
    def holding(self) -> bool:
        """Running (or about to: released onto its nodes)."""
        return self.state in HOLDING or self.released

    @property
    def ended(self) -> bool:
        """Finished for good (completed, failed, cancelled ...)."""
        return self.state in ENDED


@dataclass(frozen=True)
class Snapshot:
    """One reading of the cluster: its GPU nodes, the managed jobs by hetsched id, the
    busy GPUs, how many jobs without metadata hold GPUs, and the managed jobs whose
    metadata is bad (Slurm id -> the problem), which are left pending."""

    cluster: Cluster
    jobs: Mapping[str, SlurmJob]
    busy: frozenset[str]
    foreign_jobs: int = 0
    rejected: Mapping[int, str] = field(default_factory=dict)
    #: Nodes nobody may be given now (down, drained, not responding).
    unusable_nodes: frozenset[str] = frozenset()
    #: GPUs Slurm counts used (``sinfo``'s ``gres_used``) that no job holds, on nodes
    #: where no job is completing (whose GPUs Slurm 22.05 lists for no job): busy, since
    #: Slurm will start nothing on them, though idle (:func:`phantom_gpus`).
    phantom: frozenset[str] = frozenset()

    @property
    def free(self) -> frozenset[str]:
        """The GPUs no job holds, on usable nodes."""
        return frozenset(g for node in self.cluster.nodes for g in node.gpu_ids()) - self.busy


def _natural(name: str) -> tuple[object, ...]:
    """``v100-2`` before ``v100-10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def read_cluster(nodes: Iterable[Mapping[str, Any]], order: Sequence[str] = ()
                 ) -> tuple[Cluster, frozenset[str]]:
    """The GPU nodes of ``sinfo --json`` as a cluster, and the GPUs of nodes nobody may
    use now (down, drained, not responding). ``order``: node names or GPU type names in
    the order the cluster lists them (a local cluster's spec order; the cluster order
    is the type preference of FIFO-like policies); the rest follow, by name."""
    rank = {name: index for index, name in enumerate(order)}

    def key(record: Mapping[str, Any]) -> tuple[object, ...]:
        name = str(record.get("name"))
        gres = NODE_GRES.search(str(record.get("gres") or ""))
        gpu_type = gres.group("type") if gres else ""
        return (rank.get(gpu_type, rank.get(name, len(rank))), rank.get(name, len(rank)),
                _natural(name))

    found: list[Node] = []
    unusable: set[str] = set()
    for record in sorted(nodes, key=key):
        gres = NODE_GRES.search(str(record.get("gres") or ""))
        if gres is None:
            continue
        memory_mb = record.get("real_memory")
        node = Node(str(record["name"]), gres.group("type"), int(gres.group("count")),
                    cpus=int(record["cpus"]) if record.get("cpus") is not None else None,
                    memory_gb=float(memory_mb) / 1024 if memory_mb else None)
        found.append(node)
        states = [str(record.get("state", "")).lower(),
                  *(str(flag).lower() for flag in record.get("state_flags") or ())]
        if any(state.startswith(UNUSABLE) for state in states):
            unusable.update(node.gpu_ids())
    if not found:
        raise InputError("no GPU nodes in the partition", path="sinfo.nodes", value=0,
                         expected="nodes with a gpu:TYPE:COUNT GRES (gres.conf)")
    types = tuple(dict.fromkeys(node.gpu_type for node in found))
    return Cluster(tuple(GpuType(t) for t in types), tuple(found)), frozenset(unusable)


def held_gpus(record: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(nodes, GPU ids)`` a job of ``squeue --json`` holds: its nodes, and per node
    the indices of ``gres_detail`` (one entry per node, in node order)."""
    nodes = tuple(expand_nodes(str(record.get("nodes") or "")))
    details = list(record.get("gres_detail") or ())
    gpus = [gpu_id(node, index) for node, detail in zip(nodes, details, strict=False)
            for index in gpu_indices(str(detail))]
    return nodes, tuple(gpus)


def _time(record: Mapping[str, Any], key: str) -> float | None:
    value = record.get(key)
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _asked(record: Mapping[str, Any]) -> tuple[int, int]:
    """GPUs a job asks for: per node (``tres_per_node`` ``gres:gpu:2`` or
    ``gres:gpu:k80:2``) and in all (``tres_per_job``, an uneven gang); 0 if none."""
    counts = []
    for key in ("tres_per_node", "tres_per_job"):
        found = re.search(r"gpu(?::[^:,]+)?:(\d+)", str(record.get(key) or ""))
        counts.append(int(found.group(1)) if found else 0)
    return counts[0], counts[1]


def slurm_split(free: Sequence[int], total: int) -> list[int] | None:
    """How Slurm (cons_tres, 22.05) lays a job's ``TresPerJob`` of ``total`` GPUs over its
    nodes, with ``free[i]`` GPUs free on the i-th (in Slurm's node order): each node in
    turn as many as it has, leaving one for each node after it (every node of a job gets
    one GPU at least). Measured on the local cluster: 4 over two idle nodes of 4 is 3 + 1,
    over nodes with 3 and 1 free 3 + 1. ``None`` if the nodes cannot hold it."""
    split = []
    left = total
    for i, count in enumerate(free):
        here = min(count, left - (len(free) - 1 - i))
        if here < 1:
            return None
        split.append(here)
        left -= here
    return split if left == 0 else None


def slurm_takes(free: Sequence[Sequence[str]], total: int
                ) -> tuple[list[int], tuple[str, ...]] | None:
    """:func:`slurm_split` over nodes whose free GPUs are ``free[i]`` (index order), and
    the GPUs Slurm takes with it: the first ones of each node. ``None`` if it does not fit."""
    split = slurm_split([len(ids) for ids in free], total)
    if split is None:
        return None
    return split, tuple(g for ids, count in zip(free, split, strict=True) for g in ids[:count])


def read_snapshot(nodes: Iterable[Mapping[str, Any]], jobs: Iterable[Mapping[str, Any]],
                  *, reported: set[int] | None = None, order: Sequence[str] = ()) -> Snapshot:
    """A :class:`Snapshot` of ``sinfo --json``'s nodes and ``squeue --json``'s jobs (of
    the managed partition). Bad metadata is logged once per job (``reported``: the
    Slurm ids already logged) and the job left pending. ``order``: :func:`read_cluster`'s."""
    nodes, jobs = list(nodes), list(jobs)
    cluster, unusable = read_cluster(nodes, order)
    busy = set(unusable)
    node_gpus = {node.name: node.gpu_ids() for node in cluster.nodes}
    managed: dict[str, SlurmJob] = {}
    rejected: dict[int, str] = {}
    foreign = 0
    booked: list[tuple[str, int, int]] = []
    for record in jobs:
        slurm_id = int(record["job_id"])
        state = str(record.get("job_state", ""))
        comment = str(record.get("comment") or "")
        held_nodes, gpus = held_gpus(record) if state in HOLDING else ((), ())
        if not is_managed(comment):
            busy.update(gpus)
            foreign += bool(gpus)
            continue
        try:
            meta = JobMeta.from_comment(comment)
        except InputError as exc:
            busy.update(gpus)
            rejected[slurm_id] = str(exc)
            if reported is not None and slurm_id not in reported:
                reported.add(slurm_id)
                log.error("Slurm job %d: bad hetsched metadata, left pending: %s",
                          slurm_id, exc)
            continue
        if state != "COMPLETING":  # a managed job's epilog: its GPUs are handed over
            busy.update(gpus)
        held = record.get("priority") == 0 or str(record.get("state_reason")) in (
            "JobHeldUser", "JobHeldAdmin")
        if state == "PENDING" and not held:
            # Released by the agent, not started yet: its pinned nodes, GPUs booked.
            held_nodes = tuple(expand_nodes(str(record.get("required_nodes") or "")))
            if held_nodes:
                booked.append((meta.job.id, *_asked(record)))
        job = SlurmJob(slurm_id, meta, state, held, held_nodes, gpus,
                       _time(record, "start_time") if state not in ("PENDING",) else None,
                       _time(record, "end_time") if state in ENDED else None,
                       int(record.get("restart_cnt") or 0))
        old = managed.get(job.job_id)
        if old is not None and old.slurm_id > slurm_id:
            continue  # the same hetsched job submitted twice: the latest submission
        managed[job.job_id] = job
    for job_id, per_node, per_job in booked:  # the first free GPUs of each pinned node
        job = managed[job_id]
        free = [[g for g in node_gpus.get(node, []) if g not in busy] for node in job.nodes]
        split = None if per_node else slurm_takes(free, per_job)
        chosen = [g for ids in free for g in ids[:per_node]] if per_node else \
            list(split[1] if split is not None else ())
        busy.update(chosen)
        managed[job_id] = dataclasses.replace(job, gpus=tuple(chosen))
    unusable_nodes = frozenset(g.split("/", 1)[0] for g in unusable)
    phantom = phantom_gpus(nodes, jobs, cluster)
    busy.update(phantom)
    return Snapshot(cluster, managed, frozenset(busy), foreign, rejected, unusable_nodes,
                    phantom)


#: ``sinfo``'s GPUs in use on a node: ``gpu:v100:4(IDX:0-3)``, ``gpu:v100:0(IDX:N/A)``.
USED_GRES = re.compile(r"gpu:[^:,(]+:\d+\(IDX:(?P<index>[^)]*)\)")


def phantom_gpus(nodes: Iterable[Mapping[str, Any]], jobs: Iterable[Mapping[str, Any]],
                 cluster: Cluster) -> frozenset[str]:
    """GPUs that ``sinfo`` shows in use (``gres_used``) and no job of ``squeue`` holds,
    on nodes where no job is COMPLETING (Slurm 22.05 lists a completing job's GPUs for
    no job). Seen after a node's slurmd died and came back: the node IDLE and its GPUs
    used, Slurm starting nothing there."""
    held: set[str] = set()
    completing: set[str] = set()
    for record in jobs:
        state = str(record.get("job_state", ""))
        if state == "COMPLETING":
            completing.update(expand_nodes(str(record.get("nodes") or "")))
        elif state in HOLDING:
            held.update(held_gpus(record)[1])
    names = {node.name for node in cluster.nodes}
    found: set[str] = set()
    for record in nodes:
        name = str(record.get("name"))
        if name not in names or name in completing:
            continue
        for match in USED_GRES.finditer(str(record.get("gres_used") or "")):
            found.update(gpu_id(name, i) for i in gpu_indices(match.group(0)))
    return frozenset(found - held)
