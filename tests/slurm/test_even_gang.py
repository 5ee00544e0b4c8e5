"""hetsched.slurm.agent.even_gang: a gang the policy laid unevenly over its nodes, laid
evenly over free GPUs of its type (Slurm gives every node of a job the same count)."""

from __future__ import annotations

from hetsched.allocation.layout import Start
from hetsched.files.cluster_spec import parse_cluster
from hetsched.slurm.agent import even_gang

NEEDS_SLURM = False
CLUSTER = parse_cluster("v100=12,k80=4")  # v100-0, v100-1, v100-2 and k80-0, 4 GPUs each


def test_two_and_two_on_the_policys_node_first() -> None:
    start = Start("j", "v100", ("v100-0/1", "v100-0/2", "v100-0/3", "v100-1/0"))
    free = {"v100-0/1", "v100-0/2", "v100-0/3", "v100-1/0", "v100-2/0", "v100-2/1",
            "k80-0/0", "k80-0/1"}
    # v100-1 has one free GPU: two each on v100-0 (the policy's) and v100-2; never k80.
    assert even_gang(start, free, CLUSTER) == Start(
        "j", "v100", ("v100-0/1", "v100-0/2", "v100-2/0", "v100-2/1"))


def test_one_each_on_three_nodes_for_three_gpus() -> None:
    start = Start("j", "v100", ("v100-1/2", "v100-1/3", "v100-2/3"))
    free = {"v100-1/2", "v100-1/3", "v100-2/3", "v100-0/0"}
    # 3 GPUs: on 3 nodes of one each (a 3-GPU gang has no 2-node even layout).
    assert even_gang(start, free, CLUSTER) == Start(
        "j", "v100", ("v100-1/2", "v100-2/3", "v100-0/0"))


def test_none_when_no_even_layout_is_free() -> None:
    start = Start("j", "v100", ("v100-0/1", "v100-0/2", "v100-0/3", "v100-1/0"))
    free = {"v100-0/1", "v100-0/2", "v100-0/3", "v100-1/0", "k80-0/0", "k80-0/1"}
    # 2 x 2 needs a second node of two free V100s, 4 x 1 four nodes: neither is free.
    assert even_gang(start, free, CLUSTER) is None


def test_never_packed_on_one_node() -> None:
    start = Start("j", "v100", ("v100-0/3", "v100-1/0"))
    free = {"v100-0/3", "v100-1/0", "v100-2/0", "v100-2/1", "v100-2/2", "v100-2/3"}
    # A spread gang stays spread (the speed the policy chose), though v100-2 could hold
    # it whole: one GPU on each of the policy's two nodes is already even.
    assert even_gang(start, free, CLUSTER) == Start("j", "v100", ("v100-0/3", "v100-1/0"))
