"""Hypothesis properties of the checker and the simulator.

The checker: every single-field corruption of a valid schedule (a static FIFO schedule
and a replay's run segments with preemptions) is flagged. The simulator: on random
instances under every baseline policy, what ran passes the checker (so no GPU is used by
two jobs at once and every job does exactly its work), no GPU is double-booked by a
direct sweep, and GPU-seconds are conserved between the job records and the segments.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched.core.check import check
from hetsched.core.records import Instance
from hetsched.core.result import Assignment, Schedule
from hetsched.files.instance import load_instance
from hetsched.policies.fifo import fifo_schedule
from hetsched.replaying import rolling_policy
from hetsched.simulate.simulator import Simulator
from tests.helpers import INSTANCES, random_instance

SMALL = load_instance(INSTANCES / "small.json")
#: A static schedule: every job run whole.
STATIC = fifo_schedule(SMALL)
#: Run segments: SRTF on small.json preempts (penalty 30 s).
SEGMENTED = Simulator(SMALL.cluster, SMALL.jobs, rolling_policy("srtf"),
                      truth=SMALL.throughput).run().schedule()
FIELDS = ("job", "gpu_type", "gpus-unknown", "gpus-repeated", "start", "finish", "work")
#: Shifts (s; x 100 steps for ``work``) beyond the checker's tolerance, either way: it
#: allows 1e-6 s plus 1e-6 of the durations involved (at most 0.1 s in small.json).
SHIFTS = st.sampled_from([-500.0, -1.0, -0.5, 0.5, 1.0, 500.0])


def corrupt(a: Assignment, field: str, shift: float, instance: Instance) -> Assignment | None:
    """``a`` with one field made wrong, or ``None`` if the field does not apply."""
    if field == "job":
        return dataclasses.replace(a, job=a.job + "-x")
    if field == "gpu_type":
        other = next(t for t in instance.cluster.type_names if t != a.gpu_type)
        return dataclasses.replace(a, gpu_type=other)
    if field == "gpus-unknown":
        return dataclasses.replace(a, gpus=(*a.gpus[:-1], "no-such-gpu"))
    if field == "gpus-repeated":
        return dataclasses.replace(a, gpus=(*a.gpus[:-1], a.gpus[0])) if len(a.gpus) > 1 \
            else dataclasses.replace(a, gpus=(a.gpus[0], a.gpus[0]))
    if field == "start":
        return dataclasses.replace(a, start=a.start + shift)
    if field == "finish":
        return dataclasses.replace(a, finish=a.finish + shift)
    if a.work is None:
        return None
    return dataclasses.replace(a, work=a.work + 100 * shift)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(segmented=st.booleans(), index=st.integers(0, 10_000), field=st.sampled_from(FIELDS),
       shift=SHIFTS)
def test_every_single_field_corruption_is_flagged(segmented: bool, index: int, field: str,
                                                  shift: float) -> None:
    schedule = SEGMENTED if segmented else STATIC
    assert check(SMALL, schedule) == []
    rows = list(schedule)
    k = index % len(rows)
    changed = corrupt(rows[k], field, shift, SMALL)
    if changed is None:  # ``work`` of a job run whole: nothing to corrupt
        return
    rows[k] = changed
    bad = Schedule(tuple(rows), schedule.restart_penalty_s)
    assert check(SMALL, bad), f"{field} of {rows[k].job} shifted by {shift} passed"


POLICIES = ("fifo", "sjf", "srtf", "edf", "tiresias", "gandiva", "gavel", "optimus",
            "srtf-agnostic")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 8), policy=st.sampled_from(POLICIES),
       penalty=st.sampled_from([0.0, 7.5, 30.0]))
def test_replays_pass_the_checker_and_conserve_gpu_seconds(seed: int, jobs: int, policy: str,
                                                           penalty: float) -> None:
    instance = random_instance(seed, jobs=jobs)
    replay = Simulator(instance.cluster, instance.jobs, rolling_policy(policy),
                       truth=instance.throughput, restart_penalty_s=penalty).run()
    schedule = replay.schedule()
    assert check(instance, schedule) == []
    # No GPU double-booked, swept directly rather than through the checker.
    by_gpu: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for a in schedule:
        for gpu in a.gpus:
            by_gpu[gpu].append((a.start, a.finish))
    for intervals in by_gpu.values():
        intervals.sort()
        assert all(b[0] >= a[1] - 1e-6 for a, b in itertools.pairwise(intervals))
    # GPU-seconds: what the records charged equals what the segments held.
    held = sum((a.finish - a.start) * len(a.gpus) for a in schedule)
    charged = sum(r.gpu_seconds for r in replay.records.values())
    assert charged == pytest.approx(held, rel=1e-9)
    assert len(schedule) == jobs + replay.summary()["preemptions"]
