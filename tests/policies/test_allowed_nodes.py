"""Pinning is data: Job.allowed_nodes, honoured by every planner (static models, and the
rolling policies through the simulator) and verified by the checker."""

from __future__ import annotations

import dataclasses

import pytest

from hetsched.core.check import check
from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.result import Assignment, Schedule
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.instance import instance_from_dict, instance_to_dict
from hetsched.registry import names
from hetsched.solving import SolveOptions, solve

# Three 2-GPU V100 nodes n0, n1, n2 in that order; every job 1 step/s per GPU count.
# (priced: max-throughput-per-cost needs one)
CLUSTER = Cluster((GpuType("v100", price_per_hour=2.48),),
                  tuple(Node(f"n{i}", "v100", 2) for i in range(3)))
TABLE = ThroughputTable.from_rows([("t", "v100", n, p, float(n)) for n in (1, 2, 4)
                                   for p in Placement])
# "far" may only use n2, "pair" (2 GPUs) only n1 or n2; "free" anywhere. First fit, the
# models' symmetry breaking and best fit would all start on n0 without the lists.
JOBS = (Job("far", 0.0, "t", 1, 100.0, allowed_nodes=("n2",)),
        Job("pair", 0.0, "t", 2, 400.0, allowed_nodes=("n1", "n2")),
        Job("free", 0.0, "t", 1, 50.0))
INSTANCE = Instance(CLUSTER, JOBS, TABLE)


@pytest.mark.parametrize("name", [*names(), "srtf-agnostic", "deadline-agnostic",
                                  "allox-agnostic"])
def test_every_planner_keeps_jobs_on_their_nodes(name: str) -> None:
    result = solve(INSTANCE, name, SolveOptions(time_limit_s=30.0, deterministic=True))
    assert check(INSTANCE, result.schedule) == []
    nodes = {a.job: {CLUSTER.gpu_by_id[g].node for g in a.gpus} for a in result.schedule}
    assert nodes["far"] == {"n2"}
    assert nodes["pair"] <= {"n1", "n2"}
    assert len(result.schedule.segments()) == 3


def test_without_the_lists_first_fit_starts_on_n0() -> None:
    # The control: the same jobs unpinned go to n0 first, so the test above can fail.
    free = Instance(CLUSTER, tuple(dataclasses.replace(j, allowed_nodes=None) for j in JOBS),
                    TABLE)
    placed = solve(free, model="fifo").schedule.by_job()
    assert placed["far"].gpus == ("n0/0",)


def test_the_checker_flags_a_job_off_its_nodes() -> None:
    schedule = Schedule((Assignment("far", "v100", ("n0/0",), 0.0, 100.0),
                         Assignment("pair", "v100", ("n1/0", "n1/1"), 0.0, 200.0),
                         Assignment("free", "v100", ("n2/0",), 0.0, 50.0)))
    assert [(v.job, v.kind) for v in check(INSTANCE, schedule)] == [("far", "node-not-allowed")]


def test_allowed_nodes_are_validated_and_written() -> None:
    with pytest.raises(InputError, match="unknown node") as error:
        Instance(CLUSTER, (dataclasses.replace(JOBS[0], allowed_nodes=("n9",)),), TABLE)
    assert error.value.path == "jobs[0].allowed_nodes[0]"
    # A 4-GPU gang on one allowed 2-GPU node: no configuration fits there.
    wide = Job("wide", 0.0, "t", 4, 100.0, allowed_nodes=("n0",))
    with pytest.raises(InputError, match="fits the allowed nodes"):
        Instance(CLUSTER, (wide,), TABLE)
    with pytest.raises(InputError, match="empty list of allowed nodes"):
        Job("x", 0.0, "t", 1, 1.0, allowed_nodes=())
    again = instance_from_dict(instance_to_dict(INSTANCE))
    assert again.jobs == INSTANCE.jobs
