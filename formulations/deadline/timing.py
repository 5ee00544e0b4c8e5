"""Start ticks of the ``deadline`` model's plans, the primitives its back-ends and the
planner's search share: :func:`left_justify` (fixed modes and GPU sets, in an order)
and :func:`earliest_start` (the earliest gap on a node)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from hetsched.formulations.deadline.problem import DeadlineProblem, Plan


def left_justify(problem: DeadlineProblem, modes: Mapping[str, int],
                 gpus: Mapping[str, tuple[str, ...]], order: list[str]) -> Plan:
    """Start ticks for jobs with fixed modes and GPU sets, taken in ``order``: each as
    early as its release and the GPUs it shares with earlier jobs allow."""
    free: dict[str, int] = defaultdict(int)
    by_id = {data.job.id: data for data in problem.jobs}
    plan: Plan = {}
    for job_id in order:
        data = by_id[job_id]
        mode = data.modes[modes[job_id]]
        start = max([data.release, *(free[g] for g in gpus[job_id])])
        for g in gpus[job_id]:
            free[g] = start + mode.duration
        plan[job_id] = (modes[job_id], start)
    return plan


def earliest_start(release: int, duration: int, need: int, capacity: int,
                   booked: list[tuple[int, int, int]]) -> int:
    """Earliest tick >= ``release`` at which ``need`` of ``capacity`` GPUs are free for
    ``duration`` ticks, given ``booked`` (start, end, GPUs) intervals; gaps may be used."""
    candidates = sorted({release, *(end for _, end, _ in booked if end > release)})
    for start in candidates:
        finish = start + duration
        # Peak use in [start, finish): check at start and at every booking start inside.
        points = [start, *(s for s, _, _ in booked if start < s < finish)]
        if all(sum(c for s, e, c in booked if s <= t < e) + need <= capacity for t in points):
            return start
    raise AssertionError("unreachable: after the last end the node is empty")
