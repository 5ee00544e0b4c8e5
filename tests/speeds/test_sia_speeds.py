"""Sia's measurements (hetsched.speeds.sia): one Pollux model per GPU type with that
type's step times, node size and per-GPU batch range, Sia's calibration slowdown, rigid
work counted on the reference type, and its cluster as a spec."""

from __future__ import annotations

import pickle

import pytest

from hetsched.core.errors import InputError
from hetsched.core.throughput import Placement
from hetsched.files.cluster_spec import parse_cluster
from hetsched.speeds.pollux import PolluxThroughput, read_pollux
from hetsched.speeds.sia import (
    GPUS_PER_NODE,
    SiaThroughput,
    cluster_spec,
    is_sia_folder,
    read_sia,
    start_seconds,
)
from tests.helpers import ROOT

SIA = ROOT / "tests" / "data" / "sia"
POLLUX = ROOT / "tests" / "data" / "pollux"
PACKED, SPREAD = Placement.PACKED, Placement.SPREAD


def test_each_gpu_type_runs_at_its_own_step_times() -> None:
    model = read_sia(SIA / "traces")
    assert model.gpu_types == {"aws", "rtx"}
    assert "gpt_pmp" in model.refused
    assert "pipeline" in model.refused["gpt_pmp"]
    assert model.by_type["aws"].gpus_per_node == 4
    assert model.by_type["rtx"].gpus_per_node == 8
    # aws keeps Pollux's toy step times: batch 20 on 2 GPUs is 10 a GPU, one pass of
    # 1.8 s (placements-aws.csv, placement 2 at 10).
    assert model.throughput("toy (batch size 20)", "aws", 2, PACKED) == pytest.approx(1 / 1.8)
    # rtx measured at most 6 a GPU: 10 a GPU runs as 2 passes of 5 (accumulation), one
    # step = step(5) + (step(5) - sync(5)) = 0.6 + (0.6 - 0.125) = 1.075 s, interpolated
    # halfway between 4 (0.5, 0.1) and 6 (0.7, 0.15).
    assert model.throughput("toy (batch size 20)", "rtx", 2, PACKED) == pytest.approx(1 / 1.075)
    # Another GPU type, an unknown job, nothing.
    assert model.throughput("toy (batch size 20)", "v100", 2, PACKED) == 0.0
    assert model.throughput("gpt_pmp (batch size 20)", "rtx", 2, PACKED) == 0.0
    # The per-GPU batch range is the type's: rtx down to 4 samples a GPU, aws to 5.
    assert model.by_type["rtx"].applications["toy"].min_local_bsz == 4
    assert model.by_type["aws"].applications["toy"].min_local_bsz == 5
    # An elastic job's work is the same on every type (the validation runs are shared):
    # its goal in base-batch steps, Pollux's.
    goal = read_pollux(POLLUX / "traces").applications["toy"].goal_base_steps
    assert model.applications["toy"].goal_base_steps == pytest.approx(goal)
    assert model.throughput("toy (elastic)", "rtx", 1, PACKED) > 0
    assert pickle.loads(pickle.dumps(model)).throughput(
        "toy (batch size 20)", "rtx", 2, PACKED) == pytest.approx(1 / 1.075)


def test_rigid_work_is_counted_on_the_reference_type() -> None:
    # Batch 30 on 2 GPUs: 15 a GPU. aws (at most 10 a GPU): 2 passes of 8, batch 32 really
    # used; rtx (at most 6): 3 passes of 5, batch 30. The work is rtx's steps to the goal
    # at 30; on aws the speed is scaled so that the job takes aws's steps at 32 times
    # aws's step time.
    model = read_sia(SIA / "traces")
    rtx = model.by_type["rtx"].applications["toy"]
    aws = model.by_type["aws"].applications["toy"]
    assert rtx.batch_plan(30, 2).batch_size == 30
    assert aws.batch_plan(30, 2).batch_size == 32
    work = rtx.steps_to_goal(30, 2)
    on_aws = work / model.throughput("toy (batch size 30)", "aws", 2, PACKED)
    assert on_aws == pytest.approx(aws.steps_to_goal(30, 2) * aws.step_time((2,), 30))
    on_rtx = work / model.throughput("toy (batch size 30)", "rtx", 2, PACKED)
    assert on_rtx == pytest.approx(rtx.steps_to_goal(30, 2) * rtx.step_time((2,), 30))


def test_a_slowdown_makes_every_step_longer() -> None:
    # Sia divides each application's goodput by its calibration slowdown (cifar10 1.8):
    # a step of 1.8 s at 1.5 times takes 2.7 s, rigid and elastic alike.
    apps = read_pollux(POLLUX / "traces").applications
    slow = PolluxThroughput(apps, slowdown={"toy": 1.5})
    plain = PolluxThroughput(apps)
    assert slow.throughput("toy (batch size 20)", "t4", 2, PACKED) == pytest.approx(1 / 2.7)
    assert slow.throughput("toy (elastic)", "t4", 2, PACKED) == pytest.approx(
        plain.throughput("toy (elastic)", "t4", 2, PACKED) / 1.5)
    assert slow.throughput_after("toy (elastic)", "t4", 2, PACKED, 0.0) == pytest.approx(
        plain.throughput_after("toy (elastic)", "t4", 2, PACKED, 0.0) / 1.5)
    assert pickle.loads(pickle.dumps(slow)).slowdown == {"toy": 1.5}


def test_sias_cluster_and_its_scale() -> None:
    # 6 nodes of 4 aws, 3 of 8 rtx, 2 of 8 dgx-ext: 64 GPUs (Sia's simulator_config.py).
    assert cluster_spec() == "aws=24x4,rtx=24x8,dgx-ext=16x8"
    cluster = parse_cluster(cluster_spec())
    assert sum(node.num_gpus for node in cluster.nodes) == 64
    assert {node.gpu_type: node.num_gpus for node in cluster.nodes} == {
        "aws": 4, "rtx": 8, "dgx-ext": 8}
    assert sum(node.num_gpus for node in parse_cluster(cluster_spec(32)).nodes) == 2048
    with pytest.raises(InputError, match="bad cluster scale"):
        cluster_spec(0)
    assert GPUS_PER_NODE["dgx-ext"] == 8
    assert start_seconds("imagenet") == 250.0
    assert start_seconds("toy") == 30.0


def test_folders_and_bad_input(tmp_path: pytest.TempPathFactory) -> None:
    assert is_sia_folder(SIA / "traces")
    assert not is_sia_folder(POLLUX / "traces")
    with pytest.raises(InputError, match="no Sia measurements"):
        read_sia(POLLUX / "traces")
    with pytest.raises(InputError, match="no such folder"):
        read_sia(SIA / "absent")
    with pytest.raises(InputError, match="no GPU types"):
        SiaThroughput({})
    only = read_sia(SIA / "traces", gpu_types=("rtx",))
    assert only.gpu_types == {"rtx"}


def test_the_step_fit_reads_each_gpu_type() -> None:
    # hetsched fit on Sia's traces/: each placements-<type>.csv row a step row on that
    # GPU type (6 on aws, 4 on rtx), gpt_pmp passed over.
    from hetsched.speeds.step_profiles import read_step_rows

    rows = read_step_rows(SIA / "traces")
    assert sorted((row.gpu_type, row.job_type) for row in rows) == \
        [("aws", "toy")] * 6 + [("rtx", "toy")] * 4
    rtx = sorted((row.placement, row.local_bsz, row.step_time) for row in rows
                 if row.gpu_type == "rtx")
    assert rtx[0] == ((1,), 4.0, 0.4)
