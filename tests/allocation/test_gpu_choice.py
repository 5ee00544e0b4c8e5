"""The free-GPU index every policy takes GPUs from: first fit, best fit with victims,
packed and spread requests, and its counts kept in step by take, release and keep."""

from __future__ import annotations

from hetsched.allocation.free_gpus import FreeGpuIndex, victim_gpus
from hetsched.allocation.layout import SpeedView, Start
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import Placement, ThroughputTable

# Nodes in cluster order: a (4 x v100), b (2 x v100), c (4 x k80).
CLUSTER = Cluster((GpuType("v100"), GpuType("k80")),
                  (Node("a", "v100", 4), Node("b", "v100", 2), Node("c", "k80", 4)))
ALL = frozenset(CLUSTER.gpu_by_id)
TABLE = ThroughputTable.from_rows([
    (job_type, gpu_type, n, placement, 1.0)
    for job_type in ("cnn",) for gpu_type in ("v100", "k80") for n in (1, 2, 3, 4)
    for placement in Placement])


def job(size: int, **fields: object) -> Job:
    return Job("j", 0.0, "cnn", size, 100.0, **fields)  # type: ignore[arg-type]


def test_first_fit_takes_the_first_node_in_cluster_order_then_spreads() -> None:
    index = FreeGpuIndex(CLUSTER, ALL - {"a/0", "a/1", "a/2"})
    # 2 GPUs: a has 1 free, b has 2: b, the first node that holds the gang.
    assert index.first_fit(job(2), 2, TABLE) == Start("j", "v100", ("b/0", "b/1"))
    # 3 GPUs: no v100 node holds 3 (a 1, b 2), c (k80) does: packed beats spread.
    assert index.first_fit(job(3), 3, TABLE) == Start("j", "k80", ("c/0", "c/1", "c/2"))
    # Only v100 allowed: spread over a/3 and b, at most size - 1 from the first node.
    spread = index.first_fit(job(3, allowed_gpu_types=("v100",)), 3, TABLE)
    assert spread == Start("j", "v100", ("a/3", "b/0", "b/1"))


def test_best_fit_prefers_the_tightest_node_and_the_fewest_lowest_victims() -> None:
    index = FreeGpuIndex(CLUSTER, ALL - {"a/0", "a/1", "b/0"})
    # 1 GPU of v100: b has exactly 1 free (fits tightly), a has 2: b.
    assert index.best_fit(job(1), "v100", 1, TABLE) == ("b/1",)
    # Victims: a/0 (rank 5) and a/1 (rank 9, the lowest priority), b/0 (rank 7). Four
    # GPUs packed need a's two busy ones: both victims are taken.
    victims = FreeGpuIndex(CLUSTER, ALL - {"a/0", "a/1", "b/0"},
                           {"a/0": 5, "a/1": 9, "b/0": 7})
    assert victims.best_fit(job(4), "v100", 4, TABLE) is None  # without victims
    assert victims.best_fit(job(4), "v100", 4, TABLE, with_victims=True) == (
        "a/2", "a/3", "a/1", "a/0")
    # One more GPU on b: b/0's job (rank 7) is the only cover.
    assert victims.best_fit(job(2), "v100", 2, TABLE, with_victims=True) == ("a/2", "a/3")
    assert victim_gpus(("a/0", "a/1", "b/0"), {"a/0": 5, "a/1": 9, "b/0": 7}, 1) == ["a/1"]


def test_counts_follow_take_release_and_keep() -> None:
    # c/0 is busy, held by a running job that may be preempted (a victim).
    index = FreeGpuIndex(CLUSTER, ALL - {"c/0"}, {"c/0": 1})
    assert index.available("v100") == 6
    index.take(("a/0", "a/1"))
    assert index.available("v100") == 4
    assert index.packed("v100", 3) is None  # a and b have 2 free each
    assert index.packed("v100", 2) == ("a/2", "a/3")
    assert index.spread("v100", 4) == ("a/2", "a/3", "b/0", "b/1")
    assert index.spread("v100", 5) is None
    index.release(("a/0", "zz/9"))  # a GPU not of the cluster is ignored
    assert index.available("v100") == 5
    assert (index.available("k80"), index.available("k80", with_victims=True)) == (3, 4)
    index.keep(("c/0",))
    assert index.available("k80", with_victims=True) == 3
    index.sync(frozenset({"b/0"}))
    assert (index.free, index.available("v100"), index.available("k80")) == ({"b/0"}, 1, 0)


def test_speed_view_names_the_two_best_speeds() -> None:
    # An elastic job (1 or 4 GPUs): 1.0 steps/s everywhere but 3.5 on 4 x v100 packed.
    # best() looks at every allowed size (3.5); fastest() at the requested size (1 GPU:
    # 1.0). Configurations with throughput > 0 the cluster can give: v100 at 1 packed, 4
    # packed (node a), 4 spread (a and b); k80 at 1 packed, 4 packed (node c; one k80
    # node, so no spread): 5.
    rows = [("cnn", gpu_type, n, placement,
             3.5 if (gpu_type, n, placement) == ("v100", 4, Placement.PACKED) else 1.0)
            for gpu_type in ("v100", "k80") for n in (1, 4) for placement in Placement]
    view = SpeedView(CLUSTER, ThroughputTable.from_rows(rows))
    elastic = job(1, allowed_gpu_counts=(1, 4))
    assert view.best(elastic) == 3.5
    assert view.fastest(elastic) == 1.0
    assert view.by_type(elastic, 4) == {"v100": 3.5, "k80": 1.0}
    assert view.packable(elastic)
    assert len(view.configurations(elastic)) == 5
