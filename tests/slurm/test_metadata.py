"""The job metadata in Slurm's --comment (hetsched.slurm.metadata): its exact text, the
round trip, and every bad field named by its JSON path. No Slurm needed."""

from __future__ import annotations

import json

import pytest

from hetsched.core.errors import InputError
from hetsched.core.records import Job
from hetsched.slurm.metadata import (
    HIDDEN_WORK,
    MAX_COMMENT_CHARS,
    JobMeta,
    is_emulated,
    is_managed,
)

NEEDS_SLURM = False

ORIGIN = 1_795_742_878.5


def _meta(**job_fields: object) -> JobMeta:
    job = Job(**{"id": "j7", "arrival": 120.0, "job_type": "resnet50", "num_gpus": 2,
                 "work": 5000.0, **job_fields})  # type: ignore[arg-type]
    return JobMeta(job, ORIGIN, 60.0, 30.0)


def _comment(fields: dict[str, object] | None = None, **top: object) -> str:
    """A comment of the metadata of ``_meta()`` with job ``fields`` and ``top`` keys
    replaced (a value of ``...`` removes the key)."""
    document = json.loads(_meta().to_comment().removeprefix("hetsched "))
    document["job"].update(fields or {})
    document.update(top)
    for part in (document, document["job"]):
        if not isinstance(part, dict):
            continue
        for key in [key for key, value in part.items() if value is ...]:
            del part[key]
    return "hetsched " + json.dumps(document)


def test_the_comment_is_the_prefix_and_compact_json() -> None:
    assert _meta().to_comment() == (
        'hetsched {"v":1,"job":{"id":"j7","arrival":120.0,"job_type":"resnet50",'
        '"num_gpus":2,"work":5000.0},"origin":1795742878.5,"speedup":60.0,'
        '"restart_penalty_s":30.0}')


def test_every_field_round_trips() -> None:
    meta = _meta(deadline=900.5, weight=2.0, user="alice", tenant="vision",
                 allowed_gpu_types=("v100", "k80"), allowed_gpu_counts=(1, 2, 4))
    comment = meta.to_comment()
    assert '"allowed_gpu_counts":[1,2,4]' in comment
    assert '"allowed_gpu_types":["v100","k80"]' in comment
    assert JobMeta.from_comment(comment) == meta
    assert is_managed(comment)
    assert is_emulated(comment)


def test_weight_one_is_left_out_and_read_as_one() -> None:
    assert '"weight"' not in _meta(weight=1.0).to_comment()
    assert JobMeta.from_comment(_meta().to_comment()).job.weight == 1.0


def test_a_job_slurm_schedules_has_its_own_prefix_and_is_not_managed() -> None:
    meta = JobMeta(_meta().job, ORIGIN, 60.0, 30.0, slurm_schedules=True)
    comment = meta.to_comment()
    assert comment.startswith('hetsched-slurm {"v":1,')
    assert not is_managed(comment)
    assert is_emulated(comment)
    assert JobMeta.from_comment(comment) == meta


def test_trace_and_unix_times() -> None:
    meta = _meta()
    assert meta.trace_time(ORIGIN + 2.0) == 120.0  # 2 wall s at 60 trace s per wall s
    assert meta.unix_time(120.0) == ORIGIN + 2.0
    assert meta.unix_time(meta.trace_time(ORIGIN + 7.25)) == pytest.approx(ORIGIN + 7.25)


@pytest.mark.parametrize("comment", [None, "", "hetsched-test", '{"hetsched": 1}',
                                     "hetschedule me", "Hetsched {}", "user's job"])
def test_other_comments_are_not_managed(comment: str | None) -> None:
    assert not is_managed(comment)
    assert not is_emulated(comment)


@pytest.mark.parametrize(("comment", "path", "expected"), [
    ("hetsched-test", "comment", "'hetsched ' or 'hetsched-slurm ' and a JSON object"),
    ("hetsched {not json", "comment", "one JSON object after the prefix"),
    ("hetsched [1, 2]", "comment", '{"v": 1'),
    (_comment(v=2), "comment.v", "1"),
    (_comment(v=...), "comment.v", "fields v, job"),
    (_comment(extra=1), "comment.extra", "one of v, job"),
    (_comment(origin=-5), "comment.origin", "a Unix time in s"),
    (_comment(origin="now"), "comment.origin", "a Unix time in s"),
    (_comment(speedup=0), "comment.speedup", "> 0"),
    (_comment(speedup=float("inf")), "comment.speedup", "> 0"),
    (_comment(restart_penalty_s=-1), "comment.restart_penalty_s", "seconds from 0"),
    (_comment(job=[1]), "comment.job", "the job's fields"),
    (_comment({"id": ...}), "comment.job.id", "fields id, arrival"),
    (_comment({"id": 7}), "comment.job.id", None),
    (_comment({"arrival": -1.0}), "comment.job.arrival", "a time in s"),
    (_comment({"job_type": ""}), "comment.job.job_type", None),
    (_comment({"num_gpus": 0}), "comment.job.num_gpus", "an integer from 1"),
    (_comment({"num_gpus": 2.5}), "comment.job.num_gpus", "an integer from 1"),
    (_comment({"num_gpus": True}), "comment.job.num_gpus", "an integer from 1"),
    (_comment({"work": 0}), "comment.job.work", "a number of steps > 0"),
    (_comment({"deadline": 100.0}), "comment.job.deadline", "after the arrival"),
    (_comment({"weight": 0}), "comment.job.weight", "a weight from"),
    (_comment({"user": 5}), "comment.job.user", None),
    (_comment({"allowed_gpu_types": "v100"}), "comment.job.allowed_gpu_types", "a JSON list"),
    (_comment({"allowed_gpu_types": []}), "comment.job.allowed_gpu_types", "at least one"),
    (_comment({"allowed_gpu_counts": [1, 4]}), "comment.job.allowed_gpu_counts",
     "contains 2"),
    (_comment({"allowed_gpu_counts": [2, 0]}), "comment.job.allowed_gpu_counts[1]",
     "an integer from 1"),
    (_comment({"gpu_share": 0.5}), "comment.job.gpu_share", "one of id, arrival"),
])
def test_bad_metadata_names_its_path(comment: str, path: str, expected: str | None) -> None:
    with pytest.raises(InputError) as raised:
        JobMeta.from_comment(comment)
    assert raised.value.path == path, str(raised.value)
    if expected is not None:
        assert expected in (raised.value.expected or ""), str(raised.value)


def test_the_value_found_is_in_the_message() -> None:
    with pytest.raises(InputError, match=r"comment\.job\.num_gpus: bad num_gpus \(got 0; "
                       r"expected an integer from 1 to \d+\)"):
        JobMeta.from_comment(_comment({"num_gpus": 0}))


def test_a_comment_slurm_would_refuse_is_an_error() -> None:
    long_id = "x" * 900
    with pytest.raises(InputError, match="too long for Slurm's --comment") as raised:
        _meta(id=long_id).to_comment()
    assert raised.value.path == f"job {long_id}"
    assert len(_meta(id="x" * 700).to_comment()) <= MAX_COMMENT_CHARS


def test_a_comment_may_leave_the_work_out() -> None:
    # The job does not say how long it trains: the comment has no "work" and, read back,
    # says so (work_hidden) with a record of HIDDEN_WORK steps, which the agent never
    # shows; a comment with its work reads as before.
    hidden = JobMeta(_meta().job, ORIGIN, 60.0, 30.0, work_hidden=True)
    text = hidden.to_comment()
    assert '"work"' not in text
    assert json.loads(text.removeprefix("hetsched ")) == json.loads(
        _comment({"work": ...}).removeprefix("hetsched "))  # the same, less the one field
    read = JobMeta.from_comment(text)
    assert (read.work_hidden, read.job.work) == (True, HIDDEN_WORK)
    assert read.job.id == "j7"
    assert read.to_comment() == text
    assert not JobMeta.from_comment(_meta().to_comment()).work_hidden
    with pytest.raises(InputError, match=r"comment\.job\.work"):
        JobMeta.from_comment(_comment({"work": None}))
