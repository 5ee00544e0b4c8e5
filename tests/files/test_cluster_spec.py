"""The --cluster spec (hetsched.files.cluster_spec.parse_cluster): GPU counts, JSON files, openb."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.files.cluster_spec import GPUS_PER_SERVER, parse_cluster
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "traces"


def test_gpu_counts_in_servers_of_the_default_size() -> None:
    cluster = parse_cluster("v100=36,p100=36,k80=6")
    assert GPUS_PER_SERVER == 4
    assert cluster.type_names == ("v100", "p100", "k80")
    assert cluster.num_gpus("v100") == 36
    assert [n.num_gpus for n in cluster.nodes_of_type("v100")] == [4] * 9
    # 6 K80s: one full server and one of the remaining 2.
    assert [(n.name, n.num_gpus) for n in cluster.nodes_of_type("k80")] == \
        [("k80-0", 4), ("k80-1", 2)]
    assert cluster.gpu_types[0].memory_gb == 16  # from the built-in catalogue


def test_server_size_per_type_and_unknown_type_names() -> None:
    cluster = parse_cluster("v100=16x8, h100=8x8")
    assert [(n.gpu_type, n.num_gpus) for n in cluster.nodes] == \
        [("v100", 8), ("v100", 8), ("h100", 8)]
    assert cluster.gpu_types[1].memory_gb is None


def test_json_cluster_file_relative_to_base_dir() -> None:
    cluster = parse_cluster("cluster.json", base_dir=DATA)
    assert cluster.type_names == ("v100", "k80")
    assert [(n.name, n.num_gpus) for n in cluster.nodes] == [("a", 8), ("b", 4)]


def test_openb_node_list() -> None:
    cluster = parse_cluster("openb:openb_nodes.csv", base_dir=DATA)
    assert cluster.num_gpus() == 10


@pytest.mark.parametrize(("spec", "message"), [
    ("", "empty cluster spec"),
    ("v100", "bad cluster spec item"),
    ("v100=0", "GPU counts must be >= 1"),
    ("v100=4x0", "GPU counts must be >= 1"),
    ("v100=4,v100=8", "GPU type given twice"),
    ("v100=four", "bad cluster spec item"),
    ("openb:", "no node list"),
    ("missing.json", "no such file"),
])
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_cluster(spec, base_dir=DATA)


#: The start of a cluster file with one GPU type, v100.
V100 = '{"gpu_types": [{"name": "v100"}]'


@pytest.mark.parametrize(("text", "message"), [
    (V100 + ', "nodes": [{"name": "a", "gpu_type": "p100", "num_gpus": 2}]}',
     r"c.json: \$.nodes\[0\].gpu_type: unknown GPU type"),
    (V100 + "}", r"c.json: \$.nodes: missing or bad nodes"),
    (V100 + ', "nodes": [{"name": "a", "gpu_type": "v100"}]}',
     r"c.json: \$.nodes\[0\]: missing field 'num_gpus'"),
    (V100 + ', "nodes": [{"name": "a", "gpu_type": "v100", "num_gpus": 30000}]}',
     r"c.json: \$.nodes\[0\].num_gpus: value too large"),
    (V100 + ', "nodes": ' + "[" * 3000 + "]" * 3000 + "}", r"c.json: JSON nested too deeply"),
])
def test_bad_json_cluster_files_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        parse_cluster(str(path))


def test_pai_machine_list(tmp_path: Path) -> None:
    # Alibaba PAI's machine_spec layout: CPU-only machines are left out; every other
    # machine is a node with its GPUs, CPUs and memory; relative paths from base_dir.
    (tmp_path / "machines.csv").write_text(
        "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n"
        "m0,CPU,96,512,0\nm1,P100,64,512,2\nm2,V100M32,96,512,8\nm3,T4,96,512,2\n")
    cluster = parse_cluster("pai:machines.csv", base_dir=tmp_path)
    assert [(n.name, n.gpu_type, n.num_gpus, n.cpus, n.memory_gb) for n in cluster.nodes] == [
        ("m1", "p100", 2, 64, 512.0), ("m2", "v100m32", 8, 96, 512.0),
        ("m3", "t4", 2, 96, 512.0)]
    assert cluster.type_names == ("p100", "v100m32", "t4")
    with pytest.raises(InputError, match="no machine list after 'pai:'"):
        parse_cluster("pai: ")
    with pytest.raises(InputError, match="no such machine list"):
        parse_cluster("pai:missing.csv", base_dir=tmp_path)


def test_the_real_pai_machine_list(shared_data: Path) -> None:
    # 1,897 machines: 83 CPU-only left out; P100x2 798, T4x2 497, MISCx8 280,
    # V100M32x8 135, V100x8 104 (shared/data/README.md): 6,742 GPUs.
    cluster = parse_cluster(f"pai:{shared_data / 'alibaba' / 'pai_machine_spec.csv'}")
    assert len(cluster.nodes) == 1_814
    assert cluster.num_gpus() == 6_742
    assert {t: cluster.num_gpus(t) for t in cluster.type_names} == {
        "p100": 1_596, "t4": 994, "misc": 2_240, "v100m32": 1_080, "v100": 832}
