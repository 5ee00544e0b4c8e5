"""KnowledgeView (hetsched.knowledge.view): a job's work guessed at its arrival (the
estimator's ideal seconds times the job's fastest speed at its requested GPU count in the
policy's model), shown as the guess, or twice what was done once that is more, its
remaining work, the estimator told of finished jobs, and the accuracy figures of the guesses.

The history's guesses are geometric means, exp(mean of logs): even the mean of one job
is not exactly its duration in floating point (250 comes back as 249.9999999999999), so
they are compared with the value computed by hand to 1e-12; the prior's exactly."""

from __future__ import annotations

import pytest

from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_WORK
from hetsched.core.records import Cluster, GpuType, Job, Node
from hetsched.core.settings import ReplaySettings
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.knowledge import (
    KNOWLEDGE,
    ConstantPrior,
    HistoryEstimator,
    KnowledgeView,
    knowledge_view,
)

#: two GPUs of each type on one node each
CLUSTER = Cluster((GpuType("v100"), GpuType("k80")),
                  (Node("v", "v100", 2), Node("k", "k80", 2)))
#: type m: 2 steps/s on one V100, 1 on one K80; 3 and 1.5 on two (packed)
TABLE = ThroughputTable({("m", "v100", 1, Placement.PACKED): 2.0,
                         ("m", "k80", 1, Placement.PACKED): 1.0,
                         ("m", "v100", 2, Placement.PACKED): 3.0,
                         ("m", "k80", 2, Placement.PACKED): 1.5})


def view(prior_s: float = 50.0, *, history: bool = True) -> KnowledgeView:
    """A view whose estimator guesses ``prior_s`` ideal seconds with nothing to go on."""
    estimator = HistoryEstimator(prior_s) if history else ConstantPrior(prior_s)
    return KnowledgeView(CLUSTER, TABLE, estimator)


def test_the_guess_is_the_ideal_estimate_at_the_fastest_speed() -> None:
    seen = view(3600.0)
    one, two = Job("one", 0.0, "m", 1, 5000.0, user="u"), Job("two", 0.0, "m", 2, 9.0)
    # 3600 ideal s x 2 steps/s (one V100); 3600 x 3 steps/s (two V100s)
    assert seen.arrived(one).work == 7200.0
    assert seen.arrived(two).work == 10800.0
    assert seen.guessed == {"one": 7200.0, "two": 10800.0}
    assert seen.levels == {"one": "prior", "two": "prior"}
    assert seen.setting == "estimate"
    assert view(history=False).setting == "none"


def test_the_shown_total_is_the_guess_then_twice_what_was_done() -> None:
    seen = view()
    seen.arrived(Job("a", 0.0, "m", 1, 1000.0))  # guess: 50 ideal s x 2 steps/s = 100
    assert seen.guessed["a"] == 100.0
    # max(guess, 2 done): the guess until half of it is done, then twice what was done
    for done, total in ((0.0, 100.0), (30.0, 100.0), (50.0, 100.0), (99.5, 199.0),
                        (150.0, 300.0), (400.0, 800.0), (1000.0, 2000.0)):
        assert seen.total("a", done) == total, done
    # remaining = total - done = max(guess - done, done): never near zero
    for done, left in ((0.0, 100.0), (30.0, 70.0), (50.0, 50.0), (99.5, 99.5),
                       (150.0, 150.0), (400.0, 400.0)):
        assert seen.remaining("a", done) == left, done


def test_the_shown_total_stops_at_the_largest_work() -> None:
    seen = view(MAX_WORK)  # guess: 1e12 ideal s x 2 steps/s, capped at 1e12 steps
    seen.arrived(Job("a", 0.0, "m", 1, 10.0))
    assert seen.guessed["a"] == MAX_WORK
    assert seen.total("a", MAX_WORK) == MAX_WORK
    assert seen.remaining("a", MAX_WORK) > 0


def test_shown_is_one_record_per_total_and_keeps_the_rest_of_the_job() -> None:
    seen = view()
    true = Job("a", 5.0, "m", 1, 1000.0, user="u", tenant="t", deadline=900.0)
    first = seen.arrived(true)
    assert first.work == 100.0
    assert first == Job("a", 5.0, "m", 1, 100.0, user="u", tenant="t", deadline=900.0)
    assert true.work == 1000.0  # the truth is not touched
    assert seen.shown(true, 0.0) is first
    assert seen.shown(true, 40.0) is first  # the total is still 100 (2 x 40 < 100)
    second = seen.shown(true, 150.0)
    assert second is not first
    assert second.work == 300.0
    assert seen.shown(true, 150.0) is second


def test_a_finished_job_teaches_the_estimator_its_ideal_duration() -> None:
    seen = view()
    first = Job("a", 0.0, "m", 1, 500.0, user="u")
    seen.arrived(first)
    seen.finished(first)  # 500 steps / 2 steps/s = 250 ideal s
    # u's next 1-GPU m: 250 ideal s (the geometric mean of one job) x 2 steps/s; a 2-GPU
    # one: 250 x 3 steps/s (not b's or c's own 9 steps, nor the prior's 100 and 150)
    assert seen.arrived(Job("b", 1.0, "m", 1, 9.0, user="u")).work == \
        pytest.approx(500.0, rel=1e-12)
    assert seen.arrived(Job("c", 1.0, "m", 2, 9.0, user="u")).work == \
        pytest.approx(750.0, rel=1e-12)
    assert seen.levels == {"a": "prior", "b": "owner-type-gpus", "c": "owner-type"}
    # the none setting learns nothing
    blind = view(history=False)
    blind.arrived(first)
    blind.finished(first)
    assert blind.arrived(Job("b", 1.0, "m", 1, 9.0, user="u")).work == 100.0


def test_accuracy_of_four_guesses() -> None:
    seen = view(history=False)  # every 1-GPU job guessed 50 x 2 = 100 steps
    for index, work in enumerate((50.0, 100.0, 200.0, 400.0)):
        seen.arrived(Job(f"j{index}", 0.0, "m", 1, work))
    # guess / truth: 2, 1, 0.5, 0.25; |ratio - 1|: 1, 0, 0.5, 0.75 -> sorted 0, 0.5,
    # 0.75, 1: median 0.625, p90 (nearest rank: the ceil(0.9 x 4) = 4th) 1; under 2 of
    # 4, over 1 of 4; median ratio of 0.25, 0.5, 1, 2: 0.75.
    assert seen.accuracy() == {
        "setting": "none", "estimator": "none", "jobs": 4, "median_abs_error": 0.625,
        "p90_abs_error": 1.0, "under": 0.5, "over": 0.25, "median_ratio": 0.75,
        "levels": {"prior": 4}}


def test_accuracy_of_three_history_guesses_counts_their_levels() -> None:
    seen = view()
    a = Job("a", 0.0, "m", 1, 300.0, user="u")
    seen.arrived(a)  # prior: 100 steps (ratio 1/3)
    seen.finished(a)  # 150 ideal s
    # the geometric mean of one job, 150 ideal s, for both (to 1e-12: exp(log(150)))
    seen.arrived(Job("b", 1.0, "m", 1, 600.0, user="u"))  # u's m: 150 x 2 = 300 (1/2)
    seen.arrived(Job("c", 1.0, "m", 1, 75.0, user="w"))  # type m: 300 (4)
    # |ratio - 1|: 2/3, 1/2, 3 -> median 2/3, p90 (3rd of 3) 3; under 2 of 3, over 1 of 3;
    # median ratio 1/2
    accuracy = seen.accuracy()
    assert accuracy == {
        "setting": "estimate", "estimator": "history", "jobs": 3,
        "median_abs_error": pytest.approx(2 / 3, rel=1e-12),
        "p90_abs_error": pytest.approx(3.0, rel=1e-12),
        "under": pytest.approx(2 / 3, rel=1e-12), "over": pytest.approx(1 / 3, rel=1e-12),
        "median_ratio": pytest.approx(0.5, rel=1e-12),
        "levels": {"owner-type-gpus": 1, "type": 1, "prior": 1}}
    levels = accuracy["levels"]
    assert isinstance(levels, dict)
    assert list(levels) == ["owner-type-gpus", "type", "prior"]  # LEVELS' order


def test_accuracy_of_no_job() -> None:
    assert view().accuracy() == {
        "setting": "estimate", "estimator": "history", "jobs": 0, "median_abs_error": None,
        "p90_abs_error": None, "under": None, "over": None, "median_ratio": None,
        "levels": {}}


def test_a_view_per_setting() -> None:
    assert KNOWLEDGE == ("truth", "estimate", "none")
    assert knowledge_view("truth", CLUSTER, TABLE) is None
    estimate = knowledge_view("estimate", CLUSTER, TABLE)
    assert estimate is not None
    assert isinstance(estimate.estimator, HistoryEstimator)
    assert estimate.estimator.prior_s == 3600.0
    none = knowledge_view("none", CLUSTER, TABLE)
    assert none is not None
    assert isinstance(none.estimator, ConstantPrior)
    with pytest.raises(InputError) as bad:
        knowledge_view("bogus", CLUSTER, TABLE)
    assert str(bad.value) == ("knowledge: unknown knowledge setting (got 'bogus'; expected "
                              "truth or estimate or none)")
    with pytest.raises(InputError, match="knowledge"):
        ReplaySettings(knowledge="bogus")
    assert ReplaySettings().knowledge == "truth"
