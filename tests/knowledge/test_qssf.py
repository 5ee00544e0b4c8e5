"""QSSF (hetsched.policies.baselines.duration.QuasiShortestServiceFirst, Helios): waiting
jobs in order of predicted GPU time (predicted duration x GPUs), where SJF orders by
predicted duration; under ``--knowledge estimate`` the prediction is the history's, the
owner's past jobs of the type."""

from __future__ import annotations

import csv
import io

import pytest

from hetsched.core.records import Job
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.replaying import replay

#: type m: 1 step/s on one V100, 2 on two
TABLE = ThroughputTable({("m", "v100", 1, Placement.PACKED): 1.0,
                         ("m", "v100", 2, Placement.PACKED): 2.0})


def started(jobs: list[Job], cluster: str, policy: str, knowledge: str = "truth"
            ) -> list[tuple[str, float, float]]:
    """(job, start, finish) from the replay's jobs.csv, in order of start (then job)."""
    result = replay(jobs, parse_cluster(cluster), policy, throughput=TABLE,
                    knowledge=knowledge)
    rows = csv.DictReader(io.StringIO(result.replay.files()["jobs.csv"]))
    return sorted(((r["job"], float(r["start"]), float(r["finish"])) for r in rows),
                  key=lambda row: (row[1], row[0]))


#: On two V100s (one node) "long" takes both GPUs from 0 to 100 s (200 steps at 2/s);
#: at 1 s three jobs arrive: a, 2 GPUs for 60 s (120 steps at 2/s: 120 GPU-s); b, 1 GPU
#: for 80 s (80 GPU-s); c, 1 GPU for 90 s (90 GPU-s).
GANGS = [Job("long", 0.0, "m", 2, 200.0), Job("a", 1.0, "m", 2, 120.0),
         Job("b", 1.0, "m", 1, 80.0), Job("c", 1.0, "m", 1, 90.0)]


def test_qssf_orders_by_gpu_time_where_sjf_orders_by_duration() -> None:
    # SJF at 100 s: a is the shortest (60 s): it takes both GPUs, 100-160; then b and c
    # side by side, 160-240 and 160-250.
    assert started(GANGS, "v100=2", "sjf") == [
        ("long", 0.0, 100.0), ("a", 100.0, 160.0), ("b", 160.0, 240.0),
        ("c", 160.0, 250.0)]
    # QSSF at 100 s: b (80 GPU-s) and c (90) before a (120): b 100-180, c 100-190; a
    # needs both GPUs: 190-250.
    assert started(GANGS, "v100=2", "qssf") == [
        ("long", 0.0, 100.0), ("b", 100.0, 180.0), ("c", 100.0, 190.0),
        ("a", 190.0, 250.0)]


@pytest.mark.parametrize("knowledge", ["estimate", "none"])
def test_qssf_on_the_prior_orders_by_gpus(knowledge: str) -> None:
    # Nothing finished before 100 s: every job is guessed at the prior, one hour of ideal
    # time; QSSF ranks the 1-GPU jobs (3,600 GPU-s) before a (7,200): the same order as
    # the truth's here. SJF sees three equal durations: arrival, then id: a first.
    assert started(GANGS, "v100=2", "qssf", knowledge) == [
        ("long", 0.0, 100.0), ("b", 100.0, 180.0), ("c", 100.0, 190.0),
        ("a", 190.0, 250.0)]
    assert started(GANGS, "v100=2", "sjf", knowledge) == [
        ("long", 0.0, 100.0), ("a", 100.0, 160.0), ("b", 160.0, 240.0),
        ("c", 160.0, 250.0)]


#: On one V100: F's f0 (10 s) and S's s0 (40 s) arrive at 0 and run 0-10, 10-50 (on the
#: prior both are one hour: arrival, then id); B's blocker runs 60-160; at 70 F's f1
#: (500 s) and S's s1 (50 s) arrive and wait for it.
HISTORY = [Job("f0", 0.0, "m", 1, 10.0, user="F"), Job("s0", 0.0, "m", 1, 40.0, user="S"),
           Job("blocker", 60.0, "m", 1, 100.0, user="B"),
           Job("f1", 70.0, "m", 1, 500.0, user="F"), Job("s1", 70.0, "m", 1, 50.0, user="S")]


def test_qssf_on_estimates_trusts_the_owners_history() -> None:
    first = [("f0", 0.0, 10.0), ("s0", 10.0, 50.0), ("blocker", 60.0, 160.0)]
    # the truth: s1 (50 GPU-s) before f1 (500): s1 160-210, f1 210-710
    assert started(HISTORY, "v100=1", "qssf") == [
        *first, ("s1", 160.0, 210.0), ("f1", 210.0, 710.0)]
    # the estimates: F's jobs took 10 s, S's 40 s: f1 is guessed 10 GPU-s, s1 40, so f1
    # goes first, 160-660, and s1 waits for it, 660-710
    assert started(HISTORY, "v100=1", "qssf", "estimate") == [
        *first, ("f1", 160.0, 660.0), ("s1", 660.0, 710.0)]
