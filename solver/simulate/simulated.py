"""A rolling policy as a static planner: the simulator run on one instance.

``hetsched solve small.json --model srtf`` replays the instance's jobs under SRTF from
``now`` (a job that arrived earlier is released at ``now``) and returns what ran as a
:class:`~hetsched.core.result.Result`: a schedule of run segments, preemptions and restart
penalties included, which :func:`hetsched.core.check.check` verifies like any other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from hetsched.core.records import Instance
from hetsched.core.result import Result, Status
from hetsched.core.settings import RESTART_PENALTY_S
from hetsched.formulations.options import SolveOptions
from hetsched.policies.rolling import RollingPolicy
from hetsched.simulate.record import Replay
from hetsched.simulate.simulator import Simulator


def simulate_instance(instance: Instance, policy: RollingPolicy,
                      restart_penalty_s: float = RESTART_PENALTY_S) -> Replay:
    """``policy`` run by the simulator on every job of ``instance`` (measured at its
    throughput) from ``instance.now``: a job that arrived earlier is released at ``now``.
    A Ctrl-C raises :class:`KeyboardInterrupt` (a static solve keeps no partial run), a
    failure of the policy its :class:`~hetsched.core.errors.PolicyError`."""
    now = instance.now
    jobs = [job if job.arrival >= now else dataclasses.replace(job, arrival=now)
            for job in instance.jobs]
    replay = Simulator(instance.cluster, jobs, policy, truth=instance.throughput,
                       restart_penalty_s=restart_penalty_s).run()
    if replay.failure is not None:
        raise replay.failure
    if replay.interrupted:
        raise KeyboardInterrupt
    return replay


class Simulated:
    """The static planner of the rolling policy ``make(options)`` makes, called ``name``
    (a heuristic: status FEASIBLE, no bound; the objective is total weighted completion
    time, s). ``restart_penalty_s``: time without progress after each restart."""

    default_time_limit_s: float | None = None
    replan_preemptive = False

    def __init__(self, name: str, make: Callable[[SolveOptions], RollingPolicy], *,
                 backends: tuple[str, ...] = (),
                 restart_penalty_s: float = RESTART_PENALTY_S) -> None:
        self.name = name
        self.make = make
        self.backends = backends
        self.restart_penalty_s = restart_penalty_s

    def solve(self, instance: Instance, options: SolveOptions) -> Result:
        """Simulate the policy on every job of ``instance`` until all are done."""
        replay = simulate_instance(instance, self.make(options), self.restart_penalty_s)
        schedule = replay.schedule()
        finish: dict[str, float] = {}
        for a in schedule:
            finish[a.job] = max(a.finish, finish.get(a.job, a.finish))
        given = instance.job_by_id
        objective = sum(given[job].weight * (end - given[job].arrival)
                        for job, end in finish.items())
        summary = replay.summary()
        return Result(Status.FEASIBLE, objective, None, 0.0, schedule, self.name, extra={
            "preemptions": summary["preemptions"], "decisions": summary["decisions"],
            "fallbacks": summary["fallbacks"], "restart_penalty_s": self.restart_penalty_s})

    def unrunnable(self, instance: Instance) -> dict[str, str]:
        """None: the simulator runs every job the instance accepts."""
        return {}
