"""``progress-packed``: two whole one-GPU jobs packed on one GPU at their
measured co-location speeds when the round's MILP finds the pair worth more; the
simulator runs them at those speeds, the checker verifies packed runs, and a pair whose
measured rates add up to 1 or less is never packed."""

from __future__ import annotations

import pytest

import hetsched
from hetsched.core.check import check
from hetsched.core.records import Cluster, GpuType, Instance, Job, Node
from hetsched.core.result import Assignment, Schedule
from hetsched.core.settings import ReplaySettings
from hetsched.core.sharing import CoLocationModel
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.policies.progress import Progress
from hetsched.policies.progress_params import ProgressParams
from hetsched.simulate.record import Replay

P = Placement.PACKED
#: One GPU of type t; job types a and b at 10 steps/s alone.
ONE = Cluster((GpuType("t"),), (Node("n0", "t", 1),))
TABLE = ThroughputTable.from_rows([("a", "t", 1, P, 10.0), ("b", "t", 1, P, 10.0),
                                   ("a", "t", 2, P, 18.0)])
#: a and b beside each other at 0.8 of their speed alone (combined 1.6), a beside a at
#: 0.45 (combined 0.9: better one after the other).
POLICIES: dict[bool, Progress] = {}
PAIRS = CoLocationModel({("t", "a", "b"): 0.8, ("t", "b", "a"): 0.8, ("t", "a", "a"): 0.45})


def replay(jobs: list[Job], pairing: bool, cluster: Cluster = ONE) -> Replay:
    policy = Progress(ProgressParams(pairing=pairing, restart_penalty_s=0.0))
    POLICIES[pairing] = policy
    return hetsched.replay(jobs, cluster, policy, throughput=TABLE, colocation=PAIRS,
                           settings=ReplaySettings(restart_penalty_s=0.0)).replay


def test_a_pair_worth_more_than_the_shorter_alone_is_packed() -> None:
    # A (1,000 steps) and B (2,000) arrive at 0 on one GPU. Apart, A runs first (its
    # 10 / 1,000 = 0.010 of its work a second beats B's 0.005) and ends at 100 s, B at
    # 300 s: average JCT 200 s. Packed, the pair is worth 8 / 1,000 + 8 / 2,000 = 0.012
    # > 0.010: both start at 0 at 8 steps/s; A ends at 125 s with B 1,000 steps done, B
    # goes on alone at 10 steps/s (a continued segment) and ends at 225 s: average 175 s.
    jobs = [Job("A", 0.0, "a", 1, 1000.0), Job("B", 0.0, "b", 1, 2000.0)]
    apart = replay(jobs, pairing=False)
    assert [apart.records[j].finish for j in "AB"] == pytest.approx([100.0, 300.0])
    packed = replay(jobs, pairing=True)
    a, b = packed.records["A"], packed.records["B"]
    assert [a.finish, b.finish] == pytest.approx([125.0, 225.0])
    assert [(s.start, s.finish, s.work, s.packed, s.continued) for s in b.segments] == [
        pytest.approx((0.0, 125.0, 1000.0, True, False)),
        pytest.approx((125.0, 225.0, 1000.0, True, True))]
    assert packed.summary()["avg_jct_s"] == pytest.approx(175.0)
    assert POLICIES[True].figures()["progress_packed_starts"] == 2
    # Half a GPU each while packed: 62.5 GPU-s for A, 112.5 for B.
    assert [a.gpu_seconds, b.gpu_seconds] == pytest.approx([62.5, 112.5])


def test_a_pair_whose_rates_add_up_to_less_than_one_is_never_packed() -> None:
    # Two a jobs beside each other run at 0.45 + 0.45 = 0.9 of one alone: never packed.
    jobs = [Job("A", 0.0, "a", 1, 1000.0), Job("C", 0.0, "a", 1, 2000.0)]
    packed = replay(jobs, pairing=True)
    assert not any(s.packed for r in packed.records.values() for s in r.segments)
    assert [packed.records[j].finish for j in "AC"] == pytest.approx([100.0, 300.0])


def test_a_waiting_job_joins_a_packed_job_left_alone() -> None:
    # A (1,000 steps) and B (1,500) packed at 0 (8 / 1,000 + 8 / 1,500 = 0.0133 > A's
    # 0.010 alone); A ends at 125 s, B (500 left) runs on alone at 10/s. D (500 steps)
    # arrives at 130 s, B has 450 left: D joining B is worth 8 / 500 + 8 / 450 = 0.0338,
    # more than B alone (10 / 450 = 0.0222) or D alone in its place (0.020): D joins B on
    # its GPU, no restart for B. B's 450 at 8/s end at 186.25 s; D has 450 done by then
    # and its last 50 at 10/s end at 191.25 s.
    jobs = [Job("A", 0.0, "a", 1, 1000.0), Job("B", 0.0, "b", 1, 1500.0),
            Job("D", 130.0, "a", 1, 500.0)]
    packed = replay(jobs, pairing=True)
    b, d = packed.records["B"], packed.records["D"]
    assert d.segments[0].packed
    assert d.segments[0].start == pytest.approx(130.0)
    assert b.preemptions == 0
    assert [b.finish, d.finish] == pytest.approx([186.25, 191.25])


def _instance(jobs: tuple[Job, ...]) -> Instance:
    return Instance(Cluster((GpuType("t"),), (Node("n0", "t", 2),)), jobs, TABLE,
                    colocation=PAIRS)


def test_the_checker_verifies_packed_runs() -> None:
    jobs = (Job("A", 0.0, "a", 1, 800.0), Job("B", 0.0, "b", 1, 800.0),
            Job("G", 0.0, "a", 2, 1800.0))
    instance = _instance(jobs)
    both = [Assignment("A", "t", ("n0/0",), 0.0, 100.0, 800.0, packed=True),
            Assignment("B", "t", ("n0/0",), 0.0, 100.0, 800.0, packed=True)]
    good = Schedule((*both, Assignment("G", "t", ("n0/0", "n0/1"), 100.0, 200.0, 1800.0)))
    assert check(instance, good) == []
    # At full speed beside each other: wrong finish (800 / 8 = 100 s, not 80 s).
    fast = Schedule((Assignment("A", "t", ("n0/0",), 0.0, 80.0, 800.0, packed=True),
                     Assignment("B", "t", ("n0/0",), 0.0, 80.0, 800.0, packed=True)))
    assert {v.kind for v in check(instance, fast, complete=False)} == {"finish"}
    # A whole job on a GPU beside a packed one: the GPU holds 1.5.
    over = Schedule((both[0], Assignment("B", "t", ("n0/0",), 0.0, 80.0, 800.0)))
    assert "gpu-share" in {v.kind for v in check(instance, over, complete=False)}
    # A gang packed: refused.
    gang = Schedule((Assignment("G", "t", ("n0/0", "n0/1"), 0.0, 100.0, 1800.0,
                                packed=True),))
    assert {v.kind for v in check(instance, gang, complete=False)} == {"packed"}
    # Round trip through the JSON form.
    assert Assignment.from_dict(both[0].to_dict()) == both[0]
