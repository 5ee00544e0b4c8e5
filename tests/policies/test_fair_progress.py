"""``progress`` with a bound on finish-time fairness (``rho_bound``, issue 35) and the
contention clock it counts N with (hetsched.policies.contention): values worked out by
hand, and the bound against plain ``progress`` on a long job that shortest-remaining
first would starve."""

from __future__ import annotations

import pytest

from hetsched.core.records import Job
from hetsched.core.settings import ReplaySettings
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.policies.contention import ContentionClock
from hetsched.policies.progress import Progress
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
    plain = replay(stream(), ONE_GPU, Progress(time_limit_s=None), throughput=TABLE,
                   settings=NO_PENALTY)
    assert plain.records["L"].finish == pytest.approx(3000.0)
    rho = plain.rho()
    assert rho["L"] == pytest.approx(1.8)
    assert max(rho[f"s{i:02d}"] for i in range(20)) == pytest.approx(0.5)

    # With rho <= 1.2: L may finish by 1.2 x 1,000 x N = 2,400 while N = 2, so it is
    # urgent from the start (2,400 - 1,000 of slack is under half its 1,000 s plus a
    # round); its lift grows with the rho it would reach, 4 x (its end / 2,000) / 1.2,
    # against a short job's 4 x 0.5 / 1.2 plus the short job's larger own value (1 per
    # unit of L's 0.1): L wins once 4 (end/2,000 - 0.5) / 1.2 > 0.9, at 600. The short
    # jobs then queue behind it and their own rho presses in turn (they take it back),
    # so L still ends last, at 3,000, but with more jobs active over its life (a larger
    # N, a larger fair share): its rho falls, and so does the largest.
    fair = replay(stream(), ONE_GPU, Progress(time_limit_s=None, rho_bound=1.2),
                  throughput=TABLE, settings=NO_PENALTY)
    assert fair.records["L"].first_start == pytest.approx(600.0)
    fair_rho = fair.rho()
    assert max(fair_rho.values()) < rho["L"] - 0.3
    # The price: the short jobs that waited. The average JCT rises.
    assert fair.metrics().avg_jct_s > plain.metrics().avg_jct_s
    # A looser bound presses later: with rho <= 1.5, L wins once 4 (end/2,000) / 1.5 +
    # 0.1 > 4 x 0.5 / 1.5 + 1, that is end > 1,675: at the decision of 700 (each short
    # job has run from its arrival to the next one's until then).
    loose = replay(stream(), ONE_GPU, Progress(time_limit_s=None, rho_bound=1.5),
                   throughput=TABLE, settings=NO_PENALTY)
    assert loose.records["L"].first_start == pytest.approx(700.0)
    assert max(fair_rho.values()) < max(loose.rho().values()) < rho["L"]


def test_a_bad_bound_is_refused() -> None:
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="rho_bound"):
            Progress(rho_bound=bad)
