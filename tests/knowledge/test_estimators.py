"""The duration estimators of hetsched.knowledge (issue 64): QSSF's history rule
(:class:`HistoryEstimator`: the mean ideal duration of the most specific group of
finished jobs, owner-type-gpus, owner-type, type, owner, all, else the prior) and
:class:`ConstantPrior` (the ``none`` setting: one guess for every job)."""

from __future__ import annotations

from hetsched.core.records import Job
from hetsched.knowledge import PRIOR_S, ConstantPrior, HistoryEstimator
from hetsched.knowledge.estimators import LEVELS


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


def test_the_mean_of_the_most_specific_group_with_history() -> None:
    history = taught()
    assert history.learned == 4
    # u's m on 1 GPU: (100 + 300) / 2
    assert history.estimate(job("m", 1, user="u")) == (200.0, "owner-type-gpus")
    # u's m on 2 GPUs: the one 2-GPU job, 1000 (not the 1-GPU ones)
    assert history.estimate(job("m", 2, user="u")) == (1000.0, "owner-type-gpus")
    # u's m on 4 GPUs: none of that size, every m of u's: (100 + 300 + 1000) / 3
    assert history.estimate(job("m", 4, user="u")) == (1400 / 3, "owner-type")


def test_the_job_type_across_owners_comes_before_the_owners_other_types() -> None:
    history = taught()
    # u never ran n; v's n (50) wins over u's own mean of other types (466.7)
    assert history.estimate(job("n", 1, user="u")) == (50.0, "type")
    # w never ran anything: every owner's m, (100 + 300 + 1000) / 3
    assert history.estimate(job("m", 8, user="w")) == (1400 / 3, "type")
    # a type nobody ran: the owner's own jobs, u's (100 + 300 + 1000) / 3, v's 50
    assert history.estimate(job("k", 1, user="u")) == (1400 / 3, "owner")
    assert history.estimate(job("k", 1, user="v")) == (50.0, "owner")


def test_every_finished_job_when_nothing_closer_has_history() -> None:
    history = taught()
    # a new owner and a new type: every job, (100 + 300 + 1000 + 50) / 4
    assert history.estimate(job("k", 1, user="z")) == (362.5, "all")
    # nobody's job (no user, no tenant) skips the owner levels: type, else all
    assert history.estimate(job("k", 1)) == (362.5, "all")
    assert history.estimate(job("n", 1)) == (50.0, "type")


def test_the_owner_is_the_user_before_the_tenant() -> None:
    history = taught()
    history.learn(job("m", 1, tenant="T", name="h5"), 10.0)  # T's own job, no user
    # type m now: (100 + 300 + 1000 + 10) / 4 = 352.5
    # a job of T's without a user: T's history
    assert history.estimate(job("m", 1, tenant="T")) == (10.0, "owner-type-gpus")
    # u's job in tenant T: u's history, not T's
    assert history.estimate(job("m", 1, user="u", tenant="T")) == (200.0, "owner-type-gpus")
    # x's job in tenant T: x has none, so every owner's m, not T's 10
    assert history.estimate(job("m", 1, user="x", tenant="T")) == (352.5, "type")
    # a job taught with a user and a tenant counts for the user only
    history.learn(job("q", 1, user="y", tenant="T", name="h6"), 70.0)
    assert history.estimate(job("r", 1, tenant="T")) == (10.0, "owner")
    assert history.estimate(job("r", 1, user="y")) == (70.0, "owner")


def test_the_constant_prior_learns_nothing() -> None:
    prior = ConstantPrior()
    assert prior.name == "none"
    assert prior.estimate(job("m", user="u")) == (3600.0, "prior")
    prior.learn(job("m", user="u", name="h1"), 10.0)
    for asked in (job("m", user="u"), job("m", 2, user="u"), job("k")):
        assert prior.estimate(asked) == (3600.0, "prior")
    assert ConstantPrior(prior_s=7.5).estimate(job("m")) == (7.5, "prior")
