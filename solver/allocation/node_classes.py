"""The simulator's free GPUs by node, kept so that finding a node costs time in the GPU
types and node sizes, not the nodes (:class:`NodeClasses`, the master store of
:class:`hetsched.allocation.free_gpus.FreeGpuIndex`).

The nodes of each type are kept in **node classes** by their number of free GPUs
(``classes[t][k]``: the nodes of type ``t`` with exactly ``k`` free, in cluster order).
For jobs that need CPUs and memory (``Job.cpus``, ``Job.memory_gb``), each class also
has a **max tree** over the type's nodes (:class:`_MaxTree`: the most milli-cores and
MiB left under each subtree, built when first asked for), so the first node of a class
with the GPUs, cores and memory a job needs is found by descending the tree, skipping
subtrees where no node has enough: however many nodes have free GPUs but no CPUs left
(openb's share pods exhaust a node's cores before its GPUs), they are not visited one
by one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Container

from hetsched.allocation.layout import GpuLayout

#: Stands for "no limit" (a node without a CPU or memory capacity) in the max trees.
UNLIMITED = 1 << 62

#: What a node has left: milli-cores and MiB (``None``: no capacity given).
Left = tuple[int | None, int | None]


class _MaxTree:
    """The largest milli-cores and MiB left over the nodes under each subtree of one node
    class of one type (leaves: the type's nodes in cluster order; -1 for a node not in
    the class). :meth:`first` finds the first leaf from ``start`` with both at least
    what is asked."""

    def __init__(self, count: int) -> None:
        size = 1
        while size < max(count, 1):
            size *= 2
        self.size = size
        self.cpus = [-1] * (2 * size)
        self.memory = [-1] * (2 * size)

    def set(self, leaf: int, cpus: int, memory: int) -> None:
        """Leaf ``leaf`` has ``cpus`` and ``memory`` left (-1, -1: not in the class)."""
        node = self.size + leaf
        self.cpus[node], self.memory[node] = cpus, memory
        node //= 2
        while node:
            left, right = 2 * node, 2 * node + 1
            self.cpus[node] = max(self.cpus[left], self.cpus[right])
            self.memory[node] = max(self.memory[left], self.memory[right])
            node //= 2

    def first(self, cpus: int, memory: int, start: int = 0) -> int:
        """The first leaf at or after ``start`` with at least ``cpus`` and ``memory``
        left, or -1."""
        return self._find(1, 0, self.size, start, cpus, memory)

    def _find(self, node: int, low: int, high: int, start: int, cpus: int, memory: int) -> int:
        if high <= start or self.cpus[node] < cpus or self.memory[node] < memory:
            return -1
        if high - low == 1:
            return low
        middle = (low + high) // 2
        found = self._find(2 * node, low, middle, start, cpus, memory)
        return found if found >= 0 else self._find(2 * node + 1, middle, high, start, cpus,
                                                   memory)


class NodeClasses:
    """A master's free GPUs: the set, the count per node and per type, the node classes,
    and (built when first asked for) their max trees of CPUs and memory left, read from
    ``left`` (node position -> milli-cores and MiB left, the master's node use)."""

    def __init__(self, where: GpuLayout, left: Callable[[int], Left]) -> None:
        self.where = where
        self.left = left
        self.free: set[str] = set()
        self.node_free = [0] * len(where.node_ids)
        self.type_free = dict.fromkeys(where.type_names, 0)
        #: free GPUs of every type
        self.total_free = 0
        self.classes: dict[str, list[list[int]]] = {
            t: [list(where.nodes_by_type[t])] + [[] for _ in range(where.largest[t])]
            for t in where.type_names}
        self.leaf = {pos: k for t in where.type_names
                     for k, pos in enumerate(where.nodes_by_type[t])}
        self._trees: dict[str, list[_MaxTree]] = {}

    def move(self, pos: int, gpu_type: str, old: int, new: int) -> None:
        """Node ``pos`` goes from ``old`` free GPUs to ``new``."""
        classes = self.classes[gpu_type]
        members = classes[old]
        del members[bisect.bisect_left(members, pos)]
        bisect.insort(classes[new], pos)
        self.node_free[pos] = new
        self.type_free[gpu_type] += new - old
        self.total_free += new - old
        trees = self._trees.get(gpu_type)
        if trees is not None:
            trees[old].set(self.leaf[pos], -1, -1)
            trees[new].set(self.leaf[pos], *self._values(pos))

    def resources_changed(self, pos: int) -> None:
        """Node ``pos``'s CPUs or memory left changed (in the master)."""
        trees = self._trees.get(self.where.node_type[pos])
        if trees is not None:
            trees[self.node_free[pos]].set(self.leaf[pos], *self._values(pos))

    def _values(self, pos: int) -> tuple[int, int]:
        cpus, memory = self.left(pos)
        return (UNLIMITED if cpus is None else cpus, UNLIMITED if memory is None else memory)

    def _trees_of(self, gpu_type: str) -> list[_MaxTree]:
        trees = self._trees.get(gpu_type)
        if trees is None:
            positions = self.where.nodes_by_type[gpu_type]
            trees = [_MaxTree(len(positions)) for _ in self.classes[gpu_type]]
            for leaf, pos in enumerate(positions):
                trees[self.node_free[pos]].set(leaf, *self._values(pos))
            self._trees[gpu_type] = trees
        return trees

    def first_with(self, gpu_type: str, free: int, cpus: int, memory: int,
                   skip: Container[int]) -> int | None:
        """The first node (cluster order) of class ``free`` of ``gpu_type`` with at least
        ``cpus`` milli-cores and ``memory`` MiB left, not in ``skip``; ``None``."""
        tree = self._trees_of(gpu_type)[free]
        positions = self.where.nodes_by_type[gpu_type]
        start = 0
        while (leaf := tree.first(cpus, memory, start)) >= 0:
            if positions[leaf] not in skip:
                return positions[leaf]
            start = leaf + 1
        return None
