"""Your own rolling policy, in 25 lines: smallest gang first, with backfilling.

At every arrival and completion, start the waiting jobs in order of GPU count (then
arrival), each on the first free GPUs that run it (first fit), skipping those that do
not fit now. Run it like a built-in policy (docs/policies.md, "Your own policy"):

    hetsched replay ../shared/data/gavel/traces/ee9e8c.trace --format gavel \\
        --cluster v100=36,p100=36,k80=36 --policy examples/my_policy.py:MyPolicy \\
        --limit-jobs 100 --out /tmp/m
"""

from __future__ import annotations

from hetsched.policy_api import ClusterState, Decision, PolicyHooks, Start


class MyPolicy(PolicyHooks):  # PolicyHooks: the protocol's optional hooks, defaulted
    """Smallest gang first, backfilling: never preempts, never waits for a big gang."""

    name = "smallest-gang-first"
    round_s = None  # no rounds: called at arrivals and completions while jobs wait

    def decide(self, state: ClusterState) -> Decision:
        """Start what fits now, smallest gangs first."""
        free = state.pool()  # a working copy of the free GPUs (shares, CPUs, memory too)
        starts: list[Start] = []
        for job in sorted(state.pending, key=lambda job: (job.num_gpus, job.arrival)):
            chosen = free.first_fit(job, job.num_gpus, state.throughput)
            if chosen is not None:  # None: no free GPUs of a type that runs it
                starts.append(chosen)
                free.take(chosen.gpus, job)
        return Decision(start=tuple(starts))
