"""Managed jobs that can never run (:class:`NeverRuns`): a job whose type has no positive
throughput in the agent's model on any GPU type of the cluster (the usual cause: `slurm
run` reads throughputs from another source than `slurm submit` did), a gang larger than
any GPU type's total, GPU types the cluster lacks. The agent says so once per job, with
why, leaves the job held and out of every decision (so that one such job neither stops
the policy from starting the others nor takes the outputs down), and the checker of its
outputs leaves it out too."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from hetsched.core.errors import InputError
from hetsched.core.records import Cluster, Instance, Job
from hetsched.core.throughput import ThroughputModel

__all__ = ["NeverRuns", "why_never_runs"]

log = logging.getLogger(__name__)


def why_never_runs(job: Job, cluster: Cluster, model: ThroughputModel) -> str:
    """Why ``job`` can never run on ``cluster`` under ``model`` ("" if it can): the
    problem an instance of it alone reports."""
    try:
        Instance(cluster, (job,), model)
    except InputError as error:
        return str(error).replace("jobs[0].", "", 1).replace("jobs[0]", "the job", 1)
    return ""


class NeverRuns:
    """The jobs found unable to run, each said once (see the module); ``what`` names the
    model in the message (``the agent's throughput model``)."""

    def __init__(self, model: ThroughputModel, what: str = "the agent's throughput model"
                 ) -> None:
        self.model = model
        self.what = what
        self._known: dict[tuple[str, int], str] = {}

    def runnable(self, jobs: Iterable[Job], cluster: Cluster,
                 checked_as: Callable[[Job], Job] | None = None) -> list[Job]:
        """``jobs`` but those that can never run on ``cluster`` (each logged the first
        time it is found so), each checked as ``checked_as`` has it (default: itself)."""
        kept = []
        for job in jobs:
            key = (job.id, len(cluster.gpus))
            why = self._known.get(key)
            if why is None:
                why = self._known[key] = why_never_runs(
                    checked_as(job) if checked_as is not None else job, cluster, self.model)
                if why:
                    log.warning("job %s can never run on this cluster under %s: %s; it stays "
                                "held, left out of every decision (is the throughput source "
                                "`slurm run` reads the one `slurm submit` read?)", job.id,
                                self.what, why)
            if not why:
                kept.append(job)
        return kept
