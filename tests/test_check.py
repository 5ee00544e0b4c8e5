"""The checker finds every kind of violation it promises, and nothing in valid schedules."""

from __future__ import annotations

import dataclasses

import pytest

from hetsched.check import check
from hetsched.instance_file import load_instance
from hetsched.result import Assignment, Schedule
from tests.conftest import INSTANCES

# tiny.json: v100-0/0 and k80-0/0; speeds (steps/s) v100/k80: image-cnn-large 8/1.76,
# rnn-lm 20/7, rl-a3c 12/8.4; works j0 21875, j1 45119, j2 17016; arrivals 0, 12.3, 74.2.
TINY = load_instance(INSTANCES / "tiny.json")
GOOD = Schedule((
    Assignment("j1", "v100", ("v100-0/0",), 12.3, 12.3 + 45119 / 20),
    Assignment("j0", "v100", ("v100-0/0",), 12.3 + 45119 / 20, 12.3 + 45119 / 20 + 21875 / 8),
    Assignment("j2", "k80", ("k80-0/0",), 74.2, 74.2 + 17016 / 8.4),
))


def kinds(schedule: Schedule, **kwargs: bool) -> list[str]:
    return [v.kind for v in check(TINY, schedule, **kwargs)]


def with_changed(job: str, **fields: object) -> Schedule:
    return Schedule(tuple(
        dataclasses.replace(a, **fields) if a.job == job else a  # type: ignore[arg-type]
        for a in GOOD
    ))


def test_valid_schedule_has_no_violations() -> None:
    assert check(TINY, GOOD) == []


def test_overlap_on_a_gpu() -> None:
    # j0 moved to start while j1 still runs on the V100.
    start = 1000.0
    assert kinds(with_changed("j0", start=start, finish=start + 21875 / 8)) == ["overlap"]


def test_overlap_is_found_behind_a_long_interval() -> None:
    # A long job, a short one inside it, and a third inside too but after the short one:
    # the third overlaps the long one though not its neighbour in start order.
    schedule = Schedule((
        Assignment("j1", "v100", ("v100-0/0",), 12.3, 12.3 + 45119 / 20),
        Assignment("j2", "v100", ("v100-0/0",), 100.0, 100.0 + 17016 / 12),
        Assignment("j0", "v100", ("v100-0/0",), 1600.0, 1600.0 + 21875 / 8),
    ))
    assert kinds(schedule).count("overlap") == 2


def test_before_arrival_and_before_now() -> None:
    early = with_changed("j2", start=50.0, finish=50.0 + 17016 / 8.4)
    assert kinds(early) == ["before-arrival"]
    later = TINY.replace(now=20.0)
    assert [v.kind for v in check(later, GOOD)] == ["before-now"]


def test_wrong_finish_time() -> None:
    assert kinds(with_changed("j2", finish=74.2 + 17016 / 12)) == ["finish"]


def test_wrong_gpu_type_unknown_gpu_and_gang_size() -> None:
    assert kinds(with_changed("j2", gpu_type="v100")) == ["gpu-type"]
    assert kinds(with_changed("j2", gpus=("k80-0/7",))) == ["unknown-gpu"]
    assert kinds(with_changed("j2", gpus=("k80-0/0", "v100-0/0"))) == ["gpu-type"]


def test_zero_throughput_configuration() -> None:
    small = load_instance(INSTANCES / "small.json")
    # rl-a3c runs on one GPU only: no entry for 2 GPUs means throughput 0.
    job = next(j for j in small.jobs if j.job_type == "rl-a3c")
    bad = Schedule((Assignment(job.id, "v100", ("v100-0/0", "v100-0/1"), job.arrival,
                               job.arrival + 1.0),))
    found = check(small, bad, complete=False)
    assert [v.kind for v in found] in (["gang-size"], ["zero-throughput"])


def test_missing_duplicate_and_unknown_jobs() -> None:
    assert kinds(Schedule(GOOD.assignments[:2])) == ["unscheduled"]
    assert kinds(Schedule(GOOD.assignments[:2]), complete=False) == []
    twice = Schedule((*GOOD.assignments, GOOD.assignments[0]))
    assert "duplicate" in kinds(twice)
    ghost = Schedule((*GOOD.assignments, Assignment("zz", "k80", ("k80-0/0",), 1e6, 1e6 + 1)))
    assert kinds(ghost) == ["unknown-job"]


@pytest.mark.parametrize("gpus", [("v100-0/0", "v100-0/0")])
def test_repeated_gpu_in_a_gang(gpus: tuple[str, ...]) -> None:
    assert kinds(with_changed("j2", gpus=gpus, gpu_type="v100")) == ["repeated-gpu"]


# Unix-epoch clock values (late 2023): the old tolerance, 1e-6 of the clock value, was
# 1,700 s there, so these two defects passed.
EPOCH = 1.7e9


def shifted(schedule: Schedule, by: float) -> Schedule:
    return Schedule(tuple(dataclasses.replace(a, start=a.start + by, finish=a.finish + by)
                          for a in schedule))


EPOCH_TINY = TINY.replace(jobs=tuple(
    dataclasses.replace(j, arrival=j.arrival + EPOCH,
                        deadline=None if j.deadline is None else j.deadline + EPOCH)
    for j in TINY.jobs))


def test_epoch_times_valid_schedule_passes() -> None:
    assert check(EPOCH_TINY, shifted(GOOD, EPOCH)) == []


def test_epoch_times_overlap_of_606_s_is_found() -> None:
    # j0 starts 606 s before j1 leaves the V100 (and still takes 21875 / 8 s).
    j1_end = EPOCH + 12.3 + 45119 / 20
    start = j1_end - 606
    schedule = shifted(with_changed("j0", start=start - EPOCH, finish=start - EPOCH + 21875 / 8),
                       EPOCH)
    assert [v.kind for v in check(EPOCH_TINY, schedule)] == ["overlap"]


def test_epoch_times_job_ending_1000_s_early_is_found() -> None:
    good = shifted(GOOD, EPOCH)
    early = Schedule(tuple(dataclasses.replace(a, finish=a.finish - 1000) if a.job == "j2"
                           else a for a in good))
    assert [v.kind for v in check(EPOCH_TINY, early)] == ["finish"]


def test_tolerance_is_relative_to_durations_not_clock() -> None:
    # A finish off by 10 ms on a 2,026 s job is wrong at any clock value (the tolerance is
    # 1e-6 s + 1e-6 of the duration, 2 ms, + 4 ulps: 1e-6 s at 1.7e9); 1e-7 s is noise.
    for by in (0.0, EPOCH):
        good = shifted(GOOD, by)
        instance = EPOCH_TINY if by else TINY
        for error, kinds_found in ((1e-2, ["finish"]), (1e-7, [])):
            wrong = Schedule(tuple(dataclasses.replace(a, finish=a.finish + error)
                                   if a.job == "j2" else a for a in good))
            assert [v.kind for v in check(instance, wrong)] == kinds_found
