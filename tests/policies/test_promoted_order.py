"""Optimus' promoted jobs kept in serving order from decision to decision
(hetsched.policies.baselines.optimus_steps.PromotedOrder) walk exactly as sorting the
promoted waiting jobs by (arrival, id) at every decision does."""

from __future__ import annotations

import random

from hetsched.core.records import Job
from hetsched.policies.baselines.optimus_steps import PromotedOrder


def test_promoted_order_is_the_sorted_promoted_waiting_jobs() -> None:
    rng = random.Random(7)
    # arrivals with ties (then the id decides)
    jobs = {f"j{i:03d}": Job(f"j{i:03d}", float(rng.randrange(0, 40)), "t", 1, 10.0)
            for i in range(120)}
    waiting: dict[str, Job] = {}
    promoted: set[str] = set()
    order = PromotedOrder()
    walked = 0
    for _ in range(400):
        # jobs arrive, start, finish; waiting jobs get promoted (as the guard does)
        for job_id in rng.sample(sorted(jobs), 6):
            if job_id in waiting:
                del waiting[job_id]  # started (a promoted one stays promoted while it runs)
                if rng.random() < 0.5:
                    promoted.discard(job_id)  # finished
            else:
                waiting[job_id] = jobs[job_id]
        promoted |= set(rng.sample(sorted(waiting), min(3, len(waiting))))
        order.follow(promoted, waiting)
        started = set(rng.sample(sorted(waiting), min(2, len(waiting))))
        expected = sorted((waiting[j] for j in promoted if j in waiting and j not in started),
                          key=lambda job: (job.arrival, job.id))
        assert list(order.jobs(waiting, started)) == expected
        walked += len(expected)
    assert walked > 1000  # long walks were compared, not empty ones
