"""The data model: frozen, validated records."""

from __future__ import annotations

import dataclasses

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.throughput import Placement, ThroughputTable


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
    from hetsched.core.check import check
    from hetsched.core.result import Assignment, Schedule

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


# --- ranges (docs/instance-format.md, "Ranges") ------------------------------------------


@pytest.mark.parametrize(
    ("fields", "path", "piece"),
    [
        ({"work": 1e308}, "work", "<= 1e+12"),
        ({"work": 10**5000}, "work", "an integer of about 5,001 digits"),
        ({"work": 10**400}, "work", "<= 1e+12"),
        ({"arrival": 1e11}, "arrival", "from 0 to 1e+10"),
        ({"arrival": 1.7e18}, "arrival", "from 0 to 1e+10"),
        ({"deadline": 1.7e18}, "deadline", "up to 1e+10"),
        ({"deadline": float("inf")}, "deadline", "up to 1e+10"),
        ({"weight": 1e308}, "weight", "from 0.001 to 1000"),
        ({"weight": 10**400}, "weight", "from 0.001 to 1000"),
        ({"weight": 1e-9}, "weight", "from 0.001 to 1000"),
        ({"num_gpus": 10**8}, "num_gpus", "from 1 to 100000"),
        ({"num_gpus": 10**5000}, "num_gpus", "from 1 to 100000"),
        ({"allowed_gpu_counts": (1, 10**8)}, "allowed_gpu_counts[1]", "from 1 to 100000"),
    ],
)
def test_job_rejects_numbers_out_of_range(fields: dict[str, object], path: str,
                                          piece: str) -> None:
    base: dict[str, object] = {"id": "j", "arrival": 0.0, "job_type": "cnn", "num_gpus": 1,
                               "work": 100.0}
    with pytest.raises(InputError) as error:
        Job(**{**base, **fields})  # type: ignore[arg-type]
    assert error.value.path == path
    assert piece in str(error.value)


def test_job_accepts_the_edges_of_every_range() -> None:
    job = Job("j", 1e10 - 1, "cnn", 100_000, 1e12, deadline=1e10, weight=1e3,
              allowed_gpu_counts=(1, 100_000))
    assert (job.arrival, job.work, job.deadline, job.weight) == (1e10 - 1, 1e12, 1e10, 1e3)
    assert Job("k", 0, "cnn", 1, 5e-324, weight=1e-3).work == 5e-324  # any work > 0


@pytest.mark.parametrize(
    ("make", "path", "piece"),
    [
        (lambda: Node("a", "v100", 1025), "num_gpus", "from 1 to 1024"),
        (lambda: Node("a", "v100", 4, cpus=10**7), "cpus", "from 0 to 1000000"),
        (lambda: Node("a", "v100", 4, memory_gb=1e300), "memory_gb", "from 0 to 1e+07"),
        (lambda: GpuType("v100", memory_gb=1e8), "memory_gb", "from 0 to 1e+07"),
        (lambda: GpuType("v100", price_per_hour=float("nan")), "price_per_hour",
         "from 0 to 1e+06"),
    ],
)
def test_cluster_records_reject_numbers_out_of_range(make: object, path: str,
                                                     piece: str) -> None:
    with pytest.raises(InputError) as error:
        make()  # type: ignore[operator]
    assert error.value.path == path
    assert piece in str(error.value)


def test_cluster_size_is_bounded_before_any_topology_is_built() -> None:
    # 98 nodes of 1,024 GPUs: 100,352 GPUs, more than 100,000 (and 51 million GPU pairs
    # that the default topology would link: this must fail at once, not build them).
    big = tuple(Node(f"n{i}", "v100", 1024) for i in range(98))
    with pytest.raises(InputError, match="too many GPUs") as error:
        Cluster((GpuType("v100"),), big)
    assert error.value.value == 100_352
    # 1,000 nodes of 64: 64,000 GPUs, but 2,016,000 pairs inside nodes for the default
    # topology; a topology of one's own is accepted.
    wide = tuple(Node(f"n{i}", "v100", 64) for i in range(1000))
    with pytest.raises(InputError, match="too many GPU pairs") as error:
        Cluster((GpuType("v100"),), wide)
    assert error.value.value == 2_016_000
    import networkx as nx

    assert Cluster((GpuType("v100"),), wide, topology=nx.Graph()).num_gpus() == 64_000


def _one_job(throughput: float, work: float, **changes: object) -> Instance:
    table = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", throughput)])
    return Instance(two_type_cluster(), (Job("j7", 0.0, "cnn", 1, work),), table,
                    **changes)  # type: ignore[arg-type]


def test_instance_rejects_throughputs_and_durations_out_of_range() -> None:
    with pytest.raises(InputError, match=r"job j7: throughput of cnn on v100 x 1 packed out "
                       r"of range \(got 5e-324; expected 0 \(cannot run\) or 1e-09 to 1e\+09 "
                       r"steps/s\)") as error:
        _one_job(5e-324, 10.0)
    assert error.value.path == "jobs[0].job_type"
    with pytest.raises(InputError, match="out of range"):
        _one_job(2e9, 10.0)
    # 1e12 steps at 1e-9 steps/s: 1e21 s, beyond the 1e10 s any configuration may take.
    with pytest.raises(InputError, match=r"job j7 would run 1e\+21 s on v100 x 1 packed "
                       r"\(1e-09 steps/s\)") as error:
        _one_job(1e-9, 1e12)
    assert error.value.path == "jobs[0].work"
    assert "work / throughput <= 1e+10 s" in str(error.value)
    # The edges themselves are accepted: 10 steps at 1e-9 steps/s take exactly 1e10 s.
    assert _one_job(1e-9, 10.0).configurations(Job("j7", 0.0, "cnn", 1, 10.0))[0].duration(
        10.0) == 1e10
    assert _one_job(1e9, 1e12, now=1e10).now == 1e10
    with pytest.raises(InputError, match="bad now") as error:
        _one_job(1.0, 1.0, now=1e308)
    assert error.value.path == "now"
