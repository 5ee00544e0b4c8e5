"""How long a job will take, guessed from what a scheduler can see when it arrives
(docs/knowledge.md): the jobs already finished, the job's owner (its user, else its
tenant), job type and GPU count. Durations are *ideal seconds*: a job's steps over its
fastest speed at its requested GPU count in the model the policy sees (so jobs of
different types and sizes are comparable, and a guess converts back to steps for the
job at hand).

:class:`HistoryEstimator` is QSSF's rule (Hu et al., "Characterization and Prediction of
Deep Learning Workloads in Large-Scale GPU Datacenters", SC'21; HeliosArtifact's
``framework/QSSF Service/estimators/estimator.py``, ``NaiveEstimator``): the duration of
the owner's finished jobs of the same job name (here: job type), of the same GPU count
where there are any; else of every owner's jobs of that name; else the owner's jobs of
any name; else every finished job. Helios matches names by similarity (``difflib``); job
types here are exact names, so the match is exact. Helios takes the group's mean (its
code offers the median too); here the geometric mean, as durations are heavy-tailed: on
Philly's first 20,000 jobs the mean's guesses are off by a median 219 %, the geometric
mean's by 79 %, and ``qssf``'s average JCT falls from 116,794 s to 103,455 s
(docs/knowledge.md). Before anything has finished, and in the ``none`` setting always,
the guess is :data:`PRIOR_S`.

An estimator never sees a job's own work or a job that has not finished: it is told of a
finished job (:meth:`HistoryEstimator.learn`) by the simulator at its completion, and
asked (:meth:`HistoryEstimator.estimate`) at an arrival, in time order.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Literal, Protocol

from hetsched.core.records import Job

__all__ = ["LEVELS", "PRIOR_S", "ConstantPrior", "DurationEstimator", "HistoryEstimator",
           "Level"]

#: the guess with nothing to go on: one hour of ideal time (Philly's median job is 1,144 s,
#: its mean 29,000 s; any constant serves, since it is the same for every job)
PRIOR_S = 3600.0

Level = Literal["owner-type-gpus", "owner-type", "type", "owner", "all", "prior"]
#: the shortest ideal duration a history counts (s): a job of 0 steps counts as this
MIN_DURATION_S = 1e-3
#: the history an estimate came from, most specific first
LEVELS: tuple[Level, ...] = ("owner-type-gpus", "owner-type", "type", "owner", "all", "prior")


class DurationEstimator(Protocol):
    """Guesses a job's ideal duration (s) from the jobs finished before it arrived."""

    name: str

    def estimate(self, job: Job) -> tuple[float, Level]:
        """The job's guessed ideal duration (s) and the history it came from."""

    def learn(self, job: Job, ideal_s: float) -> None:
        """A job finished after ``ideal_s`` ideal seconds of work."""


def owner(job: Job) -> str | None:
    """Whose job it is, as history groups it: its user, else its tenant (None: nobody's)."""
    return job.user if job.user is not None else job.tenant


class _GeometricMeans:
    """Running geometric means of positive values by key: one (count, sum of logs) per
    key, O(1) to add to or ask."""

    def __init__(self) -> None:
        self._sums: dict[Hashable, tuple[int, float]] = {}

    def add(self, key: Hashable, value: float) -> None:
        count, total = self._sums.get(key, (0, 0.0))
        self._sums[key] = (count + 1, total + math.log(max(value, MIN_DURATION_S)))

    def mean(self, key: Hashable) -> float | None:
        found = self._sums.get(key)
        return None if found is None else math.exp(found[1] / found[0])


class HistoryEstimator:
    """QSSF's history rule (see the module): the geometric mean ideal duration of the
    most specific group of finished jobs that has any, in the order of :data:`LEVELS`."""

    name = "history"

    def __init__(self, prior_s: float = PRIOR_S) -> None:
        self.prior_s = prior_s
        self._means = _GeometricMeans()
        #: finished jobs learned from
        self.learned = 0

    @staticmethod
    def _keys(job: Job) -> list[tuple[Level, Hashable]]:
        """The groups ``job`` belongs to, most specific first."""
        who = owner(job)
        keys: list[tuple[Level, Hashable]] = []
        if who is not None:
            keys += [("owner-type-gpus", ("otg", who, job.job_type, job.num_gpus)),
                     ("owner-type", ("ot", who, job.job_type))]
        keys.append(("type", ("t", job.job_type)))
        if who is not None:
            keys.append(("owner", ("o", who)))
        keys.append(("all", ("all",)))
        return keys

    def estimate(self, job: Job) -> tuple[float, Level]:
        """The geometric mean over the first level with history (see the class)."""
        for level, key in self._keys(job):
            found = self._means.mean(key)
            if found is not None:
                return found, level
        return self.prior_s, "prior"

    def learn(self, job: Job, ideal_s: float) -> None:
        """Add a finished job to every group it belongs to."""
        for _, key in self._keys(job):
            self._means.add(key, ideal_s)
        self.learned += 1


class ConstantPrior:
    """Nothing known of any job: every one is guessed at ``prior_s`` ideal seconds (the
    ``none`` setting, where only a job's attained service tells jobs apart)."""

    name = "none"

    def __init__(self, prior_s: float = PRIOR_S) -> None:
        self.prior_s = prior_s

    def estimate(self, job: Job) -> tuple[float, Level]:
        """:attr:`prior_s`, for every job."""
        return self.prior_s, "prior"

    def learn(self, job: Job, ideal_s: float) -> None:
        """Nothing is learned."""
