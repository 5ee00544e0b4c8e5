"""hetsched.slurm.recovery.Recovery's rules, one reading at a time, on a recording cluster
(the real daemons: tests/slurm/test_agent_faults.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hetsched.core.records import Job
from hetsched.files.cluster_spec import parse_cluster
from hetsched.slurm.history import History
from hetsched.slurm.metadata import JobMeta
from hetsched.slurm.recovery import MAX_RETRIES, Recovery
from hetsched.slurm.state import SlurmJob, Snapshot

NEEDS_SLURM = False  # (tests/slurm/conftest.py)
CLUSTER = parse_cluster("v100=8")
META = JobMeta(Job("a", 0.0, "cnn", 2, 1e6), origin=1000.0, speedup=1.0,
               restart_penalty_s=0.0)
GPUS = ("v100-0/0", "v100-0/1")


class Recording:
    """A LiveCluster that records the fault operations asked of it."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def read(self) -> Snapshot:
        raise NotImplementedError

    def start(self, job: str, nodes: Sequence[str], gpus: Sequence[int]) -> None:
        self.asked.append(("start", job))

    def preempt(self, job: str) -> None:
        self.asked.append(("preempt", job))

    def handed_over(self, jobs: Sequence[str]) -> None:
        pass

    def hold(self, job: str) -> None:
        self.asked.append(("hold", job))

    def retry(self, job: str) -> None:
        self.asked.append(("retry", job))


def ran_then(state: str, unusable: frozenset[str] = frozenset(), held: bool = False,
             nodes: tuple[str, ...] = ()) -> tuple[Recovery, Recording, Snapshot]:
    """A recovery whose history saw job a run on v100-0, and a reading of it ``state``."""
    history = History()
    running = SlurmJob(7, META, "RUNNING", False, ("v100-0",), GPUS, start_unix=1001.0)
    history.observe(Snapshot(CLUSTER, {"a": running}, frozenset(GPUS)), 1001.2)
    live = Recording()
    now = SlurmJob(7, META, state, held, nodes, (), start_unix=1001.0,
                   end_unix=1010.0 if state != "PENDING" else None, restarts=1)
    return Recovery(live, history), live, Snapshot(CLUSTER, {"a": now}, frozenset(),
                                                   unusable_nodes=unusable)


@pytest.mark.parametrize(("state", "unusable", "last_run", "retried"), [
    ("NODE_FAIL", frozenset(), "running", True),  # its node failed: always
    ("FAILED", frozenset({"v100-0"}), "running", True),  # failed with its node down
    ("FAILED", frozenset(), "stopped", True),  # stopped cleanly, then not launched
    ("FAILED", frozenset(), "failed", False),  # its own error, on a healthy node
    ("FAILED", frozenset(), "refused", True),  # cannot run on those GPUs: placed anew
    ("FAILED", frozenset(), "", False),  # no report: its own error
    ("COMPLETED", frozenset({"v100-0"}), "completed", False),  # never run again
    ("CANCELLED", frozenset(), "stopped", False),  # someone cancelled it
])
def test_which_ended_jobs_are_requeued(state: str, unusable: frozenset[str], last_run: str,
                                       retried: bool) -> None:
    recovery, live, snapshot = ran_then(state, unusable)
    if last_run:
        recovery.last_run = {"a": last_run}
    assert recovery.mend(snapshot, 1011.0) is retried
    assert live.asked == ([("retry", "a")] if retried else [])
    if retried:  # its run ended at Slurm's end time (+0.5 s), not finished
        assert recovery.history.jobs["a"].asked_preempt == 1010.5
        figure = "requeued_after_refusal" if last_run == "refused" else \
            "requeued_after_node_failure"
        assert recovery.figures()[figure] == 1
        assert sum(recovery.figures().values()) == 1


def test_a_node_seen_down_recently_counts_and_retries_stop_at_the_limit() -> None:
    # v100-0 was seen down at 1005; at 1011 it is back, and the job FAILED: it failed with
    # its node (within RECENT_S). Each reading retries once more, up to MAX_RETRIES.
    recovery, live, snapshot = ran_then("FAILED")
    recovery.mend(Snapshot(CLUSTER, {}, frozenset(), unusable_nodes=frozenset({"v100-0"})),
                  1005.0)
    for _ in range(MAX_RETRIES + 2):
        recovery.mend(snapshot, 1011.0)
    assert live.asked == [("retry", "a")] * MAX_RETRIES


def test_a_pending_released_job_is_held_unless_this_agent_released_it() -> None:
    recovery, live, snapshot = ran_then("PENDING", nodes=("v100-0",))
    assert recovery.mend(snapshot, 1011.0)  # requeued by someone else: held
    recovery, live, snapshot = ran_then("PENDING", nodes=("v100-0",))
    recovery.history.starting("a", 1010.0)  # the agent released it: left to start
    assert not recovery.mend(snapshot, 1011.0)
    recovery, live, snapshot = ran_then("PENDING", unusable=frozenset({"v100-0"}),
                                        nodes=("v100-0",))
    recovery.history.starting("a", 1010.0)  # ... onto a node now down: held
    assert recovery.mend(snapshot, 1011.0)
    assert live.asked == [("hold", "a")]
    assert recovery.history.jobs["a"].asked_start is None
    recovery, live, snapshot = ran_then("PENDING", held=True)  # held: the policy's
    assert not recovery.mend(snapshot, 1011.0)


def test_a_released_job_slurm_does_not_start_is_held_again() -> None:
    # The agent released job a onto v100-0 at 1010. Slurm counts v100-0's GPUs 2-3 used
    # for no job from 1011 on (after a node's slurmd died and came back, Slurm then
    # starts nothing there): once that lasted PHANTOM_REPORT_S (10 s), at 1021, the job
    # is held for the policy to place elsewhere. Elsewhere, a released job still pending
    # after RELEASE_PATIENCE_S (30 s) is held too.
    from hetsched.slurm.recovery import RELEASE_PATIENCE_S

    recovery, live, snapshot = ran_then("PENDING", nodes=("v100-0",))
    recovery.history.starting("a", 1010.0)
    stuck = Snapshot(CLUSTER, snapshot.jobs, frozenset(), phantom=frozenset(
        {"v100-0/2", "v100-0/3"}))
    assert not recovery.mend(stuck, 1011.0)
    assert not recovery.mend(stuck, 1020.0)
    assert recovery.mend(stuck, 1021.0)
    assert live.asked == [("hold", "a")]
    recovery, live, snapshot = ran_then("PENDING", nodes=("v100-0",))
    recovery.history.starting("a", 1010.0)
    assert not recovery.mend(snapshot, 1010.0 + RELEASE_PATIENCE_S)
    assert recovery.mend(snapshot, 1010.5 + RELEASE_PATIENCE_S)
