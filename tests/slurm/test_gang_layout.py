"""How the agent asks Slurm for a gang (hetsched.slurm.agent.gang_layout) and how Slurm
splits an uneven one over its nodes (hetsched.slurm.state.slurm_split, measured on the
local cluster in tests/slurm/test_agent.py)."""

from __future__ import annotations

from hetsched.allocation.layout import Start
from hetsched.files.cluster_spec import parse_cluster
from hetsched.slurm.agent import gang_layout, is_uneven
from hetsched.slurm.state import slurm_split

NEEDS_SLURM = False
CLUSTER = parse_cluster("v100=12,k80=4")  # v100-0, v100-1, v100-2 and k80-0, 4 GPUs each


def test_slurm_fills_each_node_in_turn_leaving_one_gpu_for_each_later_node() -> None:
    assert slurm_split([4, 4], 4) == [3, 1]
    assert slurm_split([3, 1], 4) == [3, 1]
    assert slurm_split([1, 4], 4) == [1, 3]
    assert slurm_split([2, 4, 4], 6) == [2, 3, 1]
    assert slurm_split([4, 4], 8) == [4, 4]
    assert slurm_split([2, 1], 4) is None  # three free for four
    assert slurm_split([4, 0], 2) is None  # every node of a job gets a GPU


def test_an_even_gang_is_asked_as_the_policy_laid_it() -> None:
    start = Start("j", "v100", ("v100-1/0", "v100-1/1", "v100-0/2", "v100-0/3"))
    free = set(start.gpus) | {"v100-0/0"}
    assert not is_uneven(start, CLUSTER)
    # Nodes in cluster order (Slurm's), two GPUs on each, the policy's own GPUs.
    assert gang_layout(start, free, CLUSTER) == (["v100-0", "v100-1"], [2, 2], start.gpus)


def test_an_uneven_gang_takes_the_gpus_slurm_will_give() -> None:
    start = Start("j", "v100", ("v100-0/1", "v100-1/0", "v100-1/1", "v100-1/2"))
    assert is_uneven(start, CLUSTER)
    # 1 + 3 as the policy laid it, but v100-0 has four GPUs free: Slurm gives it three
    # (its first three free) and v100-1 one. Same type, count and nodes: the same speed.
    free = {f"v100-0/{i}" for i in range(4)} | {"v100-1/0", "v100-1/1", "v100-1/2"}
    assert gang_layout(start, free, CLUSTER) == (
        ["v100-0", "v100-1"], [3, 1], ("v100-0/0", "v100-0/1", "v100-0/2", "v100-1/0"))
    # With only the policy's GPUs free, Slurm's split is the policy's.
    assert gang_layout(start, set(start.gpus), CLUSTER) == (
        ["v100-0", "v100-1"], [1, 3], ("v100-0/1", "v100-1/0", "v100-1/1", "v100-1/2"))
