"""``progress`` with a bound on finish-time fairness (``rho_bound``) and the
contention clock it counts N with (hetsched.policies.contention): values worked out by
hand, and the bound against plain ``progress`` on a long job that shortest-remaining
first would starve."""

from __future__ import annotations

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.core.settings import ReplaySettings
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.policies.contention import ContentionClock
from hetsched.policies.progress import Progress
from hetsched.policies.progress_params import ProgressParams
from hetsched.replaying import replay

#: One job type at 1 step/s on a V100: steps are seconds.
TABLE = ThroughputTable({("m", "v100", 1, Placement.PACKED): 1.0})
ONE_GPU = parse_cluster("v100=1")
NO_PENALTY = ReplaySettings(restart_penalty_s=0.0)


def test_the_clock_averages_the_active_jobs_over_a_job_s_life() -> None:
    clock = ContentionClock()
    clock.seen(0.0, ["a"])
    clock.seen(10.0, ["a", "b"])
    clock.finished("a", 20.0)
    # b from 10 to 30: two jobs for 10 s, then itself alone for 10 s: 1.5.
    assert clock.average(10.0, 30.0) == pytest.approx(1.5)
    # a from 0 to 20: alone 10 s, then with b 10 s.
    assert clock.average(0.0, 20.0) == pytest.approx(1.5)
    # A job arriving mid-segment (at 5, seen at 10 with a): 1 job from 5 to 10 as the
    # clock saw it, then 2: (5 + 20) / 15.
    assert clock.average(5.0, 20.0) == pytest.approx(25 / 15)
    assert clock.average(30.0, 30.0) == 1.0  # now, b alone
    clock.forget_before(15.0)  # what a job arrived at 15 or later needs stays exact
    assert clock.average(15.0, 30.0) == pytest.approx((2 * 5 + 10) / 15)


def stream() -> list[Job]:
    """A long job L (1,000 s) and twenty short ones (100 s), one every 100 s from 0."""
    return [Job("L", 0.0, "m", 1, 1000.0),
            *(Job(f"s{i:02d}", 100.0 * i, "m", 1, 100.0) for i in range(20))]


def test_plain_progress_starves_the_long_job_and_the_bound_does_not() -> None:
    # Plain progress runs shortest remaining first: each short job runs on arrival (1/100
    # per s beats L's 1/1,000) and ends as the next arrives, so L waits until 2,000 and
    # ends at 3,000. Two jobs are active until 2,000, then L alone: N = (2 x 2,000 +
    # 1,000) / 3,000 = 5/3, L's isolated time 1,000 x 5/3, rho = 3,000 / 1,666.7 = 1.8;
    # each short job: 100 / (100 x 2) = 0.5.
    plain = replay(stream(), ONE_GPU, Progress(ProgressParams(time_limit_s=None)), throughput=TABLE,
                   settings=NO_PENALTY)
    assert plain.replay.records["L"].finish == pytest.approx(3000.0)
    rho = plain.replay.rho()
    assert rho["L"] == pytest.approx(1.8)
    assert max(rho[f"s{i:02d}"] for i in range(20)) == pytest.approx(0.5)

    # With rho <= 1.2 (rounds of 100 s, critical under one round of slack): L must end
    # by 1.2 x 1,000 x N = 2,400 while N = 2. A short job must end by its arrival + 1.2 x
    # 100 x 2 = 240: urgent as it arrives (140 s of slack, under half of its 100 s plus a
    # round) but not critical (140 > 100). L is urgent from 800 (slack 2,400 - t - 1,000
    # under 500 + 100) and critical from 1,300 (slack under 100): from then on its lift
    # is twice a short job's (8 + its own 0.1 against 4 + 1, in units of a short job's
    # value), so it starts at 1,300; at 1,200 (lift 4 + 0.1 against 4 + 1) it does not.
    # Short jobs waiting behind it turn critical in turn and take the GPU back, so L still
    # ends last, at 3,000, but with more jobs active over its life: its rho, the largest,
    # falls.
    def bounded(rho_bound: float) -> Progress:
        return Progress(ProgressParams(time_limit_s=None, rho_bound=rho_bound, round_s=100.0,
                                       critical_rounds=1.0))

    fair = replay(stream(), ONE_GPU, bounded(1.2), throughput=TABLE, settings=NO_PENALTY)
    assert fair.replay.records["L"].first_start == pytest.approx(1300.0)
    fair_rho = fair.replay.rho()
    assert max(fair_rho.values()) < rho["L"] - 0.3
    # The price: the short jobs that waited. The average JCT rises.
    assert fair.summary.avg_jct_s > plain.summary.avg_jct_s
    # A bound plain progress keeps changes nothing: with rho <= 2, L must end by 4,000 and
    # is critical from 2,900 only, when it runs anyway (2,000 to 3,000).
    loose = replay(stream(), ONE_GPU, bounded(2.0), throughput=TABLE, settings=NO_PENALTY)
    assert loose.replay.records["L"].first_start == pytest.approx(2000.0)
    assert loose.summary.avg_jct_s == pytest.approx(plain.summary.avg_jct_s)


def test_a_bad_bound_is_refused() -> None:
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(InputError, match="rho_bound"):
            ProgressParams(rho_bound=bad)
