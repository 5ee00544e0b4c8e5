"""The cluster's records: GPU types, nodes, GPUs and the cluster with its topology graph
(re-exported by :mod:`hetsched.core.records`, the data model's one import).

All records are frozen and validate themselves on construction, raising
:class:`~hetsched.core.errors.InputError` with the field's path. Units: GB for memory,
GB/s for links.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from hetsched.core.errors import InputError
from hetsched.core.ranges import (
    MAX_CLUSTER_GPUS,
    MAX_CPUS,
    MAX_GPUS_PER_NODE,
    MAX_MEMORY_GB,
    MAX_NODE_LOCAL_LINKS,
    MAX_PRICE_PER_HOUR,
    check_name,
    check_optional,
    check_range,
    check_unique,
)
from hetsched.core.throughput import Placement

if TYPE_CHECKING:  # loaded where a graph is built: a program that only reads records
    import networkx as nx  # (the Slurm emulator) starts without it

__all__ = ["DEFAULT_LINKS", "SWITCH", "Cluster", "Gpu", "GpuType", "Node", "check_node_links",
           "default_topology", "gpu_id"]

#: Link kinds of the default topology and their effective GPU-to-GPU bandwidth in GB/s
#: (docs/instance-format.md): GPUs of one node talk over a PCIe 4.0 x16-class fabric;
#: nodes through one network switch, 5 GB/s effective per GPU pair (a 100 Gb/s NIC less
#: protocol overhead and the PCIe hops on both ends; docs/topology.md). Every edge also
#: carries ``cost`` = seconds per GB of its hop; a GPU's edge to the switch costs half a
#: GPU-to-GPU network path.
DEFAULT_LINKS = {"node-local": 32.0, "network": 5.0}
SWITCH = "switch"


@dataclass(frozen=True)
class GpuType:
    """A kind of GPU: its name, and optionally memory (GB) and price (per GPU-hour)."""

    name: str
    memory_gb: float | None = None
    price_per_hour: float | None = None

    def __post_init__(self) -> None:
        check_name(self.name, "name", "GPU type name")
        check_optional(self.memory_gb, "memory_gb", f"GB from 0 to {MAX_MEMORY_GB:g}",
                       MAX_MEMORY_GB)
        check_optional(self.price_per_hour, "price_per_hour",
                       f"a price from 0 to {MAX_PRICE_PER_HOUR:g}", MAX_PRICE_PER_HOUR)


@dataclass(frozen=True)
class Node:
    """A server: ``num_gpus`` GPUs of one type, with CPUs and memory (GB)."""

    name: str
    gpu_type: str
    num_gpus: int
    cpus: int | None = None
    memory_gb: float | None = None

    def __post_init__(self) -> None:
        check_name(self.name, "name", "node name")
        check_name(self.gpu_type, "gpu_type", "GPU type")
        check_range(self.num_gpus, "num_gpus", f"an integer from 1 to {MAX_GPUS_PER_NODE}", 1,
                    MAX_GPUS_PER_NODE, integer=True)
        if self.cpus is not None:
            check_range(self.cpus, "cpus", f"an integer from 0 to {MAX_CPUS}", 0, MAX_CPUS,
                        integer=True)
        check_optional(self.memory_gb, "memory_gb", f"GB from 0 to {MAX_MEMORY_GB:g}",
                       MAX_MEMORY_GB)

    def gpu_ids(self) -> list[str]:
        """The ids of this node's GPUs, ``"<node>/<index>"``."""
        return [gpu_id(self.name, index) for index in range(self.num_gpus)]


def gpu_id(node: str, index: int) -> str:
    """The id of GPU ``index`` (0-based) on ``node``."""
    return f"{node}/{index}"


@dataclass(frozen=True)
class Gpu:
    """One physical GPU of the cluster."""

    id: str
    node: str
    index: int
    gpu_type: str


def default_topology(nodes: Sequence[Node]) -> nx.Graph:
    """All-to-all links inside each node, and every GPU linked to one network switch.

    Edges carry ``link`` (``"node-local"`` or ``"network"``), ``bandwidth_gbps`` and ``cost``.
    """
    import networkx as nx

    graph = nx.Graph()
    graph.add_node(SWITCH, kind="switch")
    for node in nodes:
        ids = node.gpu_ids()
        for index, gid in enumerate(ids):
            graph.add_node(gid, kind="gpu", node=node.name, gpu_type=node.gpu_type, index=index)
            graph.add_edge(gid, SWITCH, link="network", bandwidth_gbps=DEFAULT_LINKS["network"],
                           cost=0.5 / DEFAULT_LINKS["network"])
        for i, first in enumerate(ids):
            for second in ids[i + 1 :]:
                graph.add_edge(first, second, link="node-local",
                               bandwidth_gbps=DEFAULT_LINKS["node-local"],
                               cost=1.0 / DEFAULT_LINKS["node-local"])
    return graph


def check_node_links(nodes: Sequence[Node]) -> None:
    """Raise an InputError when a topology that links every pair of GPUs inside each node
    would have more than :data:`MAX_NODE_LOCAL_LINKS` such links (it is built in memory)."""
    links = sum(node.num_gpus * (node.num_gpus - 1) // 2 for node in nodes)
    if links > MAX_NODE_LOCAL_LINKS:
        raise InputError("the topology would link too many GPU pairs inside nodes",
                         path="nodes", value=links,
                         expected=f"at most {MAX_NODE_LOCAL_LINKS:,} pairs (smaller nodes)")


@dataclass(frozen=True, eq=False)
class Cluster:
    """GPU types, the nodes that hold them, and a networkx graph linking the GPUs."""

    gpu_types: tuple[GpuType, ...]
    nodes: tuple[Node, ...]
    topology: nx.Graph | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_types", tuple(self.gpu_types))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.gpu_types:
            raise InputError("the cluster has no GPU types", path="gpu_types", value=[],
                             expected="at least one GPU type")
        if not self.nodes:
            raise InputError("the cluster has no nodes", path="nodes", value=[],
                             expected="at least one node")
        seen = check_unique((t.name for t in self.gpu_types), "gpu_types[{index}].name",
                            "duplicate GPU type name", "unique names")
        total = sum(node.num_gpus for node in self.nodes)
        if total > MAX_CLUSTER_GPUS:
            raise InputError("too many GPUs in the cluster", path="nodes", value=total,
                             expected=f"at most {MAX_CLUSTER_GPUS} GPUs")
        if self.topology is None:
            check_node_links(self.nodes)
        names: set[str] = set()
        for index, node in enumerate(self.nodes):
            if node.name in names:
                raise InputError("duplicate node name", path=f"nodes[{index}].name",
                                 value=node.name, expected="unique names")
            names.add(node.name)
            if node.gpu_type not in seen:
                raise InputError("unknown GPU type", path=f"nodes[{index}].gpu_type",
                                 value=node.gpu_type,
                                 expected="one of " + ", ".join(sorted(seen)))
        if self.topology is None:
            object.__setattr__(self, "topology", default_topology(self.nodes))

    @cached_property
    def gpus(self) -> tuple[Gpu, ...]:
        """Every GPU, node by node."""
        return tuple(
            Gpu(gpu_id(node.name, index), node.name, index, node.gpu_type)
            for node in self.nodes
            for index in range(node.num_gpus)
        )

    @cached_property
    def gpu_by_id(self) -> dict[str, Gpu]:
        """GPU records by id."""
        return {gpu.id: gpu for gpu in self.gpus}

    @cached_property
    def node_by_name(self) -> dict[str, Node]:
        """Node records by name."""
        return {node.name: node for node in self.nodes}

    @cached_property
    def type_names(self) -> tuple[str, ...]:
        """The GPU type names, in declaration order."""
        return tuple(gpu_type.name for gpu_type in self.gpu_types)

    @cached_property
    def _gpus_by_type(self) -> dict[str | None, int]:
        """GPUs per type, and in all (key ``None``)."""
        counts: dict[str | None, int] = {None: 0}
        for node in self.nodes:
            counts[node.gpu_type] = counts.get(node.gpu_type, 0) + node.num_gpus
            counts[None] += node.num_gpus
        return counts

    def num_gpus(self, gpu_type: str | None = None) -> int:
        """How many GPUs the cluster has (of one type, if given)."""
        return self._gpus_by_type.get(gpu_type, 0)

    def nodes_of_type(self, gpu_type: str) -> tuple[Node, ...]:
        """The nodes whose GPUs are of ``gpu_type``."""
        return tuple(node for node in self.nodes if node.gpu_type == gpu_type)

    def placement_of(self, gpu_ids: Iterable[str]) -> Placement:
        """``packed`` if every GPU sits on one node, else ``spread``."""
        nodes = {self.gpu_by_id[gid].node for gid in gpu_ids}
        return Placement.PACKED if len(nodes) <= 1 else Placement.SPREAD

    @cached_property
    def _type_shape(self) -> dict[str, tuple[int, int, int]]:
        """Per GPU type: (nodes, GPUs, largest node), for :meth:`can_place`."""
        shape: dict[str, tuple[int, int, int]] = {}
        for node in self.nodes:
            nodes, gpus, largest = shape.get(node.gpu_type, (0, 0, 0))
            shape[node.gpu_type] = (nodes + 1, gpus + node.num_gpus,
                                    max(largest, node.num_gpus))
        return shape

    def can_place(self, gpu_type: str, count: int, placement: Placement,
                  nodes_allowed: tuple[str, ...] | None = None) -> bool:
        """Whether ``count`` GPUs of ``gpu_type`` can ever be given with ``placement`` (on
        the nodes ``nodes_allowed`` only, if given)."""
        if nodes_allowed is None:
            nodes, gpus, largest = self._type_shape.get(gpu_type, (0, 0, 0))
        else:
            sizes = [n.num_gpus for n in self.nodes
                     if n.gpu_type == gpu_type and n.name in nodes_allowed]
            nodes, gpus, largest = len(sizes), sum(sizes), max(sizes, default=0)
        if placement is Placement.PACKED:
            return largest >= count
        return count >= 2 and nodes >= 2 and gpus >= count


