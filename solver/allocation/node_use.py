"""What running jobs hold of a cluster besides whole GPUs: the shares of GPUs that jobs
asking for a share run on (``Job.gpu_share``), and the CPUs and memory of nodes
(``Job.cpus``, ``Job.memory_gb`` against ``Node.cpus``, ``Node.memory_gb``). Part of
the free-GPU index (:class:`hetsched.allocation.free_gpus.FreeGpuIndex`): the simulator's master
holds the truth; a policy's fork keeps its differences, as for free GPUs.

Units are integers, so that holding and releasing never drift: thousandths of a GPU
(shares are resolved to 1/1000), thousandths of a core and MiB. A GPU that hosts
share jobs is busy for whole-GPU jobs; what is left of it is kept here until its last
share job leaves and it is free again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from hetsched.allocation.layout import GpuLayout
from hetsched.core.records import Cluster, Job, share_milli

#: A whole GPU, in thousandths.
WHOLE = 1000


def _milli_cores(cores: float) -> int:
    return round(cores * 1000)


def _mib(gigabytes: float) -> int:
    return round(gigabytes * 1024)


class NodeUse:
    """GPU shares and node CPUs and memory left (module docstring): a master made from a
    cluster, or a fork of one (:meth:`fork`) whose changes stay its own."""

    def __init__(self, cluster: Cluster, where: GpuLayout) -> None:
        self._base: NodeUse | None = None
        self._where = where
        self._shares: dict[str, int | None] = {}  # GPU -> thousandths left (None: none)
        self._cpus: dict[int, int] = {}  # node position -> milli-cores left
        self._memory: dict[int, int] = {}  # node position -> MiB left
        self.capacity = [(None if node.cpus is None else _milli_cores(node.cpus),
                          None if node.memory_gb is None else _mib(node.memory_gb))
                         for node in cluster.nodes]
        #: told the position of every node whose CPUs or memory left change (a master's)
        self.listener: Callable[[int], None] | None = None

    def fork(self) -> NodeUse:
        """A working copy: reads this one (its master's values and its own changes),
        writes only itself."""
        copy = object.__new__(NodeUse)
        copy.listener = None
        copy._base = self._base or self
        copy._where = self._where
        copy.capacity = self.capacity
        if self._base is None:
            copy._shares, copy._cpus, copy._memory = {}, {}, {}
        else:
            copy._shares, copy._cpus, copy._memory = (dict(self._shares), dict(self._cpus),
                                                      dict(self._memory))
        return copy

    # -- GPU shares ----------------------------------------------------------------------
    def share_left(self, gpu: str) -> int | None:
        """Thousandths of ``gpu`` left to share jobs, ``None`` if no share job is on it."""
        if gpu in self._shares or self._base is None:
            return self._shares.get(gpu)
        return self._base.share_left(gpu)

    def set_share(self, gpu: str, left: int | None) -> None:
        """``left`` thousandths of ``gpu`` are left to share jobs (``None``: none on it)."""
        if self._base is None and left is None:
            self._shares.pop(gpu, None)
        else:
            self._shares[gpu] = left

    def shared(self, gpu_type: str) -> Iterator[tuple[str, int]]:
        """``(GPU, thousandths left)`` of every GPU of ``gpu_type`` hosting share jobs
        (time in those GPUs, not the cluster's)."""
        seen: set[str] = set()
        type_of = self._where.type_of
        for table in (self._shares, self._base._shares if self._base else {}):
            for gpu, left in table.items():
                if gpu not in seen and type_of[gpu] == gpu_type:
                    seen.add(gpu)
                    if left is not None:
                        yield gpu, left

    # -- CPUs and memory -----------------------------------------------------------------
    def left(self, pos: int) -> tuple[int | None, int | None]:
        """Milli-cores and MiB node ``pos`` has left (``None``: no capacity given)."""
        cpus, memory = self.capacity[pos]
        if cpus is not None:
            cpus = self._cpus.get(pos, self._base._cpus.get(pos, cpus) if self._base
                                  else cpus)
        if memory is not None:
            memory = self._memory.get(pos, self._base._memory.get(pos, memory)
                                      if self._base else memory)
        return cpus, memory

    def fits(self, pos: int, job: Job, gpus_here: int) -> bool:
        """Whether node ``pos`` has the CPUs and memory ``job`` needs with ``gpus_here`` of
        its GPUs there."""
        if not job.needs_node_resources:
            return True
        cores, gigabytes = self.demand(job, gpus_here)
        cpus, memory = self.left(pos)
        return (cpus is None or cores <= cpus) and (memory is None or gigabytes <= memory)

    def most(self, pos: int, job: Job, up_to: int) -> int:
        """The most GPUs of ``job`` (at most ``up_to``) node ``pos`` can hold with the CPUs
        and memory they need there."""
        if not job.needs_node_resources:
            return up_to
        return next((k for k in range(up_to, 0, -1) if self.fits(pos, job, k)), 0)

    def hold(self, job: Job, gpus: list[str], sign: int) -> None:
        """``job`` takes (``sign`` 1) or gives back (-1) the CPUs and memory it needs of
        the nodes of ``gpus``."""
        if not job.needs_node_resources:
            return
        here: dict[int, int] = {}
        for gpu in gpus:
            pos = self._where.node_of[gpu]
            here[pos] = here.get(pos, 0) + 1
        for pos, count in here.items():
            cores, gigabytes = job.node_demand(count)
            cpus, memory = self.left(pos)
            if cpus is not None:
                self._cpus[pos] = cpus - sign * _milli_cores(cores)
            if memory is not None:
                self._memory[pos] = memory - sign * _mib(gigabytes)
            if self.listener is not None:
                self.listener(pos)

    def touched(self) -> set[int]:
        """The nodes whose CPUs or memory this fork changed (none for a master)."""
        return set() if self._base is None else {*self._cpus, *self._memory}

    def demand(self, job: Job, gpus_here: int) -> tuple[int, int]:
        """Milli-cores and MiB ``job`` needs of a node with ``gpus_here`` of its GPUs."""
        cores, gigabytes = job.node_demand(gpus_here)
        return _milli_cores(cores), _mib(gigabytes)

    def share_of(self, job: Job) -> int:
        """The thousandths of a GPU ``job`` holds (a whole GPU without a share)."""
        return WHOLE if job.gpu_share is None else share_milli(job.gpu_share)
