"""The data model: frozen, validated records."""

from __future__ import annotations

import dataclasses

import pytest

from solver.data import Cluster, GpuType, Instance, Job, Node
from solver.errors import InputError
from solver.throughput import Placement, ThroughputTable


def two_type_cluster() -> Cluster:
    return Cluster(
        (GpuType("v100"), GpuType("k80")),
        (Node("a", "v100", 4), Node("b", "v100", 4), Node("c", "k80", 2)),
    )


def test_records_are_frozen() -> None:
    job = Job("j", 0.0, "cnn", 1, 100.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.work = 5.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"work": 0.0}, "work"),
        ({"work": float("nan")}, "work"),
        ({"arrival": -1.0}, "arrival"),
        ({"num_gpus": 0}, "num_gpus"),
        ({"num_gpus": True}, "num_gpus"),
        ({"num_gpus": 2.0}, "num_gpus"),
        ({"deadline": 0.0}, "deadline"),
        ({"weight": 0.0}, "weight"),
        ({"id": ""}, "id"),
        ({"allowed_gpu_counts": (2, 4)}, "allowed_gpu_counts"),
        ({"allowed_gpu_counts": (1, 0)}, "allowed_gpu_counts[1]"),
    ],
)
def test_job_validation_names_the_field(fields: dict[str, object], path: str) -> None:
    base: dict[str, object] = {"id": "j", "arrival": 0.0, "job_type": "cnn", "num_gpus": 1,
                               "work": 100.0}
    with pytest.raises(InputError) as error:
        Job(**{**base, **fields})  # type: ignore[arg-type]
    assert error.value.path == path


def test_allowed_counts_are_sorted_and_include_requested() -> None:
    job = Job("j", 0.0, "cnn", 2, 100.0, allowed_gpu_counts=(4, 2, 1, 2))
    assert job.gpu_counts == (1, 2, 4)
    assert Job("k", 0.0, "cnn", 2, 100.0).gpu_counts == (2,)


def test_cluster_gpus_and_default_topology() -> None:
    cluster = two_type_cluster()
    assert [g.id for g in cluster.gpus][:5] == ["a/0", "a/1", "a/2", "a/3", "b/0"]
    assert cluster.num_gpus() == 10
    assert cluster.num_gpus("v100") == 8
    graph = cluster.topology
    assert graph is not None
    # 10 GPUs + 1 switch; node cliques 6 + 6 + 1 edges; one network edge per GPU.
    assert graph.number_of_nodes() == 11
    assert graph.number_of_edges() == 6 + 6 + 1 + 10
    assert graph.edges["a/0", "a/3"]["link"] == "node-local"
    assert graph.edges["a/0", "switch"]["link"] == "network"


def test_cluster_rejects_unknown_gpu_type_and_duplicates() -> None:
    with pytest.raises(InputError, match="unknown GPU type") as error:
        Cluster((GpuType("v100"),), (Node("a", "k80", 1),))
    assert error.value.path == "nodes[0].gpu_type"
    with pytest.raises(InputError, match="duplicate node name"):
        Cluster((GpuType("v100"),), (Node("a", "v100", 1), Node("a", "v100", 1)))
    with pytest.raises(InputError, match="no nodes"):
        Cluster((GpuType("v100"),), ())


def test_placement_and_can_place() -> None:
    cluster = two_type_cluster()
    assert cluster.placement_of(["a/0", "a/2"]) is Placement.PACKED
    assert cluster.placement_of(["a/0", "b/2"]) is Placement.SPREAD
    assert cluster.can_place("v100", 4, Placement.PACKED)
    assert not cluster.can_place("v100", 5, Placement.PACKED)
    assert cluster.can_place("v100", 8, Placement.SPREAD)
    assert not cluster.can_place("k80", 2, Placement.SPREAD)  # one k80 node only
    assert not cluster.can_place("v100", 1, Placement.SPREAD)


def test_configurations_follow_throughput_and_cluster_shape() -> None:
    table = ThroughputTable.from_rows([
        ("cnn", "v100", 4, "packed", 30.0),
        ("cnn", "v100", 8, "spread", 40.0),
        ("cnn", "v100", 8, "packed", 55.0),  # no 8-GPU node: never offered
        ("cnn", "k80", 4, "packed", 9.0),  # only 2 k80s: never offered
    ])
    instance = Instance(two_type_cluster(),
                        (Job("j", 0.0, "cnn", 4, 100.0, allowed_gpu_counts=(4, 8)),), table)
    found = {(c.gpu_type, c.num_gpus, c.placement.value, c.throughput)
             for c in instance.configurations(instance.jobs[0])}
    assert found == {("v100", 4, "packed", 30.0), ("v100", 8, "spread", 40.0)}


def test_instance_rejects_jobs_that_cannot_run_anywhere() -> None:
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 3.0)])
    cluster = two_type_cluster()
    with pytest.raises(InputError, match="no positive throughput") as error:
        Instance(cluster, (Job("j", 0.0, "rnn", 1, 10.0),), table)
    assert error.value.path == "jobs[0].job_type"
    with pytest.raises(InputError, match="larger than any GPU type") as error:
        Instance(cluster, (Job("j", 0.0, "cnn", 16, 10.0),), table)
    assert error.value.path == "jobs[0].num_gpus"
    with pytest.raises(InputError, match="duplicate job id"):
        Instance(cluster, (Job("j", 0.0, "cnn", 1, 10.0), Job("j", 1.0, "cnn", 1, 10.0)), table)


def test_replace_makes_a_validated_copy() -> None:
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 3.0)])
    instance = Instance(two_type_cluster(), (Job("j", 0.0, "cnn", 1, 10.0),), table)
    later = instance.replace(now=50.0)
    assert later.now == 50.0
    assert instance.now == 0.0
    assert later.jobs == instance.jobs
    with pytest.raises(InputError):
        instance.replace(now=float("inf"))


def test_throughput_table_lookup_and_validation() -> None:
    table = ThroughputTable.from_rows([("cnn", "v100", 2, "spread", 3.5)])
    assert table.throughput("cnn", "v100", 2, Placement.SPREAD) == 3.5
    assert table.throughput("cnn", "v100", 2, Placement.PACKED) == 0.0
    assert table.job_types == {"cnn"}
    assert table.gpu_types == {"v100"}
    with pytest.raises(InputError, match="bad throughput"):
        ThroughputTable.from_rows([("cnn", "v100", 2, "spread", -1.0)])


def test_allowed_gpu_types_restrict_configurations_and_the_checker() -> None:
    from solver.check import check
    from solver.result import Assignment, Schedule

    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 3.0),
                                       ("cnn", "k80", 1, "packed", 1.0)])
    job = Job("j", 0.0, "cnn", 1, 30.0, allowed_gpu_types=("k80",))
    instance = Instance(two_type_cluster(), (job,), table)
    assert [c.gpu_type for c in instance.configurations(job)] == ["k80"]
    on_v100 = Schedule((Assignment("j", "v100", ("a/0",), 0.0, 10.0),))
    assert [v.kind for v in check(instance, on_v100)] == ["gpu-type-not-allowed"]
    on_k80 = Schedule((Assignment("j", "k80", ("c/0",), 0.0, 30.0),))
    assert check(instance, on_k80) == []
    with pytest.raises(InputError, match="allowed GPU types") as error:
        Instance(two_type_cluster(), (Job("j", 0.0, "cnn", 1, 3.0, allowed_gpu_types=("a100",)),),
                 table)
    assert error.value.path == "jobs[0].allowed_gpu_types"
