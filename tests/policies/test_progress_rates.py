"""``progress``'s rates ahead remembered between decisions (hetsched.policies.progress_rates):
the answers are the function's, asked once per key over two decisions, dropped after, all
forgotten with another model; a replay with the memory is the replay without it."""

from __future__ import annotations

import pytest

from hetsched.core.records import Job
from hetsched.files.cluster_spec import parse_cluster
from hetsched.files.traces import read_trace
from hetsched.policies import progress_rates
from hetsched.policies.progress_rates import RatesAhead, rate_ahead
from hetsched.policies.rolling import ClusterState
from hetsched.registry import rolling
from hetsched.replaying import check_replay
from hetsched.simulate.simulator import Simulator
from hetsched.speeds.pollux import read_pollux
from tests.helpers import ROOT

TOY = ROOT / "tests" / "data" / "pollux"


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """The calls that reach :func:`rate_ahead` (each answers its steps done + 1)."""
    calls: list[tuple[object, ...]] = []

    def counted(state: object, job: Job, gpu_type: str, size: int, speed: float,
                done: float, horizon_s: float) -> float:
        calls.append((job.job_type, gpu_type, size, done))
        return done + 1.0

    monkeypatch.setattr(progress_rates, "rate_ahead", counted)
    return calls


def test_a_rate_is_asked_once_over_two_decisions_and_dropped_after(
        asked: list[tuple[object, ...]]) -> None:
    rates, model, other = RatesAhead(), object(), object()
    state = ClusterState.__new__(ClusterState)  # (not read by the stand-in)
    a, b = Job("a", 0.0, "toy", 1, 10.0), Job("b", 0.0, "toy", 1, 10.0)

    def rate(job: Job, done: float) -> float:
        return rates.rate(state, job, "t4", 1, 2.0, done, 600.0)

    rates.decision(model)  # type: ignore[arg-type]
    assert (rate(a, 0.0), rate(b, 0.0), rate(a, 5.0)) == (1.0, 1.0, 6.0)
    assert len(asked) == 2  # b shares a's type and steps done: one call
    rates.decision(model)  # type: ignore[arg-type]
    assert rate(a, 5.0) == 6.0  # from the decision before
    rates.decision(model)  # type: ignore[arg-type]
    assert rate(a, 5.0) == 6.0  # asked again last decision: still kept
    assert rate(a, 0.0) == 1.0  # not asked for two decisions: dropped, asked anew
    assert len(asked) == 3
    rates.decision(other)  # type: ignore[arg-type]
    assert rate(a, 5.0) == 6.0  # another model: everything asked anew
    assert len(asked) == 4


class Forgetful(RatesAhead):
    """Every rate asked anew."""

    def rate(self, state: ClusterState, job: Job, gpu_type: str, size: int, speed: float,
             done: float, horizon_s: float) -> float:
        return rate_ahead(state, job, gpu_type, size, speed, done, horizon_s)


def test_the_memory_changes_no_decision() -> None:
    # The toy workload's elastic jobs on 2 nodes of 4 T4s under progress-elastic (which
    # plans ahead): the replay with the memory is the one without, segment by segment.
    trace = read_trace(TOY / "workloads" / "workload-1.csv", "pollux", elastic=True)
    cluster = parse_cluster("t4=8x4")
    model = read_pollux(TOY / "traces")
    replays = []
    for forgetful in (False, True):
        policy = rolling("progress-elastic")
        if forgetful:
            policy._aheads = Forgetful()  # type: ignore[attr-defined]
        replay = Simulator(cluster, trace.jobs, policy, truth=model).run()
        assert check_replay(replay, trace.jobs, model) == []
        replays.append({job_id: record.segments for job_id, record in replay.records.items()})
    assert replays[0] == replays[1]
    assert sum(len(segments) for segments in replays[0].values()) > len(trace.jobs)
