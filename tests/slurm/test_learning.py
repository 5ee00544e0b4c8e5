"""hetsched.slurm.learning.Reports: a job's progress from its own report, and throughputs
learned from its runs as they go, each stretch once."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetsched.core.records import Job
from hetsched.core.throughput import Placement, ThroughputTable
from hetsched.files.cluster_spec import parse_cluster
from hetsched.job import Checkpoint, RunRecord, checkpoint_path, write_checkpoint
from hetsched.slurm.history import History
from hetsched.slurm.learning import Reports
from hetsched.slurm.metadata import JobMeta
from hetsched.slurm.state import SlurmJob, Snapshot
from hetsched.speeds.learned import LearnedThroughput

NEEDS_SLURM = False  # (tests/slurm/conftest.py)
CLUSTER = parse_cluster("v100=4")
GPUS = ("v100-0/0", "v100-0/1")
WORK = 100_000.0
META = JobMeta(Job("a", 0.0, "new-type", 2, WORK), origin=1000.0, speedup=1.0,
               restart_penalty_s=0.0)


def seen_running() -> History:
    """A history that saw job a (Slurm 7) start on GPUS at 1001 (trace 1 s)."""
    history = History()
    job = SlurmJob(7, META, "RUNNING", False, ("v100-0",), GPUS, start_unix=1001.0)
    history.observe(Snapshot(CLUSTER, {"a": job}, frozenset(GPUS)), 1001.2)
    return history


def report(folder: Path, end: float, steps: float, *, real: bool = False) -> None:
    """Job a's report: one run from 1001 (resumed at once), ``steps`` done by ``end``;
    the emulator's GPU fields, or none (a real job's)."""
    run = RunRecord(1001.0, 1001.0, end, (), (), "", (), 0, "", 0.0, 0.0, steps, "running") \
        if real else RunRecord(1001.0, 1001.0, end, ("v100-0",), GPUS, "v100", ("v100",), 2,
                               "packed", 1000.0, 0.0, steps, "running")
    write_checkpoint(checkpoint_path(folder, "7"), Checkpoint(
        "7", "a", WORK, META.to_comment(), steps, "running", end, (run,)))


@pytest.mark.parametrize("real", [False, True])
def test_each_stretch_of_a_run_is_learned_once(tmp_path: Path, real: bool) -> None:
    # The run reports 5,000 steps at 1006 and 12,500 at 1011: two stretches of 5 s, at
    # 1,000 and 1,500 steps/s; learned as one run of 12,500 steps in 10 s, 1,250/s (a
    # stretch read twice would weigh more). A real job's run (no GPU fields) is learned
    # on the GPUs the agent saw it hold.
    history = seen_running()
    reports = Reports(tmp_path, LearnedThroughput(None, ["v100"]))
    report(tmp_path, 1006.0, 5_000.0, real=real)
    assert reports.read(history, CLUSTER) == 1
    assert reports.read(history, CLUSTER) == 0  # unchanged: not read again
    report(tmp_path, 1011.0, 12_500.0, real=real)
    assert reports.read(history, CLUSTER) == 1
    assert reports.learned is not None
    assert reports.learned.measured("new-type", "v100", 2, Placement.PACKED) == 1_250.0


def test_progress_comes_from_the_report_then_the_model_since_it(tmp_path: Path) -> None:
    # Without a report, the history predicts from the run it saw (from 1001.5, Slurm's
    # whole second taken at its middle): at trace 8 s (Unix 1008) with a model of 3,000
    # steps/s, 6.5 s of it: 80,500 left. Reported 5,000 steps at 1006, the model adds
    # only the 2 s since the report: 100,000 - 5,000 - 6,000 = 89,000; at 1,000 steps/s
    # 93,000.
    history = seen_running()
    fast = ThroughputTable.from_rows([("new-type", "v100", 2, "packed", 3_000.0)])
    reports = Reports(tmp_path)
    job = META.job
    assert reports.remaining(job, 8.0, history, fast, CLUSTER) == WORK - 3_000.0 * 6.5
    report(tmp_path, 1006.0, 5_000.0)
    reports.read(history, CLUSTER)
    assert reports.remaining(job, 8.0, history, fast, CLUSTER) == WORK - 5_000.0 - 6_000.0
    slow = ThroughputTable.from_rows([("new-type", "v100", 2, "packed", 1_000.0)])
    assert reports.remaining(job, 8.0, history, slow, CLUSTER) == WORK - 7_000.0


def test_the_policy_sees_a_frozen_table_with_a_never_seen_type_bootstrapped(
        tmp_path: Path) -> None:
    # Before any run, the prior (one job type, 2,000 steps/s on 2 V100s) gives the new
    # type its median: 2,000. After the run, the table has the measured 1,000; the same
    # table is returned while nothing new is learned.
    prior = ThroughputTable.from_rows([("known", "v100", 2, "packed", 2_000.0),
                                       ("known", "v100", 1, "packed", 1_100.0)])
    reports = Reports(tmp_path, LearnedThroughput(prior, ["v100"]))
    before = reports.policy_model([META.job], CLUSTER)
    assert before.throughput("new-type", "v100", 2, Placement.PACKED) == 2_000.0
    assert reports.policy_model([META.job], CLUSTER) is before
    history = seen_running()
    report(tmp_path, 1006.0, 5_000.0)
    reports.read(history, CLUSTER)
    after = reports.policy_model([META.job], CLUSTER)
    assert after.throughput("new-type", "v100", 2, Placement.PACKED) == 1_000.0
