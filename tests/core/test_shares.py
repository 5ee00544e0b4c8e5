"""Weighted shares between tenants (hetsched.core.shares), on cases worked out by hand."""

from __future__ import annotations

import pytest

from hetsched.core.records import Job
from hetsched.core.result import Assignment
from hetsched.core.shares import water_fill, weighted_shares


def test_water_filling_gives_what_a_small_tenant_leaves_to_the_others() -> None:
    # 8 GPUs, weights 3 : 1: 6 and 2. When A (weight 3) asks for 1 GPU only, B and C
    # (weight 1 each) split the 7 it leaves.
    assert water_fill({"A": 10, "B": 10}, {"A": 3}, 8) == pytest.approx({"A": 6, "B": 2})
    assert water_fill({"A": 1, "B": 10, "C": 10}, {"A": 3}, 8) == pytest.approx(
        {"A": 1, "B": 3.5, "C": 3.5})


def test_received_against_entitled_while_two_tenants_have_work() -> None:
    # 8 GPUs. A (weight 3) has a 6-GPU job from 0 to 100; B a 4-GPU job from 0 to 200.
    # From 0 to 100 both have work: A is entitled to 6 of the 8 GPUs and B to 2 (it asks
    # for 4). A's job runs then on 6 GPUs; B's waits (its gang does not fit in the 2
    # left) and runs from 100 to 200, when only B has work, which is not counted. So A
    # received 600 GPU-s of the 600 it was entitled to, B 0 of 200.
    a = Job("a", 0.0, "cnn", 6, 100.0, tenant="A")
    b = Job("b", 0.0, "cnn", 4, 100.0, tenant="B")
    segments = [Assignment("a", "v100", tuple(f"g{i}" for i in range(6)), 0.0, 100.0, 100.0),
                Assignment("b", "v100", ("g0", "g1", "g2", "g3"), 100.0, 200.0, 100.0)]
    shares = weighted_shares([a, b], {"a": 100.0, "b": 200.0}, segments, {"A": 3.0}, 8)
    assert [(s.tenant, s.received_gpu_s, s.entitled_gpu_s) for s in shares] == [
        ("A", pytest.approx(600.0), pytest.approx(600.0)),
        ("B", pytest.approx(0.0), pytest.approx(200.0))]
    assert shares[0].ratio == pytest.approx(1.0)
    # Counting every instant (one tenant with work is entitled to what it asks for):
    alone = weighted_shares([a, b], {"a": 100.0, "b": 200.0}, segments, {"A": 3.0}, 8,
                            min_tenants=1)
    assert [s.entitled_gpu_s for s in alone] == pytest.approx([600.0, 600.0])


def test_normalised_gpu_seconds_value_a_gpu_by_the_jobs_speed_there() -> None:
    # One V100 and one K80; both jobs run at 3 steps/s on a V100 and 1 on a K80, so their
    # speed with an equal share of both is E = (3 + 1) / 2 = 2: a V100 is worth 1.5
    # normalised GPUs to them, a K80 0.5, and each asks for 1.5. A runs on the V100 and B
    # on the K80 for 100 s: A received 150, B 50; weights 1 and 1 entitle each to 1 of
    # the 2 GPUs, 100.
    a = Job("a", 0.0, "cnn", 1, 300.0, tenant="A")
    b = Job("b", 0.0, "cnn", 1, 100.0, tenant="B")
    segments = [Assignment("a", "v100", ("v0",), 0.0, 100.0, 300.0),
                Assignment("b", "k80", ("k0",), 0.0, 100.0, 100.0)]
    speeds = {"a": {"v100": 3.0, "k80": 1.0}, "b": {"v100": 3.0, "k80": 1.0}}
    shares = weighted_shares([a, b], {"a": 100.0, "b": 100.0}, segments, {}, 2,
                             speeds=speeds, gpus_of={"v100": 1, "k80": 1})
    assert [(s.received_gpu_s, s.entitled_gpu_s) for s in shares] == [
        (pytest.approx(150.0), pytest.approx(100.0)), (pytest.approx(50.0), pytest.approx(100.0))]


def test_normalised_shares_need_the_gpus_of_each_type() -> None:
    with pytest.raises(ValueError, match="gpus_of"):
        weighted_shares([], {}, [], {}, 2, speeds={})
