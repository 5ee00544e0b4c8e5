"""``rounds="gavel"``: the allocation realised as Gavel's simulator realises it
(hetsched.policies.baselines.gavel_rounds), each rule on a case worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.throughput import ThroughputTable
from hetsched.policies.baselines.gavel_rounds import GavelLedger, gavel_queue
from hetsched.registry import rolling
from hetsched.simulate.simulator import Simulator

TWO = Cluster((GpuType("v100"),), (Node("n", "v100", 2),))
TABLE = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 1.0)])


def test_a_job_the_allocation_has_not_seen_waits_for_the_next_reset() -> None:
    # Two GPUs at 1 step/s, rounds of 100 s. a (1 GPU) arrives at 0: the first reset and
    # solve. b arrives at 10: one GPU is free, but Gavel's rounds claim it for b without
    # starting it until the allocation includes b, at the first round boundary at least
    # 1,920 s after the last reset: 2,000. hetsched's rounds start b on arrival.
    jobs = [Job("a", 0.0, "cnn", 1, 10_000.0), Job("b", 10.0, "cnn", 1, 100.0)]
    for rounds, start in (("gavel", 2000.0), ("hetsched", 10.0)):
        ran = Simulator(TWO, jobs, rolling("gavel", round_s=100.0, rounds=rounds),
                        truth=TABLE).run()
        assert ran.records["b"].first_start == pytest.approx(start)
        assert ran.records["a"].preemptions == 0
    # With resets at most every 300 s (Sia's gavel solves every round: 360), b starts at
    # the first boundary 300 s after the reset at 0: 300.
    ran = Simulator(TWO, jobs, rolling("gavel", round_s=100.0, rounds="gavel",
                                       reset_interval_s=300.0), truth=TABLE).run()
    assert ran.records["b"].first_start == pytest.approx(300.0)
    with pytest.raises(InputError, match="reset_interval_s"):
        rolling("gavel", rounds="gavel", reset_interval_s=0.0)


def test_the_ledger_counts_half_a_round_and_keeps_deficits() -> None:
    ledger = GavelLedger(num_types=2, round_s=360.0)
    ledger.keep(["a", "b"])
    ledger.reset(0.0, lambda job: [])
    # At the reset both jobs have 180 s counted on each type; each type's total is 360 s.
    ledger.ran("a", 0, 360.0)
    # a: 540 of type 0's 720 s, b: 180. With allocations 0.5 each there, priorities are
    # 0.5 / (540 / 720) = 2/3 and 0.5 / (180 / 720) = 2.
    priority, deficit = ledger.priorities(["a", "b"], np.array([[0.5, 0.0], [0.5, 0.5]]))
    assert priority.ravel().tolist() == pytest.approx([2 / 3, 0.0, 2.0, 0.5 / (180 / 360)])
    assert deficit.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    # A reset 1,920 s after the first: a should have had 0.5 x 1,920 = 960 s on type 0 and
    # ran 360: deficit 600; b should have had 960 on each type and ran nothing.
    assert not ledger.due(1000.0)
    assert ledger.due(1920.0)
    shares = {"a": [0.5, 0.0], "b": [0.5, 0.5]}
    ledger.reset(1920.0, lambda job: shares[job])
    _, deficit = ledger.priorities(["a", "b"], np.zeros((2, 2)))
    assert deficit.ravel().tolist() == pytest.approx([600.0, 0.0, 960.0, 960.0])
    # A job entering later starts at half a round, the totals do not grow with it.
    ledger.keep(["a", "c"])
    priority, _ = ledger.priorities(["c"], np.array([[1.0, 1.0]]))
    assert priority.ravel().tolist() == pytest.approx([1.0 / (180 / 360)] * 2)


def test_the_queue_walks_one_type_after_the_other() -> None:
    # Job 1 has the best priority on type 1, but type 0's queue (priority 0 included) is
    # walked first: job 0 (priority 3), job 2 (deficit 5 breaks the tie at 0 with job 1),
    # job 1; then type 1's, where job 0 cannot run.
    priority = np.array([[3.0, 0.0], [0.0, 9.0], [0.0, 1.0]])
    deficit = np.array([[0.0, 0.0], [0.0, 0.0], [5.0, 0.0]])
    usable = np.array([[True, False], [True, True], [True, True]])
    rows, cols = gavel_queue(priority, deficit, np.zeros((3, 2)), usable,
                             np.arange(3, dtype=np.int64))
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == [
        (0, 0), (2, 0), (1, 0), (1, 1), (2, 1)]


def test_unknown_rounds_are_refused() -> None:
    from hetsched.core.errors import InputError

    with pytest.raises(InputError, match="rounds"):
        rolling("gavel", rounds="slurm")


@pytest.mark.parametrize("name", ["gavel", "ftf", "ftf-agnostic"])
def test_gavels_rounds_replay_small_json_past_the_checker(name: str) -> None:
    from tests.policies.test_gavel_family import small_replay

    small_replay(rolling(name, rounds="gavel"))


def test_gavels_rounds_realise_tenant_weights_three_to_one() -> None:
    # test_quotas' case: 8 V100s, tenants A (weight 3) and B (weight 1), 12 one-GPU jobs
    # each of 7,200 s, all waiting from 0: the allocation gives A 6 GPUs and B 2. Over the
    # first two hours Gavel's rounds (deficits, one queue per type) realise that exactly:
    # 43,200 and 14,400 GPU-s; hetsched's rounds give B's small shares more (7 : 3).
    from hetsched.core.tenants import Tenant, TenantTable
    from hetsched.files.cluster_spec import parse_cluster
    from hetsched.replaying import replay

    cluster = parse_cluster("v100=8")
    table = TenantTable((Tenant("A", 3.0), Tenant("B", 1.0)))
    work = [*(Job(f"a{i}", 0.0, "cnn", 1, 7200.0, tenant="A") for i in range(12)),
            *(Job(f"b{i}", 0.0, "cnn", 1, 7200.0, tenant="B") for i in range(12))]
    table_speeds = ThroughputTable.from_rows([("cnn", "v100", 1, "packed", 1.0)])
    for rounds, a_share in (("gavel", 43_200.0), ("hetsched", 40_320.0)):
        ran = replay(work, cluster, rolling("gavel", rounds=rounds), throughput=table_speeds,
                     tenants=table)
        held = {"A": 0.0, "B": 0.0}
        for record in ran.replay.records.values():
            for segment in record.segments:
                held[str(record.job.tenant)] += len(segment.gpus) * max(
                    0.0, min(segment.finish, 7200.0) - segment.start)
        assert held["A"] == pytest.approx(a_share)
        assert held["A"] + held["B"] == pytest.approx(8 * 7200.0)
        assert ran.summary.completed == 24
