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
    room = capacity - need
    if sum(c for _, _, c in booked) <= room:  # even all bookings at once leave room
        return release
    # Use is a step function that changes only where a booking starts or ends: one sweep
    # over the changes gives its value from each such point on; the peak over
    # [start, finish) is the largest value at the points in that span (and at ``start``,
    # which is one of them). Bookings over by the release do not matter.
    change: dict[int, int] = {release: 0}
    ends = set()
    for s, e, c in booked:
        if e > release:
            change[s] = change.get(s, 0) + c
            change[e] = change.get(e, 0) - c
            ends.add(e)
    points = sorted(change)
    use = []
    level = 0
    for t in points:
        level += change[t]
        use.append(level)
    for first, start in enumerate(points):
        if start < release or (start != release and start not in ends):
            continue  # the candidate starts: the release and the booking ends after it
        finish = start + duration
        index = first
        while index < len(points) and points[index] < finish and use[index] <= room:
            index += 1
        if index == len(points) or points[index] >= finish:
            return start
    raise AssertionError("unreachable: after the last end the node is empty")
