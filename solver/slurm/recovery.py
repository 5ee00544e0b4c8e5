"""What the agent does about faults, each reading, before it records what it saw
(docs/slurm.md, "Faults"): the rules trusted schedulers follow, none of which needs
memory beyond the agent's journal.

- **A job whose node failed runs again.** A managed job that ended NODE_FAIL or
  BOOT_FAIL, or FAILED while one of its nodes was down or not responding (now or within
  :data:`RECENT_S`) or while its report says its last run stopped cleanly (Slurm failed
  to launch it again), is requeued held (``scontrol requeuehold``, which Slurm allows on an
  ended job it still lists): the policy starts it again, and it resumes from its
  checkpoint. So is a job that FAILED whose report says it cannot run on the GPUs it was
  given (run state ``refused``: a GPU type or gang size it may not use; the policy, which
  learns its speed there as 0 with ``--learn``, places it elsewhere). At most
  :data:`MAX_RETRIES` times a job; a job that failed on healthy nodes ends FAILED (its
  own error: run again it would fail again). A COMPLETED job is never
  requeued (:meth:`~hetsched.slurm.live.SlurmCluster.retry` refuses it, as
  :meth:`~hetsched.slurm.live.SlurmCluster.preempt` refuses a job that is not running).
- **The policy decides where a job goes.** A managed job pending and not held that this
  agent did not release (Slurm requeued it after its node failed, an operator ran
  ``scontrol requeue`` or ``release``, an agent before this one released it), or one it
  released onto a node that is now down or drained, or whose GPUs Slurm counts used for
  no job, or that Slurm has not started within :data:`RELEASE_PATIENCE_S`, is held again
  (``scontrol hold``) and waits for the policy. Slurm would otherwise start it on its
  pinned nodes whenever they come back, or never, while other GPUs idle.
- **GPUs Slurm counts used that no job holds** (seen after a node's slurmd died and came
  back) are busy to the agent (:attr:`~hetsched.slurm.state.Snapshot.phantom`: Slurm
  starts nothing there) and reported once they persist :data:`PHANTOM_REPORT_S`.

Every action is logged once, with why, and counted in the run's summary
(:meth:`Recovery.figures`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from hetsched.slurm.control import SlurmRefusedError
from hetsched.slurm.history import HALF_SECOND, History, Seen
from hetsched.slurm.live import LiveCluster
from hetsched.slurm.state import SlurmJob, Snapshot

log = logging.getLogger(__name__)

#: Wall seconds a node counts as having failed after it was last seen down or not
#: responding: a job FAILED on it within that time failed with it.
RECENT_S = 300.0
#: Requeues after node failures, at most, of one job.
MAX_RETRIES = 3
#: Wall seconds GPUs stay used with no job holding them before they are reported.
PHANTOM_REPORT_S = 10.0
#: Wall seconds a job this agent released may wait for Slurm to start it before it is
#: held again and placed anew (Slurm starts one within a second or two).
RELEASE_PATIENCE_S = 30.0
#: Wall seconds a moved job may take to come back pending before its move is dropped.
MOVE_PATIENCE_S = 30.0
#: Slurm's end states of a run its node took down.
NODE_LOST = frozenset({"NODE_FAIL", "BOOT_FAIL"})


def _nodes_of(seen: Seen) -> set[str]:
    """The nodes of a job's last run, as the agent saw it."""
    return {gpu.split("/", 1)[0] for gpu in seen.runs[-1].gpus} if seen.runs else set()


@dataclass
class Recovery:
    """The fault rules (module docstring) for one agent: ``live`` acts, ``history`` is
    what the agent saw (its runs, what it released)."""

    live: LiveCluster
    history: History
    #: the last reported run's state of each job (the agent's reports, if it reads any)
    last_run: Mapping[str, str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    _down_at: dict[str, float] = field(default_factory=dict)
    _retries: Counter[str] = field(default_factory=Counter)
    _phantom_since: dict[str, float] = field(default_factory=dict)
    _told: set[tuple[str, ...]] = field(default_factory=set)

    def mend(self, snapshot: Snapshot, unix: float) -> bool:
        """Apply the rules to one reading; whether anything was changed (the agent then
        reads the cluster again before recording or deciding)."""
        for node in snapshot.unusable_nodes:
            self._down_at[node] = unix
        self._phantoms(snapshot, unix)
        acted = False
        for job_id, job in snapshot.jobs.items():
            seen = self.history.jobs.get(job_id)
            if seen is not None and seen.slurm_id != job.slurm_id:
                seen = None  # submitted again: a job this agent has not seen yet
            if job.ended:
                acted |= self._node_failed(job, seen, snapshot, unix)
            elif job.state == "PENDING" and not job.held:
                acted |= self._hold_unasked(job, seen, snapshot, unix)
        return acted

    def _node_failed(self, job: SlurmJob, seen: Seen | None, snapshot: Snapshot,
                     unix: float) -> bool:
        if seen is None or seen.ended or job.state == "COMPLETED":
            return False
        nodes = _nodes_of(seen)
        failed = sorted(n for n in nodes if n in snapshot.unusable_nodes
                        or unix - self._down_at.get(n, -RECENT_S - 1) <= RECENT_S)
        # FAILED, yet its last run stopped cleanly: Slurm failed to launch it again
        # (a release within the second of a requeue: "credential revoked")
        unlaunched = job.state == "FAILED" and self.last_run.get(job.job_id) == "stopped"
        # FAILED, its report saying it cannot run on those GPUs: another place may do
        refused = job.state == "FAILED" and self.last_run.get(job.job_id) == "refused"
        if job.state not in NODE_LOST and not (job.state == "FAILED" and
                                               (failed or unlaunched or refused)):
            return False
        if self._retries[job.job_id] >= MAX_RETRIES:
            self._once(("retries", job.job_id), "job %s (Slurm %d) ended %s after %d "
                       "requeues for failed nodes: left %s", job.job_id, job.slurm_id,
                       job.state, MAX_RETRIES, job.state)
            return False
        try:
            self.live.retry(job.job_id)
        except SlurmRefusedError as exc:
            log.warning("job %s (Slurm %d) ended %s: not requeued (%s)", job.job_id,
                        job.slurm_id, job.state, exc)
            return False
        self._retries[job.job_id] += 1
        self.counts["requeued_after_refusal" if refused and not failed
                    else "requeued_after_node_failure"] += 1
        end = job.end_unix + HALF_SECOND if job.end_unix is not None else unix
        self.history.preempting(job.job_id, end)  # its run ended there, not finished
        why = "down" if failed else "launch failed after a clean stop" if unlaunched \
            else "the job cannot run on them (its report)" if refused else "failed"
        log.warning("job %s (Slurm %d) ended %s (nodes %s: %s): requeued held, to resume "
                    "from its checkpoint where the policy starts it", job.job_id,
                    job.slurm_id, job.state, ",".join(sorted(nodes)) or "?", why)
        return True

    def _hold_unasked(self, job: SlurmJob, seen: Seen | None, snapshot: Snapshot,
                      unix: float) -> bool:
        asked = seen.asked_start if seen is not None else None
        if asked is None:
            why = f"released or requeued by Slurm or someone else (restarts {job.restarts})"
        elif lost := sorted(set(job.nodes) & snapshot.unusable_nodes):
            why = f"released onto {','.join(lost)}, now down or drained"
        elif stuck := sorted(set(job.nodes) & self._phantom_nodes(unix)):
            why = f"released onto {','.join(stuck)}, whose GPUs Slurm counts used for no job"
        elif unix - asked > RELEASE_PATIENCE_S:
            why = f"released {unix - asked:.0f} s ago and not started by Slurm"
        else:
            return False
        try:
            self.live.hold(job.job_id)
        except SlurmRefusedError as exc:  # started meanwhile: it runs; the next reading
            log.info("job %s not held again: %s", job.job_id, exc)
            return False
        if seen is not None:
            seen.asked_start = None
        self.counts["held_again"] += 1
        log.warning("job %s (Slurm %d) %s: held, for the policy to decide where it runs",
                    job.job_id, job.slurm_id, why)
        return True

    def _phantom_nodes(self, unix: float) -> set[str]:
        """Nodes with GPUs counted used for no job for :data:`PHANTOM_REPORT_S` or more."""
        return {gpu.split("/", 1)[0] for gpu, since in self._phantom_since.items()
                if unix - since >= PHANTOM_REPORT_S}

    def _phantoms(self, snapshot: Snapshot, unix: float) -> None:
        for gpu in list(self._phantom_since):
            if gpu not in snapshot.phantom:
                del self._phantom_since[gpu]
                self._told.discard(("phantom", gpu))
        for gpu in snapshot.phantom:
            self._phantom_since.setdefault(gpu, unix)
        lasting = sorted(g for g, since in self._phantom_since.items()
                         if unix - since >= PHANTOM_REPORT_S and ("phantom", g) not in self._told)
        if lasting:
            self._told.update(("phantom", g) for g in lasting)
            self.counts["phantom_gpus_reported"] += len(lasting)
            log.warning("GPUs %s: Slurm counts them used (sinfo's gres_used) but no job "
                        "holds them, for %.0f s: Slurm starts nothing there, so neither "
                        "does the agent (docs/slurm.md, \"Faults\": restart the node's "
                        "slurmd to clear them)", ", ".join(lasting), PHANTOM_REPORT_S)

    def stale_move(self, job: SlurmJob | None, snapshot: Snapshot, asked: float | None,
                   unix: float) -> str:
        """Why a move (a job requeued to start elsewhere at once) should be dropped, the
        policy deciding again: its requeue waits on a node that is down, or it has not
        come back pending within :data:`MOVE_PATIENCE_S`; "" to keep waiting."""
        if job is None:
            return ""
        if set(job.nodes) & snapshot.unusable_nodes:
            return "its requeue waits on a node that is down"
        if asked is not None and unix - asked > MOVE_PATIENCE_S:
            return f"not requeued after {MOVE_PATIENCE_S:g} s"
        return ""

    def _once(self, key: tuple[str, ...], message: str, *args: object) -> None:
        if key not in self._told:
            self._told.add(key)
            log.warning(message, *args)

    def figures(self) -> dict[str, int]:
        """The fault actions of the run, for its summary."""
        return {name: self.counts[name] for name in
                ("requeued_after_node_failure", "requeued_after_refusal", "held_again",
                 "phantom_gpus_reported")}
