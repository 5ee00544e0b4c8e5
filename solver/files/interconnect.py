"""GPU topologies: parse ``nvidia-smi topo -m`` text, build networkx graphs of servers and
clusters, and give the communication cost of a set of GPUs.

Link kinds and their bandwidths (GB/s, one direction, per GPU pair) are in
:data:`LINK_BANDWIDTH_GBPS`; docs/topology.md gives the sources. The cost of a link is
``1 / bandwidth`` (seconds per GB), so a set of GPUs joined by fast links costs little.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from hetsched.core.errors import InputError
from hetsched.core.ranges import text_float
from hetsched.core.records import SWITCH, Cluster, GpuType, Instance, Job, Node, gpu_id
from hetsched.core.throughput import Placement

#: GB/s per direction between two GPUs joined by each link kind of ``nvidia-smi topo``.
#: NV# is # bonded NVLinks at 25 GB/s each (NVLink 2 and 3); the PCIe kinds are what a
#: PCIe 3.0 x16 peer-to-peer path sustains, less with each bridge or host hop; SYS crosses
#: the CPUs' socket interconnect. Sources and measurements: docs/topology.md.
LINK_BANDWIDTH_GBPS: dict[str, float] = {
    "PIX": 12.0,
    "PXB": 11.0,
    "PHB": 9.0,
    "NODE": 8.0,
    "SYS": 6.0,
}
NVLINK_GBPS_PER_LINK = 25.0
#: Between servers: 100 Gb/s InfiniBand/Ethernet (12.5 GB/s) with per-message overheads
#: and the PCIe hops to the NIC on both ends; docs/topology.md explains the 5 GB/s.
DEFAULT_NETWORK_GBPS = 5.0
#: Between racks, when racks are modelled: an oversubscribed uplink.
DEFAULT_RACK_GBPS = 2.5

#: Packed throughputs are taken as measured on GPUs joined by at least this bandwidth
#: (one NVLink, as on the DGX-1-class servers of Gavel's measurements).
REFERENCE_GBPS = 25.0

_NV = re.compile(r"NV(\d+)$")
_KINDS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")


def link_bandwidth(kind: str) -> float:
    """GB/s of a link kind such as ``"NV2"`` or ``"PIX"``."""
    match = _NV.match(kind)
    if match:
        return NVLINK_GBPS_PER_LINK * int(match.group(1))
    try:
        return LINK_BANDWIDTH_GBPS[kind]
    except KeyError:
        raise InputError("unknown link kind", value=kind,
                         expected="NV#, PIX, PXB, PHB, NODE or SYS") from None


@dataclass(frozen=True)
class ServerTopology:
    """One server as ``nvidia-smi topo -m`` shows it.

    ``links[(a, b)]`` is the link kind between devices ``a`` and ``b`` (GPUs ``GPU0``...
    and NICs such as ``mlx5_0``), stored for both orders; ``cpu_affinity`` and
    ``numa_affinity`` map a GPU to its columns' text (when the file has them).
    """

    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    links: dict[tuple[str, str], str] = field(repr=False)
    cpu_affinity: dict[str, str] = field(default_factory=dict, repr=False)
    numa_affinity: dict[str, str] = field(default_factory=dict, repr=False)
    source: str = ""

    @property
    def num_gpus(self) -> int:
        """How many GPUs the server has."""
        return len(self.gpus)

    def link(self, a: int | str, b: int | str) -> str:
        """Link kind between two devices, given by name or by GPU index."""
        first = self.gpus[a] if isinstance(a, int) else a
        second = self.gpus[b] if isinstance(b, int) else b
        return self.links[(first, second)]

    def pair_cost(self, a: int, b: int) -> float:
        """Seconds per GB between GPUs ``a`` and ``b`` (by index): 1 / bandwidth."""
        return 1.0 / link_bandwidth(self.link(a, b))

    def set_cost(self, indices: Iterable[int]) -> float:
        """Sum of pairwise costs over a set of GPUs (by index) of this server."""
        chosen = sorted(indices)
        return sum(self.pair_cost(a, b) for a, b in itertools.combinations(chosen, 2))

    def graph(self) -> nx.Graph:
        """Devices as vertices (``kind`` gpu or nic), links as edges with ``link``,
        ``bandwidth_gbps`` and ``cost``."""
        graph = nx.Graph()
        for name in self.gpus:
            graph.add_node(name, kind="gpu", cpu_affinity=self.cpu_affinity.get(name),
                           numa_affinity=self.numa_affinity.get(name))
        for name in self.nics:
            graph.add_node(name, kind="nic")
        for (a, b), kind in self.links.items():
            if a < b:
                bandwidth = link_bandwidth(kind)
                graph.add_edge(a, b, link=kind, bandwidth_gbps=bandwidth, cost=1.0 / bandwidth)
        return graph

    def summary(self) -> str:
        """A readable table of the GPU-to-GPU links and the NICs' nearest GPUs."""
        width = max(4, *(len(g) for g in self.gpus))
        lines = [" " * width + "  " + " ".join(f"{g:>5}" for g in self.gpus)]
        for a in self.gpus:
            cells = ["    X" if a == b else f"{self.links[(a, b)]:>5}" for b in self.gpus]
            lines.append(f"{a:<{width}}  " + " ".join(cells))
        kinds: dict[str, int] = {}
        for (a, b), kind in self.links.items():
            if a < b and a in self.gpus and b in self.gpus:
                kinds[kind] = kinds.get(kind, 0) + 1
        lines.append("")
        lines.append(f"{self.num_gpus} GPUs, {len(self.nics)} NICs; GPU pairs by link: "
                     + ", ".join(f"{k} {n} ({link_bandwidth(k):g} GB/s)"
                                 for k, n in sorted(kinds.items(), key=lambda kv:
                                                    -link_bandwidth(kv[0]))))
        for nic in self.nics:
            near = [g for g in self.gpus if self.links[(nic, g)] == "PIX"]
            if near:
                lines.append(f"{nic}: PIX to {', '.join(near)}")
        if self.numa_affinity:
            lines.append("NUMA: " + ", ".join(f"{g} {n}" for g, n in self.numa_affinity.items()))
        return "\n".join(lines)


def parse_nvidia_smi_topo(text: str, source: str = "<text>") -> ServerTopology:
    """Parse the matrix printed by ``nvidia-smi topo -m`` (or ``-mp``).

    Reads the header of device names (GPUs, NICs, then ``CPU Affinity`` / ``NUMA
    Affinity`` / ``GPU NUMA ID`` columns), one row per device, and stops at the legend.
    Errors name the line and column.
    """
    lines = text.splitlines()
    header_index = next((i for i, line in enumerate(lines) if re.search(r"\tGPU0\b", line)
                         or re.match(r"^\s+GPU0\b", line)), None)
    if header_index is None:
        raise InputError("no header row naming GPU0 was found", file=source,
                         expected="the output of nvidia-smi topo -m")
    header = [cell.strip() for cell in re.split(r"\t| {2,}", lines[header_index].strip())]
    devices = [c for c in header if c and not c.endswith("Affinity") and "NUMA" not in c]
    extras = [c for c in header if c.endswith("Affinity") or "NUMA" in c]
    gpus = tuple(d for d in devices if re.fullmatch(r"GPU\d+", d))
    nics = tuple(d for d in devices if d not in gpus)
    links: dict[tuple[str, str], str] = {}
    cpu_affinity: dict[str, str] = {}
    numa_affinity: dict[str, str] = {}
    seen: set[str] = set()
    for line_no in range(header_index + 1, len(lines)):
        line = lines[line_no]
        if not line.strip():
            if seen:
                break
            continue
        if line.lstrip().startswith("Legend"):
            break
        cells = line.split("\t") if "\t" in line else re.split(r" {2,}", line)
        name = cells[0].strip()
        if name not in devices:
            raise InputError(f"line {line_no + 1}, column 1: unknown device", file=source,
                             value=name, expected="a device named in the header: "
                             + ", ".join(devices))
        values = cells[1:]
        if len(values) < len(devices):
            raise InputError(f"line {line_no + 1}: row has {len(values)} cells", file=source,
                             value=line.strip(), expected=f"{len(devices)} link cells")
        column = len(cells[0]) + 2
        for index, device in enumerate(devices):
            kind = values[index].strip()
            if device == name:
                if kind != "X":
                    raise InputError(f"line {line_no + 1}, column {column}: the diagonal "
                                     "must be X", file=source, value=kind, expected="X")
            elif not (_NV.match(kind) or kind in _KINDS):
                raise InputError(f"line {line_no + 1}, column {column}: unknown link kind",
                                 file=source, value=kind,
                                 expected="X, NV#, PIX, PXB, PHB, NODE or SYS")
            else:
                other = links.get((device, name))
                if other is not None and other != kind:
                    raise InputError(f"line {line_no + 1}, column {column}: the matrix is "
                                     f"not symmetric ({device}-{name} is {other})",
                                     file=source, value=kind, expected=other)
                links[(name, device)] = kind
                links[(device, name)] = kind
            column += len(values[index]) + 1
        extra_cells = [c.strip() for c in values[len(devices):]]
        for key, value in zip(extras, extra_cells, strict=False):
            if name in gpus and value:
                if key == "CPU Affinity":
                    cpu_affinity[name] = value
                else:
                    numa_affinity[name] = value
        seen.add(name)
    missing = [d for d in devices if d not in seen]
    if missing:
        raise InputError("the matrix has no row for a device of the header", file=source,
                         value=missing[0], expected="one row per device")
    if not gpus:
        raise InputError("the matrix names no GPU", file=source, expected="GPU0, GPU1, ...")
    return ServerTopology(gpus, nics, links, cpu_affinity, numa_affinity, source)


def read_topology(path: str | Path) -> ServerTopology:
    """Parse an ``nvidia-smi topo -m`` file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such topology file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the topology file ({exc})", file=str(path)) from None
    return parse_nvidia_smi_topo(text, str(path))


def uniform_server(num_gpus: int, kind: str = "PIX") -> ServerTopology:
    """A server whose GPU pairs are all joined by the same link kind."""
    names = tuple(f"GPU{i}" for i in range(num_gpus))
    links = {(a, b): kind for a in names for b in names if a != b}
    return ServerTopology(names, (), links, source=f"uniform {kind}")


@dataclass(frozen=True)
class NetworkSpec:
    """How servers are joined: one switch per rack, racks joined by a spine (GB/s are
    effective GPU-to-GPU rates)."""

    network_gbps: float = DEFAULT_NETWORK_GBPS
    servers_per_rack: int | None = None  # None: one switch for all servers
    rack_gbps: float = DEFAULT_RACK_GBPS


def cluster_graph(nodes: Sequence[Node], servers: dict[str, ServerTopology],
                  network: NetworkSpec = NetworkSpec()) -> nx.Graph:
    """The cluster's GPU graph: each node's GPUs linked as its server topology says, and
    every GPU linked to its rack switch (racks to a spine when racks are modelled).

    ``servers`` maps a node name to its topology; nodes without one get all-pairs
    ``PIX`` links. GPU vertices are the cluster's GPU ids (``node/index``). Every edge has
    ``link``, ``bandwidth_gbps`` and ``cost`` (seconds per GB of the hop; the two hops of
    a network path cost ``1 / network_gbps`` together).
    """
    graph = nx.Graph()
    graph.add_node(SWITCH, kind="switch")
    for position, node in enumerate(nodes):
        server = servers.get(node.name) or uniform_server(node.num_gpus)
        if server.num_gpus != node.num_gpus:
            raise InputError("topology does not match the node's GPU count", path=node.name,
                             value=server.num_gpus, expected=f"{node.num_gpus} GPUs")
        switch = SWITCH
        if network.servers_per_rack:
            switch = f"rack{position // network.servers_per_rack}"
            if switch not in graph:
                graph.add_node(switch, kind="switch")
                graph.add_edge(switch, SWITCH, link="rack", bandwidth_gbps=network.rack_gbps,
                               cost=0.5 / network.rack_gbps)
        for index in range(node.num_gpus):
            graph.add_node(gpu_id(node.name, index), kind="gpu", node=node.name,
                           gpu_type=node.gpu_type, index=index)
            graph.add_edge(gpu_id(node.name, index), switch, link="network",
                           bandwidth_gbps=network.network_gbps,
                           cost=0.5 / network.network_gbps)
        for a, b in itertools.combinations(range(node.num_gpus), 2):
            kind = server.link(a, b)
            bandwidth = link_bandwidth(kind)
            graph.add_edge(gpu_id(node.name, a), gpu_id(node.name, b), link=kind,
                           bandwidth_gbps=bandwidth, cost=1.0 / bandwidth)
    return graph


def _uplink(graph: nx.Graph, gpu: str) -> tuple[str, float]:
    """The switch a GPU hangs off and the cost of that hop."""
    for neighbour, attributes in graph[gpu].items():
        if graph.nodes[neighbour].get("kind") == "switch":
            return neighbour, float(attributes["cost"])
    raise InputError("GPU has no link to a network switch", value=gpu,
                     expected="an edge from every GPU to a switch vertex")


def pair_cost(cluster: Cluster, a: str, b: str) -> float:
    """Seconds per GB between two GPUs of ``cluster``: the direct link inside a node, else
    the path up to the switch and down (through the spine between racks)."""
    graph = cluster.topology
    assert graph is not None
    if graph.has_edge(a, b):
        return float(graph.edges[a, b]["cost"])
    switch_a, cost_a = _uplink(graph, a)
    switch_b, cost_b = _uplink(graph, b)
    cost = cost_a + cost_b
    if switch_a != switch_b:
        cost += float(graph.edges[switch_a, SWITCH]["cost"])
        cost += float(graph.edges[switch_b, SWITCH]["cost"])
    return cost


def set_cost(cluster: Cluster, gpus: Sequence[str]) -> float:
    """Communication cost of a gang: the sum of :func:`pair_cost` over its GPU pairs."""
    return sum(pair_cost(cluster, a, b) for a, b in itertools.combinations(gpus, 2))


def server_cluster(server: ServerTopology, count: int, gpu_type: str, *,
                   prefix: str | None = None, network: NetworkSpec = NetworkSpec(),
                   gpu_types: Sequence[GpuType] | None = None) -> Cluster:
    """``count`` identical servers of ``gpu_type`` joined by ``network``."""
    prefix = prefix or gpu_type
    nodes = tuple(Node(f"{prefix}-{i}", gpu_type, server.num_gpus) for i in range(count))
    graph = cluster_graph(nodes, {node.name: server for node in nodes}, network)
    return Cluster(tuple(gpu_types or (GpuType(gpu_type),)), nodes, graph)


#: PAI's machine spec names: GPU type per ``gpu_type`` column value.
PAI_GPU_TYPES = {"P100": "p100", "T4": "t4", "V100": "v100", "V100M32": "v100m32",
                 "MISC": "misc"}


def pai_cluster(path: str | Path, *, servers: dict[str, ServerTopology] | None = None,
                network: NetworkSpec = NetworkSpec(servers_per_rack=32)) -> Cluster:
    """A heterogeneous cluster from Alibaba PAI's ``pai_machine_spec.csv``
    (``machine, gpu_type, cap_cpu, cap_mem, cap_gpu``): one node per machine with GPUs,
    with its CPUs and memory (GB); CPU-only machines are left out.

    ``servers`` maps a GPU type to the topology its machines have (by default all
    pairs PIX for 2-GPU machines and, for 8-GPU machines, the DGX-1-like NVLink layout
    when given, else PIX).
    """
    path = Path(path)
    nodes: list[Node] = []
    try:
        handle = path.open(newline="", encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such machine list", file=str(path)) from None
    with handle:
        reader = csv.DictReader(handle)
        need = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"missing column '{missing[0]}'", file=str(path), path="line 1",
                             expected="columns " + ", ".join(need))
        for line, row in enumerate(reader, start=2):
            for column in ("cap_gpu", "cap_cpu", "cap_mem"):
                try:
                    value = text_float(row[column] or ("0" if column == "cap_gpu" else ""))
                except (TypeError, ValueError):
                    value = math.nan
                if not (math.isfinite(value) and value >= 0):
                    raise InputError(f"bad {column}", file=str(path),
                                     path=f"line {line}.{column}", value=row[column],
                                     expected="a finite number >= 0")
            gpus = int(text_float(row["cap_gpu"] or "0"))
            cpus = int(text_float(row["cap_cpu"]))
            memory = text_float(row["cap_mem"])
            if gpus <= 0 or row["gpu_type"] in ("", "CPU"):
                continue
            gpu_type = PAI_GPU_TYPES.get(row["gpu_type"], row["gpu_type"].lower())
            if not math.isfinite(memory):
                raise InputError("bad memory", file=str(path), path=f"line {line}.cap_mem",
                                 value=row["cap_mem"], expected="a finite number of GB")
            nodes.append(Node(row["machine"], gpu_type, gpus, cpus=cpus, memory_gb=memory))
    types = tuple(GpuType(t) for t in dict.fromkeys(node.gpu_type for node in nodes))
    by_node = {}
    for node in nodes:
        server = (servers or {}).get(node.gpu_type)
        if server is not None and server.num_gpus == node.num_gpus:
            by_node[node.name] = server
    return Cluster(types, tuple(nodes), cluster_graph(nodes, by_node, network))


def communication_sensitivity(instance: Instance, job: Job, gpu_type: str, count: int) -> float:
    """How much a gang loses when its GPUs are far apart: ``1 - spread / packed`` throughput
    of its job type on ``count`` GPUs of ``gpu_type`` (0 for one GPU; 1 when it cannot run
    spread)."""
    if count == 1:
        return 0.0
    packed = instance.throughput.throughput(job.job_type, gpu_type, count, Placement.PACKED)
    spread = instance.throughput.throughput(job.job_type, gpu_type, count, Placement.SPREAD)
    if packed <= 0:
        return 0.0
    return float(min(1.0, max(0.0, 1.0 - spread / packed)))


def link_factor(sensitivity: float, slowest_gbps: float,
                network_gbps: float = DEFAULT_NETWORK_GBPS) -> float:
    """Speed of a packed gang whose slowest GPU pair link has ``slowest_gbps``, against its
    packed throughput: 1 at :data:`REFERENCE_GBPS` or faster, ``1 - sensitivity`` (the
    spread speed) at the network's bandwidth, log-linear in between."""
    if slowest_gbps >= REFERENCE_GBPS:
        return 1.0
    span = math.log(REFERENCE_GBPS / network_gbps)
    drop = min(1.0, max(0.0, math.log(REFERENCE_GBPS / slowest_gbps) / span))
    return 1.0 - sensitivity * drop


def predicted_throughput(instance: Instance, job: Job, gpu_type: str,
                         gpus: Sequence[str]) -> float:
    """steps/s of ``job`` on these GPUs: the throughput model's packed or spread speed, and
    for a packed gang the :func:`link_factor` of its slowest GPU pair link."""
    cluster = instance.cluster
    placement = cluster.placement_of(gpus)
    base = instance.throughput.throughput(job.job_type, gpu_type, len(gpus), placement)
    if placement is Placement.SPREAD or len(gpus) < 2 or cluster.topology is None:
        return base
    graph = cluster.topology
    slowest = min(float(graph.edges[a, b]["bandwidth_gbps"])
                  for a, b in itertools.combinations(gpus, 2))
    weight = communication_sensitivity(instance, job, gpu_type, len(gpus))
    return base * link_factor(weight, slowest)
