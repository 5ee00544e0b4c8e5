"""The duration estimators of hetsched.knowledge (issue 64): QSSF's history rule
(:class:`HistoryEstimator`: the geometric mean ideal duration of the most specific group
of finished jobs, owner-type-gpus, owner-type, type, owner, all, else the prior) and
:class:`ConstantPrior` (the ``none`` setting: one guess for every job).

A geometric mean is exp(mean of logs), and exp(log(x)) is not exactly x in floating point
(200 comes back as 200.00000000000009): a history's guesses are compared with the value
computed by hand to 1e-12 (:func:`about`), the prior's exactly."""

from __future__ import annotations

import pytest

from hetsched.core.records import Job
from hetsched.knowledge import PRIOR_S, ConstantPrior, HistoryEstimator
from hetsched.knowledge.estimators import LEVELS, MIN_DURATION_S

#: the geometric means of :func:`taught`'s groups, by hand:
#: u's m on 1 GPU, (100 x 300)^(1/2) = sqrt(30,000) = 173.205...
U_M_1 = (100.0 * 300.0) ** (1 / 2)
#: every m (all u's), (100 x 300 x 1000)^(1/3) = (3e7)^(1/3) = 100 x 30^(1/3) = 310.723...
#: (their arithmetic mean would be 466.7)
M = (100.0 * 300.0 * 1000.0) ** (1 / 3)
#: every job, (100 x 300 x 1000 x 50)^(1/4) = (1.5e9)^(1/4) = 100 x 15^(1/4) = 196.799...
#: (their arithmetic mean would be 362.5)
ALL = (100.0 * 300.0 * 1000.0 * 50.0) ** (1 / 4)


def about(value: float) -> object:
    """``value`` to 1e-12, relative: a geometric mean goes through log and exp."""
    return pytest.approx(value, rel=1e-12)


def job(job_type: str, gpus: int = 1, *, user: str | None = None,
        tenant: str | None = None, name: str = "q") -> Job:
    """A job to ask or teach about (its own work is never read: 1 step)."""
    return Job(name, 0.0, job_type, gpus, 1.0, user=user, tenant=tenant)


def taught() -> HistoryEstimator:
    """An estimator told of four finished jobs (ideal seconds):
    u's m on 1 GPU 100 and 300, u's m on 2 GPUs 1000, v's n on 1 GPU 50."""
    history = HistoryEstimator()
    history.learn(job("m", 1, user="u", name="h1"), 100.0)
    history.learn(job("m", 1, user="u", name="h2"), 300.0)
    history.learn(job("m", 2, user="u", name="h3"), 1000.0)
    history.learn(job("n", 1, user="v", name="h4"), 50.0)
    return history


def test_the_levels_are_qssfs_most_specific_first() -> None:
    assert LEVELS == ("owner-type-gpus", "owner-type", "type", "owner", "all", "prior")
    assert PRIOR_S == 3600.0


def test_before_anything_finished_every_job_gets_the_prior() -> None:
    history = HistoryEstimator()
    assert history.name == "history"
    assert history.learned == 0
    for asked in (job("m", user="u"), job("m", 4, tenant="t"), job("n")):
        assert history.estimate(asked) == (3600.0, "prior")
    assert HistoryEstimator(prior_s=50.0).estimate(job("m", user="u")) == (50.0, "prior")


def test_the_hand_computed_geometric_means() -> None:
    # the closed forms above, to 9 digits (the arithmetic means: 200, 466.7, 362.5)
    assert (f"{U_M_1:.9g}", f"{M:.9g}", f"{ALL:.9g}") == \
        ("173.205081", "310.723251", "196.798967")


def test_the_geometric_mean_of_the_most_specific_group_with_history() -> None:
    history = taught()
    assert history.learned == 4
    # u's m on 1 GPU: sqrt(100 x 300) = 173.205... (not the arithmetic mean, 200)
    assert history.estimate(job("m", 1, user="u")) == (about(U_M_1), "owner-type-gpus")
    # u's m on 2 GPUs: the one 2-GPU job, 1000 (not the 1-GPU ones)
    assert history.estimate(job("m", 2, user="u")) == (about(1000.0), "owner-type-gpus")
    # u's m on 4 GPUs: none of that size, every m of u's: (100 x 300 x 1000)^(1/3)
    assert history.estimate(job("m", 4, user="u")) == (about(M), "owner-type")


def test_a_job_of_no_duration_counts_as_the_shortest() -> None:
    # log(0) is undefined: 0 ideal s counts as MIN_DURATION_S = 1e-3 s, so 0 and 1000
    # give sqrt(1e-3 x 1000) = 1 (their arithmetic mean would be 500)
    assert MIN_DURATION_S == 1e-3
    history = HistoryEstimator()
    history.learn(job("m", 1, user="u", name="h1"), 0.0)
    assert history.estimate(job("m", 1, user="u")) == (about(1e-3), "owner-type-gpus")
    history.learn(job("m", 1, user="u", name="h2"), 1000.0)
    assert history.estimate(job("m", 1, user="u")) == (about(1.0), "owner-type-gpus")


def test_the_job_type_across_owners_comes_before_the_owners_other_types() -> None:
    history = taught()
    # u never ran n; v's n (50) wins over u's own geometric mean of other types (310.7)
    assert history.estimate(job("n", 1, user="u")) == (about(50.0), "type")
    # w never ran anything: every owner's m, (100 x 300 x 1000)^(1/3)
    assert history.estimate(job("m", 8, user="w")) == (about(M), "type")
    # a type nobody ran: the owner's own jobs, u's (100 x 300 x 1000)^(1/3), v's 50
    assert history.estimate(job("k", 1, user="u")) == (about(M), "owner")
    assert history.estimate(job("k", 1, user="v")) == (about(50.0), "owner")


def test_every_finished_job_when_nothing_closer_has_history() -> None:
    history = taught()
    # a new owner and a new type: every job, (100 x 300 x 1000 x 50)^(1/4) = 196.799...
    assert history.estimate(job("k", 1, user="z")) == (about(ALL), "all")
    # nobody's job (no user, no tenant) skips the owner levels: type, else all
    assert history.estimate(job("k", 1)) == (about(ALL), "all")
    assert history.estimate(job("n", 1)) == (about(50.0), "type")


def test_the_owner_is_the_user_before_the_tenant() -> None:
    history = taught()
    history.learn(job("m", 1, tenant="T", name="h5"), 10.0)  # T's own job, no user
    # type m now: (100 x 300 x 1000 x 10)^(1/4) = (3e8)^(1/4) = 100 x 3^(1/4) = 131.607...
    every_m = (100.0 * 300.0 * 1000.0 * 10.0) ** (1 / 4)
    assert every_m == pytest.approx(131.60740129524925, rel=1e-12)
    # a job of T's without a user: T's history
    assert history.estimate(job("m", 1, tenant="T")) == (about(10.0), "owner-type-gpus")
    # u's job in tenant T: u's history (sqrt(100 x 300)), not T's
    assert history.estimate(job("m", 1, user="u", tenant="T")) == \
        (about(U_M_1), "owner-type-gpus")
    # x's job in tenant T: x has none, so every owner's m, not T's 10
    assert history.estimate(job("m", 1, user="x", tenant="T")) == (about(every_m), "type")
    # a job taught with a user and a tenant counts for the user only
    history.learn(job("q", 1, user="y", tenant="T", name="h6"), 70.0)
    assert history.estimate(job("r", 1, tenant="T")) == (about(10.0), "owner")
    assert history.estimate(job("r", 1, user="y")) == (about(70.0), "owner")


def test_the_constant_prior_learns_nothing() -> None:
    prior = ConstantPrior()
    assert prior.name == "none"
    assert prior.estimate(job("m", user="u")) == (3600.0, "prior")
    prior.learn(job("m", user="u", name="h1"), 10.0)
    for asked in (job("m", user="u"), job("m", 2, user="u"), job("k")):
        assert prior.estimate(asked) == (3600.0, "prior")
    assert ConstantPrior(prior_s=7.5).estimate(job("m")) == (7.5, "prior")
