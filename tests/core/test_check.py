"""The checker finds every kind of violation it promises, and nothing in valid schedules."""

from __future__ import annotations

import dataclasses

import pytest

from hetsched.core.check import check
from hetsched.core.result import Assignment, Schedule, compute_metrics
from hetsched.files.instance import load_instance
from tests.helpers import INSTANCES

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


# --- run segments (preemptions) ------------------------------------------------------
# j1 (rnn-lm, 45119 steps, 20 steps/s on the V100) runs 12.3..112.3 (2,000 steps), is
# preempted for j0, and resumes on the K80 (7 steps/s) at 3000: the 10 s restart penalty,
# then 43119 / 7 s. j0 runs whole on the V100 from 112.3; j2 on the K80 from 74.2 ends at
# 74.2 + 17016 / 8.4 = 2,099.9, before j1 resumes there.
PENALTY = 10.0
RESUME = 3000.0
SEGMENTED = Schedule((
    Assignment("j1", "v100", ("v100-0/0",), 12.3, 112.3, 2000.0),
    Assignment("j0", "v100", ("v100-0/0",), 112.3, 112.3 + 21875 / 8),
    Assignment("j2", "k80", ("k80-0/0",), 74.2, 74.2 + 17016 / 8.4),
    Assignment("j1", "k80", ("k80-0/0",), RESUME, RESUME + PENALTY + 43119 / 7, 43119.0),
), PENALTY)


def segment_kinds(*changes: tuple[int, dict[str, object]], penalty: float = PENALTY
                  ) -> list[str]:
    """The violations after replacing fields of j1's segments (index 0 or 1)."""
    ones = [a for a in SEGMENTED if a.job == "j1"]
    for index, fields in changes:
        ones[index] = dataclasses.replace(ones[index], **fields)  # type: ignore[arg-type]
    others = tuple(a for a in SEGMENTED if a.job != "j1")
    return kinds(Schedule((*others, *ones), penalty))


def test_valid_run_segments_pass() -> None:
    assert check(TINY, SEGMENTED) == []
    # The metrics see j1 finish with its last segment and both segments' GPU time.
    metrics = compute_metrics(TINY, SEGMENTED)
    assert metrics.scheduled == 3
    assert metrics.makespan_s == pytest.approx(RESUME + PENALTY + 43119 / 7)


def test_run_segments_whose_work_does_not_add_up() -> None:
    # 1,000 steps missing from the first segment (and its length matching them).
    assert segment_kinds((0, {"work": 1000.0, "finish": 62.3})) == ["work-total"]


def test_run_segment_without_its_restart_penalty() -> None:
    # The resumed segment ends 10 s early, as if it had no restore.
    assert segment_kinds((1, {"finish": RESUME + 43119 / 7})) == ["finish"]
    # With penalty 0 the same schedule is wrong the other way.
    assert segment_kinds(penalty=0.0) == ["finish"]


def test_run_segments_of_one_job_overlapping() -> None:
    # The second segment starts on the K80 while the first still runs on the V100.
    start = 100.0
    end = start + PENALTY + 43119 / 7
    assert "segment-overlap" in segment_kinds((1, {"start": start, "finish": end}))


def test_run_segment_with_negative_work_and_a_second_whole_run() -> None:
    assert "work" in segment_kinds((0, {"work": -1.0}))
    mixed = Schedule((*SEGMENTED, Assignment("j1", "v100", ("v100-0/0",), 9000.0,
                                             9000.0 + 45119 / 20)), PENALTY)
    assert "duplicate" in kinds(mixed)


def test_segment_ended_within_its_restore_did_no_work() -> None:
    # Preempted 4 s into its 10 s restore: no work, and valid; 11 s would be too long.
    restore = Assignment("j1", "k80", ("k80-0/0",), 2500.0, 2504.0, 0.0)
    schedule = Schedule((*SEGMENTED, restore), PENALTY)
    assert check(TINY, schedule) == []
    too_long = dataclasses.replace(restore, finish=2511.0)
    assert kinds(Schedule((*SEGMENTED, too_long), PENALTY)) == ["finish"]


def test_overlap_screen_misses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # The checker sweeps only the GPUs its array screen (_suspects) finds. On run segments
    # whose ends touch, or pass each other by less than, at, or more than the tolerance
    # (1e-6 s plus 1e-6 of the shorter one: 1e-4 s here), at times near 0 and near the Unix
    # epoch, it reports exactly what the sweep over every GPU reports.
    import random

    import hetsched.core.check as checker

    every_gpu = checker._suspects  # replaced below by "every GPU it is given"
    overlapping = 0
    for seed in range(60):
        rng = random.Random(seed)
        base = rng.choice([0.0, EPOCH])
        runs = []
        for job in ("j0", "j1", "j2"):
            gpu_type = rng.choice(["v100", "k80"])
            for _ in range(rng.randint(1, 6)):
                start = base + 100.0 + rng.randrange(0, 8000, 100) + rng.choice(
                    [0.0, 0.0, -5e-7, 5e-7, -2e-6, 2e-6, -5e-5, -2e-4, -30.0])
                length = rng.choice([0.0, 100.0, 100.0, 100.0 + 3e-6, 350.0])
                runs.append(Assignment(job, gpu_type, (f"{gpu_type}-0/0",), start,
                                       start + length, work=1.0))
        instance, schedule = TINY if base == 0.0 else EPOCH_TINY, Schedule(tuple(runs))
        monkeypatch.setattr(checker, "_suspects", every_gpu)
        found = check(instance, schedule, complete=False)
        monkeypatch.setattr(checker, "_suspects",
                            lambda placed: {g for a in placed for g in a.gpus})
        assert found == check(instance, schedule, complete=False), seed
        overlapping += any(v.kind == "overlap" for v in found)
    assert 10 <= overlapping <= 50  # both schedules with overlaps and without were tried
