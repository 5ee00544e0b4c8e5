"""The training emulator: the program a job ``hetsched slurm submit`` made runs under Slurm
(docs/slurm.md, "The training emulator")::

    python -m hetsched.slurm.emulator --checkpoints DIR [--throughput FILE]
                                      [--launched UNIX_S] [--job-id N]

It reads its job's metadata (:mod:`hetsched.slurm.metadata`) from its own record in
``squeue --json`` (the comment) together with the GPUs Slurm gave it (``nodes`` and
``gres_detail``, ``gpu:k80:2(IDX:0-1)`` per node: the type of each GPU), and advances
its steps at the measured throughput of that GPU type, gang size and placement (the
truth ``hetsched replay`` runs jobs at: the same ``--throughput`` file, or the built-in
catalogue) times the speedup X. A gang over nodes of several types runs at the pace of
its slowest type. Its step count goes to ``DIR/JOBID.json``, the report a real job
writes too (:mod:`hetsched.job`, whose records and writer it uses), every
:data:`CHECKPOINT_EVERY_S` wall seconds, on SIGTERM (Slurm's requeue or cancel: then it
exits) and at the end. A run after an earlier one (a requeued job keeps its id)
makes no progress for the restart penalty / X, then resumes from the checkpoint.

Progress counts from ``--launched``, the time its batch script started (``date
+%s.%N``), not from the end of Python's imports (about half a second), as a replay
counts a job's run from its start.

Exit codes: 0 the job's steps reached its work; 2 bad input (metadata, arguments,
throughput file, checkpoint); 3 it cannot run on the GPUs it was given (a GPU type or
gang size it may not use, or no measured throughput there: the run is recorded as
``refused``, and the agent places the job anew); 1 Slurm did not answer; 143 (130)
stopped by SIGTERM (SIGINT), its progress written.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # Run as a job: block the stop signals before anything starts a thread (numpy's BLAS
    # pool, on the next import). A thread inherits its mask; one with SIGTERM unblocked
    # takes a requeue's SIGTERM whenever the main thread is not waiting for it, and its
    # default action ends the job without its checkpoint (docs/slurm.md, "The training
    # emulator"). main() blocks them again for callers that import it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})

from hetsched.core.errors import InputError
from hetsched.core.ranges import in_range
from hetsched.core.records import Job
from hetsched.core.throughput import Placement, ThroughputModel
from hetsched.job import WORK_VARIABLE, Run
from hetsched.slurm.checkpoint import Checkpoint, RunRecord, checkpoint_path, read_checkpoint
from hetsched.slurm.control import expand_nodes
from hetsched.slurm.metadata import HIDDEN_WORK, JobMeta
from hetsched.slurm.processes import program

log = logging.getLogger(__name__)

#: Wall seconds between two checkpoints of a running job.
CHECKPOINT_EVERY_S = 0.5
#: Exit codes (module docstring).
EXIT_DONE, EXIT_SLURM, EXIT_INPUT, EXIT_CANNOT_RUN = 0, 1, 2, 3
#: How long (s) the emulator keeps asking slurmctld for its own record.
SLURM_PATIENCE_S = 60.0
_STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
#: One node's GPUs in squeue's gres_detail: gpu:TYPE:COUNT(IDX:0-1,3), TYPE optional.
_GRES = re.compile(r"gpu(?::(?P<type>[^:(,]+))?:(?P<count>\d+)\(IDX:(?P<index>[^)]*)\)")
#: A node named TYPE-INDEX (a local cluster's names).
_NODE_NAME = re.compile(r"^(?P<type>.+)-\d+$")


@dataclass(frozen=True)
class Pace:
    """A run's progress over wall time: launched at ``start`` (Unix s), making progress
    from ``resume`` at ``rate`` steps per wall second, from ``steps_start`` to
    ``work``."""

    start: float
    resume: float
    rate: float
    steps_start: float
    work: float

    def steps_at(self, unix_s: float) -> float:
        """The steps done at Unix time ``unix_s`` (the work, exactly, from :attr:`end` on)."""
        if unix_s >= self.end:
            return self.work
        return min(self.work, self.steps_start + self.rate * max(0.0, unix_s - self.resume))

    @property
    def end(self) -> float:
        """The Unix time (s) the steps reach the work."""
        return self.resume + max(0.0, self.work - self.steps_start) / self.rate


def plan_run(start: float, steps_start: float, work: float, throughput: float,
             speedup: float, restart_penalty_s: float = 0.0) -> Pace:
    """The pace of a run launched at Unix time ``start`` with ``steps_start`` of ``work``
    steps done, at ``throughput`` steps per trace second and ``speedup`` trace seconds
    per wall second, after a restart penalty of ``restart_penalty_s`` trace seconds (0
    for a first run): it resumes at ``start + penalty / speedup`` and ends
    ``(work - steps_start) / (throughput * speedup)`` wall seconds later."""
    if throughput <= 0 or speedup <= 0:
        raise ValueError(f"no progress at throughput {throughput} and speedup {speedup}")
    return Pace(start, start + restart_penalty_s / speedup, throughput * speedup,
                steps_start, work)


@dataclass(frozen=True)
class SlurmAllocation:
    """The GPUs Slurm gave a job: per GPU its id (``NODE/INDEX``) and type, in node
    order."""

    nodes: tuple[str, ...]
    gpus: tuple[str, ...]
    gpu_types: tuple[str, ...]

    @property
    def placement(self) -> Placement:
        """``packed`` on one node, ``spread`` over several."""
        return Placement.PACKED if len(self.nodes) <= 1 else Placement.SPREAD

    @property
    def types(self) -> tuple[str, ...]:
        """The distinct GPU types, sorted."""
        return tuple(sorted(set(self.gpu_types)))


def _indices(text: str, count: int) -> list[int]:
    """``0-1,3`` -> [0, 1, 3]; ``count`` indices from 0 when Slurm gives none (N/A)."""
    found: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.strip().isdigit():
            return list(range(count))
        found.extend(range(int(low), int(high or low) + 1))
    return found


def allocation_of(nodes: Sequence[str], gres_detail: Sequence[str]) -> SlurmAllocation:
    """The allocation of a job on ``nodes`` (expanded, in Slurm's order) with
    ``gres_detail`` (squeue's, one entry per node in the same order). An untyped entry
    (``gpu:2(IDX:0-1)``) takes its type from a node named ``TYPE-INDEX``."""
    if len(gres_detail) != len(nodes):
        raise InputError("Slurm's GPUs and nodes do not match", path="gres_detail",
                         value=list(gres_detail), expected=f"one entry per node of {nodes}")
    gpus, types = [], []
    for node, detail in zip(nodes, gres_detail, strict=True):
        match = _GRES.search(detail)
        if match is None:
            raise InputError("no GPUs in Slurm's gres_detail", path="gres_detail",
                             value=detail, expected="gpu:TYPE:N(IDX:...)")
        gpu_type = match["type"] or _type_of_node(node)
        for index in _indices(match["index"], int(match["count"])):
            gpus.append(f"{node}/{index}")
            types.append(gpu_type)
    return SlurmAllocation(tuple(nodes), tuple(gpus), tuple(types))


def _type_of_node(node: str) -> str:
    match = _NODE_NAME.match(node)
    if match is None:
        raise InputError("untyped GPUs on a node not named TYPE-INDEX", path="nodes",
                         value=node, expected="typed GRES (gpu:TYPE:N) or a node TYPE-N")
    return match["type"]


def gang_speed(job: Job, truth: ThroughputModel, allocation: SlurmAllocation
               ) -> tuple[float, str, str]:
    """``(steps per trace s, the GPU type that sets the pace, problem)``: the measured
    throughput of the job's type on the allocation's GPUs (the slowest type's, for a
    gang of several), or 0 and why it cannot run there."""
    count = len(allocation.gpus)
    if count not in job.gpu_counts:
        return 0.0, allocation.types[0], (f"{count} GPUs; it may run on "
                                          f"{list(job.gpu_counts)}")
    refused = [t for t in allocation.types if not job.may_use(t)]
    if refused:
        return 0.0, refused[0], f"GPU type {refused[0]} is not one of its allowed types"
    speeds = {t: truth.throughput(job.job_type, t, count, allocation.placement)
              for t in allocation.types}
    slowest = min(speeds, key=lambda t: speeds[t])
    if speeds[slowest] <= 0:
        return 0.0, slowest, (f"no measured throughput of {job.job_type} on {count} x "
                              f"{slowest} ({allocation.placement})")
    return speeds[slowest], slowest, ""


def truth_model(throughput_path: Path | None, gpu_types: Sequence[str]) -> ThroughputModel:
    """The measured throughput ``hetsched replay`` runs jobs at: the profile or model
    file's (as :func:`hetsched.files.replay_inputs.throughput_pair` reads it), or the
    built-in catalogue on ``gpu_types``."""
    from hetsched.files.generate import catalogue_table
    from hetsched.files.replay_inputs import measured_throughput

    if throughput_path is not None:
        return measured_throughput(throughput_path)
    return catalogue_table(list(gpu_types))


def slurm_record(job_id: str, environment: Mapping[str, str] | None = None,
                 patience_s: float = SLURM_PATIENCE_S) -> dict[str, Any]:
    """Job ``job_id``'s record in ``squeue --json`` (Slurm 22.05 lists every job whatever
    ``--jobs`` says); asks again, backing off, for ``patience_s`` seconds while slurmctld
    does not answer. Raises RuntimeError after that."""
    delay, deadline = 0.2, time.monotonic() + patience_s
    while True:
        try:
            done = subprocess.run([program("squeue") or "squeue", "--json"], env=environment,
                                  capture_output=True, text=True, timeout=30, check=True)
            for record in json.loads(done.stdout).get("jobs", []):
                if str(record.get("job_id")) == job_id:
                    return dict(record)
            problem = f"job {job_id} is not in squeue --json"
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            problem = f"squeue --json failed: {exc}"
        if time.monotonic() > deadline:
            raise RuntimeError(problem)
        log.warning("%s; asking again in %.1f s", problem, delay)
        time.sleep(delay)
        delay = min(2 * delay, 5.0)


class Emulator:
    """One run of a job: writes its checkpoint as it goes (:meth:`run`)."""

    def __init__(self, meta: JobMeta, slurm_job_id: str, allocation: SlurmAllocation,
                 truth: ThroughputModel, path: Path, launched: float,
                 comment: str = "") -> None:
        self.meta, self.allocation, self.path, self.launched = meta, allocation, path, launched
        self.checkpoint = read_checkpoint(path) or Checkpoint(
            slurm_job_id, meta.job.id, meta.job.work, comment or meta.to_comment())
        self.speed, self.gpu_type, self.problem = gang_speed(meta.job, truth, allocation)
        self.restart_count = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)

    def _reporter(self, pace: Pace | None) -> Run:
        """This run's report (:mod:`hetsched.job`): the GPUs and speed it runs at, from
        the checkpoint's steps, resuming after the penalty; written at every call (the
        run paces its own writes)."""
        allocation, steps = self.allocation, self.checkpoint.steps
        record = RunRecord(self.launched, pace.resume if pace else self.launched,
                           self.launched, allocation.nodes, allocation.gpus, self.gpu_type,
                           allocation.types, len(allocation.gpus), str(allocation.placement),
                           self.speed, steps, steps, "running", self.restart_count)
        return Run(self.path, self.checkpoint, record, every_s=0.0)

    def run(self, wait: Any = signal.sigtimedwait) -> int:
        """Advance to the end, or until SIGTERM or SIGINT (blocked by the caller, taken
        with ``wait(signals, timeout)``); the exit code."""
        job, meta = self.meta.job, self.meta
        if self.problem:
            log.error("job %s cannot run on %s: %s", job.id, ",".join(self.allocation.gpus),
                      self.problem)
            self._reporter(None).refused(self.problem)
            return EXIT_CANNOT_RUN
        if self.checkpoint.done:
            log.warning("job %s already did its %g steps", job.id, job.work)
            self._reporter(None).completed(self.checkpoint.steps, at=self.launched,
                                           note="started after it was done")
            return EXIT_DONE
        penalty = meta.restart_penalty_s if self.checkpoint.runs else 0.0
        pace = plan_run(self.launched, self.checkpoint.steps, job.work, self.speed,
                        meta.speedup, penalty)
        log.info("job %s: %s, %d x %s (%s) at %.4g steps/s x %g, from step %.6g of %.6g, "
                 "penalty %g s; ends at %.3f (in %.2f s)", job.id, ",".join(
                     self.allocation.gpus), len(self.allocation.gpus), self.gpu_type,
                 self.allocation.placement, self.speed, meta.speedup, pace.steps_start,
                 job.work, penalty, pace.end, pace.end - time.time())
        report = self._reporter(pace)
        while True:
            now = time.time()
            if now >= pace.end:
                report.completed(pace.work, at=pace.end)
                log.info("job %s completed its %g steps", job.id, job.work)
                return EXIT_DONE
            report.report(pace.steps_at(now), at=now)
            received = wait(_STOP_SIGNALS, min(CHECKPOINT_EVERY_S, pace.end - now))
            now = time.time()
            if received is not None and now < pace.end:  # (at the end: completed)
                name = signal.Signals(received.si_signo).name
                report.stopped(pace.steps_at(now), note=name, at=now)
                log.info("job %s stopped by %s at step %.6g", job.id, name,
                         pace.steps_at(now))
                return 128 + int(received.si_signo)


def hidden_work_of(meta: JobMeta, environment: Mapping[str, str]) -> JobMeta:
    """``meta`` with its work, when its comment leaves it out (``work_hidden``): the job
    knows its own steps (``HETSCHED_WORK``, which ``submit --hide-work`` exports in its
    batch script), the agent does not. An InputError without them."""
    if not meta.work_hidden:
        return meta
    text = environment.get(WORK_VARIABLE, "")
    try:
        work = float(text)
    except ValueError:
        work = math.nan
    if not in_range(work, 0.0, HIDDEN_WORK, strict_low=True):
        raise InputError("a job whose comment gives no work needs its steps",
                         path=WORK_VARIABLE, value=text,
                         expected="the job's steps, > 0 (submit --hide-work exports them)")
    return dataclasses.replace(meta, job=dataclasses.replace(meta.job, work=work))


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m hetsched.slurm.emulator",
                                     description="hetsched's training emulator (a job of "
                                     "hetsched slurm submit; docs/slurm.md)")
    parser.add_argument("--checkpoints", type=Path, required=True,
                        help="Folder of the checkpoints, JOBID.json.")
    parser.add_argument("--throughput", type=Path, default=None,
                        help="The replay's --throughput file (default: the catalogue).")
    parser.add_argument("--launched", type=float, default=None,
                        help="Unix time the batch script started (default: now).")
    parser.add_argument("--job-id", default=os.environ.get("SLURM_JOB_ID"),
                        help="The Slurm job (default: $SLURM_JOB_ID).")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the emulator (module docstring); the exit code."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # taken in Emulator.run
    arguments = _arguments(argv)
    launched = arguments.launched if arguments.launched is not None else time.time()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s hetsched emulator: %(message)s")
    if not arguments.job_id:
        log.error("no job id: not run by Slurm (SLURM_JOB_ID) and no --job-id")
        return EXIT_INPUT
    job_id = str(arguments.job_id)
    try:
        record = slurm_record(job_id)
        comment = str(record.get("comment") or "")
        meta = hidden_work_of(JobMeta.from_comment(comment), os.environ)
        allocation = allocation_of(expand_nodes(str(record.get("nodes") or "")),
                                   list(record.get("gres_detail") or []))
        truth = truth_model(arguments.throughput, allocation.types)
        emulator = Emulator(meta, job_id, allocation, truth,
                            checkpoint_path(arguments.checkpoints, job_id), launched,
                            comment)
    except InputError as error:
        log.error("error: %s", error)
        return EXIT_INPUT
    except (RuntimeError, subprocess.SubprocessError) as error:
        log.error("Slurm did not answer: %s", error)
        return EXIT_SLURM
    return emulator.run()


if __name__ == "__main__":
    sys.exit(main())
