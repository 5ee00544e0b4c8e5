"""The jobs as a policy sees them when it may not know the future
(``ReplaySettings.knowledge``; docs/knowledge.md).

Under ``truth`` a policy sees each job's true work (no view is made: the replay is the
one it always was). Under ``estimate`` and ``none`` the simulator keeps the truth (it
advances jobs, checks and measures with it) and shows the policy a :class:`KnowledgeView`:

* at its arrival each job is given a guessed total work ``E`` (steps): its estimator's
  guess of its ideal duration (:mod:`hetsched.knowledge.estimators`) times its fastest
  speed at its requested GPU count in the policy's model;
* a job that has done ``d`` steps is shown with ``work`` = ``T(d)`` = ``max(E, 2 d)``
  and remaining work (``ClusterState.remaining``, ``RunningJob.remaining``)
  ``T(d) - d = max(E - d, d)``: the guess, less what was done, until the job has done
  half of it; from then on as long again as it has run (a job's remaining time is never
  guessed near zero, where a shortest-remaining-first rule would put it first and then,
  past its guess, last; and the longer a job of heavy-tailed durations has run, the
  longer it is expected to run). (The other rules tried, docs/knowledge.md: the guess
  doubled when passed, and re-guessing from the finished jobs that ran longer, their mean
  or their Gittins rank, did worse or no better);
* the steps a job has done are what a real cluster sees (the job's own reports, or its
  time at its measured speed); nothing else of the truth is shown.

The estimator learns each job's true ideal duration only when it finishes
(:meth:`KnowledgeView.finished`, called at the completion), so an estimate uses no
job's future and never the job's own work. :meth:`KnowledgeView.accuracy` reports how
good the guesses at arrival were.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping
from statistics import median

from hetsched.allocation.layout import SpeedView
from hetsched.core.errors import InputError
from hetsched.core.ranges import MAX_WORK
from hetsched.core.records import Cluster, Job
from hetsched.core.settings import KNOWLEDGE
from hetsched.core.throughput import ThroughputModel
from hetsched.knowledge.estimators import (
    LEVELS,
    ConstantPrior,
    DurationEstimator,
    HistoryEstimator,
    Level,
)

__all__ = ["KNOWLEDGE", "KnowledgeView", "knowledge_view"]

#: the least work a guess shows (steps): Job records need work > 0
MIN_GUESS = 1e-6


def knowledge_view(knowledge: str, cluster: Cluster, model: ThroughputModel
                   ) -> KnowledgeView | None:
    """The view for a ``knowledge`` setting (None for ``truth``: the policy sees the
    jobs)."""
    if knowledge == "truth":
        return None
    if knowledge == "estimate":
        return KnowledgeView(cluster, model, HistoryEstimator())
    if knowledge == "none":
        return KnowledgeView(cluster, model, ConstantPrior())
    raise InputError("unknown knowledge setting", path="knowledge", value=knowledge,
                     expected=" or ".join(KNOWLEDGE))


class KnowledgeView:
    """Each job as a policy may know it (see the module): a guess made at its arrival
    from an estimator told of each finished job, or twice what the job did once that
    is more."""

    def __init__(self, cluster: Cluster, model: ThroughputModel,
                 estimator: DurationEstimator) -> None:
        self.speeds = SpeedView(cluster, model)
        self.estimator = estimator
        #: the guessed work at arrival (steps) of every job that arrived
        self.guessed: dict[str, float] = {}
        #: the history each guess came from
        self.levels: dict[str, Level] = {}
        #: (guess at arrival, true work) of every job, for :meth:`accuracy`
        self._pairs: dict[str, tuple[float, float]] = {}
        #: the job shown for each job id, and the total it shows
        self._shown: dict[str, Job] = {}

    @property
    def setting(self) -> str:
        """The ``knowledge`` setting this view serves."""
        return "none" if isinstance(self.estimator, ConstantPrior) else "estimate"

    def arrived(self, job: Job, *, work_known: bool = True) -> Job:
        """``job`` arrives: guess its work from what finished before now; the job as the
        policy sees it. ``work_known`` False: the job's record does not hold its work
        (a live job that does not say it): it is learned when the job finishes."""
        ideal_s, level = self.estimator.estimate(job)
        guess = min(MAX_WORK, max(MIN_GUESS, ideal_s * self._speed(job)))
        self.guessed[job.id] = guess
        self.levels[job.id] = level
        self._pairs[job.id] = (guess, job.work if work_known else math.nan)
        return self.shown(job, 0.0)

    def _speed(self, job: Job) -> float:
        """The steps/s that turn ``job``'s ideal seconds into steps: its fastest at its
        requested GPU count in the policy's model, else its best at any count it allows,
        else 1 (never its own work: a guess may not read it)."""
        return self.speeds.fastest(job) or self.speeds.best(job) or 1.0

    def total(self, job_id: str, done: float) -> float:
        """The total work shown for a job that has done ``done`` steps: its guess, or
        twice ``done`` once that is more (at most :data:`MAX_WORK`)."""
        return min(max(self.guessed[job_id], 2.0 * done), MAX_WORK)

    def remaining(self, job_id: str, done: float) -> float:
        """The work left as shown for a job that has done ``done`` steps (> 0)."""
        return max(self.total(job_id, done) - done, MIN_GUESS)

    def shown(self, job: Job, done: float) -> Job:
        """``job`` (the true record) as the policy sees it after ``done`` steps: the same
        record with ``work`` the shown total (one object per total)."""
        total = self.total(job.id, done)
        seen = self._shown.get(job.id)
        if seen is None or seen.work != total:
            seen = self._shown[job.id] = dataclasses.replace(job, work=total)
        return seen

    def seen(self, job: Job, done: float) -> tuple[Job, float]:
        """``job`` (the true record) after ``done`` steps as the policy sees it, and its
        work left as shown: :meth:`shown` and :meth:`remaining` together."""
        return self.shown(job, done), self.remaining(job.id, done)

    def finished(self, job: Job) -> None:
        """``job`` (the true record: its work the steps it did) finished: the estimator
        learns its ideal duration."""
        self.estimator.learn(job, job.work / self._speed(job))
        self._shown.pop(job.id, None)
        if job.id in self._pairs:
            self._pairs[job.id] = (self._pairs[job.id][0], job.work)

    def accuracy(self) -> dict[str, object]:
        """How good the guesses at arrival were: jobs, the median and p90 of
        ``|guess / truth - 1|``, the shares guessed under and over, the median ratio
        guess / truth, and how many guesses each history level gave (the jobs whose work
        is known: not a live job that does not say it and did not finish)."""
        pairs = [(guess, truth) for guess, truth in self._pairs.values()
                 if not math.isnan(truth)]
        errors = sorted(abs(guess / truth - 1) for guess, truth in pairs)
        ratios = [guess / truth for guess, truth in pairs]
        count = len(errors)
        levels: Mapping[str, int] = Counter(self.levels.values())
        return {
            "setting": self.setting, "estimator": self.estimator.name, "jobs": count,
            "median_abs_error": median(errors) if errors else None,
            "p90_abs_error": errors[min(count - 1, math.ceil(0.9 * count) - 1)]
            if errors else None,
            "under": sum(r < 1 for r in ratios) / count if count else None,
            "over": sum(r > 1 for r in ratios) / count if count else None,
            "median_ratio": median(ratios) if ratios else None,
            "levels": {level: levels[level] for level in LEVELS if levels.get(level)},
        }
