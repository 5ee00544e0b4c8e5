"""The boundary between the agent and a live cluster (:class:`LiveCluster`) and its Slurm
binding (:class:`SlurmCluster`): read the cluster, start a held job on chosen nodes,
preempt a running one, hand GPUs over, and the fault operations (hold a job Slurm or
someone else released or requeued, requeue a job whose node failed) the agent's
:mod:`~hetsched.slurm.recovery` uses."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hetsched.slurm.control import SlurmControl, SlurmRefusedError
from hetsched.slurm.state import ENDED, Snapshot, read_snapshot

log = logging.getLogger(__name__)


class LiveCluster(Protocol):
    """The boundary between a policy and a live cluster: read its state, apply a
    decision. :class:`SlurmCluster` is the Slurm binding; a Kubernetes one (Volcano or
    kube-batch PodGroups pinned with node affinity on GPU product labels) would be a
    second implementation of the same methods."""

    def read(self) -> Snapshot:
        """The cluster now: its GPU nodes, the managed jobs, the busy GPUs."""
        ...

    def start(self, job: str, nodes: Sequence[str], gpus: Sequence[int]) -> None:
        """Run the held job ``job`` (hetsched id) on ``nodes``, ``gpus[i]`` GPUs on the
        i-th."""
        ...

    def preempt(self, job: str) -> None:
        """Stop the running job ``job`` and hold it until it is started again."""
        ...

    def handed_over(self, jobs: Sequence[str]) -> None:
        """The agent has decided what follows on the GPUs of ``jobs`` (completing, or
        just preempted): the cluster may pass them on now."""
        ...

    def hold(self, job: str) -> None:
        """Hold the pending job ``job`` (released, or requeued by someone else) so the
        policy decides again where it runs."""
        ...

    def retry(self, job: str) -> None:
        """Requeue, held, the job ``job`` that ended because its node failed, to start
        it again from its checkpoint."""
        ...


@dataclass
class SlurmCluster:
    """:class:`LiveCluster` on Slurm: the jobs of ``partition`` (all when ``None``)."""

    control: SlurmControl
    partition: str | None = None
    #: Node or GPU type names in the cluster's order (:func:`read_cluster`).
    order: Sequence[str] = ()
    _ids: dict[str, int] = field(default_factory=dict)
    _requeued: set[str] = field(default_factory=set)
    _released: set[str] = field(default_factory=set)
    _reported: set[int] = field(default_factory=set)
    #: When (Unix s) this agent requeued each job: a job released in a later second needs
    #: no begin time (see :meth:`start`).
    _requeued_at: dict[str, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    #: Where the nodes' epilogs wait for :meth:`handed_over`'s files (``None``: no such
    #: epilog); a folder the agent and the nodes share (docs/slurm.md, "Handing GPUs over").
    handover: Path | None = None
    _holding: set[int] = field(default_factory=set)

    def read(self) -> Snapshot:
        """``sinfo --json`` and ``squeue --json`` as a :class:`Snapshot`."""
        nodes = self.control.nodes(self.partition)
        jobs = self.control.jobs(self.partition)
        snapshot = read_snapshot(nodes, jobs, reported=self._reported, order=self.order)
        self._holding = {job.slurm_id for job in snapshot.jobs.values()
                         if job.state in ("RUNNING", "COMPLETING")}
        self._ids = {job_id: job.slurm_id for job_id, job in snapshot.jobs.items()}
        self._requeued = {job_id for job_id, job in snapshot.jobs.items() if job.restarts}
        self._released = {job_id for job_id, job in snapshot.jobs.items() if job.released}
        return snapshot

    def start(self, job: str, nodes: Sequence[str], gpus: Sequence[int]) -> None:
        """Pin and release (``scontrol update ... NodeList= TresPerNode=`` or, uneven,
        ``TresPerJob=``; ``release``).
        A requeued job released within the wall second of its requeue (or requeued by
        another agent: when is unknown) gets a begin time of the next second: Slurm
        kills a job that starts in the second its credential was revoked. Released in a
        later second, it begins now: Slurm's next scheduling pass, up to a second
        sooner."""
        requeued_at = self._requeued_at.get(job)
        same_second = requeued_at is None or int(self.clock()) <= int(requeued_at)
        self.control.start(self._ids[job], nodes, gpus, requeued=job in self._requeued,
                           same_second=same_second)

    def preempt(self, job: str) -> None:
        """``scontrol requeuehold``; for a job released but not started when last read,
        ``scontrol hold`` and then ``requeuehold`` all the same: Slurm may have started it
        since, and ``hold`` leaves a running job running (exit 0), its GPUs taken while
        the agent would give them to another job. ``requeuehold`` of a job still pending
        is refused ("Job is pending execution"), which is then the expected answer."""
        if job in self._released:
            self.control.hold(self._ids[job])
            try:
                self.control.preempt(self._ids[job])
            except SlurmRefusedError as exc:
                if "pending execution" not in str(exc):
                    raise
                return
            log.info("job %s had started before it was held: requeued", job)
        else:
            state = self.control.job_state(self._ids[job])
            if state not in ("RUNNING", "CONFIGURING"):
                # Ended since the reading (a job completing runs its epilog): requeued,
                # a finished job would run again.
                raise SlurmRefusedError(f"job {job} is {state or 'gone'}, not running")
            self.control.preempt(self._ids[job])
        self._requeued_at[job] = self.clock()

    def hold(self, job: str) -> None:
        """``scontrol hold``. A job held here was released or requeued by someone else,
        when is unknown: taken as now, so that a release within this wall second begins
        in the next (:meth:`start`)."""
        self.control.hold(self._ids[job])
        self._requeued_at[job] = self.clock()

    def retry(self, job: str) -> None:
        """``scontrol requeuehold`` of a job that ended (Slurm keeps it for ``MinJobAge``
        and may requeue it); refused unless it ended otherwise than COMPLETED."""
        state = self.control.job_state(self._ids[job])
        if state not in ENDED or state == "COMPLETED":
            raise SlurmRefusedError(f"job {job} is {state or 'gone'}: not requeued")
        self.control.preempt(self._ids[job])
        self._requeued_at[job] = self.clock()

    def handed_over(self, jobs: Sequence[str]) -> None:
        """Write ``HANDOVER/SLURM_ID`` for each job, which ends its node's epilog (it
        removes the file); remove the files of jobs neither running nor completing (their
        epilog ended without them)."""
        if self.handover is None:
            return
        try:
            for job in jobs:
                (self.handover / str(self._ids[job])).touch()
            for path in self.handover.iterdir():
                if not (path.name.isdigit() and int(path.name) in self._holding):
                    path.unlink(missing_ok=True)
        except OSError as exc:  # the epilog then waits its longest; nothing else changes
            log.warning("cannot write the hand-over files in %s: %s", self.handover, exc)
