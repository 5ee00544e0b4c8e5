"""The metadata a job hetsched manages carries in Slurm's ``--comment`` (docs/slurm.md,
"Job metadata"): what the agent schedules it by and what the training emulator runs.

The comment is a prefix, one space and one compact JSON object::

    hetsched {"v":1,"job":{"id":"j7","arrival":120.0,"job_type":"resnet50","num_gpus":2,
              "work":5000.0},"origin":1795742878.6,"speedup":60.0,"restart_penalty_s":30.0}

* ``v``: the format's version, 1.
* ``job``: the fields of :class:`hetsched.core.records.Job` as in a native trace:
  ``id``, ``arrival`` (trace s), ``job_type``, ``num_gpus``, ``work`` (steps), and when
  set ``deadline`` (trace s), ``weight`` (when not 1), ``user``, ``tenant``,
  ``allowed_gpu_types``, ``allowed_gpu_counts`` (JSON lists). ``work`` may be left out:
  a job that does not say how long it trains (``work_hidden``; ``submit --hide-work``).
  The agent then schedules it on a guess (docs/slurm.md, "Jobs that do not say their
  steps"), and its job record holds :data:`HIDDEN_WORK` steps, which nothing shows.
* ``origin``: the Unix time (s) trace time 0 maps to.
* ``speedup`` X: trace seconds per wall second, ``trace_time = (unix_time - origin) * X``.
* ``restart_penalty_s``: the restart penalty in trace seconds (wall: divided by X).

The prefix says who schedules the job: ``hetsched`` (:data:`PREFIX`), the agent;
``hetsched-slurm`` (:data:`SLURM_PREFIX`), Slurm's own scheduler (``hetsched slurm
submit --slurm-schedules``): the emulator runs such a job as any other, and
:func:`is_managed` is False for it, so an agent leaves it alone. Slurm refuses a comment
of more than 1,024 characters ("Pathname ... too long"); :meth:`JobMeta.to_comment`
keeps it under :data:`MAX_COMMENT_CHARS`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_WORK, in_range
from hetsched.core.records import Job
from hetsched.core.settings import check_restart_penalty

#: The format's version (``v``).
VERSION = 1
#: The comment of a job the agent schedules starts with this (and one space).
PREFIX = "hetsched"
#: The comment of a job Slurm's own scheduler places (``submit --slurm-schedules``).
SLURM_PREFIX = "hetsched-slurm"
#: The longest comment written: Slurm 22.05 refuses more than 1,024 characters.
MAX_COMMENT_CHARS = 1000
#: The largest speedup (trace seconds per wall second) taken.
MAX_SPEEDUP = 1e6
#: Origins are Unix times from 0 to this (the year 5138).
MAX_UNIX_TIME_S = 1e11

#: The work of the job record of a job whose metadata leaves ``work`` out (its steps are
#: its own; the agent guesses them): the most a job record takes, so that its steps left
#: less its steps done is the work it did.
HIDDEN_WORK = MAX_WORK

#: The Job fields the metadata carries, in this order; the rest are left out.
_REQUIRED = ("id", "arrival", "job_type", "num_gpus")
_OPTIONAL = ("work", "deadline", "weight", "user", "tenant", "allowed_gpu_types",
             "allowed_gpu_counts")
_LISTS = ("allowed_gpu_types", "allowed_gpu_counts")
_TOP = ("v", "job", "origin", "speedup", "restart_penalty_s")
#: Top-level fields a comment may leave out.
_TOP_OPTIONAL = ("trace",)


def is_managed(comment: str | None) -> bool:
    """Whether a job's comment marks it as one the hetsched agent schedules (it starts
    with ``"hetsched "``; not ``"hetsched-slurm "``, a job Slurm schedules)."""
    return bool(comment) and str(comment).startswith(PREFIX + " ")


def is_emulated(comment: str | None) -> bool:
    """Whether a comment is hetsched metadata of either kind (the agent's or Slurm's)."""
    text = str(comment or "")
    return text.startswith((PREFIX + " ", SLURM_PREFIX + " "))


@dataclass(frozen=True)
class JobMeta:
    """A managed job's metadata: the job (trace times, steps), the Unix time of trace
    time 0 (``origin``, s), the time compression (``speedup``: trace s per wall s), the
    restart penalty (trace s), whether Slurm's own scheduler places it, the name of
    the trace file it came from (``trace``; "" when it came from none), which the agent's
    summary.json records so that ``hetsched compare`` sets it beside the trace's replay,
    and whether the comment leaves the job's work out (``work_hidden``: the comment has no
    ``work``; read from such a comment, ``job.work`` is :data:`HIDDEN_WORK`)."""

    job: Job
    origin: float
    speedup: float
    restart_penalty_s: float
    slurm_schedules: bool = False
    trace: str = ""
    work_hidden: bool = False

    def __post_init__(self) -> None:
        _check_number(self.origin, "origin", "a Unix time in s", 0.0, MAX_UNIX_TIME_S)
        _check_number(self.speedup, "speedup", f"trace s per wall s, > 0 and at most "
                      f"{MAX_SPEEDUP:g}", 0.0, MAX_SPEEDUP, strict_low=True)
        try:
            check_restart_penalty(self.restart_penalty_s)
        except InputError as error:
            raise InputError(error.problem, path="comment.restart_penalty_s",
                             value=error.value, expected=error.expected) from None

    def trace_time(self, unix_s: float) -> float:
        """The trace time (s) of Unix time ``unix_s``: ``(unix_s - origin) * speedup``."""
        return (unix_s - self.origin) * self.speedup

    def unix_time(self, trace_s: float) -> float:
        """The Unix time (s) of trace time ``trace_s``: ``origin + trace_s / speedup``."""
        return self.origin + trace_s / self.speedup

    def to_comment(self) -> str:
        """The ``--comment`` text: the prefix, a space, compact JSON; an InputError if it
        would be longer than :data:`MAX_COMMENT_CHARS`."""
        job = self.job
        fields: dict[str, Any] = {name: getattr(job, name) for name in _REQUIRED}
        for name in _OPTIONAL:
            value = getattr(job, name)
            if value is None or (name == "weight" and value == 1.0) or (
                    name == "work" and self.work_hidden):
                continue
            fields[name] = list(value) if name in _LISTS else value
        document = {"v": VERSION, "job": fields, "origin": self.origin,
                    "speedup": self.speedup, "restart_penalty_s": self.restart_penalty_s,
                    **({"trace": self.trace} if self.trace else {})}
        prefix = SLURM_PREFIX if self.slurm_schedules else PREFIX
        text = f"{prefix} {json.dumps(document, separators=(',', ':'))}"
        if len(text) > MAX_COMMENT_CHARS:
            raise InputError("job metadata too long for Slurm's --comment",
                             path=f"job {job.id}", value=f"{len(text)} characters",
                             expected=f"at most {MAX_COMMENT_CHARS} (Slurm takes 1,024): "
                             "shorter ids, fewer allowed GPU types or counts")
        return text

    @classmethod
    def from_comment(cls, text: str) -> JobMeta:
        """The metadata in a job's comment; an InputError naming the JSON path
        (``comment.job.num_gpus``), the value and what was expected if it is bad."""
        if not isinstance(text, str):
            raise InputError("not a comment", path="comment", value=text,
                             expected="text")
        prefix, _, body = text.partition(" ")
        if prefix not in (PREFIX, SLURM_PREFIX) or not body:
            raise InputError("not hetsched job metadata", path="comment", value=text,
                             expected=f"'{PREFIX} ' or '{SLURM_PREFIX} ' and a JSON object")
        try:
            document = json.loads(body)
        except ValueError as exc:
            raise InputError(f"not JSON ({exc})", path="comment", value=body,
                             expected="one JSON object after the prefix") from None
        if not isinstance(document, dict):
            raise InputError("not a JSON object", path="comment", value=document,
                             expected='{"v": 1, "job": {...}, ...}')
        _check_keys(document, _TOP, _TOP + _TOP_OPTIONAL, "comment")
        trace = document.get("trace", "")
        if not isinstance(trace, str):
            raise InputError("bad trace", path="comment.trace", value=trace,
                             expected="the trace file's name, text")
        if document["v"] != VERSION or isinstance(document["v"], bool):
            raise InputError("unknown metadata version", path="comment.v",
                             value=document["v"], expected=str(VERSION))
        job = _job(document["job"])
        return cls(job, document["origin"], document["speedup"],
                   document["restart_penalty_s"], slurm_schedules=prefix == SLURM_PREFIX,
                   trace=trace, work_hidden="work" not in document["job"])


def _job(fields: Any) -> Job:
    """The Job of the metadata's ``job`` object, checked by Job itself."""
    path = "comment.job"
    if not isinstance(fields, dict):
        raise InputError("not a JSON object", path=path, value=fields,
                         expected="the job's fields")
    _check_keys(fields, _REQUIRED, _REQUIRED + _OPTIONAL, path)
    arguments = {"work": HIDDEN_WORK, **fields}
    for name in _LISTS:
        if name in arguments:
            if not isinstance(arguments[name], list):
                raise InputError(f"bad {name}", path=f"{path}.{name}", value=arguments[name],
                                 expected="a JSON list")
            arguments[name] = tuple(arguments[name])
    try:
        return Job(**arguments)
    except InputError as error:
        raise error.at(path) from None


def _check_keys(document: dict[str, Any], required: tuple[str, ...],
                allowed: tuple[str, ...], path: str) -> None:
    missing = [key for key in required if key not in document]
    if missing:
        raise InputError("missing field", path=f"{path}.{missing[0]}",
                         expected="fields " + ", ".join(required))
    unknown = [key for key in document if key not in allowed]
    if unknown:
        raise InputError("unknown field", path=f"{path}.{unknown[0]}",
                         value=document[unknown[0]], expected="one of " + ", ".join(allowed))


def _check_number(value: Any, name: str, expected: str, low: float, high: float, *,
                  strict_low: bool = False) -> None:
    if not in_range(value, low, high, strict_low=strict_low):
        raise InputError(f"bad {name}", path=f"comment.{name}", value=value,
                         expected=expected)
