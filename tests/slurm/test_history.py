"""hetsched.slurm.history.History: what the agent saw, from readings of the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.core.records import Job
from hetsched.files.cluster_spec import parse_cluster
from hetsched.slurm.history import History
from hetsched.slurm.metadata import JobMeta
from hetsched.slurm.state import SlurmJob, Snapshot

NEEDS_SLURM = False  # (tests/slurm/conftest.py)
CLUSTER = parse_cluster("v100=4")
META = JobMeta(Job("a", 0.0, "image-cnn-small", 2, 1e6), origin=1000.0, speedup=1.0,
               restart_penalty_s=0.0)
GPUS = ("v100-0/0", "v100-0/1")


def reading(state: str, held: bool = False, end: float | None = None) -> Snapshot:
    running = state in ("RUNNING", "COMPLETING")
    job = SlurmJob(7, META, state, held, ("v100-0",) if running else (),
                   GPUS if running else (), start_unix=1010.0, end_unix=end)
    return Snapshot(CLUSTER, {"a": job}, frozenset(GPUS if running else ()))


def test_a_job_requeued_as_it_completed_finished_in_its_run(tmp_path: Path) -> None:
    # The agent asks for a requeue at 1019; Slurm shows the job pending and held, then
    # COMPLETED (its script had ended at 1019, before the requeue took): the run is the
    # one it finished in, ending at Slurm's end time (1019 + 0.5, the middle of its
    # second), not a preemption; the journal read back says the same.
    journal = tmp_path / "events.jsonl"
    history = History(journal)
    history.observe(reading("RUNNING"), 1011.0)
    history.preempting("a", 1019.0)
    history.observe(reading("PENDING", held=True), 1019.2)
    assert (history.jobs["a"].runs[-1].end, history.jobs["a"].runs[-1].finished) == (
        1019.0, False)
    history.observe(reading("COMPLETED", end=1019.0), 1019.6)
    run = history.jobs["a"].runs[-1]
    assert (run.start, run.end, run.finished) == (1010.5, 1019.5, True)
    assert history.preemptions() == {"a": 0}
    history.close()
    again = History(journal)
    assert [(r.end, r.finished) for r in again.jobs["a"].runs] == [(1019.5, True)]
    assert again.jobs["a"].ended == "COMPLETED"
    ends = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [e["finished"] for e in ends if e["event"] == "end"] == [False, True]


def test_a_job_started_again_after_its_work_was_done_finished_when_it_was_done(
        tmp_path: Path) -> None:
    # The agent requeued "a" as its emulator completed the work (at 1019 s); Slurm
    # started it again at 1025 s, and the emulator, finding the work done, recorded a run
    # of no length. The job finished at 1019 s (JCT 19 s at speedup 1, origin 1000): the
    # empty run moves neither its finish nor its work, and the checker passes.
    from hetsched.core.check import check
    from hetsched.core.records import Instance
    from hetsched.core.throughput import ThroughputTable
    from hetsched.slurm.checkpoint import Checkpoint, EmulatedRun, checkpoint_path, write_checkpoint

    work, speed = 18_000.0, 1_000.0
    meta = JobMeta(Job("a", 0.0, "cnn", 2, work), origin=1000.0, speedup=1.0,
                   restart_penalty_s=0.0)
    table = ThroughputTable.from_rows([("cnn", "v100", 2, "packed", speed)])
    ran = EmulatedRun(1001.0, 1001.0, 1019.0, ("v100-0",), GPUS, "v100", ("v100",), 2, "packed",
              speed, 0.0, work, "completed")
    again = EmulatedRun(1025.0, 1025.0, 1025.0, ("v100-0",), GPUS, "v100", ("v100",), 2, "packed",
                speed, work, work, "completed", 1, "started after it was done")
    write_checkpoint(checkpoint_path(tmp_path, "7"), Checkpoint(
        "7", "a", work, meta.to_comment(), work, "completed", 1025.0, (ran, again)))
    history = History()
    job = SlurmJob(7, meta, "COMPLETED", False, (), (), start_unix=1025.0, end_unix=1025.0)
    history.observe(Snapshot(CLUSTER, {"a": SlurmJob(7, meta, "RUNNING", False, ("v100-0",),
                                                     GPUS, start_unix=1001.0)},
                             frozenset(GPUS)), 1002.0)
    history.observe(Snapshot(CLUSTER, {"a": job}, frozenset()), 1026.0)
    replay = history.replay(table, checkpoints=tmp_path)
    record = replay.records["a"]
    assert record.finish == 19.0
    assert [s.work for s in record.segments] == [work, 0.0]
    assert check(Instance(CLUSTER, (meta.job,), table), replay.schedule()) == []


@pytest.mark.parametrize("first", ["stopped", "running"])
def test_a_real_jobs_report_gives_steps_and_times_and_the_agent_its_gpus(
        tmp_path: Path, first: str) -> None:
    # A real job reports through hetsched.job: its runs have times and steps but no GPU
    # fields. Run 1 on v100-0/0-1 from 1001 to 1010 did 9,000 steps (1,000 a second);
    # requeued, run 2 on v100-0/2-3 from 1012 to 1021 did the other 9,000. The replay
    # takes each run's GPUs from what the agent saw overlap it, its steps and times from
    # the report (finish 21 s at speedup 1, origin 1000, one preemption), and the
    # independent checker passes it. A first run that ends "running" was killed without
    # a last word (its node lost power): it counts up to its last write (1010 s, 9,000
    # steps), where the second run resumed.
    from hetsched.core.check import check
    from hetsched.core.records import Instance
    from hetsched.core.throughput import ThroughputTable
    from hetsched.job import Checkpoint, RunRecord, checkpoint_path, write_checkpoint

    work, speed = 18_000.0, 1_000.0
    meta = JobMeta(Job("a", 0.0, "cnn", 2, work), origin=1000.0, speedup=1.0,
                   restart_penalty_s=0.0)
    table = ThroughputTable.from_rows([("cnn", "v100", 2, "packed", speed)])

    def run(start: float, end: float, steps: tuple[float, float], state: str,
            restarts: int) -> RunRecord:
        return RunRecord(start, start, end, (), (), "", (), 0, "", 0.0, *steps, state,
                         restarts)

    write_checkpoint(checkpoint_path(tmp_path, "7"), Checkpoint(
        "7", "a", work, meta.to_comment(), work, "completed", 1021.0,
        (run(1001.0, 1010.0, (0.0, 9_000.0), first, 0),
         run(1012.0, 1021.0, (9_000.0, work), "completed", 1))))
    other = ("v100-0/2", "v100-0/3")
    history = History()
    for unix, state, gpus, start in ((1001.2, "RUNNING", GPUS, 1001.0),
                                     (1010.1, "PENDING", (), None),
                                     (1012.3, "RUNNING", other, 1012.0),
                                     (1021.4, "COMPLETED", (), None)):
        job = SlurmJob(7, meta, state, state == "PENDING", ("v100-0",) if gpus else (),
                       gpus, start_unix=start, end_unix=1021.0 if state == "COMPLETED"
                       else None)
        history.observe(Snapshot(CLUSTER, {"a": job}, frozenset(gpus)), unix)
    replay = history.replay(table, checkpoints=tmp_path)
    record = replay.records["a"]
    assert [(s.gpus, s.start, s.finish, s.work) for s in record.segments] == [
        (GPUS, 1.0, 10.0, 9_000.0), (other, 12.0, 21.0, 9_000.0)]
    assert (record.finish, record.preemptions) == (21.0, 1)
    assert record.reported_throughput == 1_000.0  # 18,000 steps in 9 + 9 s of its runs
    assert record.end_state == "completed"
    assert check(Instance(CLUSTER, (meta.job,), table), replay.schedule()) == []
