"""Reading Slurm's JSON (hetsched.slurm.state, hetsched.slurm.control): GPU nodes as a
cluster in the order asked for, GPUs held from ``gres_detail``, host lists. Records as
Slurm 22.05's ``sinfo --json`` / ``squeue --json`` print them (openapi v0.0.38)."""

from __future__ import annotations

from hetsched.slurm.control import expand_nodes, gpu_indices
from hetsched.slurm.state import held_gpus, read_cluster

NEEDS_SLURM = False  # (tests/slurm/conftest.py)


def node(name: str, gres: str, state: str = "idle") -> dict[str, object]:
    return {"name": name, "gres": gres, "state": state, "cpus": 32, "real_memory": 131072,
            "state_flags": []}


def test_nodes_follow_the_order_asked_for_and_down_nodes_are_busy() -> None:
    nodes = [node("k80-0", "gpu:k80:4"), node("p100-0", "gpu:p100:4(S:0)"),
             node("v100-10", "gpu:v100:4"), node("v100-2", "gpu:v100:4", state="drained"),
             node("cpu-0", "")]
    cluster, unusable = read_cluster(nodes)
    # By name (v100-2 before v100-10), the node without GPUs left out.
    assert [n.name for n in cluster.nodes] == ["k80-0", "p100-0", "v100-2", "v100-10"]
    assert cluster.type_names == ("k80", "p100", "v100")
    assert unusable == frozenset(f"v100-2/{i}" for i in range(4))
    cluster, _ = read_cluster(nodes, ["v100", "p100", "k80"])
    assert cluster.type_names == ("v100", "p100", "k80")
    assert [n.name for n in cluster.nodes][:2] == ["v100-2", "v100-10"]
    cluster, _ = read_cluster(nodes, ["v100-10", "v100-2", "k80-0", "p100-0"])
    assert [n.name for n in cluster.nodes] == ["v100-10", "v100-2", "k80-0", "p100-0"]
    assert (cluster.nodes[0].cpus, cluster.nodes[0].memory_gb) == (32, 128.0)


def test_held_gpus_come_from_gres_detail_one_entry_per_node() -> None:
    record = {"nodes": "v100-[0-1]", "gres_detail": ["gpu:v100:3(IDX:0,2-3)", "gpu:1(IDX:1)"]}
    assert held_gpus(record) == (("v100-0", "v100-1"),
                                 ("v100-0/0", "v100-0/2", "v100-0/3", "v100-1/1"))
    assert gpu_indices("gpu:k80:2(IDX:N/A)") == []
    assert expand_nodes("k80-0,v100-[08-10]") == ["k80-0", "v100-08", "v100-09", "v100-10"]
