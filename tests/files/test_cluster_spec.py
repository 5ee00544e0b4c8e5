"""The --cluster spec (hetsched.cluster_spec.parse_cluster): GPU counts, JSON files, openb."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.cluster_spec import GPUS_PER_SERVER, parse_cluster
from hetsched.errors import InputError
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


def test_bad_json_cluster(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"gpu_types": [{"name": "v100"}], "nodes": [{"name": "a", '
                    '"gpu_type": "p100", "num_gpus": 2}]}')
    with pytest.raises(InputError, match=r"c.json: \$.nodes\[0\].gpu_type: unknown GPU type"):
        parse_cluster(str(path))
    path.write_text('{"gpu_types": [{"name": "v100"}]}')
    with pytest.raises(InputError, match=r"c.json: \$.nodes: missing or bad nodes"):
        parse_cluster(str(path))
