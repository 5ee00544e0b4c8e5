"""Pairs for ``progress-packed``: two whole jobs of one GPU packed on one GPU (space
sharing, as Gavel's ``_packed`` policies and Gandiva pack), each at its measured speed
beside the other (:class:`hetsched.core.sharing.CoLocationModel`).

The round's MILP weighs a pair like any other option (:mod:`hetsched.formulations.progress`):
one GPU of a type, worth the two jobs' shares of remaining work finished per second at
their packed speeds,

    value(a + b, t) = w_a * speed(a, t) * f(a beside b, t) / remaining_a * discount_a
                    + w_b * speed(b, t) * f(b beside a, t) / remaining_b * discount_b,

in the one-option rows of both jobs, so it is chosen only when it is worth more than
what the two jobs (and whoever else needs the GPUs) would get apart: sharing is decided
by the MILP, not by a rule. Only pairs whose factors are both measured on that type and
add up to more than 1 are offered (:meth:`CoLocationModel.combined`: below 1 the two are
better run one after the other); the default factor never prices a pair.

A pair that runs packed now is offered as it runs (*here*: no restart), and each of its
jobs alone elsewhere (a restart); a pair the round drops is preempted when its GPU is
taken. When one of a pair ends (or is preempted), the other runs on alone at full
speed, *here* on its GPU, and a waiting job may *join* it there (an option that takes
no GPU beyond the one the running job holds, and in whose row the running job is, so
worth both packed rates as any pair).

The candidates are the waiting jobs of one GPU that no deadline or rho bound makes
urgent (urgent jobs run alone), at most twice as many as the cluster has GPUs (enough to
fill every GPU twice) and at most :data:`MAX_CANDIDATES`, those of most value per GPU
first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from hetsched.core.records import Job
from hetsched.core.sharing import CoLocationModel
from hetsched.policies.progress_gangs import Option
from hetsched.policies.rolling import ClusterState, RunningJob

__all__ = ["MAX_CANDIDATES", "lone_packed", "pair_options"]

#: The most waiting jobs a round pairs among (their pairs grow with its square: 96 jobs,
#: 4,560 pairs per GPU type).
MAX_CANDIDATES = 96


def _packed_by_gpu(state: ClusterState) -> list[list[RunningJob]]:
    """The packed runs of each GPU that hosts some, in GPU order."""
    by_gpu: dict[str, list[RunningJob]] = {}
    for run in state.running:
        if run.packed:
            by_gpu.setdefault(run.gpus[0], []).append(run)
    return [runs for _, runs in sorted(by_gpu.items())]


def lone_packed(state: ClusterState) -> list[RunningJob]:
    """Packed runs alone on their GPU (a waiting job may join them), in GPU order."""
    return [runs[0] for runs in _packed_by_gpu(state) if len(runs) == 1]


def pair_options(state: ClusterState, singles: Sequence[Option], colocation: CoLocationModel,
                 rate: Callable[[Option], float],
                 speed_of: Callable[[Job, str], float]) -> list[Option]:
    """The pair options of a round (module docstring): ``singles`` are the round's options
    of one job each, ``rate(option)`` what one is worth (the weighted share of remaining
    work per second, a restart's discount included), ``speed_of(job, gpu_type)`` a job's
    predicted steps/s alone on one GPU of a type."""
    waiting = {job.id for job in state.pending}
    urgent = {o.job.id for o in singles if o.urgent}
    one_gpu: dict[str, dict[str, Option]] = {}  # job id -> {type: its option of one GPU}
    best: dict[str, float] = {}
    for option in singles:
        job = option.job
        if job.id not in waiting or job.id in urgent or job.gpu_counts != (1,) or \
                job.gpu_share is not None:
            continue
        if option.size == 1:
            one_gpu.setdefault(job.id, {})[option.gpu_type] = option
        best[job.id] = max(best.get(job.id, 0.0), rate(option) / option.size)
    room = min(2 * len(state.cluster.gpus), MAX_CANDIDATES)
    candidates = sorted(one_gpu, key=lambda j: (-best[j], j))[:room]
    found: list[Option] = []
    for first, a in enumerate(candidates):
        for b in candidates[first + 1:]:
            for gpu_type, mine in one_gpu[a].items():
                theirs = one_gpu[b].get(gpu_type)
                if theirs is None:
                    continue
                pair = _factors(colocation, gpu_type, mine.job, theirs.job)
                if pair is None:
                    continue
                value = rate(mine) * pair[0] + rate(theirs) * pair[1]
                found.append(dataclasses.replace(mine, speed=mine.speed * pair[0],
                                                 partner=theirs.job, pair_value=value))
    for runs in _packed_by_gpu(state):
        if len(runs) != 2:
            continue
        one, two = runs
        pair = (colocation.factor(one.job.job_type, one.gpu_type, [two.job.job_type]),
                colocation.factor(two.job.job_type, two.gpu_type, [one.job.job_type]))
        speeds = speed_of(one.job, one.gpu_type), speed_of(two.job, two.gpu_type)
        if min(speeds) <= 0 or min(one.remaining, two.remaining) <= 0:
            continue
        value = sum(run.job.weight * speed * factor / run.remaining
                    for run, speed, factor in zip(runs, speeds, pair, strict=True))
        found.append(Option(one.job, one.gpu_type, 1, speeds[0] * pair[0], one.remaining,
                            False, True, partner=two.job, pair_value=value))
    for run in lone_packed(state):
        alone = speed_of(run.job, run.gpu_type)
        if alone <= 0 or run.remaining <= 0:
            continue
        for b in candidates:
            theirs = one_gpu[b].get(run.gpu_type)
            if theirs is None:
                continue
            pair = _factors(colocation, run.gpu_type, theirs.job, run.job)
            if pair is None:
                continue
            value = rate(theirs) * pair[0] + run.job.weight * alone * pair[1] / run.remaining
            found.append(dataclasses.replace(
                theirs, size=0, speed=theirs.speed * pair[0], partner=run.job,
                pair_value=value, joins=run.gpus[0]))
    return found


def _factors(colocation: CoLocationModel, gpu_type: str, job: Job, other: Job
             ) -> tuple[float, float] | None:
    """The measured speed factors of ``job`` beside ``other`` and of ``other`` beside
    ``job`` on one GPU of ``gpu_type``, when they add up to more than 1; else ``None``."""
    combined = colocation.combined(gpu_type, job.job_type, other.job_type)
    if combined is None or combined <= 1.0:
        return None
    return (colocation.pairs[(gpu_type, job.job_type, other.job_type)],
            colocation.pairs[(gpu_type, other.job_type, job.job_type)])
