"""How many jobs each active job has shared the cluster with so far, as a policy sees it.

Finish-time fairness (:mod:`hetsched.core.fairness`) compares a job's completion time
with its time on 1/N of the cluster, N the time average of the number of active jobs
over the job's life. A policy that wants to keep rho bounded needs that N while the job
still runs: :class:`ContentionClock` integrates the number of active jobs over time from
what the policy is told (each decision's running and waiting jobs, and each finish), so
that ``average(job, now)`` is the time average from the job's arrival to ``now``.

Between two calls the count is the one of the earlier call: exact when the policy is
called at every arrival and finish (a replay calls ``decide`` at every arrival, where
the new job waits, and ``on_finished`` at every finish).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable


class ContentionClock:
    """The time integral of the number of active jobs (see the module)."""

    def __init__(self) -> None:
        self._active: set[str] = set()
        self._times: list[float] = []  # when the count changed (or was read), increasing
        self._integrals: list[float] = []  # the integral of the count up to _times[i]
        self._counts: list[int] = []  # the count from _times[i] on

    def _advance(self, now: float) -> None:
        """Close the running segment at ``now``."""
        if self._times and now <= self._times[-1]:
            self._counts[-1] = len(self._active)
            return
        integral = self._integrals[-1] + self._counts[-1] * (now - self._times[-1]) \
            if self._times else 0.0
        self._times.append(now)
        self._integrals.append(integral)
        self._counts.append(len(self._active))

    def seen(self, now: float, active: Iterable[str]) -> None:
        """The jobs active at ``now`` (running or waiting): a decision's state."""
        self._active = set(active)
        self._advance(now)

    def finished(self, job_id: str, now: float) -> None:
        """``job_id`` finished at ``now``."""
        self._active.discard(job_id)
        self._advance(now)

    def integral(self, when: float) -> float:
        """The integral of the active count from the first call to ``when``."""
        if not self._times or when <= self._times[0]:
            return 0.0
        i = bisect.bisect_right(self._times, when) - 1
        return self._integrals[i] + self._counts[i] * (when - self._times[i])

    def average(self, arrival: float, now: float) -> float:
        """The time average of the number of active jobs from ``arrival`` to ``now`` (at
        least 1: the job itself); at ``now == arrival``, the count now."""
        if now <= arrival:
            return float(max(1, self._counts[-1] if self._counts else 1))
        return max(1.0, (self.integral(now) - self.integral(arrival)) / (now - arrival))

    def forget_before(self, when: float) -> None:
        """Drop what no active job needs: the history before ``when`` (the earliest
        arrival of an active job), keeping the segment that holds it."""
        keep = max(0, bisect.bisect_right(self._times, when) - 1)
        if keep:
            del self._times[:keep], self._integrals[:keep], self._counts[:keep]
