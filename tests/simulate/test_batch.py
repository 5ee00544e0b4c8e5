"""Batched decisions (``batch_s``, ``--batch``): an arrival or completion soon after the
last decision waits for one decision ``batch_s`` after it; a round boundary still decides
at once; bad values are refused with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.settings import ReplaySettings
from hetsched.core.throughput import ThroughputTable
from hetsched.policies.rolling import RollingFifo
from hetsched.replaying import check_replay
from hetsched.simulate.simulator import Simulator
from tests.helpers import ROOT, exits_2

TABLE = ThroughputTable.from_rows([("a", "v100", 1, "packed", 1.0)])
TWO = Cluster((GpuType("v100"),), (Node("v", "v100", 2),))


def starts(batch_s: float | None) -> dict[str, float | None]:
    """Each job's first start: A (100 steps) at 0, B (100) at 10, C (50) at 20, D (10)
    at 300, on two V100s at 1 step/s under FIFO."""
    jobs = [Job("A", 0.0, "a", 1, 100.0), Job("B", 10.0, "a", 1, 100.0),
            Job("C", 20.0, "a", 1, 50.0), Job("D", 300.0, "a", 1, 10.0)]
    replay = Simulator(TWO, jobs, RollingFifo(), truth=TABLE,
                       batch_s=batch_s).run()
    assert check_replay(replay, jobs, TABLE) == []
    return {job_id: record.first_start for job_id, record in replay.records.items()}


def test_events_soon_after_a_decision_wait_for_the_batch() -> None:
    # Without batching: A at 0, B at 10; C waits for A's end at 100; D at 300.
    assert starts(None) == {"A": 0.0, "B": 10.0, "C": 100.0, "D": 300.0}
    # Batches of 60 s: the decision at 0 starts A; B's and C's arrivals (10, 20) wait for
    # one decision at 60, which starts B (one GPU left; C waits). A ends at 100, 40 s after
    # that decision: C waits for the batch at 120. D arrives at 300, long after the last
    # decision (120): at once.
    assert starts(60.0) == {"A": 0.0, "B": 60.0, "C": 120.0, "D": 300.0}


def test_a_round_boundary_still_decides_at_once() -> None:
    # One V100: A (100 steps) at 0, B (10) at 150. Batches of 500 s: B's arrival (150 s
    # after the decision at 0) would wait for 500, but a decision interval of 360 puts a
    # boundary at 360, which decides: B starts there.
    one = Cluster((GpuType("v100"),), (Node("v", "v100", 1),))
    jobs = [Job("A", 0.0, "a", 1, 100.0), Job("B", 150.0, "a", 1, 10.0)]
    for interval_s, b_start in ((360.0, 360.0), (None, 500.0)):
        replay = Simulator(one, jobs, RollingFifo(), truth=TABLE, batch_s=500.0,
                           interval_s=interval_s).run()
        assert check_replay(replay, jobs, TABLE) == []
        assert replay.records["B"].first_start == b_start


def test_bad_batches_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match=r"batch_s: bad decision interval.*0.5"):
        ReplaySettings(batch_s=0.5)
    with pytest.raises(InputError, match=r"batch_s"):
        Simulator(TWO, [Job("A", 0.0, "a", 1, 1.0)], RollingFifo(), truth=TABLE, batch_s=0.0)
    trace = ROOT / "instances" / "traces" / "gavel_sample.trace"
    err = exits_2(["replay", str(trace), "--cluster", "v100=2", "--policy", "fifo",
                   "--batch", "-1", "--out", str(Path("/nonexistent"))], capsys)
    assert "--batch" in err
