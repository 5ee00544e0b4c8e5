"""Topology: parsing real nvidia-smi output, graphs and costs, and the exact placement
model against brute force."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hetsched.core.records import Cluster, GpuType, Node
from hetsched.files.interconnect import (
    NetworkSpec,
    ServerTopology,
    link_bandwidth,
    pai_cluster,
    pair_cost,
    parse_nvidia_smi_topo,
    read_topology,
    server_cluster,
    set_cost,
)
from hetsched.formulations.topology import Gang, place
from hetsched.formulations.topology.problem import fragmentation
from tests.helpers import SHARED_DATA, raises_input_error

TOPOLOGY = SHARED_DATA / "topology"
DGX1 = TOPOLOGY / "dgx1-v100.nvidia-smi-topo.txt"
DGXA100 = TOPOLOGY / "dgx-a100.nvidia-smi-topo.txt"
PCIE = TOPOLOGY / "dgx1-v100-pcie-only.nvidia-smi-topo-mp.txt"
#: Every test taking ``backend`` runs on each back-end of the topology model (tests/conftest.py).
pytestmark = pytest.mark.model("topology")



def topo(path: Path, shared_data: Path) -> ServerTopology:
    assert shared_data.is_dir()
    return read_topology(path)


def test_dgx1_links(shared_data: Path) -> None:
    server = topo(DGX1, shared_data)
    assert server.gpus == tuple(f"GPU{i}" for i in range(8))
    assert server.nics == ("mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3")
    assert (server.link(0, 3), server.link(0, 1), server.link(0, 5)) == ("NV2", "NV1", "SYS")
    # Hybrid cube-mesh: every GPU has 4 NVLink neighbours (2 doubled), 3 SYS peers.
    for gpu in range(8):
        kinds = sorted(server.link(gpu, other) for other in range(8) if other != gpu)
        assert kinds == ["NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    assert server.link("mlx5_0", "GPU0") == "PIX"
    assert server.cpu_affinity["GPU4"] == "20-39,60-79"
    assert server.numa_affinity == {}


def test_dgx_a100_links(shared_data: Path) -> None:
    server = topo(DGXA100, shared_data)
    assert len(server.gpus) == 8
    assert len(server.nics) == 12
    assert {server.link(a, b) for a in range(8) for b in range(8) if a != b} == {"NV12"}
    assert server.numa_affinity["GPU0"] == "3"
    assert server.numa_affinity["GPU7"] == "5"
    assert link_bandwidth("NV12") == 300.0


def test_pcie_only_links(shared_data: Path) -> None:
    server = topo(PCIE, shared_data)
    assert len(server.gpus) == 8
    assert (server.link(0, 1), server.link(0, 2), server.link(0, 4)) == ("PIX", "PHB", "SYS")
    assert server.numa_affinity["GPU4"] == "1"
    graph = server.graph()
    assert graph.number_of_nodes() == 12
    assert graph.edges["GPU0", "GPU1"]["bandwidth_gbps"] == 12.0


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("nothing here\n", ["no header row naming GPU0"]),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV9X\nGPU1\tNV1\t X \n",
         ["line 2, column 10: unknown link kind", "'NV9X'"]),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU1\tPIX\t X \n", ["line 3, column 6", "not symmetric"]),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU7\tNV1\t X \n", ["line 3, column 1: unknown device"]),
        ("\tGPU0\tGPU1\nGPU0\t X \n", ["line 2: row has 1 cells"]),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV1\n\nLegend:\n", ["no row", "'GPU1'"]),
        ("\tGPU0\tGPU1\nGPU0\tPIX\tNV1\nGPU1\tNV1\t X \n", ["diagonal must be X"]),
    ],
)
def test_malformed_topology_text_names_line_and_column(text: str, pieces: list[str]) -> None:
    raises_input_error(lambda: parse_nvidia_smi_topo(text, "bad.txt"), "bad.txt: ", pieces)


def test_cluster_costs(shared_data: Path) -> None:
    server = topo(DGX1, shared_data)
    cluster = server_cluster(server, 3, "v100", network=NetworkSpec(servers_per_rack=2))
    assert cluster.num_gpus() == 24
    assert pair_cost(cluster, "v100-0/0", "v100-0/3") == pytest.approx(1 / 50)
    assert pair_cost(cluster, "v100-0/0", "v100-0/5") == pytest.approx(1 / 6)
    assert pair_cost(cluster, "v100-0/0", "v100-1/0") == pytest.approx(1 / 5)  # same rack
    assert pair_cost(cluster, "v100-0/0", "v100-2/0") == pytest.approx(1 / 5 + 1 / 2.5)


def test_pai_inventory_cluster(shared_data: Path) -> None:
    cluster = pai_cluster(shared_data / "alibaba" / "pai_machine_spec.csv",
                          servers={"v100": topo(DGX1, shared_data)})
    # 1,897 machines less 83 CPU-only ones.
    assert len(cluster.nodes) == 1897 - 83
    counts = {t: len(cluster.nodes_of_type(t)) for t in cluster.type_names}
    assert counts == {"t4": 497, "misc": 280, "p100": 798, "v100": 104, "v100m32": 135}
    assert all(node.cpus and node.memory_gb for node in cluster.nodes)
    v100 = cluster.nodes_of_type("v100")[0].name
    assert cluster.topology is not None
    assert cluster.topology.edges[f"{v100}/0", f"{v100}/3"]["link"] == "NV2"


def brute_force(cluster: Cluster, busy: set[str], k: int) -> float:
    free = [g.id for g in cluster.gpus if g.id not in busy]
    return min(set_cost(cluster, subset) for subset in itertools.combinations(free, k))


@pytest.mark.parametrize("name", ["dgx1", "pcie"])
@pytest.mark.parametrize("busy", [(), ("GPU0", "GPU5", "GPU6")])
def test_single_gang_equals_brute_force(shared_data: Path, backend: str, name: str,
                                        busy: tuple[str, ...]) -> None:
    server = topo(DGX1 if name == "dgx1" else PCIE, shared_data)
    cluster = server_cluster(server, 1, "v100")
    busy_ids = {f"v100-0/{b.removeprefix('GPU')}" for b in busy}
    for k in (2, 3, 4, 8):
        if k > 8 - len(busy_ids):
            continue
        outcome = place(cluster, busy_ids, (Gang("j", "v100", k),), backend=backend)
        expected = brute_force(cluster, busy_ids, k)
        assert outcome.status.value == "OPTIMAL"
        assert outcome.cost == pytest.approx(expected, abs=1e-9), (k, outcome.placement)
        assert outcome.bound == pytest.approx(expected, abs=1e-5)
        chosen = outcome.placement["j"]
        assert len(chosen) == k
        assert not set(chosen) & busy_ids


def test_known_optima_on_dgx1(shared_data: Path) -> None:
    # DGX-1: the best 4 GPUs are one cube face {0,1,2,3}: pairs 0-3, 1-2 NV2 (1/50 each),
    # 0-1, 0-2, 1-3, 2-3 NV1 (1/25 each): 2/50 + 4/25 = 0.2... minus nothing = 0.18 s/GB
    # is the figure: 0-1 NV1, 0-2 NV1, 0-3 NV2, 1-2 NV2, 1-3 NV1, 2-3 NV2 -> 3/25 + 3/50.
    server = topo(DGX1, shared_data)
    cluster = server_cluster(server, 1, "v100")
    outcome = place(cluster, set(), (Gang("j", "v100", 4),))
    assert outcome.cost == pytest.approx(3 / 25 + 3 / 50)
    assert set(outcome.placement["j"]) in ({f"v100-0/{i}" for i in range(4)},
                                           {f"v100-0/{i}" for i in range(4, 8)})


def test_two_gangs_on_two_servers_equal_brute_force(shared_data: Path, backend: str) -> None:
    # Two 3-GPU gangs with different sensitivity and a 2-GPU gang on two DGX-1s with
    # busy GPUs: enumerate every disjoint choice.
    server = topo(DGX1, shared_data)
    cluster = server_cluster(server, 2, "v100")
    busy = {"v100-0/0", "v100-0/7", "v100-1/1", "v100-1/2", "v100-1/6"}
    gangs = (Gang("a", "v100", 3, 1.0), Gang("b", "v100", 3, 0.4), Gang("c", "v100", 2, 0.7))
    free_by_node = {n.name: [g for g in n.gpu_ids() if g not in busy] for n in cluster.nodes}
    best = float("inf")
    options = {
        gang.job: [s for ids in free_by_node.values()
                   for s in itertools.combinations(ids, gang.num_gpus)]
        for gang in gangs
    }
    for sa in options["a"]:
        for sb in options["b"]:
            if set(sa) & set(sb):
                continue
            for sc in options["c"]:
                if set(sc) & (set(sa) | set(sb)):
                    continue
                best = min(best, set_cost(cluster, sa) + 0.4 * set_cost(cluster, sb)
                           + 0.7 * set_cost(cluster, sc))
    outcome = place(cluster, busy, gangs, backend=backend)
    assert outcome.cost == pytest.approx(best, abs=1e-9)
    used = [g for gpus in outcome.placement.values() for g in gpus]
    assert len(used) == len(set(used)) == 8
    assert not set(used) & busy


def test_spread_gang_cost_is_exact(backend: str) -> None:
    # Three 4-GPU nodes with 2, 3 and 3 free GPUs: a 6-GPU gang must spread. Uniform PCIe
    # inside nodes (1/32), network 1/5 between: pieces (3, 3) give 2 x 3/32 intra and 9
    # network pairs = 0.1875 + 1.8; pieces (2, 3, 1) or others cost more.
    cluster = Cluster((GpuType("t4"),), tuple(Node(f"n{i}", "t4", 4) for i in range(3)))
    busy = {"n0/0", "n0/1", "n1/0", "n2/0"}
    outcome = place(cluster, busy, (Gang("big", "t4", 6, allow_spread=True),), backend=backend)
    assert outcome.cost == pytest.approx(6 / 32 + 9 / 5)
    assert outcome.cost == pytest.approx(set_cost(cluster, outcome.placement["big"]))
    nodes = sorted(g.split("/")[0] for g in outcome.placement["big"])
    assert nodes == ["n1"] * 3 + ["n2"] * 3


def test_fragmentation_breaks_ties(backend: str) -> None:
    # Uniform links: every 1-GPU placement costs 0. Node n0 is already half busy, n1 is
    # empty: the single GPU goes to n0 so that n1 stays whole (1 partly free node, not 2).
    cluster = Cluster((GpuType("t4"),), (Node("n0", "t4", 4), Node("n1", "t4", 4)))
    busy = {"n0/0", "n0/1"}
    outcome = place(cluster, busy, (Gang("one", "t4", 1, 0.0),), backend=backend)
    assert outcome.placement["one"][0].startswith("n0/")
    assert outcome.fragmentation == 1
    assert fragmentation(cluster, busy | set(outcome.placement["one"])) == 1


def test_infeasible_when_gangs_do_not_fit() -> None:
    cluster = Cluster((GpuType("t4"),), (Node("n0", "t4", 4),))
    outcome = place(cluster, {"n0/0"}, (Gang("a", "t4", 2), Gang("b", "t4", 2)))
    assert outcome.status.value == "INFEASIBLE"
    assert outcome.placement == {}
