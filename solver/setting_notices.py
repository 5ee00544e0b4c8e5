"""Settings of a replay that cannot change it: each is said once, in the log and in
summary.json's ``warnings``, so that an option is never dropped in silence. A setting the
replay cannot take at all (``--elastic`` with a format without batch sizes, ``--partitions``
with a policy that has no LP to split) is refused where it is read, with exit 2; here are
those a replay can run with but that change nothing: a policy that ignores them, a trace
they do not apply to, jobs they cannot touch.

Each line names the setting as :class:`~hetsched.core.settings.ReplaySettings` and a sweep
spec call it and as the option that sets it (``colocation_factor (--colocation-factor)``),
its value, and why it does not apply. What a policy can use is read off its registry entry
(:class:`hetsched.registry.Entry`: its back-ends, ``elastic``, ``for_elastic``), or, for
a class of yours, off its constructor's arguments; a policy given as an object is not
looked into.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hetsched.core.records import Job
from hetsched.core.settings import DECISION_LIMIT, ReplaySettings
from hetsched.core.sharing import DEFAULT_COLOCATION_FACTOR

if TYPE_CHECKING:
    from hetsched.files.replay_inputs import ReplayInputs
    from hetsched.files.traces import Trace

__all__ = ["READING_FIELDS", "is_notice", "job_notices", "object_notices", "policy_notices",
           "round_notices", "say", "seed_notices", "trace_notices"]

log = logging.getLogger(__name__)

#: The fields of :class:`ReplaySettings` that say how a trace file is read: they do not
#: apply to jobs given as objects (:func:`hetsched.replay`).
READING_FIELDS = ("limit_jobs", "on_bad_row", "deadline_fraction", "reference_gpu",
                  "gpu_aliases", "unknown_gpus", "gpu_sharing", "elastic")

#: The trace formats whose jobs may ask for a share of one GPU (openb's ``gpu_milli``, a
#: native trace's ``gpu_share``).
SHARE_FORMATS = ("openb", "native")


def _named(field: str, value: object) -> str:
    """``colocation_factor (--colocation-factor) 1e-300``: a setting as the settings and
    the command name it, and its value."""
    flag = "--" + field.removesuffix("_s").replace("_", "-")
    flag = {"--gpu-aliases": "--gpu-alias", "--deterministic": "--wall-clock"}.get(flag, flag)
    if field == "gpu_sharing" and value is False:
        flag = "--no-gpu-sharing"
    return f"{field} ({flag}) {value}"


def policy_notices(settings: ReplaySettings, policy: str) -> list[str]:
    """What ``settings`` set that the policy called ``policy`` does not use: a back-end
    it does not have (it runs with its first), a solver limit or the wall clock for a
    policy that solves no model, elastic jobs for a policy that does not choose GPU
    counts."""
    from hetsched.registry import entry, takes

    found = entry(policy)
    notes: list[str] = []
    if found.plugin:  # a class of yours: what its constructor takes
        for field, default in (("backend", None), ("time_limit_s", DECISION_LIMIT),
                               ("deterministic", True)):
            value = getattr(settings, field)
            if value != default and not takes(policy, field):
                notes.append(f"{_named(field, value)} does not apply: the constructor of "
                             f"policy {policy} takes no {field}")
        return notes
    if settings.backend is not None and settings.backend not in found.backends:
        notes.append(f"{_named('backend', settings.backend)} does not apply: policy "
                     f"{policy} " + (f"has the back-ends {', '.join(found.backends)}; it "
                                     f"ran with {found.backends[0]}" if found.backends
                                     else "solves no model"))
    if not found.backends:
        if settings.time_limit_s != DECISION_LIMIT:
            notes.append(f"{_named('time_limit_s', settings.time_limit_s)} does not apply: "
                         f"policy {policy} solves no model")
        if not settings.deterministic:
            notes.append(f"{_named('deterministic', False)} does not apply: policy "
                         f"{policy} solves no model")
    if settings.elastic and not found.elastic:
        notes.append(f"{_named('elastic', True)} does not apply: policy {policy} does not "
                     "choose GPU counts; each elastic job ran on the count it asked for "
                     "(policies that do: " + ", ".join(_elastic_policies()) + ")")
    return notes


#: The trace formats whose rows name every job's type and work: their reader draws
#: nothing with the seed but synthetic deadlines.
GIVEN_FORMATS = ("gavel", "native", "pollux", "sia")


def seed_notices(settings: ReplaySettings, policy: str, trace_format: str) -> list[str]:
    """A seed that draws nothing: the trace names every job's type and work
    (:data:`GIVEN_FORMATS`), no synthetic deadline is drawn, and the policy takes no seed
    (a rolling policy is given none; a model re-solved at each decision, or a class of
    yours whose constructor takes ``seed``, is)."""
    from hetsched.registry import entry, takes

    if settings.seed == 0 or settings.deadline_fraction or trace_format not in GIVEN_FORMATS:
        return []
    found = entry(policy)
    if found.policy is None or (found.plugin and takes(policy, "seed")):
        return []
    return [f"{_named('seed', settings.seed)} does not apply: the {trace_format} trace names "
            "every job's type and work, no synthetic deadline is drawn "
            f"(--deadline-fraction), and policy {policy} takes no seed"]


def round_notices(settings: ReplaySettings, policy: str, round_s: float | None) -> list[str]:
    """A decision interval (``interval_s``) that adds no decision point: a multiple of the
    policy's own round (``round_s``), whose boundaries lie on the same grid."""
    interval = settings.interval_s
    if interval is None or round_s is None or round_s <= 0:
        return []
    multiple = interval / round_s
    if abs(multiple - round(multiple)) > 1e-9 * max(1.0, multiple):
        return []
    return [f"{_named('interval_s', interval)} does not apply: policy {policy} decides every "
            f"{round_s:g} s already (its round), on the same grid"]


def _elastic_policies() -> list[str]:
    from hetsched.registry import ENTRIES

    return [name for name, found in ENTRIES.items() if found.elastic]


def _packing_policies() -> list[str]:
    from hetsched.registry import ENTRIES

    return [name for name, found in ENTRIES.items() if found.packs]


def job_notices(settings: ReplaySettings, policy: str | None, jobs: Sequence[Job], *,
                pairs: Path | None = None) -> list[str]:
    """What ``settings`` set that the jobs cannot use: a co-location factor where no job
    asks for a share of a GPU (the policies that pack whole jobs pack only measured
    pairs, docs/traces.md), the packed speed of spread gangs where every job runs on one
    GPU; co-location pairs measured on their own (``pairs``, the file) where no job shares
    a GPU and the policy packs none; and a policy (``policy``, a registered name) made for
    elastic jobs where none is."""
    from hetsched.registry import entry

    notes: list[str] = []
    shares = any(job.gpu_share is not None for job in jobs)
    found = entry(policy) if policy is not None else None
    if pairs is not None and not shares and found is not None and not found.plugin \
            and not found.packs:
        notes.append(f"{_named('pairs', pairs)} does not apply: no job asks for a share of a "
                     f"GPU and policy {policy} packs no jobs (policies that do: "
                     + ", ".join(_packing_policies()) + ")")
    if settings.colocation_factor != DEFAULT_COLOCATION_FACTOR and not shares:
        notes.append(f"{_named('colocation_factor', settings.colocation_factor)} does not "
                     "apply: no job asks for a share of a GPU (openb's gpu_milli), and the "
                     "policies that pack whole jobs pack only pairs measured both ways")
    if settings.spread_speed == "packed" and all(max(job.gpu_counts) == 1 for job in jobs):
        notes.append(f"{_named('spread_speed', 'packed')} does not apply: every job runs on "
                     "one GPU (no gang to spread over servers)")
    if found is not None and found.for_elastic and not any(
            len(job.gpu_counts) > 1 for job in jobs):
        notes.append(f"policy {policy} is made for elastic jobs and no job is elastic: it "
                     "ran rigid jobs (elastic (--elastic) with --format pollux or sia, or "
                     "allowed_gpu_counts in a native trace, makes them elastic)")
    return notes


def trace_notices(settings: ReplaySettings, inputs: ReplayInputs, trace: Trace) -> list[str]:
    """What ``settings`` set that reading the trace of ``inputs`` did not use: a reference
    GPU for a format whose work is not a duration measured on a GPU, GPU aliases of types
    the cluster lacks, a job limit above the trace's jobs, synthetic deadlines where every
    job has its own (or none was drawn), a JCT window past the last job, GPU sharing off
    where no job asks for a share (or its format keeps shares)."""
    notes: list[str] = []
    jobs = trace.jobs
    if settings.reference_gpu is not None and trace.reference_gpu is None:
        notes.append(f"{_named('reference_gpu', settings.reference_gpu)} does not apply: "
                     f"the {inputs.trace_format} trace gives each job's work, not a "
                     "duration measured on a GPU")
    unused = [name for name in settings.gpu_aliases if name not in inputs.aliases]
    if unused:
        notes.append(f"{_named('gpu_aliases', ','.join(unused))} does not apply: the "
                     "cluster has no GPU type " + ", ".join(unused) + " (its types: "
                     + ", ".join(inputs.cluster.type_names) + ")")
    if settings.limit_jobs is not None and "beyond limit_jobs" not in trace.excluded:
        notes.append(f"{_named('limit_jobs', settings.limit_jobs)} does not apply: the "
                     f"trace has {len(jobs):,} jobs to replay")
    if settings.deadline_fraction:
        notes += _deadline_notices(settings, inputs, jobs)
    if settings.jct_window is not None and settings.jct_window[0] >= len(jobs):
        low, high = settings.jct_window
        notes.append(f"{_named('jct_window', f'{low}:{high}')} does not apply: the trace "
                     f"has {len(jobs):,} jobs (ranks 0 to {len(jobs) - 1:,})")
    if not settings.gpu_sharing:
        if any(job.gpu_share is not None for job in jobs):
            notes.append(f"{_named('gpu_sharing', False)} does not apply to the "
                         f"{inputs.trace_format} format: its jobs keep their gpu_share")
        elif inputs.trace_format not in SHARE_FORMATS or not any(
                "GPU sharing off" in note for note in trace.notes):
            notes.append(f"{_named('gpu_sharing', False)} does not apply: no job of the "
                         f"{inputs.trace_format} trace asks for a share of a GPU")
    return notes


def _deadline_notices(settings: ReplaySettings, inputs: ReplayInputs,
                      jobs: Sequence[Job]) -> list[str]:
    """Synthetic deadlines (``deadline_fraction``) that no job received: every job has a
    deadline of its own (an SLO), or the draw picked none."""
    with_deadline = sum(job.deadline is not None for job in jobs)
    named = _named("deadline_fraction", settings.deadline_fraction)
    if not with_deadline:
        return [f"{named} does not apply: the draw gave none of the {len(jobs):,} jobs a "
                "deadline"]
    if with_deadline < len(jobs):
        return []
    from hetsched.files.replay_inputs import read_jobs

    # Every job has a deadline: read again without synthetic ones to tell whose are theirs
    # (only then, and only a trace whose every job has one).
    own = read_jobs(inputs, settings.replace(deadline_fraction=None)).jobs
    if sum(job.deadline is not None for job in own) == with_deadline:
        return [f"{named} does not apply: every job of the {inputs.trace_format} trace has "
                "a deadline of its own (its SLO)"]
    return []


def object_notices(settings: ReplaySettings) -> list[str]:
    """The fields of ``settings`` that say how a trace is read (:data:`READING_FIELDS`)
    and the JCT window, set to other than their defaults: they do not apply to jobs
    given as objects (:func:`hetsched.replay`; :func:`hetsched.replay_trace` reads a
    trace with them)."""
    default = ReplaySettings()
    return [f"{_named(field, getattr(settings, field))} does not apply: the jobs are given "
            "as objects, not read from a trace (hetsched.replay_trace reads one)"
            for field in (*READING_FIELDS, "jct_window")
            if getattr(settings, field) != getattr(default, field)]


def is_notice(line: str) -> bool:
    """Whether a line of a summary's ``warnings`` is one of this module's (not a fallback
    note)."""
    return " does not apply" in line or " is made for elastic jobs and no job is" in line


def say(notes: Sequence[str]) -> tuple[str, ...]:
    """Log each of ``notes`` as a warning; the notes, for summary.json's ``warnings``."""
    for note in notes:
        log.warning("%s", note)
    return tuple(notes)
