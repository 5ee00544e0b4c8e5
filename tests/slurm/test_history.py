"""hetsched.slurm.history.History: what the agent saw, from readings of the cluster."""

from __future__ import annotations

import json
from pathlib import Path

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
